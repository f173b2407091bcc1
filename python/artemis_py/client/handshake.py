"""CONNECT and CONNECTED: what a client offers, and what it learns from the server's answer.

The client offers the version it was given and every lower one (``accept-version``), its
credentials, ``client-id`` and ``heart-beat``; the server picks the version and the
heart-beat intervals are negotiated from both offers (STOMP 1.2 "Heart-beating"). An ERROR
instead of CONNECTED fails the connection with :class:`StompServerError`, its header escapes
decoded (:func:`unescape_refusal`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeAlias

import trio

from artemis_py.client.errors import (
    TRANSPORT_ERRORS,
    ClientError,
    ConnectionLostError,
    StompServerError,
    describe,
)
from artemis_py.client.reader import FrameReceiver
from artemis_py.client.state import ConnectionState
from artemis_py.client.writer import FrameWriter
from artemis_py.protocol.stomp import (
    SUPPORTED_VERSIONS,
    Command,
    Connection,
    ConnectionClosed,
    Frame,
    Heartbeat,
    RemoteProtocolError,
    Role,
    negotiate_heartbeat,
    parse_heartbeat,
)
from artemis_py.protocol.stomp.headers import VERSION_RULES, HeaderRules, decode_headers

__all__ = [
    "Connected",
    "Headers",
    "connect_frame",
    "handshake",
    "header_pairs",
    "unescape_refusal",
]

Headers: TypeAlias = Mapping[str, str] | Iterable[tuple[str, str]] | None
"""Extra frame headers: a mapping or ``(name, value)`` pairs (repeats allowed), in order."""


def header_pairs(headers: Headers) -> list[tuple[str, str]]:
    """``headers`` as a list of ``(name, value)`` strings."""
    if headers is None:
        return []
    if type(headers) is list or type(headers) is tuple:  # the usual case, before the ABC check
        return [(str(name), str(value)) for name, value in headers]
    if isinstance(headers, Mapping):
        return [(str(name), str(value)) for name, value in headers.items()]
    return [(str(name), str(value)) for name, value in headers]


@dataclass(frozen=True, slots=True)
class Connected:
    """What CONNECTED told: the negotiated version and ``(send_every_ms, expect_every_ms)``."""

    frame: Frame
    version: str
    server: str | None
    session: str | None
    heartbeat: tuple[int, int]


def connect_frame(
    *,
    host: str,
    login: str | None,
    passcode: str | None,
    version: str,
    heartbeat: tuple[int, int],
    client_id: str | None,
    headers: Headers,
) -> Frame:
    """The CONNECT frame offering ``version`` and every lower one."""
    offered = SUPPORTED_VERSIONS[: SUPPORTED_VERSIONS.index(version) + 1]
    pairs = [("accept-version", ",".join(offered)), ("host", host)]
    if login is not None:
        pairs.append(("login", login))
    if passcode is not None:
        pairs.append(("passcode", passcode))
    if client_id is not None:
        pairs.append(("client-id", client_id))
    if version != "1.0" and heartbeat != (0, 0):
        pairs.append(("heart-beat", f"{heartbeat[0]},{heartbeat[1]}"))
    pairs.extend(header_pairs(headers))
    return Frame(Command.CONNECT, tuple(pairs))


def _offered_version(connect: Frame) -> str:
    accept = connect.get("accept-version")
    return accept.rsplit(",", 1)[-1] if accept else "1.0"


def unescape_refusal(frame: Frame, offered: str) -> Frame:
    """An ERROR that answered CONNECT, with its header escapes decoded.

    No version is negotiated before CONNECTED, so the codec reads such a frame with STOMP
    1.0's rules: no escapes. But a server may pick the version *before* it checks the login
    (artemis-py does) and escape its ERROR by it (``Security Error\\c ...`` for a ``:``).
    When we offered 1.1 or later, the header escapes are read again with the rules of the
    highest version offered (1.2's table covers 1.1's). Text that is not valid escaping there
    (a raw backslash from a server that did not escape) is kept as it came.
    """
    rules = VERSION_RULES.get(offered, HeaderRules.V10)
    if rules is HeaderRules.V10 or not any("\\" in n or "\\" in v for n, v in frame.headers):
        return frame
    block = "\n".join(f"{name}:{value}" for name, value in frame.headers).encode("utf-8")
    try:
        headers = decode_headers(block, rules)
    except RemoteProtocolError:
        return frame
    return Frame(frame.command, headers, frame.body)


async def handshake(
    codec: Connection,
    writer: FrameWriter,
    receiver: FrameReceiver,
    state: ConnectionState,
    connect: Frame,
    heartbeat: tuple[int, int],
) -> Connected:
    """Write ``connect`` and read the answer; any failure fails ``state`` and is raised."""
    await writer.write(writer.encode(connect))
    try:
        event = await receiver.receive_event()
        while isinstance(event, Heartbeat):
            event = await receiver.receive_event()
    except RemoteProtocolError as exc:
        state.fail(ClientError(f"protocol error from the server: {exc.message}"), exc)
        state.raise_error()
    except TRANSPORT_ERRORS as exc:
        state.fail(ConnectionLostError(f"connection lost before CONNECTED: {describe(exc)}"), exc)
        state.raise_error()
    if isinstance(event, ConnectionClosed):
        state.fail(ConnectionLostError("the server closed the connection instead of CONNECTED"))
        state.raise_error()
    if event.command == Command.ERROR:
        offered = _offered_version(connect)
        state.fail(StompServerError.from_frame(unescape_refusal(event, offered)))
        state.raise_error()
    # The codec lets nothing but CONNECTED or ERROR through here.
    version = codec.version or "1.0"
    negotiated = (0, 0)
    if version != "1.0":
        try:
            server_heartbeat = parse_heartbeat(event.get("heart-beat"))
        except RemoteProtocolError as exc:
            state.fail(ClientError(f"protocol error from the server: {exc.message}"), exc)
            state.raise_error()
        negotiated = negotiate_heartbeat(heartbeat, server_heartbeat, our_role=Role.CLIENT)
    receiver.last_received = trio.current_time()
    return Connected(event, version, event.get("server"), event.get("session"), negotiated)
