"""The Trio shell of a STOMP connection, in process: a connection that fails while a send
waits for the disk still lets that send reach its queue (only its RECEIPT is lost)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from artemis_py.broker.broker import Broker
from artemis_py.broker.pending import Pending
from artemis_py.broker.persistence import Persistence
from artemis_py.broker.security import Authenticator
from artemis_py.config import default_config
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
    assert queue is not None and queue.message_count == 1
    assert not queue.arriving  # its offset settled: readers by offset may pass it
