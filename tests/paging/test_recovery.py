"""Paging recovery: cursors rebuilt after a restart, in states the crash test
(``test_crash.py``) found or that a crash between two writes leaves."""

from __future__ import annotations

import pytest

from integration.conftest import DEFAULT_ADDRESSES, wait_for

from .conftest import data_summary_queues, page_files, paging_settings
from .test_page_policy import consume, send_numbered


@pytest.mark.parametrize("crash", [False, True], ids=["sigterm", "sigkill"])
def test_a_restart_resumes_past_pages_completed_behind_a_held_message(paged_node, clients, crash):
    """Found by the crash test: one message of page 1 delivered and not acknowledged, the
    pages after it completed and deleted, a restart: the cursor read page 1 again, stepped
    to page 2, which was gone ("does not exist"), and the queue stalled for good. (Had page
    2 been there, its acknowledged messages would have come back.)"""
    q = "/queue/paged.held"
    send_numbered(clients(paged_node), q, 120)  # 0-18 in memory, 19-33 on page 1, ...
    reader = clients(paged_node)
    reader.subscribe(q, ack="client-individual", **{"consumer-window-size": "-1"})
    for i in range(80):
        wait_for(lambda i=i: len(reader.messages) > i, 30, message=f"message {i}")
        frame = reader.messages[i]
        if frame.headers["seq"] != "25":
            reader.ack(frame)

    def pages() -> set[int]:
        return {int(path.stem) for path in page_files(paged_node)}

    wait_for(lambda: 2 not in pages(), 10, message=lambda: f"page 2 deleted; pages {pages()}")
    assert 1 in pages(), "page 1 holds the unacknowledged message"
    paged_node.restart(crash=crash)
    assert consume(clients, paged_node, q, 41) == [25, *range(80, 120)]
    assert " ERROR " not in paged_node.log(since_start=True)


ADDRESS = '<address name="{name}"><anycast><queue name="{name}"/></anycast></address>'


def add_journal_record(node, op) -> None:
    """Append ``op`` to a stopped node's messages journal: the state a crash leaves when it
    comes between two writes the node makes one after the other."""
    import trio

    from artemis_py.config import load_config
    from artemis_py.node import journal_settings
    from artemis_py.storage import open_journal

    settings = journal_settings(load_config(node.config_path))

    async def append() -> None:
        async with open_journal(node.data_dir / "journal", settings) as journal:
            await journal.wait(journal.submit([op], sync=True))

    trio.run(append)


def test_a_page_number_used_again_is_not_taken_for_the_old_page(make_broker, clients):
    """Deleting a completed page removes its file, then its PAGE_COMPLETE records. A crash
    between the two leaves the records of a page that is gone; when no page file is left,
    the store numbers its pages from 1 again at the next start, so a record of an old page
    1 must not count as the new page 1 being complete (it was: the new page 1 was deleted
    while one of its messages was still unacknowledged, and that message was lost)."""
    from artemis_py.broker.records import page_complete_op

    paged_node = make_broker(
        persistence=True,
        address_settings=paging_settings(),
        addresses=DEFAULT_ADDRESSES + ADDRESS.format(name="paged.reuse"),
    )
    q = "/queue/paged.reuse"
    send_numbered(clients(paged_node), q, 25)  # 0-18 in memory, 19-24 on page 1
    assert consume(clients, paged_node, q, 19) == list(range(19))
    paged_node.restart()  # page 1 is no longer the one written to: it can complete
    assert consume(clients, paged_node, q, 6) == list(range(19, 25))
    wait_for(lambda: not page_files(paged_node), 10, message="page 1 deleted")
    paged_node.stop()
    queue_id = next(q["id"] for q in data_summary_queues(paged_node) if q["name"] == "paged.reuse")
    add_journal_record(paged_node, page_complete_op(1 << 50, queue_id, 1, "paged.reuse"))
    paged_node.start()
    send_numbered(clients(paged_node), q, 120)  # 0-18 in memory, 19-33 on page 1, ...
    reader = clients(paged_node)
    reader.subscribe(q, ack="client-individual", **{"consumer-window-size": "-1"})
    for i in range(80):  # all but message 25 (page 1) acknowledged: page 2 and 3 complete
        wait_for(lambda i=i: len(reader.messages) > i, 30, message=f"message {i}")
        frame = reader.messages[i]
        if frame.headers["seq"] != "25":
            reader.ack(frame)
    paged_node.restart(crash=True)
    assert consume(clients, paged_node, q, 41) == [25, *range(80, 120)]
