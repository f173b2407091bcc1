"""The Trio shell of STOMP over WebSocket (transport/websocket.py) over memory streams, with
wsproto as the client: the upgrade within a deadline, STOMP bytes both ways, pings answered
while reading, a client's close or disappearance as an end of stream, the node's close frame
(even when closed forcefully; 1001 when the node stops, 1000 when the STOMP session ended),
and refusals answered, logged and closed."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Ping,
    Pong,
    RejectConnection,
    Request,
    TextMessage,
)

from artemis_py.broker.authentication import Authenticator
from artemis_py.broker.broker import Broker
from artemis_py.broker.persistence import Persistence
from artemis_py.config import AcceptorConfig, default_config
from artemis_py.transport.log_backoff import LogBackoff
from artemis_py.transport.stomp import StompConnection
from artemis_py.transport.websocket import WebSocketStream, open_websocket

ACCEPTOR = AcceptorConfig(name="stomp", url="tcp://127.0.0.1:0", handshake_timeout=2)


class Client:
    """The client end of a memory stream pair, speaking WebSocket through wsproto."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.ws = WSConnection(ConnectionType.CLIENT)

    async def send(self, event: Event) -> None:
        await self.stream.send_all(self.ws.send(event))

    async def receive(self) -> list[Event]:
        """Events from what the node sent next (an end of stream included)."""
        while True:
            data = await self.stream.receive_some(65536)
            self.ws.receive_data(data or None)
            found = list(self.ws.events())
            if found:
                return found


async def upgraded(nursery: trio.Nursery) -> tuple[WebSocketStream, Client]:
    node_end, client_end = trio.testing.memory_stream_pair()
    client = Client(client_end)
    request = client.ws.send(Request(host="h", target="/", subprotocols=["v12.stomp"]))
    deadline = trio.current_time() + 2
    nursery.start_soon(client.stream.send_all, request[5:])
    websocket = await open_websocket(
        node_end, request[:5], ACCEPTOR, "peer", deadline, LogBackoff()
    )
    assert websocket is not None
    answer = await client.receive()
    assert isinstance(answer[0], AcceptConnection)
    assert answer[0].subprotocol == "v12.stomp"
    return websocket, client


async def test_stomp_bytes_both_ways_and_pings_answered_while_reading():
    async with trio.open_nursery() as nursery:
        websocket, client = await upgraded(nursery)
        await client.send(Ping(b"p"))
        await client.send(TextMessage("CONNECT\n\n\x00"))
        assert await websocket.receive_some(4) == b"CONN"
        assert await websocket.receive_some() == b"ECT\n\n\x00"
        assert await client.receive() == [Pong(b"p")]
        await websocket.send_all(b"CONNECTED\n\n\x00\nRECEIPT\nreceipt-id:1\n\n\x00")
        got: list[Event] = []
        while len(got) < 3:
            got += await client.receive()
        assert [e.data for e in got if isinstance(e, BytesMessage)] == [
            b"CONNECTED\n\n\x00",
            b"\n",
            b"RECEIPT\nreceipt-id:1\n\n\x00",
        ]
        await websocket.aclose()


async def test_a_client_close_is_an_end_of_stream_and_is_answered():
    async with trio.open_nursery() as nursery:
        websocket, client = await upgraded(nursery)
        await client.send(CloseConnection(code=1000))
        assert await websocket.receive_some() == b""
        answer = await client.receive()
        assert isinstance(answer[0], CloseConnection)
        await websocket.aclose()  # no second close frame
        assert await client.stream.receive_some() == b""


async def test_the_node_sends_a_close_frame_even_when_closing_forcefully():
    async with trio.open_nursery() as nursery:
        websocket, client = await upgraded(nursery)
        await trio.aclose_forcefully(websocket)
        close = (await client.receive())[0]
        assert isinstance(close, CloseConnection)
        assert close.code == 1000


async def test_a_stream_told_the_node_is_going_away_closes_with_1001():
    async with trio.open_nursery() as nursery:
        websocket, client = await upgraded(nursery)
        websocket.going_away()
        await trio.aclose_forcefully(websocket)
        close = (await client.receive())[0]
        assert isinstance(close, CloseConnection)
        assert close.code == 1001


