"""One partition's transaction against a scripted node (no JVM; pyspark only imported).

The node is :class:`ScriptedStompServer` over TCP, scripted to answer a COMMIT with
``duplicate:true``, to drop the connection before the COMMIT's RECEIPT, or to refuse a SEND.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import trio

pytest.importorskip("pyspark.sql.datasource")

from artemis_py.client.testing import ScriptedStompServer
from artemis_py.protocol.stomp import Command, Frame
from artemis_py.spark.options import parse_sink_options
from artemis_py.spark.sink import SinkCommitMessage, SinkPlan, send_partition
from artemis_py.spark.sink_rules import SinkError, check_sink_schema
from artemis_py.spark.wire import NodeUnreachableError

DUP = "spark:0f0e:7"
COLUMNS = [("body", "string"), ("headers", "map<string,string>"), ("destination", "string")]


def plan_for(port: int, **options: str) -> SinkPlan:
    parsed = parse_sink_options({"url": f"tcp://127.0.0.1:{port}", **options})
    return SinkPlan(parsed, check_sink_schema(COLUMNS, destination=parsed.destination))


def rows(count: int, consumed: list[int] | None = None) -> Iterator[tuple[Any, ...]]:
    """``count`` rows to queue ``out``; each row read is counted in ``consumed``."""
    for number in range(count):
        if consumed is not None:
            consumed.append(number)
        yield (f"row {number}", {"seq": str(number)}, "out")


async def serve(nursery: trio.Nursery, server: ScriptedStompServer) -> int:
    port: int = await nursery.start(server.serve_tcp)
    return port


async def test_one_pipelined_transaction_with_the_id_on_every_message(
    nursery: trio.Nursery,
) -> None:
    server = ScriptedStompServer()
    port = await serve(nursery, server)
    result = await send_partition(plan_for(port), 7, DUP, rows(3))
    assert result == SinkCommitMessage(partition=7, rows=3, duplicate=False)
    assert [f.command for f in server.frames] == [
        "CONNECT",
        "BEGIN",
        "SEND",
        "SEND",
        "SEND",
        "COMMIT",
        "DISCONNECT",
    ]
    begin, *sends, commit = server.frames[1:-1]
    transaction = begin.get("transaction")
    assert begin.get("receipt") is None  # nothing waits before the COMMIT
    for number, send in enumerate(sends):
        assert dict(send.headers) == {
            "destination": "out",
            "persistent": "true",
            "seq": str(number),
            "_AMQ_DUPL_ID": DUP,
            "transaction": transaction,
        }
        assert send.body == f"row {number}".encode()
    assert commit.get("transaction") == transaction
    assert commit.get("receipt")


async def test_a_duplicate_commit_is_success(nursery: trio.Nursery) -> None:
    async def duplicate(server: ScriptedStompServer, frame: Frame) -> bool:
        if frame.command != "COMMIT":
            return False
        pairs = (("receipt-id", frame.get("receipt", "")), ("duplicate", "true"))
        await server.send_frame(Frame(Command.RECEIPT, pairs))
        return True

    server = ScriptedStompServer(on_frame=duplicate)
    port = await serve(nursery, server)
    result = await send_partition(plan_for(port), 0, DUP, rows(2))
    assert result == SinkCommitMessage(partition=0, rows=2, duplicate=True)


async def test_a_connection_lost_before_the_receipt_sends_the_partition_again(
    nursery: trio.Nursery,
) -> None:
    async def drop_first_commit(server: ScriptedStompServer, frame: Frame) -> bool:
        if frame.command == "COMMIT" and len(server.received("COMMIT")) == 1:
            await server.close()
            return True
        return False

    server = ScriptedStompServer(on_frame=drop_first_commit)
    port = await serve(nursery, server)
    consumed: list[int] = []
    result = await send_partition(plan_for(port), 1, DUP, rows(4, consumed))
    assert result == SinkCommitMessage(partition=1, rows=4, duplicate=False)
    assert consumed == [0, 1, 2, 3]  # Spark's rows were read once, the copy sent twice
    assert server.connections == 2
    sends = server.received("SEND")
    assert [s.body for s in sends] == [f"row {n}".encode() for n in (0, 1, 2, 3) * 2]
    assert {s.get("_AMQ_DUPL_ID") for s in sends} == {DUP}
    first, second = (c.get("transaction") for c in server.received("COMMIT"))
    assert {s.get("transaction") for s in sends} == {first, second}


async def test_a_node_that_keeps_dropping_fails_after_node_timeout(
    nursery: trio.Nursery,
) -> None:
    async def drop_commits(server: ScriptedStompServer, frame: Frame) -> bool:
        if frame.command == "COMMIT":
            await server.close()
            return True
        return False

    server = ScriptedStompServer(on_frame=drop_commits)
    port = await serve(nursery, server)
    started = trio.current_time()
    with pytest.raises(NodeUnreachableError) as caught:
        await send_partition(plan_for(port, nodeTimeoutMs="400"), 2, DUP, rows(1))
    assert trio.current_time() - started < 5
    message = str(caught.value)
    assert message.startswith(f"partition 2: the connection to node tcp://127.0.0.1:{port} ")
    assert "nodeTimeoutMs=400" in message
    assert server.connections >= 2


async def test_a_refused_send_names_the_partition_and_is_not_retried(
    nursery: trio.Nursery,
) -> None:
    async def refuse_second_send(server: ScriptedStompServer, frame: Frame) -> bool:
        if frame.command == "SEND" and len(server.received("SEND")) == 2:
            await server.send_error('AMQ229102: Address "out" is full')
            return True
        return False

    server = ScriptedStompServer(on_frame=refuse_second_send)
    port = await serve(nursery, server)
    with pytest.raises(SinkError) as caught:
        await send_partition(plan_for(port), 3, DUP, rows(50))
    assert str(caught.value) == (
        f'partition 3: node tcp://127.0.0.1:{port} refused it: AMQ229102: Address "out" is '
        "full; nothing of the partition was stored"
    )
    assert server.connections == 1
    assert server.received("COMMIT") == []


async def test_a_bad_row_ends_the_connection_without_a_commit(nursery: trio.Nursery) -> None:
    server = ScriptedStompServer()
    port = await serve(nursery, server)
    bad = [("fine", None, "out"), (None, None, "out")]
    with pytest.raises(SinkError, match=r"^partition 4, row 2: body is null$"):
        await send_partition(plan_for(port), 4, DUP, bad)
    await server.wait_for(lambda: server.closed_connections == 1)
    assert [f.command for f in server.frames] == ["CONNECT", "BEGIN", "SEND"]


async def test_an_empty_partition_connects_to_nothing() -> None:
    # Port 1 is never listened on: a connection attempt would fail the test.
    result = await send_partition(plan_for(1, nodeTimeoutMs="0"), 5, DUP, iter(()))
    assert result == SinkCommitMessage(partition=5, rows=0, duplicate=False)


def test_commit_messages_and_errors_survive_pickling() -> None:
    # Spark pickles both from its Python workers to the driver.
    import pickle

    message = SinkCommitMessage(partition=1, rows=10, duplicate=True)
    assert pickle.loads(pickle.dumps(message)) == message
    error = pickle.loads(pickle.dumps(SinkError("partition 1, row 2: body is null")))
    assert isinstance(error, SinkError)
    assert str(error) == "partition 1, row 2: body is null"
