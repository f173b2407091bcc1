"""Every setting is honoured or named: settings parsed but not acted upon yet are listed, with
their lines, in the one "not implemented" warning at start, unless set to their default."""

from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path

import pytest

from artemis_py.config import (
    AddressSettings,
    BrokerConfig,
    ConfigFileError,
    ConfigProblem,
    load_config,
    parse_config,
)
from artemis_py.config.address_settings import (
    ADDRESS_SETTING_FIELDS,
    ADDRESS_SETTINGS_NOT_IMPLEMENTED,
)

CONFIGS = Path(__file__).parent / "configs"
PACKAGE = Path(__file__).resolve().parents[3] / "python" / "artemis_py"
SUMMARY = "valid Artemis settings that artemis-py does not implement and ignores: "


def core(body: str) -> str:
    """A broker.xml whose <core> holds ``body``, which starts on line 3."""
    return (
        '<configuration xmlns="urn:activemq">\n'
        '<core xmlns="urn:activemq:core">\n'
        f"{body}\n"
        "</core>\n"
        "</configuration>\n"
    )


def address_setting(*children: str) -> str:
    """One ``<address-setting match="#">``; child ``i`` is on line ``5 + i`` of the file."""
    return core(
        "<address-settings>\n"
        '<address-setting match="#">\n'
        + "".join(f"{c}\n" for c in children)
        + "</address-setting>\n"
        "</address-settings>"
    )


def named(config: BrokerConfig) -> list[str]:
    """The ``name (line N)`` items of the summary warning (empty without one)."""
    summaries = [w for w in config.warnings if w.message.startswith(SUMMARY)]
    if not summaries:
        return []
    (summary,) = summaries
    return summary.message.removeprefix(SUMMARY).split(", ")


def summary_warning(config: BrokerConfig) -> ConfigProblem:
    (warning,) = config.warnings
    assert warning.message.startswith(SUMMARY), warning.message
    return warning


# --- address settings --------------------------------------------------------------------------


def test_a_setting_not_implemented_is_named_with_its_line() -> None:
    text = address_setting(
        "<dead-letter-address>DLQ</dead-letter-address>",
        "<default-consumer-window-size>1024</default-consumer-window-size>",
    )
    config = parse_config(text, "b.xml", environ={})
    warning = summary_warning(config)
    assert (warning.file, warning.line, warning.element) == ("b.xml", 6, "core")
    assert named(config) == ["default-consumer-window-size (line 6)"]
    assert config.address_settings_for("a").default_consumer_window_size == 1024  # still parsed


def test_redelivery_settings_are_implemented() -> None:
    text = address_setting(
        "<redelivery-delay>5000</redelivery-delay>",
        "<redelivery-delay-multiplier>2</redelivery-delay-multiplier>",
        "<redelivery-collision-avoidance-factor>0.5</redelivery-collision-avoidance-factor>",
        "<max-redelivery-delay>60000</max-redelivery-delay>",
    )
    config = parse_config(text, environ={})
    assert config.warnings == ()
    assert config.address_settings_for("a").max_redelivery_delay == 60000


def test_paging_settings_are_implemented() -> None:
    text = address_setting(
        "<max-size-bytes>10MiB</max-size-bytes>",
        "<max-size-messages>1000</max-size-messages>",
        "<address-full-policy>BLOCK</address-full-policy>",
        "<page-limit-bytes>1GiB</page-limit-bytes>",
        "<page-full-policy>FAIL</page-full-policy>",
        "<max-read-page-messages>100</max-read-page-messages>",
    )
    assert parse_config(text, environ={}).warnings == ()


def test_a_file_without_unimplemented_settings_gets_no_warning() -> None:
    text = address_setting(
        "<dead-letter-address>DLQ</dead-letter-address>",
        "<max-delivery-attempts>3</max-delivery-attempts>",
        "<redistribution-delay>0</redistribution-delay>",
    )
    assert parse_config(text, environ={}).warnings == ()


def test_a_setting_at_its_default_value_is_not_named() -> None:
    text = address_setting(
        "<max-size-bytes>-1</max-size-bytes>",
        "<address-full-policy>PAGE</address-full-policy>",
        "<page-size-bytes>10MiB</page-size-bytes>",
        "<redelivery-delay>0</redelivery-delay>",
    )
    assert parse_config(text, environ={}).warnings == ()


