"""The sans-IO STOMP connection: one end's parse buffer, version and state.

Usage (server side; the Trio shell owns the socket)::

    conn = Connection(SERVER, limits)
    conn.receive_data(await stream.receive_some())      # b"" at end of stream
    while (event := conn.next_event()) is not NEED_DATA:
        if isinstance(event, Frame) and event.command in ("CONNECT", "STOMP"):
            version = negotiate_version(event.get("accept-version"))  # or send ERROR
            conn.accept_connect(version)                 # next_event() was going to be PAUSED
            await stream.send_all(conn.send(Frame("CONNECTED", (("version", version),))))
        ...

State (h11's model, per direction; :class:`ConnectionState`):

* The client's first frame must be CONNECT or STOMP (else :class:`RemoteProtocolError`), and
  only one is allowed. The server's first frame must be CONNECTED or ERROR.
* ``version`` is None until negotiated. The server sets it with :meth:`accept_connect` (or by
  sending CONNECTED, whose ``version`` header then decides); until then :meth:`next_event`
  returns :data:`PAUSED` after the CONNECT, because the frames a client pipelines behind its
  CONNECT decode differently in 1.0, 1.1 and 1.2. The client takes the version from the
  CONNECTED it receives (absent = 1.0) and checks that its CONNECT offered it.
* After DISCONNECT (client to server) or ERROR (server to client) nothing but heart-beat EOLs
  may follow in that direction. The server may still answer a DISCONNECT (its RECEIPT).
* A :class:`RemoteProtocolError` from :meth:`next_event` puts ``their_state`` in ERROR for
  good: later calls raise again, and buffered bytes are dropped. We may still send (the ERROR
  frame that reports it). A :class:`LocalProtocolError` from :meth:`send` puts ``our_state``
  in ERROR: nothing more can be sent.
* Before negotiation an ERROR frame is encoded, and decoded, with the STOMP 1.0 rules.
"""

from __future__ import annotations

from typing import Final

from artemis_py.protocol.errors import LocalProtocolError, RemoteProtocolError
from artemis_py.protocol.stomp.frames import (
    CLIENT_COMMANDS,
    NEED_DATA,
    PAUSED,
    SERVER_COMMANDS,
    Command,
    ConnectionClosed,
    Frame,
    Heartbeat,
    Sentinel,
)
from artemis_py.protocol.stomp.limits import FrameLimits
from artemis_py.protocol.stomp.roles import ConnectionState, Role
from artemis_py.protocol.stomp.versions import SUPPORTED_VERSIONS, parse_versions
from oracle.stomp.headers import rules_for, show
from oracle.stomp.reader import FrameReader
from oracle.stomp.writer import encode_frame

__all__ = ["Connection"]

_CONNECTING: Final = ConnectionState.CONNECTING
_CONNECTED: Final = ConnectionState.CONNECTED
_CLOSED: Final = ConnectionState.CLOSED
_ERROR: Final = ConnectionState.ERROR
_CONNECT_COMMANDS: Final = frozenset({Command.CONNECT, Command.STOMP})
_HEARTBEAT_VERSIONS: Final = frozenset({"1.1", "1.2"})
_CONNECTION_CLOSED: Final = ConnectionClosed()
_DEFAULT_LIMITS: Final = FrameLimits()


