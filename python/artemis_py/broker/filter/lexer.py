"""The filter lexer: splits a filter expression into tokens for :mod:`.parser`.

Tokens (keywords are case-insensitive, identifiers case-sensitive)::

    string      := "'" ( any character but "'" | "''" )* "'"
    exact       := ( [1-9][0-9]* | 0 | 0[0-7]+ | 0[xX][0-9a-fA-F]+ ) [lL]?
    approximate := Java floating-point literal: 1.5, 1., .5, 1e3, 1.5E-3, 2f, 1.5D
    identifier  := Java identifier (letters, digits, "_", "$"; not a digit first; not a
                   reserved word); with ``hyphenated_props:`` also "-" after the first character
    operator    := "=" | "<>" | "<" | "<=" | ">" | ">=" | "+" | "-" | "*" | "/" | "%"
                 | "(" | ")" | ","

Reserved words: NOT AND OR BETWEEN LIKE ESCAPE IN IS TRUE FALSE NULL XPATH XQUERY.
Comments ``-- to end of line`` and ``/* ... */`` are skipped (as Artemis's parser does).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final, NoReturn

from artemis_py.broker.filter.errors import FilterSyntaxError

__all__ = [
    "EOF",
    "ID",
    "KEYWORDS",
    "KW",
    "NUM",
    "OP",
    "STR",
    "WHITESPACE_CHARS",
    "Lexer",
    "Token",
]

# Token kinds.
EOF: Final = "end"
ID: Final = "id"
KW: Final = "kw"
STR: Final = "str"
NUM: Final = "num"
OP: Final = "op"

KEYWORDS: Final = frozenset(
    {
        "NOT",
        "AND",
        "OR",
        "BETWEEN",
        "LIKE",
        "ESCAPE",
        "IN",
        "IS",
        "TRUE",
        "FALSE",
        "NULL",
        "XPATH",
        "XQUERY",
    }
)

_WHITESPACE: Final = frozenset(" \t\n\r\f\v")
WHITESPACE_CHARS: Final = "".join(sorted(_WHITESPACE))
"""The whitespace the lexer skips, as a string for ``str.strip``."""

_TWO_CHAR_OPS: Final = frozenset({"<>", "<=", ">="})
_ONE_CHAR_OPS: Final = frozenset("=<>+-*/%(),")
_ID_START_CATEGORIES: Final = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Nl", "Sc", "Pc"})
_ID_PART_CATEGORIES: Final = _ID_START_CATEGORIES | {"Nd", "Mn", "Mc"}
_NUMBER: Final = re.compile(
    r"0[xX][0-9a-fA-F]+[lL]?"
    r"|(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?"
    r"|[0-9]+[eE][+-]?[0-9]+[fFdD]?"
    r"|[0-9]+[fFdD]"
    r"|[0-9]+[lL]?"
)


def _id_start(ch: str) -> bool:
    if ch < "\x80":
        return ch.isalpha() or ch == "_" or ch == "$"
    return unicodedata.category(ch) in _ID_START_CATEGORIES


def _id_part(ch: str) -> bool:
    if ch < "\x80":
        return ch.isalnum() or ch == "_" or ch == "$"
    return unicodedata.category(ch) in _ID_PART_CATEGORIES


class Token:
    """One token: its kind, its value (a keyword upper-cased, a literal decoded), its span."""

    __slots__ = ("end", "kind", "start", "value")

    def __init__(self, kind: str, value: object, start: int, end: int) -> None:
        self.kind = kind
        self.value = value
        self.start = start
        self.end = end

    def describe(self, text: str) -> str:
        """The token as an error message names it ("found ...")."""
        if self.kind == EOF:
            return "the end of the filter"
        if self.kind == KW:
            return f"the reserved word {self.value}"
        if self.kind == STR:
            return "a string literal"
        if self.kind == NUM:
            return f"the number {text[self.start : self.end]}"
        return f"'{text[self.start : self.end]}'"


class Lexer:
    """Yields the tokens of ``text`` from ``pos`` on, one :meth:`next` call at a time."""

    __slots__ = ("_hyphens", "_pos", "_text")

    def __init__(self, text: str, pos: int, hyphens: bool) -> None:
        self._text = text
        self._pos = pos
        self._hyphens = hyphens

    def _error(self, pos: int, reason: str) -> NoReturn:
        raise FilterSyntaxError(self._text, pos, reason)

    def _skip_blanks(self) -> None:
        text, pos, n = self._text, self._pos, len(self._text)
        while pos < n:
            ch = text[pos]
            if ch in _WHITESPACE:
                pos += 1
            elif text.startswith("--", pos):
                newline = [i for i in (text.find("\n", pos), text.find("\r", pos)) if i >= 0]
                pos = min(newline) if newline else n
            elif text.startswith("/*", pos):
                close = text.find("*/", pos + 2)
                if close < 0:
                    self._error(pos, "unterminated comment")
                pos = close + 2
            else:
                break
        self._pos = pos

    def next(self) -> Token:
        """The next token; an ``EOF`` token at the end (and again on every later call)."""
        self._skip_blanks()
        text, start = self._text, self._pos
        if start >= len(text):
            return Token(EOF, None, start, start)
        ch = text[start]
        if ch == "'":
            return self._string(start)
        if "0" <= ch <= "9" or (ch == "." and "0" <= text[start + 1 : start + 2] <= "9"):
            return self._number(start)
        if _id_start(ch):
            end = start + 1
            while end < len(text) and (_id_part(text[end]) or (self._hyphens and text[end] == "-")):
                end += 1
            self._pos = end
            word = text[start:end]
            upper = word.upper()
            if upper in KEYWORDS:
                return Token(KW, upper, start, end)
            return Token(ID, word, start, end)
        pair = text[start : start + 2]
        if pair in _TWO_CHAR_OPS:
            self._pos = start + 2
            return Token(OP, pair, start, start + 2)
        if pair == "!=":
            self._error(start, "'!=' is not an operator; 'not equal' is <>")
        if pair == "==":
            self._error(start, "'==' is not an operator; equality is a single =")
        if ch in _ONE_CHAR_OPS:
            self._pos = start + 1
            return Token(OP, ch, start, start + 1)
        if ch == '"':
            self._error(start, "string literals take single quotes ('...')")
        self._error(start, f"unexpected character {ch!r}")

    def _string(self, start: int) -> Token:
        text, pos, parts = self._text, start + 1, []
        while True:
            quote = text.find("'", pos)
            if quote < 0:
                self._error(start, "unterminated string literal")
            parts.append(text[pos:quote])
            if text.startswith("'", quote + 1):  # '' is an escaped quote
                parts.append("'")
                pos = quote + 2
                continue
            self._pos = quote + 1
            return Token(STR, "".join(parts), start, quote + 1)

    def _number(self, start: int) -> Token:
        text = self._text
        found = _NUMBER.match(text, start)
        assert found is not None  # the caller saw a digit (or '.' and a digit)
        end = found.end()
        if end < len(text) and (_id_part(text[end]) or text[end] == "."):
            while end < len(text) and (_id_part(text[end]) or text[end] == "."):
                end += 1
            self._error(start, f"malformed number {text[start:end]!r}")
        image = found.group()
        value: int | float
        if image[:2] in ("0x", "0X"):
            value = int(image[2:].rstrip("lL"), 16)
        elif any(c in image for c in ".eEfFdD"):
            value = float(image.rstrip("fFdD"))
        else:
            digits = image.rstrip("lL")
            if len(digits) > 1 and digits[0] == "0":
                if any(c in "89" for c in digits):
                    self._error(start, f"invalid octal literal {image!r}")
                value = int(digits, 8)
            else:
                try:
                    value = int(digits)
                except ValueError:  # Python's int-from-string digit limit
                    self._error(start, "number literal too long")
        self._pos = end
        return Token(NUM, value, start, end)
