"""A discovery group, running: the members heard on its endpoint, and who wants to know.

Theory of operation
-------------------
A *source* (:mod:`.sources`: the UDP receiver, the FILE_PING reader, the DNS_PING
resolver) feeds news into the group: raw announcements (:meth:`DiscoveryGroup.receive`)
or connectors it found itself (:meth:`DiscoveryGroup.heard`). The group keeps them in a
:class:`~.membership.Membership` and tells its subscribers of every member at every
piece of news (a subscriber decides what is new to it: the dialler dials what it is not
already dialling). A member not heard of for ``refresh-timeout`` is dropped; its link, if
up, stays up (as in Artemis: discovery only finds the first connection).

Packets that are not announcements of this group (another program, another format,
another group on the same port) are ignored with a warning, rate-limited per sender and
reason. :meth:`DiscoveryGroup.initial_wait` is how users of the group wait for the first
members (``initial-wait-timeout``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import trio

from artemis_py.cluster.discovery.membership import Connector, Member, Membership
from artemis_py.cluster.retry import LogBackoff, unlogged
from artemis_py.config import DiscoveryGroupConfig
from artemis_py.protocol.discovery import PacketError, decode, format_connector

__all__ = ["DiscoveryGroup", "Source"]

log = logging.getLogger("artemis_py.cluster.discovery")

#: Runs a group's endpoint, feeding the group, until cancelled; ``task_status.started()``
#: once it listens (or failed to and retries in the background).
Source = Callable[["DiscoveryGroup", trio.TaskStatus[None]], Any]


class DiscoveryGroup:
    """One ``<discovery-group>`` of this node."""

    def __init__(self, config: DiscoveryGroupConfig, node_id: str, source: Source) -> None:
        self.config = config
        self.name = config.name
        self.endpoint = config.endpoint
        self.refresh_timeout = config.refresh_timeout / 1000
        self.initial_wait_timeout = config.initial_wait_timeout / 1000
        self.membership = Membership(self.refresh_timeout, own_node_id=node_id)
        self.started_at: float | None = None
        self._source = source
        self._subscribers: list[Callable[[Member], None]] = []
        self._first = trio.Event()
        self._rejects = LogBackoff()

    def subscribe(self, subscriber: Callable[[Member], None]) -> None:
        """Call ``subscriber`` with each member at each piece of news, starting now with the
        members known."""
        self._subscribers.append(subscriber)
        for member in self.membership.members():
            subscriber(member)

    def receive(self, data: bytes, sender: str, now: float) -> None:
        """A datagram or file from ``sender``, received at ``now``."""
        try:
            announcement = decode(data)
        except PacketError as exc:
            self._reject(sender, str(exc), now)
            return
        if announcement.group != self.endpoint:
            self._reject(sender, f"an announcement for {announcement.group!r}", now)
            return
        self.heard(announcement.connectors, now, node_id=announcement.node_id)

    def heard(
        self, connectors: tuple[Connector, ...], at: float, *, node_id: str | None = None
    ) -> None:
        news = self.membership.heard(connectors, at, node_id=node_id)
        if news is None:
            return
        member, changed = news
        if changed:
            log.info(
                "discovery group %s: node %s at %s found",
                self.name,
                member.node_id or "(unknown id)",
                ", ".join(format_connector(*c) for c in member.connectors),
            )
        self._first.set()
        for subscriber in self._subscribers:
            subscriber(member)

    def _reject(self, sender: str, reason: str, now: float) -> None:
        quiet = self._rejects.occurred((sender, reason), now)
        if quiet is not None:
            log.warning(
                "discovery group %s: ignored what %s sent on %s: %s%s",
                self.name,
                sender,
                self.endpoint,
                reason,
                unlogged(quiet),
            )

    async def initial_wait(self) -> bool:
        """Wait until a member is known or ``initial-wait-timeout`` has passed since the
        group started; returns whether one is known."""
        start = self.started_at if self.started_at is not None else trio.current_time()
        with trio.move_on_at(start + self.initial_wait_timeout):
            await self._first.wait()
        return len(self.membership) > 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen (through the source) and drop silent members, until cancelled."""
        self.started_at = trio.current_time()
        async with trio.open_nursery() as nursery:
            await nursery.start(self._source, self)
            log.info("discovery group %s: listening on %s", self.name, self.endpoint)
            task_status.started()
            await self._expire_forever()

    async def _expire_forever(self) -> None:
        while True:
            now = trio.current_time()
            for member in self.membership.expire(now):
                log.info(
                    "discovery group %s: node %s at %s not heard of for %g s: dropped",
                    self.name,
                    member.node_id or "(unknown id)",
                    format_connector(*member.connectors[0]),
                    self.refresh_timeout,
                )
            # A member heard of later expires later than the earliest one known now, so
            # sleeping until then (or a full timeout) never oversleeps an expiry.
            due = self.membership.next_expiry()
            await trio.sleep_until(now + self.refresh_timeout if due is None else due)

    def status(self) -> dict[str, Any]:
        """What ``artemis-py cluster status`` shows of the group."""
        now = trio.current_time()
        return {
            "name": self.name,
            "endpoint": self.endpoint,
            "refresh_timeout_ms": self.config.refresh_timeout,
            "members": [
                {
                    "node_id": m.node_id,
                    "connector": format_connector(*m.connectors[0]),
                    "last_seen_ms_ago": max(0, math.floor((now - m.last_seen) * 1000)),
                }
                for m in self.membership.members()
            ],
        }