class Connection:
    """One end of a STOMP connection, without I/O (see the module doc)."""

    __slots__ = (
        "_connect_received",
        "_eof",
        "_offered",
        "_our_state",
        "_paused",
        "_reader",
        "_sendable",
        "_their_error",
        "_their_state",
        "_version",
        "limits",
        "our_role",
        "their_role",
    )

    def __init__(self, our_role: Role, limits: FrameLimits = _DEFAULT_LIMITS) -> None:
        self.our_role = our_role
        self.their_role = Role.CLIENT if our_role is Role.SERVER else Role.SERVER
        self.limits = limits
        if our_role is Role.SERVER:
            receivable, self._sendable = CLIENT_COMMANDS, SERVER_COMMANDS
        else:
            receivable, self._sendable = SERVER_COMMANDS, CLIENT_COMMANDS
        self._reader = FrameReader(limits, receivable)
        self._version: str | None = None
        self._our_state = _CONNECTING
        self._their_state = _CONNECTING
        self._eof = False
        self._paused = False
        self._connect_received = False
        self._offered: tuple[str, ...] = ()  # the versions the CONNECT offered
        self._their_error: RemoteProtocolError | None = None

    # --- state ---------------------------------------------------------------------------

    @property
    def version(self) -> str | None:
        """The negotiated STOMP version ("1.0", "1.1", "1.2"), None until negotiated."""
        return self._version

    @property
    def our_state(self) -> ConnectionState:
        """State of what we send."""
        return self._our_state

    @property
    def their_state(self) -> ConnectionState:
        """State of what the peer sends."""
        return self._their_state

    def __repr__(self) -> str:
        return (
            f"<stomp.Connection {self.our_role.value} version={self._version} "
            f"our_state={self._our_state.name} their_state={self._their_state.name}>"
        )

    # --- receiving -----------------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Feed bytes from the peer; ``b""`` means the peer closed its side."""
        if self._their_state is _ERROR:
            return  # nothing more will be decoded; don't let the buffer grow
        if not data:
            self._eof = True
            return
        if self._eof:
            raise LocalProtocolError("receive_data() after the end of the stream (b'')")
        self._reader.feed(data)

    def next_event(self) -> Frame | Heartbeat | ConnectionClosed | Sentinel:
        """The next event: a :class:`Frame`, a :class:`Heartbeat`, :class:`ConnectionClosed`,
        or :data:`NEED_DATA` / :data:`PAUSED`. Raises :class:`RemoteProtocolError`."""
        if self._their_state is _ERROR:
            assert self._their_error is not None
            raise RemoteProtocolError(
                f"connection already failed: {self._their_error.message}",
                error_headers=self._their_error.error_headers,
            )
        if self._paused:
            return PAUSED
        try:
            item = self._reader.next_item(self._version)
            if item is None:
                if not self._eof:
                    return NEED_DATA
                if self._reader.buffered:
                    raise RemoteProtocolError(
                        f"connection closed in the middle of a frame "
                        f"({self._reader.buffered} bytes unread)"
                    )
                self._their_state = _CLOSED
                return _CONNECTION_CLOSED
            if type(item) is Frame:
                self._received(item)
            return item
        except RemoteProtocolError as exc:
            self._their_state = _ERROR
            self._their_error = exc
            self._paused = False
            self._reader.clear()
            raise

    def _received(self, frame: Frame) -> None:
        command = frame.command
        state = self._their_state
        if self.our_role is Role.SERVER:
            if state is _CONNECTED:
                if command == Command.DISCONNECT:
                    self._their_state = _CLOSED
                elif command in _CONNECT_COMMANDS:
                    raise RemoteProtocolError(f"{command} received on an established connection")
            elif state is _CONNECTING:
                if command not in _CONNECT_COMMANDS:
                    raise RemoteProtocolError(
                        f"the first frame must be CONNECT or STOMP, not {command}"
                    )
                self._connect_received = True
                self._offered = parse_versions(frame.get("accept-version"))
                self._their_state = _CONNECTED
                self._paused = True
            else:
                raise RemoteProtocolError(f"{command} frame received after DISCONNECT")
            return
        # client side
        if state is _CONNECTED:
            if command == Command.ERROR:
                self._their_state = _CLOSED
            elif command == Command.CONNECTED:
                raise RemoteProtocolError("CONNECTED received twice")
        elif state is _CONNECTING:
            if command == Command.ERROR:
                self._their_state = _CLOSED
            elif command == Command.CONNECTED:
                if self._our_state is _CONNECTING:
                    raise RemoteProtocolError("CONNECTED received before we sent CONNECT")
                version = (frame.get("version") or "1.0").strip()
                if version not in SUPPORTED_VERSIONS:
                    raise RemoteProtocolError(f"server chose unknown STOMP version {show(version)}")
                if version not in self._offered:
                    raise RemoteProtocolError(
                        f"server chose STOMP {version}, which our CONNECT did not offer "
                        f"({','.join(self._offered)})"
                    )
                self._version = version
                self._their_state = _CONNECTED
            else:
                raise RemoteProtocolError(f"{command} received before CONNECTED")
        else:
            raise RemoteProtocolError(f"{command} frame received after ERROR")

    # --- negotiation ---------------------------------------------------------------------

    def accept_connect(self, version: str) -> None:
        """Server side: fix the version after a CONNECT (see :func:`negotiate_version`).

        Ends :data:`PAUSED`. Sending CONNECTED afterwards must name the same version.
        """
        if self.our_role is not Role.SERVER:
            raise LocalProtocolError("only the server side accepts a CONNECT")
        if not self._connect_received:
            raise LocalProtocolError("accept_connect() before a CONNECT frame was received")
        if self._version is not None:
            raise LocalProtocolError(f"the version is already negotiated ({self._version})")
        if version not in SUPPORTED_VERSIONS:
            raise LocalProtocolError(f"unsupported STOMP version {version!r}")
        if version not in self._offered:
            raise LocalProtocolError(
                f"the client's CONNECT did not offer STOMP {version} ({','.join(self._offered)})"
            )
        self._version = version
        self._paused = False

    # --- sending -------------------------------------------------------------------------

    def send(self, frame: Frame, body_length: int | None = None) -> bytes:
        """The bytes to write for ``frame``. Raises :class:`LocalProtocolError`.

        ``body_length``: the caller sends the body (that long) and the closing NUL itself
        after the returned bytes (a MESSAGE whose body is streamed from a file)."""
        if self._our_state is _ERROR:
            raise LocalProtocolError("cannot send: an earlier send() failed")
        try:
            return self._send(frame, body_length)
        except LocalProtocolError:
            self._our_state = _ERROR
            raise

    def _send(self, frame: Frame, body_length: int | None) -> bytes:
        command = frame.command
        if command not in self._sendable:
            raise LocalProtocolError(f"a {self.our_role.value} cannot send {show(command)} frames")
        state = self._our_state
        if state is _CLOSED:
            ended_by = "ERROR" if self.our_role is Role.SERVER else "DISCONNECT"
            raise LocalProtocolError(f"cannot send {command} after {ended_by}")
        if self.our_role is Role.SERVER:
            if state is _CONNECTING:
                if command == Command.CONNECTED:
                    self._check_connected(frame)
                elif command != Command.ERROR:
                    raise LocalProtocolError(f"cannot send {command} before CONNECTED")
            elif command == Command.CONNECTED:
                raise LocalProtocolError("CONNECTED was already sent")
            data = encode_frame(frame, rules_for(command, self._version), body_length)
            if command == Command.CONNECTED:
                if self._version is None:  # no accept_connect(): CONNECTED decides
                    self._version = frame.get("version", "1.0")
                    self._paused = False
                self._our_state = _CONNECTED
            elif command == Command.ERROR:
                self._our_state = _CLOSED
            return data
        # client side
        if state is _CONNECTING:
            if command not in _CONNECT_COMMANDS:
                raise LocalProtocolError(f"the first frame must be CONNECT or STOMP, not {command}")
        elif command in _CONNECT_COMMANDS:
            raise LocalProtocolError(f"{command} was already sent")
        elif self._version is None:
            raise LocalProtocolError(
                f"cannot send {command} before CONNECTED arrives (the version is not negotiated)"
            )
        data = encode_frame(frame, rules_for(command, self._version), body_length)
        if state is _CONNECTING:
            self._offered = parse_versions(frame.get("accept-version"))
            self._our_state = _CONNECTED
        elif command == Command.DISCONNECT:
            self._our_state = _CLOSED
        return data

    def _check_connected(self, frame: Frame) -> None:
        if not self._connect_received:
            raise LocalProtocolError("cannot send CONNECTED before receiving CONNECT")
        version = frame.get("version", "1.0")
        if self._version is not None:
            if version != self._version:
                raise LocalProtocolError(
                    f"CONNECTED says version {show(version)} but {self._version} was accepted"
                )
        elif version not in SUPPORTED_VERSIONS:
            raise LocalProtocolError(f"CONNECTED names unsupported version {show(version)}")
        elif version not in self._offered:
            raise LocalProtocolError(
                f"CONNECTED names STOMP {version}, which the client did not offer "
                f"({','.join(self._offered)})"
            )

    def send_heartbeat(self) -> bytes:
        """The bytes of one heart-beat (an EOL), once connected with STOMP 1.1 or 1.2.

        Still allowed after our DISCONNECT or ERROR: the frame grammar lets EOLs follow a
        frame's NUL, so a heart-beat timer racing the close is harmless. Raises
        :class:`LocalProtocolError` (without changing state) before CONNECT/CONNECTED, in 1.0
        (no heart-beating) and after a failed :meth:`send`.
        """
        if self._our_state is _CONNECTING or self._our_state is _ERROR:
            raise LocalProtocolError(
                f"heart-beats need an established connection (our_state={self._our_state.name})"
            )
        if self._version is None:
            raise LocalProtocolError("heart-beats before CONNECTED: the version is not negotiated")
        if self._version not in _HEARTBEAT_VERSIONS:
            raise LocalProtocolError(f"STOMP {self._version} has no heart-beats (1.1+ only)")
        return b"\n"
