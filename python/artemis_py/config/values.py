"""Scalar values of broker.xml: ``${...}`` substitution, byte sizes, booleans, numbers, enums.

Every parser here takes the (already substituted and stripped) text and either returns the value
or raises :class:`ValueError` with a message fit to show the user; the caller adds file, line
and element.

Artemis rules these follow (checked against Artemis's ``XMLUtil``, ``ByteUtil`` and the schema):

* Substitution: ``${name}`` and ``${name:default}``; name and default are trimmed. Artemis looks
  at Java system properties, then the environment, and silently substitutes ``""`` for an unset
  name without a default. We only have the environment, and an unset name without a default is
  an error (it is almost always a mistake, and an empty directory or password is a bad surprise).
  A ``${`` without a closing ``}`` is left alone, as Artemis does.
* Byte sizes: a plain integer (``-1`` allowed), or digits, optional spaces, then ``K``/``M``/``G``
  optionally followed by ``i`` and optionally by ``B``, in any case. **All multipliers are binary:**
  ``512K`` = ``512KB`` = ``512KiB`` = 524288. There is no ``T`` and no fraction.
* Booleans: the schema type is ``xsd:boolean`` and Artemis reads it with Java's
  ``Boolean.parseBoolean``, so only ``true``/``false`` mean what they say (``1`` would pass the
  schema but be read as false). We accept exactly ``true`` and ``false``.
* ``xsd:int`` is 32-bit and ``xsd:long`` 64-bit signed; out-of-range values are errors (Artemis
  would truncate byte sizes silently when it stores them in an ``int``).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from typing import TypeVar

__all__ = [
    "INT_MAX",
    "INT_MIN",
    "LONG_MAX",
    "LONG_MIN",
    "SubstitutionError",
    "at_least",
    "between",
    "bytes32",
    "bytes64",
    "checked",
    "int32",
    "int64",
    "local_port",
    "minus_one_or_at_least",
    "non_empty",
    "parse_bool",
    "parse_bytes",
    "parse_enum",
    "parse_float",
    "parse_int",
    "port",
    "positive_float",
    "power_of_two",
    "substitute",
]

INT_MIN = -(2**31)
INT_MAX = 2**31 - 1
LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1

E = TypeVar("E", bound=enum.Enum)

_INTEGER = re.compile(r"[+-]?[0-9]+")
_BYTES = re.compile(r"\s*([0-9]+)\s*(?:([kKmMgG])[iI]?)?[bB]?\s*")
_BYTE_MULTIPLIERS = {"k": 1024, "m": 1024**2, "g": 1024**3}
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


class SubstitutionError(ValueError):
    """A ``${name}`` could not be resolved; ``offset`` is its index in the original text."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


def substitute(text: str, environ: Mapping[str, str]) -> tuple[str, list[SubstitutionError]]:
    """Replace every ``${name}`` / ``${name:default}`` in ``text`` from ``environ``.

    Returns the new text and the unresolved references (each is left as written in the text).
    """
    if "${" not in text:
        return text, []
    out: list[str] = []
    errors: list[SubstitutionError] = []
    position = 0
    while True:
        start = text.find("${", position)
        if start < 0:
            break
        end = text.find("}", start + 2)
        if end < 0:
            break  # unterminated: left as is, like Artemis
        out.append(text[position:start])
        body = text[start + 2 : end]
        name, has_default, default = body.partition(":")
        name = name.strip()
        if not name:
            errors.append(
                SubstitutionError(f"empty variable name in '{text[start : end + 1]}'", start)
            )
            out.append(text[start : end + 1])
        elif name in environ:
            out.append(environ[name])
        elif has_default:
            out.append(default.strip())
        else:
            errors.append(
                SubstitutionError(
                    f"environment variable '{name}' is not set and '${{{name}}}' has no default "
                    f"(write '${{{name}:default}}' to give one)",
                    start,
                )
            )
            out.append(text[start : end + 1])
        position = end + 1
    out.append(text[position:])
    return "".join(out), errors


def parse_bool(text: str) -> bool:
    if text == "true":
        return True
    if text == "false":
        return False
    if text in ("1", "0"):
        raise ValueError(
            f"expected true or false, got '{text}' (Artemis would read '{text}' as false)"
        )
    if text.lower() in ("true", "false"):
        raise ValueError(f"expected true or false, got '{text}' (write it in lower case)")
    raise ValueError(f"expected true or false, got '{text}'")


