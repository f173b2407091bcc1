"""The Rust-backed STOMP codec against the Python codec it replaced (``tests/oracle/stomp``).

Every input of the committed fuzz corpora (and regressions) is fed to both, in both roles,
whole, cut in two at every position and byte by byte, one event at a time and in batches
(``next_events()``): the logs must be equal (events, states, versions, errors with their
class, message and ``error_headers``, the bytes each side sent; ``oracle/stomp/transcript.py``
says what a log holds). Then single-byte mutations of every input, random streams, every
decoded frame encoded under every header rule, and the send side's state machine.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from artemis_py.protocol.errors import ProtocolError
from artemis_py.protocol.stomp import (
    CLIENT,
    SERVER,
    Command,
    Connection,
    Frame,
    FrameLimits,
    Role,
)
from fuzz.targets import LIMITS as SMALL
from oracle.stomp import Connection as OracleConnection
from oracle.stomp.transcript import converse, encodings, oracle_encodings

ROOT = Path(__file__).resolve().parents[3]
# With the fuzz targets' small limits too, so limit errors are reached.
LIMITS = (FrameLimits(), SMALL)


def _inputs() -> list[tuple[str, Role, bytes]]:
    """Every committed STOMP input, without its first byte (the fuzz targets' piece size),
    with the role of its target."""
    found = []
    for target, role in (("stomp_server", SERVER), ("stomp_client", CLIENT)):
        for kind in ("corpus", "regressions"):
            for path in sorted((ROOT / "fuzz" / kind / target).glob("*")):
                found.append((f"{kind}/{target}/{path.name}", role, path.read_bytes()[1:]))
    return found


INPUTS = _inputs()
IDS = [name for name, _, _ in INPUTS]


def _same(role: Role, pieces: list[bytes], limits: FrameLimits) -> list[tuple[object, ...]]:
    """Both codecs' logs of ``pieces``, per event and in batches: asserts they agree."""
    expected = converse(OracleConnection, role, pieces, limits)
    assert converse(Connection, role, pieces, limits) == expected, pieces
    batched = converse(OracleConnection, role, pieces, limits, batch=True)
    assert converse(Connection, role, pieces, limits, batch=True) == batched, pieces
    return expected


def _frames(log: list[tuple[object, ...]]) -> list[Frame]:
    return [entry[1] for entry in log if entry[0] == "event" and isinstance(entry[1], Frame)]


def test_the_corpora_are_there() -> None:
    assert len([1 for _, role, _ in INPUTS if role is SERVER]) >= 10
    assert len([1 for _, role, _ in INPUTS if role is CLIENT]) >= 7


@pytest.mark.parametrize(("name", "role", "data"), INPUTS, ids=IDS)
@pytest.mark.parametrize("limits", LIMITS, ids=["default-limits", "small-limits"])
def test_every_cut_of_every_input(name: str, role: Role, data: bytes, limits: FrameLimits) -> None:
    for each_role in (role, CLIENT if role is SERVER else SERVER):
        whole = _same(each_role, [data], limits)
        for cut in range(1, len(data)):
            _same(each_role, [data[:cut], data[cut:]], limits)
        _same(each_role, [data[i : i + 1] for i in range(len(data))], limits)
        for frame in _frames(whole):
            assert encodings(frame) == oracle_encodings(frame), frame


# Bytes that steer a decoder somewhere else: frame and line ends, escapes, invalid UTF-8.
SPECIAL = (b"\x00", b"\n", b"\r", b":", b"\\", b"\xff", b"\xc3", b"")


@pytest.mark.parametrize(("name", "role", "data"), INPUTS, ids=IDS)
def test_every_single_byte_mutation(name: str, role: Role, data: bytes) -> None:
    for at, special in itertools.product(range(len(data)), SPECIAL):
        mutated = data[:at] + special + data[at + 1 :]
        if mutated:
            for frame in _frames(_same(role, [mutated], SMALL)):
                assert encodings(frame) == oracle_encodings(frame), frame


TOKENS = (
    b"CONNECT\n",
    b"STOMP\n",
    b"CONNECTED\n",
    b"SEND\n",
    b"MESSAGE\n",
    b"ERROR\n",
    b"DISCONNECT\n",
    b"ACK\n",
    b"accept-version:1.0,1.2\n",
    b"accept-version:1.1\n",
    b"version:1.1\n",
    b"version: 1.0\n",
    b"content-length:3\n",
    b"content-length:x\n",
    b"destination:/q\n",
    b"a\\cb:c\\n\\r\\t\n",
    b"x: \t\xc3\xa9\xe2\x80\x8b\n",
    b"\n",
    b"\r\n",
    b"\r",
    b"\x00",
    b"abc",
    b":",
    b"\\",
    b"\xff",
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tokens=st.lists(st.sampled_from(TOKENS), max_size=30),
    cut=st.integers(min_value=0),
    role=st.sampled_from([SERVER, CLIENT]),
)
def test_random_streams(tokens: list[bytes], cut: int, role: Role) -> None:
    data = b"".join(tokens)
    if not data:
        return
    cut %= len(data)
    pieces = [piece for piece in (data[:cut], data[cut:]) if piece]
    for limits in LIMITS:
        for frame in _frames(_same(role, pieces, limits)):
            assert encodings(frame) == oracle_encodings(frame), frame


TRICKY_FRAMES = [
    Frame("SEND", (("a", "b\x00"),)),
    Frame("SEND", (("", "v"),)),
    Frame("SEND", (("n:\n\\\r", "v:\n\\\r"),), b"x"),
    Frame("SEND", (("content-length", "2"),), b"x"),
    Frame("SEND", (), b"a\x00b"),
    Frame("SEND", (("content-length", "3"),), b"a\x00b"),
    Frame("SUBSCRIBE", (), b"body"),
    Frame("SEND", (("k", "\ud800"),)),
    Frame("SEND", (("k\x00", "\ud800"),)),
    Frame("SEND", (("é☃" * 30, "v\r"),)),
    Frame("NOPE", ()),
    Frame("send", ()),
    Frame("MESSAGE", (("content-length", "0"),)),
    Frame("CONNECT", (("accept-version", "1.2"), ("host", " h\t")), b""),
]


@pytest.mark.parametrize("frame", TRICKY_FRAMES, ids=range(len(TRICKY_FRAMES)))
def test_encoding_tricky_frames(frame: Frame) -> None:
    assert encodings(frame) == oracle_encodings(frame)


# --- the send side -------------------------------------------------------------------------

COMMANDS = [*(str(command) for command in Command), "FOO"]


def _frame(command: str) -> Frame:
    if command == "CONNECTED":
        return Frame(command, (("version", "1.2"),))
    if command in ("CONNECT", "STOMP"):
        return Frame(command, (("accept-version", "1.1,1.2"),))
    if command in ("SEND", "MESSAGE", "ERROR"):
        return Frame(command, (("destination", "/q"), ("content-length", "2")), b"hi")
    return Frame(command, (("receipt", "r:1"),))


def _outcome(call: object) -> object:
    try:
        return call()  # type: ignore[operator]
    except ProtocolError as exc:
        return (type(exc).__name__, exc.message)


def _send_log(factory: type, role: Role, prefix: str, commands: tuple[str, ...]) -> list[object]:
    conn = factory(role)
    log: list[object] = []
    if prefix != "fresh":
        conn.receive_data(b"CONNECT\naccept-version:1.0,1.2\n\n\x00")
        log.append(_outcome(conn.next_event))
        if prefix != "paused":
            log.append(_outcome(lambda: conn.accept_connect(prefix)))
    for command in commands:
        log.append(_outcome(lambda c=command: conn.send(_frame(c))))
        log.append(_outcome(conn.send_heartbeat))
        log.append((conn.version, conn.our_state, conn.their_state, repr(conn)))
    for version in ("1.2", "1.1", "2.0", "it's"):
        log.append(_outcome(lambda v=version: conn.accept_connect(v)))
    return log


@pytest.mark.parametrize(
    ("role", "prefix"),
    [(CLIENT, "fresh"), (SERVER, "fresh"), (SERVER, "paused"), (SERVER, "1.2"), (SERVER, "1.0")],
)
def test_send_sequences(role: Role, prefix: str) -> None:
    for length in (1, 2):
        for commands in itertools.product(COMMANDS, repeat=length):
            assert _send_log(Connection, role, prefix, commands) == _send_log(
                OracleConnection, role, prefix, commands
            ), commands
