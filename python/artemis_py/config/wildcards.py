"""Artemis address wildcards: matching and match precedence.

Theory of operation
-------------------
An address is a sequence of *words* separated by a delimiter (``.`` by default). In a pattern,
a word that is exactly ``*`` matches exactly one word, and a word that is exactly ``#`` matches
zero or more words (Artemis "Wildcard Syntax"). So ``news.europe.#`` matches ``news.europe``
and ``news.europe.sport.regional``; ``news.*`` matches ``news.usa`` but not ``news.usa.sport``;
``#`` matches everything. Wildcards only ever stand for whole words: ``news*`` is the literal
word ``news*``. The same rules serve address-settings, security-settings-like matching and
wildcard subscriptions, so the broker and cluster code use :class:`AddressMatcher` too.

Precedence (Artemis ``HierarchicalObjectRepository`` and its match comparator), most specific
first, used when several address-settings match one address:

1. the exact address (a pattern with no wildcard);
2. patterns without ``#`` before patterns with ``#``;
3. among patterns with ``#``: the longer pattern first;
4. among patterns with only ``*``: compare word by word; at the first position where one has
   a literal word and the other ``*``, the literal one wins;
5. remaining ties: the shorter pattern, then alphabetical (only for determinism).

A match is compiled once into a regular expression over the delimiter-prefixed address
(``".news.europe"``): a literal word becomes ``\\.word``, ``*`` becomes ``\\.[^.]*`` and ``#``
becomes ``(?:\\.[^.]*)*``. Because every repetition starts with the delimiter and word parts
cannot contain it, the expression never backtracks badly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "DEFAULT_WILDCARDS",
    "AddressMatcher",
    "WildcardSyntax",
    "is_wildcard",
    "malformed",
    "matches",
    "precedence_key",
]


@dataclass(frozen=True, slots=True)
class WildcardSyntax:
    """The three special characters (``<wildcard-addresses>`` in broker.xml)."""

    delimiter: str = "."
    any_words: str = "#"
    single_word: str = "*"

    def __post_init__(self) -> None:
        chars = (self.delimiter, self.any_words, self.single_word)
        if any(len(c) != 1 for c in chars):
            raise ValueError("delimiter, any-words and single-word must be single characters")
        if len(set(chars)) != 3:
            raise ValueError("delimiter, any-words and single-word must be different characters")

    def words(self, address: str) -> list[str]:
        return address.split(self.delimiter)


DEFAULT_WILDCARDS = WildcardSyntax()


def is_wildcard(pattern: str, syntax: WildcardSyntax = DEFAULT_WILDCARDS) -> bool:
    """True when ``pattern`` has a ``*`` or ``#`` word (and so can match other addresses)."""
    return any(w in (syntax.any_words, syntax.single_word) for w in syntax.words(pattern))


def malformed(pattern: str, syntax: WildcardSyntax = DEFAULT_WILDCARDS) -> str | None:
    """What is wrong with ``pattern`` when a wildcard character is part of a word (Artemis
    takes ``news*`` for a wildcard that can match nothing), else None."""
    words = syntax.words(pattern)
    for i, word in enumerate(words):
        if word in (syntax.any_words, syntax.single_word):
            continue
        for wildcard in (syntax.any_words, syntax.single_word):
            if wildcard in word:
                fixed = word.replace(wildcard, "")
                better = syntax.delimiter.join([*words[:i], fixed, wildcard, *words[i + 1 :]])
                return f"'{wildcard}' must be a whole word in '{pattern}'; did you mean '{better}'?"
    return None


class AddressMatcher:
    """A compiled wildcard pattern. Immutable and hashable (by pattern and syntax)."""

    __slots__ = ("_regex", "is_wildcard", "pattern", "syntax")

    def __init__(self, pattern: str, syntax: WildcardSyntax = DEFAULT_WILDCARDS) -> None:
        self.pattern = pattern
        self.syntax = syntax
        words = syntax.words(pattern)
        self.is_wildcard = any(w in (syntax.any_words, syntax.single_word) for w in words)
        delim = re.escape(syntax.delimiter)
        word = f"[^{delim}]*"
        parts: list[str] = []
        for w in words:
            if w == syntax.any_words:
                parts.append(f"(?:{delim}{word})*")
            elif w == syntax.single_word:
                parts.append(f"{delim}{word}")
            else:
                parts.append(delim + re.escape(w))
        self._regex = re.compile("".join(parts), re.DOTALL)

    def matches(self, address: str) -> bool:
        """Whether ``address`` (a concrete address, or another pattern taken literally) matches."""
        if not self.is_wildcard:
            return address == self.pattern
        return self._regex.fullmatch(self.syntax.delimiter + address) is not None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AddressMatcher):
            return NotImplemented
        return self.pattern == other.pattern and self.syntax == other.syntax

    def __hash__(self) -> int:
        return hash((self.pattern, self.syntax))

    def __repr__(self) -> str:
        return f"AddressMatcher({self.pattern!r})"


@lru_cache(maxsize=1024)
def _compiled(pattern: str, syntax: WildcardSyntax) -> AddressMatcher:
    return AddressMatcher(pattern, syntax)


def matches(pattern: str, address: str, syntax: WildcardSyntax = DEFAULT_WILDCARDS) -> bool:
    """Whether the Artemis wildcard ``pattern`` matches ``address``."""
    return _compiled(pattern, syntax).matches(address)


def precedence_key(
    pattern: str, syntax: WildcardSyntax = DEFAULT_WILDCARDS
) -> tuple[int, int, tuple[bool, ...], int, str]:
    """Sort key putting the most specific pattern first (see the module docstring).

    Only meaningful between patterns that match the same address.
    """
    words = syntax.words(pattern)
    has_any = syntax.any_words in words
    has_single = syntax.single_word in words
    if has_any:
        # Longer first; then fewer single-word wildcards (Artemis leaves this tie open).
        return (2, -len(pattern), (), words.count(syntax.single_word), pattern)
    if has_single:
        return (1, 0, tuple(w == syntax.single_word for w in words), len(pattern), pattern)
    return (0, 0, (), len(pattern), pattern)
