"""Filter values and the operations on them, in SQL's three-valued logic.

A value is a str, an int, a float, a bool, or None for NULL (a missing identifier); None is
also the UNKNOWN truth value. Only like types compare (int and float promote); strings are
converted to numbers or booleans only under ``convert_string_expressions:``, the way Java's
``Long.valueOf`` / ``Double.valueOf`` / ``Boolean.valueOf`` would (Artemis). Arithmetic
follows Java doubles for ``/`` and ``%`` and stays exact for ``+ - *`` on integers.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from typing import Final, TypeAlias

__all__ = [
    "ARITHMETIC",
    "ORDERINGS",
    "Compare",
    "Eval",
    "Lookup",
    "and2",
    "as_number",
    "eq_number",
    "eq_str",
    "equals",
    "is_number",
    "or2",
    "ordered",
    "to_number",
]

Lookup: TypeAlias = Callable[[str], object]
"""Resolves an identifier to its value: str, int, float, bool, or None when absent."""

Eval: TypeAlias = Callable[[Lookup], object]
"""A compiled (sub)expression: its value for the message a ``Lookup`` describes."""

Compare: TypeAlias = Callable[[float, float], bool]


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def as_number(value: object) -> int | float | None:
    """``value`` if it is an int or a float (not a bool), else None."""
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


def to_number(value: object, convert: bool) -> int | float | None:
    """An arithmetic operand as a number, or None (UNKNOWN)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    if convert and isinstance(value, str):
        # Artemis ArithmeticExpression.asNumber: a '.' makes it a double, else a long.
        return _parse_float(value) if "." in value else _parse_int(value)
    return None


def equals(a: object, b: object, convert: bool) -> bool | None:
    """``a = b``: UNKNOWN with a NULL, FALSE for unlike types (unless converted)."""
    if a is None or b is None:
        return None
    if isinstance(a, str):
        if isinstance(b, str):
            return a == b
        if convert and (isinstance(b, bool) or is_number(b)):
            return _coerce(a, b) == b
        return False
    if isinstance(a, bool):
        if isinstance(b, bool):
            return a is b
        if convert and isinstance(b, str):
            return a is _coerce(b, a)
        return False
    if is_number(a):
        if is_number(b):
            return a == b
        if convert and isinstance(b, str):
            return _coerce(b, a) == a
        return False
    return False


def eq_str(value: object, constant: str) -> bool | None:
    """``value = constant`` for a string constant, without :func:`equals`'s dispatch."""
    if value is None:
        return None
    return value == constant if isinstance(value, str) else False


def eq_number(value: object, constant: object) -> bool | None:
    """``value = constant`` for a number constant, without :func:`equals`'s dispatch."""
    if value is None:
        return None
    return value == constant if is_number(value) else False


def ordered(op: Compare, a: object, b: object, convert: bool) -> bool | None:
    """``a < b`` and the like: numbers only; UNKNOWN with a NULL, else FALSE for non-numbers."""
    if a is None or b is None:
        return None
    if convert:
        if isinstance(a, str) and is_number(b):
            a = _coerce(a, b)
        elif isinstance(b, str) and is_number(a):
            b = _coerce(b, a)
    x, y = as_number(a), as_number(b)
    if x is None or y is None:
        return False
    return op(x, y)


def and2(a: object, b: object) -> bool | None:
    """SQL ``a AND b``."""
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def or2(a: object, b: object) -> bool | None:
    """SQL ``a OR b``."""
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


ARITHMETIC: Final[Mapping[str, Callable[[int | float, int | float], int | float]]] = {
    "+": _add,
    "-": _sub,
    "*": _mul,
    "/": _div,
    "%": _mod,
}

ORDERINGS: Final[Mapping[str, Compare]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
