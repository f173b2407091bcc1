"""Discovery's sans-IO core (announcement codec, membership) and a discovery group's
timing on Trio's MockClock."""

from __future__ import annotations

import logging
import struct

import pytest
import trio

from artemis_py.cluster.discovery.group import DiscoveryGroup
from artemis_py.cluster.discovery.membership import Membership
from artemis_py.config import DiscoveryGroupConfig
from artemis_py.protocol.discovery import (
    MAGIC,
    Announcement,
    PacketError,
    decode,
    encode,
)

GROUP = "udp://231.7.7.7:9876"
ANNOUNCEMENT = Announcement(GROUP, "node-a", (("10.0.0.1", 61616), ("::1", 61617)), 7)
WITH_CLIENTS = Announcement(
    GROUP, "node-a", (("10.0.0.1", 61616),), 8, ("tcp://10.0.0.1:61613", "tcp://[::1]:61614")
)


def _s(text: str) -> bytes:
    return struct.pack(">H", len(text)) + text.encode()


# --- codec ------------------------------------------------------------------------------------


@pytest.mark.parametrize("announcement", [ANNOUNCEMENT, WITH_CLIENTS])
def test_round_trip(announcement: Announcement) -> None:
    assert decode(encode(announcement)) == announcement


def test_client_urls_make_version_2_and_version_1_still_decodes() -> None:
    assert encode(ANNOUNCEMENT)[4] == 1  # nothing new to say: readable by older nodes
    assert encode(WITH_CLIENTS)[4] == 2
    # A version 1 announcement as an older node sends it, byte for byte.
    old = struct.pack(">4sBQ", MAGIC, 1, 3) + _s(GROUP) + _s("old") + b"\x01" + _s("h:1")
    assert decode(old) == Announcement(GROUP, "old", (("h", 1),), 3, ())
    # Version 2 with no client URLs is read too (another writer may send it).
    assert decode(struct.pack(">4sBQ", MAGIC, 2, 3) + old[13:] + b"\x00").clients == ()
    with pytest.raises(PacketError, match="17 client URLs"):
        decode(struct.pack(">4sBQ", MAGIC, 2, 3) + old[13:] + b"\x11")
    with pytest.raises(ValueError, match="at most 16 client URLs"):
        encode(Announcement(GROUP, "n", (("h", 1),), 0, ("tcp://h:1",) * 17))


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "too short"),
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "another format"),
        (MAGIC + b"\x03" + bytes(8) + b"rest", "version 3"),
        (MAGIC + b"\x00" + bytes(8) + b"rest", "version 0"),
        (encode(ANNOUNCEMENT) + b"x", r"byte\(s\) after"),
        (encode(WITH_CLIENTS) + b"x", r"byte\(s\) after"),
        (encode(WITH_CLIENTS)[:-3], "truncated"),
        (encode(ANNOUNCEMENT)[:-3], "truncated"),
    ],
)
def test_strangers_and_garbage_are_refused_with_a_reason(data: bytes, reason: str) -> None:
    with pytest.raises(PacketError, match=reason):
        decode(data)


@pytest.mark.parametrize("announcement", [ANNOUNCEMENT, WITH_CLIENTS])
def test_every_truncation_and_every_flipped_byte_is_a_packet_error_or_a_valid_announcement(
    announcement: Announcement,
) -> None:
    data = encode(announcement)
    for end in range(len(data)):
        with pytest.raises(PacketError):
            decode(data[:end])
    for i in range(len(data)):
        for value in (0, 0xFF, data[i] ^ 0x80):
            mutated = data[:i] + bytes([value]) + data[i + 1 :]
            try:
                decode(mutated)
            except PacketError:
                pass


def test_bad_connectors_are_refused() -> None:
    head = struct.pack(">4sBQ", MAGIC, 1, 0)
    for connector in ("nohost", "h:0", "h:70000", ":1"):
        with pytest.raises(PacketError, match="connector"):
            decode(head + _s(GROUP) + _s("n") + b"\x01" + _s(connector))
    with pytest.raises(PacketError, match="0 connectors"):
        decode(head + _s(GROUP) + _s("n") + b"\x00")


# --- membership -------------------------------------------------------------------------------


