"""A small Trio STOMP 1.0-1.2 client on the sans-IO codec.

::

    async with open_stomp_connection("localhost", 61613, login="u", passcode="p") as conn:
        await conn.send("queue://orders", b"hello")            # returns after the RECEIPT
        sub = await conn.subscribe("queue://orders", ack="client-individual")
        async for msg in sub:
            await conn.ack(msg)

* :func:`open_stomp_connection` (TCP) and :func:`open_stomp_connection_over` (any Trio
  stream) yield a :class:`ClientConnection`: ``send``, ``flush_receipts``, ``subscribe``,
  ``ack``, ``nack``, ``begin``/``commit``/``abort``, ``disconnect``, ``aclose``.
* :class:`Subscription` is a :class:`trio.abc.ReceiveChannel` of :class:`Message`.
* Errors: :class:`ClientError`, :class:`StompServerError` (an ERROR frame),
  :class:`ConnectionLostError` (a :class:`trio.BrokenResourceError`),
  :class:`ConnectionClosedError` (a :class:`trio.ClosedResourceError`).
* :func:`parse_url` and :func:`parse_destination` read the Artemis CLI's
  ``tcp://HOST:PORT`` URLs and ``queue://NAME`` / ``topic://NAME`` destinations; ``send``
  and ``subscribe`` take the latter too, and send the routing type with the name (the
  ``destination-type`` / ``subscription-type`` headers), so they mean anycast and multicast
  on any acceptor, with or without ``anycastPrefix``/``multicastPrefix``.

How the connection works inside (sticky failures, combined shielded writes, receipts and
the pipelining window, one reader task) is described in :mod:`.connection`, which names the
module of each part. :mod:`.testing` has a scripted in-process STOMP server for tests.
"""

from artemis_py.client.connection import (
    DEFAULT_MAX_PENDING,
    ClientConnection,
    Headers,
    open_stomp_connection,
    open_stomp_connection_over,
)
from artemis_py.client.destination import (
    ANYCAST,
    MULTICAST,
    Destination,
    DestinationLike,
    parse_destination,
)
from artemis_py.client.errors import (
    ClientError,
    ConnectionClosedError,
    ConnectionLostError,
    StompServerError,
)
from artemis_py.client.message import Message
from artemis_py.client.subscription import ACK_MODES, Subscription
from artemis_py.client.url import DEFAULT_STOMP_PORT, DEFAULT_URL, BrokerUrl, parse_url

__all__ = [
    "ACK_MODES",
    "ANYCAST",
    "DEFAULT_MAX_PENDING",
    "DEFAULT_STOMP_PORT",
    "DEFAULT_URL",
    "MULTICAST",
    "BrokerUrl",
    "ClientConnection",
    "ClientError",
    "ConnectionClosedError",
    "ConnectionLostError",
    "Destination",
    "DestinationLike",
    "Headers",
    "Message",
    "StompServerError",
    "Subscription",
    "open_stomp_connection",
    "open_stomp_connection_over",
    "parse_destination",
    "parse_url",
]
