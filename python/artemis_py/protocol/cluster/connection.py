"""The sans-IO cluster-link connection: one end's parse buffer, handshake and state.

Usage (the Trio shell owns the socket; drain ``data_to_send()`` after *every* call, including
one that raised, because the server's Reject is queued before the error is raised)::

    conn = ClientConnection(node_id=..., instance_id=..., cluster_name=..., connector=(h, p),
                            user=..., password=..., max_hops=1)
    conn.start()                                     # queues MAGIC + Hello
    await stream.send_all(conn.data_to_send())
    conn.receive_data(await stream.receive_some())   # b"" at end of stream
    while (event := conn.next_event()) is not NEED_DATA:
        ...                                          # Established, Bindings, Confirm, ...
    await stream.send_all(conn.data_to_send())       # e.g. the Auth answering a Challenge

Theory of operation
-------------------
*Handshake.* The connection answers handshake frames itself and never returns them as
events: the server checks the preamble as bytes arrive, answers Hello with Challenge (or
Reject), verifies Auth and answers Welcome (or Reject); the client answers Challenge with
Auth and verifies Welcome. Each side then returns one :class:`Established`. A server-side
refusal queues a :class:`Reject` and raises :class:`HandshakeError` (a
:class:`RemoteProtocolError`) carrying the reason plus what only the local log should see
(e.g. which of user and password was wrong; the Reject itself does not say). A client that
receives Reject gets it as an event. Before ``Established`` only handshake frames and Error
may arrive, and frames are limited to 64 KiB, so an unauthenticated peer cannot make us
buffer ``max_frame_size`` bytes.

*Roles.* Message, CreateQueues and Sealed are client-to-server only; Confirm, Bindings, Consumers
and Status are server-to-client only; Ping, Topology, Leaving and Error go either way. A
violation is a :class:`LocalProtocolError` in :meth:`Connection.send` and a
:class:`RemoteProtocolError` in :meth:`Connection.next_event`, detected from the 5-byte frame
header, before the body arrives.

*Purpose.* A link of purpose ``"replication"`` (:mod:`.replication`: a backup dialled its
primary) carries SyncFile, SyncDone and Records (server to client), Synced and Replicated
(client to server), Ping and Error, and nothing else; a link of any other purpose carries no
replication frame. Checked the same way, both ways, from the :class:`Established` purpose.

*Sequence numbers.* Message seqs strictly increase on one connection, and Confirm, being
cumulative, never goes backwards and never confirms a seq that was not sent. These are checked
both ways: a Confirm beyond what was sent would make the client forget unsent messages.
Likewise a journal's Replicated tickets never decrease.

*States* (:class:`ConnectionState`, one for the connection): IDLE (client before
:meth:`ClientConnection.start`) -> HANDSHAKING -> ESTABLISHED -> CLOSED when a Reject or Error
was sent or received or the peer closed the stream. Any protocol error -> ERROR for good:
``next_event`` raises again and buffered input is dropped; after a *remote* error we may still
send one Error frame to tell the peer why. After we sent Error or Reject, ``next_event`` still
decodes what the peer had in flight, until its end of stream.

*Buffering.* Input is one ``bytearray`` plus a read offset; a frame is decoded in place
through a memoryview once all of it is there (the 4-byte length says when), and the consumed
prefix is deleted only once it is large and at least half of the buffer, so each byte is
moved at most a bounded number of times and ``next_event`` costs O(frame). Output is a list
of byte strings joined by :meth:`Connection.data_to_send` (a Message payload is copied once).
"""

from __future__ import annotations

import enum
import struct
from typing import Final, Literal

from artemis_py.protocol.cluster.auth import transcript
from artemis_py.protocol.cluster.frames import (
    NEED_DATA,
    Challenge,
    Confirm,
    ConnectionClosed,
    Error,
    Established,
    Event,
    Frame,
    FrameType,
    Hello,
    Message,
    Reject,
    Replicated,
    Sentinel,
)
from artemis_py.protocol.cluster.replication import REPLICATION_FRAMES
from artemis_py.protocol.cluster.wire import (
    HEADER_SIZE,
    FrameFormatError,
    decode_body,
    encode_parts,
)
from artemis_py.protocol.errors import LocalProtocolError, ProtocolError, RemoteProtocolError

__all__ = [
    "HANDSHAKE_MAX_FRAME_SIZE",
    "PROTOCOL_VERSION",
    "SUPPORTED_VERSIONS",
    "Connection",
    "ConnectionState",
    "HandshakeError",
    "Role",
]

