"""Paging recovery: cursors rebuilt after a restart, in states the crash test
(``test_crash.py``) found or that a crash between two writes leaves."""

from __future__ import annotations

import pytest

from integration.conftest import wait_for

from .conftest import page_files
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
