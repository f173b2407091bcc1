"""Filter expressions: queue ``<filter string="...">``, divert and bridge filters, selectors.

Artemis filters are JMS message selectors (a subset of the SQL-92 conditional expression)
over a message's properties and Artemis's special identifiers (Artemis user manual, "Filter
Expressions"). :meth:`Filter.parse` compiles the text once into a tree of closures;
:meth:`Filter.matches` runs per message per queue or consumer and asks a ``lookup`` callable
for each identifier's value, so the broker resolves only what a filter uses.

Grammar (keywords are case-insensitive, identifiers case-sensitive)::

    filter      := prefix* or_expr
    prefix      := "convert_string_expressions:" | "no_convert_string_expressions:"
                 | "hyphenated_props:" | "no_hyphenated_props:"
    or_expr     := and_expr ( OR and_expr )*
    and_expr    := not_expr ( AND not_expr )*
    not_expr    := NOT not_expr | predicate
    predicate   := sum [ ( "=" | "<>" | "<" | "<=" | ">" | ">=" ) sum
                       | [NOT] BETWEEN sum AND sum
                       | [NOT] IN "(" string ( "," string )* ")"
                       | [NOT] LIKE string [ ESCAPE string ]
                       | IS [NOT] NULL ]
    sum         := product ( ( "+" | "-" ) product )*
    product     := unary ( ( "*" | "/" | "%" ) unary )*
    unary       := ( "+" | "-" ) unary | primary
    primary     := literal | identifier | "(" or_expr ")"
    literal     := string | exact | approximate | TRUE | FALSE | NULL
    string      := "'" ( any character but "'" | "''" )* "'"
    exact       := ( [1-9][0-9]* | 0 | 0[0-7]+ | 0[xX][0-9a-fA-F]+ ) [lL]?
    approximate := Java floating-point literal: 1.5, 1., .5, 1e3, 1.5E-3, 2f, 1.5D
    identifier  := Java identifier (letters, digits, "_", "$"; not a digit first; not a
                   reserved word); with ``hyphenated_props:`` also "-" after the first character

Reserved words: NOT AND OR BETWEEN LIKE ESCAPE IN IS TRUE FALSE NULL XPATH XQUERY.
Comments ``-- to end of line`` and ``/* ... */`` are skipped (as Artemis's parser does).

Semantics (JMS 2.0 ``javax.jms.Message`` "Message Selectors", Artemis where JMS is silent):

* Three-valued logic: a comparison, arithmetic, BETWEEN, IN or LIKE with a NULL (missing)
  operand is UNKNOWN; AND, OR and NOT follow the SQL truth tables; a message matches only
  when the whole expression is TRUE.
* Only like types compare: numbers with numbers (int and float promote), strings with strings,
  booleans with booleans; a comparison of unlike types is FALSE, never an error. Strings and
  booleans compare with ``=`` and ``<>`` only. Values are never converted from strings unless
  the filter starts with ``convert_string_expressions:`` (Artemis's switch for STOMP, whose
  header values are all strings): then a string compared with a number or boolean is parsed
  as one (an unparsable string compares FALSE) and arithmetic parses string operands.
* ``a BETWEEN x AND y`` is ``a >= x AND a <= y``; ``a NOT BETWEEN x AND y`` is
  ``a < x OR a > y`` (JMS defines both so).
* IN and LIKE apply to strings: a NULL operand gives UNKNOWN; another type gives UNKNOWN for
  IN and FALSE for LIKE (so NOT LIKE is TRUE), as Artemis does. LIKE's ``%`` matches any
  sequence, ``_`` one character; the ESCAPE character makes the next one literal.
* ``/`` always divides as floating point and ``%`` is the floating-point remainder (Artemis);
  ``+ - *`` on two integers stay exact integers (Python ints: no 32/64-bit wrap-around).
  Arithmetic on a non-number is UNKNOWN.
* An identifier used alone as a condition is its boolean value, FALSE for another type.
* Identifiers go to ``lookup`` unchanged except the JMS header names, which map onto
  Artemis's: JMSPriority -> AMQPriority, JMSTimestamp -> AMQTimestamp, JMSMessageID ->
  AMQUserID, JMSExpiration -> AMQExpiration, JMSXGroupID -> AMQGroupID, and JMSDeliveryMode
  reads AMQDurable ('DURABLE' / 'NON_DURABLE') as 'PERSISTENT' / 'NON_PERSISTENT' (what
  Artemis's SelectorTranslator does for JMS selectors). JMSCorrelationID and JMSType are
  ordinary properties of those names.

Deliberate differences from Artemis's selector code, where it departs from the JMS
specification: ``=`` and ``<>`` with a NULL operand are UNKNOWN (Artemis makes ``x = NULL``
FALSE, so ``color <> 'red'`` matches a message without ``color``, and ``NULL = NULL`` TRUE);
NOT binds looser than comparisons (Artemis parses ``NOT a = 1`` as ``(NOT a) = 1``);
comparisons do not chain; AND and OR use the full SQL truth tables (Artemis makes
``UNKNOWN AND FALSE`` UNKNOWN and ``UNKNOWN OR FALSE`` FALSE); ``+`` does not concatenate
strings. Beyond Artemis: identifiers may use any Unicode letter, float literals may carry the
Java F/D suffix, and a pattern ending in its ESCAPE character is an error.

An empty (or all-whitespace) filter is no filter: :meth:`Filter.parse` returns None, as
Artemis's ``FilterImpl.createFilter`` does. XPATH / XQUERY body filters are not supported.
"""

