"""Address settings: the typed record, the ``<address-setting>`` children, and merging by match.

Theory of operation
-------------------
Each ``<address-setting match="...">`` becomes an :class:`AddressSettingEntry` that records only
the fields it sets. For a concrete address, :class:`AddressSettingsRepository` takes every entry
whose match applies, orders them most specific first (:func:`~.wildcards.precedence_key`:
exact, then ``*`` patterns with literal words winning position by position, then ``#`` patterns
longest first) and, field by field, takes the value from the most specific entry that sets it.
Fields no entry sets get Artemis's default. This is Artemis's ``HierarchicalObjectRepository``
with ``AddressSettings.mergeCopy``: settings are layered, so ``#`` can hold the site-wide
defaults and ``orders.#`` only what differs.

A few Artemis defaults depend on other fields and are computed after merging, from the merged
values (Artemis ``AddressSettings`` getters):

* ``max-redelivery-delay`` = ``redelivery-delay`` x 10;
* ``max-read-page-bytes`` = 2 x ``page-size-bytes``;
* ``prefetch-page-messages`` = ``max-read-page-messages``;
* ``prefetch-page-bytes`` = ``max-read-page-bytes``.

Results are cached per address (an LRU, so a stream of temporary addresses cannot grow it
without bound); the repository is immutable, so the cache never goes stale.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

from .defaults import ID_CACHE_SIZE, MiB
from .enums import (
    AddressFullPolicy,
    DeletionPolicy,
    DiskFullPolicy,
    PageFullPolicy,
    RoutingType,
    SlowConsumerPolicy,
    SlowConsumerThresholdMeasurementUnit,
)
from .values import (
    at_least,
    bytes32,
    bytes64,
    checked,
    int32,
    int64,
    minus_one_or_at_least,
    parse_bool,
    parse_enum,
    parse_float,
    power_of_two,
)
from .wildcards import DEFAULT_WILDCARDS, AddressMatcher, WildcardSyntax, precedence_key

__all__ = [
    "ADDRESS_SETTINGS_NOT_IMPLEMENTED",
    "ADDRESS_SETTING_FIELDS",
    "AddressSettingEntry",
    "AddressSettings",
    "AddressSettingsRepository",
    "SettingSpec",
]


@dataclass(frozen=True, slots=True)
class AddressSettings:
    """The complete settings for one address. The field defaults are Artemis's defaults.

    Times are in milliseconds unless noted; sizes in bytes; ``-1`` means "no limit" / "never" /
    "disabled" where Artemis says so. ``None`` for an address means "none configured".
    """

    # Dead letters and expiry ("Message Redelivery and Undelivered Messages", "Message Expiry").
    dead_letter_address: str | None = None
    auto_create_dead_letter_resources: bool = False
    dead_letter_queue_prefix: str = "DLQ."
    dead_letter_queue_suffix: str = ""
    expiry_address: str | None = None
    auto_create_expiry_resources: bool = False
    expiry_queue_prefix: str = "EXP."
    expiry_queue_suffix: str = ""
    no_expiry: bool = False
    expiry_delay: int = -1
    min_expiry_delay: int = -1
    max_expiry_delay: int = -1
    # Redelivery.
    redelivery_delay: int = 0
    redelivery_delay_multiplier: float = 1.0
    redelivery_collision_avoidance_factor: float = 0.0
    max_redelivery_delay: int = 0  # derived: redelivery_delay * 10 unless set
    max_delivery_attempts: int = 10
    send_to_dla_on_no_route: bool = False
    # Paging and flow control ("Paging").
    max_size_bytes: int = -1
    max_size_messages: int = -1
    max_size_bytes_reject_threshold: int = -1
    page_size_bytes: int = 10 * MiB
    page_limit_bytes: int = -1
    page_limit_messages: int = -1
    page_full_policy: PageFullPolicy | None = None
    max_read_page_messages: int = -1
    max_read_page_bytes: int = 20 * MiB  # derived: 2 * page_size_bytes unless set
    prefetch_page_messages: int = -1  # derived: max_read_page_messages unless set
    prefetch_page_bytes: int = 20 * MiB  # derived: max_read_page_bytes unless set
    address_full_policy: AddressFullPolicy = AddressFullPolicy.PAGE
    disk_full_policy: DiskFullPolicy = DiskFullPolicy.BLOCK
    message_counter_history_day_limit: int = 0
    # Queue defaults for queues created on matching addresses.
    default_last_value_queue: bool = False
    default_last_value_key: str | None = None
    default_non_destructive: bool = False
    default_exclusive_queue: bool = False
    default_group_rebalance: bool = False
    default_group_rebalance_pause_dispatch: bool = False
    default_group_buckets: int = -1
    default_group_first_key: str | None = None
    default_consumers_before_dispatch: int = 0
    default_delay_before_dispatch: int = -1
    default_purge_on_no_consumers: bool = False
    default_max_consumers: int = -1
    default_queue_routing_type: RoutingType = RoutingType.MULTICAST
    default_address_routing_type: RoutingType = RoutingType.MULTICAST
    default_consumer_window_size: int = 1024 * 1024  # CORE consumers
    default_ring_size: int = -1
    # Clustering (Artemis clusters §7): -1 = never redistribute.
    redistribution_delay: int = -1
    # Slow consumers.
    slow_consumer_threshold: int = -1
    slow_consumer_threshold_measurement_unit: SlowConsumerThresholdMeasurementUnit = (
        SlowConsumerThresholdMeasurementUnit.MESSAGES_PER_SECOND
    )
    slow_consumer_policy: SlowConsumerPolicy = SlowConsumerPolicy.NOTIFY
    slow_consumer_check_period: int = 5  # seconds
    # Automatic creation and deletion.
    auto_create_queues: bool = True
    auto_delete_queues: bool = True
    auto_delete_created_queues: bool = False
    auto_delete_queues_delay: int = 0
    auto_delete_queues_message_count: int = 0
    auto_delete_queues_skip_usage_check: bool = False
    config_delete_queues: DeletionPolicy = DeletionPolicy.OFF
    auto_create_addresses: bool = True
    auto_delete_addresses: bool = True
    auto_delete_addresses_delay: int = 0
    auto_delete_addresses_skip_usage_check: bool = False
    config_delete_addresses: DeletionPolicy = DeletionPolicy.OFF
    config_delete_diverts: DeletionPolicy = DeletionPolicy.OFF
    # Management, metrics and miscellany.
    management_browse_page_size: int = 200
    management_message_attribute_size_limit: int = 256
    retroactive_message_count: int = 0
    enable_metrics: bool = True
    enable_ingress_timestamp: bool = False
    id_cache_size: int = ID_CACHE_SIZE  # inherits the broker's id-cache-size
    initial_queue_buffer_size: int = 8192


_FIELDS = frozenset(f.name for f in dataclasses.fields(AddressSettings))

# Computed after merging when no entry sets them, in this order (later ones use earlier ones).
_DERIVED: tuple[tuple[str, Callable[[AddressSettings], int]], ...] = (
    ("max_redelivery_delay", lambda s: s.redelivery_delay * 10),
    ("max_read_page_bytes", lambda s: 2 * s.page_size_bytes),
    ("prefetch_page_messages", lambda s: s.max_read_page_messages),
    ("prefetch_page_bytes", lambda s: s.max_read_page_bytes),
)


# --- the <address-setting> children ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SettingSpec:
    """How one ``<address-setting>`` child is read: target field and text -> value converter.

    ``replaced_by`` marks a deprecated element name (reading it warns and names the new one).
    """

    field: str
    convert: Callable[[str], object]
    replaced_by: str | None = None


def _text(text: str) -> str:
    return text


def _address(text: str) -> str | None:
    return text or None  # an empty <dead-letter-address/> means none


def _factor(text: str) -> float:
    value = parse_float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{value} must be between 0.0 and 1.0")
    return value


def _enum(enum_type: type) -> Callable[[str], object]:
    return lambda text: parse_enum(text, enum_type)


# Validation ranges follow Artemis's FileConfigurationParser.parseAddressSettings.
ADDRESS_SETTING_FIELDS: dict[str, SettingSpec] = {
    "dead-letter-address": SettingSpec("dead_letter_address", _address),
    "auto-create-dead-letter-resources": SettingSpec(
        "auto_create_dead_letter_resources", parse_bool
    ),
    "dead-letter-queue-prefix": SettingSpec("dead_letter_queue_prefix", _text),
    "dead-letter-queue-suffix": SettingSpec("dead_letter_queue_suffix", _text),
    "expiry-address": SettingSpec("expiry_address", _address),
    "auto-create-expiry-resources": SettingSpec("auto_create_expiry_resources", parse_bool),
    "expiry-queue-prefix": SettingSpec("expiry_queue_prefix", _text),
    "expiry-queue-suffix": SettingSpec("expiry_queue_suffix", _text),
    "no-expiry": SettingSpec("no_expiry", parse_bool),
    "expiry-delay": SettingSpec("expiry_delay", int64),
    "min-expiry-delay": SettingSpec("min_expiry_delay", int64),
    "max-expiry-delay": SettingSpec("max_expiry_delay", int64),
    "redelivery-delay": SettingSpec("redelivery_delay", int64),
    "redelivery-delay-multiplier": SettingSpec("redelivery_delay_multiplier", parse_float),
    "redelivery-collision-avoidance-factor": SettingSpec(
        "redelivery_collision_avoidance_factor", _factor
    ),
    "max-redelivery-delay": SettingSpec("max_redelivery_delay", int64),
    "max-delivery-attempts": SettingSpec("max_delivery_attempts", int32),
    "send-to-dla-on-no-route": SettingSpec("send_to_dla_on_no_route", parse_bool),
    "max-size-bytes": SettingSpec("max_size_bytes", checked(bytes64, minus_one_or_at_least(0))),
    "max-size-messages": SettingSpec("max_size_messages", checked(int64, minus_one_or_at_least(0))),
    "max-size-bytes-reject-threshold": SettingSpec("max_size_bytes_reject_threshold", bytes64),
    "page-size-bytes": SettingSpec("page_size_bytes", checked(bytes32, at_least(1))),
    "page-limit-bytes": SettingSpec("page_limit_bytes", checked(bytes64, minus_one_or_at_least(1))),
    "page-limit-messages": SettingSpec(
        "page_limit_messages", checked(int64, minus_one_or_at_least(1))
    ),
    "page-full-policy": SettingSpec("page_full_policy", _enum(PageFullPolicy)),
    "max-read-page-messages": SettingSpec(
        "max_read_page_messages", checked(int32, minus_one_or_at_least(1))
    ),
    "max-read-page-bytes": SettingSpec(
        "max_read_page_bytes", checked(bytes32, minus_one_or_at_least(1))
    ),
    "prefetch-page-messages": SettingSpec(
        "prefetch_page_messages", checked(int32, minus_one_or_at_least(1))
    ),
    "prefetch-page-bytes": SettingSpec(
        "prefetch_page_bytes", checked(bytes32, minus_one_or_at_least(1))
    ),
    "address-full-policy": SettingSpec("address_full_policy", _enum(AddressFullPolicy)),
    "disk-full-policy": SettingSpec("disk_full_policy", _enum(DiskFullPolicy)),
    "message-counter-history-day-limit": SettingSpec("message_counter_history_day_limit", int32),
    "last-value-queue": SettingSpec(
        "default_last_value_queue", parse_bool, replaced_by="default-last-value-queue"
    ),
    "default-last-value-queue": SettingSpec("default_last_value_queue", parse_bool),
    "default-last-value-key": SettingSpec("default_last_value_key", _address),
    "default-non-destructive": SettingSpec("default_non_destructive", parse_bool),
    "default-exclusive-queue": SettingSpec("default_exclusive_queue", parse_bool),
    "default-group-rebalance": SettingSpec("default_group_rebalance", parse_bool),
    "default-group-rebalance-pause-dispatch": SettingSpec(
        "default_group_rebalance_pause_dispatch", parse_bool
    ),
    "default-group-buckets": SettingSpec("default_group_buckets", int32),
    "default-group-first-key": SettingSpec("default_group_first_key", _address),
    "default-consumers-before-dispatch": SettingSpec("default_consumers_before_dispatch", int32),
    "default-delay-before-dispatch": SettingSpec("default_delay_before_dispatch", int64),
    "default-purge-on-no-consumers": SettingSpec("default_purge_on_no_consumers", parse_bool),
    "default-max-consumers": SettingSpec(
        "default_max_consumers", checked(int32, minus_one_or_at_least(0))
    ),
    "default-queue-routing-type": SettingSpec("default_queue_routing_type", _enum(RoutingType)),
    "default-address-routing-type": SettingSpec("default_address_routing_type", _enum(RoutingType)),
    "default-consumer-window-size": SettingSpec("default_consumer_window_size", int32),
    "default-ring-size": SettingSpec("default_ring_size", int64),
    "redistribution-delay": SettingSpec(
        "redistribution_delay", checked(int64, minus_one_or_at_least(0))
    ),
    "slow-consumer-threshold": SettingSpec(
        "slow_consumer_threshold", checked(int64, minus_one_or_at_least(1))
    ),
    "slow-consumer-threshold-measurement-unit": SettingSpec(
        "slow_consumer_threshold_measurement_unit", _enum(SlowConsumerThresholdMeasurementUnit)
    ),
    "slow-consumer-policy": SettingSpec("slow_consumer_policy", _enum(SlowConsumerPolicy)),
    "slow-consumer-check-period": SettingSpec(
        "slow_consumer_check_period", checked(int64, at_least(1))
    ),
    "auto-create-queues": SettingSpec("auto_create_queues", parse_bool),
    "auto-delete-queues": SettingSpec("auto_delete_queues", parse_bool),
    "auto-delete-created-queues": SettingSpec("auto_delete_created_queues", parse_bool),
    "auto-delete-queues-delay": SettingSpec(
        "auto_delete_queues_delay", checked(int64, at_least(0))
    ),
    "auto-delete-queues-message-count": SettingSpec(
        "auto_delete_queues_message_count", checked(int64, minus_one_or_at_least(0))
    ),
    "auto-delete-queues-skip-usage-check": SettingSpec(
        "auto_delete_queues_skip_usage_check", parse_bool
    ),
    "config-delete-queues": SettingSpec("config_delete_queues", _enum(DeletionPolicy)),
    "auto-create-addresses": SettingSpec("auto_create_addresses", parse_bool),
    "auto-delete-addresses": SettingSpec("auto_delete_addresses", parse_bool),
    "auto-delete-addresses-delay": SettingSpec(
        "auto_delete_addresses_delay", checked(int64, at_least(0))
    ),
    "auto-delete-addresses-skip-usage-check": SettingSpec(
        "auto_delete_addresses_skip_usage_check", parse_bool
    ),
    "config-delete-addresses": SettingSpec("config_delete_addresses", _enum(DeletionPolicy)),
    "config-delete-diverts": SettingSpec("config_delete_diverts", _enum(DeletionPolicy)),
    "management-browse-page-size": SettingSpec("management_browse_page_size", int32),
    "management-message-attribute-size-limit": SettingSpec(
        "management_message_attribute_size_limit", int32
    ),
    "retroactive-message-count": SettingSpec(
        "retroactive_message_count", checked(int64, at_least(0))
    ),
    "enable-metrics": SettingSpec("enable_metrics", parse_bool),
    "enable-ingress-timestamp": SettingSpec("enable_ingress_timestamp", parse_bool),
    "id-cache-size": SettingSpec("id_cache_size", checked(int32, at_least(0))),
    "initial-queue-buffer-size": SettingSpec(
        "initial_queue_buffer_size", checked(int32, power_of_two)
    ),
}

# The <address-setting> children artemis-py parses and validates but does not act on yet.
# A file that sets one of them to anything but its Artemis default gets it named, with its
# line, in the one "not implemented" warning at start (a value equal to the default changes
# nothing, so it is not named). Implementing a setting means removing it from here; a test
# (test_config_address_settings.py) checks that every setting outside this set is read by the
# broker and none inside it is. Honoured today: dead letters and expiry (every setting of
# theirs; docs/expiry.md), max-delivery-attempts, redistribution-delay, auto-create-queues,
# auto-create-addresses, auto-deletion (auto-delete-queues, auto-delete-created-queues,
# auto-delete-addresses and their -delay, -message-count and -skip-usage-check settings;
# broker/address_queue_reaper.py), default-queue-routing-type,
# default-address-routing-type, default-max-consumers, default-purge-on-no-consumers.
ADDRESS_SETTINGS_NOT_IMPLEMENTED = frozenset(
    {
        # Paging: prefetching is what max-read-page-* already bound.
        "prefetch-page-messages",
        "prefetch-page-bytes",
        "default-consumer-window-size",  # CORE consumers only
        "retroactive-message-count",
        # Slow consumers.
        "slow-consumer-threshold",
        "slow-consumer-threshold-measurement-unit",
        "slow-consumer-policy",
        "slow-consumer-check-period",
        # Configuration reloading.
        "config-delete-queues",
        "config-delete-addresses",
        "config-delete-diverts",
        # Management, metrics and tuning.
        "message-counter-history-day-limit",
        "management-browse-page-size",
        "management-message-attribute-size-limit",
        "enable-metrics",
        "enable-ingress-timestamp",
        "initial-queue-buffer-size",
    }
)


# --- entries and the repository ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AddressSettingEntry:
    """One ``<address-setting match=...>``: the fields it sets, by ``AddressSettings`` field name."""

    match: str
    overrides: tuple[tuple[str, object], ...] = ()
    line: int | None = None

    def __post_init__(self) -> None:
        unknown = [name for name, _ in self.overrides if name not in _FIELDS]
        if unknown:
            raise ValueError(f"not AddressSettings fields: {', '.join(unknown)}")

    @classmethod
    def of(cls, match: str, *, line: int | None = None, **overrides: object) -> AddressSettingEntry:
        """Convenience constructor: ``AddressSettingEntry.of("orders.#", max_delivery_attempts=3)``."""
        return cls(match, tuple(overrides.items()), line)

    def get(self, field: str) -> object | None:
        for name, value in self.overrides:
            if name == field:
                return value
        return None


class AddressSettingsRepository:
    """All address-setting entries of a broker; answers "what are the settings for X?".

    ``base`` supplies the values no entry sets (Artemis defaults, with the broker's
    ``id-cache-size``).
    """

    __slots__ = ("_base", "_compiled", "_entries", "_resolve_cached", "_syntax")

    def __init__(
        self,
        entries: Iterable[AddressSettingEntry] = (),
        *,
        base: AddressSettings | None = None,
        wildcards: WildcardSyntax = DEFAULT_WILDCARDS,
        cache_size: int = 4096,
    ) -> None:
        self._entries = tuple(entries)
        seen: set[str] = set()
        for entry in self._entries:
            if entry.match in seen:
                raise ValueError(f"two address-setting entries match {entry.match!r}")
            seen.add(entry.match)
        self._base = base if base is not None else AddressSettings()
        self._syntax = wildcards
        self._compiled = tuple((AddressMatcher(e.match, wildcards), e) for e in self._entries)
        self._resolve_cached = lru_cache(maxsize=cache_size)(self._resolve)

    @property
    def entries(self) -> tuple[AddressSettingEntry, ...]:
        return self._entries

    @property
    def base(self) -> AddressSettings:
        return self._base

    def matching(self, address: str) -> tuple[AddressSettingEntry, ...]:
        """The entries that apply to ``address``, most specific first."""
        found = [entry for matcher, entry in self._compiled if matcher.matches(address)]
        found.sort(key=lambda e: precedence_key(e.match, self._syntax))
        return tuple(found)

    def match(self, address: str) -> AddressSettings:
        """The complete, merged settings for ``address`` (cached)."""
        return self._resolve_cached(address)

    def _resolve(self, address: str) -> AddressSettings:
        merged: dict[str, object] = {}
        for entry in self.matching(address):
            for name, value in entry.overrides:
                merged.setdefault(name, value)
        settings = dataclasses.replace(self._base, **merged)  # type: ignore[arg-type]
        for name, derive in _DERIVED:
            if name not in merged:
                settings = dataclasses.replace(settings, **{name: derive(settings)})  # type: ignore[arg-type]
        return settings

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AddressSettingsRepository):
            return NotImplemented
        return (self._entries, self._base, self._syntax) == (
            other._entries,
            other._base,
            other._syntax,
        )

    def __hash__(self) -> int:
        return hash((self._entries, self._base, self._syntax))

    def __repr__(self) -> str:
        matches = ", ".join(repr(e.match) for e in self._entries)
        return f"AddressSettingsRepository([{matches}])"
