"""The document: ``<configuration>`` and ``<core>``, ``<core>``'s own values, the journal and
the wildcard syntax; the other sections are read by their own modules from here."""

from __future__ import annotations

from dataclasses import replace

from .. import defaults
from ..element_reader import (
    NS_CONFIGURATION,
    NS_CORE,
    NS_JMS,
    NS_XINCLUDE,
    Children,
    ElementReader,
)
from ..enums import JournalType
from ..model import BrokerConfig, JournalConfig
from ..passwords import PasswordCodec, parse_codec, resolve_mask
from ..values import (
    at_least,
    between,
    bytes32,
    bytes64,
    checked,
    int32,
    int64,
    minus_one_or_at_least,
    non_empty,
    parse_bool,
    parse_enum,
)
from ..wildcards import DEFAULT_WILDCARDS, WildcardSyntax
from ..xmlreader import XmlElement
from .addresses import read_address_settings, read_addresses
from .bridges import read_bridges
from .cluster_connections import read_cluster_connections
from .discovery import check_discovery_use, read_broadcast_groups, read_discovery_groups
from .diverts import read_diverts
from .grouping_handler import read_grouping_handler
from .ha_policy import read_ha_policy
from .security_settings import read_security_settings
from .transports import Unmask, read_acceptors, read_connectors

__all__ = ["read_document"]


def read_document(reader: ElementReader, root: XmlElement) -> BrokerConfig:
    """The whole file; Artemis's defaults where ``<core>`` cannot be found (reported)."""
    core = _find_core(reader, root)
    if core is None:
        return BrokerConfig()
    return _read_core(reader, core)


def _find_core(reader: ElementReader, root: XmlElement) -> XmlElement | None:
    if root.tag == "core":
        reader.warn(
            root,
            'the root element should be <configuration xmlns="urn:activemq"> around '
            "<core>; Artemis would not read this file",
        )
        return _checked_core(reader, root)
    if root.tag != "configuration":
        reader.error(root, 'the root element must be <configuration xmlns="urn:activemq">')
        return None
    if root.namespace not in (NS_CONFIGURATION, ""):
        reader.error(root, f"expected namespace '{NS_CONFIGURATION}', got '{root.namespace}'")
    reader.check_no_text(root)
    cores: list[XmlElement] = []
    for child in root.children:
        if child.namespace == NS_XINCLUDE:
            reader.error(child, "XInclude is not supported; put the included content in this file")
        elif child.tag == "core":
            cores.append(child)  # _checked_core() reports a wrong namespace
        elif child.tag == "jms" and child.namespace in (NS_JMS, root.namespace):
            reader.not_implemented("jms", child.line)
        elif child.namespace in (root.namespace, NS_CORE):
            reader.error(
                child, reader.unknown_message(child.tag, "configuration", frozenset({"core"}))
            )
        else:
            reader.not_implemented(f"{{{child.namespace}}}{child.tag}", child.line)
    if not cores:
        reader.error(root, 'missing <core xmlns="urn:activemq:core">')
        return None
    for extra in cores[1:]:
        reader.error(extra, f"may appear only once (first at line {cores[0].line})")
    return _checked_core(reader, cores[0])


def _checked_core(reader: ElementReader, core: XmlElement) -> XmlElement:
    if core.namespace != NS_CORE:
        if core.namespace in ("", NS_CONFIGURATION):
            reader.warn(
                core,
                f'<core> should declare xmlns="{NS_CORE}"; Artemis would reject this file',
            )
        else:
            reader.error(core, f"expected namespace '{NS_CORE}', got '{core.namespace}'")
    return core


