"""Reading broker.xml into a :class:`~.model.BrokerConfig`.

Theory of operation
-------------------
1. :func:`~.xmlreader.read_xml` builds a line-numbered tree (malformed XML stops here, with
   expat's line and column).
2. :class:`_Reader` walks the tree top-down. At every element it checks the children against
   the vocabulary of that element (:mod:`.vocabulary`): implemented names are read, valid but
   unimplemented Artemis names are collected for one summary warning, anything else is an
   error with a did-you-mean suggestion. Values are ``${...}``-substituted and converted only
   when read (an unset variable inside an ignored element is no error).
3. Every problem is recorded and reading goes on (a bad value is replaced by its default so
   later checks still run); cross-references (connector-ref, discovery-group-ref, ...) are
   checked once everything is read.
4. If anything was an error, one :class:`~.problems.ConfigFileError` lists all of them;
   otherwise the warnings are logged on ``artemis_py.config`` and kept in
   ``BrokerConfig.warnings``.
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import logging
import os
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TypeVar

from . import defaults
from .address_settings import (
    ADDRESS_SETTING_FIELDS,
    AddressSettingEntry,
    AddressSettings,
    AddressSettingsRepository,
)
from .enums import HAPolicy, JournalType, MessageLoadBalancing, RoutingType
from .model import (
    ARTEMIS_PROTOCOLS,
    AcceptorConfig,
    AddressConfig,
    BroadcastGroupConfig,
    BrokerConfig,
    ClusterConnectionConfig,
    ConnectorConfig,
    DiscoveryGroupConfig,
    HAPolicyConfig,
    JournalConfig,
    QueueConfig,
    ScaleDownConfig,
)
from .problems import ConfigProblem, ProblemCollector, raise_problems
from .urls import TransportURL, parse_transport_url
from .values import (
    at_least,
    between,
    bytes32,
    bytes64,
    checked,
    int32,
    int64,
    minus_one_or_at_least,
    parse_bool,
    parse_enum,
    parse_float,
    substitute,
)
from .vocabulary import VOCABULARIES, Vocabulary, suggest
from .wildcards import DEFAULT_WILDCARDS, WildcardSyntax
from .xmlreader import XmlElement, XmlSyntaxError, read_xml

__all__ = ["default_config", "load_config", "parse_config"]

logger = logging.getLogger("artemis_py.config")

T = TypeVar("T")

NS_CONFIGURATION = "urn:activemq"
NS_CORE = "urn:activemq:core"
NS_JMS = "urn:activemq:jms"
NS_XINCLUDE = "http://www.w3.org/2001/XInclude"

Children = dict[str, list[XmlElement]]


class _Invalid:
    """Marker for "this value was wrong and has been reported"."""


_INVALID = _Invalid()


def _port(text: str) -> int:
    return checked(int32, between(1, 65535))(text)


def _local_port(text: str) -> int:
    value = int32(text)
    if value != -1 and not 1 <= value <= 65535:
        raise ValueError(f"{value} must be -1 (any port) or a port from 1 to 65535")
    return value


def _positive_float(text: str) -> float:
    value = parse_float(text)
    if value <= 0:
        raise ValueError(f"{value} must be greater than 0")
    return value


def _non_empty(text: str) -> str:
    if not text:
        raise ValueError("must not be empty")
    return text


def _url_bool(text: str) -> bool:
    # URL parameters are read with Java's Boolean.parseBoolean, which ignores case.
    return parse_bool(text.lower())


# Acceptor URL parameters artemis-py reads: name -> (converter, AcceptorConfig field).
_ACCEPTOR_PARAMS: dict[str, tuple[Callable[[str], object], str]] = {
    "connectionTtl": (checked(int64, minus_one_or_at_least(1)), "connection_ttl"),
    "connectionTtlMin": (checked(int64, at_least(0)), "connection_ttl_min"),
    "connectionTtlMax": (checked(int64, at_least(0)), "connection_ttl_max"),
    "heartBeatToConnectionTtlModifier": (_positive_float, "heart_beat_to_connection_ttl_modifier"),
    "stompConsumerWindowSize": (
        checked(int32, minus_one_or_at_least(0)),
        "stomp_consumer_window_size",
    ),
    "stompEnableMessageId": (_url_bool, "stomp_enable_message_id"),
    "tcpSendBufferSize": (checked(int32, minus_one_or_at_least(1)), "tcp_send_buffer_size"),
    "tcpReceiveBufferSize": (checked(int32, minus_one_or_at_least(1)), "tcp_receive_buffer_size"),
    "stompMaxBodySize": (checked(bytes64, at_least(1)), "stomp_max_body_size"),
    "stompMaxHeaders": (checked(int32, at_least(1)), "stomp_max_headers"),
    "stompMaxHeaderLength": (checked(bytes32, at_least(1)), "stomp_max_header_length"),
    "stompMaxHeadersSize": (checked(bytes64, at_least(1)), "stomp_max_headers_size"),
}
_OTHER_KNOWN_PARAMS = frozenset({"protocols", "anycastPrefix", "multicastPrefix"})
_DEPRECATED_PARAMS = {"stompConsumerCredits": "stompConsumerWindowSize"}


class _Reader:
    def __init__(self, filename: str, environ: Mapping[str, str]) -> None:
        self.problems = ProblemCollector(filename)
        self.environ = environ
        self.unimplemented: list[tuple[str, int]] = []
        self.wildcards = DEFAULT_WILDCARDS

    # --- low-level helpers ---------------------------------------------------------------------

    def error(self, element: XmlElement, message: str, *, label: str | None = None) -> None:
        self.problems.error(element.line, label or element.tag, message)

    def warn(self, element: XmlElement, message: str, *, label: str | None = None) -> None:
        self.problems.warn(element.line, label or element.tag, message)

    def children(self, element: XmlElement, context: str | None = None) -> Children:
        """Check ``element``'s children against its vocabulary; group the implemented ones."""
        vocab = VOCABULARIES[context or element.tag]
        self.check_attributes(element, vocab)
        self.check_no_text(element)
        found: Children = {}
        for child in element.children:
            if not self.check_namespace(element, child):
                continue
            name = child.tag
            if name in vocab.implemented:
                previous = found.setdefault(name, [])
                if previous and name not in vocab.repeatable:
                    self.error(
                        child,
                        f"may appear only once in <{element.tag}> (first at line {previous[0].line})",
                    )
                    continue
                previous.append(child)
            elif name in vocab.unimplemented:
                self.unimplemented.append((name, child.line))
            else:
                self.error(child, self.unknown_message(name, element.tag, vocab.known))
        return found

    def check_no_text(self, element: XmlElement) -> None:
        """A container element may hold only whitespace (after substitution, as in Artemis,
        where ``${name}`` is replaced in the raw file before parsing)."""
        if not element.text.strip():
            return
        start = element.text_line or element.line
        value = self.substituted(element, element.text, start, element.tag)
        if value is not None and value.strip():
            message = f"unexpected text {_excerpt(value)}"
            if "<" in value:
                message += " (a ${...} value cannot add XML elements)"
            self.problems.error(_value_line(element), element.tag, message)

    def check_attributes(self, element: XmlElement, vocab: Vocabulary) -> None:
        for attr in element.attributes:
            if attr in vocab.attributes:
                continue
            label = f"{element.tag}@{attr}"
            if attr in vocab.unimplemented_attributes:
                self.unimplemented.append((label, element.line))
                continue
            known = vocab.attributes | vocab.unimplemented_attributes
            hint = suggest(attr, known)
            message = f"unknown attribute '{attr}'"
            message += f"; did you mean '{hint}'?" if hint else f" on <{element.tag}>"
            self.error(element, message, label=label)

    def check_namespace(self, parent: XmlElement, child: XmlElement) -> bool:
        if child.namespace == parent.namespace:
            return True
        if child.namespace == NS_XINCLUDE:
            self.error(child, "XInclude is not supported; put the included content in this file")
        else:
            self.error(
                child,
                f"element in namespace '{child.namespace or '(none)'}' inside <{parent.tag}>, "
                f"which is in '{parent.namespace or '(none)'}'",
            )
        return False

    @staticmethod
    def unknown_message(name: str, parent: str, known: frozenset[str]) -> str:
        hint = suggest(name, known)
        if hint:
            return f"unknown element; did you mean <{hint}>?"
        return f"unknown element: not an Artemis <{parent}> element"

    def substituted(self, element: XmlElement, raw: str, start_line: int, label: str) -> str | None:
        value, errors = substitute(raw, self.environ)
        for err in errors:
            self.problems.error(start_line + raw[: err.offset].count("\n"), label, str(err))
        return None if errors else value

    def text(self, element: XmlElement) -> str | None:
        """The substituted, stripped text of a leaf element (``None`` if it had errors)."""
        for child in element.children:
            self.error(child, f"unexpected element inside <{element.tag}>, which takes a value")
        start = element.text_line or element.line
        return self.substituted(element, element.text, start, element.tag)

    def attribute(self, element: XmlElement, name: str, *, required: bool = True) -> str | None:
        raw = element.attributes.get(name)
        label = f"{element.tag}@{name}"
        if raw is None:
            if required:
                self.error(element, f"missing required attribute '{name}'", label=label)
            return None
        value = self.substituted(element, raw, element.line, label)
        if value is None:
            return None
        value = value.strip()
        if required and not value:
            self.error(element, f"attribute '{name}' must not be empty", label=label)
            return None
        return value

    def convert(self, element: XmlElement, convert: Callable[[str], T]) -> T | _Invalid:
        for attr in element.attributes:
            self.error(
                element,
                f"unexpected attribute '{attr}' on <{element.tag}>, which takes only a value",
                label=f"{element.tag}@{attr}",
            )
        text = self.text(element)
        if text is None:
            return _INVALID
        text = text.strip()
        try:
            return convert(text)
        except ValueError as exc:
            self.problems.error(_value_line(element), element.tag, str(exc))
            return _INVALID

    def convert_attribute(
        self, element: XmlElement, name: str, convert: Callable[[str], T]
    ) -> T | None:
        text = self.attribute(element, name, required=False)
        if text is None:
            return None
        try:
            return convert(text)
        except ValueError as exc:
            self.error(element, str(exc), label=f"{element.tag}@{name}")
            return None

    def scalar(self, kids: Children, name: str, convert: Callable[[str], T], default: T) -> T:
        """The converted value of child ``name``, or ``default`` if absent or invalid."""
        elements = kids.get(name)
        if not elements:
            return default
        value = self.convert(elements[0], convert)
        return default if isinstance(value, _Invalid) else value

    def optional(self, kids: Children, name: str) -> str | None:
        """A child's text if present and non-empty, else ``None``."""
        value = self.scalar(kids, name, str.strip, "")
        return value or None

    # --- the document --------------------------------------------------------------------------

    def read(self, root: XmlElement) -> BrokerConfig:
        core = self.find_core(root)
        if core is None:
            return BrokerConfig()
        return self.read_core(core)

    def find_core(self, root: XmlElement) -> XmlElement | None:
        if root.tag == "core":
            self.warn(
                root,
                'the root element should be <configuration xmlns="urn:activemq"> around '
                "<core>; Artemis would not read this file",
            )
            return self.checked_core(root)
        if root.tag != "configuration":
            self.error(root, 'the root element must be <configuration xmlns="urn:activemq">')
            return None
        if root.namespace not in (NS_CONFIGURATION, ""):
            self.error(root, f"expected namespace '{NS_CONFIGURATION}', got '{root.namespace}'")
        self.check_no_text(root)
        cores: list[XmlElement] = []
        for child in root.children:
            if child.namespace == NS_XINCLUDE:
                self.error(
                    child, "XInclude is not supported; put the included content in this file"
                )
            elif child.tag == "core":
                cores.append(child)  # checked_core() reports a wrong namespace
            elif child.tag == "jms" and child.namespace in (NS_JMS, root.namespace):
                self.unimplemented.append(("jms", child.line))
            elif child.namespace in (root.namespace, NS_CORE):
                self.error(
                    child, self.unknown_message(child.tag, "configuration", frozenset({"core"}))
                )
            else:
                self.unimplemented.append((f"{{{child.namespace}}}{child.tag}", child.line))
        if not cores:
            self.error(root, 'missing <core xmlns="urn:activemq:core">')
            return None
        for extra in cores[1:]:
            self.error(extra, f"may appear only once (first at line {cores[0].line})")
        return self.checked_core(cores[0])

    def checked_core(self, core: XmlElement) -> XmlElement:
        if core.namespace != NS_CORE:
            if core.namespace in ("", NS_CONFIGURATION):
                self.warn(
                    core,
                    f'<core> should declare xmlns="{NS_CORE}"; Artemis would reject this file',
                )
            else:
                self.error(core, f"expected namespace '{NS_CORE}', got '{core.namespace}'")
        return core

    def read_core(self, core: XmlElement) -> BrokerConfig:
        kids = self.children(core, "core")
        routing_enabled, wildcards = self.read_wildcards(kids)
        self.wildcards = wildcards
        id_cache_size = self.scalar(
            kids, "id-cache-size", checked(int32, at_least(0)), defaults.ID_CACHE_SIZE
        )
        connection_ttl_override = self.scalar(
            kids, "connection-ttl-override", checked(int64, minus_one_or_at_least(1)), -1
        )
        connectors = self.read_connectors(kids)
        connector_names = {c.name for c in connectors}
        discovery_groups = self.read_discovery_groups(kids)
        discovery_names = {d.name for d in discovery_groups}
        cluster_connections = self.read_cluster_connections(kids, connector_names, discovery_names)
        cluster_password = self.scalar(
            kids, "cluster-password", str.strip, defaults.CLUSTER_PASSWORD
        )
        if cluster_password.startswith("ENC(") and cluster_password.endswith(")"):
            self.error(kids["cluster-password"][0], "masked (ENC(...)) passwords are not supported")
        if cluster_connections and cluster_password == defaults.CLUSTER_PASSWORD:
            element = kids.get("cluster-password", kids["cluster-connections"])[0]
            self.warn(
                element,
                "the cluster password is Artemis's default; change it, or anyone can join "
                "the cluster",
                label="cluster-password",
            )
        return BrokerConfig(
            name=self.scalar(kids, "name", str.strip, defaults.BROKER_NAME),
            persistence_enabled=self.scalar(kids, "persistence-enabled", parse_bool, True),
            security_enabled=self.scalar(kids, "security-enabled", parse_bool, True),
            journal=self.read_journal(kids),
            paging_directory=self.scalar(kids, "paging-directory", _non_empty, "data/paging"),
            large_messages_directory=self.scalar(
                kids, "large-messages-directory", _non_empty, "data/largemessages"
            ),
            id_cache_size=id_cache_size,
            persist_id_cache=self.scalar(kids, "persist-id-cache", parse_bool, True),
            cluster_user=self.scalar(kids, "cluster-user", str.strip, defaults.CLUSTER_USER),
            cluster_password=cluster_password,
            connection_ttl_override=connection_ttl_override,
            wildcard_routing_enabled=routing_enabled,
            wildcards=wildcards,
            acceptors=self.read_acceptors(kids, connection_ttl_override),
            connectors=connectors,
            address_settings=self.read_address_settings(kids, id_cache_size),
            addresses=self.read_addresses(kids),
            broadcast_groups=self.read_broadcast_groups(kids, connector_names),
            discovery_groups=discovery_groups,
            cluster_connections=cluster_connections,
            ha_policy=self.read_ha_policy(kids, connector_names, discovery_names),
        )

    # --- journal -------------------------------------------------------------------------------

    def read_journal(self, kids: Children) -> JournalConfig:
        def journal_type(text: str) -> JournalType:
            return parse_enum(text, JournalType)

        return JournalConfig(
            type=self.scalar(kids, "journal-type", journal_type, JournalType.ASYNCIO),
            directory=self.scalar(kids, "journal-directory", _non_empty, "data/journal"),
            create_directory=self.scalar(kids, "create-journal-dir", parse_bool, True),
            bindings_directory=self.scalar(kids, "bindings-directory", _non_empty, "data/bindings"),
            create_bindings_directory=self.scalar(kids, "create-bindings-dir", parse_bool, True),
            # Artemis refuses journal files under 1024 bytes (JournalImpl.MIN_FILE_SIZE).
            file_size=self.scalar(
                kids,
                "journal-file-size",
                checked(bytes32, at_least(1024)),
                defaults.JOURNAL_FILE_SIZE,
            ),
            min_files=self.scalar(kids, "journal-min-files", checked(int32, at_least(1)), 2),
            pool_files=self.scalar(
                kids, "journal-pool-files", checked(int32, minus_one_or_at_least(1)), -1
            ),
            buffer_size=self.scalar(
                kids,
                "journal-buffer-size",
                checked(bytes32, at_least(1)),
                defaults.JOURNAL_BUFFER_SIZE,
            ),
            buffer_timeout=self.scalar(
                kids,
                "journal-buffer-timeout",
                checked(int32, at_least(0)),
                defaults.JOURNAL_BUFFER_TIMEOUT_NIO,
            ),
            max_io=self.scalar(
                kids, "journal-max-io", checked(int32, at_least(1)), defaults.JOURNAL_MAX_IO_NIO
            ),
            datasync=self.scalar(kids, "journal-datasync", parse_bool, True),
            sync_transactional=self.scalar(kids, "journal-sync-transactional", parse_bool, True),
            sync_non_transactional=self.scalar(
                kids, "journal-sync-non-transactional", parse_bool, True
            ),
            compact_min_files=self.scalar(
                kids, "journal-compact-min-files", checked(int32, at_least(0)), 10
            ),
            compact_percentage=self.scalar(
                kids, "journal-compact-percentage", checked(int32, between(0, 100)), 30
            ),
        )

    # --- wildcards -----------------------------------------------------------------------------

    def read_wildcards(self, kids: Children) -> tuple[bool, WildcardSyntax]:
        routing_enabled = self.scalar(kids, "wild-card-routing-enabled", parse_bool, True)
        if "wildcard-addresses" not in kids:
            return routing_enabled, DEFAULT_WILDCARDS
        element = kids["wildcard-addresses"][0]
        wk = self.children(element)
        if "enabled" in wk:
            self.warn(wk["enabled"][0], "deprecated; use <routing-enabled>")
            routing_enabled = self.scalar(wk, "enabled", parse_bool, routing_enabled)
        routing_enabled = self.scalar(wk, "routing-enabled", parse_bool, routing_enabled)
        chars = {
            name: self.scalar(wk, name, str.strip, default)
            for name, default in (("delimiter", "."), ("any-words", "#"), ("single-word", "*"))
        }
        try:
            syntax = WildcardSyntax(chars["delimiter"], chars["any-words"], chars["single-word"])
        except ValueError as exc:
            self.error(element, str(exc))
            syntax = DEFAULT_WILDCARDS
        return routing_enabled, syntax

    # --- acceptors and connectors --------------------------------------------------------------

    def transport(self, element: XmlElement) -> tuple[str | None, str, TransportURL | None]:
        name = self.attribute(element, "name")
        text = self.text(element)
        if text is None:
            return name, "", None
        url = text.strip()
        try:
            return name, url, parse_transport_url(url)
        except ValueError as exc:
            self.problems.error(_value_line(element), element.tag, str(exc))
            return name, url, None

    def read_acceptors(
        self, kids: Children, connection_ttl_override: int
    ) -> tuple[AcceptorConfig, ...]:
        if "acceptors" not in kids:
            return ()
        acceptors: list[AcceptorConfig] = []
        names: dict[str, int] = {}
        bound: dict[tuple[str, int], str] = {}
        for element in self.children(kids["acceptors"][0]).get("acceptor", []):
            self.check_attributes(element, VOCABULARIES["acceptor"])
            name, url, parsed = self.transport(element)
            if name is not None:
                if name in names:
                    self.error(
                        element, f"duplicate acceptor name '{name}' (first at line {names[name]})"
                    )
                names.setdefault(name, element.line)
            if name is None or parsed is None:
                continue
            for host in parsed.hosts:
                if parsed.port != 0 and (host, parsed.port) in bound:
                    self.error(
                        element,
                        f"{host}:{parsed.port} is already used by acceptor '{bound[(host, parsed.port)]}'",
                    )
                bound.setdefault((host, parsed.port), name)
            acceptors.append(self.acceptor(element, name, url, parsed, connection_ttl_override))
        return tuple(acceptors)

    def acceptor(
        self,
        element: XmlElement,
        name: str,
        url: str,
        parsed: TransportURL,
        connection_ttl_override: int,
    ) -> AcceptorConfig:
        params = dict(parsed.params)
        typed: dict[str, object] = {}
        for key, value in params.items():
            target = _DEPRECATED_PARAMS.get(key)
            if target is not None:
                self.warn(element, f"URL parameter '{key}' is deprecated; use '{target}'")
                if target in params:
                    continue
                key = target
            if key in _ACCEPTOR_PARAMS:
                convert, field_name = _ACCEPTOR_PARAMS[key]
                try:
                    typed[field_name] = convert(value)
                except ValueError as exc:
                    self.problems.error(
                        _value_line(element), element.tag, f"URL parameter {key}: {exc}"
                    )
            elif key not in _OTHER_KNOWN_PARAMS:
                self.check_param_spelling(element, key)
        protocols: frozenset[str] | None = None
        if "protocols" in params:
            names = [p.strip().upper() for p in params["protocols"].split(",") if p.strip()]
            for proto in names:
                if proto not in ARTEMIS_PROTOCOLS:
                    hint = suggest(proto, ARTEMIS_PROTOCOLS)
                    self.problems.error(
                        _value_line(element),
                        element.tag,
                        f"URL parameter protocols: unknown protocol '{proto}'"
                        + (f"; did you mean '{hint}'?" if hint else ""),
                    )
            protocols = frozenset(names)
        if "connection_ttl" not in typed and connection_ttl_override != -1:
            typed["connection_ttl"] = connection_ttl_override
        return AcceptorConfig(
            name=name,
            url=url,
            hosts=parsed.hosts,
            port=parsed.port,
            params=MappingProxyType(params),
            protocols=protocols,
            anycast_prefixes=_prefixes(params.get("anycastPrefix", "")),
            multicast_prefixes=_prefixes(params.get("multicastPrefix", "")),
            **typed,  # type: ignore[arg-type]
        )

    def check_param_spelling(self, element: XmlElement, key: str) -> None:
        """Warn about a URL parameter that looks like a misspelling of one we read."""
        known = [*_ACCEPTOR_PARAMS, *_OTHER_KNOWN_PARAMS]
        by_lower = {k.lower(): k for k in known}
        hint = by_lower.get(key.lower())
        if hint is None:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.85)
            hint = close[0] if close else None
        if hint is not None:
            self.warn(
                element,
                f"URL parameter '{key}' is not read (keys are case-sensitive); did you mean '{hint}'?",
            )

    def read_connectors(self, kids: Children) -> tuple[ConnectorConfig, ...]:
        if "connectors" not in kids:
            return ()
        connectors: list[ConnectorConfig] = []
        names: dict[str, int] = {}
        for element in self.children(kids["connectors"][0]).get("connector", []):
            self.check_attributes(element, VOCABULARIES["connector"])
            name, url, parsed = self.transport(element)
            if name is not None:
                if name in names:
                    self.error(
                        element, f"duplicate connector name '{name}' (first at line {names[name]})"
                    )
                names.setdefault(name, element.line)
            if name is None or parsed is None:
                continue
            if len(parsed.hosts) != 1:
                self.error(element, "a connector connects to exactly one host")
            connectors.append(
                ConnectorConfig(
                    name=name,
                    url=url,
                    host=parsed.hosts[0],
                    port=parsed.port,
                    params=MappingProxyType(dict(parsed.params)),
                )
            )
        return tuple(connectors)

    # --- address settings ----------------------------------------------------------------------

    def read_address_settings(
        self, kids: Children, id_cache_size: int
    ) -> AddressSettingsRepository:
        base = AddressSettings(id_cache_size=id_cache_size)
        if "address-settings" not in kids:
            return AddressSettingsRepository(base=base, wildcards=self.wildcards)
        entries: dict[str, AddressSettingEntry] = {}
        for element in self.children(kids["address-settings"][0]).get("address-setting", []):
            match = self.attribute(element, "match")
            setting_kids = self.children(element)
            if match is None:
                continue
            if not self.check_match(element, match):
                continue
            overrides: dict[str, object] = {}
            for name, elements in setting_kids.items():
                spec = ADDRESS_SETTING_FIELDS[name]
                if spec.replaced_by is not None:
                    self.warn(elements[0], f"deprecated; use <{spec.replaced_by}>")
                    if spec.replaced_by in setting_kids:
                        continue
                value = self.convert(elements[0], spec.convert)
                if not isinstance(value, _Invalid):
                    overrides[spec.field] = value
            if match in entries:
                self.error(
                    element,
                    f"another address-setting already matches '{match}' (line {entries[match].line})",
                    label="address-setting@match",
                )
                continue
            entries[match] = AddressSettingEntry(match, tuple(overrides.items()), element.line)
        return AddressSettingsRepository(entries.values(), base=base, wildcards=self.wildcards)

    def check_match(self, element: XmlElement, match: str) -> bool:
        syntax = self.wildcards
        words = syntax.words(match)
        label = "address-setting@match"
        for i, word in enumerate(words):
            if word in (syntax.any_words, syntax.single_word):
                continue
            for wildcard in (syntax.any_words, syntax.single_word):
                if wildcard in word:
                    fixed = word.replace(wildcard, "")
                    better = syntax.delimiter.join([*words[:i], fixed, wildcard, *words[i + 1 :]])
                    self.error(
                        element,
                        f"'{wildcard}' must be a whole word in '{match}'; did you mean '{better}'?",
                        label=label,
                    )
                    return False
        if syntax.any_words in words[:-1]:
            # Artemis (Match.verify) only accepts the any-words wildcard at the end.
            self.error(
                element,
                f"'{syntax.any_words}' may only be the last word of an address-setting match, "
                f"got '{match}'",
                label=label,
            )
            return False
        return True

    # --- addresses -----------------------------------------------------------------------------

    def read_addresses(self, kids: Children) -> tuple[AddressConfig, ...]:
        if "addresses" not in kids:
            return ()
        addresses: list[AddressConfig] = []
        address_lines: dict[str, int] = {}
        queue_lines: dict[str, int] = {}
        for element in self.children(kids["addresses"][0]).get("address", []):
            name = self.attribute(element, "name")
            akids = self.children(element)
            if name is None:
                continue
            if name in address_lines:
                self.error(
                    element, f"duplicate address '{name}' (first at line {address_lines[name]})"
                )
                continue
            address_lines[name] = element.line
            if not akids:
                self.error(element, f"address '{name}' needs <anycast> or <multicast> (or both)")
                continue
            queues: list[QueueConfig] = []
            routing_types: set[RoutingType] = set()
            for routing_type in RoutingType:
                for routing in akids.get(routing_type.value.lower(), []):
                    routing_types.add(routing_type)
                    for q in self.children(routing).get("queue", []):
                        queue = self.queue(q, name, routing_type)
                        if queue is None:
                            continue
                        if queue.name in queue_lines:
                            self.error(
                                q,
                                f"duplicate queue '{queue.name}' (first at line {queue_lines[queue.name]}); "
                                "queue names are unique across all addresses",
                            )
                            continue
                        queue_lines[queue.name] = q.line
                        queues.append(queue)
            addresses.append(AddressConfig(name, frozenset(routing_types), tuple(queues)))
        return tuple(addresses)

    def queue(
        self, element: XmlElement, address: str, routing_type: RoutingType
    ) -> QueueConfig | None:
        name = self.attribute(element, "name")
        qkids = self.children(element)
        max_consumers = self.convert_attribute(
            element, "max-consumers", checked(int32, minus_one_or_at_least(0))
        )
        purge = self.convert_attribute(element, "purge-on-no-consumers", parse_bool)
        filter_string: str | None = None
        if "filter" in qkids:
            filter_element = qkids["filter"][0]
            self.children(filter_element)
            filter_string = self.attribute(filter_element, "string")
        if name is None:
            return None
        return QueueConfig(
            name=name,
            address=address,
            routing_type=routing_type,
            filter=filter_string or None,
            durable=self.scalar(qkids, "durable", parse_bool, True),
            max_consumers=max_consumers,
            purge_on_no_consumers=bool(purge),
        )

    # --- broadcast and discovery groups --------------------------------------------------------

    def read_endpoint(self, element: XmlElement, gkids: Children, what: str) -> dict[str, object]:
        """The UDP/JGroups part shared by broadcast and discovery groups."""
        jgroups = [n for n in ("jgroups-file", "jgroups-channel") if n in gkids]
        udp = [
            n
            for n in ("group-address", "group-port", "local-bind-address", "local-bind-port")
            if n in gkids
        ]
        values: dict[str, object] = {
            "local_bind_address": self.optional(gkids, "local-bind-address"),
            "local_bind_port": self.scalar(gkids, "local-bind-port", _local_port, -1),
            "jgroups_file": self.optional(gkids, "jgroups-file"),
            "jgroups_channel": self.optional(gkids, "jgroups-channel"),
        }
        if jgroups and udp:
            self.error(
                element,
                f"{what} mixes JGroups ({', '.join(jgroups)}) and UDP ({', '.join(udp)}) settings",
            )
        elif jgroups:
            self.unimplemented.append((f"{what} JGroups", element.line))
        else:
            group_address = self.optional(gkids, "group-address")
            if group_address is None:
                self.error(element, f"{what} needs <group-address> (a multicast address)")
            else:
                try:
                    if not ipaddress.ip_address(group_address).is_multicast:
                        raise ValueError
                except ValueError:
                    self.problems.error(
                        gkids["group-address"][0].line,
                        "group-address",
                        f"'{group_address}' is not a multicast IP address (224.0.0.0 to 239.255.255.255, or ff00::/8)",
                    )
            if "group-port" not in gkids:
                self.error(element, f"{what} needs <group-port>")
            values["group_address"] = group_address
            values["group_port"] = self.scalar(gkids, "group-port", _port, -1)
        return values

    def read_broadcast_groups(
        self, kids: Children, connectors: set[str]
    ) -> tuple[BroadcastGroupConfig, ...]:
        if "broadcast-groups" not in kids:
            return ()
        groups: list[BroadcastGroupConfig] = []
        lines: dict[str, int] = {}
        for element in self.children(kids["broadcast-groups"][0]).get("broadcast-group", []):
            name = self.attribute(element, "name")
            gkids = self.children(element)
            endpoint = self.read_endpoint(element, gkids, "broadcast-group")
            refs = self.connector_refs(gkids.get("connector-ref", []), connectors)
            if not refs:
                self.error(
                    element, "a broadcast-group needs at least one <connector-ref> to announce"
                )
            if name is None or self.duplicate(element, name, lines, "broadcast-group"):
                continue
            groups.append(
                BroadcastGroupConfig(
                    name=name,
                    connectors=refs,
                    broadcast_period=self.scalar(
                        gkids, "broadcast-period", checked(int64, at_least(1)), 2000
                    ),
                    **endpoint,  # type: ignore[arg-type]
                )
            )
        return tuple(groups)

    def read_discovery_groups(self, kids: Children) -> tuple[DiscoveryGroupConfig, ...]:
        if "discovery-groups" not in kids:
            return ()
        groups: list[DiscoveryGroupConfig] = []
        lines: dict[str, int] = {}
        for element in self.children(kids["discovery-groups"][0]).get("discovery-group", []):
            name = self.attribute(element, "name")
            gkids = self.children(element)
            endpoint = self.read_endpoint(element, gkids, "discovery-group")
            if name is None or self.duplicate(element, name, lines, "discovery-group"):
                continue
            groups.append(
                DiscoveryGroupConfig(
                    name=name,
                    refresh_timeout=self.scalar(
                        gkids, "refresh-timeout", checked(int64, at_least(1)), 10_000
                    ),
                    initial_wait_timeout=self.scalar(
                        gkids, "initial-wait-timeout", checked(int64, at_least(1)), 10_000
                    ),
                    **endpoint,  # type: ignore[arg-type]
                )
            )
        return tuple(groups)

    def duplicate(self, element: XmlElement, name: str, lines: dict[str, int], what: str) -> bool:
        if name in lines:
            self.error(element, f"duplicate {what} name '{name}' (first at line {lines[name]})")
            return True
        lines[name] = element.line
        return False

    def connector_refs(self, elements: list[XmlElement], connectors: set[str]) -> tuple[str, ...]:
        refs: list[str] = []
        for ref in elements:
            name = self.convert(ref, _non_empty)
            if isinstance(name, _Invalid):
                continue
            if name not in connectors:
                self.error(ref, self.undefined("connector", name, connectors))
                continue
            refs.append(name)
        return tuple(refs)

    def discovery_ref(self, element: XmlElement, groups: set[str]) -> str | None:
        self.children(element, "discovery-group-ref")
        name = self.attribute(element, "discovery-group-name")
        if name is not None and name not in groups:
            self.error(element, self.undefined("discovery-group", name, groups))
            return None
        return name

    @staticmethod
    def undefined(what: str, name: str, defined: set[str]) -> str:
        message = f"no {what} named '{name}' is defined"
        hint = suggest(name, frozenset(defined))
        if hint:
            message += f"; did you mean '{hint}'?"
        elif not defined:
            message += f" (there are no <{what}>s)"
        return message

    # --- cluster connections -------------------------------------------------------------------

    def read_cluster_connections(
        self, kids: Children, connectors: set[str], groups: set[str]
    ) -> tuple[ClusterConnectionConfig, ...]:
        if "cluster-connections" not in kids:
            return ()
        result: list[ClusterConnectionConfig] = []
        lines: dict[str, int] = {}
        for element in self.children(kids["cluster-connections"][0]).get("cluster-connection", []):
            name = self.attribute(element, "name")
            ckids = self.children(element)
            connection = self.cluster_connection(element, name or "", ckids, connectors, groups)
            if (
                name is None
                or connection is None
                or self.duplicate(element, name, lines, "cluster-connection")
            ):
                continue
            result.append(connection)
        return tuple(result)

    def cluster_connection(
        self,
        element: XmlElement,
        name: str,
        ckids: Children,
        connectors: set[str],
        groups: set[str],
    ) -> ClusterConnectionConfig | None:
        connector_name: str | None = None
        if "connector-ref" not in ckids:
            self.error(
                element, "a cluster-connection needs <connector-ref> (the connector it advertises)"
            )
        else:
            refs = self.connector_refs(ckids["connector-ref"], connectors)
            connector_name = refs[0] if refs else None
        load_balancing = self.scalar(
            ckids,
            "message-load-balancing",
            lambda t: parse_enum(t, MessageLoadBalancing),
            MessageLoadBalancing.ON_DEMAND,
        )
        if "forward-when-no-consumers" in ckids:
            legacy = ckids["forward-when-no-consumers"][0]
            message = "deprecated; use <message-load-balancing> (true = STRICT, false = ON_DEMAND)"
            if "message-load-balancing" in ckids:
                message += "; it takes precedence over <message-load-balancing> here, as in Artemis"
            self.warn(legacy, message)
            forward = self.scalar(ckids, "forward-when-no-consumers", parse_bool, False)
            load_balancing = (
                MessageLoadBalancing.STRICT if forward else MessageLoadBalancing.ON_DEMAND
            )
        static: tuple[str, ...] = ()
        allow_direct = False
        if "static-connectors" in ckids:
            static_element = ckids["static-connectors"][0]
            skids = self.children(static_element)
            allow_direct = bool(
                self.convert_attribute(static_element, "allow-direct-connections-only", parse_bool)
            )
            static = self.connector_refs(skids.get("connector-ref", []), connectors)
            if not skids.get("connector-ref"):
                self.error(static_element, "<static-connectors> needs at least one <connector-ref>")
        discovery: str | None = None
        if "discovery-group-ref" in ckids:
            discovery = self.discovery_ref(ckids["discovery-group-ref"][0], groups)
            if "static-connectors" in ckids:
                self.error(
                    ckids["discovery-group-ref"][0],
                    "use either <static-connectors> or <discovery-group-ref>, not both",
                )
        if connector_name is None:
            return None
        return ClusterConnectionConfig(
            name=name,
            connector_name=connector_name,
            address=self.scalar(ckids, "address", str.strip, ""),
            check_period=self.scalar(ckids, "check-period", checked(int64, at_least(1)), 30_000),
            connection_ttl=self.scalar(
                ckids, "connection-ttl", checked(int64, at_least(1)), 60_000
            ),
            min_large_message_size=self.scalar(
                ckids, "min-large-message-size", checked(bytes32, at_least(1)), 100 * 1024
            ),
            call_timeout=self.scalar(ckids, "call-timeout", checked(int64, at_least(1)), 30_000),
            retry_interval=self.scalar(ckids, "retry-interval", checked(int64, at_least(1)), 500),
            retry_interval_multiplier=self.scalar(
                ckids, "retry-interval-multiplier", _positive_float, 1.0
            ),
            max_retry_interval=self.scalar(
                ckids, "max-retry-interval", checked(int64, at_least(1)), 2000
            ),
            initial_connect_attempts=self.scalar(
                ckids, "initial-connect-attempts", checked(int32, minus_one_or_at_least(0)), -1
            ),
            reconnect_attempts=self.scalar(
                ckids, "reconnect-attempts", checked(int32, minus_one_or_at_least(0)), -1
            ),
            use_duplicate_detection=self.scalar(ckids, "use-duplicate-detection", parse_bool, True),
            message_load_balancing=load_balancing,
            max_hops=self.scalar(ckids, "max-hops", checked(int32, at_least(0)), 1),
            # The manual documents -1 as "no window"; Artemis's parser only takes > 0. Accept both.
            confirmation_window_size=self.scalar(
                ckids,
                "confirmation-window-size",
                checked(bytes32, minus_one_or_at_least(1)),
                1024 * 1024,
            ),
            producer_window_size=self.scalar(
                ckids,
                "producer-window-size",
                checked(bytes32, minus_one_or_at_least(1)),
                1024 * 1024,
            ),
            call_failover_timeout=self.scalar(
                ckids, "call-failover-timeout", checked(int64, minus_one_or_at_least(1)), -1
            ),
            notification_interval=self.scalar(
                ckids, "notification-interval", checked(int64, at_least(1)), 1000
            ),
            notification_attempts=self.scalar(
                ckids, "notification-attempts", checked(int32, at_least(1)), 2
            ),
            static_connectors=static,
            allow_direct_connections_only=allow_direct,
            discovery_group_name=discovery,
        )

    # --- HA policy -----------------------------------------------------------------------------

    def read_ha_policy(
        self, kids: Children, connectors: set[str], groups: set[str]
    ) -> HAPolicyConfig:
        if "ha-policy" not in kids:
            return HAPolicyConfig()
        hkids = self.children(kids["ha-policy"][0])
        chosen = [e for elements in hkids.values() for e in elements]
        if len(chosen) > 1:
            for extra in chosen[1:]:
                self.error(
                    extra, f"<ha-policy> takes one policy; <{chosen[0].tag}> is already given"
                )
        if not chosen:
            return HAPolicyConfig()
        policy = chosen[0]
        if policy.tag in ("replication", "shared-store"):
            self.warn(
                policy,
                f"ha-policy <{policy.tag}> is not implemented; this node runs as primary-only",
            )
            return HAPolicyConfig(policy=HAPolicy(policy.tag))
        if policy.tag == "live-only":
            self.warn(policy, "<live-only> is the old name of <primary-only>")
        pkids = self.children(policy)
        if "scale-down" not in pkids:
            return HAPolicyConfig()
        return HAPolicyConfig(
            scale_down=self.scale_down(pkids["scale-down"][0], connectors, groups)
        )

    def scale_down(
        self, element: XmlElement, connectors: set[str], groups: set[str]
    ) -> ScaleDownConfig:
        skids = self.children(element)
        refs: tuple[str, ...] = ()
        if "connectors" in skids:
            ckids = self.children(skids["connectors"][0], "scale-down/connectors")
            refs = self.connector_refs(ckids.get("connector-ref", []), connectors)
        discovery: str | None = None
        if "discovery-group-ref" in skids:
            discovery = self.discovery_ref(skids["discovery-group-ref"][0], groups)
            if "connectors" in skids:
                self.error(element, "use either <connectors> or <discovery-group-ref>, not both")
        return ScaleDownConfig(
            enabled=self.scalar(skids, "enabled", parse_bool, True),
            group_name=self.optional(skids, "group-name"),
            connectors=refs,
            discovery_group_name=discovery,
            commit_interval=self.scalar(
                skids, "commit-interval", checked(int32, minus_one_or_at_least(1)), -1
            ),
        )

    # --- finishing -----------------------------------------------------------------------------

    def unimplemented_warning(self) -> ConfigProblem | None:
        if not self.unimplemented:
            return None
        items = ", ".join(f"{name} (line {line})" for name, line in self.unimplemented)
        return ConfigProblem(
            self.problems.file,
            self.unimplemented[0][1],
            "core",
            f"valid Artemis settings that artemis-py does not implement and ignores: {items}",
        )


