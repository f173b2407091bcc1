"""The parsed configuration of the address model: addresses with their queues (and how
each queue dispatches), diverts, core bridges and clustered grouping handlers. Frozen
dataclasses as in :mod:`.model`, which re-exports them: Artemis's element names in
snake_case, Artemis's defaults, milliseconds and bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import defaults
from .enums import ComponentRoutingType, GroupingHandlerType, RoutingType

__all__ = [
    "LAST_VALUE_PROPERTY",
    "AddressConfig",
    "BridgeConfig",
    "DivertConfig",
    "GroupingHandlerConfig",
    "QueueConfig",
    "QueueKind",
]

#: The key of a queue declared ``last-value="true"`` (Artemis's Message.HDR_LAST_VALUE_NAME).
LAST_VALUE_PROPERTY = "_AMQ_LVQ_NAME"


@dataclass(frozen=True, slots=True)
class QueueKind:
    """How a queue dispatches: the ``<queue>`` attributes ``exclusive``, ``group-*``,
    ``last-value``/``last-value-key``, ``non-destructive``, ``ring-size``,
    ``consumers-before-dispatch`` and ``delay-before-dispatch``. None: the address settings'
    ``default-*`` value."""

    exclusive: bool | None = None
    group_rebalance: bool | None = None
    group_rebalance_pause_dispatch: bool | None = None
    group_buckets: int | None = None
    group_first_key: str | None = None
    last_value_key: str | None = None
    non_destructive: bool | None = None
    ring_size: int | None = None
    consumers_before_dispatch: int | None = None
    delay_before_dispatch: int | None = None


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """A ``<queue>`` declared under an address's ``<anycast>`` or ``<multicast>``.

    ``max_consumers`` ``None`` means "the address-settings' ``default-max-consumers``".
    ``purge_on_no_consumers`` defaults to false as in Artemis (queue attributes are not taken
    from ``default-purge-on-no-consumers`` for queues declared in broker.xml).
    """

    name: str
    address: str
    routing_type: RoutingType
    filter: str | None = None
    durable: bool = True
    max_consumers: int | None = None
    purge_on_no_consumers: bool = False
    kind: QueueKind = QueueKind()


@dataclass(frozen=True, slots=True)
class AddressConfig:
    """An ``<address name=...>``: its routing types and the queues declared on it."""

    name: str
    routing_types: frozenset[RoutingType]
    queues: tuple[QueueConfig, ...] = ()


@dataclass(frozen=True, slots=True)
class DivertConfig:
    """A ``<divert name=...>`` (docs/diverts.md): messages routed to ``address`` (a
    wildcard pattern too) are copied to each of ``forwarding_addresses`` (the comma-separated
    ``<forwarding-address>``; an ``address::queue`` names one queue) when ``filter`` accepts
    them; an ``exclusive`` divert takes them from ``address``'s own queues.

    ``routing_name`` ``None`` is Artemis's default, a random name: the divert is a group of
    its own. Non-exclusive diverts of one address that share a routing name take turns
    (round robin). ``line`` is where the divert is declared in ``BrokerConfig.source``, for
    errors found when the broker compiles its filter.
    """

    name: str
    address: str
    forwarding_addresses: tuple[str, ...]
    exclusive: bool = False
    filter: str | None = None
    routing_name: str | None = None
    routing_type: ComponentRoutingType = ComponentRoutingType.STRIP
    line: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class GroupingHandlerConfig:
    """The ``<grouping-handler name=...>`` (docs/clustering.md "Clustered grouping").

    ``type`` LOCAL: this node decides which queue of the cluster takes each message group;
    REMOTE: it asks the LOCAL node and remembers the answers. ``address`` names the cluster
    connection whose links carry the proposals (the first whose ``address`` filter covers
    it, as Artemis's notifications travel). ``timeout`` (ms): how long a send waits for a
    decision before it fails; ``group_timeout`` (ms, -1: never): how long a group unused is
    kept (on a REMOTE node: how often it refreshes the LOCAL node's record of its use);
    ``reaper_period`` (ms): how often the LOCAL node looks for unused groups.
    """

    name: str
    type: GroupingHandlerType
    address: str = ""
    timeout: int = defaults.GROUPING_HANDLER_TIMEOUT
    group_timeout: int = defaults.GROUPING_HANDLER_GROUP_TIMEOUT
    reaper_period: int = defaults.GROUPING_HANDLER_REAPER_PERIOD
    line: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class BridgeConfig:
    """A ``<bridge name=...>`` (Artemis's core bridges chapter; docs/bridges.md): messages of
    the local queue ``queue_name`` that ``filter`` accepts are forwarded to another
    artemis-py node, found through ``static_connectors`` (tried in turn) or the discovery
    group ``discovery_group_name``, and sent there to ``forwarding_address`` (None: each
    message's own address) with ``routing_type`` applied.

    Defaults are Artemis's (its parser's, where the schema's documentation differs:
    ``confirmation_window_size`` is 10 MiB). ``user`` / ``password`` None: the node's
    ``cluster-user`` / ``cluster-password``, as the Artemis manual documents. Parsed but not
    acted upon, and named in the start-up warning when not at their default: ``ha``,
    ``use_duplicate_detection`` (bridges always send duplicate ids),
    ``confirmation_window_size``, ``min_large_message_size``,
    ``reconnect_attempts_same_node``, ``concurrency`` and ``client_id``. ``line`` is where
    the bridge is declared, for errors found when the node compiles its filter.
    """

    name: str
    queue_name: str
    forwarding_address: str | None = None
    filter: str | None = None
    ha: bool = False
    min_large_message_size: int = 100 * 1024
    check_period: int = 30_000
    connection_ttl: int = 60_000
    retry_interval: int = 2000
    retry_interval_multiplier: float = 1.0
    max_retry_interval: int = 2000
    initial_connect_attempts: int = -1  # -1: retry forever
    reconnect_attempts: int = -1  # -1: retry forever
    reconnect_attempts_same_node: int = 10
    use_duplicate_detection: bool = True
    confirmation_window_size: int = 10 * 1024 * 1024
    producer_window_size: int = 1024 * 1024
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    routing_type: ComponentRoutingType = ComponentRoutingType.PASS
    concurrency: int = 1
    pending_ack_timeout: int = 60_000
    client_id: str | None = None
    static_connectors: tuple[str, ...] = ()
    discovery_group_name: str | None = None
    line: int = field(default=0, compare=False)