def _read_core(reader: ElementReader, core: XmlElement) -> BrokerConfig:
    # The order of the reads below is the order in which valid-but-unimplemented names are
    # listed in the summary warning; sections that others refer to come first.
    kids = reader.children(core, "core")
    routing_enabled, wildcards = _read_wildcards(reader, kids)
    id_cache_size = reader.scalar(
        kids, "id-cache-size", checked(int32, at_least(0)), defaults.ID_CACHE_SIZE
    )
    connection_ttl_override = reader.scalar(
        kids, "connection-ttl-override", checked(int64, minus_one_or_at_least(1)), -1
    )
    unmask = _password_reader(reader, kids)
    connectors = read_connectors(reader, kids, unmask)
    connector_names = {c.name for c in connectors}
    discovery_groups = read_discovery_groups(reader, kids)
    discovery_names = {d.name for d in discovery_groups}
    cluster_connections = read_cluster_connections(reader, kids, connector_names, discovery_names)
    cluster_password = _read_cluster_password(reader, kids, unmask, bool(cluster_connections))
    broadcast_groups = read_broadcast_groups(reader, kids, connector_names)
    ha_policy = read_ha_policy(
        reader, kids, connector_names, discovery_names, {c.name for c in cluster_connections}
    )
    check_discovery_use(
        reader, kids, broadcast_groups, discovery_groups, cluster_connections, ha_policy
    )
    routing_wildcards = wildcards if routing_enabled else None
    addresses = read_addresses(reader, kids, routing_wildcards)
    queue_names = {q.name for a in addresses for q in a.queues}
    disk_scan_period, expiry_scan_period, address_queue_scan_period = _scan_periods(reader, kids)
    config = BrokerConfig(
        name=reader.scalar(kids, "name", str.strip, defaults.BROKER_NAME),
        persistence_enabled=reader.scalar(kids, "persistence-enabled", parse_bool, True),
        security_enabled=reader.scalar(kids, "security-enabled", parse_bool, True),
        journal=_read_journal(reader, kids),
        paging_directory=reader.scalar(kids, "paging-directory", non_empty, "data/paging"),
        large_messages_directory=reader.scalar(
            kids, "large-messages-directory", non_empty, "data/largemessages"
        ),
        global_max_size=reader.scalar(
            kids, "global-max-size", checked(bytes64, minus_one_or_at_least(0)), -1
        ),
        global_max_messages=reader.scalar(
            kids, "global-max-messages", checked(int64, minus_one_or_at_least(0)), -1
        ),
        # Artemis's validators: PERCENTAGE_OR_MINUS_ONE, then MINUS_ONE_OR_GT_ZERO twice.
        max_disk_usage=reader.scalar(
            kids, "max-disk-usage", _percent_or_minus_one, defaults.MAX_DISK_USAGE
        ),
        min_disk_free=reader.scalar(
            kids, "min-disk-free", checked(bytes64, minus_one_or_at_least(1)), -1
        ),
        disk_scan_period=disk_scan_period,
        message_expiry_scan_period=expiry_scan_period,
        address_queue_scan_period=address_queue_scan_period,
        id_cache_size=id_cache_size,
        max_redelivery_records=reader.scalar(
            kids, "max-redelivery-records", _count_or_minus_one, defaults.MAX_REDELIVERY_RECORDS
        ),
        persist_id_cache=reader.scalar(kids, "persist-id-cache", parse_bool, True),
        management_address=reader.scalar(
            kids, "management-address", non_empty, defaults.MANAGEMENT_ADDRESS
        ),
        cluster_user=reader.scalar(kids, "cluster-user", str.strip, defaults.CLUSTER_USER),
        cluster_password=cluster_password,
        connection_ttl_override=connection_ttl_override,
        wildcard_routing_enabled=routing_enabled,
        wildcards=wildcards,
        acceptors=read_acceptors(reader, kids, connection_ttl_override, unmask),
        connectors=connectors,
        address_settings=read_address_settings(reader, kids, id_cache_size, wildcards),
        addresses=addresses,
        diverts=read_diverts(reader, kids, routing_wildcards, queue_names),
        security_settings=read_security_settings(reader, kids, wildcards),
        broadcast_groups=broadcast_groups,
        discovery_groups=discovery_groups,
        cluster_connections=cluster_connections,
        ha_policy=ha_policy,
        grouping_handler=read_grouping_handler(reader, kids, cluster_connections),
    )
    return replace(config, bridges=read_bridges(reader, kids, config, unmask))


# Artemis's MINUS_ONE_OR_GT_ZERO for a long period (-1: the scan never runs).
_scan_period = checked(int64, minus_one_or_at_least(1))


def _scan_periods(reader: ElementReader, kids: Children) -> tuple[int, int, int]:
    """``disk-scan-period`` (an int there), ``message-expiry-scan-period`` and
    ``address-queue-scan-period`` (ms; -1: never)."""
    return (
        reader.scalar(
            kids,
            "disk-scan-period",
            checked(int32, minus_one_or_at_least(1)),
            defaults.DISK_SCAN_PERIOD,
        ),
        reader.scalar(
            kids, "message-expiry-scan-period", _scan_period, defaults.MESSAGE_EXPIRY_SCAN_PERIOD
        ),
        reader.scalar(
            kids, "address-queue-scan-period", _scan_period, defaults.ADDRESS_QUEUE_SCAN_PERIOD
        ),
    )


_count_or_minus_one = checked(int32, minus_one_or_at_least(0))


def _percent_or_minus_one(text: str) -> int:
    value = int32(text)
    if value != -1 and not 0 <= value <= 100:
        raise ValueError(f"{value} must be a percentage from 0 to 100, or -1 (not watched)")
    return value


def _password_reader(reader: ElementReader, kids: Children) -> Unmask:
    """How broker.xml's passwords (cluster-password, key and trust store passwords) are read:
    ``ENC(...)`` (or any value under ``<mask-password>true``) is unmasked with Artemis's
    default codec and ``<password-codec>``'s key (docs/security.md)."""
    mask_password: bool | None = reader.scalar(kids, "mask-password", parse_bool, None)
    codec = reader.scalar(kids, "password-codec", parse_codec, PasswordCodec())

    def unmask(text: str) -> str:
        try:
            return resolve_mask(text, mask_password, codec)
        except ValueError as exc:
            raise ValueError(f"masked password: {exc}") from None

    return unmask