def test_per_address_id_cache_size_is_honoured_and_not_named() -> None:
    # Client duplicate detection keeps one cache per address of this size
    # (docs/duplicate-detection.md).
    text = core(
        "<id-cache-size>500</id-cache-size>\n<address-settings><address-setting match='#'>"
        "<id-cache-size>9</id-cache-size></address-setting></address-settings>"
    )
    config = parse_config(text, environ={})
    assert config.warnings == ()
    assert config.address_settings_for("orders").id_cache_size == 9


def test_each_address_setting_is_named_where_it_is_set() -> None:
    text = core(
        "<address-settings>\n"
        "<address-setting match='#'><default-consumer-window-size>1024</default-consumer-window-size>"
        "</address-setting>\n"
        "<address-setting match='orders.#'>\n"
        "<default-consumer-window-size>1024</default-consumer-window-size>\n"
        "<max-size-bytes>-1</max-size-bytes>\n"
        "</address-setting>\n"
        "</address-settings>"
    )
    assert named(parse_config(text, environ={})) == [
        "default-consumer-window-size (line 4)",
        "default-consumer-window-size (line 6)",
    ]


def test_full_xml_names_exactly_the_unimplemented_address_settings() -> None:
    # full.xml sets every address setting to a value that is not the default.
    config = load_config(CONFIGS / "full.xml", environ={})
    names = {item.split(" (line ")[0] for item in named(config)}
    in_address_settings = names & set(ADDRESS_SETTING_FIELDS)
    # last-value-queue is the deprecated name of default-last-value-queue, not in full.xml.
    assert in_address_settings == ADDRESS_SETTINGS_NOT_IMPLEMENTED - {"last-value-queue"}


def test_the_unimplemented_set_names_only_address_settings() -> None:
    assert set(ADDRESS_SETTINGS_NOT_IMPLEMENTED) <= set(ADDRESS_SETTING_FIELDS)


def _address_setting_fields_read_by_the_broker() -> set[str]:
    """AddressSettings fields that code outside config/ reads, as ``settings.<field>`` or
    ``address_settings(...).<field>`` (the two ways the broker and transports get them)."""
    pattern = re.compile(r"(?:\bsettings|address_settings\([^()]*\))\.(\w+)")
    fields = {f.name for f in dataclasses.fields(AddressSettings)}
    read: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        if "config" in path.relative_to(PACKAGE).parts:
            continue
        read.update(m for m in pattern.findall(path.read_text()) if m in fields)
    return read


def test_the_unimplemented_set_matches_what_the_broker_reads() -> None:
    # When a setting gets implemented, shrink ADDRESS_SETTINGS_NOT_IMPLEMENTED (and vice versa).
    read = _address_setting_fields_read_by_the_broker()
    field_of = {name: spec.field for name, spec in ADDRESS_SETTING_FIELDS.items()}
    unimplemented = {field_of[name] for name in ADDRESS_SETTINGS_NOT_IMPLEMENTED}
    honoured = set(field_of.values()) - unimplemented
    assert sorted(read & unimplemented) == [], "read by the broker but listed as unimplemented"
    assert sorted(honoured - read) == [], "not read by the broker but not listed as unimplemented"


# --- other sections ----------------------------------------------------------------------------


CONNECTORS = (
    "<connectors>\n"
    "<connector name='self'>tcp://a:61616</connector>\n"
    "<connector name='b'>tcp://b:61616</connector>\n"
    "</connectors>\n"
    "<cluster-password>not-the-default</cluster-password>"
)  # lines 3-7


def test_cluster_connection_settings_nothing_acts_on_are_named() -> None:
    text = core(
        f"{CONNECTORS}\n"
        "<cluster-connections><cluster-connection name='c'>\n"
        "<connector-ref>self</connector-ref>\n"
        "<confirmation-window-size>32K</confirmation-window-size>\n"
        "<use-duplicate-detection>false</use-duplicate-detection>\n"
        "<notification-attempts>2</notification-attempts>\n"
        "<max-hops>2</max-hops>\n"
        "</cluster-connection></cluster-connections>"
    )
    # notification-attempts 2 is the default; max-hops is honoured.
    assert named(parse_config(text, environ={})) == [
        "confirmation-window-size (line 10)",
        "use-duplicate-detection (line 11)",
    ]


