"""Held references (no sockets): a queue holds a scheduled reference until the scheduler
gives it back at the head, and the redelivery delay grows as Artemis's does."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from artemis_py.broker.message import Message, MessageReference
from artemis_py.broker.queue import Queue
from artemis_py.broker.scheduling import Scheduler, redelivery_delay
from artemis_py.config import AddressSettings, RoutingType


@dataclass(eq=False)
class Taker:
    selector: None = None
    got: list[bytes] = field(default_factory=list)

    def has_credit(self) -> bool:
        return True

    def deliver(self, ref: MessageReference) -> None:
        self.got.append(ref.message.body)


def test_a_held_reference_comes_back_at_the_head_when_due() -> None:
    clock = [1_000]
    scheduler = Scheduler(clock_ms=lambda: clock[0])
    q = Queue(1, "q", "a", RoutingType.ANYCAST, on_hold=scheduler.hold)
    late = MessageReference(Message(1, "a", body=b"late", scheduled=2**50), q)
    q.add(late)
    assert late in q.scheduled
    assert q.message_count == 1
    assert not q.messages
    q.add(MessageReference(Message(2, "a", body=b"now"), q))
    taker = Taker()
    clock[0] = 2**50
    scheduler.release_due()  # (the scheduler's clock says it is due)
    assert [r.message.body for r in q.messages] == [b"late", b"now"]
    q.add_consumer(taker)
    assert taker.got == [b"late", b"now"]
    assert scheduler.release_due() == float("inf")


def test_a_removed_held_reference_is_not_given_back() -> None:
    scheduler = Scheduler(clock_ms=lambda: 2**60)
    q = Queue(1, "q", "a", RoutingType.ANYCAST, on_hold=scheduler.hold)
    ref = MessageReference(Message(1, "a", scheduled=2**59), q)
    q.scheduled[ref] = 2**59
    scheduler.hold(ref, 2**59)
    assert q.remove_all() == [ref]
    scheduler.release_due()
    assert not q.messages


@pytest.mark.parametrize(
    ("count", "expected"), [(1, 1000), (2, 2000), (3, 4000), (4, 5000), (9, 5000)]
)
def test_the_redelivery_delay_grows_by_its_multiplier_up_to_its_cap(
    count: int, expected: int
) -> None:
    settings = AddressSettings(
        redelivery_delay=1000, redelivery_delay_multiplier=2.0, max_redelivery_delay=5000
    )
    assert redelivery_delay(settings, count) == expected


def test_collision_avoidance_varies_the_delay_within_its_factor() -> None:
    settings = AddressSettings(
        redelivery_delay=1000, redelivery_collision_avoidance_factor=0.5, max_redelivery_delay=9000
    )
    delays = {redelivery_delay(settings, 1) for _ in range(200)}
    assert min(delays) >= 500
    assert max(delays) <= 1500
    assert len(delays) > 10
    assert redelivery_delay(AddressSettings(), 3) == 0