@pytest.mark.parametrize(
    ("how", "code"),
    [("stop", 1001), ("cancel", 1001), ("disconnect", 1000), ("error", 1000)],
)
async def test_a_stomp_connection_closes_with_1001_only_when_the_node_stops(
    how: str, code: int
) -> None:
    """The node stops: with scale-down it stops its connections, without it cancels them
    (RFC 6455 §7.4.1, Going Away). A STOMP session that ends (DISCONNECT, or an ERROR) is a
    normal closure."""
    config = default_config()
    broker = Broker(config, Persistence(None, "0123456789abcdef"))
    broker.recover()
    async with trio.open_nursery() as nursery:
        websocket, client = await upgraded(nursery)
        connection = StompConnection(
            broker, websocket, config.acceptors[0], Authenticator(False, {})
        )
        async with trio.open_nursery() as serving:
            serving.start_soon(connection.run)
            await client.send(TextMessage("CONNECT\naccept-version:1.2\nhost:h\n\n\x00"))
            connected = (await client.receive())[0]
            assert isinstance(connected, BytesMessage)
            assert connected.data.startswith(b"CONNECTED\n")
            if how == "stop":
                connection.stop()
            elif how == "cancel":
                serving.cancel_scope.cancel()
            else:
                await client.send(
                    TextMessage("DISCONNECT\n\n\x00" if how == "disconnect" else "BOGUS\n\n\x00")
                )
        events: list[Event] = []
        while not any(isinstance(e, CloseConnection) for e in events):
            events += await client.receive()
    close = next(e for e in events if isinstance(e, CloseConnection))
    assert close.code == code
    if how == "error":
        assert any(isinstance(e, BytesMessage) and e.data.startswith(b"ERROR\n") for e in events)


async def test_a_client_vanishing_mid_message_is_an_end_of_stream(caplog):
    async with trio.open_nursery() as nursery:
        websocket, client = await upgraded(nursery)
        stomp = b"SEND\ndestination:q\n\n" + b"x" * 500 + b"\x00"
        frame = client.ws.send(BytesMessage(stomp))
        await client.stream.send_all(frame[:100])
        # 92 payload bytes: after 2 header bytes, a 2-byte length and the 4-byte mask
        assert await websocket.receive_some() == stomp[:92]
        await client.stream.aclose()
        assert await websocket.receive_some() == b""
        assert websocket.receive_ready() == b""
        await websocket.aclose()
    assert "Traceback" not in caplog.text


async def test_an_oversized_frame_is_closed_and_logged(caplog):
    caplog.set_level(logging.INFO, "artemis_py.transport")
    small = AcceptorConfig(name="stomp", url="tcp://x:0", web_socket_max_frame_payload_length=10)
    node_end, client_end = trio.testing.memory_stream_pair()
    client = Client(client_end)
    await client.send(Request(host="h", target="/"))
    websocket = await open_websocket(
        node_end, b"", small, "peer", trio.current_time() + 2, LogBackoff()
    )
    assert websocket is not None
    await client.receive()
    await client.send(BytesMessage(b"x" * 11))
    assert await websocket.receive_some() == b""
    close = (await client.receive())[0]
    assert isinstance(close, CloseConnection)
    assert close.code == 1009
    assert "closed (1009)" in caplog.text


async def test_a_plain_get_is_answered_logged_and_closed(caplog):
    caplog.set_level(logging.INFO, "artemis_py.transport")
    node_end, client_end = trio.testing.memory_stream_pair()
    request = b"GET /index.html HTTP/1.1\r\nHost: h\r\n\r\n"
    websocket = await open_websocket(
        node_end, request, ACCEPTOR, "1.2.3.4:5", trio.current_time() + 2, LogBackoff()
    )
    assert websocket is None
    answer = b""
    while chunk := await client_end.receive_some():
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 426 Upgrade Required\r\n")
    assert "HTTP request from 1.2.3.4:5 refused (426)" in caplog.text


async def test_a_refused_subprotocol_is_answered():
    node_end, client_end = trio.testing.memory_stream_pair()
    client = Client(client_end)
    request = client.ws.send(Request(host="h", target="/", subprotocols=["mqtt"]))
    deadline = trio.current_time() + 2
    assert await open_websocket(node_end, request, ACCEPTOR, "p", deadline, LogBackoff()) is None
    refused = (await client.receive())[0]
    assert isinstance(refused, RejectConnection)
    assert refused.status_code == 400


async def test_an_upgrade_not_complete_by_the_deadline_is_closed(caplog, autojump_clock):
    caplog.set_level(logging.INFO, "artemis_py.transport")
    node_end, client_end = trio.testing.memory_stream_pair()
    start = trio.current_time()
    partial = b"GET / HTTP/1.1\r\nHost: h\r\n"
    assert await open_websocket(node_end, partial, ACCEPTOR, "p", start + 2, LogBackoff()) is None
    assert trio.current_time() - start == 2
    assert await client_end.receive_some() == b""
    assert "not complete within 2 s (handshake-timeout)" in caplog.text
