"""The topology extension of STOMP: clients that ask learn the cluster's STOMP URLs.

A CONNECT with ``topology:true`` gets a ``topology`` header on CONNECTED: the comma-separated
STOMP URLs of the cluster's live members, this node's first (empty: no cluster, or members
that do not announce theirs). Whenever that list changes while the connection lasts, the
node sends a MESSAGE on the reserved subscription :data:`TOPOLOGY_SUBSCRIPTION` whose
``topology`` header is the new list; it needs no ACK. A client that did not ask gets
neither, so plain STOMP clients see nothing new (docs/stomp.md "Topology").
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Final

from artemis_py.broker.broker import Broker
from artemis_py.protocol.stomp import Frame

__all__ = ["TOPOLOGY_HEADER", "TOPOLOGY_SUBSCRIPTION", "TopologyFeed", "wants_topology"]

TOPOLOGY_HEADER: Final = "topology"
TOPOLOGY_SUBSCRIPTION: Final = "artemis-py.topology"


def wants_topology(connect: Frame) -> bool:
    return connect.get(TOPOLOGY_HEADER, "").lower() == "true"


class TopologyFeed:
    """Sends one client the topology's changes, from :meth:`start` until :meth:`close`."""

    def __init__(self, broker: Broker, send: Callable[[Frame], None]) -> None:
        self._broker = broker
        self._send = send
        self._last: list[str] = []
        self._ids = itertools.count(1)

    def start(self) -> tuple[str, str]:
        """The CONNECTED header; updates follow from now on."""
        self._last = self._broker.client_topology()
        self._broker.topology_listeners.add(self.changed)
        return (TOPOLOGY_HEADER, ",".join(self._last))

    def changed(self) -> None:
        urls = self._broker.client_topology()
        if urls == self._last:
            return
        self._last = urls
        headers = (
            ("subscription", TOPOLOGY_SUBSCRIPTION),
            ("destination", TOPOLOGY_SUBSCRIPTION),
            ("message-id", f"{TOPOLOGY_SUBSCRIPTION}-{next(self._ids)}"),
            (TOPOLOGY_HEADER, ",".join(urls)),
            ("content-length", "0"),
        )
        self._send(Frame("MESSAGE", headers, b""))

    def close(self) -> None:
        self._broker.topology_listeners.discard(self.changed)
