"""The Trio STOMP client against a scripted in-process server (no broker).

Most tests run over ``trio.testing.memory_stream_pair``; one goes over a real localhost TCP
socket. The server side is the codec's SERVER role, so every frame the client writes is also
checked by the real decoder (a malformed or half-written frame fails the test).
"""

from __future__ import annotations

import functools
import socket
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
import trio
import trio.testing

from artemis_py.client import (
    ClientConnection,
    ClientError,
    ConnectionClosedError,
    ConnectionLostError,
    Destination,
    Message,
    StompServerError,
    Subscription,
    open_stomp_connection,
    open_stomp_connection_over,
)
from artemis_py.client.testing import ScriptedStompServer
from artemis_py.protocol.stomp import Command, Frame, LocalProtocolError


def start(
    nursery: trio.Nursery,
    server: ScriptedStompServer,
    stream_wrapper: Callable[[trio.abc.Stream], trio.abc.Stream] | None = None,
    **options: Any,
) -> AbstractAsyncContextManager[ClientConnection]:
    """Serve ``server`` on one end of a memory stream pair; connect the client to the other."""
    client_stream, server_stream = trio.testing.memory_stream_pair()
    nursery.start_soon(server.serve, server_stream)
    stream: trio.abc.Stream = client_stream
    if stream_wrapper is not None:
        stream = stream_wrapper(client_stream)
    return open_stomp_connection_over(stream, **options)


