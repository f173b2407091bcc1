"""Header encoding per STOMP version: escaping, unescaping and what each version can carry.

Which rules apply to a frame (:func:`rules_for`):

* STOMP 1.0 (:attr:`HeaderRules.V10`): no escaping at all. A name cannot contain ``:`` or LF,
  a value cannot contain LF. When decoding, leading spaces and tabs of a value are dropped, as
  Artemis's 1.0 decoder does (``StompDecoder.TRIM_LEADING_HEADER_VALUE_WHITESPACE``; ActiveMQ
  Classic trims too): the 1.0 spec is silent and its examples were read as ``name: value``.
* CONNECT, STOMP and CONNECTED frames are never escaped in any version, so that a 1.0 peer can
  read them (STOMP 1.1/1.2 "Value Encoding"). They decode with :attr:`HeaderRules.RAW` (no
  trimming) unless they are themselves 1.0 frames: a CONNECT without ``accept-version`` or a
  CONNECTED without a ``version`` above 1.0 is read with the 1.0 rules, trimming included.
* STOMP 1.1 (:attr:`HeaderRules.V11`): ``\\n`` (LF), ``\\c`` (``:``), ``\\\\`` (``\\``).
* STOMP 1.2 (:attr:`HeaderRules.V12`): also ``\\r`` (CR).

In 1.1 and 1.2 an undefined escape (``\\t``, a lone trailing ``\\``, ``\\r`` in 1.1) is a fatal
protocol error, as both specs require. A raw ``:`` inside a value (after the first colon) is
accepted in every version and kept: the 1.1/1.2 grammar forbids it but senders do it, and it is
unambiguous.

NUL: no version can carry a NUL in a header, and none is accepted (a
:class:`RemoteProtocolError` when decoding, a :class:`LocalProtocolError` when encoding). The
1.2 grammar does not exclude it, but a frame ends at its NUL for every reader that frames
without ``content-length`` (and for many that look for the NUL before reading headers), so a
NUL a producer put in a header would end the MESSAGE that carries it to another client early
and let the bytes after it be read as a frame of their own (frame injection).

Line endings: the decoder accepts CRLF as well as LF in every version (lenient, like most
servers), so one CR right before the LF is never part of a value. The encoder therefore refuses
a value ending in CR where the version has no ``\\r`` escape (1.0, 1.1, unescaped frames),
and a LF (or, in names, a ``:``) where there is no escaping at all.
"""

from __future__ import annotations

import enum
import re
from typing import Final

from artemis_py.protocol.errors import LocalProtocolError, RemoteProtocolError
from artemis_py.protocol.stomp.frames import Command

__all__ = [
    "UNESCAPED_COMMANDS",
    "VERSION_RULES",
    "HeaderRules",
    "decode_headers",
    "encode_headers",
    "rules_for",
    "show",
]


class HeaderRules(enum.Enum):
    """How header names and values are written on the wire."""

    V10 = "1.0"  # no escaping; decoding trims leading whitespace of values
    RAW = "raw"  # no escaping, no trimming: CONNECT/STOMP/CONNECTED of a 1.1+ exchange
    V11 = "1.1"
    V12 = "1.2"


UNESCAPED_COMMANDS: Final = frozenset({Command.CONNECT, Command.STOMP, Command.CONNECTED})

#: The rules of each version's ordinary frames; None (not negotiated yet) reads and writes as 1.0.
VERSION_RULES: Final = {
    None: HeaderRules.V10,
    "1.0": HeaderRules.V10,
    "1.1": HeaderRules.V11,
    "1.2": HeaderRules.V12,
}


def rules_for(command: str, version: str | None) -> HeaderRules:
    """The rules for *encoding* ``command`` once ``version`` is negotiated (None = not yet)."""
    if command in UNESCAPED_COMMANDS:
        return HeaderRules.RAW
    return VERSION_RULES[version]


def show(text: str | bytes | bytearray, limit: int = 40) -> str:
    """A short, single-line, printable rendering of peer data for error messages."""
    if not isinstance(text, str):
        text = bytes(text).decode("utf-8", "backslashreplace")
    if len(text) > limit:
        return repr(text[:limit]) + "..."
    return repr(text)


# --- decoding ----------------------------------------------------------------------------

_UNESCAPES_11: Final = {"n": "\n", "c": ":", "\\": "\\"}
_UNESCAPES_12: Final = {**_UNESCAPES_11, "r": "\r"}
_ESCAPE_RE: Final = re.compile(r"\\(.?)", re.DOTALL)


