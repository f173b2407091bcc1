"""``udp://GROUP:PORT``: a client that finds the cluster's nodes by listening to the
announcements their broadcast groups send (Artemis clusters §3.1.4, client discovery).

:class:`DiscoveredNodes` is the sans-IO part: the announcements heard (the codec is
:mod:`artemis_py.protocol.discovery`, the nodes' own), each node's STOMP URLs (version 2
announcements carry them), and ``refreshTimeout``: a node not heard of for that long is
dropped. :class:`ClientDiscovery` is its Trio shell: the group's socket (opened as the
nodes' discovery groups open theirs, :mod:`artemis_py.transport.multicast`), and
:meth:`ClientDiscovery.listening`, which waits up to ``initialWaitTimeout`` for the first
node (or says clearly which group stayed silent) and then goes on listening.

What discovery finds is where the client *starts*: once connected, the node's topology
(docs/stomp.md "Topology") keeps the members current, as in Artemis.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial

import trio

from artemis_py.client.errors import ClientError
from artemis_py.client.url import BrokerUrl, parse_url
from artemis_py.protocol.discovery import MAX_SIZE, PacketError, decode
from artemis_py.transport.multicast import open_receiver

__all__ = ["ClientDiscovery", "DiscoveredNodes"]

log = logging.getLogger("artemis_py.client")


def _same_group(endpoint: str, group: tuple[str, int]) -> bool:
    """Whether an announcement's endpoint (``udp://ADDRESS:PORT``, IPv6 in brackets) names
    ``group``; addresses compare as addresses, not as text."""
    if not endpoint.startswith("udp://"):
        return False
    host, sep, port = endpoint[len("udp://") :].rpartition(":")
    if not sep or not port.isdigit():
        return False
    try:
        same = ipaddress.ip_address(host.strip("[]")) == ipaddress.ip_address(group[0])
    except ValueError:
        return False
    return same and int(port) == group[1]


@dataclass(slots=True)
class _Node:
    urls: tuple[BrokerUrl, ...]
    last_seen: float


class DiscoveredNodes:
    """The nodes heard on one group within ``refresh_timeout`` seconds, by node id. Sans-IO:
    every call is given the time."""

    def __init__(self, group: tuple[str, int], refresh_timeout: float) -> None:
        self.group = group
        self.refresh_timeout = refresh_timeout
        self._nodes: dict[str, _Node] = {}
        self._ignored: set[tuple[str, str]] = set()

    def receive(self, data: bytes, sender: str, now: float) -> bool:
        """A datagram from ``sender``; True when it is a node's announcement that this table
        took. Anything else is logged (once per sender and reason) and ignored."""
        try:
            announcement = decode(data)
        except PacketError as exc:
            return self._ignore(sender, str(exc))
        if not _same_group(announcement.group, self.group):
            return self._ignore(sender, f"an announcement for {announcement.group!r}")
        urls: list[BrokerUrl] = []
        for text in announcement.clients:
            try:
                urls.append(parse_url(text))
            except ValueError:
                self._ignore(sender, f"client URL {text[:60]!r} is not tcp://HOST:PORT")
        if not urls:
            return self._ignore(sender, "no client (STOMP) URLs in the announcement")
        known = self._nodes.get(announcement.node_id)
        if known is not None and now < known.last_seen:
            return False  # overtaken by a newer one
        self._nodes[announcement.node_id] = _Node(tuple(urls), now)
        return True

    def _ignore(self, sender: str, reason: str) -> bool:
        if (sender, reason) not in self._ignored:
            self._ignored.add((sender, reason))
            group = f"[{self.group[0]}]" if ":" in self.group[0] else self.group[0]
            log.warning(
                "discovery on udp://%s:%d: ignored what %s sent: %s",
                group,
                self.group[1],
                sender,
                reason,
            )
        return False

    def urls(self, now: float) -> tuple[BrokerUrl, ...]:
        """Every current node's STOMP URLs, by node id; nodes silent for ``refresh_timeout``
        are dropped first."""
        for node_id in [
            k for k, n in self._nodes.items() if now - n.last_seen >= self.refresh_timeout
        ]:
            del self._nodes[node_id]
        found: list[BrokerUrl] = []
        for node_id in sorted(self._nodes):
            found.extend(u for u in self._nodes[node_id].urls if u not in found)
        return tuple(found)


class ClientDiscovery:
    """The Trio side of ``udp://`` discovery for one client URL."""

    def __init__(
        self, group: tuple[str, int], refresh_timeout_ms: int, initial_wait_timeout_ms: int
    ) -> None:
        self.group = group
        self.endpoint = (
            f"udp://[{group[0]}]:{group[1]}" if ":" in group[0] else f"udp://{group[0]}:{group[1]}"
        )
        self.nodes = DiscoveredNodes(group, refresh_timeout_ms / 1000)
        self.initial_wait_timeout = initial_wait_timeout_ms / 1000

    def urls(self) -> tuple[BrokerUrl, ...]:
        return self.nodes.urls(trio.current_time())

    @asynccontextmanager
    async def listening(self) -> AsyncIterator[Callable[[], Awaitable[None]]]:
        """Listen on the group: wait up to ``initialWaitTimeout`` for the first node (a
        :class:`ClientError` naming the group when none comes, or when the group cannot be
        listened on), then yield the task that goes on listening, to be run while the
        client needs the nodes. Errors come before the yield, so they are never wrapped in
        a nursery's exception group."""
        try:
            sock = await open_receiver(self.group[0], self.group[1], None)
        except OSError as exc:
            raise ClientError(
                f"cannot listen on {self.endpoint} for discovery: {exc.strerror or exc}"
            ) from None
        with sock:
            with trio.move_on_after(self.initial_wait_timeout):
                while not self.urls():
                    await self._receive(sock)
            if not self.urls():
                raise ClientError(
                    f"no node announced itself on {self.endpoint} within initialWaitTimeout "
                    f"({self.initial_wait_timeout * 1000:g} ms): is a broadcast group of the "
                    f"cluster sending to this group address and port?"
                )
            yield partial(self._listen, sock)

    async def _receive(self, sock: trio.socket.SocketType) -> None:
        data, sender = await sock.recvfrom(MAX_SIZE + 1)
        self.nodes.receive(data, f"{sender[0]}:{sender[1]}", trio.current_time())

    async def _listen(self, sock: trio.socket.SocketType) -> None:
        while True:
            await self._receive(sock)
