"""The connector's connections: retried until nodeTimeoutMs, a refused login at once."""

from __future__ import annotations

import socket
from contextlib import AsyncExitStack

import pytest
import trio
import trio.testing

from artemis_py.client import BrokerUrl
from artemis_py.client.errors import ConnectionLostError
from artemis_py.client.testing import ScriptedStompServer
from artemis_py.spark.wire import (
    Deadline,
    Login,
    NodeRefusedError,
    NodeUnreachableError,
    call,
    heartbeat_ms,
    open_node,
)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_node_that_stays_down_is_named_after_the_timeout() -> None:
    url = BrokerUrl("127.0.0.1", _closed_port())

    async def connect() -> None:
        deadline = Deadline.after(300)
        async with AsyncExitStack() as stack:
            await open_node(stack, url, Login(), deadline)

    with pytest.raises(NodeUnreachableError) as caught:
        call(connect)
    assert caught.value.url == url
    assert str(url) in str(caught.value)
    assert "nodeTimeoutMs=300" in str(caught.value)
    assert "Connection refused" in str(caught.value)


async def test_a_node_that_comes_up_in_time_is_reached() -> None:
    server = ScriptedStompServer()
    port = _closed_port()
    url = BrokerUrl("127.0.0.1", port)

    async def start_late(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await trio.sleep(0.5)
        listener = (await trio.open_tcp_listeners(port, host="127.0.0.1"))[0]
        async with listener:
            await server.serve(await listener.accept())

    async with trio.open_nursery() as nursery:
        await nursery.start(start_late)
        async with AsyncExitStack() as stack:
            conn = await open_node(stack, url, Login(), Deadline.after(10_000))
            assert conn.is_open
        nursery.cancel_scope.cancel()


async def test_a_refused_login_is_not_retried() -> None:
    server = ScriptedStompServer(refuse_connect="bad credentials")
    async with trio.open_nursery() as nursery:
        port = await nursery.start(server.serve_tcp)
        with trio.fail_after(5):  # a retry loop would run the whole minute
            with pytest.raises(NodeRefusedError, match="refused the connection: bad credentials"):
                async with AsyncExitStack() as stack:
                    await open_node(
                        stack, BrokerUrl("127.0.0.1", port), Login("u", "p"), Deadline.after(60_000)
                    )
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("timeout_ms", "beat"), [(0, 500), (2000, 500), (8000, 2000), (60_000, 10_000)]
)
def test_the_heart_beat_is_a_quarter_of_the_node_timeout_within_bounds(
    timeout_ms: int, beat: int
) -> None:
    assert heartbeat_ms(timeout_ms) == beat


async def test_a_node_that_hangs_after_connecting_is_lost_not_waited_for() -> None:
    # The node answers CONNECT and then falls silent (stopped, or a half-open connection).
    server = ScriptedStompServer(heartbeat=(100, 100), send_heartbeats=False)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(server.serve_tcp)
        with trio.fail_after(5), pytest.raises(ConnectionLostError, match="heart-beat"):
            async with AsyncExitStack() as stack:
                conn = await open_node(
                    stack, BrokerUrl("127.0.0.1", port), Login(), Deadline.after(2000)
                )
                assert conn.heartbeat == (500, 500)
                while conn.is_open:  # noqa: ASYNC110 - the connection has no event for it
                    await trio.sleep(0.05)
        nursery.cancel_scope.cancel()


def test_unreachable_error_survives_pickling() -> None:
    import pickle

    error = NodeUnreachableError("node tcp://h:1 is not reachable", BrokerUrl("h", 1))
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.url) == (str(error), error.url)
