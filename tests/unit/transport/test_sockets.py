"""FastSocketStream: trio's SocketStream semantics without a checkpoint per system call."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import pytest
import trio
from turns import other_task_turns

from artemis_py.transport.sockets import FastSocketStream

Pair = tuple[FastSocketStream, FastSocketStream]


@pytest.fixture
async def stream_pair() -> AsyncIterator[Pair]:
    """Two connected streams, both closed after the test (closing twice is allowed)."""
    a, b = trio.socket.socketpair()
    left, right = FastSocketStream(trio.SocketStream(a)), FastSocketStream(trio.SocketStream(b))
    try:
        yield left, right
    finally:
        await left.aclose()
        await right.aclose()


async def test_send_all_waits_for_room_and_everything_arrives_in_order(stream_pair: Pair) -> None:
    left, right = stream_pair
    # Much more than the socket buffers hold: send_all must wait for the reader.
    data = bytes(range(256)) * 40_000
    received = bytearray()

    async def read() -> None:
        while len(received) < len(data):
            received.extend(await right.receive_some(65536))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read)
        await left.send_all(data)
    assert received == data


async def test_a_reader_that_never_waits_still_lets_other_tasks_run(stream_pair: Pair) -> None:
    left, right = stream_pair
    await left.send_all(b"x" * 1000)
    async with other_task_turns() as turns:
        await trio.lowlevel.checkpoint()  # the ticker starts
        start = turns.count
        for _ in range(10):  # always readable: no call waits for the socket
            assert await right.receive_some(10) == b"x" * 10
    # Every other read is a schedule point (5 of 10); the ticker runs at most once per
    # scheduler batch, so allow for one it shares. Without the rule it does not run at all.
    assert turns.count - start >= 4


async def test_end_of_stream_reset_and_close_are_trio_errors(stream_pair: Pair) -> None:
    left, right = stream_pair
    await left.aclose()
    assert await right.receive_some() == b""
    with pytest.raises(trio.BrokenResourceError):
        for _ in range(100):  # the first sends may still fit in a buffer
            await right.send_all(b"y" * 65536)
    with pytest.raises(trio.ClosedResourceError):
        await left.send_all(b"z")
    with pytest.raises(trio.ClosedResourceError):
        await left.receive_some()


async def test_the_socket_is_the_wrapped_streams(stream_pair: Pair) -> None:
    left, right = stream_pair
    assert left.socket.family == socket.AF_UNIX
    await left.send_eof()
    assert await right.receive_some() == b""
