"""Address settings: Artemis defaults, layering by match specificity, derived defaults, caching."""

from __future__ import annotations

import dataclasses

import pytest

from artemis_py.config import (
    AddressFullPolicy,
    AddressSettingEntry,
    AddressSettings,
    AddressSettingsRepository,
    RoutingType,
    parse_config,
)
from artemis_py.config.address_settings import ADDRESS_SETTING_FIELDS
from artemis_py.config.vocabulary import VOCABULARIES


def test_defaults_are_artemis_defaults() -> None:
    s = AddressSettingsRepository().match("any.address")
    # Artemis AddressSettings / ActiveMQDefaultConfiguration / address-settings manual.
    assert s.dead_letter_address is None
    assert s.expiry_address is None
    assert s.expiry_delay == -1
    assert s.redelivery_delay == 0
    assert s.redelivery_delay_multiplier == 1.0
    assert s.max_redelivery_delay == 0  # redelivery-delay x 10
    assert s.max_delivery_attempts == 10
    assert s.max_size_bytes == -1
    assert s.max_size_messages == -1
    assert s.page_size_bytes == 10 * 1024 * 1024
    assert s.max_read_page_bytes == 20 * 1024 * 1024  # 2 x page-size-bytes
    assert s.address_full_policy is AddressFullPolicy.PAGE
    assert s.redistribution_delay == -1
    assert s.send_to_dla_on_no_route is False
    assert s.auto_create_queues is True
    assert s.auto_delete_queues is True
    assert s.auto_delete_created_queues is False
    assert s.auto_create_addresses is True
    assert s.auto_delete_addresses is True
    assert s.default_address_routing_type is RoutingType.MULTICAST
    assert s.default_queue_routing_type is RoutingType.MULTICAST
    assert s.default_purge_on_no_consumers is False
    assert s.default_max_consumers == -1
    assert s.default_consumer_window_size == 1048576
    assert s.default_exclusive_queue is False
    assert s.default_last_value_queue is False
    assert s.dead_letter_queue_prefix == "DLQ."
    assert s.expiry_queue_prefix == "EXP."
    assert s.slow_consumer_check_period == 5
    assert s.id_cache_size == 20000


def test_parse_table_covers_exactly_the_implemented_vocabulary() -> None:
    assert set(ADDRESS_SETTING_FIELDS) == set(VOCABULARIES["address-setting"].implemented)
    fields = {f.name for f in dataclasses.fields(AddressSettings)}
    assert {spec.field for spec in ADDRESS_SETTING_FIELDS.values()} == fields


LAYERED = """\
<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">
  <address-settings>
    <address-setting match="#">
      <dead-letter-address>DLQ</dead-letter-address>
      <max-delivery-attempts>10</max-delivery-attempts>
      <redelivery-delay>1000</redelivery-delay>
      <address-full-policy>PAGE</address-full-policy>
    </address-setting>
    <address-setting match="orders.#">
      <max-delivery-attempts>3</max-delivery-attempts>
      <expiry-address>OrdersExpiry</expiry-address>
    </address-setting>
    <address-setting match="orders.*">
      <redelivery-delay>50</redelivery-delay>
      <max-delivery-attempts>4</max-delivery-attempts>
    </address-setting>
    <address-setting match="*.eu">
      <max-delivery-attempts>6</max-delivery-attempts>
      <address-full-policy>BLOCK</address-full-policy>
      <dead-letter-address>EuDLQ</dead-letter-address>
    </address-setting>
    <address-setting match="orders.eu">
      <max-delivery-attempts>1</max-delivery-attempts>
    </address-setting>
  </address-settings>
</core></configuration>
"""


@pytest.fixture(scope="module")
def layered() -> AddressSettingsRepository:
    return parse_config(LAYERED, "layered.xml", environ={}).address_settings


def test_exact_match_wins_and_others_fill_in(layered: AddressSettingsRepository) -> None:
    s = layered.match("orders.eu")
    assert s.max_delivery_attempts == 1  # orders.eu (exact)
    assert s.redelivery_delay == 50  # orders.* beats *.eu and #
    assert s.max_redelivery_delay == 500  # derived from the merged redelivery-delay
    assert s.address_full_policy is AddressFullPolicy.BLOCK  # only *.eu sets it below exact
    assert s.dead_letter_address == "EuDLQ"  # *.eu beats #
    assert s.expiry_address == "OrdersExpiry"  # orders.#: the only one setting it
    assert s.page_size_bytes == 10 * 1024 * 1024  # nobody: Artemis default


