"""address-full-policy PAGE: a backlog goes to page files, comes back in order, survives
restarts and crashes, and every queue of a multicast address reads it at its own pace."""

from __future__ import annotations

import pytest

from integration.conftest import unique, wait_for

from .conftest import page_files, take_acking

PERSISTENT = {"persistent": "true"}
BODY = "x" * 1000


def send_numbered(client, destination: str, count: int, start: int = 0, **headers) -> None:
    for i in range(start, start + count):
        client.send(destination, BODY, **PERSISTENT, **{"seq": str(i)}, **headers)


def consume(clients, node, destination: str, count: int, **sub_headers) -> list[int]:
    """Take exactly ``count`` messages on a new subscription (client-individual acks)."""
    c = clients(node)
    c.subscribe(
        destination, ack="client-individual", **{"consumer-window-size": "-1"}, **sub_headers
    )
    got = take_acking(c, count)
    c.disconnect()
    return got


def test_a_backlog_pages_and_drains_in_order(paged_node, clients):
    q = unique("/queue/paged.order")
    producer = clients(paged_node)
    send_numbered(producer, q, 200)
    assert len(page_files(paged_node)) > 3, "200 KiB over a 20 KiB limit must page"
    assert consume(clients, paged_node, q, 200) == list(range(200))
    wait_for(lambda: len(page_files(paged_node)) <= 1, 10, message="completed pages deleted")
    assert "paging starts" in paged_node.log()


@pytest.mark.parametrize("crash", [False, True], ids=["sigterm", "sigkill"])
def test_a_paged_backlog_survives_a_restart(paged_node, clients, crash):
    q = unique("/queue/paged.restart")
    producer = clients(paged_node)
    send_numbered(producer, q, 150)
    first = consume(clients, paged_node, q, 60)
    assert first == list(range(60))
    paged_node.restart(crash=crash)
    producer = clients(paged_node)
    send_numbered(producer, q, 20, start=150)  # after the restart: still behind the pages
    assert consume(clients, paged_node, q, 110) == list(range(60, 170))


def test_multicast_subscriptions_read_the_pages_at_their_own_pace(paged_node, clients):
    """One page record serves both subscriptions; the slow one holds the pages (and keeps
    the address paging) while the fast one has finished them."""
    topic = unique("/topic/paged.multi")
    fast, slow = clients(paged_node), clients(paged_node)
    fast.subscribe(topic, ack="client-individual", **{"consumer-window-size": "-1"})
    slow.subscribe(topic, ack="client-individual", **{"consumer-window-size": "-1"})
    send_numbered(clients(paged_node), topic, 120)
    assert take_acking(fast, 120) == list(range(120))
    assert len(slow.messages) < 60, "the slow one has taken only what max-read-page allows"
    assert len(page_files(paged_node)) > 3
    assert take_acking(slow, 120) == list(range(120))
    wait_for(lambda: len(page_files(paged_node)) <= 1, 10, message="completed pages deleted")


def test_data_summary_counts_a_stopped_nodes_paged_backlog(paged_node, clients):
    """`artemis-py data summary` on real page files and cursor records: paged messages minus
    the acknowledged ones, per queue."""
    from integration.test_cli import artemis_py

    q = unique("/queue/paged.summary")
    send_numbered(clients(paged_node), q, 150)
    assert consume(clients, paged_node, q, 60) == list(range(60))
    paged_node.stop()
    result = artemis_py("data", "summary", str(paged_node.data_dir))
    assert result.returncode == 0, result.stderr
    (line,) = [x for x in result.stdout.splitlines() if x.startswith(f"queue {q[7:]} ")]
    fields = dict(f.split("=") for f in line.split()[2:])
    assert int(fields["total"]) == 90, line
    assert int(fields["paged"]) > 0, line
    paged_node.start()