from __future__ import annotations

import math
import operator
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Final, NoReturn, TypeAlias

from artemis_py.exceptions import ArtemisError

__all__ = [
    "JMS_HEADER_ALIASES",
    "SPECIAL_IDENTIFIERS",
    "Filter",
    "FilterSyntaxError",
    "Lookup",
]

Lookup: TypeAlias = Callable[[str], object]
"""Resolves an identifier to its value: str, int, float, bool, or None when absent."""

_Eval: TypeAlias = Callable[[Lookup], object]
_Compare: TypeAlias = Callable[[float, float], bool]

SPECIAL_IDENTIFIERS: Final = frozenset(
    {
        "AMQUserID",
        "AMQAddress",
        "AMQGroupID",
        "AMQPriority",
        "AMQExpiration",
        "AMQDurable",
        "AMQTimestamp",
        "AMQSize",
    }
)
"""Artemis's identifiers for message attributes; the broker's ``lookup`` resolves them."""

JMS_HEADER_ALIASES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "JMSPriority": "AMQPriority",
        "JMSTimestamp": "AMQTimestamp",
        "JMSMessageID": "AMQUserID",
        "JMSExpiration": "AMQExpiration",
        "JMSXGroupID": "AMQGroupID",
    }
)
"""JMS header identifiers a filter reads through Artemis's names (JMSDeliveryMode aside)."""

_DELIVERY_MODE: Final = "JMSDeliveryMode"

_CONVERT_PREFIX: Final = "convert_string_expressions:"
_NO_CONVERT_PREFIX: Final = "no_convert_string_expressions:"
_HYPHENS_PREFIX: Final = "hyphenated_props:"
_NO_HYPHENS_PREFIX: Final = "no_hyphenated_props:"

_KEYWORDS: Final = frozenset(
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

# Deep nesting would exhaust Python's stack while parsing or matching; real filters stay
# far below these bounds.
_MAX_NESTING: Final = 64
_MAX_DEPTH: Final = 128


class FilterSyntaxError(ArtemisError):
    """A filter expression is malformed; says where (``position`` is 0-based) and why."""

    def __init__(self, text: str, position: int, reason: str) -> None:
        self.text = text
        self.position = position
        self.reason = reason
        self.line = text.count("\n", 0, position) + 1
        self.column = position - (text.rfind("\n", 0, position) + 1) + 1
        if "\n" in text:
            where = f"line {self.line}, column {self.column}"
        else:
            where = f"column {self.column}"
        super().__init__(f'filter "{text}" at {where}: {reason}')

    def __reduce__(self) -> tuple[type[FilterSyntaxError], tuple[str, int, str]]:
        return (type(self), (self.text, self.position, self.reason))


# ---------------------------------------------------------------------------------------------
# Values


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _as_number(value: object) -> int | float | None:
    kind = type(value)
    if kind is int or kind is float:
        return value  # type: ignore[return-value]  # mypy does not narrow on `type(x) is`
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_JAVA_DOUBLE = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)"
)


def _parse_int(text: str) -> int | None:
    """Java ``Long.valueOf``: an optional sign and decimal digits, nothing else."""
    if not _JAVA_INT.fullmatch(text):
        return None
    try:
        return int(text)
    except ValueError:  # beyond Python's int-from-string digit limit; Java fails sooner
        return None


def _parse_float(text: str) -> float | None:
    """Java ``Double.valueOf``: surrounding whitespace allowed, optional F/D suffix."""
    text = text.strip()
    if not _JAVA_DOUBLE.fullmatch(text):
        return None
    return float(text.rstrip("fFdD"))