def test_star_literal_position_decides(layered: AddressSettingsRepository) -> None:
    s = layered.match("orders.us")
    assert s.max_delivery_attempts == 4  # orders.* (no *.eu, no exact)
    assert s.dead_letter_address == "DLQ"  # from #
    assert s.address_full_policy is AddressFullPolicy.PAGE


def test_hash_patterns_longest_first(layered: AddressSettingsRepository) -> None:
    s = layered.match("orders.eu.north")
    assert s.max_delivery_attempts == 3  # orders.# (orders.* and *.eu need two words)
    assert s.redelivery_delay == 1000  # from #
    assert s.max_redelivery_delay == 10_000


def test_hash_matches_zero_words(layered: AddressSettingsRepository) -> None:
    assert layered.match("orders").max_delivery_attempts == 3  # orders.# matches "orders"


def test_unrelated_address_gets_catch_all(layered: AddressSettingsRepository) -> None:
    s = layered.match("billing")
    assert (s.max_delivery_attempts, s.dead_letter_address, s.expiry_address) == (10, "DLQ", None)


def test_matching_lists_most_specific_first(layered: AddressSettingsRepository) -> None:
    assert [e.match for e in layered.matching("orders.eu")] == [
        "orders.eu",
        "orders.*",
        "*.eu",
        "orders.#",
        "#",
    ]


def test_explicit_max_redelivery_delay_is_not_derived() -> None:
    repo = AddressSettingsRepository(
        [AddressSettingEntry.of("#", redelivery_delay=100, max_redelivery_delay=150)]
    )
    assert repo.match("x").max_redelivery_delay == 150


def test_derived_paging_defaults_follow_merged_values() -> None:
    repo = AddressSettingsRepository(
        [
            AddressSettingEntry.of("#", page_size_bytes=1024),
            AddressSettingEntry.of("a", max_read_page_messages=7),
        ]
    )
    s = repo.match("a")
    assert (s.max_read_page_bytes, s.prefetch_page_bytes, s.prefetch_page_messages) == (
        2048,
        2048,
        7,
    )


def test_result_is_cached_per_address(layered: AddressSettingsRepository) -> None:
    assert layered.match("orders.eu") is layered.match("orders.eu")
    assert layered.match("orders.eu") is not layered.match("orders.us")


def test_config_accessor(layered: AddressSettingsRepository) -> None:
    config = parse_config(LAYERED, "layered.xml", environ={})
    assert config.address_settings_for("orders.eu").max_delivery_attempts == 1


def test_broker_id_cache_size_is_inherited() -> None:
    config = parse_config(
        '<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">'
        "<id-cache-size>77</id-cache-size>"
        '<address-settings><address-setting match="x"><id-cache-size>5</id-cache-size>'
        "</address-setting></address-settings></core></configuration>",
        environ={},
    )
    assert config.address_settings_for("y").id_cache_size == 77
    assert config.address_settings_for("x").id_cache_size == 5


def test_entry_rejects_unknown_fields() -> None:
    with pytest.raises(ValueError, match="max_delivery_attemps"):
        AddressSettingEntry.of("#", max_delivery_attemps=3)


def test_repository_rejects_duplicate_matches() -> None:
    with pytest.raises(ValueError, match="'#'"):
        AddressSettingsRepository([AddressSettingEntry.of("#"), AddressSettingEntry.of("#")])


def test_custom_wildcard_syntax_applies_to_address_settings() -> None:
    config = parse_config(
        '<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">'
        "<wildcard-addresses><delimiter>/</delimiter><any-words>&gt;</any-words>"
        "<single-word>+</single-word></wildcard-addresses>"
        '<address-settings><address-setting match="orders/&gt;">'
        "<max-delivery-attempts>2</max-delivery-attempts></address-setting>"
        "</address-settings></core></configuration>",
        environ={},
    )
    assert config.address_settings_for("orders/eu/north").max_delivery_attempts == 2
    assert config.address_settings_for("orders.eu").max_delivery_attempts == 10