def test_membership_news_and_expiry() -> None:
    m = Membership(10.0, own_node_id="me")
    assert m.heard((("h", 1),), 0.0, node_id="me") is None  # our own broadcast, looped back
    news = m.heard((("a", 1),), 0.0, node_id="A")
    assert news is not None
    assert news[1] is True
    assert m.heard((("a", 1),), 5.0, node_id="A") == (m.members()[0], False)
    assert m.heard((("a", 1),), 4.0, node_id="A") is None  # older news changes nothing
    news = m.heard((("a", 2),), 6.0, node_id="A")  # restarted on another port
    assert news is not None
    assert news[1] is True
    assert m.connectors() == [("a", 2)]
    m.heard((("10.0.0.9", 5),), 1.0)  # DNS_PING: no node id, keyed by connector
    assert [x.key for x in m.members()] == ["10.0.0.9:5", "A"]
    assert m.next_expiry() == 11.0
    assert m.expire(10.9) == []
    assert [x.key for x in m.expire(11.0)] == ["10.0.0.9:5"]
    assert m.knows("a", 2)
    assert not m.knows("10.0.0.9", 5)
    assert [x.key for x in m.expire(16.0)] == ["A"]
    assert m.next_expiry() is None


# --- a group on the mock clock ----------------------------------------------------------------


def group_config() -> DiscoveryGroupConfig:
    return DiscoveryGroupConfig(
        name="dg",
        group_address="231.7.7.7",
        group_port=9876,
        refresh_timeout=10_000,
        initial_wait_timeout=3_000,
    )


async def idle_source(group: DiscoveryGroup, task_status: trio.TaskStatus[None]) -> None:
    task_status.started()
    await trio.sleep_forever()


def packet(node_id: str, port: int = 61616, group: str = GROUP) -> bytes:
    return encode(Announcement(group, node_id, (("10.0.0.1", port),)))


async def test_a_silent_member_is_dropped_after_refresh_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    group = DiscoveryGroup(group_config(), "me", idle_source)
    seen: list[str | None] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(group.run)
        group.subscribe(lambda m: seen.append(m.node_id))
        start = trio.current_time()
        group.receive(packet("A"), "10.0.0.1:4000", start)
        group.receive(packet("B", 61617), "10.0.0.1:4001", start)
        await trio.sleep(4)
        group.receive(packet("A"), "10.0.0.1:4000", trio.current_time())  # A keeps talking
        await trio.sleep(6.5)  # B silent for 10.5 s, A for 6.5 s
        assert [m.node_id for m in group.membership.members()] == ["A"]
        await trio.sleep(4)
        assert len(group.membership) == 0
        nursery.cancel_scope.cancel()
    assert seen == ["A", "B", "A"]


async def test_initial_wait_ends_with_the_first_member_or_the_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    group = DiscoveryGroup(group_config(), "me", idle_source)
    async with trio.open_nursery() as nursery:
        await nursery.start(group.run)
        start = trio.current_time()
        assert await group.initial_wait() is False
        assert trio.current_time() - start == pytest.approx(3.0)
        nursery.cancel_scope.cancel()
    group = DiscoveryGroup(group_config(), "me", idle_source)
    async with trio.open_nursery() as nursery:
        await nursery.start(group.run)
        start = trio.current_time()
        nursery.start_soon(_later, 1.0, lambda: group.receive(packet("A"), "x", 0.0))
        assert await group.initial_wait() is True
        assert trio.current_time() - start == pytest.approx(1.0)
        nursery.cancel_scope.cancel()


async def _later(delay: float, action: object) -> None:
    await trio.sleep(delay)
    action()  # type: ignore[operator]


async def test_strangers_are_ignored_with_a_rate_limited_warning(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    group = DiscoveryGroup(group_config(), "me", idle_source)
    caplog.set_level(logging.WARNING, "artemis_py.cluster.discovery")
    now = trio.current_time()
    for i in range(50):
        group.receive(b"\x00garbage" * 3, "10.9.9.9:1", now + i * 0.01)
    group.receive(packet("C", group="udp://231.7.7.8:9876"), "10.9.9.9:2", now)
    assert len(group.membership) == 0
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert "10.9.9.9:1" in messages[0]
    assert "another format" in messages[0]
    assert "an announcement for 'udp://231.7.7.8:9876'" in messages[1]