def _read_cluster_password(
    reader: ElementReader, kids: Children, unmask: Unmask, clustered: bool
) -> str:
    """The plain cluster password (read with ``unmask``)."""
    password = reader.scalar(kids, "cluster-password", unmask, defaults.CLUSTER_PASSWORD)
    if clustered and password == defaults.CLUSTER_PASSWORD:
        element = kids.get("cluster-password", kids["cluster-connections"])[0]
        reader.warn(
            element,
            "the cluster password is Artemis's default; change it, or anyone can join the cluster",
            label="cluster-password",
        )
    return password


# The journal creates its directories whatever these say: named in the start-up warning when
# set to false. (journal-type and journal-max-io are accepted for compatibility and not named:
# the journal does its own buffered I/O whatever I/O mode is named, as etc/broker.xml says.)
_JOURNAL_NOT_IMPLEMENTED = {
    "create-journal-dir": "create_directory",
    "create-bindings-dir": "create_bindings_directory",
}


def _read_journal(reader: ElementReader, kids: Children) -> JournalConfig:
    journal = _journal(reader, kids)
    reader.not_implemented_unless_default(kids, _JOURNAL_NOT_IMPLEMENTED, journal, JournalConfig())
    return journal


def _journal(reader: ElementReader, kids: Children) -> JournalConfig:
    def journal_type(text: str) -> JournalType:
        return parse_enum(text, JournalType)

    return JournalConfig(
        type=reader.scalar(kids, "journal-type", journal_type, JournalType.ASYNCIO),
        directory=reader.scalar(kids, "journal-directory", non_empty, "data/journal"),
        create_directory=reader.scalar(kids, "create-journal-dir", parse_bool, True),
        bindings_directory=reader.scalar(kids, "bindings-directory", non_empty, "data/bindings"),
        create_bindings_directory=reader.scalar(kids, "create-bindings-dir", parse_bool, True),
        # Artemis refuses journal files under 1024 bytes (JournalImpl.MIN_FILE_SIZE).
        file_size=reader.scalar(
            kids,
            "journal-file-size",
            checked(bytes32, at_least(1024)),
            defaults.JOURNAL_FILE_SIZE,
        ),
        min_files=reader.scalar(kids, "journal-min-files", checked(int32, at_least(1)), 2),
        pool_files=reader.scalar(
            kids, "journal-pool-files", checked(int32, minus_one_or_at_least(1)), -1
        ),
        buffer_size=reader.scalar(
            kids,
            "journal-buffer-size",
            checked(bytes32, at_least(1)),
            defaults.JOURNAL_BUFFER_SIZE,
        ),
        buffer_timeout=reader.scalar(
            kids,
            "journal-buffer-timeout",
            checked(int32, at_least(0)),
            defaults.JOURNAL_BUFFER_TIMEOUT_NIO,
        ),
        max_io=reader.scalar(
            kids, "journal-max-io", checked(int32, at_least(1)), defaults.JOURNAL_MAX_IO_NIO
        ),
        datasync=reader.scalar(kids, "journal-datasync", parse_bool, True),
        sync_transactional=reader.scalar(kids, "journal-sync-transactional", parse_bool, True),
        sync_non_transactional=reader.scalar(
            kids, "journal-sync-non-transactional", parse_bool, True
        ),
        compact_min_files=reader.scalar(
            kids, "journal-compact-min-files", checked(int32, at_least(0)), 10
        ),
        compact_percentage=reader.scalar(
            kids, "journal-compact-percentage", checked(int32, between(0, 100)), 30
        ),
    )


def _read_wildcards(reader: ElementReader, kids: Children) -> tuple[bool, WildcardSyntax]:
    routing_enabled = reader.scalar(kids, "wild-card-routing-enabled", parse_bool, True)
    if "wildcard-addresses" not in kids:
        return routing_enabled, DEFAULT_WILDCARDS
    element = kids["wildcard-addresses"][0]
    wk = reader.children(element)
    if "enabled" in wk:
        reader.warn(wk["enabled"][0], "deprecated; use <routing-enabled>")
        routing_enabled = reader.scalar(wk, "enabled", parse_bool, routing_enabled)
    routing_enabled = reader.scalar(wk, "routing-enabled", parse_bool, routing_enabled)
    chars = {
        name: reader.scalar(wk, name, str.strip, default)
        for name, default in (("delimiter", "."), ("any-words", "#"), ("single-word", "*"))
    }
    try:
        syntax = WildcardSyntax(chars["delimiter"], chars["any-words"], chars["single-word"])
    except ValueError as exc:
        reader.error(element, str(exc))
        syntax = DEFAULT_WILDCARDS
    return routing_enabled, syntax
