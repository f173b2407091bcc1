"""A paged send's offset, without a node: it is written into the page record and holds its
queues' stable end until the send settles (or is released)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from artemis_py.broker.paging.address import AddressPaging
from artemis_py.broker.paging.manager import Placement
from artemis_py.broker.queue import Queue
from artemis_py.config import RoutingType


class FakeStore:
    current_page = 1

    def __init__(self) -> None:
        self.appended: list[Any] = []

    def append(self, records, sync):
        self.appended += records
        return len(self.appended), [(1, 32 + 100 * (len(self.appended) - 1))]


def paging_with_store() -> tuple[AddressPaging, FakeStore]:
    manager: Any = SimpleNamespace(kick=lambda paging, cursor: None)
    paging = AddressPaging(manager, "a")
    paging.paging = True  # already paging: no settings needed
    store = FakeStore()
    paging.store = store  # type: ignore[assignment]
    return paging, store


def test_a_paged_offset_is_recorded_and_arriving_until_settled() -> None:
    paging, store = paging_with_store()
    q1 = Queue(1, "q1", "a", RoutingType.MULTICAST)
    q2 = Queue(2, "q2", "a", RoutingType.MULTICAST)
    message: Any = SimpleNamespace(message_id=7, durable=True)
    _, settle_first, _ = paging.page(message, [q1, q2], b"m", offset=42)
    _, settle_second, _ = paging.page(message, [q1], b"m", offset=45)
    assert [(r[0], r[2], r[4]) for r in store.appended] == [(7, [1, 2], 42), (7, [1], 45)]
    assert paging.first_offsets == {1: 42}
    assert (q1.stable_end(100), q2.stable_end(100)) == (42, 42)
    settle_second()  # settles out of order: the first still holds the stable end
    assert (q1.stable_end(100), q2.stable_end(100)) == (42, 42)
    settle_first()
    assert (q1.stable_end(100), q2.stable_end(100)) == (100, 100)


def test_a_released_placement_frees_its_paged_offset() -> None:
    paging, _ = paging_with_store()
    q = Queue(1, "q", "a", RoutingType.ANYCAST)
    message: Any = SimpleNamespace(message_id=7, durable=True)
    placement = Placement(paged=[(paging, [q])], offset=42)
    paging.page(message, [q], b"m", offset=42)
    assert q.stable_end(100) == 42
    placement.release()  # the transaction's journal commit was refused
    assert q.stable_end(100) == 100
