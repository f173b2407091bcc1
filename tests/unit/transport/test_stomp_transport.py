"""The Trio shell of a STOMP connection, in process: a connection that fails while a send
waits for the disk still lets that send reach its queue (only its RECEIPT is lost); the ACKs
in a closing connection's socket are processed before its other deliveries go back."""

from __future__ import annotations

import socket

import pytest
import trio
import trio.testing

from artemis_py.broker.authentication import Authenticator
from artemis_py.broker.broker import Broker
from artemis_py.broker.pending import Pending, Ticket
from artemis_py.broker.persistence import Persistence
from artemis_py.config import default_config
from artemis_py.exceptions import JournalFailedError
from artemis_py.protocol.stomp import Connection as StompCodec
from artemis_py.protocol.stomp import Frame, Role
from artemis_py.transport.sockets import FastSocketStream
from artemis_py.transport.stomp import StompConnection


def _held_sends(broker: Broker, monkeypatch: pytest.MonkeyPatch) -> trio.Event:
    """Every send waits for the returned event before it is durable, as a slow disk would."""
    disk = trio.Event()
    send = broker.send

    def slow_send(*args: object, **kwargs: object) -> Pending:
        pending = send(*args, **kwargs)  # type: ignore[arg-type]
        pending.gate = disk.wait
        return pending

    monkeypatch.setattr(broker, "send", slow_send)
    return disk


class Resettable(trio.abc.Stream):
    """A stream whose peer can reset it: reading then raises, as a TCP reset does."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.reset = trio.Event()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data: bytes | bytearray = b""
        async with trio.open_nursery() as nursery:

            async def read() -> None:
                nonlocal data
                data = await self.inner.receive_some(max_bytes)
                nursery.cancel_scope.cancel()

            async def reset() -> None:
                await self.reset.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(read)
            nursery.start_soon(reset)
        if self.reset.is_set():
            raise trio.BrokenResourceError("connection reset by peer")
        return data

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def send_eof(self) -> None:  # pragma: no cover - not used by the node
        raise NotImplementedError

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.mark.parametrize("how", ["ttl", "reset"])
async def test_a_send_in_flight_when_the_connection_fails_still_reaches_its_queue(
    how: str, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    config = default_config()
    broker = Broker(config, Persistence(None, "0123456789abcdef"))
    broker.recover()
    disk = _held_sends(broker, monkeypatch)
    client, server = trio.testing.memory_stream_pair()
    stream = Resettable(server)
    connection = StompConnection(broker, stream, config.acceptors[0], Authenticator(False, {}))
    await client.send_all(
        b"CONNECT\naccept-version:1.2\nhost:h\n\n\x00"
        b"SEND\ndestination:/queue/orders\nreceipt:r1\n\norder 1\x00"
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(connection.run)
        await trio.sleep(1)  # the SEND is read and waits for the disk
        if how == "ttl":
            await trio.sleep(config.acceptors[0].connection_ttl / 1000 + 1)
        else:
            stream.reset.set()
        await trio.sleep(1)
        queue = broker.queue("orders")
        assert queue is None or queue.message_count == 0  # not durable yet: not visible
        disk.set()
    queue = broker.queue("orders")
    assert queue is not None
    assert queue.message_count == 1
    assert not queue.arriving  # its offset settled: readers by offset may pass it


class FailedJournal:
    """A journal whose writer failed: nothing is done, a wait raises."""

    def done(self, number: int) -> bool:
        return False

    async def wait(self, number: int) -> None:
        await trio.lowlevel.checkpoint()
        raise JournalFailedError("journal /data/journal failed: No space left on device")


async def test_a_send_whose_journal_fails_is_refused_with_its_receipt_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The failure comes when the pipeline settles the send (the disk filled after its
    records were queued): the client gets an ERROR naming it, with the SEND's receipt id,
    and the connection closes, as for a frame refused at once."""
    config = default_config()
    broker = Broker(config, Persistence(None, "0123456789abcdef"))
    broker.recover()
    send = broker.send

    def failing_send(*args: object, **kwargs: object) -> Pending:
        pending = send(*args, **kwargs)  # type: ignore[arg-type]
        pending.tickets.append(Ticket(FailedJournal(), 1))
        return pending

    monkeypatch.setattr(broker, "send", failing_send)
    client, server = trio.testing.memory_stream_pair()
    connection = StompConnection(broker, server, config.acceptors[0], Authenticator(False, {}))
    await client.send_all(
        b"CONNECT\naccept-version:1.2\nhost:h\n\n\x00"
        b"SEND\ndestination:/queue/orders\nreceipt:r1\n\norder 1\x00"
    )
    codec = StompCodec(Role.CLIENT)
    codec.send(Frame("CONNECT", (("accept-version", "1.2"), ("host", "h"))))
    frames: list[Frame] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(connection.run)
        while not any(f.command == "ERROR" for f in frames):
            codec.receive_data(await client.receive_some())
            while isinstance(event := codec.next_event(), Frame):
                frames.append(event)
    assert [f.command for f in frames] == ["CONNECTED", "ERROR"]
    error = frames[1]
    assert error.get("receipt-id") == "r1"
    assert "No space left on device" in (error.get("message") or "")
    assert connection.error_kind == "storage"
    queue = broker.queue("orders")
    assert queue is None or queue.message_count == 0  # never durable: never visible


