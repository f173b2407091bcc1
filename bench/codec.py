"""The STOMP codec's cost per frame: the Rust-backed ``Connection`` against the Python codec it
replaced (the oracle in ``tests/oracle/stomp``), in the same run.

    python bench/codec.py [--seconds S]

Cases, each timed as the best of five rounds of about ``S`` seconds in all:

* **decode 1/read**: one SEND (6 headers, 1 KiB body, ``content-length``) per
  ``receive_data`` and ``next_event`` until ``NEED_DATA``, as a server reads a client that
  waits for each receipt.
* **decode pipelined**: 64 such SENDs in one ``receive_data``, then ``next_event`` until
  ``NEED_DATA`` (and, Rust only, one ``next_events()`` call for the whole batch).
* **encode MESSAGE** (server side, 8 headers, 1 KiB body) and **encode SEND** (client side).
* **frame crossing** (Rust only): the pipelined decode with each way a frame can cross into
  Python: a ``Frame`` with its slots set from Rust (what the codec does), a call of the
  ``Frame`` class, a bare ``(command, headers, body)`` tuple.

Prints µs per frame and python/rust (above 1: Rust is faster). Needs a release build of the
extension (``pip install -e .``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from artemis_py._native import stomp_frame_mode
from artemis_py.protocol.stomp import CLIENT, NEED_DATA, SERVER, Connection, Frame
from oracle.stomp import Connection as PythonConnection

BATCH = 64
BODY = bytes(range(256)) * 4
SEND = Frame(
    "SEND",
    (
        ("destination", "/queue/bench.orders"),
        ("content-type", "application/octet-stream"),
        ("content-length", str(len(BODY))),
        ("receipt", "receipt-000123"),
        ("persistent", "true"),
        ("priority", "4"),
    ),
    BODY,
)
MESSAGE = Frame(
    "MESSAGE",
    (
        ("subscription", "sub-0"),
        ("message-id", "ID:4f1c2a7e-0000-0000-0000-000000012345"),
        ("destination", "/queue/bench.orders"),
        ("ack", "ID:4f1c2a7e-0000-0000-0000-000000012345"),
        ("content-type", "application/octet-stream"),
        ("content-length", str(len(BODY))),
        ("persistent", "true"),
        ("priority", "4"),
    ),
    BODY,
)
Factory = Callable[..., object]


def _server(factory: Factory) -> object:
    conn = factory(SERVER)
    conn.receive_data(b"CONNECT\naccept-version:1.2\nhost:bench\n\n\x00")
    conn.next_event()
    conn.accept_connect("1.2")
    conn.send(Frame("CONNECTED", (("version", "1.2"),)))
    return conn


def _client(factory: Factory) -> object:
    conn = factory(CLIENT)
    conn.send(Frame("CONNECT", (("accept-version", "1.2"), ("host", "bench"))))
    conn.receive_data(b"CONNECTED\nversion:1.2\n\n\x00")
    conn.next_event()
    return conn


def _wire(factory: Factory) -> bytes:
    return _client(factory).send(SEND)


def _best(run: Callable[[int], None], frames_per_call: int, seconds: float) -> float:
    """µs per frame: the best of five rounds, each of as many calls as fit its share."""
    calls = 1
    while True:
        start = time.perf_counter()
        run(calls)
        if time.perf_counter() - start > 0.05:
            break
        calls *= 2
    per_call = (time.perf_counter() - start) / calls
    calls = max(1, int(seconds / 5 / per_call))
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        run(calls)
        best = min(best, (time.perf_counter() - start) / calls)
    return best / frames_per_call * 1e6


def decode(factory: Factory, seconds: float, copies: int = 1) -> float:
    """``copies`` SENDs per ``receive_data``, then ``next_event`` until ``NEED_DATA``."""
    conn = _server(factory)
    data = _wire(factory) * copies

    def run(calls: int) -> None:
        receive, next_event = conn.receive_data, conn.next_event
        for _ in range(calls):
            receive(data)
            while next_event() is not NEED_DATA:
                pass

    return _best(run, copies, seconds)


def decode_batch_call(seconds: float) -> float:
    conn = _server(Connection)
    data = _wire(Connection) * BATCH

    def run(calls: int) -> None:
        receive, next_events = conn.receive_data, conn.next_events
        for _ in range(calls):
            receive(data)
            next_events()

    return _best(run, BATCH, seconds)


def encode(factory: Factory, frame: Frame, seconds: float) -> float:
    conn = _server(factory) if frame.command == "MESSAGE" else _client(factory)

    def run(calls: int) -> None:
        send = conn.send
        for _ in range(calls):
            send(frame)

    return _best(run, 1, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="per case and codec")
    args = parser.parse_args()
    s = args.seconds
    rows = [
        ("decode 1/read", decode(PythonConnection, s), decode(Connection, s)),
        (
            f"decode pipelined x{BATCH}",
            decode(PythonConnection, s, BATCH),
            decode(Connection, s, BATCH),
        ),
        (
            f"decode pipelined x{BATCH}, next_events()",
            decode(PythonConnection, s, BATCH),
            decode_batch_call(s),
        ),
        ("encode MESSAGE", encode(PythonConnection, MESSAGE, s), encode(Connection, MESSAGE, s)),
        ("encode SEND", encode(PythonConnection, SEND, s), encode(Connection, SEND, s)),
    ]
    print(f"{'case':<40} {'python µs':>10} {'rust µs':>10} {'python/rust':>12}")
    for name, python, rust in rows:
        print(f"{name:<40} {python:>10.2f} {rust:>10.2f} {python / rust:>12.2f}")
    print()
    print(f"frame crossing (Rust, decode pipelined x{BATCH}, µs per frame):")
    for mode, name in ((0, "Frame, slots set from Rust"), (1, "Frame(...) called"), (2, "tuple")):
        previous = stomp_frame_mode(mode)
        try:
            one = decode(Connection, s, BATCH)
            batch = decode_batch_call(s)
        finally:
            stomp_frame_mode(previous)
        print(f"  {name:<30} next_event {one:6.2f}   next_events() {batch:6.2f}")


if __name__ == "__main__":
    main()
