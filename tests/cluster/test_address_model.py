"""The address model across nodes: scheduled times and priorities survive a scale-down."""

from __future__ import annotations

import time
from typing import Any

from .conftest import unique

SCALE_DOWN = (
    "<ha-policy><primary-only><scale-down><connectors><connector-ref>node1</connector-ref>"
    "</connectors></scale-down></primary-only></ha-policy>"
)


def test_schedules_and_priorities_survive_a_scale_down(cluster: Any, clients: Any) -> None:
    nodes = cluster(2, node_options={0: {"extra_core": SCALE_DOWN}})
    queue = unique("jobs")
    producer = clients(nodes[0])
    due = time.time() + 6
    producer.send(
        f"/queue/{queue}", "later", persistent="true", AMQ_SCHEDULED_TIME=str(int(due * 1000))
    )
    for priority, body in ((1, "low"), (9, "high"), (5, "mid")):
        producer.send(f"/queue/{queue}", body, persistent="true", priority=str(priority))
    producer.disconnect()
    assert nodes[0].stop() == 0
    assert "moved 4 message(s)" in nodes[0].log(since_start=True)
    consumer = clients(nodes[1])
    consumer.subscribe(f"/queue/{queue}")
    consumer.wait_messages(3)
    assert [m.body for m in consumer.messages] == ["high", "mid", "low"]
    assert time.time() < due - 0.5, "the test took too long to tell"
    consumer.wait_messages(4, timeout=15)
    assert time.time() >= due - 0.2
    assert consumer.messages[3].body == "later"
