"""artemis_py._native.DataPlane: the Rust data plane's Python face, driven as the Trio shell
will drive it (wait for the eventfd, drain a batch of event tuples, submit a batch of
command tuples), against a real listener on 127.0.0.1 and raw socket clients."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import trio

from artemis_py._native import DataPlane, DataPlaneConn
from artemis_py.protocol.stomp import (
    Connection,
    Frame,
    FrameLimits,
    LocalProtocolError,
    RemoteProtocolError,
)
from artemis_py.protocol.stomp.roles import Role

Event = tuple[Any, ...]
WAIT = 10.0

CONNECT = b"CONNECT\naccept-version:1.2\nhost:localhost\n\n\x00"
SENDS = b"".join(
    b"SEND\ndestination:/queue/q\nreceipt:r%d\ncontent-type:text/plain\nk:v\\cw\n"
    b"content-length:5\n\nhel\x00o\x00" % n
    for n in range(3)
)


class Plane:
    """A plane with one listener, and the events drained from it so far."""

    def __init__(self, plane: DataPlane, port: int) -> None:
        self.plane = plane
        self.port = port
        self.events: list[Event] = []

    async def until(self, done: Callable[[list[Event]], bool]) -> list[Event]:
        """Waits on the eventfd and drains until `done(events)`; every event drained."""
        with trio.fail_after(WAIT):
            while not done(self.events):
                await trio.lowlevel.wait_readable(self.plane.fileno())
                self.events.extend(self.plane.drain())
        return self.events

    async def kind(self, kind: int, count: int = 1) -> list[Event]:
        """The first `count` events of `kind`, once that many came."""
        events = await self.until(lambda evs: sum(e[0] == kind for e in evs) >= count)
        return [e for e in events if e[0] == kind][:count]

    async def connected(self, client: trio.SocketStream) -> DataPlaneConn:
        """Sends a CONNECT, accepts it with CONNECTED, and reads that on the client."""
        await client.send_all(CONNECT)
        (opened,) = await self.kind(DataPlane.OPENED)
        conn = opened[2]
        assert isinstance(conn, DataPlaneConn)
        (connect,) = await self.kind(DataPlane.FRAME)
        assert connect[1] == conn.id
        assert connect[2].command == "CONNECT"
        connected = Frame("CONNECTED", (("version", "1.2"), ("server", "test")))
        self.plane.submit(
            [(DataPlane.ACCEPT_CONNECT, conn, "1.2"), (DataPlane.SEND, conn, connected)]
        )
        assert await read_frame(client) == b"CONNECTED\nversion:1.2\nserver:test\n\n\x00"
        return conn


async def read_frame(client: trio.SocketStream) -> bytes:
    """One frame's bytes, up to and including its NUL (frames here have no NUL in bodies)."""
    data = b""
    with trio.fail_after(WAIT):
        while not data.endswith(b"\x00"):
            chunk = await client.receive_some(1)
            assert chunk, f"closed after {data!r}"
            data += chunk
    return data


async def read_to_end(client: trio.SocketStream) -> bytes:
    data = b""
    with trio.fail_after(WAIT):
        while chunk := await client.receive_some(65536):
            data += chunk
    return data


@pytest.fixture
async def plane() -> AsyncIterator[Plane]:
    native = DataPlane(1)
    try:
        _, (host, port) = native.listen("127.0.0.1", 0, FrameLimits(max_body_size=64))
        assert host == "127.0.0.1"
        assert port > 0
        yield Plane(native, port)
    finally:
        native.shutdown()


