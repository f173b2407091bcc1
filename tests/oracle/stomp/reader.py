"""Incremental STOMP frame decoder: bytes in, frames and heart-beats out.

Theory of operation
-------------------
All unconsumed input lives in one ``bytearray``. Offset 0 is always the first byte of the
event being decoded (a frame or a heart-beat EOL); consumed bytes are deleted from the front as
each event completes (CPython deletes from the front of a bytearray by moving its start
pointer, so this is cheap and the buffer never holds finished frames).

A frame is decoded in three phases; each phase only ever *searches* with ``bytearray.find``
(C speed, no per-byte Python loop), and remembers in ``_scan`` where its last unsuccessful
search stopped, so bytes that trickle in one at a time are searched once, not re-scanned from
the start of the frame each time (no O(n²) on slow senders):

``COMMAND``  Between frames. A LF or CRLF here is a heart-beat (STOMP 1.1+; also the optional
             EOLs after a 1.2 frame's NUL, and the stray LF some 1.0 clients send): it becomes
             a :class:`Heartbeat` event. A CR followed by anything else is an error. Otherwise
             search LF; the line (minus one trailing CR) must be a command this side may
             receive.
``HEADERS``  Search LF line by line, only *counting*: each line's length, the number of lines
             and their total size are checked against :class:`FrameLimits` as soon as they are
             known, and an unfinished line is checked against the line and total limits while
             it grows. An empty line ends the block; only then is the whole block decoded at
             once (one UTF-8 decode, one regex pass) under the rules of the negotiated version
             (:mod:`.headers`), because those rules may depend on headers of the frame itself
             (a CONNECT without ``accept-version`` is a 1.0 frame).
``BODY``     With ``content-length`` (the first one, if repeated): wait for that many bytes
             plus one, which must be NUL. Without it: search the first NUL. Either way the body
             is bounded by ``max_body_size``, checked on the header value or while bytes arrive.

Any violation raises :class:`RemoteProtocolError`; the decoder itself keeps no error state
(the :class:`Connection` does), it just must not be used again.
"""

from __future__ import annotations

from typing import Final, NoReturn

from artemis_py.protocol.errors import RemoteProtocolError
from artemis_py.protocol.stomp.frames import Command, Frame, Heartbeat
from artemis_py.protocol.stomp.limits import FrameLimits
from oracle.stomp.headers import (
    UNESCAPED_COMMANDS,
    VERSION_RULES,
    HeaderRules,
    decode_headers,
    show,
)

__all__ = ["FrameReader"]

_LF: Final = 10
_CR: Final = 13
_COMMAND: Final = 0
_HEADERS: Final = 1
_BODY: Final = 2

_HEARTBEAT: Final = Heartbeat()
_ALL_COMMANDS: Final = {member.value.encode("ascii"): member for member in Command}


def _is_10_connect(command: str, block: bytes | bytearray) -> bool:
    """Whether an unescaped frame (CONNECT/STOMP/CONNECTED) is itself a STOMP 1.0 frame.

    A CONNECT without ``accept-version`` and a CONNECTED without a ``version`` above 1.0 are
    1.0 frames, read with the 1.0 rules (leading-whitespace trimming). STOMP is 1.1+ only.
    """
    if command == Command.STOMP:
        return False
    lines = b"\n" + bytes(block)
    if command == Command.CONNECT:
        return b"\naccept-version:" not in lines
    # CONNECTED: the first version header decides; absent means 1.0.
    start = lines.find(b"\nversion:")
    if start < 0:
        return True
    end = lines.find(b"\n", start + 1)
    value = lines[start + 9 : end if end >= 0 else len(lines)]
    return value.strip(b" \t\r") == b"1.0"


