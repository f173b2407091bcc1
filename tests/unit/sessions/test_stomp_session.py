"""The STOMP session without sockets: frames in, frames out through a callback.

Frames travel as bytes between a client codec and the session's codec, as they would over
a socket. The broker behind the session has persistence off, so every Pending settles at
once; what must wait for the journal is the shell's business (tests/integration).
"""

from __future__ import annotations

import math

import pytest

from artemis_py.broker.authentication import Authenticator
from artemis_py.broker.broker import Broker
from artemis_py.broker.pending import Pending
from artemis_py.broker.persistence import Persistence
from artemis_py.config import default_config
from artemis_py.protocol.stomp import NEED_DATA, Connection, Frame, Role
from artemis_py.sessions.stomp import StompError, StompSession
from artemis_py.sessions.stomp.actions import Browse


class Client:
    """A session and what it sent, with the shell's part played by hand."""

    def __init__(self, broker: Broker, *, users: dict[str, str] | None = None) -> None:
        self.sent: list[Frame] = []
        self.open = True
        self.codec = Connection(Role.CLIENT)
        self.session = StompSession(
            broker,
            broker.config.acceptors[0],
            Authenticator(users is not None, users),
            send=self._receive,
            writable=lambda: self.open,
        )

    def _receive(self, frame: Frame) -> None:
        self.codec.receive_data(self.session.codec.send(frame))
        while (event := self.codec.next_event()) is not NEED_DATA:
            assert isinstance(event, Frame)
            self.sent.append(event)

    def frame(self, command: str, body: bytes = b"", **headers: str) -> Pending | None:
        """Send a frame; returns what the session's ``handle`` returned for it."""
        frame = Frame(command, tuple((k.replace("_", "-"), v) for k, v in headers.items()), body)
        self.session.codec.receive_data(self.codec.send(frame))
        event = self.session.codec.next_event()
        assert isinstance(event, Frame), event
        pending = self.session.handle(event)
        assert not isinstance(pending, Browse)  # the shell's to read: test_stomp_session_browse
        if pending is not None:
            assert pending.immediate  # persistence is off: nothing to wait for
            pending.complete()
        return pending

    def connect(self, version: str = "1.2", **headers: str) -> Frame:
        self.frame("CONNECT", accept_version=version, host="localhost", **headers)
        return self.take("CONNECTED")[0]

    def take(self, command: str) -> list[Frame]:
        frames = [f for f in self.sent if f.command == command]
        self.sent = [f for f in self.sent if f.command != command]
        return frames

    def bodies(self) -> list[bytes]:
        return [f.body for f in self.take("MESSAGE")]


@pytest.fixture
def broker() -> Broker:
    broker = Broker(default_config(), Persistence(None, "0123456789abcdef"))
    broker.recover()
    return broker


def test_connect_negotiates_the_version_and_heart_beats(broker: Broker) -> None:
    client = Client(broker)
    connected = client.connect("1.1,1.2", heart_beat="0,10000")
    assert connected.get("version") == "1.2"
    assert connected.get("session") == client.session.id
    assert client.session.codec.version == "1.2"
    # The client wants a heart-beat every 10 s: the session says how often to send one.
    assert client.session.heartbeat_interval == 10.0
    assert client.session.connected


def test_frames_before_connect_are_refused(broker: Broker) -> None:
    # The codec already refuses them; the session does not rely on it.
    session = Client(broker).session
    with pytest.raises(StompError, match="SEND before CONNECT"):
        session.handle(Frame("SEND", (("destination", "/queue/q"),), b"x"))


def test_wrong_credentials_are_refused(broker: Broker) -> None:
    client = Client(broker, users={"alice": "secret"})
    with pytest.raises(StompError, match="authentication failed for user 'alice'"):
        client.frame("CONNECT", accept_version="1.2", login="alice", passcode="wrong")
    assert not client.session.connected


def test_a_connect_without_login_is_refused_saying_so(broker: Broker) -> None:
    client = Client(broker, users={"alice": "secret"})
    with pytest.raises(StompError, match=r"authentication failed \(no login header\)$"):
        client.frame("CONNECT", accept_version="1.2")


