"""Ring queues and held dispatch in a queue (no sockets): a ring keeps its newest waiting
messages; consumers-before-dispatch and delay-before-dispatch hold the first delivery."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from artemis_py.broker.message import Message, MessageReference
from artemis_py.broker.queue import Queue
from artemis_py.config import RoutingType


@dataclass(eq=False)
class Taker:
    credit: int = 100
    selector: None = None
    got: list[MessageReference] = field(default_factory=list)

    def has_credit(self) -> bool:
        return self.credit > 0

    def deliver(self, ref: MessageReference) -> None:
        self.credit -= 1
        self.got.append(ref)


def add(q: Queue, n: int) -> None:
    q.add(MessageReference(Message(n, "a", body=b"%d" % n), q))


def bodies(refs: object) -> list[bytes]:
    return [r.message.body for r in refs]  # type: ignore[attr-defined]


def test_a_ring_keeps_its_newest_waiting_messages() -> None:
    replaced: list[MessageReference] = []

    def acknowledge(ref: MessageReference) -> None:
        ref.queue.delivering -= 1
        replaced.append(ref)

    q = Queue(1, "q", "a", RoutingType.ANYCAST, ring_size=3, on_replaced=acknowledge)
    for n in range(5):
        add(q, n)
    assert bodies(q.messages) == [b"2", b"3", b"4"]
    assert bodies(replaced) == [b"0", b"1"]
    taker = Taker(credit=1)
    q.add_consumer(taker)  # takes 2
    add(q, 5)
    add(q, 6)  # the ring holds 4, 5, 6 while 2 is on its way
    q.remove_consumer(taker)
    q.cancel(list(taker.got))  # no room for 2 to come back
    assert bodies(q.messages) == [b"4", b"5", b"6"]
    assert q.messages_replaced == 4
    assert q.delivering == 0


def test_dispatch_waits_for_its_consumers_or_its_delay() -> None:
    q = Queue(1, "q", "a", RoutingType.ANYCAST, consumers_before_dispatch=2)
    add(q, 1)
    first, second = Taker(), Taker()
    q.add_consumer(first)
    assert first.got == []
    q.add_consumer(second)
    assert len(first.got) + len(second.got) == 1

    wakes: list[tuple[Callable[[], None], int]] = []
    delayed = Queue(
        2,
        "d",
        "a",
        RoutingType.ANYCAST,
        consumers_before_dispatch=5,
        delay_before_dispatch=20,
        on_hold=lambda item, due: wakes.append((item, due)),  # type: ignore[arg-type,misc]
    )
    add(delayed, 1)
    lone = Taker()
    delayed.add_consumer(lone)
    assert lone.got == []
    ((wake, due),) = wakes
    time.sleep(max(0.0, due / 1000 - time.time()) + 0.01)
    wake()  # (what the scheduler calls at that time)
    assert bodies(lone.got) == [b"1"]
