"""Which end of a STOMP connection we are, and the per-side connection states."""

from __future__ import annotations

import enum
from typing import Final

__all__ = ["CLIENT", "SERVER", "ConnectionState", "Role"]


class Role(enum.Enum):
    """Our end of the connection."""

    CLIENT = "client"
    SERVER = "server"


CLIENT: Final = Role.CLIENT
SERVER: Final = Role.SERVER


class ConnectionState(enum.Enum):
    """The state of one direction (``our_state`` / ``their_state``) of a connection.

    ``CONNECTING``: the CONNECT/CONNECTED exchange has not happened in this direction yet.
    ``CONNECTED``: it has; ordinary frames may flow.
    ``CLOSED``: DISCONNECT (client to server) or ERROR (server to client) went this way, or
    the peer closed the transport; nothing but heart-beat EOLs may follow in this direction.
    ``ERROR``: a protocol error happened in this direction; the connection is unusable that way.
    """

    CONNECTING = "CONNECTING"
    CONNECTED = "CONNECTED"
    CLOSED = "CLOSED"
    ERROR = "ERROR"