def _coerce(value: str, like: object) -> object:
    """``value`` parsed as the type of ``like`` (convert_string_expressions), or None."""
    if isinstance(like, bool):
        return value.lower() == "true"  # Java Boolean.valueOf
    if isinstance(like, int):
        return _parse_int(value)
    if isinstance(like, float):
        return _parse_float(value)
    return None


def _to_number(value: object, convert: bool) -> int | float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    if convert and isinstance(value, str):
        # Artemis ArithmeticExpression.asNumber: a '.' makes it a double, else a long.
        return _parse_float(value) if "." in value else _parse_int(value)
    return None


def _equals(a: object, b: object, convert: bool) -> bool | None:
    if a is None or b is None:
        return None
    if isinstance(a, str):
        if isinstance(b, str):
            return a == b
        if convert and (isinstance(b, bool) or _is_number(b)):
            return _coerce(a, b) == b
        return False
    if isinstance(a, bool):
        if isinstance(b, bool):
            return a is b
        if convert and isinstance(b, str):
            return a is _coerce(b, a)
        return False
    if _is_number(a):
        if _is_number(b):
            return a == b
        if convert and isinstance(b, str):
            return _coerce(b, a) == a
        return False
    return False


def _ordered(op: _Compare, a: object, b: object, convert: bool) -> bool | None:
    if a is None or b is None:
        return None
    if convert:
        if isinstance(a, str) and _is_number(b):
            a = _coerce(a, b)
        elif isinstance(b, str) and _is_number(a):
            b = _coerce(b, a)
    x, y = _as_number(a), _as_number(b)
    if x is None or y is None:
        return False
    return op(x, y)


def _and2(a: object, b: object) -> bool | None:
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def _or2(a: object, b: object) -> bool | None:
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


def _add(a: int | float, b: int | float) -> int | float:
    return a + b


def _sub(a: int | float, b: int | float) -> int | float:
    return a - b


def _mul(a: int | float, b: int | float) -> int | float:
    return a * b


def _div(a: int | float, b: int | float) -> float:
    # Artemis divides as Java doubles: x/0.0 is a signed infinity and 0/0.0 is NaN.
    fa, fb = float(a), float(b)
    if fb == 0.0:
        if fa == 0.0 or math.isnan(fa):
            return math.nan
        return math.copysign(math.inf, fa) * math.copysign(1.0, fb)
    return fa / fb


def _mod(a: int | float, b: int | float) -> float:
    try:
        return math.fmod(float(a), float(b))  # Java's % on doubles keeps the dividend's sign
    except ValueError:  # x % 0.0 and inf % y are NaN in Java
        return math.nan


_ARITHMETIC: Final[Mapping[str, Callable[[int | float, int | float], int | float]]] = {
    "+": _add,
    "-": _sub,
    "*": _mul,
    "/": _div,
    "%": _mod,
}

