"""Large messages on a paging address are paged by reference (docs/paging.md): the page
record holds the headers and the body's length, the body stays in its file, which survives
kill -9 and the orphan sweep at start, and goes when the last queue acknowledges it or is
deleted."""

from __future__ import annotations

import trio

from artemis_py.broker.broker import Transaction
from artemis_py.config import RoutingType, parse_config
from artemis_py.node import open_broker
from integration.conftest import BrokerProcess, stays, unique
from integration.test_large_messages import PERSISTENT, UNBOUNDED, body_of, files

from .conftest import page_files, paging_settings, wait_for

LARGE = 200 * 1024


def test_a_large_message_is_paged_by_reference_and_survives_kill_9(paged_node, clients):
    node = paged_node
    q = "/queue/paged.large"
    producer = clients(node)
    producer.send(q, body_of(30 * 1024, "fill"), **PERSISTENT, seq="0")  # fills memory
    bodies = [body_of(LARGE, f"p{i}") for i in range(3)]
    for i, body in enumerate(bodies, start=1):
        producer.send(q, body, **PERSISTENT, seq=str(i))  # over the limit: paged
    assert len(files(node)) == 3
    paged = sum(p.stat().st_size for p in page_files(node))
    assert 0 < paged < 4096, f"page files hold {paged} bytes: bodies went into the pages"
    node.kill()
    from integration.test_cli import artemis_py

    shown = artemis_py("data", "print", "--paging", "--journal", str(node.data_dir))
    assert shown.returncode == 0, shown.stderr
    # References to the files, not bodies: the first message over the limit stays in memory
    # (a LARGE_MESSAGE record) while the page store is created; the others are paged (a
    # page record and a LARGE_PAGE_REF record each).
    lines = shown.stdout.splitlines()
    refs = [x for x in lines if " LARGE_PAGE_REF " in x]
    in_memory = [x for x in lines if " LARGE_MESSAGE " in x]
    paged_records = [x for x in lines if x.startswith("paged ") and "in-file=" in x]
    assert refs, shown.stdout
    assert len(refs) + len(in_memory) == 3, shown.stdout
    assert len(paged_records) == len(refs), shown.stdout
    assert all("in-file=" in x for x in in_memory), shown.stdout
    # A file no record refers to is an orphan: removed; the paged messages' files are kept.
    (node.data_dir / "largemessages" / "999999999.msg").write_bytes(b"orphan")
    node.start()
    wait_for(lambda: len(files(node)) == 3, message="the orphan to go")
    consumer = clients(node)
    consumer.subscribe(q, ack="client-individual", **UNBOUNDED)
    got = consumer.wait_messages(4, timeout=30)
    assert [m.headers["seq"] for m in got] == ["0", "1", "2", "3"]
    assert [m.body for m in got[1:]] == bodies
    for m in got:
        consumer.ack(m)
    consumer.sync()
    wait_for(lambda: files(node) == [], message="the files to go after the acks")
    node.restart(crash=True)
    assert files(node) == []
    again = clients(node)
    again.subscribe(q, ack="client-individual", **UNBOUNDED)
    again.sync()
    assert again.messages == []


def test_large_messages_paged_in_a_transaction_and_acknowledged_in_one(paged_node, clients):
    node = paged_node
    q = "/queue/paged.largetx"
    producer = clients(node)
    producer.send(q, body_of(30 * 1024, "fill"), **PERSISTENT, seq="0")  # fills memory
    producer.send(q, body_of(LARGE, "first"), **PERSISTENT, seq="1")  # the store is made
    bodies = [body_of(LARGE, f"t{i}") for i in range(2)]
    producer.begin("t1")
    for i, body in enumerate(bodies, start=2):
        producer.send(q, body, transaction="t1", **PERSISTENT, seq=str(i))
    producer.commit("t1")
    assert sum(p.stat().st_size for p in page_files(node)) < 4096
    node.restart(crash=True)
    consumer = clients(node)
    consumer.subscribe(q, ack="client", **UNBOUNDED)
    got = consumer.wait_messages(4, timeout=30)
    assert [m.body for m in got[2:]] == bodies
    consumer.begin("t2")
    consumer.ack(got[-1], transaction="t2")  # cumulative: all four
    consumer.commit("t2")
    wait_for(lambda: files(node) == [], message="the files to go after the commit")


