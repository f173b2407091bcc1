"""STOMP heart-beat negotiation (STOMP 1.1/1.2 "Heart-beating") and Artemis's TTL policy.

Pure arithmetic on the ``heart-beat`` headers; the Trio shell owns the clocks. ``cx,cy`` is
the client's header (it can send every ``cx`` ms, wants to receive every ``cy`` ms), ``sx,sy``
the server's. Per spec, client-to-server beats flow every ``max(cx, sy)`` ms unless either is
0, and server-to-client beats every ``max(sx, cy)`` ms unless either is 0.

:func:`artemis_heartbeat` is what an Artemis STOMP acceptor answers and which connection TTL it
then enforces (Artemis STOMP docs, "STOMP heart-beating and connection-ttl";
``StompFrameHandlerV11.HeartBeater``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from artemis_py.protocol.errors import RemoteProtocolError
from artemis_py.protocol.stomp.headers import show
from artemis_py.protocol.stomp.roles import Role

__all__ = [
    "HeartbeatPlan",
    "HeartbeatSettings",
    "artemis_heartbeat",
    "negotiate_heartbeat",
    "parse_heartbeat",
]


def parse_heartbeat(header: str | None) -> tuple[int, int]:
    """``"cx,cy"`` as two ints; an absent header (None) is ``(0, 0)``: no heart-beating.

    Spaces around the numbers are tolerated. Raises :class:`RemoteProtocolError` otherwise.
    """
    if header is None:
        return (0, 0)
    parts = header.split(",")
    if len(parts) == 2:
        first, second = parts[0].strip(), parts[1].strip()
        if first.isascii() and first.isdigit() and second.isascii() and second.isdigit():
            return (int(first), int(second))
    raise RemoteProtocolError(
        f"invalid heart-beat header {show(header)}: expected two non-negative integers "
        f"such as '10000,10000'"
    )


def negotiate_heartbeat(
    client: tuple[int, int], server: tuple[int, int], *, our_role: Role = Role.SERVER
) -> tuple[int, int]:
    """``(send_every_ms, expect_every_ms)`` for ``our_role``; 0 means none.

    ``client`` is the CONNECT header ``(cx, cy)``, ``server`` the CONNECTED one ``(sx, sy)``.
    """
    cx, cy = client
    sx, sy = server
    client_to_server = max(cx, sy) if cx and sy else 0
    server_to_client = max(sx, cy) if sx and cy else 0
    if our_role is Role.SERVER:
        return (server_to_client, client_to_server)
    return (client_to_server, server_to_client)


@dataclass(frozen=True, slots=True)
class HeartbeatSettings:
    """The heart-beat/TTL parameters of an Artemis STOMP acceptor URL (names as in Artemis)."""

    connection_ttl: int = 60_000
    """``connectionTtl``: TTL when the client sends no client-to-server heart-beats."""
    connection_ttl_min: int = 1_000
    """``connectionTtlMin``."""
    connection_ttl_max: int | None = None
    """``connectionTtlMax``; None is Artemis's ``Long.MAX_VALUE``: no maximum."""
    heart_beat_to_connection_ttl_modifier: float = 2.0
    """``heartBeatToConnectionTtlModifier``: TTL = client heart-beat x this."""
    min_server_heartbeat: int = 500
    """Artemis never sends heart-beats more often than every 500 ms (``MIN_SERVER_PING``)."""


@dataclass(frozen=True, slots=True)
class HeartbeatPlan:
    """What the server does about heart-beats on one connection."""

    connected_header: str | None
    """Value of CONNECTED's ``heart-beat`` header; None: send no such header."""
    send_every_ms: int
    """Send a heart-beat when nothing else was sent for this long; 0: never."""
    connection_ttl_ms: int
    """Close the connection when nothing was received for this long."""


ARTEMIS_DEFAULTS: Final = HeartbeatSettings()


def artemis_heartbeat(
    client_header: str | None,
    version: str,
    settings: HeartbeatSettings = ARTEMIS_DEFAULTS,
) -> HeartbeatPlan:
    """The server's heart-beat answer and connection TTL, computed the way Artemis does.

    * 1.0, or no ``heart-beat`` header: no header in CONNECTED, no server beats, TTL is
      ``connection_ttl``.
    * ``cx,cy``: the server beats every ``max(cy, 500)`` ms (never if ``cy`` is 0). If
      ``cx > 0`` the TTL is ``cx * modifier`` clamped to ``[ttl_min, ttl_max]``, and the server
      asks for client beats every ``ttl / modifier`` ms (``cx`` unless clamped); if ``cx`` is
      0 the TTL is ``connection_ttl`` and the server still asks for ``connection_ttl/modifier``.

    Raises :class:`RemoteProtocolError` for a malformed header.
    """
    if version == "1.0" or client_header is None:
        return HeartbeatPlan(None, 0, settings.connection_ttl)
    cx, cy = parse_heartbeat(client_header)
    modifier = settings.heart_beat_to_connection_ttl_modifier
    send_every = max(cy, settings.min_server_heartbeat) if cy else 0
    ttl = settings.connection_ttl
    want_every = int(ttl / modifier)
    if cx:
        ttl = int(cx * modifier)
        want_every = cx
        if ttl < settings.connection_ttl_min:
            ttl = settings.connection_ttl_min
            want_every = int(ttl / modifier)
        elif settings.connection_ttl_max is not None and ttl > settings.connection_ttl_max:
            ttl = settings.connection_ttl_max
            want_every = int(ttl / modifier)
    return HeartbeatPlan(f"{send_every},{want_every}", send_every, ttl)
