"""Artemis wildcard matching (words, ``*`` one word, ``#`` zero or more) and match precedence."""

from __future__ import annotations

import pytest

from artemis_py.config import AddressMatcher, WildcardSyntax, is_wildcard, matches, precedence_key

# (pattern, address, matches?) — the examples of Artemis's "Wildcard Syntax" chapter first.
TABLE = [
    ("news.europe.#", "news.europe", True),
    ("news.europe.#", "news.europe.sport", True),
    ("news.europe.#", "news.europe.politics", True),
    ("news.europe.#", "news.europe.politics.regional", True),
    ("news.europe.#", "news.usa", False),
    ("news.europe.#", "news.usa.sport", False),
    ("news.europe.#", "entertainment", False),
    ("news.*", "news.europe", True),
    ("news.*", "news.usa", True),
    ("news.*", "news.europe.sport", False),
    ("news.*", "news.usa.sport", False),
    ("news.*", "news.europe.politics.regional", False),
    ("news.*.sport", "news.europe.sport", True),
    ("news.*.sport", "news.usa.sport", True),
    ("news.*.sport", "news.europe.politics", False),
    # Beyond the manual.
    ("#", "", True),
    ("#", "anything", True),
    ("#", "a.b.c", True),
    ("news.europe.#", "news.europeans", False),  # words, not string prefixes
    ("news.*", "news", False),  # * is exactly one word
    ("*", "news", True),
    ("*", "news.europe", False),
    ("#.sport", "sport", True),
    ("#.sport", "news.usa.sport", True),
    ("#.sport", "news.usa.sports", False),
    ("news.#.sport", "news.sport", True),
    ("news.#.sport", "news.a.b.sport", True),
    ("news.#.sport", "news.a.b.spor", False),
    ("*.*", "a.b", True),
    ("*.*", "a", False),
    ("*.#", "a", True),
    ("news*", "newsx", False),  # a wildcard inside a word is a literal character
    ("news*", "news*", True),
    ("orders", "orders", True),
    ("orders", "orders.eu", False),
    ("a+b.(c)", "a+b.(c)", True),  # regex metacharacters are literal
    ("a.b", "aXb", False),  # the delimiter is not a regex dot
]


@pytest.mark.parametrize(("pattern", "address", "expected"), TABLE)
def test_matches(pattern: str, address: str, expected: bool) -> None:
    assert matches(pattern, address) is expected
    assert AddressMatcher(pattern).matches(address) is expected


def test_custom_syntax() -> None:
    syntax = WildcardSyntax(delimiter="/", any_words=">", single_word="+")
    assert matches("news/>", "news/europe/sport", syntax)
    assert matches("news/+/sport", "news/eu/sport", syntax)
    assert not matches("news/+", "news/eu/sport", syntax)
    assert not matches("news.#", "news.eu", syntax)  # '#' and '.' are plain characters here
    assert matches("news.#", "news.#", syntax)


def test_syntax_must_be_three_distinct_characters() -> None:
    with pytest.raises(ValueError, match="different"):
        WildcardSyntax(delimiter=".", any_words=".", single_word="*")
    with pytest.raises(ValueError, match="single characters"):
        WildcardSyntax(delimiter="::")


def test_is_wildcard() -> None:
    assert is_wildcard("a.#")
    assert is_wildcard("*.b")
    assert not is_wildcard("a.b")
    assert not is_wildcard("a*")


def test_matcher_equality_and_hash() -> None:
    assert AddressMatcher("a.#") == AddressMatcher("a.#")
    assert AddressMatcher("a.#") != AddressMatcher("a.*")
    assert len({AddressMatcher("a.#"), AddressMatcher("a.#")}) == 1


def _ordered(address: str, patterns: list[str]) -> list[str]:
    return sorted((p for p in patterns if matches(p, address)), key=precedence_key)


def test_precedence_exact_then_star_then_hash() -> None:
    patterns = ["#", "orders.#", "orders.*", "orders.eu", "*.eu", "orders.eu.#", "*.*", "other"]
    assert _ordered("orders.eu", patterns) == [
        "orders.eu",  # exact
        "orders.*",  # '*' patterns: literal first word beats '*' in first position
        "*.eu",
        "*.*",
        "orders.eu.#",  # '#' patterns: longest first
        "orders.#",
        "#",
    ]


def test_precedence_star_position_decides() -> None:
    assert _ordered("a.b.c", ["*.b.c", "a.*.c", "a.b.*"]) == ["a.b.*", "a.*.c", "*.b.c"]


def test_precedence_longer_hash_pattern_first() -> None:
    assert _ordered("a.b.c.d", ["#", "a.#", "a.b.c.#", "a.b.#"]) == ["a.b.c.#", "a.b.#", "a.#", "#"]