def _unescape(text: str, table: dict[str, str], version: str) -> str:
    def replace(match: re.Match[str]) -> str:
        char = match.group(1)
        try:
            return table[char]
        except KeyError:
            sequence = "\\" + char if char else "a trailing \\"
            raise RemoteProtocolError(
                f"undefined escape sequence {sequence!r} in a header (STOMP {version})"
            ) from None

    return _ESCAPE_RE.sub(replace, text)


# One header line: a non-empty name without ':' or LF, ':', the rest of the line. In 1.0 the
# leading spaces/tabs of the value are not captured (trimmed). MULTILINE: ^/$ at each line.
_LINE_RE: Final = re.compile(r"^([^:\n]+):(.*)$", re.MULTILINE)
_LINE_RE_10: Final = re.compile(r"^([^:\n]+):[ \t]*(.*)$", re.MULTILINE)


def decode_headers(block: bytes | bytearray, rules: HeaderRules) -> tuple[tuple[str, str], ...]:
    """Decode a header block: header lines joined by LF, each possibly ending in CR.

    The block has no final EOL and no blank line. Raises :class:`RemoteProtocolError` on
    invalid UTF-8, a NUL, a line without ``:``, an empty name or an undefined escape.
    """
    try:
        text = block.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RemoteProtocolError(
            f"frame headers are not valid UTF-8 (byte {exc.start} of the header block)"
        ) from None
    if "\x00" in text:
        line = text[: text.index("\x00")].rsplit("\n", 1)[-1]
        raise RemoteProtocolError(f"NUL in a header ({show(line)} before it)")
    if "\r" in text:
        # A CR right before a LF belongs to the EOL (the block's last LF was cut off).
        text = text.replace("\r\n", "\n")
        if text[-1] == "\r":
            text = text[:-1]
    pairs = (_LINE_RE_10 if rules is HeaderRules.V10 else _LINE_RE).findall(text)
    if len(pairs) != text.count("\n") + 1:  # some line did not match: say which
        for line in text.split("\n"):
            name, colon, _ = line.partition(":")
            if not colon:
                raise RemoteProtocolError(f"header line without ':' ({show(line)})")
            if not name:
                raise RemoteProtocolError(f"header line with an empty name ({show(line)})")
        raise AssertionError("unreachable: every line matched")  # pragma: no cover
    if "\\" in text:
        if rules is HeaderRules.V12:
            table: dict[str, str] = _UNESCAPES_12
        elif rules is HeaderRules.V11:
            table = _UNESCAPES_11
        else:
            return tuple(pairs)
        version = rules.value
        return tuple(
            (_unescape(name, table, version), _unescape(value, table, version))
            if "\\" in name or "\\" in value
            else (name, value)
            for name, value in pairs
        )
    return tuple(pairs)


# --- encoding ----------------------------------------------------------------------------


def _escape_11(text: str) -> str:
    # str.replace returns its input untouched when there is nothing to replace, so four of
    # them cost less than one str.translate on the short strings headers are.
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace(":", "\\c")


def _escape_12(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace(":", "\\c").replace("\r", "\\r")


def encode_headers(headers: tuple[tuple[str, str], ...], rules: HeaderRules) -> list[str]:
    """The header lines of a frame as text pieces (``name``, ``:``, ``value``, LF, ...).

    Raises :class:`LocalProtocolError` for what ``rules`` cannot carry (see module doc).
    """
    for name, value in headers:
        if "\x00" in name or "\x00" in value:
            raise LocalProtocolError(f"header {show(name)}: no STOMP version can carry a NUL")
    pieces: list[str] = []
    append = pieces.append
    if rules is HeaderRules.V12:
        for name, value in headers:
            if not name:
                raise LocalProtocolError("a header name must not be empty")
            append(_escape_12(name))
            append(":")
            append(_escape_12(value))
            append("\n")
    elif rules is HeaderRules.V11:
        for name, value in headers:
            if not name:
                raise LocalProtocolError("a header name must not be empty")
            if value[-1:] == "\r":
                raise LocalProtocolError(
                    f"header {show(name)}: STOMP 1.1 cannot carry a value ending in CR"
                )
            append(_escape_11(name))
            append(":")
            append(_escape_11(value))
            append("\n")
    else:
        for name, value in headers:
            if not name or ":" in name or "\n" in name:
                raise LocalProtocolError(
                    f"header name {show(name)} must be non-empty without ':' or LF "
                    f"(no escaping in STOMP 1.0 and in CONNECT/CONNECTED frames)"
                )
            if "\n" in value or value[-1:] == "\r":
                raise LocalProtocolError(
                    f"header {show(name)}: value must not contain LF or end in CR "
                    f"(no escaping in STOMP 1.0 and in CONNECT/CONNECTED frames)"
                )
            append(name)
            append(":")
            append(value)
            append("\n")
    return pieces
