"""A closing connection's ACKs already in the node's socket are processed before its
unacknowledged deliveries go back to their queue (issue 17 §4).

A raw-socket client takes N messages with ``ack:client-individual`` and writes the ACKs of
the first K in one ``sendall`` together with the end of its connection (closing the socket,
a DISCONNECT without a receipt, a malformed frame, the node stopping); a second consumer
then gets exactly the N-K others, never an acknowledged one.
"""

from __future__ import annotations

import socket

import pytest

from .conftest import RawStomp, encode_frame, unique

N, K = 20, 12


def take(raw: RawStomp, queue: str, count: int) -> list[tuple[str, str]]:
    """Subscribe with client-individual acks and read ``count`` MESSAGEs: (body, ack id)."""
    raw.connect("1.2")
    subscribed = raw.receipt(
        "SUBSCRIBE", {"destination": queue, "id": "s", "ack": "client-individual"}
    )
    assert subscribed.command == "RECEIPT", subscribed
    taken = []
    while len(taken) < count:
        frame = raw.read_until("MESSAGE")
        taken.append((frame.body.decode(), frame.get("ack") or ""))
    return taken


def fill(raw: RawStomp, queue: str, persistent: bool = False) -> list[str]:
    raw.connect("1.2")
    bodies = [f"m{i}" for i in range(N)]
    headers = {"destination": queue, "persistent": "true" if persistent else "false"}
    for body in bodies:
        raw.send("SEND", headers, body.encode())
    raw.sync()
    return bodies


def acks(taken: list[tuple[str, str]]) -> bytes:
    return b"".join(encode_frame("ACK", {"id": ack_id}, b"") for _, ack_id in taken[:K])


def rest(raw: RawStomp, queue: str) -> list[str]:
    """What a fresh consumer gets from ``queue`` (everything it holds, then nothing)."""
    raw.connect("1.2")
    raw.send("SUBSCRIBE", {"destination": queue, "id": "s", "ack": "auto"})
    return sorted(f.body.decode() for f in raw.sync() if f.command == "MESSAGE")


ENDINGS = {
    "close": b"",
    "disconnect": encode_frame("DISCONNECT", {}, b""),
    "malformed": b"NOT-A-COMMAND\n\n\x00",
    "partial": b"ACK\nid:",  # a frame the client did not finish: dropped
}


def acknowledge_k(node, raw_clients, queue, *, ending=b"", persistent=False):
    """Fill ``queue`` with N messages, take them, and send the first K's ACKs (and
    ``ending``) in one write; returns the bodies and the consumer."""
    bodies = fill(raw_clients(node), queue, persistent=persistent)
    consumer = raw_clients(node)
    consumer.sock.sendall(acks(take(consumer, queue, N)) + ending)
    return bodies, consumer


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_acks_sent_with_the_end_of_a_connection_are_processed(broker, raw_clients, ending):
    queue = unique("/queue/lastacks")
    bodies, consumer = acknowledge_k(broker, raw_clients, queue, ending=ENDINGS[ending])
    consumer.sock.shutdown(socket.SHUT_WR)
    consumer.wait_closed()
    assert rest(raw_clients(broker), queue) == sorted(bodies[K:])


def test_acks_in_the_socket_when_the_node_stops_are_processed_and_durable(make_broker, raw_clients):
    node = make_broker(persistence=True)
    queue = unique("/queue/lastacks")
    bodies, _ = acknowledge_k(node, raw_clients, queue, persistent=True)
    node.stop()  # SIGTERM right after: the ACKs may still be in the node's socket
    node.start()
    assert rest(raw_clients(node), queue) == sorted(bodies[K:])


def test_acks_sent_with_a_close_survive_a_node_crash(make_broker, raw_clients):
    node = make_broker(persistence=True)
    queue = unique("/queue/lastacks")
    bodies, consumer = acknowledge_k(node, raw_clients, queue, persistent=True)
    consumer.sock.shutdown(socket.SHUT_WR)
    consumer.wait_closed()  # the node closed it: the ACKs were processed (and written)
    node.restart(crash=True)
    assert rest(raw_clients(node), queue) == sorted(bodies[K:])
