"""STOMP frame encoder: :class:`Frame` to bytes under a version's header rules.

Strict in what it sends: an unknown command, a body on a frame that may not have one, a
``content-length`` that does not match the body, a NUL in a body without ``content-length``,
or a header the rules cannot carry (a NUL in any header, in every version) is a :class:`LocalProtocolError`, never a corrupt frame.
The headers are written in the frame's order; nothing is added (in particular no automatic
``content-length``: for STOMP 1.0 its presence tells Artemis a bytes message from a text one).
"""

from __future__ import annotations

from itertools import chain
from typing import Final

from artemis_py.protocol.errors import LocalProtocolError
from artemis_py.protocol.stomp.frames import BODY_COMMANDS, Command, Frame
from oracle.stomp.headers import HeaderRules, encode_headers, show

__all__ = ["encode_frame"]

_KNOWN_COMMANDS: Final = frozenset(member.value for member in Command)


def encode_frame(frame: Frame, rules: HeaderRules, body_length: int | None = None) -> bytes:
    """The wire bytes of ``frame``: command, headers, blank line, body, NUL (no trailing EOL).

    ``body_length``: the body is sent apart (streamed from a file by the caller) and is
    that long: only the command, headers and blank line are returned, and the caller sends
    the body and the NUL. ``frame.body`` must then be empty and ``content-length`` given.
    """
    command = frame.command
    if command not in _KNOWN_COMMANDS:
        raise LocalProtocolError(f"unknown STOMP command {show(command)}")
    body = frame.body
    if body_length is not None and (
        body or command not in BODY_COMMANDS or frame.get("content-length") is None
    ):
        raise LocalProtocolError("a body sent apart needs an empty body and content-length")
    length = len(body) if body_length is None else body_length
    if length and command not in BODY_COMMANDS:
        raise LocalProtocolError(f"{command} frames cannot have a body (only SEND, MESSAGE, ERROR)")
    content_length = frame.get("content-length")
    if content_length is not None:
        if content_length != str(length):
            raise LocalProtocolError(
                f"content-length {show(content_length)} does not match the {length}-byte body"
            )
    elif b"\x00" in body:
        raise LocalProtocolError("a body containing NUL needs a content-length header")
    headers = frame.headers
    # Fast path: no name or value holds a character any version escapes or refuses, so
    # every version writes the lines as they are (one C-level join instead of per-header
    # escaping: this is most of a MESSAGE frame's encoding cost).
    probe = "".join(chain.from_iterable(headers))
    lines = None
    if (
        "\\" not in probe
        and ":" not in probe
        and "\n" not in probe
        and "\r" not in probe
        and "\x00" not in probe
    ):
        lines = "\n".join(map(":".join, headers))
        if lines.startswith(":") or "\n:" in lines:
            lines = None  # an empty name: the general path refuses it
    if lines is None:
        text = "".join([command, "\n", *encode_headers(headers, rules), "\n"])
    elif headers:
        text = f"{command}\n{lines}\n\n"
    else:
        text = f"{command}\n\n"
    try:
        head = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise LocalProtocolError(
            f"frame headers are not encodable as UTF-8 ({exc.reason})"
        ) from None
    if body_length is not None:
        return head
    return b"".join((head, body, b"\x00"))
