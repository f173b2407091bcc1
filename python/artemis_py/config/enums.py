"""The enumerations of broker.xml, named and spelled as Artemis spells them."""

from __future__ import annotations

import enum

__all__ = [
    "AddressFullPolicy",
    "ComponentRoutingType",
    "DeletionPolicy",
    "DiskFullPolicy",
    "GroupingHandlerType",
    "HAPolicy",
    "JournalType",
    "MessageLoadBalancing",
    "PageFullPolicy",
    "RoutingType",
    "SlowConsumerPolicy",
    "SlowConsumerThresholdMeasurementUnit",
]


class RoutingType(enum.StrEnum):
    """ANYCAST: point-to-point, one queue gets each message; MULTICAST: every queue gets a copy."""

    ANYCAST = "ANYCAST"
    MULTICAST = "MULTICAST"


class ComponentRoutingType(enum.StrEnum):
    """What a divert does to the routing type of the copies it makes (Artemis's
    ``component-routing-type``): set ANYCAST or MULTICAST, STRIP it (the copy has none and
    goes to queues of both kinds) or PASS the original's on."""

    ANYCAST = "ANYCAST"
    MULTICAST = "MULTICAST"
    STRIP = "STRIP"
    PASS = "PASS"


class GroupingHandlerType(enum.StrEnum):
    """A ``<grouping-handler>``'s role in clustered grouping: the one LOCAL node decides
    which queue takes each message group; REMOTE nodes ask it and remember its answers."""

    LOCAL = "LOCAL"
    REMOTE = "REMOTE"


class MessageLoadBalancing(enum.StrEnum):
    """Initial distribution over a cluster connection (Artemis clusters §4.1).

    OFF: never forward. STRICT: round-robin to every node with a matching queue, consumers or
    not. ON_DEMAND: only to nodes with matching consumers. OFF_WITH_REDISTRIBUTION: like OFF,
    but redistribution may still move messages.
    """

    OFF = "OFF"
    STRICT = "STRICT"
    ON_DEMAND = "ON_DEMAND"
    OFF_WITH_REDISTRIBUTION = "OFF_WITH_REDISTRIBUTION"


class AddressFullPolicy(enum.StrEnum):
    """What happens when an address reaches ``max-size-bytes``/``max-size-messages``."""

    PAGE = "PAGE"
    DROP = "DROP"
    FAIL = "FAIL"
    BLOCK = "BLOCK"


class DiskFullPolicy(enum.StrEnum):
    DROP = "DROP"
    FAIL = "FAIL"
    BLOCK = "BLOCK"


class PageFullPolicy(enum.StrEnum):
    DROP = "DROP"
    FAIL = "FAIL"


class SlowConsumerPolicy(enum.StrEnum):
    KILL = "KILL"
    NOTIFY = "NOTIFY"


class SlowConsumerThresholdMeasurementUnit(enum.StrEnum):
    MESSAGES_PER_SECOND = "MESSAGES_PER_SECOND"
    MESSAGES_PER_MINUTE = "MESSAGES_PER_MINUTE"
    MESSAGES_PER_HOUR = "MESSAGES_PER_HOUR"
    MESSAGES_PER_DAY = "MESSAGES_PER_DAY"


class DeletionPolicy(enum.StrEnum):
    """``config-delete-*``: whether removing an entry from broker.xml deletes it at runtime."""

    OFF = "OFF"
    FORCE = "FORCE"


class JournalType(enum.StrEnum):
    """Accepted for compatibility; artemis-py always does its own I/O (see ``JournalConfig``)."""

    ASYNCIO = "ASYNCIO"
    NIO = "NIO"
    MAPPED = "MAPPED"


class HAPolicy(enum.StrEnum):
    """The ``<ha-policy>`` kinds: PRIMARY_ONLY (formerly ``live-only``), SHARED_STORE and
    REPLICATION."""

    PRIMARY_ONLY = "primary-only"
    REPLICATION = "replication"
    SHARED_STORE = "shared-store"
