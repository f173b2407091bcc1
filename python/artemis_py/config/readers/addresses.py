"""``<address-settings>`` (layered by ``match``) and ``<addresses>`` with their queues."""

from __future__ import annotations

from functools import partial

from ..address_settings import (
    ADDRESS_SETTING_FIELDS,
    ADDRESS_SETTINGS_NOT_IMPLEMENTED,
    AddressSettingEntry,
    AddressSettings,
    AddressSettingsRepository,
)
from ..element_reader import Children, ElementReader, Invalid
from ..enums import RoutingType
from ..model import LAST_VALUE_PROPERTY, AddressConfig, QueueConfig, QueueKind
from ..values import checked, int32, int64, minus_one_or_at_least, parse_bool
from ..wildcards import WildcardSyntax, malformed
from ..xmlreader import XmlElement

__all__ = ["check_match", "read_address_settings", "read_addresses"]


# --- address settings --------------------------------------------------------------------------


def read_address_settings(
    reader: ElementReader, kids: Children, id_cache_size: int, wildcards: WildcardSyntax
) -> AddressSettingsRepository:
    """Every ``<address-setting>``; ``match`` patterns are checked against ``wildcards``."""
    base = AddressSettings(id_cache_size=id_cache_size)
    if "address-settings" not in kids:
        return AddressSettingsRepository(base=base, wildcards=wildcards)
    entries: dict[str, AddressSettingEntry] = {}
    for element in reader.children(kids["address-settings"][0]).get("address-setting", []):
        match = reader.attribute(element, "match")
        setting_kids = reader.children(element)
        if match is None:
            continue
        if not check_match(reader, element, match, wildcards):
            continue
        overrides = _overrides(reader, setting_kids, base)
        if match in entries:
            reader.error(
                element,
                f"another address-setting already matches '{match}' (line {entries[match].line})",
                label="address-setting@match",
            )
            continue
        entries[match] = AddressSettingEntry(match, tuple(overrides.items()), element.line)
    return AddressSettingsRepository(entries.values(), base=base, wildcards=wildcards)


def _overrides(
    reader: ElementReader, setting_kids: Children, base: AddressSettings
) -> dict[str, object]:
    """The fields one ``<address-setting>`` sets, by AddressSettings field name.

    A setting artemis-py does not act on is noted for the start-up warning unless its value
    is the default (``base``), which changes nothing.
    """
    overrides: dict[str, object] = {}
    for name, elements in setting_kids.items():
        spec = ADDRESS_SETTING_FIELDS[name]
        if spec.replaced_by is not None:
            reader.warn(elements[0], f"deprecated; use <{spec.replaced_by}>")
            if spec.replaced_by in setting_kids:
                continue
        value = reader.convert(elements[0], spec.convert)
        if isinstance(value, Invalid):
            continue
        overrides[spec.field] = value
        if name in ADDRESS_SETTINGS_NOT_IMPLEMENTED and value != getattr(base, spec.field):
            reader.not_implemented(name, elements[0].line)
    return overrides


def check_match(
    reader: ElementReader,
    element: XmlElement,
    match: str,
    syntax: WildcardSyntax,
    what: str = "address-setting",
) -> bool:
    """Whether a ``match`` pattern is one Artemis accepts (else reported): wildcards are
    whole words, any-words only last (the same rules for address- and security-settings)."""
    words = syntax.words(match)
    label = f"{what}@match"
    problem = malformed(match, syntax)
    if problem is not None:
        reader.error(element, problem, label=label)
        return False
    if syntax.any_words in words[:-1]:
        # Artemis (Match.verify) only accepts the any-words wildcard at the end.
        reader.error(
            element,
            f"'{syntax.any_words}' may only be the last word of the {what} match, got '{match}'",
            label=label,
        )
        return False
    return True


# --- addresses ---------------------------------------------------------------------------------