#: The cluster protocol version this code speaks.
PROTOCOL_VERSION: Final = 1
SUPPORTED_VERSIONS: Final = (PROTOCOL_VERSION,)
#: Frame size limit until the peer has authenticated (a Hello is well under 1 KiB).
HANDSHAKE_MAX_FRAME_SIZE: Final = 64 * 1024
#: Compact the input buffer once this many consumed bytes precede the read offset.
_COMPACT_AT: Final = 64 * 1024
_U32: Final = struct.Struct(">I")
_T = FrameType


class Role(enum.Enum):
    """Our end of the link: CLIENT dials out (sends messages, receives bindings/topology)."""

    CLIENT = "client"
    SERVER = "server"


class ConnectionState(enum.Enum):
    """The connection's state (see the module doc for the transitions)."""

    IDLE = "IDLE"
    HANDSHAKING = "HANDSHAKING"
    ESTABLISHED = "ESTABLISHED"
    CLOSED = "CLOSED"
    ERROR = "ERROR"


_IDLE: Final = ConnectionState.IDLE
_HANDSHAKING: Final = ConnectionState.HANDSHAKING
_ESTABLISHED: Final = ConnectionState.ESTABLISHED
_CLOSED: Final = ConnectionState.CLOSED
_ERROR: Final = ConnectionState.ERROR


class HandshakeError(RemoteProtocolError):
    """The handshake failed: incompatible versions or cluster names, wrong credentials, or a
    server that could not prove the cluster password. A configuration problem to report
    clearly, unlike a garbled frame."""


_EITHER: Final = frozenset(
    {_T.ERROR, _T.PING, _T.TOPOLOGY, _T.LEAVING, _T.PROPOSAL, _T.PROPOSAL_RESPONSE, _T.UNPROPOSAL}
)
#: Frames each role may send at all (the handshake ones included).
_FROM: Final = {
    Role.CLIENT: _EITHER
    | {_T.HELLO, _T.AUTH, _T.MESSAGE, _T.CREATE_QUEUES, _T.SEALED, _T.SYNCED, _T.REPLICATED},
    Role.SERVER: _EITHER
    | {_T.CHALLENGE, _T.WELCOME, _T.REJECT, _T.CONFIRM, _T.BINDINGS, _T.CONSUMERS, _T.STATUS}
    | {_T.SYNC_FILE, _T.SYNC_DONE, _T.RECORDS},
}
#: What a link of purpose "replication" carries; no other link carries REPLICATION_FRAMES.
_REPLICATION_LINK: Final = REPLICATION_FRAMES | {_T.ERROR, _T.PING}
_HANDSHAKE_FRAMES: Final = frozenset({_T.HELLO, _T.CHALLENGE, _T.AUTH, _T.WELCOME, _T.REJECT})
#: Frames each role may pass to send() once established.
_SENDABLE: Final = {role: frames - _HANDSHAKE_FRAMES for role, frames in _FROM.items()}
_NOTHING: Final[frozenset[int]] = frozenset()
_CONNECTION_CLOSED: Final = ConnectionClosed()


#: First words of the answers line-based servers give our preamble (a complete line that
#: is no command of theirs), and what they tell about the peer.
_TEXT_ANSWERS: Final = {b"ERROR": "a STOMP acceptor", b"HTTP/1": "an HTTP server"}


def show(data: bytes | bytearray) -> str:
    """The first bytes of ``data``, for an error message."""
    return repr(bytes(data[:16]))