def test_a_sent_message_reaches_a_subscriber(broker: Broker) -> None:
    producer, consumer = Client(broker), Client(broker)
    producer.connect()
    consumer.connect()
    consumer.frame("SUBSCRIBE", destination="/queue/orders", id="s1")
    producer.frame("SEND", b"hello", destination="/queue/orders", colour="blue")
    (message,) = consumer.take("MESSAGE")
    assert message.body == b"hello"
    assert message.get("destination") == "/queue/orders"
    assert message.get("subscription") == "s1"
    assert message.get("colour") == "blue"
    assert message.get("ack") is None  # auto-ack: nothing to acknowledge


def test_unacknowledged_messages_come_back_when_the_session_closes(broker: Broker) -> None:
    producer, first, second = Client(broker), Client(broker), Client(broker)
    for client in (producer, first, second):
        client.connect()
    first.frame("SUBSCRIBE", destination="/queue/q", id="a", ack="client-individual")
    for n in range(3):
        producer.frame("SEND", b"m%d" % n, destination="/queue/q")
    delivered = first.take("MESSAGE")
    assert [f.body for f in delivered] == [b"m0", b"m1", b"m2"]
    first.frame("ACK", id=delivered[0].get("ack") or "")
    first.session.close()
    second.frame("SUBSCRIBE", destination="/queue/q", id="b")
    redelivered = second.take("MESSAGE")
    assert [f.body for f in redelivered] == [b"m1", b"m2"]
    assert all(f.get("redelivered") == "true" for f in redelivered)


def test_a_nack_redelivers(broker: Broker) -> None:
    client = Client(broker)
    client.connect()
    client.frame("SUBSCRIBE", destination="/queue/q", id="s", ack="client-individual")
    client.frame("SEND", b"again", destination="/queue/q")
    (first,) = client.take("MESSAGE")
    client.frame("NACK", id=first.get("ack") or "")
    (second,) = client.take("MESSAGE")
    assert second.body == b"again"
    assert second.get("redelivered") == "true"


def test_an_ack_of_nothing_is_refused(broker: Broker) -> None:
    client = Client(broker)
    client.connect()
    with pytest.raises(StompError, match="no unacknowledged message s:7"):
        client.frame("ACK", id="s:7")


def test_a_transaction_delivers_at_commit_only(broker: Broker) -> None:
    producer, consumer = Client(broker), Client(broker)
    producer.connect()
    consumer.connect()
    consumer.frame("SUBSCRIBE", destination="/queue/tx", id="s")
    producer.frame("BEGIN", transaction="t1")
    producer.frame("SEND", b"a", destination="/queue/tx", transaction="t1")
    assert consumer.bodies() == []
    producer.frame("COMMIT", transaction="t1")
    assert consumer.bodies() == [b"a"]
    with pytest.raises(StompError, match="transaction t1 was not begun"):
        producer.frame("COMMIT", transaction="t1")


def test_a_connection_that_takes_no_more_pauses_its_consumers(broker: Broker) -> None:
    producer, consumer = Client(broker), Client(broker)
    producer.connect()
    consumer.connect()
    consumer.frame("SUBSCRIBE", destination="/queue/slow", id="s")
    consumer.open = False
    producer.frame("SEND", b"waits", destination="/queue/slow")
    assert consumer.bodies() == []
    consumer.open = True
    consumer.session.resume()
    assert consumer.bodies() == [b"waits"]


def test_a_bad_selector_is_refused_with_the_filter_error(broker: Broker) -> None:
    client = Client(broker)
    client.connect()
    with pytest.raises(StompError, match=r"selector|filter|syntax"):
        client.frame("SUBSCRIBE", destination="/queue/q", id="s", selector="colour = ")


def test_disconnect_stops_reading(broker: Broker) -> None:
    client = Client(broker)
    client.connect()
    assert client.frame("DISCONNECT", receipt="bye") is None
    assert client.session.disconnecting


def test_the_error_frame_names_the_receipt(broker: Broker) -> None:
    session = Client(broker).session
    error = session.error_frame("no such thing", "r7", (("version", "1.2"),))
    assert error.command == "ERROR"
    assert error.get("message") == "no such thing"
    assert error.get("receipt-id") == "r7"
    assert error.get("version") == "1.2"
    assert error.body == b"no such thing"


def test_the_connection_ttl_before_connect_is_the_acceptor_s(broker: Broker) -> None:
    session = Client(broker).session
    ttl = broker.config.acceptors[0].connection_ttl
    assert session.ttl == (ttl / 1000 if ttl > 0 else math.inf)
