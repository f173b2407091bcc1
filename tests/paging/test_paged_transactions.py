"""A STOMP transaction that acknowledges depaged messages and sends to an address that pages:
its journal records wait for its page records, and a page its acknowledgements complete must
not be recorded complete before them (the node once died with "record N not found")."""

from __future__ import annotations

from integration.conftest import stays, unique

from .conftest import take_acking, wait_for

COUNT = 20
BODY = "y" * 4096  # the addresses page after 20 KiB, 16 KiB a page


def test_acks_of_paged_messages_with_paged_sends_in_one_transaction(paged_node, clients):
    source, target = unique("paged.in"), unique("paged.out")
    producer = clients(paged_node)
    for seq in range(COUNT):
        producer.send(f"/queue/{source}", BODY, persistent="true", seq=str(seq))
    for seq in range(COUNT, COUNT + 10):  # the target pages too
        producer.send(f"/queue/{target}", BODY, persistent="true", seq=str(seq))

    # Each message is acknowledged and forwarded in a transaction of its own.
    worker = clients(paged_node)
    worker.subscribe(f"/queue/{source}", ack="client-individual")
    for done in range(COUNT):
        wait_for(lambda d=done: len(worker.messages) > d, 20, message=f"message {done}")
        frame = worker.messages[done]
        tx = unique("tx")
        worker.begin(tx)
        worker.send(
            f"/queue/{target}", BODY, transaction=tx, persistent="true", seq=frame.headers["seq"]
        )
        worker.ack(frame, transaction=tx)
        worker.commit(tx)
    assert paged_node.running, paged_node.log_tail()

    consumer = clients(paged_node)
    consumer.subscribe(f"/queue/{target}", ack="client-individual")
    assert sorted(take_acking(consumer, COUNT + 10, receipt=False)) == list(range(COUNT + 10))
    stays(lambda: len(consumer.messages) == COUNT + 10, 0.3, message="each message once")
    paged_node.restart(crash=True)
    again = clients(paged_node)
    again.subscribe(f"/queue/{source}")
    again.subscribe(f"/queue/{target}")
    stays(lambda: not again.messages, 0.3, message="nothing comes back after a restart")
