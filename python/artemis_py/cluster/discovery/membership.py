"""The members a discovery group has heard of, each until ``refresh-timeout`` passes without
news of it (Artemis clusters §3.1.2). Sans-IO: every call is given the time.

A member is keyed by its node id when the announcement names one (UDP, FILE_PING), else
by its connector (DNS_PING: a name resolves to addresses, not to nodes). The node's own
announcements are ignored: it hears them through multicast loopback or the shared
directory like anyone else's.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Member", "Membership"]

Connector = tuple[str, int]


@dataclass(slots=True)
class Member:
    """One member as discovery sees it. Times are the owner's clock (seconds)."""

    key: str
    node_id: str | None
    connectors: tuple[Connector, ...]
    first_seen: float
    last_seen: float


class Membership:
    """Members heard within the last ``refresh_timeout`` seconds."""

    def __init__(self, refresh_timeout: float, *, own_node_id: str | None = None) -> None:
        self.refresh_timeout = refresh_timeout
        self.own_node_id = own_node_id
        self._members: dict[str, Member] = {}

    def __len__(self) -> int:
        return len(self._members)

    def heard(
        self,
        connectors: tuple[Connector, ...],
        at: float,
        *,
        node_id: str | None = None,
    ) -> tuple[Member, bool] | None:
        """News of a member at ``at``: the member, and whether it is new or its connectors
        changed. None for this node's own news, and for news older than what is known
        (a FILE_PING file read late, a datagram overtaken), which change nothing."""
        if node_id is not None and node_id == self.own_node_id:
            return None
        key = node_id if node_id is not None else _key(connectors[0])
        member = self._members.get(key)
        if member is None:
            member = self._members[key] = Member(key, node_id, connectors, at, at)
            return member, True
        if at < member.last_seen:
            return None
        member.last_seen = at
        changed = member.connectors != connectors
        member.connectors = connectors
        return member, changed

    def expire(self, now: float) -> list[Member]:
        """Drop and return the members not heard of for ``refresh_timeout`` by ``now``."""
        gone = [m for m in self._members.values() if now - m.last_seen >= self.refresh_timeout]
        for member in gone:
            del self._members[member.key]
        return gone

    def next_expiry(self) -> float | None:
        """When the next member expires unless heard of again (None: nobody to expire)."""
        if not self._members:
            return None
        return min(m.last_seen for m in self._members.values()) + self.refresh_timeout

    def members(self) -> list[Member]:
        """Every member, ordered by key (node id), so that choices made from it are stable."""
        return [self._members[k] for k in sorted(self._members)]

    def connectors(self) -> list[Connector]:
        """Every member's first connector, in :meth:`members` order."""
        return [m.connectors[0] for m in self.members()]

    def knows(self, host: str, port: int) -> bool:
        """Whether a current member announces host:port."""
        return any((host, port) in m.connectors for m in self._members.values())


def _key(connector: Connector) -> str:
    host, port = connector
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
