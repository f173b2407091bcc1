"""The sans-IO link state (protocol/cluster/link_state.py): frames in, actions out; and
the receiving side's confirm task that feeds it (transport/confirmations.py)."""

from __future__ import annotations

import pytest
import trio

from artemis_py.broker.pending import Pending, Ticket
from artemis_py.exceptions import StorageError
from artemis_py.protocol import cluster as wire
from artemis_py.protocol.cluster.link_state import (
    Acknowledge,
    Apply,
    LinkState,
    Send,
    Store,
)
from artemis_py.transport.confirmations import Confirmations


def message(seq: int) -> wire.Message:
    return wire.Message(seq=seq, dup_id=b"n:%d" % seq, targets=("q",), message_id=seq, payload=b"")


def seqs(action: object) -> list[int]:
    assert isinstance(action, Store)
    return [m.seq for m in action.messages]


def test_messages_gather_into_a_run_stored_when_the_reader_catches_up() -> None:
    state = LinkState()
    assert state.receive(message(1)) == []
    assert state.receive(message(2)) == []
    [store] = state.caught_up()
    assert seqs(store) == [1, 2]
    assert isinstance(store, Store)
    assert store.last_seq == 2
    assert state.caught_up() == []  # nothing new


def test_a_run_is_stored_at_the_run_limit() -> None:
    state = LinkState(run_limit=3)
    actions = [a for seq in range(1, 8) for a in state.receive(message(seq))]
    assert [seqs(a) for a in actions] == [[1, 2, 3], [4, 5, 6]]
    assert [seqs(a) for a in state.caught_up()] == [[7]]


@pytest.mark.parametrize(
    "news",
    [
        wire.Topology(members=()),
        wire.Leaving(node_id="n", target="t"),
        wire.Bindings(snapshot=True, added=(), removed=()),
        wire.Consumers(name="q", consumers=()),
        wire.CreateQueues(queues=()),
        wire.Sealed(streams=()),
    ],
)
def test_news_after_messages_comes_after_their_run_is_stored(news: object) -> None:
    state = LinkState()
    state.receive(message(1))
    store, apply = state.receive(news)
    assert seqs(store) == [1]
    assert apply == Apply(news)  # type: ignore[arg-type]


def test_a_confirm_acknowledges_and_a_ping_means_nothing() -> None:
    state = LinkState()
    assert state.receive(wire.Confirm(seq=7)) == [Acknowledge(7)]
    assert state.receive(wire.Ping()) == []


def test_a_confirm_goes_out_when_caught_up_or_every_batch_during_a_burst() -> None:
    state = LinkState(confirm_batch=10)
    assert state.durable(4, more_waiting=True) == []  # more runs behind: wait
    assert state.durable(9, more_waiting=False) == [Send(wire.Confirm(seq=9))]
    assert state.durable(15, more_waiting=True) == []
    assert state.durable(19, more_waiting=True) == [Send(wire.Confirm(seq=19))]  # 10 since
    assert state.durable(19, more_waiting=False) == []  # never the same seq twice


def test_a_failure_confirms_what_was_durable_before_it() -> None:
    state = LinkState()
    assert state.failed() == []
    state.durable(3, more_waiting=True)
    assert state.failed() == [Send(wire.Confirm(seq=3))]


class FakeLink:
    """What the confirm task uses of a link: it sends frames and closes."""

    def __init__(self) -> None:
        self.sent: list[object] = []
        self.closed = False

    def send(self, frame: object) -> None:
        self.sent.append(frame)

    def close(self) -> None:
        self.closed = True


class Journal:
    """Completes its tickets in order, up to ``fails_after``; later ones fail."""

    def __init__(self, fails_after: int) -> None:
        self.fails_after = fails_after

    def done(self, number: int) -> bool:
        return False  # (waited for: a wait fails past fails_after)

    async def wait(self, number: int) -> None:
        await trio.lowlevel.checkpoint()
        if number > self.fails_after:
            raise StorageError("the journal failed: no space left on device")


def stored_run(journal: Journal, ticket: int) -> Pending:
    return Pending(tickets=[Ticket(journal, ticket)])


def confirmations(link: FakeLink) -> Confirmations:
    return Confirmations(link, LinkState(), "test")  # type: ignore[arg-type]


async def test_the_confirm_task_confirms_the_latest_durable_run_once() -> None:
    link = FakeLink()
    confirming = confirmations(link)
    journal = Journal(fails_after=10)
    confirming.stored(stored_run(journal, 1), 3)
    confirming.stored(stored_run(journal, 2), 5)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(confirming.run)
        await confirming.aclose()  # what is queued is confirmed, then the task ends
    assert link.sent == [wire.Confirm(seq=5)]
    assert not link.closed


async def test_a_journal_failure_confirms_what_was_durable_before_it_then_closes() -> None:
    link = FakeLink()
    confirming = confirmations(link)
    journal = Journal(fails_after=2)  # the third run's records are not written
    confirming.stored(stored_run(journal, 1), 3)
    confirming.stored(stored_run(journal, 2), 7)
    confirming.stored(stored_run(journal, 3), 9)
    with pytest.raises(StorageError, match="no space left"):
        await confirming.run()
    assert link.sent == [wire.Confirm(seq=7)]
    assert link.closed