def test_deleting_the_last_subscription_with_a_paged_large_backlog_removes_the_files(
    paged_node, clients
):
    node = paged_node
    topic = unique("/topic/paged.largesub")
    client_id = unique("cid")
    # Deleting a subscription takes subscribing to it: a window of one byte and client acks
    # keep it from consuming more than one message meanwhile.
    held = {"ack": "client-individual", "consumer-window-size": "1"}
    subs = {}
    for name in ("s1", "s2"):
        reader = clients(node, client_id=f"{client_id}-{name}")
        durable = {"durable-subscription-name": name}
        subs[name] = (reader, reader.subscribe(topic, **held, **durable), durable)
        reader.unsubscribe(subs[name][1])  # offline, subscription kept
    producer = clients(node)
    producer.send(topic, body_of(30 * 1024, "fill"), **PERSISTENT)  # fills memory
    # More than max-read-page-messages (10): some stay in the pages, unread by either.
    for i in range(14):  # the first goes to memory while the page store is made
        producer.send(topic, body_of(LARGE, f"b{i}"), **PERSISTENT)
    assert len(files(node)) == 14
    assert sum(p.stat().st_size for p in page_files(node)) < 8192
    reader, sub, durable = subs["s1"]
    reader.subscribe(topic, sub, **held, **durable)
    reader.unsubscribe(sub, **durable)  # deletes s1; s2 still has to read every file
    stays(lambda: len(files(node)) == 14, 0.5, message="s2's files must stay")
    reader, sub, durable = subs["s2"]
    reader.subscribe(topic, sub, **held, **durable)
    reader.unsubscribe(sub, **durable)  # deletes s2 with its paged backlog
    wait_for(lambda: files(node) == [], message=lambda: f"the files to go: {files(node)}")
    node.kill()
    from integration.test_cli import artemis_py

    shown = artemis_py("data", "print", "--journal", str(node.data_dir))
    assert shown.returncode == 0, shown.stderr
    assert " LARGE_PAGE_REF " not in shown.stdout, shown.stdout


async def test_a_transaction_whose_commit_is_abandoned_releases_its_paged_large_files(
    tmp_path, wait_for
):
    # In this process, so that the commit can be abandoned exactly while its page records
    # are being written (as when the connection that committed goes away meanwhile).
    spec = BrokerProcess(tmp_path / "node", persistence=True, address_settings=paging_settings())
    async with open_broker(parse_config(spec.broker_xml())) as node:
        broker = node.broker
        queue = broker.create_queue("paged.tx", "paged.tx", RoutingType.ANYCAST)
        durable = {"durable": True, "routing_type": RoutingType.ANYCAST}
        fill = broker.new_message("paged.tx", body=b"f" * (30 * 1024), **durable)
        await broker.send(fill, [queue]).settled()  # over max-size-bytes: the address pages
        more = broker.new_message("paged.tx", body=b"m", **durable)
        await broker.send(more, [queue]).settled()  # to memory while the page store is made
        paging = broker.paging.address("paged.tx")
        await wait_for(lambda: paging.store is not None, message="the page store")
        large = broker.persistence.large
        store = large.store
        assert store is not None
        message = broker.new_message("paged.tx", body=b"L" * LARGE, **durable)
        message.large = True
        pending = broker.commit(Transaction(sends=[(message, [queue])]))
        # Paged by reference: the LARGE_PAGE_REF record waits for the file, with the commit.
        assert pending.gate is not None
        assert not large.page_refs
        with trio.CancelScope() as scope:
            scope.cancel()  # the commit's wait for its page records is abandoned
            await pending.settled()
        await wait_for(lambda: store.deleted == 1, message="the file to go")
        assert not large.page_refs
        assert not store.path(message.message_id).exists()