def read_addresses(
    reader: ElementReader, kids: Children, wildcards: WildcardSyntax | None
) -> tuple[AddressConfig, ...]:
    """Every ``<address>``; with wildcard routing on (``wildcards``), a name with a wildcard
    character must use it as a whole word."""
    if "addresses" not in kids:
        return ()
    addresses: list[AddressConfig] = []
    address_lines: dict[str, int] = {}
    queue_lines: dict[str, int] = {}
    for element in reader.children(kids["addresses"][0]).get("address", []):
        name = reader.attribute(element, "name")
        akids = reader.children(element)
        if name is None:
            continue
        if name in address_lines:
            reader.error(
                element, f"duplicate address '{name}' (first at line {address_lines[name]})"
            )
            continue
        address_lines[name] = element.line
        problem = None if wildcards is None else malformed(name, wildcards)
        if problem is not None:
            reader.error(element, problem, label="address@name")
            continue
        if not akids:
            reader.error(element, f"address '{name}' needs <anycast> or <multicast> (or both)")
            continue
        routing_types = frozenset(t for t in RoutingType if t.value.lower() in akids)
        queues = _queues(reader, akids, name, queue_lines)
        addresses.append(AddressConfig(name, routing_types, queues))
    return tuple(addresses)


def _queues(
    reader: ElementReader, akids: Children, address: str, queue_lines: dict[str, int]
) -> tuple[QueueConfig, ...]:
    """The queues under an address's ``<anycast>`` and ``<multicast>``; ``queue_lines`` holds
    the queues of every address (names are unique across addresses)."""
    queues: list[QueueConfig] = []
    for routing_type in RoutingType:
        for routing in akids.get(routing_type.value.lower(), []):
            for q in reader.children(routing).get("queue", []):
                queue = _queue(reader, q, address, routing_type)
                if queue is None:
                    continue
                if queue.name in queue_lines:
                    reader.error(
                        q,
                        f"duplicate queue '{queue.name}' (first at line {queue_lines[queue.name]}); "
                        "queue names are unique across all addresses",
                    )
                    continue
                queue_lines[queue.name] = q.line
                queues.append(queue)
    return tuple(queues)


def _queue(
    reader: ElementReader, element: XmlElement, address: str, routing_type: RoutingType
) -> QueueConfig | None:
    name = reader.attribute(element, "name")
    qkids = reader.children(element)
    max_consumers = reader.convert_attribute(
        element, "max-consumers", checked(int32, minus_one_or_at_least(0))
    )
    purge = reader.convert_attribute(element, "purge-on-no-consumers", parse_bool)
    filter_string: str | None = None
    if "filter" in qkids:
        filter_element = qkids["filter"][0]
        reader.children(filter_element)
        filter_string = reader.attribute(filter_element, "string")
    kind = _queue_kind(reader, element)
    if name is None:
        return None
    return QueueConfig(
        name=name,
        address=address,
        routing_type=routing_type,
        filter=filter_string or None,
        durable=reader.scalar(qkids, "durable", parse_bool, True),
        max_consumers=max_consumers,
        purge_on_no_consumers=bool(purge),
        kind=kind,
    )


def _queue_kind(reader: ElementReader, element: XmlElement) -> QueueKind:
    """A ``<queue>``'s dispatch attributes (groups, exclusive, last value, non-destructive,
    ring, when dispatch starts)."""
    attribute = partial(reader.convert_attribute, element)
    last_value_key = attribute("last-value-key", str.strip) or None
    if last_value_key is None and attribute("last-value", parse_bool):
        last_value_key = LAST_VALUE_PROPERTY
    return QueueKind(
        exclusive=attribute("exclusive", parse_bool),
        group_rebalance=attribute("group-rebalance", parse_bool),
        group_rebalance_pause_dispatch=attribute("group-rebalance-pause-dispatch", parse_bool),
        group_buckets=attribute("group-buckets", checked(int32, minus_one_or_at_least(0))),
        group_first_key=attribute("group-first-key", str.strip) or None,
        last_value_key=last_value_key,
        non_destructive=attribute("non-destructive", parse_bool),
        ring_size=attribute("ring-size", checked(int64, minus_one_or_at_least(0))),
        consumers_before_dispatch=attribute(
            "consumers-before-dispatch", checked(int32, minus_one_or_at_least(0))
        ),
        delay_before_dispatch=attribute(
            "delay-before-dispatch", checked(int64, minus_one_or_at_least(0))
        ),
    )
