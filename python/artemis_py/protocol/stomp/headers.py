"""What the per-version header rules are called from Python, and peer text in error messages.

The rules themselves (escaping, unescaping, what each version can carry) are the Rust codec's
(``rust/stomp/src/headers.rs`` documents them): STOMP 1.0 has no escaping and trims the
leading whitespace of values; CONNECT, STOMP and CONNECTED frames are never escaped
(:attr:`HeaderRules.RAW`); 1.1 escapes LF, ``:`` and ``\\``, 1.2 also CR.
"""

from __future__ import annotations

import enum
from typing import Final

from artemis_py._native import stomp_decode_headers

__all__ = ["VERSION_RULES", "HeaderRules", "decode_headers", "show"]


class HeaderRules(enum.Enum):
    """How header names and values are written on the wire."""

    V10 = "1.0"  # no escaping; decoding trims leading whitespace of values
    RAW = "raw"  # no escaping, no trimming: CONNECT/STOMP/CONNECTED of a 1.1+ exchange
    V11 = "1.1"
    V12 = "1.2"


#: The rules of each version's ordinary frames; None (not negotiated yet) reads and writes as 1.0.
VERSION_RULES: Final = {
    None: HeaderRules.V10,
    "1.0": HeaderRules.V10,
    "1.1": HeaderRules.V11,
    "1.2": HeaderRules.V12,
}


def show(text: str | bytes | bytearray, limit: int = 40) -> str:
    """A short, single-line, printable rendering of peer data for error messages (the Rust
    codec quotes peer data the same way)."""
    if not isinstance(text, str):
        text = bytes(text).decode("utf-8", "backslashreplace")
    if len(text) > limit:
        return repr(text[:limit]) + "..."
    return repr(text)


def decode_headers(block: bytes | bytearray, rules: HeaderRules) -> tuple[tuple[str, str], ...]:
    """Decode a header block: header lines joined by LF, each possibly ending in CR, no final
    EOL. Raises :class:`~artemis_py.protocol.errors.RemoteProtocolError` on invalid UTF-8, a
    NUL, a line without ``:``, an empty name or an undefined escape."""
    return stomp_decode_headers(bytes(block), rules.value)
