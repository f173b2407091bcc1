"""A browse SUBSCRIBE as a named action: the session returns a Browse (and sends nothing),
the shell reads it through the broker's offset reading in the frame's turn, and the session
answers with what was found; a read that fails is refused as a frame is (an ERROR with
the frame's receipt id, no end frame, then the close)."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from test_stomp_session import Client

from artemis_py.broker.authentication import Authenticator
from artemis_py.broker.broker import Broker
from artemis_py.broker.persistence import Persistence
from artemis_py.broker.queue import Queue
from artemis_py.config import default_config
from artemis_py.protocol.stomp import Connection as StompCodec
from artemis_py.protocol.stomp import Frame, Role
from artemis_py.sessions.stomp import StompError, browsing
from artemis_py.sessions.stomp.actions import Browse
from artemis_py.transport.stomp import StompConnection

NODE = "0123456789abcdef"


@pytest.fixture
def broker() -> Broker:
    broker = Broker(default_config(), Persistence(None, NODE))
    broker.recover()
    return broker


def _queue_with(broker: Broker, bodies: list[bytes]) -> Queue:
    producer = Client(broker)
    producer.connect()
    for body in bodies:
        producer.frame("SEND", body, destination="/queue/q")
    queue = broker.queue("q")
    assert queue is not None
    assert queue.message_count == len(bodies)
    return queue


def _subscribe(client: Client, **headers: str) -> Browse | None:
    frame = Frame("SUBSCRIBE", tuple((k.replace("_", "-"), v) for k, v in headers.items()), b"")
    action = client.session.handle(frame)
    assert action is None or isinstance(action, Browse)
    return action


def test_a_browse_subscribe_names_the_read_and_sends_nothing_itself(broker: Broker) -> None:
    queue = _queue_with(broker, [b"a", b"b", b"c"])
    reader = Client(broker)
    reader.connect()
    action = _subscribe(
        reader, destination="/queue/q", id="b1", browser="true", browser_from="0", browser_max="2"
    )
    assert action == Browse("b1", "/queue/q", queue, stream=NODE, start=0, limit=2)
    assert not action.immediate
    assert reader.sent == []  # nothing goes out before the shell has read it
    assert "b1" in reader.session.browsed  # an UNSUBSCRIBE of it is no error

    found = trio.run(broker.offsets.browse, queue, NODE, 0, None, 2)
    browsing.answer(reader.session, action, found)
    messages = reader.take("MESSAGE")
    assert [m.body for m in messages[:2]] == [b"a", b"b"]
    end = messages[2]
    offsets = [ref.offset for ref in queue.messages]
    assert end.get("browser") == "end"
    assert end.get("subscription") == "b1"
    assert end.get("message-count") == "2"
    assert end.get("offset-next") == str(offsets[2])  # where the next browse goes on
    assert [m.get("offset") for m in messages[:2]] == [str(o) for o in offsets[:2]]
    assert queue.message_count == 3  # a browse copies, it takes nothing


def test_a_listing_of_a_queue_that_does_not_exist_reads_nothing(broker: Broker) -> None:
    reader = Client(broker)
    reader.connect()
    action = _subscribe(reader, destination="/queue/nope", id="s", browser="true",
                        browser_streams="true")  # fmt: skip
    assert action == Browse("s", "/queue/nope", None, listing=True)
    browsing.answer(reader.session, action, None)
    (end,) = reader.take("MESSAGE")
    assert end.get("queue-exists") == "false"
    assert end.get("streams") is None
    assert end.get("management-address") == broker.config.management_address


def test_a_range_browse_of_a_queue_that_does_not_exist_is_refused(broker: Broker) -> None:
    reader = Client(broker)
    reader.connect()
    with pytest.raises(StompError, match=f"queue nope does not exist on node {NODE}"):
        _subscribe(reader, destination="/queue/nope", id="b", browser="true")


def test_a_read_that_fails_is_refused_as_a_frame_is(broker: Broker) -> None:
    _queue_with(broker, [b"a"])
    reader = Client(broker)
    reader.connect()
    action = _subscribe(reader, destination="/queue/q", id="b", browser="true")
    assert action is not None
    refusal = browsing.unreadable(action, OSError("page 3 is gone"))
    assert str(refusal) == "cannot read the paged messages of queue q: page 3 is gone"
    assert refusal.kind == "storage"  # as the metrics count a failed journal
    assert reader.sent == []  # the shell sends the ERROR, as for a refused frame


async def test_the_shell_reads_a_browse_in_its_turn_and_reports_a_failed_read(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the Trio shell: the browse's frames come before its RECEIPT, in frame order;
    a page file that cannot be read refuses the SUBSCRIBE: an ERROR with its receipt id,
    then the connection closes (no frame after the ERROR, as STOMP requires)."""
    _queue_with(broker, [b"a", b"b"])
    client, server = trio.testing.memory_stream_pair()
    connection = StompConnection(broker, server, broker.config.acceptors[0],
                                 Authenticator(False, {}))  # fmt: skip
    codec = StompCodec(Role.CLIENT)
    frames: list[Frame] = []

    async def read_until(command: str, count: int = 1) -> None:
        while sum(f.command == command for f in frames) < count:
            codec.receive_data(await client.receive_some())
            while isinstance(event := codec.next_event(), Frame):
                frames.append(event)

    async def send(command: str, **headers: str) -> None:
        pairs = tuple((k.replace("_", "-"), v) for k, v in headers.items())
        await client.send_all(codec.send(Frame(command, pairs, b"")))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(connection.run)
        await send("CONNECT", accept_version="1.2", host="h")
        await read_until("CONNECTED")
        await send("SUBSCRIBE", destination="/queue/q", id="b1", browser="true", receipt="r1")
        await read_until("RECEIPT")
        commands = [f.command for f in frames]
        assert commands == ["CONNECTED", "MESSAGE", "MESSAGE", "MESSAGE", "RECEIPT"]
        assert frames[3].get("browser") == "end"

        async def broken(*args: object) -> None:
            raise OSError("cannot read page 7")

        monkeypatch.setattr(broker.offsets, "browse", broken)
        frames.clear()
        await send("SUBSCRIBE", destination="/queue/q", id="b2", browser="true", receipt="r2")
        await read_until("ERROR")
        assert [f.command for f in frames] == ["ERROR"]
        message = "cannot read the paged messages of queue q: cannot read page 7"
        assert frames[0].get("message") == message
        assert frames[0].get("receipt-id") == "r2"
        assert await client.receive_some() == b""  # closed by the node
    assert connection.error_kind == "storage"