def _check_range(value: int, low: int, high: int, what: str) -> int:
    if not low <= value <= high:
        raise ValueError(f"{value} is out of range for {what} ({low}..{high})")
    return value


def parse_int(text: str, *, bits: int = 32) -> int:
    """An ``xsd:int`` (``bits=32``) or ``xsd:long`` (``bits=64``)."""
    if not _INTEGER.fullmatch(text):
        kind = "an integer" if bits == 32 else "a long integer"
        raise ValueError(f"expected {kind}, got '{text}'")
    value = int(text)
    if bits == 32:
        return _check_range(value, INT_MIN, INT_MAX, "a 32-bit integer")
    return _check_range(value, LONG_MIN, LONG_MAX, "a 64-bit integer")


def parse_bytes(text: str, *, bits: int = 64) -> int:
    """A byte size in Artemis notation (``10MiB``, ``512K``, ``1GB``, ``-1``); see module doc."""
    match = _BYTES.fullmatch(text)
    if match is not None:
        value = int(match.group(1))
        unit = match.group(2)
        if unit:
            value *= _BYTE_MULTIPLIERS[unit.lower()]
    elif _INTEGER.fullmatch(text):
        value = int(text)
    else:
        raise ValueError(
            f"expected a byte size such as 1048576, 512K, 10MiB or 1GB, got '{text}' "
            "(K, M and G are all binary multiples; no fractions)"
        )
    if bits == 32:
        return _check_range(value, INT_MIN, INT_MAX, "this size (at most 2GiB - 1)")
    return _check_range(value, LONG_MIN, LONG_MAX, "a 64-bit size")


def parse_float(text: str) -> float:
    if not _FLOAT.fullmatch(text):
        raise ValueError(f"expected a decimal number, got '{text}'")
    return float(text)


def parse_enum(text: str, enum_type: type[E]) -> E:
    """An enumeration value, spelled exactly as Artemis spells it (upper case)."""
    try:
        return enum_type[text]
    except KeyError:
        allowed = ", ".join(member.name for member in enum_type)
        hint = ""
        if text.upper() in enum_type.__members__:
            hint = f" (write it in upper case: {text.upper()})"
        raise ValueError(f"expected one of {allowed}, got '{text}'{hint}") from None


# --- converters with range checks (used by the parse tables) -----------------------------------


def int32(text: str) -> int:
    return parse_int(text)


def int64(text: str) -> int:
    return parse_int(text, bits=64)


def bytes32(text: str) -> int:
    return parse_bytes(text, bits=32)


def bytes64(text: str) -> int:
    return parse_bytes(text, bits=64)


def at_least(low: int) -> Callable[[int], str | None]:
    return lambda v: None if v >= low else f"must be at least {low}"


def between(low: int, high: int) -> Callable[[int], str | None]:
    return lambda v: None if low <= v <= high else f"must be between {low} and {high}"


def minus_one_or_at_least(low: int) -> Callable[[int], str | None]:
    return lambda v: None if v == -1 or v >= low else f"must be -1 or at least {low}"


def power_of_two(v: int) -> str | None:
    return None if v > 0 and v & (v - 1) == 0 else "must be a positive power of 2"


def checked(
    parse: Callable[[str], int], check: Callable[[int], str | None]
) -> Callable[[str], int]:
    """``parse`` followed by ``check``; a failed check raises :class:`ValueError`."""

    def convert(text: str) -> int:
        value = parse(text)
        problem = check(value)
        if problem is not None:
            raise ValueError(f"{value} {problem}")
        return value

    return convert


def port(text: str) -> int:
    """A TCP/UDP port, 1 to 65535."""
    return checked(int32, between(1, 65535))(text)


def local_port(text: str) -> int:
    """A port to bind to, or -1 for any (an anonymous port)."""
    value = int32(text)
    if value != -1 and not 1 <= value <= 65535:
        raise ValueError(f"{value} must be -1 (any port) or a port from 1 to 65535")
    return value


def positive_float(text: str) -> float:
    value = parse_float(text)
    if value <= 0:
        raise ValueError(f"{value} must be greater than 0")
    return value


def non_empty(text: str) -> str:
    if not text:
        raise ValueError("must not be empty")
    return text
