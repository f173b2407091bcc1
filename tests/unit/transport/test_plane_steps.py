"""The data plane connection's pipeline queue (``plane_connection._Steps``): what of a
memory channel the pipeline relies on, as ``SessionShell._run_pipeline`` reads it."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from artemis_py.transport.plane_connection import _Steps


def step(n: int) -> tuple[None, str]:
    return (None, f"r{n}")


async def test_steps_come_in_order_and_the_reader_waits_for_the_next() -> None:
    steps = _Steps()
    got = []

    async def read() -> None:
        while True:
            try:
                got.append(await steps.receive())
            except trio.EndOfChannel:
                return

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read)
        await trio.testing.wait_all_tasks_blocked()
        for n in range(3):
            steps.send_nowait(step(n))
            await trio.testing.wait_all_tasks_blocked()
        steps.close()
    assert got == [step(0), step(1), step(2)]


async def test_a_step_sent_after_the_close_is_taken_until_the_reader_saw_the_end() -> None:
    steps = _Steps()
    with pytest.raises(trio.WouldBlock):
        steps.receive_nowait()
    steps.send_nowait(step(1))
    steps.close()
    # (a frame whose handling began the close still sends its step)
    steps.send_nowait(step(2))
    assert steps.receive_nowait() == step(1)
    assert await steps.receive() == step(2)
    with pytest.raises(trio.EndOfChannel):
        await steps.receive()
    with pytest.raises(trio.ClosedResourceError):
        steps.send_nowait(step(3))
