"""purge-on-no-consumers on a paged queue: when its last consumer leaves, the messages still
in page files are acknowledged too (in the pages, without a consumer), counted as killed,
and nothing comes back after a restart."""

from __future__ import annotations

import httpx

from integration.conftest import unique, wait_for
from paging.conftest import page_files, paging_settings

COUNT = 120
BODY = "x" * 1000
PURGING = (
    "\n        <default-purge-on-no-consumers>true</default-purge-on-no-consumers>"
    "\n        <auto-delete-queues>false</auto-delete-queues>"  # (kept to look at it)
)


def test_the_paged_part_is_purged_when_the_last_consumer_leaves(make_broker, clients):
    node = make_broker(persistence=True, web=True, address_settings=paging_settings(extra=PURGING))
    q = unique("paged.purge")

    def stats() -> dict:
        response = httpx.get(f"{node.web_url}/api/queues/{q}", timeout=10)
        assert response.status_code == 200, response.text
        return response.json()

    consumer = clients(node)
    # One message at a time, never acknowledged: the rest wait, most of them in pages.
    consumer.subscribe(f"/queue/{q}", ack="client-individual", **{"consumer-window-size": "1"})
    producer = clients(node)
    for n in range(COUNT):
        producer.send(f"/queue/{q}", BODY, persistent="true", n=str(n))
    consumer.wait_messages(1)
    before = stats()
    assert before["messages"] == COUNT, before
    assert before["paged"] > COUNT // 2, before
    consumer.disconnect()
    wait_for(
        lambda: stats()["messages"] == 0,
        30,
        message=lambda: f"the queue purged; now {stats()}",
    )
    after = stats()
    assert (after["paged"], after["killed"], after["acknowledged"]) == (0, COUNT, 0), after
    # Every page is complete for the queue: the files go, but the page being written.
    wait_for(lambda: len(page_files(node)) <= 1, message=lambda: f"{page_files(node)}")
    node.restart()
    assert stats()["messages"] == 0, "a purged message came back from the pages"
    producer = clients(node)
    # Without a consumer the queue takes nothing (Artemis drops it at routing).
    producer.send(f"/queue/{q}", "unheard", persistent="true")
    assert stats()["added"] == 0
    late = clients(node)
    late.subscribe(f"/queue/{q}")
    producer.send(f"/queue/{q}", "after", persistent="true")
    late.wait_messages(1)
    late.sync()
    assert [m.body for m in late.messages] == ["after"]