async def test_connect_accept_and_pipelined_sends_as_the_codec_decodes_them(plane: Plane) -> None:
    client = await trio.open_tcp_stream("127.0.0.1", plane.port)
    async with client:
        conn = await plane.connected(client)
        (opened,) = await plane.kind(DataPlane.OPENED)
        assert opened[1] == conn.id
        assert opened[3] == 0
        assert opened[4][0] == "127.0.0.1"
        await client.send_all(SENDS)
        frames = [e[2] for e in await plane.kind(DataPlane.FRAME, 4)][1:]
        codec = Connection(Role.SERVER)
        codec.receive_data(CONNECT)
        codec.next_event()
        codec.accept_connect("1.2")
        codec.receive_data(SENDS)
        expected = codec.next_events()
        assert frames == expected
        assert len(frames) == 3
        assert all(type(f) is Frame for f in frames)
        assert frames[0].get("k") == "v:w"
        assert frames[2].body == b"hel\x00o"
        # A RECEIPT per SEND, as the node answers, in one batch.
        receipts = [Frame("RECEIPT", (("receipt-id", f"r{n}"),)) for n in range(3)]
        plane.plane.submit([(DataPlane.SEND, conn, r) for r in receipts])
        for n in range(3):
            assert await read_frame(client) == b"RECEIPT\nreceipt-id:r%d\n\n\x00" % n
        assert all(e[1] == conn.id for e in plane.events)


async def test_a_batch_writes_each_connections_frames_in_order_whatever_comes_between(
    plane: Plane,
) -> None:
    # submit() joins the bytes of a connection's consecutive frames: the joins must keep
    # the order of its frames, with raw bytes and codec-encoded frames between them.
    async with await trio.open_tcp_stream("127.0.0.1", plane.port) as first:
        a = await plane.connected(first)
        plane.events.clear()
        second = await trio.open_tcp_stream("127.0.0.1", plane.port)
        b = await plane.connected(second)

        def receipt(conn: DataPlaneConn, name: str) -> tuple[Any, ...]:
            return (DataPlane.SEND, conn, Frame("RECEIPT", (("receipt-id", name),)))

        plane.plane.submit(
            [
                receipt(a, "a1"),
                receipt(b, "b1"),
                (DataPlane.SEND_BYTES, a, b"RECEIPT\nreceipt-id:raw\n\n\x00"),
                receipt(a, "a2"),
                (DataPlane.SEND, a, Frame("ERROR", (("message", "m"),))),  # the codec's path
                receipt(a, "a3"),
                receipt(b, "b2"),
            ]
        )
        got = [await read_frame(first) for _ in range(5)]
        assert [f.split(b"\n")[1] for f in got] == [
            b"receipt-id:a1",
            b"receipt-id:raw",
            b"receipt-id:a2",
            b"message:m",
            b"receipt-id:a3",
        ]
        async with second:
            assert [await read_frame(second) for _ in range(2)] == [
                b"RECEIPT\nreceipt-id:b%d\n\n\x00" % n for n in (1, 2)
            ]


async def test_a_protocol_error_then_error_and_a_flushing_close_reach_the_client(
    plane: Plane,
) -> None:
    client = await trio.open_tcp_stream("127.0.0.1", plane.port)
    async with client:
        conn = await plane.connected(client)
        # Over the listener's 64-byte body limit.
        await client.send_all(b"SEND\ndestination:/queue/q\n\n" + b"x" * 100 + b"\x00")
        (error,) = await plane.kind(DataPlane.PROTOCOL_ERROR)
        assert error[1] == conn.id
        assert isinstance(error[2], RemoteProtocolError)
        assert "64" in str(error[2])
        message = Frame("ERROR", (("message", str(error[2])),))
        plane.plane.submit([(DataPlane.SEND, conn, message), (DataPlane.CLOSE, conn, True)])
        received = await read_frame(client)
        assert received.startswith(b"ERROR\nmessage:")
        assert b"64" in received
        # The lingering close: our side shut after the ERROR; it ends when the peer's does.
        assert await read_to_end(client) == b""
        await client.send_eof()
        (closed,) = await plane.kind(DataPlane.CLOSED)
        assert closed == (DataPlane.CLOSED, conn.id, "requested", None)