class DripStream(trio.abc.Stream):
    """Writes in 10-byte pieces with a pause between: a slow network for cancel tests."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        for offset in range(0, len(view), 10):
            await self.inner.send_all(view[offset : offset + 10])
            await trio.sleep(0.01)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


def headers_of(frame: Frame) -> dict[str, str]:
    return dict(frame.headers)


# -- CONNECT ---------------------------------------------------------------------------------


async def test_connect_sends_credentials_and_negotiates_the_version(nursery: trio.Nursery) -> None:
    server = ScriptedStompServer()
    async with start(
        nursery, server, host="vh", login="alice", passcode="s3cret", client_id="c1"
    ) as conn:
        assert conn.version == "1.2"
        assert conn.session == "session-1"
        assert conn.server == "scripted-stomp-server/1"
        assert conn.heartbeat == (0, 0)
        assert conn.is_open
    connect = server.received("CONNECT")[0]
    assert headers_of(connect) == {
        "accept-version": "1.0,1.1,1.2",
        "host": "vh",
        "login": "alice",
        "passcode": "s3cret",
        "client-id": "c1",
    }


@pytest.mark.parametrize(
    ("client_version", "server_versions", "offered", "chosen"),
    [
        ("1.2", ("1.0", "1.1", "1.2"), "1.0,1.1,1.2", "1.2"),
        ("1.1", ("1.0", "1.1", "1.2"), "1.0,1.1", "1.1"),
        ("1.0", ("1.0", "1.1", "1.2"), "1.0", "1.0"),
        ("1.2", ("1.0", "1.1"), "1.0,1.1,1.2", "1.1"),
    ],
)
async def test_version_offer_and_choice(
    nursery: trio.Nursery,
    client_version: str,
    server_versions: tuple[str, ...],
    offered: str,
    chosen: str,
) -> None:
    server = ScriptedStompServer(versions=server_versions)
    async with start(nursery, server, version=client_version) as conn:
        assert conn.version == chosen
    assert server.received("CONNECT")[0].get("accept-version") == offered


async def test_no_common_version_is_a_server_error(nursery: trio.Nursery) -> None:
    server = ScriptedStompServer(versions=("1.2",))
    with pytest.raises(StompServerError) as info:
        async with start(nursery, server, version="1.1"):
            pytest.fail("connected without a common version")
    assert "no common STOMP version" in info.value.message
    assert ("version", "1.2") in info.value.headers


async def test_refused_connect_raises_stomp_server_error_unwrapped(nursery: trio.Nursery) -> None:
    server = ScriptedStompServer(refuse_connect="AMQ229031: Unable to validate user alice")
    with pytest.raises(StompServerError, match="AMQ229031") as info:
        async with start(nursery, server, login="alice", passcode="wrong"):
            pytest.fail("connected although the server refused")
    assert info.value.frame is not None
    assert info.value.frame.command == "ERROR"
    assert isinstance(info.value, ClientError)


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
async def test_a_refusal_escaped_by_the_negotiated_version_reads_as_sent(
    nursery: trio.Nursery, version: str
) -> None:
    # The server negotiates, then refuses: its ERROR is escaped by that version (\c for ':',
    # \\ for a backslash), while the client has not seen CONNECTED and read it as 1.0.
    text = r"Security Error: authentication failed for user 'DOMAIN\bob'"
    server = ScriptedStompServer(refuse_connect=text)
    with pytest.raises(StompServerError) as info:
        async with start(nursery, server, login="bob", passcode="wrong", version=version):
            pytest.fail("connected although the server refused")
    assert info.value.message == text
    assert str(info.value) == text  # the body repeats the message: said once


def test_a_server_error_says_a_body_that_extends_its_message_once() -> None:
    error = StompServerError("AMQ229031: bad user", details="AMQ229031: bad user 'bob'\n")
    assert str(error) == "AMQ229031: bad user 'bob'"
    other = StompServerError("AMQ229031: bad user", details="see the broker log")
    assert str(other) == "AMQ229031: bad user: see the broker log"


async def test_heartbeat_negotiation(nursery: trio.Nursery) -> None:
    server = ScriptedStompServer(heartbeat=(3000, 500), send_heartbeats=False)
    async with start(nursery, server, heartbeat=(1000, 2000)) as conn:
        # send: max(cx=1000, sy=500); expect: max(sx=3000, cy=2000) (STOMP 1.2 Heart-beating)
        assert conn.heartbeat == (1000, 3000)
    assert server.received("CONNECT")[0].get("heart-beat") == "1000,2000"


async def test_heartbeats_are_sent_while_idle(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    server = ScriptedStompServer(heartbeat=(0, 1000))
    async with start(nursery, server, heartbeat=(1000, 0)) as conn:
        assert conn.heartbeat == (1000, 0)
        await trio.sleep(5.5)
        assert 4 <= server.heartbeats_received <= 6
        # Frames count as heart-beats: a busy connection sends no extra EOLs.
        before = server.heartbeats_received
        for _ in range(100):
            await conn.send("/queue/q", b"x", receipt=False)
            await trio.sleep(0.25)
        assert server.heartbeats_received == before


@pytest.mark.parametrize("server_beats", [True, False])
async def test_silent_server_is_detected(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, server_beats: bool
) -> None:
    server = ScriptedStompServer(heartbeat=(1000, 0), send_heartbeats=server_beats)
    async with start(nursery, server, heartbeat=(0, 1000)) as conn:
        sub = await conn.subscribe("/queue/q")
        with trio.move_on_after(10):
            if server_beats:
                await sub.receive()  # nothing comes, but the connection stays up
            else:
                with pytest.raises(ConnectionLostError, match="nothing received"):
                    await sub.receive()
                assert trio.current_time() < 2.5
        assert conn.is_open is server_beats


# -- SEND and receipts -----------------------------------------------------------------------


async def test_send_with_receipt_returns_after_the_receipt(nursery: trio.Nursery) -> None:
    server = ScriptedStompServer(auto_receipts=False)
    async with start(nursery, server) as conn:
        done = trio.Event()

        async def produce() -> None:
            await conn.send("/queue/orders", b"hello", headers={"persistent": "true"})
            done.set()

        nursery.start_soon(produce)
        [send] = await server.wait_frames("SEND")
        await trio.testing.wait_all_tasks_blocked()
        assert not done.is_set()
        assert conn.pending_receipts == 1
        await server.release_receipts()
        await done.wait()
        assert conn.pending_receipts == 0
    assert send.body == b"hello"
    assert headers_of(send) == {
        "destination": "/queue/orders",
        "persistent": "true",
        "content-length": "5",
        "receipt": server.received("SEND")[0].get("receipt", "?"),
    }
    assert send.get("receipt")


async def test_bodies_and_headers(nursery: trio.Nursery) -> None:
    server = ScriptedStompServer()
    async with start(nursery, server) as conn:
        await conn.send("/queue/q", "text", receipt=False)
        await conn.send("/queue/q", "nul\x00inside", receipt=False)
        await conn.send("/queue/q", b"", headers=[("h", "1"), ("h", "2")])
    text, nul, empty = server.received("SEND")
    assert text.body == b"text"
    assert text.get("content-length") is None
    assert text.get("receipt") is None
    assert nul.body == b"nul\x00inside"
    assert nul.get("content-length") == "10"
    assert empty.get("content-length") == "0"
    assert empty.get_all("h") == ("1", "2")


async def test_queue_and_topic_names_carry_their_routing_type(nursery: trio.Nursery) -> None:
    server = ScriptedStompServer()
    async with start(nursery, server) as conn:
        await conn.send("queue://orders", "q")
        await conn.send("TOPIC://prices", "t")
        await conn.send("/queue/raw", "r")  # a raw destination goes as it is
        await conn.send("queue://orders", "m", headers={"destination-type": "MULTICAST"})
        await conn.send(Destination("/queue/orders", "ANYCAST"), "p")
        await conn.subscribe("topic://prices", id="t")
        await conn.subscribe("queue://orders::q1", id="q")
        with pytest.raises(ValueError, match="unknown destination type 'fifo'"):
            await conn.send("fifo://x", "never sent")
    named = [
        (frame.get("destination"), frame.get_all("destination-type"))
        for frame in server.received("SEND")
    ]
    assert named == [
        ("orders", ("ANYCAST",)),
        ("prices", ("MULTICAST",)),
        ("/queue/raw", ()),
        ("orders", ("MULTICAST",)),  # the caller's own header instead of ours
        ("/queue/orders", ("ANYCAST",)),
    ]
    topic, queue = server.received("SUBSCRIBE")
    assert (topic.get("destination"), topic.get("subscription-type")) == ("prices", "MULTICAST")
    assert (queue.get("destination"), queue.get("subscription-type")) == ("orders::q1", "ANYCAST")


async def test_pipelined_sends_keep_at_most_max_pending_receipts(nursery: trio.Nursery) -> None:
    server = ScriptedStompServer(auto_receipts=False)
    async with start(nursery, server, max_pending=3) as conn:
        finished = trio.Event()

        async def produce() -> None:
            for number in range(10):
                await conn.send("/queue/q", str(number).encode(), wait=False)
            await conn.flush_receipts()
            finished.set()

        nursery.start_soon(produce)
        await server.wait_frames("SEND", 3)
        await trio.testing.wait_all_tasks_blocked()
        assert len(server.received("SEND")) == 3
        assert conn.pending_receipts == 3

        await server.release_receipts(1)
        await server.wait_frames("SEND", 4)
        await trio.testing.wait_all_tasks_blocked()
        assert len(server.received("SEND")) == 4

        while not finished.is_set():
            assert len(server.held_receipts) <= 3
            await server.release_receipts()
            await trio.testing.wait_all_tasks_blocked()
        assert conn.pending_receipts == 0
    assert [frame.body for frame in server.received("SEND")] == [str(n).encode() for n in range(10)]


async def test_error_for_a_pipelined_send_reaches_flush_receipts(nursery: trio.Nursery) -> None:
    server = ScriptedStompServer(auto_receipts=False)
    async with start(nursery, server, max_pending=10) as conn:
        await conn.send("/queue/q", b"1", wait=False)
        await conn.send("/queue/q", b"2", wait=False)
        first, _ = await server.wait_frames("SEND", 2)
        await server.send_error(
            "AMQ229017: Queue q does not exist", receipt_id=first.get("receipt")
        )
        with pytest.raises(StompServerError) as info:
            await conn.flush_receipts()
        assert info.value.receipt_id == first.get("receipt")
        assert not conn.is_open
        with pytest.raises(StompServerError):
            await conn.send("/queue/q", b"3")


async def test_an_error_nobody_saw_is_raised_when_the_block_ends(nursery: trio.Nursery) -> None:
    async def refuse_sends(server: ScriptedStompServer, frame: Frame) -> bool:
        if frame.command == "SEND":
            await server.send_error("AMQ119032: not authorized to send")
            return True
        return False

    server = ScriptedStompServer(on_frame=refuse_sends)
    with pytest.raises(StompServerError, match="not authorized"):
        async with start(nursery, server) as conn:
            await conn.send("/queue/q", b"x", receipt=False)
            await server.wait_for(lambda: server.closed_connections == 1)
            await trio.testing.wait_all_tasks_blocked()  # the reader has read the ERROR
            assert conn.failure is not None


async def test_concurrent_senders_never_interleave_frames(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    server = ScriptedStompServer()
    async with start(nursery, server, stream_wrapper=DripStream, max_pending=5) as conn:

        async def produce(name: str) -> None:
            for number in range(10):
                await conn.send("/queue/q", f"{name}-{number}".encode() * 5, wait=number % 2 == 0)
            await conn.flush_receipts()

        async with trio.open_nursery() as producers:
            for name in "abc":
                producers.start_soon(produce, name)
    bodies = sorted(frame.body for frame in server.received("SEND"))
    assert bodies == sorted(f"{n}-{i}".encode() * 5 for n in "abc" for i in range(10))


class CountingStream(DripStream):
    """Counts ``send_all`` calls; each takes a while, as on a slow network."""

    calls = 0

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self.calls += 1
        await trio.sleep(0.01)
        await self.inner.send_all(data)


async def test_frames_written_during_a_send_go_out_together_in_call_order(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    server = ScriptedStompServer()
    streams: list[CountingStream] = []

    def counting(inner: trio.abc.Stream) -> trio.abc.Stream:
        streams.append(CountingStream(inner))
        return streams[0]

    async with start(nursery, server, stream_wrapper=counting) as conn:
        calls_before = streams[0].calls
        async with trio.open_nursery() as senders:
            for number in range(20):
                body = str(number).encode()
                senders.start_soon(functools.partial(conn.send, "/queue/q", body, receipt=False))
                await trio.testing.wait_all_tasks_blocked()  # each starts in turn: call order
        sends = streams[0].calls - calls_before
    assert [f.body for f in server.received("SEND")] == [str(n).encode() for n in range(20)]
    assert sends <= 3  # the first frame alone, then the other 19 in one or two sends


async def test_a_failed_send_fails_the_frames_queued_behind_it(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    class Breaking(DripStream):
        async def send_all(self, data: bytes | bytearray | memoryview) -> None:
            if b"SEND" in bytes(data):
                await trio.sleep(0.01)
                raise trio.BrokenResourceError("reset by peer")
            await self.inner.send_all(data)

    server = ScriptedStompServer()
    async with trio.open_nursery() as outer:
        outcomes: list[str] = []

        async def send(body: bytes) -> None:
            try:
                await conn.send("/queue/q", body, receipt=False)
                outcomes.append("sent")
            except ConnectionLostError:
                outcomes.append("lost")

        with pytest.raises(ConnectionLostError):
            async with start(nursery, server, stream_wrapper=Breaking) as conn:
                for body in (b"1", b"2", b"3"):
                    outer.start_soon(send, body)
                    await trio.testing.wait_all_tasks_blocked()
    assert outcomes == ["lost", "lost", "lost"]


async def test_a_cancelled_send_never_leaves_half_a_frame(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    server = ScriptedStompServer()
    async with start(nursery, server, stream_wrapper=DripStream) as conn:
        with trio.move_on_after(0.05):  # the frame needs about 0.15 s on this "network"
            await conn.send("/queue/q", b"x" * 100, receipt=False)
        # A torn first frame would swallow this one: its receipt would never come.
        with trio.fail_after(5):
            await conn.send("/queue/q", b"after")
        assert conn.is_open
    first, second = server.received("SEND")
    assert first.body == b"x" * 100
    assert second.body == b"after"


async def test_unencodable_frame_raises_local_protocol_error(nursery: trio.Nursery) -> None:
    server = ScriptedStompServer()
    async with start(nursery, server) as conn:
        with pytest.raises(LocalProtocolError):
            await conn.send("/queue/q", b"x", headers=[("", "empty name")])
        # The codec refuses to go on after a failed send (h11's rule): so does the client.
        assert not conn.is_open
        with pytest.raises(ClientError, match="unencodable"):
            await conn.send("/queue/q", b"y")


# -- SUBSCRIBE, MESSAGE, ACK -------------------------------------------------------------------


async def test_subscribe_receive_ack_and_nack(nursery: trio.Nursery) -> None:
    server = ScriptedStompServer()
    async with start(nursery, server) as conn:
        sub = await conn.subscribe("/queue/orders", ack="client-individual", selector="x > 1")
        subscribe = server.received("SUBSCRIBE")[0]
        assert subscribe.get("destination") == "/queue/orders"
        assert subscribe.get("id") == sub.id
        assert subscribe.get("ack") == "client-individual"
        assert subscribe.get("selector") == "x > 1"
        assert subscribe.get("receipt") is not None

        first_id = await server.send_message(sub.id, b"one")
        await server.send_message(sub.id, b"two", redelivered=True, headers=[("color", "red")])
        first = await sub.receive()
        second = await sub.receive()
        assert isinstance(first, Message)
        assert (first.body, first.message_id, first.redelivered) == (b"one", first_id, False)
        assert first.destination == "/queue/orders"
        assert (second.text, second.redelivered, second.get("color")) == ("two", True, "red")

        await conn.ack(first)
        await conn.nack(second, receipt=True)
    ack = server.received("ACK")[0]
    nack = server.received("NACK")[0]
    assert headers_of(ack) == {"id": first.ack_id}  # STOMP 1.2: the ack header, not message-id
    assert first.ack_id is not None
    assert first.ack_id != first.message_id
    assert nack.get("id") == second.ack_id


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("1.1", {"subscription": "sub-1", "message-id": "m-1"}),
        ("1.0", {"subscription": "sub-1", "message-id": "m-1"}),
    ],
)
async def test_ack_headers_of_older_versions(
    nursery: trio.Nursery, version: str, expected: dict[str, str]
) -> None:
    server = ScriptedStompServer()
    async with start(nursery, server, version=version) as conn:
        sub = await conn.subscribe("/queue/q", ack="client", id="sub-1")
        await server.send_message("sub-1", b"m")
        message = await sub.receive()
        await conn.ack(message, transaction=None)
        if version == "1.0":
            with pytest.raises(ClientError, match=r"NACK needs STOMP 1\.1"):
                await conn.nack(message)
    assert headers_of(server.received("ACK")[0]) == expected


async def test_ack_of_an_auto_ack_message_is_refused_locally(nursery: trio.Nursery) -> None:
    server = ScriptedStompServer()
    async with start(nursery, server) as conn:
        sub = await conn.subscribe("/topic/news")
        await server.send_message(sub.id, b"m")
        with pytest.raises(ClientError, match="ack mode auto"):
            await conn.ack(await sub.receive())
        assert conn.is_open
    assert server.received("ACK") == []


async def test_async_for_drains_the_buffer_then_ends_on_unsubscribe(
    nursery: trio.Nursery,
) -> None:
    server = ScriptedStompServer()
    async with start(nursery, server) as conn:
        sub = await conn.subscribe("/queue/q")
        for body in (b"a", b"b", b"c"):
            await server.send_message(sub.id, body)
        await trio.testing.wait_all_tasks_blocked()
        assert sub.buffered == 3
        await sub.unsubscribe()
        assert [message.body async for message in sub] == [b"a", b"b", b"c"]
    assert server.received("UNSUBSCRIBE")[0].get("id") == sub.id


async def test_closing_a_subscription_unsubscribes(nursery: trio.Nursery) -> None:
    server = ScriptedStompServer()
    async with start(nursery, server) as conn:
        async with await conn.subscribe("/queue/q") as sub:
            pass
        assert len(server.received("UNSUBSCRIBE")) == 1
        with pytest.raises(trio.ClosedResourceError):
            await sub.receive()


async def test_duplicate_subscription_id_is_refused(nursery: trio.Nursery) -> None:
    server = ScriptedStompServer()
    async with start(nursery, server) as conn:
        await conn.subscribe("/queue/q", id="s")
        with pytest.raises(ValueError, match="already in use"):
            await conn.subscribe("/queue/r", id="s")


async def test_error_frame_reaches_a_waiting_consumer_after_buffered_messages(
    nursery: trio.Nursery,
) -> None:
    server = ScriptedStompServer()
    async with start(nursery, server) as conn:
        sub = await conn.subscribe("/queue/q")
        await server.send_message(sub.id, b"before")
        await server.send_error("AMQ229014: queue deleted", body=b"Queue q was deleted by admin")
        assert (await sub.receive()).body == b"before"
        with pytest.raises(StompServerError) as info:
            await sub.receive()
        assert info.value.message == "AMQ229014: queue deleted"
        assert info.value.details == "Queue q was deleted by admin"
        assert str(info.value) == "AMQ229014: queue deleted: Queue q was deleted by admin"
        with pytest.raises(StompServerError):
            await conn.subscribe("/queue/other")
    # The error was seen, so leaving the block does not raise it a second time.


async def test_nothing_after_an_error_frame_is_delivered(nursery: trio.Nursery) -> None:
    server = ScriptedStompServer()
    async with start(nursery, server) as conn:
        sub = await conn.subscribe("/queue/q")
        # One write, so one read: the reader decodes the three frames at once.
        frames = (
            f"MESSAGE\nsubscription:{sub.id}\nmessage-id:m-1\nack:a-1\n\nbefore\x00"
            "ERROR\nmessage:AMQ229014 queue deleted\n\n\x00"
            f"MESSAGE\nsubscription:{sub.id}\nmessage-id:m-2\nack:a-2\n\nafter\x00"
        )
        assert server._stream is not None
        await server._stream.send_all(frames.encode())
        assert (await sub.receive()).body == b"before"
        with pytest.raises(StompServerError):
            await sub.receive()
        assert sub.buffered == 0


async def test_server_closing_the_connection_is_connection_lost(nursery: trio.Nursery) -> None:
    server = ScriptedStompServer()
    async with start(nursery, server) as conn:
        sub = await conn.subscribe("/queue/q")

        async def close_later() -> None:
            await trio.testing.wait_all_tasks_blocked()
            await server.close()

        nursery.start_soon(close_later)
        with pytest.raises(ConnectionLostError) as info:
            await sub.receive()
        assert isinstance(info.value, trio.BrokenResourceError)
        with pytest.raises(ConnectionLostError):
            await conn.send("/queue/q", b"x")


# -- transactions ------------------------------------------------------------------------------


async def test_transactions(nursery: trio.Nursery) -> None:
    server = ScriptedStompServer()
    async with start(nursery, server) as conn:
        tx = await conn.begin()
        await conn.send("/queue/q", b"in tx", transaction=tx, receipt=False)
        await conn.commit(tx)
        tx2 = await conn.begin("mine")
        await conn.abort(tx2)
    assert tx2 == "mine"
    assert tx != tx2
    commands = [(f.command, f.get("transaction")) for f in server.frames[1:-1]]
    assert commands == [
        ("BEGIN", tx),
        ("SEND", tx),
        ("COMMIT", tx),
        ("BEGIN", "mine"),
        ("ABORT", "mine"),
    ]
    assert all(
        f.get("receipt") for f in server.frames if f.command != "SEND" and f.command != "CONNECT"
    )


async def test_commit_returns_its_receipt_frame(nursery: trio.Nursery) -> None:
    async def mark_duplicate(server: ScriptedStompServer, frame: Frame) -> bool:
        if frame.command != "COMMIT" or frame.get("transaction") != "again":
            return False
        receipt = (("receipt-id", frame.get("receipt", "")), ("duplicate", "true"))
        await server.send_frame(Frame(Command.RECEIPT, receipt))
        return True

    server = ScriptedStompServer(on_frame=mark_duplicate)
    async with start(nursery, server) as conn:
        first = await conn.begin()
        accepted = await conn.commit(first)
        await conn.begin("again")
        duplicate = await conn.commit("again")
        await conn.begin("quiet")
        unasked = await conn.commit("quiet", receipt=False)
    assert accepted is not None
    assert accepted.get("duplicate") is None
    assert duplicate is not None
    assert duplicate.get("duplicate") == "true"
    assert duplicate.get("receipt-id") == server.received("COMMIT")[1].get("receipt")
    assert unasked is None


# -- DISCONNECT and closing --------------------------------------------------------------------


async def test_disconnect_waits_for_its_receipt_and_closes(nursery: trio.Nursery) -> None:
    server = ScriptedStompServer()
    async with start(nursery, server) as conn:
        sub = await conn.subscribe("/queue/q")
        await conn.disconnect()
        assert not conn.is_open
        assert conn.failure is None
        [disconnect] = server.received("DISCONNECT")
        assert disconnect.get("receipt") is not None
        with pytest.raises(ConnectionClosedError) as info:
            await conn.send("/queue/q", b"late")
        assert isinstance(info.value, trio.ClosedResourceError)
        assert [m async for m in sub] == []  # ended cleanly, not with an error
        await conn.disconnect()  # idempotent
    assert len(server.received("DISCONNECT")) == 1


async def test_leaving_the_block_disconnects(nursery: trio.Nursery) -> None:
    server = ScriptedStompServer()
    async with start(nursery, server) as conn:
        await conn.send("/queue/q", b"x", receipt=False)
    assert [f.command for f in server.frames] == ["CONNECT", "SEND", "DISCONNECT"]


async def test_missing_disconnect_receipt_times_out(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    async def ignore_disconnect(server: ScriptedStompServer, frame: Frame) -> bool:
        return frame.command == "DISCONNECT"

    server = ScriptedStompServer(on_frame=ignore_disconnect)
    async with start(nursery, server, disconnect_timeout=3) as conn:
        with pytest.raises(ConnectionLostError, match="no RECEIPT for DISCONNECT within 3 s"):
            await conn.disconnect()
        assert trio.current_time() == pytest.approx(3, abs=0.1)


async def test_an_exception_in_the_block_propagates_unwrapped_without_disconnect(
    nursery: trio.Nursery,
) -> None:
    server = ScriptedStompServer()
    with pytest.raises(KeyError, match="boom"):
        async with start(nursery, server) as conn:
            await conn.send("/queue/q", b"x")
            raise KeyError("boom")
    assert server.received("DISCONNECT") == []
    with trio.fail_after(5):  # the client closed the socket: the server's side ends
        await server.wait_for(lambda: server.closed_connections == 1)


async def test_a_cancelled_block_closes_the_connection(nursery: trio.Nursery) -> None:
    server = ScriptedStompServer()
    with trio.CancelScope() as scope:
        async with start(nursery, server) as conn:
            scope.cancel()
            await trio.sleep_forever()
    assert scope.cancelled_caught
    assert not conn.is_open
    assert server.received("DISCONNECT") == []


# -- over TCP ----------------------------------------------------------------------------------


async def test_over_a_real_tcp_socket(nursery: trio.Nursery) -> None:
    server = ScriptedStompServer()
    port = await nursery.start(server.serve_tcp)
    async with open_stomp_connection("127.0.0.1", port, login="u", passcode="p") as conn:
        sub = await conn.subscribe("/queue/q", ack="client")
        await conn.send("/queue/q", b"over tcp")
        await server.send_message(sub.id, b"back")
        message = await sub.receive()
        await conn.ack(message)
    assert [f.command for f in server.frames] == [
        "CONNECT",
        "SUBSCRIBE",
        "SEND",
        "ACK",
        "DISCONNECT",
    ]


async def refuse_the_first_send(stream: trio.SocketStream) -> None:
    """A server that refuses a SEND by its headers, as a node refuses an oversized body:
    ERROR, then close with the body unread (so the client's writes meet a reset)."""
    received = b""
    while b"\x00" not in received:  # CONNECT
        received += await stream.receive_some(65536)
    await stream.send_all(b"CONNECTED\nversion:1.2\n\n\x00")
    while b"SEND\n" not in received or b"\n\n" not in received.split(b"SEND\n", 1)[1]:
        received += await stream.receive_some(65536)
    await stream.send_all(b"ERROR\nmessage:frame body too large\n\n\x00")
    stream.socket.close()


async def test_a_refusal_is_not_hidden_by_the_reset_that_follows_it(
    nursery: trio.Nursery,
) -> None:
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    nursery.start_soon(trio.serve_listeners, refuse_the_first_send, [listener])
    # Which of the ERROR and the reset the client sees first is a race: run it often.
    for _ in range(100):
        with pytest.raises(StompServerError, match="frame body too large"):
            async with open_stomp_connection("127.0.0.1", port) as conn:
                for _ in range(3):
                    await conn.send("/queue/q", b"x" * 2_000_000, receipt=False)


async def test_connection_refused_is_an_os_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(OSError, match=f"connect to 127.0.0.1:{port} failed"):
        async with open_stomp_connection("127.0.0.1", port, connect_timeout=5):
            pytest.fail("connected to a closed port")


async def test_invalid_options_are_refused_before_connecting() -> None:
    with pytest.raises(ValueError, match="version"):
        async with open_stomp_connection("127.0.0.1", 1, version="2.0"):
            pass
    with pytest.raises(ValueError, match="max_pending"):
        async with open_stomp_connection("127.0.0.1", 1, max_pending=0):
            pass


async def test_a_subscription_needs_nothing_but_its_host() -> None:
    """A Subscription talks to its connection only through the SubscriptionHost protocol."""

    class Host:
        def __init__(self) -> None:
            self.is_open = True
            self.failure: Exception | None = None
            self.unsubscribed: list[tuple[str, bool]] = []

        def raise_failure(self) -> None:
            if self.failure is not None:
                raise self.failure

        async def unsubscribe(self, subscription: Subscription, *, receipt: bool) -> None:
            self.unsubscribed.append((subscription.id, receipt))

    host = Host()
    subscription = Subscription(None, "s-1", "/queue/a", "auto", host=host)  # type: ignore[arg-type]
    await subscription.unsubscribe(receipt=False)
    await subscription.aclose()
    assert host.unsubscribed == [("s-1", False), ("s-1", True)]
    host.is_open = False
    closed = Subscription(None, "s-2", "/queue/a", "auto", host=host)  # type: ignore[arg-type]
    await closed.aclose()  # nothing to unsubscribe from a connection that is not open
    assert host.unsubscribed == [("s-1", False), ("s-1", True)]
