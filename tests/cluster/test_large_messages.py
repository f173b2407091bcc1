"""Large messages across a cluster link: forwarded intact, stored as a file on each side
while it waits there, and the sender's file removed once the neighbour confirmed its copy;
moved intact by scale-down (paged by reference or not) and by redistribution."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from integration.test_large_messages import LARGE, body_of
from paging.conftest import take_acking

from .conftest import ClusterNode, unique, wait_binding, wait_for
from .test_paging import PAGED_NODE0_SCALES_DOWN
from .test_redistribution import settings as redistribution_settings

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
    assert m.body == body
    assert m.headers["x-tag"] == "big"
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


def test_scale_down_moves_large_messages_in_memory_and_paged_byte_identical(
    cluster: Any, clients: Any
) -> None:
    nodes = cluster(2, node_options=PAGED_NODE0_SCALES_DOWN)
    q = unique("largesd")
    producer = clients(nodes[0])
    sent = [body_of(LARGE, "m0")]  # in memory (a LARGE_MESSAGE record)
    producer.send(f"/queue/{q}", sent[0], persistent="true", seq="0")
    fill = "f" * (30 * 1024)  # small, over the node's 24 KiB: the address pages
    producer.send(f"/queue/{q}", fill, persistent="true", seq="1")
    sent.append(fill)
    for i in range(2, 8):  # paged by reference (a LARGE_PAGE_REF record each)
        sent.append(body_of(LARGE, f"p{i}"))
        producer.send(f"/queue/{q}", sent[-1], persistent="true", seq=str(i))
    producer.sync()
    assert "paging starts" in nodes[0].log()
    assert len(files(nodes[0])) == 7
    pages = list((nodes[0].data_dir / "paging").glob("*/*.page"))
    paged = sum(p.stat().st_size for p in pages)
    assert 0 < paged < 8192, f"page files hold {paged} bytes: not references"
    assert nodes[0].stop() == 0  # SIGTERM: scale down to node1
    assert "moved 8 message(s)" in nodes[0].log(since_start=True)
    assert files(nodes[0]) == [], "the departed node's files must all be gone"
    consumer = clients(nodes[1])
    consumer.subscribe(f"/queue/{q}", ack="client-individual", **UNBOUNDED)
    assert take_acking(consumer, 8) == list(range(8))
    got = [m.body for m in consumer.messages]
    assert [len(b) for b in got] == [len(b) for b in sent]
    assert got == sent
    wait_for(lambda: files(nodes[1]) == [], message="the target's files to go after the acks")


def test_redistribution_moves_a_large_message_and_its_file(cluster: Any, clients: Any) -> None:
    nodes = cluster(2, address_settings=redistribution_settings(0))
    q = unique("largeredis")
    sent = [body_of(LARGE, f"r{i}") for i in range(3)]
    producer = clients(nodes[0])
    for i, body in enumerate(sent):  # nobody consumes: ON_DEMAND keeps them on node 0
        producer.send(f"/queue/{q}", body, persistent="true", seq=str(i))
    producer.sync()
    assert len(files(nodes[0])) == 3
    consumer = clients(nodes[1])
    consumer.subscribe(f"/queue/{q}", ack="client-individual", **UNBOUNDED)
    assert take_acking(consumer, 3) == list(range(3))
    assert [m.body for m in consumer.messages] == sent
    wait_for(lambda: files(nodes[0]) == [], message="node0's files to go once moved")
    wait_for(lambda: files(nodes[1]) == [], message="node1's files to go after the acks")
