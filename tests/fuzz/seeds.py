"""Write the seed corpus of each Python fuzz target to ``fuzz/corpus/<target>/``.

    python tests/fuzz/seeds.py

Seeds are well-formed conversations (every STOMP version, every cluster frame type), so the
fuzzer starts from inputs that get past the first checks. Each file starts with the byte
the targets read as the drip-feed piece size. Run it again after changing the codecs'
formats; the files are committed.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # tests/: the oracle package

import targets

from artemis_py.protocol.cluster import (
    BindingInfo,
    Bindings,
    Confirm,
    Consumers,
    CreateQueues,
    Leaving,
    Member,
    Message,
    NewQueue,
    Ping,
    Sealed,
    SealedStream,
    Status,
    Topology,
    encode_frame,
)

CORPUS = Path(__file__).resolve().parents[2] / "fuzz" / "corpus"

_STOMP_CLIENT = [
    b"CONNECT\naccept-version:1.0,1.1,1.2\nhost:h\nlogin:u\npasscode:p\nheart-beat:0,0\n\n\x00",
    b"STOMP\naccept-version:1.1\nhost:h\n\n\x00\n",
    b"CONNECT\nlogin: u\n\n\x00",  # 1.0, leading space trimmed
    b"SEND\ndestination:/queue/a\ncontent-type:text/plain\nreceipt:r1\n\nhello\x00\n",
    b"SEND\ndestination:/queue/a\ncontent-length:5\n\nh\x00llo\x00",
    b"SEND\r\ndestination:/queue/a\r\nx\\cy:a\\\\b\\nc\\r\r\n\r\nbody\x00\r\n",
    b"SUBSCRIBE\ndestination:/topic/t\nid:1\nack:client-individual\nselector:a = 'b'\n\n\x00",
    b"ACK\nid:1:1\n\n\x00NACK\nid:1:2\n\n\x00",
    b"BEGIN\ntransaction:t\n\n\x00COMMIT\ntransaction:t\n\n\x00ABORT\ntransaction:t\n\n\x00",
    b"UNSUBSCRIBE\nid:1\n\n\x00\n\n\r\nDISCONNECT\nreceipt:bye\n\n\x00",
]
_STOMP_SERVER = [
    b"CONNECTED\nversion:1.2\nheart-beat:0,0\nserver:x\n\n\x00",
    b"CONNECTED\nversion:1.0\n\n\x00",
    b"CONNECTED\nversion:1.1\n\n\x00",
    b"MESSAGE\nsubscription:1\nmessage-id:7\ndestination:/queue/a\nack:1:1\n"
    b"content-length:3\n\na\x00b\x00",
    b"MESSAGE\nsubscription:1\nmessage-id:8\ndestination:/queue/a\nk\\c:v\\n\\r\n\nbody\x00\n",
    b"RECEIPT\nreceipt-id:r1\n\n\x00\n",
    b"ERROR\nmessage:bad things\ncontent-type:text/plain\ncontent-length:4\n\nwhy!\x00",
]


def _stomp_server_seeds() -> list[bytes]:
    # A client's CONNECT (one of three versions) then its other frames.
    connects = _STOMP_CLIENT[:3]
    return [bytes([3]) + c + b"".join(_STOMP_CLIENT[3:]) for c in connects] + [
        bytes([n]) + connects[0] + frame for n, frame in enumerate(_STOMP_CLIENT[3:])
    ]


def _stomp_client_seeds() -> list[bytes]:
    connecteds = _STOMP_SERVER[:3]
    return [bytes([5]) + c + b"".join(_STOMP_SERVER[3:]) for c in connecteds] + [
        bytes([n]) + connecteds[0] + frame for n, frame in enumerate(_STOMP_SERVER[3:])
    ]


def _stomp_differential_seeds() -> list[bytes]:
    # The other targets' seeds, their first byte's bit 0 naming the role (1: client).
    return [bytes([s[0] * 2]) + s[1:] for s in _stomp_server_seeds()] + [
        bytes([s[0] * 2 + 1]) + s[1:] for s in _stomp_client_seeds()
    ]


_BINDING = BindingInfo("b-1", "orders", "orders", "ANYCAST", "color = 'red'", 0, "node-b", (None,))
_FRAMES = [
    Ping(),
    Confirm(3),
    Message(1, b"dup-1", ("q1", "q2"), 1, b"payload"),
    Topology((Member("n1", "i1", "h1", 5, True, 1, group_name="g"),)),
    Leaving("n1", "n2", ("n3:17",)),
    Bindings(True, (_BINDING,), ("b-2",)),
    Consumers("b-1", (None, "x = 1")),
    Status({"nodes": [{"id": "a", "up": True}], "n": 3}),
    CreateQueues((NewQueue("c1.sub", "prices", "MULTICAST", "region = 'eu'", False),)),
    Sealed((SealedStream("orders", "node-a", 7, 5),)),
]


def _handshake_seeds() -> list[bytes]:
    # A real client's preamble, Hello and Auth: the deterministic nonces make the Auth
    # valid against the target's server, so the fuzzer starts past the proof check.
    client, server = targets._cluster_client(), targets._cluster_server()
    client.start()
    sent = b""
    for _ in range(3):
        if wire := client.data_to_send():
            sent += wire
            server.receive_data(wire)
            targets._drain(server)
        if wire := server.data_to_send():
            client.receive_data(wire)
            targets._drain(client)
    return [bytes([4]) + sent, bytes([1]) + sent[:40]]


def _established_seeds() -> list[bytes]:
    wires = [encode_frame(f) for f in _FRAMES]
    server_side = [f for f in wires if f[4] not in (4,)]  # not Confirm (the client's frame)
    return [bytes([7, 0]) + b"".join(server_side), bytes([7, 1]) + b"".join(wires)] + [
        bytes([n, n & 1]) + wire for n, wire in enumerate(wires)
    ]


SEEDS = {
    "stomp_server": _stomp_server_seeds,
    "stomp_client": _stomp_client_seeds,
    "stomp_differential": _stomp_differential_seeds,
    "cluster_handshake": _handshake_seeds,
    "cluster_established": _established_seeds,
    "cluster_frame": lambda: [encode_frame(f)[4:] for f in _FRAMES],
}


def main() -> None:
    for name, make in SEEDS.items():
        directory = CORPUS / name
        directory.mkdir(parents=True, exist_ok=True)
        for n, seed in enumerate(make()):
            targets.TARGETS[name](seed)  # a seed must pass its own target
            (directory / f"seed-{n:02d}").write_bytes(seed)
        print(f"{name}: {n + 1} seeds in {directory}")


if __name__ == "__main__":
    main()
