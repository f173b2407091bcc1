"""Corked frames (``client.writer``): the frames whose callers wait for a RECEIPT go out at
the end of the loop's pass, a connection's together in one system call, in call order
with the frames written meanwhile."""

from __future__ import annotations

from typing import Any

import trio

from artemis_py.client.state import ConnectionState
from artemis_py.client.writer import FrameWriter


async def test_a_pass_s_corked_frames_go_out_in_one_write_in_call_order() -> None:
    ours, theirs = trio.socket.socketpair()
    with ours, theirs:
        codec: Any = None  # (bytes are written as they are: no frame is encoded here)
        writer = FrameWriter(trio.SocketStream(ours), codec, ConnectionState(), socket=ours)
        writes: list[bytes] = []
        write_now = writer._write_now
        assert write_now is not None

        def counted(data: bytes) -> int:
            writes.append(data)
            return write_now(data)

        writer._write_now = counted
        # (no checkpoint in between: one pass)
        await writer.write(b"one", wait_sent=False)
        await writer.write(b"two", wait_sent=False)
        assert writes == []  # corked until the pass ends
        await writer.write(b"three")  # not corked: goes now, after the corked ones
        assert writes == [b"onetwothree"]
        await writer.write(b"four", wait_sent=False)
        await writer.write(b"five", wait_sent=False)
        await trio.lowlevel.checkpoint()  # the pass ends
        assert writes[1:] == [b"fourfive"]
        assert await theirs.recv(100) == b"onetwothreefourfive"


async def test_what_the_socket_does_not_take_is_sent_by_a_task_of_its_own() -> None:
    ours, theirs = trio.socket.socketpair()
    with ours, theirs:
        codec: Any = None
        writer = FrameWriter(trio.SocketStream(ours), codec, ConnectionState(), socket=ours)
        write_now = writer._write_now
        assert write_now is not None
        writer._write_now = lambda data: write_now(data[:2])  # a full socket buffer
        await writer.write(b"corked", wait_sent=False)
        await trio.lowlevel.checkpoint()  # the pass ends: "co" written, the rest queued
        received = b""
        with trio.fail_after(5):
            while received != b"corked":
                received += await theirs.recv(100)
