"""Large messages across a cluster link: forwarded intact, stored as a file on each side
while it waits there, and the sender's file removed once the neighbour confirmed its copy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .conftest import ClusterNode, unique, wait_binding, wait_for

UNBOUNDED = {"consumer-window-size": "-1"}


def files(node: ClusterNode) -> list[str]:
    directory = Path(node.data_dir) / "largemessages"
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def test_message_bigger_than_a_journal_file_is_forwarded_and_stored_as_a_file(
    cluster: Any, clients: Any
) -> None:
    nodes = cluster(2)
    q = unique("large")
    consumer = clients(nodes[1])
    consumer.subscribe(f"/queue/{q}", ack="client", **UNBOUNDED)
    wait_binding(nodes[0], q, on=nodes[1], consumers=1)
    body = "".join(chr(ord("a") + i % 26) for i in range(3 * 1024 * 1024))  # journal files: 1 MiB
    clients(nodes[0]).send(f"/queue/{q}", body, persistent="true", **{"x-tag": "big"})
    (m,) = consumer.wait_messages(1, timeout=30)
    assert m.body == body and m.headers["x-tag"] == "big"
    # The neighbour holds its copy as a file until acknowledged; the sender's file went
    # once the neighbour confirmed the copy durable.
    assert len(files(nodes[1])) == 1
    wait_for(lambda: files(nodes[0]) == [], message="the sender's file to go")
    # Unacknowledged, the forwarded copy survives a crash of the neighbour.
    nodes[1].kill()
    nodes[1].start()
    again = clients(nodes[1])
    again.subscribe(f"/queue/{q}", ack="client", **UNBOUNDED)
    (m,) = again.wait_messages(1, timeout=30)
    assert m.body == body
    again.ack(m)
    wait_for(lambda: files(nodes[1]) == [], message="the neighbour's file to go after the ACK")
