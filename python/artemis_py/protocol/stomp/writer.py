"""STOMP frame encoder: :class:`Frame` to bytes under a version's header rules.

Strict in what it sends: an unknown command, a body on a frame that may not have one, a
``content-length`` that does not match the body, a NUL in a body without ``content-length``,
or a header the rules cannot carry is a :class:`LocalProtocolError`, never a corrupt frame.
The headers are written in the frame's order; nothing is added (in particular no automatic
``content-length``: for STOMP 1.0 its presence tells Artemis a bytes message from a text one).
"""

from __future__ import annotations

from typing import Final

from artemis_py.protocol.errors import LocalProtocolError
from artemis_py.protocol.stomp.frames import BODY_COMMANDS, Command, Frame
from artemis_py.protocol.stomp.headers import HeaderRules, encode_headers, show

__all__ = ["encode_frame"]

_KNOWN_COMMANDS: Final = frozenset(member.value for member in Command)


def encode_frame(frame: Frame, rules: HeaderRules) -> bytes:
    """The wire bytes of ``frame``: command, headers, blank line, body, NUL (no trailing EOL)."""
    command = frame.command
    if command not in _KNOWN_COMMANDS:
        raise LocalProtocolError(f"unknown STOMP command {show(command)}")
    body = frame.body
    if body and command not in BODY_COMMANDS:
        raise LocalProtocolError(f"{command} frames cannot have a body (only SEND, MESSAGE, ERROR)")
    content_length = frame.get("content-length")
    if content_length is not None:
        if content_length != str(len(body)):
            raise LocalProtocolError(
                f"content-length {show(content_length)} does not match the {len(body)}-byte body"
            )
    elif b"\x00" in body:
        raise LocalProtocolError("a body containing NUL needs a content-length header")
    pieces = [command, "\n"]
    pieces += encode_headers(frame.headers, rules)
    pieces.append("\n")
    try:
        head = "".join(pieces).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise LocalProtocolError(
            f"frame headers are not encodable as UTF-8 ({exc.reason})"
        ) from None
    return b"".join((head, body, b"\x00"))