class Connection:
    """What both ends share: framing, the receive/send state machine, the output buffer.

    Not instantiated directly: the two ends, and their handshakes, are
    :class:`~.handshake.ClientConnection` and :class:`~.handshake.ServerConnection`.
    """

    __slots__ = (
        "_buf",
        "_challenge",
        "_closed_by",
        "_eof",
        "_established",
        "_expect",
        "_failure",
        "_frames_received",
        "_hello",
        "_last_confirm",
        "_last_seq",
        "_out",
        "_peer_closed",
        "_pos",
        "_state",
        "_tickets",
        "_version",
        "_waiting_for",
        "_we_closed",
        "max_frame_size",
        "role",
    )

    def __init__(self, role: Role, max_frame_size: int) -> None:
        if max_frame_size < 1:
            raise ValueError(f"max_frame_size must be positive, got {max_frame_size}")
        self.role = role
        self.max_frame_size = max_frame_size
        self._hello: Hello | None = None  # the handshake, which both proofs cover
        self._challenge: Challenge | None = None
        self._buf = bytearray()
        self._pos = 0  # read offset into _buf
        self._out: list[bytes] = []
        self._state = _IDLE
        self._eof = False
        self._peer_closed = False  # a Reject/Error was received
        self._we_closed = False  # a Reject/Error was sent
        self._closed_by = ""  # name of the frame that closed the peer's side
        self._failure: ProtocolError | None = None
        self._expect: frozenset[int] = _NOTHING  # frame types the peer may send now
        self._waiting_for = "nothing"  # for error messages: what _expect means
        self._frames_received = 0
        self._established: Established | None = None
        self._version: int | None = None
        self._last_seq: int | None = None  # highest Message seq sent (client) / received
        self._last_confirm: int | None = None  # highest Confirm seq received / sent
        self._tickets: dict[int, int] = {}  # journal -> highest Replicated ticket sent / received

    # --- state ---------------------------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        """The connection's state (see the module doc)."""
        return self._state

    @property
    def established(self) -> Established | None:
        """The :class:`Established` event, once the handshake completed."""
        return self._established

    @property
    def version(self) -> int | None:
        """The negotiated cluster protocol version (None until the Challenge)."""
        return self._version

    def __repr__(self) -> str:
        return f"<cluster.{type(self).__name__} state={self._state.name} version={self._version}>"

    # --- receiving -----------------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Feed bytes from the peer; ``b""`` means the peer closed its side."""
        if self._state is _ERROR:
            return  # nothing more will be decoded; don't let the buffer grow
        if not data:
            self._eof = True
            return
        if self._eof:
            raise LocalProtocolError("receive_data() after the end of the stream (b'')")
        self._buf += data

    def next_event(self) -> Event | Sentinel:
        """The next event, or :data:`NEED_DATA`. Raises :class:`RemoteProtocolError` (for
        good: the connection is then in ERROR). May queue handshake replies: drain
        :meth:`data_to_send` afterwards, whatever it returned or raised."""
        if self._failure is not None:
            raise type(self._failure)(f"connection already failed: {self._failure.message}")
        try:
            while True:
                frame = self._read_frame()
                if frame is None:
                    if not self._eof:
                        return NEED_DATA
                    unread = len(self._buf) - self._pos
                    if unread:
                        raise RemoteProtocolError(
                            f"peer closed the connection mid-frame ({unread} bytes unread)"
                        )
                    self._state = _CLOSED
                    return _CONNECTION_CLOSED
                self._frames_received += 1
                event = self._received(frame)
                if event is not None:
                    return event
        except ProtocolError as exc:  # LocalProtocolError: our own handshake reply was bad
            self._fail(exc)
            raise

    def _fail(self, exc: ProtocolError) -> None:
        self._state = _ERROR
        self._failure = exc
        # A new buffer rather than clearing: a memoryview kept alive by the traceback would
        # forbid resizing the old one.
        self._buf = bytearray()
        self._pos = 0

    def _limit(self) -> int:
        if self._state is _ESTABLISHED:
            return self.max_frame_size
        return min(self.max_frame_size, HANDSHAKE_MAX_FRAME_SIZE)

    def _preamble(self) -> bool:
        """Server side: whether the preamble is complete (overridden there)."""
        return True

    def _read_frame(self) -> Frame | None:
        if not self._preamble():
            return None
        buf = self._buf
        pos = self._pos
        available = len(buf) - pos
        if available < 4:
            return None
        (length,) = _U32.unpack_from(buf, pos)
        if length == 0 or length > self._limit():
            if length == 0:
                raise self._framing_error("frame with length 0 (no frame type)")
            raise self._framing_error(
                f"frame of {length} bytes exceeds the maximum frame size of {self._limit()} "
                f"bytes" + ("" if self._state is _ESTABLISHED else " before authentication")
            )
        if available < HEADER_SIZE:
            return None
        frame_type = buf[pos + 4]
        if frame_type not in self._expect:
            raise self._unexpected(frame_type)
        end = pos + 4 + length
        if len(buf) < end:
            return None
        with memoryview(buf) as view, view[pos + HEADER_SIZE : end] as body:
            try:
                frame = decode_body(frame_type, body)
            except FrameFormatError as exc:
                raise RemoteProtocolError(str(exc)) from None
        if end == len(buf):
            buf.clear()
            end = 0
        elif end >= _COMPACT_AT and end * 2 >= len(buf):
            del buf[:end]
            end = 0
        self._pos = end
        return frame

    def _framing_error(self, problem: str) -> RemoteProtocolError:
        if self._frames_received == 0 and self.role is Role.CLIENT:
            # The server's very first bytes do not even frame: not one of our nodes.
            received = self._buf[self._pos :]
            what = _TEXT_ANSWERS.get(bytes(received[:6]).rstrip(b"\r\n"))
            if what is not None:
                return RemoteProtocolError(
                    f"{what} answered, not an artemis-py cluster acceptor (it sent "
                    f"{show(received)})"
                )
            return RemoteProtocolError(
                f"peer does not speak the artemis-py cluster protocol ({problem}; received "
                f"{show(received)})"
            )
        return RemoteProtocolError(problem)

    def _unexpected(self, frame_type: int) -> RemoteProtocolError:
        try:
            name = FrameType(frame_type).name
        except ValueError:
            return self._framing_error(f"unknown frame type {frame_type}")
        peer = Role.SERVER if self.role is Role.CLIENT else Role.CLIENT
        if frame_type not in _FROM[peer]:
            return RemoteProtocolError(f"a cluster {peer.value} may not send {name} frames")
        if self._peer_closed:
            return RemoteProtocolError(f"{name} frame after the peer's {self._closed_by}")
        if self._state is _ESTABLISHED:
            off_purpose = self._off_purpose(frame_type, name)
            if off_purpose is not None:
                return RemoteProtocolError(off_purpose)
            return RemoteProtocolError(f"{name} frame after the handshake completed")
        return RemoteProtocolError(
            f"{name} frame before the handshake completed (expected {self._waiting_for})"
        )

    def _received(self, frame: Frame) -> Event | None:
        """Act on a decoded frame of an expected type; the event to return, if any."""
        kind = type(frame)
        if kind is Message:
            assert isinstance(frame, Message)
            if self._last_seq is not None and frame.seq <= self._last_seq:
                raise RemoteProtocolError(
                    f"Message seq {frame.seq} does not follow the previous seq {self._last_seq}"
                )
            self._last_seq = frame.seq
            return frame
        if kind is Confirm:
            assert isinstance(frame, Confirm)
            if self._last_seq is None or frame.seq > self._last_seq:
                raise RemoteProtocolError(
                    f"Confirm of seq {frame.seq}, but the last seq sent is {self._last_seq}"
                )
            if self._last_confirm is not None and frame.seq < self._last_confirm:
                raise RemoteProtocolError(
                    f"Confirm of seq {frame.seq} after a Confirm of seq {self._last_confirm}"
                )
            self._last_confirm = frame.seq
            return frame
        if kind is Replicated:
            assert isinstance(frame, Replicated)
            backwards = self._ticket_backwards(frame)
            if backwards is not None:
                raise RemoteProtocolError(backwards)
            self._tickets[frame.journal] = frame.ticket
            return frame
        if kind is Error or kind is Reject:
            assert isinstance(frame, (Error, Reject))
            self._peer_closed = True
            self._closed_by = kind.__name__
            self._expect = _NOTHING
            if self._state is not _ERROR:
                self._state = _CLOSED
            return frame
        if frame.TYPE in _HANDSHAKE_FRAMES:
            return self._handshake(frame)
        return frame  # type: ignore[return-value]  # every other frame is an Event

    def _handshake(self, frame: Frame) -> Established | None:
        raise NotImplementedError

    def _become_established(self, event: Established) -> Established:
        self._established = event
        self._state = _ESTABLISHED
        expect = _FROM[Role.SERVER if self.role is Role.CLIENT else Role.CLIENT]
        if event.purpose == "replication":
            self._expect = expect & _REPLICATION_LINK
        else:
            self._expect = expect - _HANDSHAKE_FRAMES - REPLICATION_FRAMES
        self._waiting_for = "nothing"
        return event

    def _off_purpose(self, frame_type: int, name: str) -> str | None:
        """Why this established link, given its purpose, carries no ``name`` frames (None:
        it carries them)."""
        if self._established is None:
            return None  # only Error may be sent then, and it goes on any link
        purpose = self._established.purpose
        if purpose == "replication":
            if frame_type not in _REPLICATION_LINK:
                return f"a replication link carries no {name} frames"
        elif frame_type in REPLICATION_FRAMES:
            return f"only a replication link carries {name} frames (this one is a {purpose} link)"
        return None

    def _ticket_backwards(self, frame: Replicated) -> str | None:
        """Why ``frame`` goes back on its journal's last Replicated ticket (None: it does not)."""
        journal, ticket = frame.journal, frame.ticket
        last = self._tickets.get(journal) if type(journal) is int else None
        if last is not None and type(ticket) is int and ticket < last:
            return f"Replicated ticket {ticket} of journal {journal} after ticket {last}"
        return None

    # --- sending -------------------------------------------------------------------------

    def send(self, frame: Frame) -> None:
        """Queue ``frame`` for :meth:`data_to_send`. Raises :class:`LocalProtocolError` (and
        then the connection is in ERROR, unless it was already CLOSED or in ERROR)."""
        state = self._state
        frame_type = getattr(frame, "TYPE", None)
        if state is _IDLE:
            raise LocalProtocolError("cannot send before start()")
        if state is _ERROR or state is _CLOSED:
            if (
                frame_type is _T.ERROR
                and isinstance(self._failure, RemoteProtocolError)
                and not self._we_closed
            ):
                self._queue(frame)  # tell the peer what it did wrong, once
                self._we_closed = True
                return
            reason = self._failure.message if self._failure is not None else "closed"
            raise LocalProtocolError(f"cannot send on a {state.name} connection ({reason})")
        try:
            self._check_send(frame, frame_type)
            self._queue(frame)
        except LocalProtocolError as exc:
            self._fail(exc)
            raise
        if frame_type is _T.ERROR:
            self._we_closed = True
            self._state = _CLOSED
        elif frame_type is _T.MESSAGE:
            assert isinstance(frame, Message)
            self._last_seq = frame.seq
        elif frame_type is _T.CONFIRM:
            assert isinstance(frame, Confirm)
            self._last_confirm = frame.seq
        elif frame_type is _T.REPLICATED:
            assert isinstance(frame, Replicated)
            self._tickets[frame.journal] = frame.ticket

    def _check_send(self, frame: Frame, frame_type: FrameType | None) -> None:
        if frame_type is None:
            raise LocalProtocolError(f"not a cluster frame: {frame!r}")
        name = frame_type.name
        if frame_type not in _SENDABLE[self.role]:
            if frame_type in _FROM[self.role]:
                raise LocalProtocolError(f"{name} frames are sent by the connection itself")
            raise LocalProtocolError(f"a cluster {self.role.value} may not send {name} frames")
        if self._state is not _ESTABLISHED and frame_type is not _T.ERROR:
            raise LocalProtocolError(f"cannot send {name} before the handshake completed")
        off_purpose = self._off_purpose(frame_type, name)
        if off_purpose is not None:
            raise LocalProtocolError(off_purpose)
        if frame_type is _T.REPLICATED:
            assert isinstance(frame, Replicated)
            backwards = self._ticket_backwards(frame)
            if backwards is not None:
                raise LocalProtocolError(backwards)
        if frame_type is _T.MESSAGE:
            assert isinstance(frame, Message)
            last = self._last_seq
            if last is not None and type(frame.seq) is int and frame.seq <= last:
                raise LocalProtocolError(
                    f"Message seq {frame.seq} does not follow the previous seq {last}"
                )
        elif frame_type is _T.CONFIRM:
            assert isinstance(frame, Confirm)
            seq = frame.seq
            if type(seq) is int:
                if self._last_seq is None or seq > self._last_seq:
                    raise LocalProtocolError(
                        f"cannot confirm seq {seq}: the last Message received is {self._last_seq}"
                    )
                if self._last_confirm is not None and seq < self._last_confirm:
                    raise LocalProtocolError(
                        f"Confirm of seq {seq} after a Confirm of seq {self._last_confirm}"
                    )

    def _queue(self, frame: Frame) -> None:
        """Encode ``frame`` into the output buffer (LocalProtocolError if it is invalid)."""
        try:
            parts = encode_parts(frame)
        except FrameFormatError as exc:
            raise LocalProtocolError(str(exc)) from None
        length = sum(map(len, parts)) - 4
        if type(frame) is Message and frame.body_file is not None:
            length += len(frame.body_file)  # sent after these parts by the transport
        if length > self.max_frame_size:
            raise LocalProtocolError(
                f"{type(frame).__name__} frame of {length} bytes exceeds the maximum frame "
                f"size of {self.max_frame_size} bytes"
            )
        self._out += parts

    def data_to_send(self) -> bytes:
        """Everything queued for the peer since the last call (``b""`` if nothing)."""
        out = self._out
        if not out:
            return b""
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        return data

    def _transcript(self, role: Literal["client", "server"]) -> bytes:
        """What a proof covers: the Hello and the Challenge, as both ends saw them (a
        client only proceeds when the Challenge names its own cluster)."""
        hello, challenge = self._hello, self._challenge
        assert hello is not None
        assert challenge is not None
        return transcript(
            role,
            version=challenge.version,
            cluster_name=challenge.cluster_name,
            client_node_id=hello.node_id,
            client_instance_id=hello.instance_id,
            server_node_id=challenge.node_id,
            server_instance_id=challenge.instance_id,
            user=hello.user,
            client_nonce=hello.client_nonce,
            server_nonce=challenge.server_nonce,
        )
