"""The evaluator: compiled subexpressions and the closures they run per message.

A filter compiles into a tree of closures, each taking the message's ``lookup`` and
returning a value (None for NULL / UNKNOWN). :class:`Expr` is one compiled subexpression as
the parser sees it: its closure plus what the parser checks statically (its kind, whether it
is a constant). Each builder below returns the closure of one kind of node, given its
compiled children; the parser checks the operand kinds first.

These closures are the hot path (:meth:`Filter.matches` runs per message per queue or
consumer), so builders specialise on what they know at compile time: a comparison with a
constant, a plain identifier read through ``lookup(name)`` directly, a two-operand AND/OR.
"""

from __future__ import annotations

import operator
from typing import Final

from artemis_py.broker.filter.like import LikePattern
from artemis_py.broker.filter.values import (
    ARITHMETIC,
    ORDERINGS,
    Eval,
    Lookup,
    and2,
    as_number,
    eq_number,
    eq_str,
    equals,
    is_number,
    or2,
    ordered,
    to_number,
)

__all__ = [
    "ANY",
    "BOOL",
    "NULL",
    "NUMBER",
    "STRING",
    "Expr",
    "arithmetic",
    "between",
    "comparison",
    "condition",
    "constant",
    "is_null",
    "junction",
    "like",
    "membership",
    "negation",
    "property_value",
    "signed",
]

# Static kinds of subexpressions, for the type errors Artemis also reports at parse time.
BOOL: Final = "a condition"
NUMBER: Final = "a number"
STRING: Final = "a string"
ANY: Final = "an identifier"
NULL: Final = "NULL"


class Expr:
    """A compiled subexpression: its closure, static kind, and where it starts."""

    __slots__ = ("const", "depth", "fn", "kind", "name", "pos", "value")

    def __init__(
        self,
        fn: Eval,
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


def constant(value: object, kind: str, pos: int) -> Expr:
    return Expr(lambda lookup: value, kind, pos, const=True, value=value)


def property_value(name: str) -> Eval:
    """An identifier's value, as ``lookup`` gives it."""
    return lambda lookup: lookup(name)


def condition(get: Eval) -> Eval:
    """An identifier used as a truth value."""

    def boolean(lookup: Lookup) -> object:
        value = get(lookup)
        if value is None or value is True or value is False:
            return value
        return False  # Artemis's boolean cast of a non-boolean property

    return boolean


def junction(fns: list[Eval], *, decisive: bool) -> Eval:
    """OR (``decisive`` True) or AND (False) in SQL's three-valued logic: one operand
    equal to ``decisive`` settles it; otherwise an unknown (None) operand makes the
    result unknown."""
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

        return pair

    def every(lookup: Lookup) -> object:
        unknown = False
        for fn in fns:
            value = fn(lookup)
            if value is settled:
                return settled
            if value is None:
                unknown = True
        return None if unknown else otherwise

    return every


def negation(get: Eval) -> Eval:
    """SQL NOT."""

    def negate(lookup: Lookup) -> object:
        value = get(lookup)
        return None if value is None else not value

    return negate


def comparison(op: str, left: Expr, right: Expr, convert: bool) -> Eval:
    """``left op right`` for op one of ``= <> < <= > >=``."""
    if op in ("=", "<>"):
        equal = _equality(left, right, convert)
        if op == "=":
            return equal

        def unequal(lookup: Lookup) -> object:
            value = equal(lookup)
            return None if value is None else not value

        return unequal

    compare = ORDERINGS[op]
    lf, rf = left.fn, right.fn
    bound = as_number(right.value) if right.const else None
    if bound is not None and not convert:
        limit = bound
        key = left.name

        def against_constant(lookup: Lookup) -> object:
            value = lf(lookup) if key is None else lookup(key)
            if value is None:
                return None
            number = as_number(value)
            return False if number is None else compare(number, limit)

        return against_constant

    def ordering(lookup: Lookup) -> object:
        return ordered(compare, lf(lookup), rf(lookup), convert)

    return ordering


def _equality(left: Expr, right: Expr, convert: bool) -> Eval:
    if not convert and left.const != right.const:
        # The usual shape, property = literal: one type test and one comparison.
        var, value = (right, left.value) if left.const else (left, right.value)
        name, get = var.name, var.fn
        if isinstance(value, str):
            text = value
            if name is not None:
                key = name
                return lambda lookup: eq_str(lookup(key), text)
            return lambda lookup: eq_str(get(lookup), text)
        if is_number(value):
            number = value
            return lambda lookup: eq_number(get(lookup), number)
    lf, rf = left.fn, right.fn
    return lambda lookup: equals(lf(lookup), rf(lookup), convert)


def between(value: Expr, low: Expr, high: Expr, *, negated: bool, convert: bool) -> Eval:
    """``value [NOT] BETWEEN low AND high``, as JMS defines it through ``>=`` and ``<=``."""
    vf, lf, hf = value.fn, low.fn, high.fn
    lt, le, gt, ge = operator.lt, operator.le, operator.gt, operator.ge

    def inside(lookup: Lookup) -> object:
        v = vf(lookup)
        return and2(ordered(ge, v, lf(lookup), convert), ordered(le, v, hf(lookup), convert))

    def outside(lookup: Lookup) -> object:
        v = vf(lookup)
        return or2(ordered(lt, v, lf(lookup), convert), ordered(gt, v, hf(lookup), convert))

    return outside if negated else inside


def membership(get: Eval, members: frozenset[str], *, negated: bool) -> Eval:
    """``value [NOT] IN (...)``."""

    def member(lookup: Lookup) -> object:
        v = get(lookup)
        if isinstance(v, str):
            return (v in members) is not negated
        return None  # NULL, or not a string (Artemis)

    return member


def like(get: Eval, pattern: LikePattern, *, negated: bool) -> Eval:
    """``value [NOT] LIKE pattern``."""

    def matches(lookup: Lookup) -> object:
        v = get(lookup)
        if v is None:
            return None
        if isinstance(v, str):
            return pattern(v) is not negated
        return negated  # LIKE is FALSE on a non-string, so NOT LIKE is TRUE (Artemis)

    return matches


def is_null(get: Eval, *, negated: bool) -> Eval:
    """``value IS [NOT] NULL``."""
    if negated:
        return lambda lookup: get(lookup) is not None
    return lambda lookup: get(lookup) is None


def arithmetic(op: str, lf: Eval, rf: Eval, convert: bool) -> Eval:
    """``left op right`` for op one of ``+ - * / %``; UNKNOWN on a non-number."""
    compute = ARITHMETIC[op]

    def calculate(lookup: Lookup) -> object:
        a = to_number(lf(lookup), convert)
        b = to_number(rf(lookup), convert)
        if a is None or b is None:
            return None
        try:
            return compute(a, b)
        except OverflowError:  # an integer too large for a float
            return None

    return calculate


def signed(get: Eval, *, negative: bool) -> Eval:
    """Unary ``-`` (``negative``) or ``+``; UNKNOWN on a non-number."""
    sign = -1 if negative else 1

    def apply_sign(lookup: Lookup) -> object:
        value = get(lookup)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return -value if sign < 0 else value

    return apply_sign
