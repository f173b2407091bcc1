"""The sans-IO link state (protocol/cluster/link_state.py): frames in, actions out."""

from __future__ import annotations

import pytest

from artemis_py.protocol import cluster as wire
from artemis_py.protocol.cluster.link_state import (
    Acknowledge,
    Apply,
    LinkState,
    Send,
    Store,
)


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
