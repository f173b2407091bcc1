"""The parsed configuration: frozen dataclasses, one per broker.xml concept.

Field names are Artemis's element names in snake_case, without a repeated prefix
(``<journal-file-size>`` is ``BrokerConfig.journal.file_size``). Field defaults are Artemis's
defaults, so a dataclass built with no arguments describes what Artemis would do with the
element absent. Times are milliseconds unless a field says otherwise; sizes are bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, TypeVar

from . import defaults
from .address_settings import AddressSettings, AddressSettingsRepository
from .addressing import (
    LAST_VALUE_PROPERTY,
    AddressConfig,
    BridgeConfig,
    DivertConfig,
    GroupingHandlerConfig,
    QueueConfig,
    QueueKind,
)
from .enums import HAPolicy, JournalType, MessageLoadBalancing
from .permissions import SecuritySettingConfig
from .problems import ConfigProblem
from .tls_params import TlsParams
from .wildcards import DEFAULT_WILDCARDS, WildcardSyntax

__all__ = [
    "ARTEMIS_PROTOCOLS",
    "LAST_VALUE_PROPERTY",
    "AcceptorConfig",
    "AddressConfig",
    "BridgeConfig",
    "BroadcastGroupConfig",
    "BrokerConfig",
    "ClusterConnectionConfig",
    "ConnectorConfig",
    "DiscoveryGroupConfig",
    "DivertConfig",
    "GroupingHandlerConfig",
    "HAPolicyConfig",
    "JGroupsStack",
    "JournalConfig",
    "QueueConfig",
    "QueueKind",
    "ReplicationConfig",
    "ScaleDownConfig",
    "SharedStoreConfig",
]

#: The protocol names Artemis accepts in an acceptor's ``protocols`` parameter.
ARTEMIS_PROTOCOLS = frozenset({"CORE", "AMQP", "STOMP", "MQTT", "OPENWIRE", "HORNETQ"})


def _no_params() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class JournalConfig:
    """The message journal and bindings journal (``journal-*``, ``*-directory`` elements).

    ``type`` and ``max_io`` are kept for compatibility only: artemis-py's Rust journal always
    does its own buffered writes with fdatasync, whatever Artemis I/O mode is named.
    ``buffer_timeout`` is in nanoseconds (see :mod:`.defaults` for why the NIO value is the
    default). The directories are always created: ``create_directory`` and
    ``create_bindings_directory`` set to false are named in the start-up warning.
    """

    type: JournalType = JournalType.ASYNCIO
    directory: str = "data/journal"
    create_directory: bool = True
    bindings_directory: str = "data/bindings"
    create_bindings_directory: bool = True
    file_size: int = defaults.JOURNAL_FILE_SIZE
    min_files: int = 2
    pool_files: int = -1  # -1: no limit on pooled files
    buffer_size: int = defaults.JOURNAL_BUFFER_SIZE
    buffer_timeout: int = defaults.JOURNAL_BUFFER_TIMEOUT_NIO
    max_io: int = defaults.JOURNAL_MAX_IO_NIO
    datasync: bool = True
    sync_transactional: bool = True
    sync_non_transactional: bool = True
    compact_min_files: int = 10
    compact_percentage: int = 30


@dataclass(frozen=True, slots=True)
class AcceptorConfig:
    """An ``<acceptor name=...>tcp://host:port?params</acceptor>``.

    ``params`` keeps every URL parameter as written (keys case-sensitive). The ones artemis-py
    uses are also typed here:

    ``protocols``
        the protocol names accepted (upper case); ``None`` means all (parameter absent).
    ``anycast_prefixes`` / ``multicast_prefixes``
        ``anycastPrefix`` / ``multicastPrefix``, comma-separated lists; a destination starting
        with one is routed with that routing type and the prefix stripped (Artemis STOMP §
        "Routing Semantics"). Artemis's default is no prefix.
    ``connection_ttl``
        ``connectionTtl``; when absent, ``<connection-ttl-override>`` if set, else 60000.
    ``connection_ttl_min`` / ``connection_ttl_max``
        ``connectionTtlMin`` (1000) / ``connectionTtlMax`` (2**63 - 1, Java's Long.MAX_VALUE as in
        Artemis: no maximum) bound the TTL computed from a STOMP client's heart-beat.
    ``heart_beat_to_connection_ttl_modifier``
        ``heartBeatToConnectionTtlModifier`` (2.0): TTL = client heart-beat x this.
    ``stomp_consumer_window_size``
        ``stompConsumerWindowSize`` (10240 bytes; the deprecated ``stompConsumerCredits`` is read
        too). Applies to ``client``/``client-individual`` subscriptions; ``auto`` ones use -1.
    ``stomp_enable_message_id``
        ``stompEnableMessageId`` (false); not acted upon yet (named in the start-up warning
        when true).
    ``tcp_send_buffer_size`` / ``tcp_receive_buffer_size``
        ``tcpSendBufferSize`` / ``tcpReceiveBufferSize`` (1 MiB each, as in Artemis): the
        ``SO_SNDBUF`` / ``SO_RCVBUF`` of every connection accepted; -1 leaves them to the
        operating system. Linux caps them at ``net.core.wmem_max`` / ``rmem_max``.

    ``stomp_min_large_message_size``
        ``stompMinLargeMessageSize`` (100 KiB, Artemis's default): a persistent message of
        at least this many bytes (body and headers) is stored as a file of its own in
        ``large-messages-directory`` (docs/large-messages.md).

    artemis-py's own STOMP frame limits, in the same URL style (byte notation allowed for
    sizes); they map onto the STOMP codec's ``FrameLimits``:

    ``stomp_max_body_size``
        ``stompMaxBodySize`` (100 MiB): bytes in one frame body.
    ``stomp_max_headers``
        ``stompMaxHeaders`` (1000): header lines in one frame.
    ``stomp_max_header_length``
        ``stompMaxHeaderLength`` (64 KiB): bytes in one header line.
    ``stomp_max_headers_size``
        ``stompMaxHeadersSize`` (1 MiB): bytes of all header lines of one frame.

    ``handshake_timeout``
        ``handshake-timeout`` (10 s, as in Artemis; 0 = no limit): how long a new connection
        has to complete its handshake (telling protocols apart, a STOMP client's CONNECT)
        before it is closed (docs/stomp.md "Limits and hostile input").
    ``connections_allowed``
        ``connectionsAllowed`` (-1 = unlimited, as in Artemis): connections open at once on
        this acceptor; one more is closed as soon as it is accepted.

    ``web_socket_max_frame_payload_length``
        ``webSocketMaxFramePayloadLength`` (65536, Artemis's; the deprecated
        ``stompMaxFramePayloadLength`` is read too): the largest WebSocket frame payload a
        STOMP-over-WebSocket client may send, and the size of the fragments the node sends.
    ``web_socket_encoder_type``
        ``webSocketEncoderType`` (``binary``, Artemis's default, or ``text``): the kind of
        WebSocket message STOMP frames are sent in (docs/stomp.md "WebSocket").

    ``tls``
        ``sslEnabled`` and the other TLS parameters (:class:`~.tls.TlsParams`, docs/tls.md).
    """

    name: str
    url: str
    hosts: tuple[str, ...] = ("localhost",)
    port: int = defaults.TCP_PORT
    params: Mapping[str, str] = field(default_factory=_no_params, hash=False)
    protocols: frozenset[str] | None = None
    anycast_prefixes: tuple[str, ...] = ()
    multicast_prefixes: tuple[str, ...] = ()
    connection_ttl: int = defaults.CONNECTION_TTL
    connection_ttl_min: int = defaults.CONNECTION_TTL_MIN
    connection_ttl_max: int = defaults.CONNECTION_TTL_MAX
    heart_beat_to_connection_ttl_modifier: float = defaults.HEART_BEAT_TO_CONNECTION_TTL_MODIFIER
    stomp_consumer_window_size: int = defaults.STOMP_CONSUMER_WINDOW_SIZE
    stomp_enable_message_id: bool = False
    tcp_send_buffer_size: int = defaults.TCP_SEND_BUFFER_SIZE
    tcp_receive_buffer_size: int = defaults.TCP_RECEIVE_BUFFER_SIZE
    stomp_min_large_message_size: int = defaults.MIN_LARGE_MESSAGE_SIZE
    stomp_max_body_size: int = defaults.STOMP_MAX_BODY_SIZE
    stomp_max_headers: int = defaults.STOMP_MAX_HEADERS
    stomp_max_header_length: int = defaults.STOMP_MAX_HEADER_LENGTH
    stomp_max_headers_size: int = defaults.STOMP_MAX_HEADERS_SIZE
    handshake_timeout: int = 10  # seconds
    connections_allowed: int = -1
    web_socket_max_frame_payload_length: int = 65536
    web_socket_encoder_type: str = "binary"
    tls: TlsParams = TlsParams()

    @property
    def host(self) -> str:
        """The first (usually only) host to listen on."""
        return self.hosts[0]

    def accepts(self, protocol: str) -> bool:
        """Whether this acceptor serves ``protocol`` (e.g. ``"STOMP"``)."""
        return self.protocols is None or protocol.upper() in self.protocols


@dataclass(frozen=True, slots=True)
class ConnectorConfig:
    """A ``<connector name=...>tcp://host:port?params</connector>``: how to reach a broker.

    ``tls``: ``sslEnabled`` and the other TLS parameters a cluster link dials with
    (:class:`~.tls.TlsParams`, docs/tls.md).
    """

    name: str
    url: str
    host: str = defaults.TCP_HOST
    port: int = defaults.TCP_PORT
    params: Mapping[str, str] = field(default_factory=_no_params, hash=False)
    tls: TlsParams = TlsParams()


@dataclass(frozen=True, slots=True)
class JGroupsStack:
    """What artemis-py uses of a ``jgroups-file``: its one discovery protocol.

    ``protocol`` is ``FILE_PING`` (``location``: the shared directory, absolute) or
    ``DNS_PING`` (``dns_query``: the name whose addresses are the members;
    ``dns_record_type``: ``A`` or ``AAAA``). ``file`` is the stack file's absolute path;
    ``ignored`` names the other protocols of the stack (transport, failure detection, ...),
    which have no meaning without JGroups (named in a start-up warning).
    """

    file: str
    protocol: str
    location: str | None = None
    dns_query: str | None = None
    dns_record_type: str = "A"
    ignored: tuple[str, ...] = ()


def _endpoint(group: BroadcastGroupConfig | DiscoveryGroupConfig) -> str:
    if group.jgroups_file is not None:
        return f"jgroups:{group.jgroups_channel or ''}"
    host = group.group_address or ""
    return (
        f"udp://[{host}]:{group.group_port}" if ":" in host else f"udp://{host}:{group.group_port}"
    )


@dataclass(frozen=True, slots=True)
class BroadcastGroupConfig:
    """A ``<broadcast-group>``: announces ``connectors`` every ``broadcast_period`` ms, over UDP
    multicast (``group_address``/``group_port``) or a JGroups file's discovery protocol
    (``jgroups``, read from ``jgroups_file``; ``jgroups_channel`` names the FILE_PING
    subdirectory)."""

    name: str
    connectors: tuple[str, ...] = ()
    group_address: str | None = None
    group_port: int = -1
    local_bind_address: str | None = None
    local_bind_port: int = -1  # -1: an anonymous port
    broadcast_period: int = 2000
    jgroups_file: str | None = None
    jgroups_channel: str | None = None
    jgroups: JGroupsStack | None = field(default=None, compare=False)

    @property
    def endpoint(self) -> str:
        """The name of the endpoint, as announcements carry it (both sides must agree)."""
        return _endpoint(self)


@dataclass(frozen=True, slots=True)
class DiscoveryGroupConfig:
    """A ``<discovery-group>``: where to hear the others' broadcasts (the same endpoint as
    their broadcast group). A member not heard of for ``refresh_timeout`` ms is dropped;
    users of the group wait up to ``initial_wait_timeout`` ms for the first members."""

    name: str
    group_address: str | None = None
    group_port: int = -1
    local_bind_address: str | None = None
    local_bind_port: int = -1
    refresh_timeout: int = 10_000
    initial_wait_timeout: int = 10_000
    jgroups_file: str | None = None
    jgroups_channel: str | None = None
    jgroups: JGroupsStack | None = field(default=None, compare=False)

    @property
    def endpoint(self) -> str:
        """The name of the endpoint, as announcements carry it (both sides must agree)."""
        return _endpoint(self)


@dataclass(frozen=True, slots=True)
class ClusterConnectionConfig:
    """A ``<cluster-connection name=...>`` (Artemis clusters §4.1); defaults per Artemis.

    ``connector_name`` is the ``<connector-ref>`` this node advertises to the others. Exactly
    one of ``static_connectors`` / ``discovery_group_name`` says how to find the others (both
    empty: this node only accepts cluster links). ``confirmation_window_size`` and
    ``producer_window_size`` default to 1 MiB as the Artemis manual and schema document.

    Not acted upon yet, and named in the start-up warning when not at their default:
    ``min_large_message_size``, ``use_duplicate_detection`` (links always send duplicate ids),
    ``confirmation_window_size``, ``call_failover_timeout``, ``notification_interval``,
    ``notification_attempts``.
    """

    name: str
    connector_name: str
    address: str = ""
    check_period: int = 30_000
    connection_ttl: int = 60_000
    min_large_message_size: int = 100 * 1024
    call_timeout: int = 30_000
    retry_interval: int = 500
    retry_interval_multiplier: float = 1.0
    max_retry_interval: int = 2000
    initial_connect_attempts: int = -1  # -1: retry forever
    reconnect_attempts: int = -1  # -1: retry forever
    use_duplicate_detection: bool = True
    message_load_balancing: MessageLoadBalancing = MessageLoadBalancing.ON_DEMAND
    max_hops: int = 1
    confirmation_window_size: int = 1024 * 1024
    producer_window_size: int = 1024 * 1024
    call_failover_timeout: int = -1
    notification_interval: int = 1000
    notification_attempts: int = 2
    static_connectors: tuple[str, ...] = ()
    allow_direct_connections_only: bool = False
    discovery_group_name: str | None = None

    def matches_address(self, address: str) -> bool:
        """Whether this cluster connection applies to ``address`` (clusters §4.1 "address").

        ``address`` is a comma-separated list of prefixes; a ``!`` prefix excludes and
        exclusion wins; an empty value (or only exclusions) includes everything else. No
        wildcards here: plain prefix matching.
        """
        includes, excludes = self._prefixes()
        if any(address.startswith(prefix) for prefix in excludes):
            return False
        return not includes or any(address.startswith(prefix) for prefix in includes)

    def overlap(self, other: ClusterConnectionConfig) -> str | None:
        """A prefix of addresses that both this and ``other`` apply to, or None.

        Two included prefixes overlap when one starts with the other; the longer one is
        shared unless an exclusion of either side covers it (an exclusion longer than it
        still leaves other addresses under it).
        """
        mine, my_excludes = self._prefixes()
        theirs, their_excludes = other._prefixes()
        excludes = my_excludes + their_excludes
        for a in mine or [""]:
            for b in theirs or [""]:
                if not (a.startswith(b) or b.startswith(a)):
                    continue
                shared = max(a, b, key=len)
                if not any(shared.startswith(prefix) for prefix in excludes):
                    return shared
        return None

    def _prefixes(self) -> tuple[list[str], list[str]]:
        """The ``address`` filter's included and excluded prefixes."""
        parts = [p.strip() for p in self.address.split(",") if p.strip()]
        return [p for p in parts if not p.startswith("!")], [p[1:] for p in parts if p[0] == "!"]


@dataclass(frozen=True, slots=True)
class ScaleDownConfig:
    """``<scale-down>`` of a primary-only policy (clusters §8.3): on a graceful shutdown, move
    every message to another node (of ``group_name``, if set), found through ``connectors``,
    among the members of the discovery group ``discovery_group_name``, or among the
    cluster's live members."""

    enabled: bool = True
    group_name: str | None = None
    connectors: tuple[str, ...] = ()
    discovery_group_name: str | None = None
    commit_interval: int = -1


@dataclass(frozen=True, slots=True)
class SharedStoreConfig:
    """``<shared-store><primary/>`` or ``<backup/>`` (docs/high-availability.md).

    Defaults are what Artemis's configuration classes start from (the schema says
    restart-backup false, but Artemis's parser and classes default it to true). The primary
    reads ``failover_on_shutdown`` and ``wait_for_activation``; the backup reads the other
    fields and its own ``failover_on_shutdown`` (for when it is live). A backup's
    ``scale_down`` is parsed and named in a warning: it is not implemented.
    """

    backup: bool = False
    failover_on_shutdown: bool = False
    wait_for_activation: bool = True
    allow_failback: bool = True
    restart_backup: bool = True
    scale_down: ScaleDownConfig | None = None


@dataclass(frozen=True, slots=True)
class ReplicationConfig:
    """``<replication><primary/>`` or ``<backup/>`` (shared nothing: the primary sends its
    journal to the backup over the network).

    Defaults are what Artemis's parser yields for an empty element (``FileConfigurationParser``
    with ``ActiveMQDefaultConfiguration`` and the ``Replicated``/``ReplicaPolicyConfiguration``
    classes), which in three places is not what the schema says: ``allow_failback`` is false
    and ``restart_backup`` true (the schema: true, false), and an absent
    ``retry-replication-wait`` takes ``vote-retry-wait``'s value (the schema: 2000).
    ``cluster_name`` names the cluster-connection whose connectors find the pair (``None``:
    the first one); ``quorum_size`` -1 means the cluster's size; ``quorum_vote_wait`` is in
    seconds, the other waits and timeouts in milliseconds. The primary reads
    ``check_for_active_server``, the backup ``allow_failback``, ``restart_backup`` and
    ``scale_down``; both read the rest. A backup's ``scale_down`` is parsed and named in a
    warning: it is not implemented.
    """

    backup: bool = False
    group_name: str | None = None
    cluster_name: str | None = None
    check_for_active_server: bool = False
    initial_replication_sync_timeout: int = 30000
    allow_failback: bool = False
    restart_backup: bool = True
    max_saved_replicated_journals_size: int = 2
    vote_on_replication_failure: bool = False
    quorum_size: int = -1
    quorum_vote_wait: int = 30
    vote_retries: int = 12
    vote_retry_wait: int = 5000
    retry_replication_wait: int = 5000
    scale_down: ScaleDownConfig | None = None


@dataclass(frozen=True, slots=True)
class HAPolicyConfig:
    """``<ha-policy>``. Absent means primary-only without scale-down (Artemis's default).

    ``PRIMARY_ONLY`` comes with its ``scale_down``, ``SHARED_STORE`` with ``shared_store``
    and ``REPLICATION`` with ``replication`` (the other two fields are then ``None``).
    """

    policy: HAPolicy = HAPolicy.PRIMARY_ONLY
    scale_down: ScaleDownConfig | None = None
    shared_store: SharedStoreConfig | None = None
    replication: ReplicationConfig | None = None

    @property
    def shared_store_backup(self) -> bool:
        """Whether this node is the backup of a shared-store pair."""
        return self.shared_store is not None and self.shared_store.backup

    @property
    def replication_backup(self) -> bool:
        """Whether this node is the backup of a replication pair."""
        return self.replication is not None and self.replication.backup


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """One broker node's configuration, as read from broker.xml (or :func:`default_config`).

    Paths are kept as written; relative ones are relative to the broker instance directory,
    which is the caller's business. ``global_max_size`` / ``global_max_messages``: -1 means
    the default (see :mod:`artemis_py.broker.paging`). ``max_disk_usage`` (percent of the
    disk used, -1: not watched), ``min_disk_free`` (bytes, -1: unset; when set it replaces
    ``max_disk_usage``) and ``disk_scan_period`` (ms, -1: never scanned) watch the disk of
    the data directories (:mod:`artemis_py.broker.paging.disk`). ``message_expiry_scan_period``
    (ms, -1: never) is how often the expiry reaper looks for expired messages
    (:mod:`artemis_py.broker.expiry_reaper`), ``address_queue_scan_period`` (ms, -1: never)
    how often empty auto-created queues and addresses are looked for and deleted
    (:mod:`artemis_py.broker.address_queue_reaper`). ``large_messages_directory`` holds
    large messages (docs/large-messages.md). ``wildcards`` is the syntax of address
    patterns, for address and security settings and, when ``wildcard_routing_enabled``
    (Artemis's default), for subscriptions on wildcard addresses
    (:mod:`artemis_py.broker.routing.wildcard_links`).
    """

    name: str = defaults.BROKER_NAME
    persistence_enabled: bool = True
    security_enabled: bool = True
    journal: JournalConfig = JournalConfig()
    paging_directory: str = "data/paging"
    large_messages_directory: str = "data/largemessages"
    global_max_size: int = -1
    global_max_messages: int = -1
    max_disk_usage: int = defaults.MAX_DISK_USAGE
    min_disk_free: int = -1
    disk_scan_period: int = defaults.DISK_SCAN_PERIOD
    message_expiry_scan_period: int = defaults.MESSAGE_EXPIRY_SCAN_PERIOD
    address_queue_scan_period: int = defaults.ADDRESS_QUEUE_SCAN_PERIOD
    id_cache_size: int = defaults.ID_CACHE_SIZE
    max_redelivery_records: int = defaults.MAX_REDELIVERY_RECORDS
    persist_id_cache: bool = True
    # Where management operations are sent (Artemis's <management-address>).
    management_address: str = defaults.MANAGEMENT_ADDRESS
    cluster_user: str = defaults.CLUSTER_USER
    cluster_password: str = field(default=defaults.CLUSTER_PASSWORD, repr=False)
    connection_ttl_override: int = -1
    wildcard_routing_enabled: bool = True
    wildcards: WildcardSyntax = DEFAULT_WILDCARDS
    acceptors: tuple[AcceptorConfig, ...] = ()
    connectors: tuple[ConnectorConfig, ...] = ()
    address_settings: AddressSettingsRepository = field(default_factory=AddressSettingsRepository)
    addresses: tuple[AddressConfig, ...] = ()
    diverts: tuple[DivertConfig, ...] = ()
    bridges: tuple[BridgeConfig, ...] = ()
    # Who may do what where (broker/authorization.py), when security_enabled.
    security_settings: tuple[SecuritySettingConfig, ...] = ()
    broadcast_groups: tuple[BroadcastGroupConfig, ...] = ()
    discovery_groups: tuple[DiscoveryGroupConfig, ...] = ()
    cluster_connections: tuple[ClusterConnectionConfig, ...] = ()
    ha_policy: HAPolicyConfig = HAPolicyConfig()
    grouping_handler: GroupingHandlerConfig | None = None
    warnings: tuple[ConfigProblem, ...] = field(default=(), compare=False)
    source: str | None = field(default=None, compare=False)

    def address_settings_for(self, address: str) -> AddressSettings:
        """The merged, complete address settings for ``address`` (cached per address)."""
        return self.address_settings.match(address)

    def acceptor(self, name: str) -> AcceptorConfig:
        return _by_name(self.acceptors, name, "acceptor")

    def connector(self, name: str) -> ConnectorConfig:
        return _by_name(self.connectors, name, "connector")

    def discovery_group(self, name: str) -> DiscoveryGroupConfig:
        return _by_name(self.discovery_groups, name, "discovery group")

    def broadcast_group(self, name: str) -> BroadcastGroupConfig:
        return _by_name(self.broadcast_groups, name, "broadcast group")

    def cluster_connection(self, name: str) -> ClusterConnectionConfig:
        return _by_name(self.cluster_connections, name, "cluster connection")

    def address(self, name: str) -> AddressConfig:
        return _by_name(self.addresses, name, "address")

    def queues(self) -> tuple[QueueConfig, ...]:
        """Every queue declared under ``<addresses>``, in file order."""
        return tuple(q for a in self.addresses for q in a.queues)


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_T = TypeVar("_T", bound=_Named)


def _by_name(items: tuple[_T, ...], name: str, what: str) -> _T:
    for item in items:
        if item.name == name:
            return item
    raise KeyError(f"no {what} named {name!r}")