async def test_input_ended_then_close_and_shutdown_closes_the_rest(plane: Plane) -> None:
    first = await trio.open_tcp_stream("127.0.0.1", plane.port)
    second = await trio.open_tcp_stream("127.0.0.1", plane.port)
    async with first, second:
        conn = await plane.connected(first)
        await first.send_eof()
        (ended,) = await plane.kind(DataPlane.INPUT_ENDED)
        assert ended == (DataPlane.INPUT_ENDED, conn.id, 0)
        plane.plane.submit([(DataPlane.CLOSE, conn, False)])
        (closed,) = await plane.kind(DataPlane.CLOSED)
        assert closed[1:] == (conn.id, "requested", None)
        assert await read_to_end(first) == b""
        (_, opened) = await plane.kind(DataPlane.OPENED, 2)
        plane.plane.shutdown()
        plane.plane.shutdown()  # idempotent
        (_, last) = await plane.kind(DataPlane.CLOSED, 2)
        assert last[1:] == (opened[1], "shutdown", None)
        assert await read_to_end(second) == b""
        plane.plane.submit([(DataPlane.CLOSE, conn, False)])  # ignored once stopped
        with pytest.raises(RuntimeError, match="stopped"):
            plane.plane.listen("127.0.0.1", 0)


async def test_connections_allowed_refuses_one_more() -> None:
    native = DataPlane(1)
    try:
        _, (_, port) = native.listen("127.0.0.1", 0, connections_allowed=1)
        plane = Plane(native, port)
        async with await trio.open_tcp_stream("127.0.0.1", port):
            await plane.kind(DataPlane.OPENED)
            async with await trio.open_tcp_stream("127.0.0.1", port) as refused:
                (event,) = await plane.kind(DataPlane.REFUSED)
                assert event[:3] == (DataPlane.REFUSED, None, 0)
                assert await read_to_end(refused) == b""
    finally:
        native.shutdown()


async def test_a_bad_batch_raises_before_any_command_is_handed_over(plane: Plane) -> None:
    client = await trio.open_tcp_stream("127.0.0.1", plane.port)
    async with client:
        conn = await plane.connected(client)
        receipt = (DataPlane.SEND, conn, Frame("RECEIPT", (("receipt-id", "1"),)))
        bad: list[tuple[Any, ...]] = [
            (99, conn),
            (DataPlane.SEND, "not a conn", receipt[2]),
            (DataPlane.SEND, conn, Frame("BOGUS")),
            (DataPlane.SEND, conn, Frame("RECEIPT", (("receipt-id", "\udc80"),))),
            (DataPlane.SET_HEARTBEAT, conn, -1.0, None),
            (DataPlane.ACCEPT_CONNECT, conn, "2.0"),
        ]
        errors = (ValueError, TypeError, LocalProtocolError)
        for command in bad:
            with pytest.raises(errors):
                plane.plane.submit([receipt, command])
        plane.plane.submit([receipt, (DataPlane.SEND_BYTES, conn, b"\n")])
        assert await read_frame(client) == b"RECEIPT\nreceipt-id:1\n\n\x00"
        assert await client.receive_some(1) == b"\n"  # the one receipt, then the bytes
        assert conn.writable()


async def test_a_handed_off_connection_becomes_a_python_socket() -> None:
    native = DataPlane(1)
    try:
        _, (_, port) = native.listen("127.0.0.1", 0, handoff_prefixes=[b"GET "])
        plane = Plane(native, port)
        async with await trio.open_tcp_stream("127.0.0.1", port) as client:
            await client.send_all(b"GET / HTTP/1.1\r\n")
            (event,) = await plane.kind(DataPlane.HANDED_OFF)
            _, _, sock, initial, lease = event
            assert initial.startswith(b"GET ")
            assert isinstance(sock, socket.socket)
            with sock:
                sock.setblocking(True)
                sock.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
            assert (await read_to_end(client)).startswith(b"HTTP/1.1 400")
            lease.release()
            lease.release()  # idempotent
            assert not any(e[0] == DataPlane.CLOSED for e in plane.events)
    finally:
        native.shutdown()


async def test_heartbeats_are_written_and_a_silent_peer_expires(plane: Plane) -> None:
    client = await trio.open_tcp_stream("127.0.0.1", plane.port)
    async with client:
        conn = await plane.connected(client)
        plane.plane.submit([(DataPlane.SET_HEARTBEAT, conn, 0.05, 0.3)])
        with trio.fail_after(WAIT):
            assert await client.receive_some(1) == b"\n"
        (expired,) = await plane.kind(DataPlane.TTL_EXPIRED)
        assert expired[1] == conn.id
        assert expired[2] >= 0.3
