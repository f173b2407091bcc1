"""The filter parser: a recursive descent over :mod:`.lexer`'s tokens that checks operand
kinds and compiles each node with :mod:`.evaluate` as it goes.

Grammar (keywords are case-insensitive; tokens as in :mod:`.lexer`)::

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

Type errors Artemis also reports at parse time (a string in arithmetic, a number with LIKE,
a comparison with the NULL literal) are syntax errors here, and subexpressions whose
operands are all constants are folded to constants.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final, NoReturn

from artemis_py.broker.filter import evaluate
from artemis_py.broker.filter.errors import FilterSyntaxError
from artemis_py.broker.filter.evaluate import ANY, BOOL, NULL, NUMBER, STRING, Expr, constant
from artemis_py.broker.filter.identifiers import (
    DELIVERY_MODE,
    DURABLE,
    JMS_HEADER_ALIASES,
    delivery_mode,
)
from artemis_py.broker.filter.lexer import EOF, ID, KW, NUM, OP, STR, Lexer, Token
from artemis_py.broker.filter.like import LikePattern, split_pattern
from artemis_py.broker.filter.values import Eval

__all__ = ["compile_filter"]

_CONVERT_PREFIX: Final = "convert_string_expressions:"
_NO_CONVERT_PREFIX: Final = "no_convert_string_expressions:"
_HYPHENS_PREFIX: Final = "hyphenated_props:"
_NO_HYPHENS_PREFIX: Final = "no_hyphenated_props:"

# Deep nesting would exhaust Python's stack while parsing or matching; real filters stay
# far below these bounds.
_MAX_NESTING: Final = 64
_MAX_DEPTH: Final = 128

_COMPARISONS: Final = ("=", "<>", "<", "<=", ">", ">=")


def compile_filter(text: str, pos: int) -> tuple[Eval, frozenset[str]]:
    """The closure of the filter ``text`` (from ``pos``, after leading whitespace) and the
    identifiers it may look up.

    Raises :class:`FilterSyntaxError` if the text is not a valid filter expression.
    """
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
    return expr.fn, frozenset(parser.identifiers)


def _no_lookup(name: str) -> object:
    raise AssertionError(f"constant folding looked up {name!r}")


class _Parser:
    def __init__(self, text: str, start: int, *, convert: bool, hyphens: bool) -> None:
        self._text = text
        self._convert = convert
        self._nesting = 0
        self.identifiers: set[str] = set()
        self._lexer = Lexer(text, start, hyphens)
        self._tok = self._lexer.next()

    # -- helpers -------------------------------------------------------------------------

    def _error(self, pos: int, reason: str) -> NoReturn:
        raise FilterSyntaxError(self._text, pos, reason)

    def _expected(self, what: str) -> NoReturn:
        tok = self._tok
        if tok.kind == EOF:
            self._error(tok.start, f"expected {what}")
        self._error(tok.start, f"expected {what}, found {tok.describe(self._text)}")

    def _advance(self) -> Token:
        tok = self._tok
        self._tok = self._lexer.next()
        return tok

    def _at_kw(self, word: str) -> bool:
        return self._tok.kind == KW and self._tok.value == word

    def _at_op(self, op: str) -> bool:
        return self._tok.kind == OP and self._tok.value == op

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

    def _node(self, fn: Eval, kind: str, pos: int, children: Iterable[Expr]) -> Expr:
        """A compound node; folded to a constant when every child is one."""
        kids = list(children)
        depth = 1 + max(child.depth for child in kids)
        if depth > _MAX_DEPTH:
            self._error(pos, f"expression nested more than {_MAX_DEPTH} levels deep")
        if all(child.const for child in kids):
            return constant(fn(_no_lookup), kind, pos)
        return Expr(fn, kind, pos, depth)

    def _condition(self, expr: Expr) -> Expr:
        """``expr`` used where a truth value is needed (AND, OR, NOT, the whole filter)."""
        if expr.kind == BOOL or expr.kind == NULL:
            return expr
        if expr.kind != ANY:
            self._error(expr.pos, f"expected a condition, found {expr.kind}")
        return Expr(evaluate.condition(expr.fn), BOOL, expr.pos, expr.depth + 1)

    def _operand(self, expr: Expr, allowed: tuple[str, ...], what: str) -> None:
        if expr.kind == NULL:
            self._error(expr.pos, f"{what} with NULL is always unknown; use IS NULL or IS NOT NULL")
        if expr.kind not in allowed:
            self._error(expr.pos, f"{what} needs {' or '.join(allowed[:-1])}, found {expr.kind}")

    # -- grammar -------------------------------------------------------------------------

    def parse(self) -> Expr:
        if self._tok.kind == EOF:
            self._expected("a condition")
        expr = self._or()
        if self._tok.kind != EOF:
            self._expected("AND, OR or the end of the filter")
        return self._condition(expr)

    def _or(self) -> Expr:
        return self._junction("OR", self._and, decisive=True)

    def _and(self) -> Expr:
        return self._junction("AND", self._not, decisive=False)

    def _junction(self, keyword: str, operand: Callable[[], Expr], *, decisive: bool) -> Expr:
        first = operand()
        if not self._at_kw(keyword):
            return first
        parts = [self._condition(first)]
        while self._at_kw(keyword):
            self._advance()
            parts.append(self._condition(operand()))
        fn = evaluate.junction([part.fn for part in parts], decisive=decisive)
        return self._node(fn, BOOL, first.pos, parts)

    def _not(self) -> Expr:
        if not self._at_kw("NOT"):
            return self._predicate()
        pos = self._advance().start
        self._enter(pos)
        operand = self._condition(self._not())
        self._nesting -= 1
        return self._node(evaluate.negation(operand.fn), BOOL, pos, [operand])

    def _predicate(self) -> Expr:
        left = self._sum()
        tok = self._tok
        if tok.kind == OP and tok.value in _COMPARISONS:
            self._advance()
            result = self._comparison(str(tok.value), left, self._sum())
        elif tok.kind == KW and tok.value in ("NOT", "BETWEEN", "IN", "LIKE", "IS"):
            negated = tok.value == "NOT"
            if negated:
                self._advance()
                if not (self._tok.kind == KW and self._tok.value in ("BETWEEN", "IN", "LIKE")):
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
        if (tok.kind == OP and tok.value in _COMPARISONS) or (
            tok.kind == KW and tok.value in ("BETWEEN", "IN", "LIKE", "IS")
        ):
            self._error(tok.start, "comparisons do not chain; combine them with AND or OR")
        return result

    def _comparison(self, op: str, left: Expr, right: Expr) -> Expr:
        if op in ("=", "<>"):
            allowed: tuple[str, ...] = (NUMBER, STRING, BOOL, ANY)
        else:
            allowed = (NUMBER, ANY)
        self._operand(left, allowed, f"'{op}'")
        self._operand(right, allowed, f"'{op}'")
        fn = evaluate.comparison(op, left, right, self._convert)
        return self._node(fn, BOOL, left.pos, [left, right])

    def _between(self, value: Expr, negated: bool) -> Expr:
        word = "NOT BETWEEN" if negated else "BETWEEN"
        low = self._sum()
        self._expect_kw("AND")
        high = self._sum()
        allowed = (NUMBER, ANY)
        for operand in (value, low, high):
            self._operand(operand, allowed, word)
        fn = evaluate.between(value, low, high, negated=negated, convert=self._convert)
        return self._node(fn, BOOL, value.pos, [value, low, high])

    def _in(self, value: Expr, negated: bool) -> Expr:
        word = "NOT IN" if negated else "IN"
        self._operand(value, (STRING, ANY), word)
        self._expect_op("(")
        items: set[str] = set()
        while True:
            if self._tok.kind == NUM:
                self._error(self._tok.start, "IN lists hold string literals only")
            if self._tok.kind != STR:
                self._expected("a string literal")
            items.add(str(self._advance().value))
            if not self._at_op(","):
                break
            self._advance()
        self._expect_op(")")
        fn = evaluate.membership(value.fn, frozenset(items), negated=negated)
        return self._node(fn, BOOL, value.pos, [value])

    def _like(self, value: Expr, negated: bool) -> Expr:
        word = "NOT LIKE" if negated else "LIKE"
        self._operand(value, (STRING, ANY), word)
        if self._tok.kind != STR:
            self._expected("a string literal pattern")
        pattern_tok = self._advance()
        escape: str | None = None
        if self._at_kw("ESCAPE"):
            self._advance()
            if self._tok.kind != STR:
                self._expected("a string literal escape character")
            escape_tok = self._advance()
            escape = str(escape_tok.value)
            if len(escape) != 1:
                self._error(escape_tok.start, "ESCAPE takes exactly one character")
        segments = split_pattern(str(pattern_tok.value), escape)
        if segments is None:
            self._error(pattern_tok.start, "the pattern ends with its ESCAPE character")
        fn = evaluate.like(value.fn, LikePattern(segments), negated=negated)
        return self._node(fn, BOOL, value.pos, [value])

    def _is_null(self, value: Expr) -> Expr:
        negated = self._at_kw("NOT")
        if negated:
            self._advance()
        if not self._at_kw("NULL"):
            self._expected("NULL or NOT NULL after IS")
        self._advance()
        return self._node(evaluate.is_null(value.fn, negated=negated), BOOL, value.pos, [value])

    def _sum(self) -> Expr:
        left = self._product()
        while self._tok.kind == OP and self._tok.value in ("+", "-"):
            op = str(self._advance().value)
            left = self._arithmetic(op, left, self._product())
        return left

    def _product(self) -> Expr:
        left = self._unary()
        while self._tok.kind == OP and self._tok.value in ("*", "/", "%"):
            op = str(self._advance().value)
            left = self._arithmetic(op, left, self._unary())
        return left

    def _arithmetic(self, op: str, left: Expr, right: Expr) -> Expr:
        allowed = (NUMBER, ANY, NULL)
        for operand in (left, right):
            if operand.kind not in allowed:
                self._error(operand.pos, f"'{op}' needs numbers, found {operand.kind}")
        fn = evaluate.arithmetic(op, left.fn, right.fn, self._convert)
        return self._node(fn, NUMBER, left.pos, [left, right])

    def _unary(self) -> Expr:
        if not (self._tok.kind == OP and self._tok.value in ("+", "-")):
            return self._primary()
        tok = self._advance()
        self._enter(tok.start)
        operand = self._unary()
        self._nesting -= 1
        if operand.kind not in (NUMBER, ANY, NULL):
            self._error(operand.pos, f"unary '{tok.value}' needs a number, found {operand.kind}")
        fn = evaluate.signed(operand.fn, negative=tok.value == "-")
        return self._node(fn, NUMBER, tok.start, [operand])

    def _primary(self) -> Expr:
        tok = self._tok
        if tok.kind == NUM:
            self._advance()
            return constant(tok.value, NUMBER, tok.start)
        if tok.kind == STR:
            self._advance()
            return constant(tok.value, STRING, tok.start)
        if tok.kind == ID:
            self._advance()
            return self._identifier(str(tok.value), tok.start)
        if tok.kind == KW:
            if tok.value in ("TRUE", "FALSE"):
                self._advance()
                return constant(tok.value == "TRUE", BOOL, tok.start)
            if tok.value == "NULL":
                self._advance()
                return constant(None, NULL, tok.start)
            if tok.value in ("XPATH", "XQUERY"):
                self._error(tok.start, f"{tok.value} filters on the message body are not supported")
        if tok.kind == OP and tok.value == "(":
            self._advance()
            self._enter(tok.start)
            inner = self._or()
            self._nesting -= 1
            self._expect_op(")")
            return inner
        self._expected("a value")

    def _identifier(self, name: str, pos: int) -> Expr:
        if name == DELIVERY_MODE:
            self.identifiers.add(DURABLE)
            return Expr(delivery_mode, ANY, pos)
        name = JMS_HEADER_ALIASES.get(name, name)
        self.identifiers.add(name)
        return Expr(evaluate.property_value(name), ANY, pos, name=name)
