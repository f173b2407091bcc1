"""The data plane's MESSAGE and RECEIPT, encoded in Rust from the session's headers and the
message (``DataPlane.SEND_MESSAGE``, ``SEND_RECEIPT``), are the bytes of the frames the socket
shell's path builds, in every version, whatever properties a producer sent."""

from __future__ import annotations

import pytest

from artemis_py._native import stomp_encode_frame, stomp_encode_message, stomp_encode_receipt
from artemis_py.broker.message import Message
from artemis_py.config import RoutingType
from artemis_py.protocol.errors import LocalProtocolError
from artemis_py.protocol.stomp import Frame
from artemis_py.sessions.stomp.subscription import send_message

VERSIONS = ("1.0", "1.1", "1.2")

PROPERTIES = [
    (),
    (("color", "red"), ("color", "blue"), ("empty", "")),
    (("line", "a\nb"), ("colon", "a:b"), ("back", "a\\b"), ("cr", "end\r"), ("mid", "a\rb")),
    (("na:me", "v"), ("na\nme", "v"), ("é", "ü€")),
    (("nul", "a\x00b"), ("ok", "1")),
]


class Session:
    """What ``send_message`` uses of a session: a version and where frames go."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.sent: list[Frame] = []
        self.send_delivery = None
        self.stream_body = None

    def send(self, frame: Frame) -> None:
        self.sent.append(frame)


def message(properties: tuple[tuple[str, str], ...], **fields: object) -> Message:
    return Message(
        42, "orders", body=b"body\x00bytes", properties=properties,
        routing_type=RoutingType.ANYCAST, timestamp=1_700_000_000_123, **fields,  # type: ignore[arg-type]
    )  # fmt: skip


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("properties", PROPERTIES)
@pytest.mark.parametrize(
    "fields", [{}, {"durable": True, "priority": 9, "expiration": 1_800_000_000_000}]
)
def test_a_message_is_the_bytes_of_the_socket_shell_s_frame(
    version: str, properties: tuple[tuple[str, str], ...], fields: dict[str, object]
) -> None:
    session = Session(version)
    headers = [("subscription", "sub-1"), ("message-id", "42"), ("destination", "orders")]
    delivered = message(properties, **fields)
    send_message(session, delivered, list(headers))  # type: ignore[arg-type]
    (frame,) = session.sent
    if version == "1.2" and any("\x00" in n + v for n, v in properties):
        # (a NUL reaches 1.2 only from elsewhere: both paths refuse that frame)
        with pytest.raises(LocalProtocolError):
            stomp_encode_frame(frame, version)
        with pytest.raises(LocalProtocolError):
            stomp_encode_message(version, headers, delivered)
        return
    assert stomp_encode_message(version, headers, delivered) == stomp_encode_frame(frame, version)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("duplicate", [False, True])
def test_a_receipt_is_the_bytes_of_the_session_s_frame(version: str, duplicate: bool) -> None:
    receipt = "r:1\n"  # (escaped from 1.1 on)
    headers = [("receipt-id", receipt)] + ([("duplicate", "true")] if duplicate else [])
    if version == "1.0":  # 1.0 cannot carry a line break: both refuse
        with pytest.raises(LocalProtocolError):
            stomp_encode_receipt(version, receipt, duplicate)
        receipt, headers[0] = "r-1", ("receipt-id", "r-1")
    expected = stomp_encode_frame(Frame("RECEIPT", headers), version)
    assert stomp_encode_receipt(version, receipt, duplicate) == expected


def test_a_header_the_plane_cannot_encode_refuses_the_frame() -> None:
    with pytest.raises(LocalProtocolError, match="surrogates"):
        stomp_encode_message("1.2", [("subscription", "\udc80")], message(()))
