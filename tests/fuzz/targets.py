"""Fuzz targets for the sans-IO codecs: one function per target, ``target(data: bytes)``.

Each target asserts the codec's contract, not just "no crash" (docs/fuzzing.md):

* a parse yields events or raises the codec's :class:`RemoteProtocolError` (the peer broke
  the protocol), never any other exception -- an ``AssertionError``, ``IndexError``,
  ``UnicodeError``, ``RecursionError`` or a :class:`LocalProtocolError` out of a *receive*
  path is a bug;
* the events do not depend on how the bytes were cut into ``receive_data`` calls (the
  whole input at once and a drip-feed in pieces of the size the input's first byte picks
  give the same frames, and both fail or both do not);
* what decodes re-encodes to bytes that decode to the same frame (when the encoder accepts
  it: it is strict in what it sends, and refuses e.g. a body on a SUBSCRIBE, which the
  decoder accepts);
* ``stomp_differential``: the Rust-backed STOMP codec and the Python one it replaced (the
  oracle in ``tests/oracle/stomp``) give the same log for the input (events, states, errors
  with their messages, bytes sent; one event at a time and in batches), and encode every
  decoded frame alike under every header rule.

The STOMP targets run the Rust codec through its binding: atheris sees no coverage inside
it (cargo-fuzz does, with the Rust targets in ``fuzz/``), but the inputs are the ones the
node's codec must survive.

The same functions run under atheris (``tests/fuzz/main.py``, coverage-guided) and under
pytest, which replays the committed corpus and regressions (``tests/fuzz/test_fuzz_short.py``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any

from artemis_py._native import stomp_decode_frame, stomp_encode_frame
from artemis_py.protocol.cluster import (
    NEED_DATA as CLUSTER_NEED_DATA,
)
from artemis_py.protocol.cluster import (
    ClientConnection,
    ServerConnection,
    decode_frame,
    encode_frame,
)
from artemis_py.protocol.cluster import (
    ConnectionClosed as ClusterClosed,
)
from artemis_py.protocol.cluster import (
    Established as ClusterEstablished,
)
from artemis_py.protocol.cluster.connection import Connection as ClusterConnection
from artemis_py.protocol.errors import LocalProtocolError, RemoteProtocolError
from artemis_py.protocol.stomp import (
    CLIENT,
    NEED_DATA,
    PAUSED,
    SERVER,
    Command,
    Connection,
    ConnectionClosed,
    Frame,
    FrameLimits,
    Heartbeat,
    Role,
    negotiate_version,
)
from artemis_py.protocol.stomp.headers import VERSION_RULES
from oracle.stomp import Connection as OracleConnection
from oracle.stomp.transcript import converse, encodings, oracle_encodings

__all__ = ["TARGETS"]

# Small limits, so the limit checks are reached by inputs of a few hundred bytes.
LIMITS = FrameLimits(
    max_command_length=32,
    max_header_line_length=200,
    max_header_count=12,
    max_header_bytes=600,
    max_body_size=2000,
)
_UNESCAPED = frozenset({Command.CONNECT, Command.STOMP, Command.CONNECTED})


def _pieces(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


Outcome = tuple[list[Any], bool]  # (events, failed); STOMP's events with their version


def _same_however_cut(run: Callable[[Iterator[bytes]], Outcome], data: bytes) -> Outcome:
    """``run`` over the input (not empty) at once and drip-fed in pieces of the size its
    first byte picks: the outcome, which must be the same both ways."""
    size, data = data[0] % 17 + 1, data[1:]
    whole = run(iter([data]))
    drip = run(_pieces(data, size))
    assert whole == drip, f"chunking changed the events: {whole!r} != {drip!r}"
    return whole


# --- STOMP ---------------------------------------------------------------------------------


def _stomp_run(conn: Connection, chunks: Iterator[bytes]) -> Outcome:
    server = conn.our_role is SERVER
    events: list[Any] = []
    try:
        for chunk in [*filter(None, chunks), b""]:
            conn.receive_data(chunk)
            while True:
                version = conn.version
                event = conn.next_event()
                if event is NEED_DATA:
                    break
                if event is PAUSED:
                    assert server, "a client connection never pauses"
                    # What the node does: negotiate (VersionNegotiationError is a
                    # RemoteProtocolError) and accept.
                    connect = events[-1][1]
                    conn.accept_connect(negotiate_version(connect.get("accept-version")))
                    continue
                if not server and isinstance(event, Frame) and event.command == Command.CONNECTED:
                    version = None  # CONNECTED itself is read before the version is known
                events.append((version, event))
                if isinstance(event, ConnectionClosed):
                    return events, False
    except RemoteProtocolError:
        return events, True
    raise AssertionError("the stream ended without ConnectionClosed or an error")


def _stomp_server_run(chunks: Iterator[bytes]) -> Outcome:
    return _stomp_run(Connection(SERVER, LIMITS), chunks)


def _stomp_client_run(chunks: Iterator[bytes]) -> Outcome:
    conn = Connection(CLIENT, LIMITS)
    conn.send(Frame(Command.CONNECT, (("accept-version", "1.0,1.1,1.2"), ("host", "h"))))
    return _stomp_run(conn, chunks)


def _stomp_round_trip(version: str | None, frame: Frame) -> None:
    """What was decoded re-encodes (unless the strict encoder refuses it) and decodes the same."""
    rules = "raw" if frame.command in _UNESCAPED else VERSION_RULES[version].value
    try:
        wire = stomp_encode_frame(frame, rules)
    except LocalProtocolError:
        return
    # Re-decoded with the default limits (escaping may lengthen lines), every command taken.
    again, left = stomp_decode_frame(wire, version)
    assert again == frame, f"round trip changed the frame: {frame!r} -> {wire!r} -> {again!r}"
    assert left == 0


def _stomp_target(run: Callable[[Iterator[bytes]], Outcome]) -> Callable[[bytes], None]:
    def target(data: bytes) -> None:
        if not data:
            return
        for version, event in _same_however_cut(run, data)[0]:
            if isinstance(event, Frame):
                _stomp_round_trip(version, event)
            else:
                assert isinstance(event, Heartbeat | ConnectionClosed), event

    return target


stomp_server = _stomp_target(_stomp_server_run)
stomp_client = _stomp_target(_stomp_client_run)


def stomp_differential(data: bytes) -> None:
    """The first byte: bit 0 the role (0 server, 1 client), the rest the drip-feed piece
    size; then the stream, fed whole and in pieces to the Rust codec and the oracle."""
    if len(data) < 2:
        return
    role = Role.CLIENT if data[0] & 1 else Role.SERVER
    size, stream = data[0] // 2 % 17 + 1, data[1:]
    for pieces in ([stream], list(_pieces(stream, size))):
        for batch in (False, True):
            expected = converse(OracleConnection, role, pieces, LIMITS, batch=batch)
            got = converse(Connection, role, pieces, LIMITS, batch=batch)
            assert got == expected, f"the codecs differ: {got!r} != {expected!r}"
    for entry in expected:
        if entry[0] == "event" and isinstance(entry[1], Frame):
            assert encodings(entry[1]) == oracle_encodings(entry[1]), entry[1]


# --- cluster link --------------------------------------------------------------------------

_PASSWORD = "fuzz-password"


def _nonces(seed: int) -> Callable[[int], bytes]:
    counter = [seed]

    def source(n: int) -> bytes:
        counter[0] += 1
        return bytes((counter[0] + i) % 256 for i in range(n))

    return source


def _cluster_client() -> ClientConnection:
    return ClientConnection(
        node_id="node-a",
        instance_id="inst-a",
        cluster_name="c",
        connector=("127.0.0.1", 61616),
        user="cluster",
        password=_PASSWORD,
        max_hops=1,
        nonce_source=_nonces(1),
        max_frame_size=1 << 16,
    )


def _cluster_server() -> ServerConnection:
    return ServerConnection(
        node_id="node-b",
        instance_id="inst-b",
        cluster_names=("c",),
        user="cluster",
        password=_PASSWORD,
        nonce_source=_nonces(101),
        max_frame_size=1 << 16,
    )


def _drain(conn: ClusterConnection, events: list[Any] | None = None) -> list[Any]:
    """Every event available now, appended to ``events`` as they come (so the ones before an
    error are kept)."""
    events = [] if events is None else events
    while (event := conn.next_event()) is not CLUSTER_NEED_DATA:
        events.append(event)
        if isinstance(event, ClusterClosed):
            break
    return events


def _established() -> tuple[ClientConnection, ServerConnection]:
    client, server = _cluster_client(), _cluster_server()
    client.start()
    for _ in range(3):  # Hello -> Challenge -> Auth -> Welcome
        for sender, receiver in ((client, server), (server, client)):
            if wire := sender.data_to_send():  # b"" would mean the end of the stream
                receiver.receive_data(wire)
                _drain(receiver)
    assert client.established is not None
    assert server.established is not None
    return client, server


def _cluster_run(make: Callable[[], ClusterConnection], chunks: Iterator[bytes]) -> Outcome:
    conn = make()
    events: list[Any] = []
    try:
        for chunk in [*filter(None, chunks), b""]:
            conn.receive_data(chunk)
            _drain(conn, events)
            conn.data_to_send()  # replies are queued whatever happened; must encode
    except RemoteProtocolError:
        conn.data_to_send()
        return events, True
    assert isinstance(events[-1], ClusterClosed), events
    return events, False


def _cluster_target(make: Callable[[], ClusterConnection]) -> Callable[[bytes], None]:
    def target(data: bytes) -> None:
        if not data:
            return
        for event in _same_however_cut(lambda chunks: _cluster_run(make, chunks), data)[0]:
            if not isinstance(event, ClusterClosed | ClusterEstablished):
                assert decode_frame(encode_frame(event)) == event

    return target


def _server_with_magic() -> ServerConnection:
    return _cluster_server()


def _established_server() -> ServerConnection:
    return _established()[1]


def _established_client() -> ClientConnection:
    return _established()[0]


#: The server end before the handshake: the preamble, Hello, Auth (the bytes of a
#: stranger on the cluster acceptor).
cluster_handshake = _cluster_target(_server_with_magic)


def cluster_established(data: bytes) -> None:
    """Frames after a completed handshake, to the server end (flag bit 0 clear) or the
    client end; the input's second byte is the flag."""
    if len(data) < 2:
        return
    make = _established_client if data[1] & 1 else _established_server
    _cluster_target(make)(data[:1] + data[2:])


def cluster_frame(data: bytes) -> None:
    """One frame: ``data`` is the type byte and the body; the length is added, so every
    input reaches the body decoder. A decoded frame re-encodes to the same frame."""
    if not data:
        return
    wire = struct.pack(">I", len(data)) + data
    try:
        frame = decode_frame(wire)
    except RemoteProtocolError:
        return
    again = encode_frame(frame)
    assert decode_frame(again) == frame, f"{frame!r} re-encoded as {again!r}"


TARGETS: dict[str, Callable[[bytes], None]] = {
    "stomp_server": stomp_server,
    "stomp_client": stomp_client,
    "stomp_differential": stomp_differential,
    "cluster_handshake": cluster_handshake,
    "cluster_established": cluster_established,
    "cluster_frame": cluster_frame,
}