def test_broadcast_and_discovery_groups_are_not_named() -> None:
    # Both run (artemis_py.cluster.discovery), and so does a scale-down's discovery-group-ref.
    text = core(
        f"{CONNECTORS}\n"
        "<broadcast-groups><broadcast-group name='bg'>\n"
        "<group-address>231.7.7.7</group-address><group-port>9876</group-port>\n"
        "<connector-ref>self</connector-ref>\n"
        "</broadcast-group></broadcast-groups>\n"
        "<discovery-groups><discovery-group name='dg'>\n"
        "<group-address>231.7.7.7</group-address><group-port>9876</group-port>\n"
        "</discovery-group></discovery-groups>\n"
        "<ha-policy><primary-only><scale-down>\n"
        "<discovery-group-ref discovery-group-name='dg'/>\n"
        "</scale-down></primary-only></ha-policy>"
    )
    config = parse_config(text, environ={})
    assert named(config) == []
    assert config.warnings == ()
    assert config.discovery_group("dg").group_port == 9876


@pytest.mark.parametrize(("value", "expected"), [("false", True), ("true", False)])
def test_create_journal_dirs_are_named_when_false(value: str, expected: bool) -> None:
    text = core(
        f"<create-journal-dir>{value}</create-journal-dir>\n"
        f"<create-bindings-dir>{value}</create-bindings-dir>"
    )
    items = ["create-journal-dir (line 3)", "create-bindings-dir (line 4)"]
    assert named(parse_config(text, environ={})) == (items if expected else [])


def test_journal_type_and_max_io_are_accepted_for_compatibility() -> None:
    text = core("<journal-type>ASYNCIO</journal-type>\n<journal-max-io>4096</journal-max-io>")
    assert parse_config(text, environ={}).warnings == ()


def test_url_parameters_nothing_acts_on_are_named() -> None:
    text = core(
        "<acceptors>\n"
        "<acceptor name='a'>tcp://h:1?stompEnableMessageId=true;sslEnabled=false</acceptor>\n"
        "<acceptor name='b'>tcp://h:2?stompEnableMessageId=false</acceptor>\n"
        "</acceptors>"
    )
    assert named(parse_config(text, environ={})) == ["URL parameter stompEnableMessageId (line 4)"]


def test_tls_acceptor_without_a_key_store_is_an_error() -> None:
    # A TLS acceptor needs its certificate; a connector may trust the system's authorities.
    text = core(
        "<acceptors>\n"
        "<acceptor name='a'>tcp://h:1?sslEnabled=TRUE</acceptor>\n"
        "</acceptors>\n"
        "<connectors><connector name='c'>tcp://h:3?sslEnabled=true</connector></connectors>"
    )
    with pytest.raises(ConfigFileError) as info:
        parse_config(text, "tls.xml", environ={})
    found = [(p.line, p.element) for p in info.value.problems]
    assert found == [(4, "acceptor")]
    assert "keyStorePath" in info.value.problems[0].message


# --- one warning -------------------------------------------------------------------------------


def test_one_warning_lists_everything_in_file_order(caplog: pytest.LogCaptureFixture) -> None:
    text = core(
        "<address-settings><address-setting match='#'>\n"
        "<default-consumer-window-size>1024</default-consumer-window-size>\n"
        "</address-setting></address-settings>\n"
        "<create-journal-dir>false</create-journal-dir>\n"
        "<jmx-domain>x</jmx-domain>"
    )
    with caplog.at_level(logging.WARNING, logger="artemis_py.config"):
        config = parse_config(text, "u.xml", environ={})
    warning = summary_warning(config)
    assert warning.line == 4
    assert named(config) == [
        "default-consumer-window-size (line 4)",
        "create-journal-dir (line 6)",
        "jmx-domain (line 7)",
    ]
    assert [r.getMessage() for r in caplog.records] == [str(warning)]