# -- the last ACKs of a closing connection (issue 17 §4) -----------------------------------


def _frame(command: str, *headers: tuple[str, str], body: bytes = b"") -> bytes:
    return "\n".join([command, *(f"{k}:{v}" for k, v in headers)]).encode() + b"\n\n" + body + b"\0"


async def _messages(client: socket.socket, codec: StompCodec, count: int) -> list[Frame]:
    """Read MESSAGE frames from the client's side of the socket until ``count`` came."""
    messages: list[Frame] = []
    while len(messages) < count:
        await trio.lowlevel.wait_readable(client)
        codec.receive_data(client.recv(65536))
        while isinstance(event := codec.next_event(), Frame):
            if event.command == "MESSAGE":
                messages.append(event)
    return messages


@pytest.mark.parametrize("how", ["stop", "cancel", "partial"])
async def test_acks_in_the_socket_of_a_closing_connection_are_processed_first(how: str) -> None:
    """ACKs the node has not read yet when it closes the connection (the node stops: with
    scale-down it stops the connection, without it cancels it) are read from the socket
    and processed before the other deliveries go back; a partial frame after them is not."""
    config = default_config()
    broker = Broker(config, Persistence(None, "0123456789abcdef"))
    broker.recover()
    client, server = socket.socketpair()
    client.setblocking(False)
    stream = FastSocketStream(trio.SocketStream(trio.socket.from_stdlib_socket(server)))
    connection = StompConnection(broker, stream, config.acceptors[0], Authenticator(False, {}))
    sends = b"".join(
        _frame("SEND", ("destination", "/queue/orders"), body=f"m{i}".encode()) for i in range(5)
    )
    codec = StompCodec(Role.CLIENT)
    client.send(
        codec.send(Frame("CONNECT", (("accept-version", "1.2"), ("host", "h")), b""))
        + sends
        + _frame(
            "SUBSCRIBE", ("destination", "/queue/orders"), ("id", "s"), ("ack", "client-individual")
        )
    )
    with client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(connection.run)
            taken = await _messages(client, codec, 5)
            # Written and the connection closed in the same step: the node's reader has no
            # chance to read them before.
            acks = b"".join(_frame("ACK", ("id", m.get("ack") or "")) for m in taken[:3])
            client.send(acks + (b"ACK\nid:" if how == "partial" else b""))
            if how == "cancel":
                nursery.cancel_scope.cancel()
            else:
                connection.stop()
    queue = broker.queue("orders")
    assert queue is not None
    assert sorted(ref.message.body for ref in queue.messages) == [b"m3", b"m4"]