def _value_line(element: XmlElement) -> int:
    """The line of the first non-blank character of ``element``'s text."""
    text = element.text
    stripped = text.lstrip()
    if not stripped or not element.text_line:
        return element.line
    return element.text_line + text[: len(text) - len(stripped)].count("\n")


def _excerpt(text: str, limit: int = 40) -> str:
    first = text.strip().splitlines()[0].strip()
    return repr(first if len(first) <= limit else first[: limit - 3] + "...")


def _prefixes(value: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in value.split(",") if p.strip())


def parse_config(
    text: str | bytes, filename: str = "<string>", *, environ: Mapping[str, str] | None = None
) -> BrokerConfig:
    """Parse broker.xml content. ``filename`` is only used in messages.

    ``environ`` supplies ``${name}`` values (default: ``os.environ``). Raises
    :class:`~artemis_py.exceptions.ConfigError` (a :class:`~.problems.ConfigFileError` with
    ``.problems``) listing every problem found.
    """
    try:
        root = read_xml(text)
    except XmlSyntaxError as exc:
        raise_problems(
            [
                ConfigProblem(
                    filename, exc.line, "", f"malformed XML: {exc.message} (column {exc.column})"
                )
            ]
        )
    reader = _Reader(filename, os.environ if environ is None else environ)
    config = reader.read(root)
    reader.problems.raise_if_errors()
    warnings = list(reader.problems.warnings)
    summary = reader.unimplemented_warning()
    if summary is not None:
        warnings.append(summary)
    warnings.sort(key=lambda p: p.line or 0)
    for warning in warnings:
        logger.warning("%s", warning)
    return dataclasses.replace(config, warnings=tuple(warnings), source=filename)


def load_config(
    path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None
) -> BrokerConfig:
    """Read and parse a broker.xml file (see :func:`parse_config`).

    A missing or unreadable file is a :class:`~artemis_py.exceptions.ConfigError` naming the path.
    """
    filename = os.fspath(path)
    try:
        with open(filename, "rb") as f:
            data = f.read()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise_problems(
            [ConfigProblem(filename, None, "", f"cannot read the configuration file: {reason}")]
        )
    return parse_config(data, filename, environ=environ)


def default_config() -> BrokerConfig:
    """The embedded default: one node, a STOMP acceptor on ``0.0.0.0:61613``, data under
    ``./data``, persistence on, security off; Artemis defaults for everything else."""
    return parse_config(defaults.DEFAULT_BROKER_XML, "<default broker.xml>", environ={})