class FrameReader:
    """Decodes frames from bytes fed in arbitrary pieces (see the module doc)."""

    __slots__ = (
        "_body_start",
        "_buf",
        "_command",
        "_commands",
        "_content_length",
        "_header_bytes",
        "_header_count",
        "_headers",
        "_headers_start",
        "_limits",
        "_line_start",
        "_max_bytes",
        "_max_count",
        "_max_line",
        "_phase",
        "_scan",
    )

    def __init__(self, limits: FrameLimits, receivable: frozenset[Command]) -> None:
        self._buf = bytearray()
        self._limits = limits
        self._max_line = limits.max_header_line_length
        self._max_count = limits.max_header_count
        self._max_bytes = limits.max_header_bytes
        self._commands = {raw: cmd for raw, cmd in _ALL_COMMANDS.items() if cmd in receivable}
        self._headers: tuple[tuple[str, str], ...] = ()
        self._command: Command = Command.SEND
        self._reset()

    def _reset(self) -> None:
        self._phase = _COMMAND
        self._scan = 0  # where the next search for a delimiter starts
        self._line_start = 0
        self._headers_start = 0
        self._header_count = 0
        self._header_bytes = 0
        self._body_start = 0
        self._content_length: int | None = None

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append received bytes."""
        self._buf += data

    def clear(self) -> None:
        """Drop everything buffered (after an error)."""
        self._buf = bytearray()
        self._reset()

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as events."""
        return len(self._buf)

    def next_item(self, version: str | None) -> Frame | Heartbeat | None:
        """The next complete frame or heart-beat, or None if more bytes are needed.

        ``version`` is the negotiated STOMP version (None before negotiation: 1.0 rules) and
        chooses how the headers of a frame completed by this call are decoded.
        """
        buf = self._buf
        if self._phase == _COMMAND:
            if not buf:
                return None
            first = buf[0]
            if first == _LF:
                del buf[:1]
                return _HEARTBEAT
            if first == _CR:
                if len(buf) < 2:
                    return None
                if buf[1] != _LF:
                    raise RemoteProtocolError("CR not followed by LF between frames")
                del buf[:2]
                return _HEARTBEAT
            if not self._read_command():
                return None
        if self._phase == _HEADERS and not self._read_headers(version):
            return None
        return self._read_body()

    def _read_command(self) -> bool:
        buf = self._buf
        limit = self._limits.max_command_length
        newline = buf.find(b"\n", self._scan)
        if newline < 0:
            if len(buf) > limit + 1:  # + 1: the last byte may be the CR of a CRLF
                raise RemoteProtocolError(
                    f"command line longer than {limit} bytes ({show(buf[:20])})"
                )
            self._scan = len(buf)
            return False
        end = newline - 1 if buf[newline - 1] == _CR else newline
        if end > limit:
            raise RemoteProtocolError(f"command line longer than {limit} bytes ({show(buf[:20])})")
        raw = bytes(buf[:end])
        command = self._commands.get(raw)
        if command is None:
            if raw in _ALL_COMMANDS:
                raise RemoteProtocolError(f"{raw.decode()} frames may not be sent to this side")
            raise RemoteProtocolError(f"unknown command {show(raw)}")
        self._command = command
        self._headers_start = self._line_start = self._scan = newline + 1
        self._phase = _HEADERS
        return True

    def _read_headers(self, version: str | None) -> bool:
        buf = self._buf
        start = self._headers_start
        if self._scan == start:
            # Fast path, the whole block already buffered with LF endings: one search for
            # the blank line (from the command line's LF, so no headers is found too) and
            # the limits checked on the block as a whole. Anything else (CRs, a block longer
            # than one line may be, a limit exceeded, a partial block) takes the loop below,
            # which finds the same end and raises the precise error.
            end = buf.find(b"\n\n", start - 1, start + self._max_line + 2)  # not into a body
            if end >= 0 and buf.find(b"\r", start, end) < 0:
                if end < start:
                    return self._end_headers(version, start, start)
                size = end - start
                lines = buf.count(b"\n", start, end) + 1
                if (
                    size <= self._max_line
                    and lines <= self._max_count
                    and size - lines + 1 <= self._max_bytes
                ):
                    return self._end_headers(version, end + 1, end + 1)
        # Hot loop: counters live in locals and are stored back only when data runs out.
        find = buf.find
        max_line = self._max_line
        max_count = self._max_count
        max_bytes = self._max_bytes
        count = self._header_count
        total = self._header_bytes
        line_start = self._line_start
        scan = self._scan
        while True:
            newline = find(b"\n", scan)
            if newline < 0:
                partial = len(buf) - line_start  # + 1 below: its last byte may be a CR
                if partial > max_line + 1:
                    self._line_too_long(line_start)
                if total + partial > max_bytes + 1:
                    raise RemoteProtocolError(f"frame headers larger than {max_bytes} bytes")
                self._line_start = line_start
                self._scan = len(buf)
                self._header_count = count
                self._header_bytes = total
                return False
            length = newline - line_start
            if length and buf[newline - 1] == _CR:
                length -= 1
            if not length:
                break
            count += 1
            total += length
            if length > max_line or count > max_count or total > max_bytes:
                if length > max_line:
                    self._line_too_long(line_start)
                if count > max_count:
                    raise RemoteProtocolError(f"more than {max_count} headers in a frame")
                raise RemoteProtocolError(f"frame headers larger than {max_bytes} bytes")
            line_start = scan = newline + 1

        return self._end_headers(version, line_start, newline)

    def _end_headers(self, version: str | None, line_start: int, newline: int) -> bool:
        """Decode the block: ``line_start`` is the blank line, ``newline`` its LF."""
        buf = self._buf
        # The block ends with the LF before the blank line.
        self._body_start = self._scan = newline + 1
        self._phase = _BODY
        start = self._headers_start
        if line_start == start:
            self._headers = ()
            return True
        block = buf[start : line_start - 1]
        command = self._command
        if command in UNESCAPED_COMMANDS:
            rules = HeaderRules.V10 if _is_10_connect(command, block) else HeaderRules.RAW
        else:
            rules = VERSION_RULES[version]
        headers = decode_headers(block, rules)
        if b"content-length:" in block:  # cheap pre-check: that name never needs escaping
            for name, value in headers:
                if name == "content-length":
                    self._content_length = self._parse_content_length(value)
                    break
        self._headers = headers
        return True

    def _line_too_long(self, line_start: int) -> NoReturn:
        raise RemoteProtocolError(
            f"header line longer than {self._max_line} bytes "
            f"({show(self._buf[line_start : line_start + 20])})"
        )

    def _parse_content_length(self, value: str) -> int:
        if not (value.isascii() and value.isdigit()):
            raise RemoteProtocolError(
                f"content-length must be a non-negative integer, got {show(value)}"
            )
        length = int(value)
        if length > self._limits.max_body_size:
            raise RemoteProtocolError(
                f"content-length {length} exceeds the maximum frame body size of "
                f"{self._limits.max_body_size} bytes"
            )
        return length

    def _read_body(self) -> Frame | None:
        buf = self._buf
        start = self._body_start
        length = self._content_length
        if length is not None:
            end = start + length
            if len(buf) <= end:
                return None
            if buf[end] != 0:
                raise RemoteProtocolError(
                    f"frame body not followed by NUL after content-length {length} bytes"
                )
        else:
            end = buf.find(b"\x00", self._scan)
            limit = self._limits.max_body_size
            if end < 0:
                if len(buf) - start > limit:
                    raise RemoteProtocolError(f"frame body larger than {limit} bytes")
                self._scan = len(buf)
                return None
            if end - start > limit:
                raise RemoteProtocolError(f"frame body larger than {limit} bytes")
        if end == start:
            body = b""
        else:
            with memoryview(buf) as view:
                body = view[start:end].tobytes()  # one copy (a bytearray slice would be two)
        frame = Frame(self._command, self._headers, body)
        del buf[: end + 1]
        self._headers = ()
        # _reset(), inlined: the command phase sets the line/header offsets itself.
        self._phase = _COMMAND
        self._scan = self._header_count = self._header_bytes = 0
        self._content_length = None
        return frame