_ORDERINGS: Final[Mapping[str, _Compare]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class _Like:
    """A LIKE pattern: fixed-length segments between ``%`` matched leftmost-first.

    Linear in the subject for the common shapes and never exponential (unlike translating
    the pattern to one backtracking regular expression), since selectors come from clients.
    """

    __slots__ = ("_segments", "_lengths", "_wildcard")

    def __init__(self, segments: list[list[str | None]]) -> None:
        # Each segment is a list of literal characters and None for "_".
        compiled: list[str | re.Pattern[str]] = []
        for seg in segments:
            if None in seg:
                body = "".join("." if ch is None else re.escape(ch) for ch in seg)
                compiled.append(re.compile(body, re.DOTALL))
            else:
                compiled.append("".join(ch for ch in seg if ch is not None))
        self._segments = compiled
        self._lengths = [len(seg) for seg in segments]
        self._wildcard = len(segments) > 1

    def __call__(self, subject: str) -> bool:
        segs, lens = self._segments, self._lengths
        if not self._wildcard:
            return len(subject) == lens[0] and _at(segs[0], subject, 0)
        start, end = lens[0], len(subject) - lens[-1]
        if start > end or not _at(segs[0], subject, 0) or not _at(segs[-1], subject, end):
            return False
        for i in range(1, len(segs) - 1):
            found = _find(segs[i], subject, start, end)
            if found < 0:
                return False
            start = found + lens[i]
        return True


def _at(seg: str | re.Pattern[str], subject: str, pos: int) -> bool:
    if isinstance(seg, str):
        return subject.startswith(seg, pos)
    return seg.match(subject, pos) is not None


def _find(seg: str | re.Pattern[str], subject: str, start: int, end: int) -> int:
    if isinstance(seg, str):
        return subject.find(seg, start, end)
    found = seg.search(subject, start, end)
    return -1 if found is None else found.start()


# ---------------------------------------------------------------------------------------------
# Lexer

_EOF: Final = "end"
_ID: Final = "id"
_KW: Final = "kw"
_STR: Final = "str"
_NUM: Final = "num"
_OP: Final = "op"

_WHITESPACE: Final = frozenset(" \t\n\r\f\v")
_WHITESPACE_CHARS: Final = "".join(sorted(_WHITESPACE))
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


class _Token:
    __slots__ = ("kind", "value", "start", "end")

    def __init__(self, kind: str, value: object, start: int, end: int) -> None:
        self.kind = kind
        self.value = value
        self.start = start
        self.end = end

    def describe(self, text: str) -> str:
        if self.kind == _EOF:
            return "the end of the filter"
        if self.kind == _KW:
            return f"the reserved word {self.value}"
        if self.kind == _STR:
            return "a string literal"
        if self.kind == _NUM:
            return f"the number {text[self.start : self.end]}"
        return f"'{text[self.start : self.end]}'"


class _Lexer:
    __slots__ = ("_text", "_pos", "_hyphens", "_error")

    def __init__(
        self, text: str, pos: int, hyphens: bool, error: Callable[[int, str], NoReturn]
    ) -> None:
        self._text = text
        self._pos = pos
        self._hyphens = hyphens
        self._error = error

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

    def next(self) -> _Token:
        self._skip_blanks()
        text, start = self._text, self._pos
        if start >= len(text):
            return _Token(_EOF, None, start, start)
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
            if upper in _KEYWORDS:
                return _Token(_KW, upper, start, end)
            return _Token(_ID, word, start, end)
        pair = text[start : start + 2]
        if pair in _TWO_CHAR_OPS:
            self._pos = start + 2
            return _Token(_OP, pair, start, start + 2)
        if pair == "!=":
            self._error(start, "'!=' is not an operator; 'not equal' is <>")
        if pair == "==":
            self._error(start, "'==' is not an operator; equality is a single =")
        if ch in _ONE_CHAR_OPS:
            self._pos = start + 1
            return _Token(_OP, ch, start, start + 1)
        if ch == '"':
            self._error(start, "string literals take single quotes ('...')")
        self._error(start, f"unexpected character {ch!r}")

    def _string(self, start: int) -> _Token:
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
            return _Token(_STR, "".join(parts), start, quote + 1)

    def _number(self, start: int) -> _Token:
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
        return _Token(_NUM, value, start, end)


# ---------------------------------------------------------------------------------------------
# Parser and compiler

# Static kinds of subexpressions, for the type errors Artemis also reports at parse time.
_BOOL: Final = "a condition"
_NUMBER_KIND: Final = "a number"
_STRING: Final = "a string"
_ANY: Final = "an identifier"
_NULL: Final = "NULL"


class _Expr:
    """A compiled subexpression: its closure, static kind, and where it starts."""

    __slots__ = ("fn", "kind", "pos", "depth", "const", "value", "name")

    def __init__(
        self,
        fn: _Eval,
        kind: str,
        pos: int,
        depth: int = 1,
        *,
        const: bool = False,
        value: object = None,
        name: str | None = None,
    ) -> None:
        self.fn = fn
        self.kind = kind
        self.pos = pos
        self.depth = depth
        self.const = const
        self.value = value
        self.name = name  # set for a plain identifier: closures call lookup(name) directly


def _constant(value: object, kind: str, pos: int) -> _Expr:
    return _Expr(lambda lookup: value, kind, pos, const=True, value=value)


def _no_lookup(name: str) -> object:
    raise AssertionError(f"constant folding looked up {name!r}")


class _Parser:
    def __init__(self, text: str, start: int, *, convert: bool, hyphens: bool) -> None:
        self._text = text
        self._convert = convert
        self._nesting = 0
        self.identifiers: set[str] = set()
        self._lexer = _Lexer(text, start, hyphens, self._error)
        self._tok = self._lexer.next()

    # -- helpers -------------------------------------------------------------------------

    def _error(self, pos: int, reason: str) -> NoReturn:
        raise FilterSyntaxError(self._text, pos, reason)

    def _expected(self, what: str) -> NoReturn:
        tok = self._tok
        if tok.kind == _EOF:
            self._error(tok.start, f"expected {what}")
        self._error(tok.start, f"expected {what}, found {tok.describe(self._text)}")

    def _advance(self) -> _Token:
        tok = self._tok
        self._tok = self._lexer.next()
        return tok

    def _at_kw(self, word: str) -> bool:
        return self._tok.kind == _KW and self._tok.value == word

    def _at_op(self, op: str) -> bool:
        return self._tok.kind == _OP and self._tok.value == op

    def _expect_kw(self, word: str) -> None:
        if not self._at_kw(word):
            self._expected(word)
        self._advance()

    def _expect_op(self, op: str) -> None:
        if not self._at_op(op):
            self._expected(f"'{op}'")
        self._advance()

    def _enter(self, pos: int) -> None:
        self._nesting += 1
        if self._nesting > _MAX_NESTING:
            self._error(pos, f"expression nested more than {_MAX_NESTING} levels deep")

    def _node(self, fn: _Eval, kind: str, pos: int, children: Iterable[_Expr]) -> _Expr:
        """A compound node; folded to a constant when every child is one."""
        kids = list(children)
        depth = 1 + max(child.depth for child in kids)
        if depth > _MAX_DEPTH:
            self._error(pos, f"expression nested more than {_MAX_DEPTH} levels deep")
        if all(child.const for child in kids):
            return _constant(fn(_no_lookup), kind, pos)
        return _Expr(fn, kind, pos, depth)

    def _condition(self, expr: _Expr) -> _Expr:
        """``expr`` used where a truth value is needed (AND, OR, NOT, the whole filter)."""
        if expr.kind == _BOOL or expr.kind == _NULL:
            return expr
        if expr.kind != _ANY:
            self._error(expr.pos, f"expected a condition, found {expr.kind}")
        get = expr.fn

        def boolean(lookup: Lookup) -> object:
            value = get(lookup)
            if value is None or value is True or value is False:
                return value
            return False  # Artemis's boolean cast of a non-boolean property

        return _Expr(boolean, _BOOL, expr.pos, expr.depth + 1)

    def _operand(self, expr: _Expr, allowed: tuple[str, ...], what: str) -> None:
        if expr.kind == _NULL:
            self._error(expr.pos, f"{what} with NULL is always unknown; use IS NULL or IS NOT NULL")
        if expr.kind not in allowed:
            self._error(expr.pos, f"{what} needs {' or '.join(allowed[:-1])}, found {expr.kind}")

    # -- grammar -------------------------------------------------------------------------

    def parse(self) -> _Expr:
        if self._tok.kind == _EOF:
            self._expected("a condition")
        expr = self._or()
        if self._tok.kind != _EOF:
            self._expected("AND, OR or the end of the filter")
        return self._condition(expr)

    def _or(self) -> _Expr:
        return self._junction("OR", self._and, decisive=True)

    def _and(self) -> _Expr:
        return self._junction("AND", self._not, decisive=False)

    def _junction(self, keyword: str, operand: Callable[[], _Expr], *, decisive: bool) -> _Expr:
        """OR (``decisive`` True) or AND (False) in SQL's three-valued logic: one operand
        equal to ``decisive`` settles it; otherwise an unknown (None) operand makes the
        result unknown."""
        first = operand()
        if not self._at_kw(keyword):
            return first
        parts = [self._condition(first)]
        while self._at_kw(keyword):
            self._advance()
            parts.append(self._condition(operand()))
        fns = [part.fn for part in parts]
        settled, otherwise = decisive, not decisive
        if len(fns) == 2:  # the common case, without the loop
            first_fn, second_fn = fns

            def pair(lookup: Lookup) -> object:
                a = first_fn(lookup)
                if a is settled:
                    return settled
                b = second_fn(lookup)
                if b is settled:
                    return settled
                return None if a is None or b is None else otherwise

            return self._node(pair, _BOOL, first.pos, parts)

        def every(lookup: Lookup) -> object:
            unknown = False
            for fn in fns:
                value = fn(lookup)
                if value is settled:
                    return settled
                if value is None:
                    unknown = True
            return None if unknown else otherwise

        return self._node(every, _BOOL, first.pos, parts)

    def _not(self) -> _Expr:
        if not self._at_kw("NOT"):
            return self._predicate()
        pos = self._advance().start
        self._enter(pos)
        operand = self._condition(self._not())
        self._nesting -= 1
        get = operand.fn

        def negate(lookup: Lookup) -> object:
            value = get(lookup)
            return None if value is None else not value

        return self._node(negate, _BOOL, pos, [operand])

    def _predicate(self) -> _Expr:
        left = self._sum()
        tok = self._tok
        if tok.kind == _OP and tok.value in ("=", "<>", "<", "<=", ">", ">="):
            self._advance()
            result = self._comparison(str(tok.value), left, self._sum())
        elif tok.kind == _KW and tok.value in ("NOT", "BETWEEN", "IN", "LIKE", "IS"):
            negated = tok.value == "NOT"
            if negated:
                self._advance()
                if not (self._tok.kind == _KW and self._tok.value in ("BETWEEN", "IN", "LIKE")):
                    self._expected("BETWEEN, IN or LIKE after NOT")
            word = self._advance().value
            if word == "BETWEEN":
                result = self._between(left, negated)
            elif word == "IN":
                result = self._in(left, negated)
            elif word == "LIKE":
                result = self._like(left, negated)
            else:
                result = self._is_null(left)
        else:
            return left
        tok = self._tok
        if (tok.kind == _OP and tok.value in ("=", "<>", "<", "<=", ">", ">=")) or (
            tok.kind == _KW and tok.value in ("BETWEEN", "IN", "LIKE", "IS")
        ):
            self._error(tok.start, "comparisons do not chain; combine them with AND or OR")
        return result

    def _comparison(self, op: str, left: _Expr, right: _Expr) -> _Expr:
        convert = self._convert
        if op in ("=", "<>"):
            allowed: tuple[str, ...] = (_NUMBER_KIND, _STRING, _BOOL, _ANY)
            self._operand(left, allowed, f"'{op}'")
            self._operand(right, allowed, f"'{op}'")
            equal = self._equality(left, right)
            if op == "=":
                return self._node(equal, _BOOL, left.pos, [left, right])

            def unequal(lookup: Lookup) -> object:
                value = equal(lookup)
                return None if value is None else not value

            return self._node(unequal, _BOOL, left.pos, [left, right])

        allowed = (_NUMBER_KIND, _ANY)
        self._operand(left, allowed, f"'{op}'")
        self._operand(right, allowed, f"'{op}'")
        compare = _ORDERINGS[op]
        lf, rf = left.fn, right.fn
        bound = _as_number(right.value) if right.const else None
        if bound is not None and not convert:
            limit = bound
            key = left.name

            def against_constant(lookup: Lookup) -> object:
                value = lf(lookup) if key is None else lookup(key)
                if value is None:
                    return None
                number = _as_number(value)
                return False if number is None else compare(number, limit)

            return self._node(against_constant, _BOOL, left.pos, [left, right])

        def ordered(lookup: Lookup) -> object:
            return _ordered(compare, lf(lookup), rf(lookup), convert)

        return self._node(ordered, _BOOL, left.pos, [left, right])

    def _equality(self, left: _Expr, right: _Expr) -> _Eval:
        convert = self._convert
        if not convert and left.const != right.const:
            # The usual shape, property = literal: one type test and one comparison.
            var, constant = (right, left.value) if left.const else (left, right.value)
            name, get = var.name, var.fn
            if isinstance(constant, str):
                text = constant
                if name is not None:
                    key = name
                    return lambda lookup: _eq_str(lookup(key), text)
                return lambda lookup: _eq_str(get(lookup), text)
            if _is_number(constant):
                return lambda lookup: _eq_number(get(lookup), constant)
        lf, rf = left.fn, right.fn
        return lambda lookup: _equals(lf(lookup), rf(lookup), convert)

    def _between(self, value: _Expr, negated: bool) -> _Expr:
        word = "NOT BETWEEN" if negated else "BETWEEN"
        low = self._sum()
        self._expect_kw("AND")
        high = self._sum()
        allowed = (_NUMBER_KIND, _ANY)
        for operand in (value, low, high):
            self._operand(operand, allowed, word)
        vf, lf, hf = value.fn, low.fn, high.fn
        convert = self._convert
        lt, le, gt, ge = operator.lt, operator.le, operator.gt, operator.ge

        def between(lookup: Lookup) -> object:
            v = vf(lookup)
            return _and2(_ordered(ge, v, lf(lookup), convert), _ordered(le, v, hf(lookup), convert))

        def not_between(lookup: Lookup) -> object:
            v = vf(lookup)
            return _or2(_ordered(lt, v, lf(lookup), convert), _ordered(gt, v, hf(lookup), convert))

        return self._node(not_between if negated else between, _BOOL, value.pos, [value, low, high])

    def _in(self, value: _Expr, negated: bool) -> _Expr:
        word = "NOT IN" if negated else "IN"
        self._operand(value, (_STRING, _ANY), word)
        self._expect_op("(")
        items: set[str] = set()
        while True:
            if self._tok.kind == _NUM:
                self._error(self._tok.start, "IN lists hold string literals only")
            if self._tok.kind != _STR:
                self._expected("a string literal")
            items.add(str(self._advance().value))
            if not self._at_op(","):
                break
            self._advance()
        self._expect_op(")")
        members = frozenset(items)
        get = value.fn

        def member(lookup: Lookup) -> object:
            v = get(lookup)
            if isinstance(v, str):
                return (v in members) is not negated
            return None  # NULL, or not a string (Artemis)

        return self._node(member, _BOOL, value.pos, [value])

    def _like(self, value: _Expr, negated: bool) -> _Expr:
        word = "NOT LIKE" if negated else "LIKE"
        self._operand(value, (_STRING, _ANY), word)
        if self._tok.kind != _STR:
            self._expected("a string literal pattern")
        pattern_tok = self._advance()
        pattern = str(pattern_tok.value)
        escape: str | None = None
        if self._at_kw("ESCAPE"):
            self._advance()
            if self._tok.kind != _STR:
                self._expected("a string literal escape character")
            escape_tok = self._advance()
            escape = str(escape_tok.value)
            if len(escape) != 1:
                self._error(escape_tok.start, "ESCAPE takes exactly one character")
        segments: list[list[str | None]] = [[]]
        chars = iter(pattern)
        for ch in chars:
            if ch == escape:
                literal = next(chars, None)
                if literal is None:
                    self._error(pattern_tok.start, "the pattern ends with its ESCAPE character")
                segments[-1].append(literal)
            elif ch == "%":
                segments.append([])
            elif ch == "_":
                segments[-1].append(None)
            else:
                segments[-1].append(ch)
        like = _Like(segments)
        get = value.fn

        def matches(lookup: Lookup) -> object:
            v = get(lookup)
            if v is None:
                return None
            if isinstance(v, str):
                return like(v) is not negated
            return negated  # LIKE is FALSE on a non-string, so NOT LIKE is TRUE (Artemis)

        return self._node(matches, _BOOL, value.pos, [value])

    def _is_null(self, value: _Expr) -> _Expr:
        negated = self._at_kw("NOT")
        if negated:
            self._advance()
        if not self._at_kw("NULL"):
            self._expected("NULL or NOT NULL after IS")
        self._advance()
        get = value.fn
        if negated:
            return self._node(lambda lookup: get(lookup) is not None, _BOOL, value.pos, [value])
        return self._node(lambda lookup: get(lookup) is None, _BOOL, value.pos, [value])

    def _sum(self) -> _Expr:
        left = self._product()
        while self._tok.kind == _OP and self._tok.value in ("+", "-"):
            op = str(self._advance().value)
            left = self._arithmetic(op, left, self._product())
        return left

    def _product(self) -> _Expr:
        left = self._unary()
        while self._tok.kind == _OP and self._tok.value in ("*", "/", "%"):
            op = str(self._advance().value)
            left = self._arithmetic(op, left, self._unary())
        return left

    def _arithmetic(self, op: str, left: _Expr, right: _Expr) -> _Expr:
        allowed = (_NUMBER_KIND, _ANY, _NULL)
        for operand in (left, right):
            if operand.kind not in allowed:
                self._error(operand.pos, f"'{op}' needs numbers, found {operand.kind}")
        compute = _ARITHMETIC[op]
        lf, rf = left.fn, right.fn
        convert = self._convert

        def arithmetic(lookup: Lookup) -> object:
            a = _to_number(lf(lookup), convert)
            b = _to_number(rf(lookup), convert)
            if a is None or b is None:
                return None
            try:
                return compute(a, b)
            except OverflowError:  # an integer too large for a float
                return None

        return self._node(arithmetic, _NUMBER_KIND, left.pos, [left, right])

    def _unary(self) -> _Expr:
        if not (self._tok.kind == _OP and self._tok.value in ("+", "-")):
            return self._primary()
        tok = self._advance()
        self._enter(tok.start)
        operand = self._unary()
        self._nesting -= 1
        if operand.kind not in (_NUMBER_KIND, _ANY, _NULL):
            self._error(operand.pos, f"unary '{tok.value}' needs a number, found {operand.kind}")
        get = operand.fn
        sign = -1 if tok.value == "-" else 1

        def signed(lookup: Lookup) -> object:
            value = get(lookup)
            if isinstance(value, bool) or not isinstance(value, int | float):
                return None
            return -value if sign < 0 else value

        return self._node(signed, _NUMBER_KIND, tok.start, [operand])

    def _primary(self) -> _Expr:
        tok = self._tok
        if tok.kind == _NUM:
            self._advance()
            return _constant(tok.value, _NUMBER_KIND, tok.start)
        if tok.kind == _STR:
            self._advance()
            return _constant(tok.value, _STRING, tok.start)
        if tok.kind == _ID:
            self._advance()
            return self._identifier(str(tok.value), tok.start)
        if tok.kind == _KW:
            if tok.value in ("TRUE", "FALSE"):
                self._advance()
                return _constant(tok.value == "TRUE", _BOOL, tok.start)
            if tok.value == "NULL":
                self._advance()
                return _constant(None, _NULL, tok.start)
            if tok.value in ("XPATH", "XQUERY"):
                self._error(tok.start, f"{tok.value} filters on the message body are not supported")
        if tok.kind == _OP and tok.value == "(":
            self._advance()
            self._enter(tok.start)
            inner = self._or()
            self._nesting -= 1
            self._expect_op(")")
            return inner
        self._expected("a value")

    def _identifier(self, name: str, pos: int) -> _Expr:
        if name == _DELIVERY_MODE:
            self.identifiers.add("AMQDurable")

            def delivery_mode(lookup: Lookup) -> object:
                durable = lookup("AMQDurable")
                if durable == "DURABLE":
                    return "PERSISTENT"
                if durable == "NON_DURABLE":
                    return "NON_PERSISTENT"
                return durable

            return _Expr(delivery_mode, _ANY, pos)
        name = JMS_HEADER_ALIASES.get(name, name)
        self.identifiers.add(name)
        return _Expr(lambda lookup: lookup(name), _ANY, pos, name=name)


def _eq_str(value: object, constant: str) -> bool | None:
    if value is None:
        return None
    return value == constant if isinstance(value, str) else False


def _eq_number(value: object, constant: object) -> bool | None:
    if value is None:
        return None
    return value == constant if _is_number(value) else False


# ---------------------------------------------------------------------------------------------
# Public API


class Filter:
    """A compiled filter expression; immutable, hashable and equal by its text."""

    __slots__ = ("_text", "_fn", "_identifiers")

    def __init__(self, text: str, fn: _Eval, identifiers: frozenset[str]) -> None:
        self._text = text
        self._fn = fn
        self._identifiers = identifiers

    @classmethod
    def parse(cls, text: str | None) -> Filter | None:
        """Compile ``text``; None for None, empty or all-whitespace text (no filter).

        Raises :class:`FilterSyntaxError` if the text is not a valid filter expression.
        """
        if text is None or not text.strip(_WHITESPACE_CHARS):
            return None
        pos = len(text) - len(text.lstrip(_WHITESPACE_CHARS))
        convert = hyphens = False
        while True:  # Artemis SelectorParser: any sequence of prefixes, the last one wins
            if text.startswith(_CONVERT_PREFIX, pos):
                convert, pos = True, pos + len(_CONVERT_PREFIX)
            elif text.startswith(_NO_CONVERT_PREFIX, pos):
                convert, pos = False, pos + len(_NO_CONVERT_PREFIX)
            elif text.startswith(_HYPHENS_PREFIX, pos):
                hyphens, pos = True, pos + len(_HYPHENS_PREFIX)
            elif text.startswith(_NO_HYPHENS_PREFIX, pos):
                hyphens, pos = False, pos + len(_NO_HYPHENS_PREFIX)
            else:
                break
        parser = _Parser(text, pos, convert=convert, hyphens=hyphens)
        expr = parser.parse()
        return cls(text, expr.fn, frozenset(parser.identifiers))

    @property
    def text(self) -> str:
        """The text the filter was parsed from."""
        return self._text

    @property
    def identifiers(self) -> frozenset[str]:
        """The names :meth:`matches` may pass to ``lookup`` (after JMS header mapping)."""
        return self._identifiers

    def matches(self, lookup: Lookup) -> bool:
        """Whether the expression is TRUE for the message ``lookup`` describes.

        ``lookup(name)`` returns the identifier's value or None when the message has none; it
        may be called more than once per name, and not at all for names that cannot change
        the outcome.
        """
        return self._fn(lookup) is True

    def evaluate(self, lookup: Lookup) -> bool | None:
        """The three-valued result: True, False, or None for SQL UNKNOWN."""
        result = self._fn(lookup)
        return None if result is None else bool(result)

    def __repr__(self) -> str:
        return f"Filter({self._text!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Filter):
            return NotImplemented
        return self._text == other._text

    def __hash__(self) -> int:
        return hash(self._text)
