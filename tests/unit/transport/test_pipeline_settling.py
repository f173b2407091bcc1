"""Settling a connection's pipeline (``SessionShell._run_pipeline`` and ``durable``): a
step whose records are durable already is settled without a wait, and so without a task
switch, while a long run of such steps still lets the other tasks run now and then."""

from __future__ import annotations

from functools import partial

import trio
from turns import other_task_turns

from artemis_py.broker.pending import Pending, Ticket, durable
from artemis_py.transport.plane_connection import _Steps
from artemis_py.transport.stomp_shell import _RUN_BEFORE_YIELD, SessionShell


class Journal:
    """Tickets up to ``completed`` are durable; a wait for a later one is counted."""

    def __init__(self, completed: int) -> None:
        self.completed = completed
        self.waited: list[int] = []

    def done(self, number: int) -> bool:
        return number <= self.completed

    async def wait(self, number: int) -> None:
        self.waited.append(number)
        await trio.lowlevel.checkpoint()


async def test_durable_waits_only_for_the_tickets_not_done_yet() -> None:
    messages, bindings = Journal(completed=10), Journal(completed=3)
    await durable([Ticket(messages, 7), Ticket(bindings, 3), Ticket(messages, 12)])
    assert messages.waited == [12]
    assert bindings.waited == []


class Shell(SessionShell):
    def __init__(self) -> None:
        self._pipelined = 0
        self.settled = 0

    def _step_settled(self) -> None:
        self.settled += 1


async def test_a_run_of_durable_steps_is_settled_in_order_and_yields_now_and_then() -> None:
    journal = Journal(completed=1_000)
    shell, steps = Shell(), _Steps()
    effects: list[int] = []
    count = 3 * _RUN_BEFORE_YIELD + 5
    for n in range(count):
        pending = Pending(tickets=[Ticket(journal, n + 1)], on_durable=[partial(effects.append, n)])
        steps.send_nowait((pending, None))
        shell._pipelined += 1
    steps.close()
    async with other_task_turns() as turns:
        await shell._run_pipeline(steps)
    assert effects == list(range(count))
    assert journal.waited == []  # all durable: nothing waited for
    assert shell._pipelined == 0
    assert shell.settled == count
    # The other task ran between runs of _RUN_BEFORE_YIELD steps, not after each step.
    assert 2 <= turns.count <= count // _RUN_BEFORE_YIELD + 2
