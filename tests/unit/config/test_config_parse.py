"""Reading broker.xml: defaults, every element, substitution, errors with lines, warnings."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from artemis_py.config import (
    AddressFullPolicy,
    BrokerConfig,
    ConfigFileError,
    ConfigProblem,
    DeletionPolicy,
    DiskFullPolicy,
    HAPolicy,
    JournalType,
    MessageLoadBalancing,
    PageFullPolicy,
    RoutingType,
    SlowConsumerPolicy,
    SlowConsumerThresholdMeasurementUnit,
    default_config,
    load_config,
    parse_config,
)
from artemis_py.exceptions import ConfigError

CONFIGS = Path(__file__).parent / "configs"
REPO = Path(__file__).resolve().parents[3]


def core(body: str) -> str:
    """A broker.xml whose <core> holds ``body``; <core> opens on line 2, body starts on line 3."""
    return (
        '<configuration xmlns="urn:activemq">\n'
        '<core xmlns="urn:activemq:core">\n'
        f"{body}\n"
        "</core>\n"
        "</configuration>\n"
    )


def problems_of(text: str, **kwargs: object) -> list[ConfigProblem]:
    with pytest.raises(ConfigFileError) as info:
        parse_config(text, "broker.xml", environ=kwargs.pop("environ", {}))  # type: ignore[arg-type]
    return list(info.value.problems)


def where(problems: list[ConfigProblem]) -> list[tuple[int | None, str]]:
    return [(p.line, p.element) for p in problems]


def line_of(text: str, needle: str) -> int:
    index = text.index(needle)
    return text.count("\n", 0, index) + 1


# --- defaults -----------------------------------------------------------------------------------


def test_empty_core_has_artemis_defaults() -> None:
    config = parse_config(core(""), environ={})
    assert config.name == "localhost"
    assert config.persistence_enabled is True
    assert config.security_enabled is True  # Artemis's default, unlike default_config()
    j = config.journal
    assert j.type is JournalType.ASYNCIO
    assert (j.directory, j.bindings_directory) == ("data/journal", "data/bindings")
    assert (config.paging_directory, config.large_messages_directory) == (
        "data/paging",
        "data/largemessages",
    )
    assert (j.create_directory, j.create_bindings_directory) == (True, True)
    assert j.file_size == 10 * 1024 * 1024
    assert (j.min_files, j.pool_files) == (2, -1)
    assert j.buffer_size == 490 * 1024
    assert j.buffer_timeout == 3_333_333  # Artemis's NIO value (ASYNCIO would be 500000)
    assert j.max_io == 1  # Artemis's NIO value (ASYNCIO would be 4096)
    assert (j.datasync, j.sync_transactional, j.sync_non_transactional) == (True, True, True)
    assert (j.compact_min_files, j.compact_percentage) == (10, 30)
    assert (config.id_cache_size, config.persist_id_cache) == (20000, True)
    assert config.cluster_user == "ACTIVEMQ.CLUSTER.ADMIN.USER"
    assert config.cluster_password == "CHANGE ME!!"
    assert config.connection_ttl_override == -1
    assert config.acceptors == ()
    assert config.connectors == ()
    assert config.addresses == ()
    assert config.cluster_connections == ()
    assert config.ha_policy.policy is HAPolicy.PRIMARY_ONLY
    assert config.ha_policy.scale_down is None
    assert config.warnings == ()


def test_default_config() -> None:
    config = default_config()
    assert config.name == "localhost"
    assert config.persistence_enabled is True
    assert config.security_enabled is False
    assert config.journal.directory == "data/journal"
    assert config.paging_directory == "data/paging"
    (acceptor,) = config.acceptors
    assert acceptor.url == (
        "tcp://0.0.0.0:61613?protocols=STOMP;anycastPrefix=/queue/;multicastPrefix=/topic/"
    )
    assert (acceptor.host, acceptor.port) == ("0.0.0.0", 61613)
    assert acceptor.protocols == frozenset({"STOMP"})
    assert acceptor.accepts("stomp")
    assert not acceptor.accepts("AMQP")
    assert acceptor.anycast_prefixes == ("/queue/",)
    assert acceptor.multicast_prefixes == ("/topic/",)
    assert acceptor.connection_ttl == 60000
    assert acceptor.connection_ttl_min == 1000
    assert acceptor.connection_ttl_max == 2**63 - 1
    assert acceptor.heart_beat_to_connection_ttl_modifier == 2.0
    assert acceptor.stomp_consumer_window_size == 10240
    assert acceptor.stomp_max_headers == 1000
    assert acceptor.stomp_max_header_length == 64 * 1024
    assert acceptor.stomp_max_body_size == 100 * 1024 * 1024
    assert config.warnings == ()


def test_etc_broker_xml_parses_without_problems() -> None:
    config = load_config(REPO / "etc" / "broker.xml", environ={})
    assert config.warnings == ()
    assert config.security_enabled is False
    assert config.journal.directory == "data/journal"
    stomp = config.acceptor("stomp")
    assert (stomp.port, stomp.protocols) == (61613, frozenset({"STOMP"}))
    assert config.acceptor("artemis").port == 61616
    assert [a.name for a in config.addresses] == ["DLQ", "ExpiryQueue"]
    settings = config.address_settings_for("anything.at.all")
    assert (settings.dead_letter_address, settings.expiry_address) == ("DLQ", "ExpiryQueue")


@pytest.mark.parametrize(
    "path",
    sorted(
        str(p.relative_to(REPO))
        for p in (REPO / "etc").rglob("*.xml")
        if not p.name.startswith("jgroups")  # a JGroups stack file, read through a broker.xml
    ),
)
def test_every_sample_config_parses_without_problems(path: str) -> None:
    config = load_config(REPO / path, environ={"ARTEMIS_CLUSTER_PASSWORD": "s3cret"})
    assert config.warnings == ()


def test_the_scaling_sample_scales_down_and_redistributes() -> None:
    config = load_config(
        REPO / "etc" / "cluster" / "scaling" / "node3.xml",
        environ={"ARTEMIS_CLUSTER_PASSWORD": "s3cret"},
    )
    scale_down = config.ha_policy.scale_down
    assert scale_down is not None
    assert scale_down.enabled
    assert scale_down.connectors == ()
    assert config.cluster_connections[0].static_connectors == ("node1", "node2")
    assert config.address_settings_for("orders").redistribution_delay == 5000


def test_etc_broker_xml_takes_environment() -> None:
    config = load_config(
        REPO / "etc" / "broker.xml",
        environ={"ARTEMIS_DATA": "/srv/b", "STOMP_PORT": "1234", "ARTEMIS_NAME": "n1"},
    )
    assert config.journal.directory == "/srv/b/journal"
    assert config.acceptor("stomp").port == 1234
    assert config.name == "n1"


# --- every element ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def full() -> BrokerConfig:
    return load_config(CONFIGS / "full.xml", environ={})


def test_full_core_and_journal(full: BrokerConfig) -> None:
    # Every value in full.xml differs from the default, so the settings artemis-py parses but
    # does not act on are named in the one summary warning (test_config_unimplemented.py).
    (warning,) = full.warnings
    assert warning.element == "core"
    assert "does not implement" in warning.message
    assert full.name == "node-a"
    assert full.persistence_enabled is False
    assert full.security_enabled is False
    j = full.journal
    assert j.type is JournalType.MAPPED
    assert (j.directory, j.bindings_directory) == ("/var/lib/a/journal", "/var/lib/a/bindings")
    assert (full.paging_directory, full.large_messages_directory) == (
        "/var/lib/a/paging",
        "/var/lib/a/large",
    )
    assert (j.create_directory, j.create_bindings_directory) == (False, False)
    assert (j.file_size, j.min_files, j.pool_files) == (20 * 1024**2, 4, 8)
    assert (j.buffer_size, j.buffer_timeout, j.max_io) == (1024**2, 1_000_000, 16)
    assert (j.datasync, j.sync_transactional, j.sync_non_transactional) == (False, False, False)
    assert (j.compact_min_files, j.compact_percentage) == (3, 50)
    assert (full.id_cache_size, full.persist_id_cache) == (5000, False)
    assert full.connection_ttl_override == 90000
    assert (full.cluster_user, full.cluster_password) == ("cluster-admin", "s3cret")
    assert full.wildcard_routing_enabled is False
    assert "s3cret" not in repr(full)


def test_full_acceptors_and_connectors(full: BrokerConfig) -> None:
    stomp = full.acceptor("stomp")
    assert stomp.params["tcpNoDelay"] == "true"  # unknown-to-us params are kept
    assert stomp.params["multicastPrefix"] == "/topic/,/t/"
    assert stomp.anycast_prefixes == ("/queue/",)
    assert stomp.multicast_prefixes == ("/topic/", "/t/")
    assert (stomp.connection_ttl, stomp.connection_ttl_min, stomp.connection_ttl_max) == (
        30000,
        500,
        120000,
    )
    assert stomp.heart_beat_to_connection_ttl_modifier == 1.5
    assert stomp.stomp_consumer_window_size == -1
    assert stomp.stomp_enable_message_id is True
    assert stomp.stomp_max_body_size == 1024**2
    assert stomp.stomp_max_headers == 50
    assert stomp.stomp_max_header_length == 4096
    assert stomp.stomp_max_headers_size == 256 * 1024
    assert (stomp.tcp_send_buffer_size, stomp.tcp_receive_buffer_size) == (-1, 65536)
    core_acceptor = full.acceptor("artemis")
    assert core_acceptor.tcp_send_buffer_size == core_acceptor.tcp_receive_buffer_size == 1024**2
    assert (core_acceptor.host, core_acceptor.port, core_acceptor.protocols) == ("::1", 61616, None)
    assert core_acceptor.accepts("CORE")
    assert core_acceptor.accepts("STOMP")
    assert core_acceptor.connection_ttl == 90000  # from connection-ttl-override
    assert [(c.name, c.host, c.port) for c in full.connectors] == [
        ("self", "node-a", 61616),
        ("b", "node-b", 61617),
        ("c", "node-c", 61616),
    ]
    assert full.connector("self").params == {"tcpNoDelay": "true"}


def test_full_groups(full: BrokerConfig) -> None:
    bg = full.broadcast_group("bg")
    assert (bg.group_address, bg.group_port, bg.broadcast_period) == ("231.7.7.7", 9876, 5000)
    assert (bg.local_bind_address, bg.local_bind_port, bg.connectors) == (
        "10.0.0.1",
        9875,
        ("self",),
    )
    dg = full.discovery_group("dg")
    assert (dg.group_address, dg.group_port) == ("231.7.7.7", 9876)
    assert (dg.refresh_timeout, dg.initial_wait_timeout, dg.local_bind_port) == (20000, 3000, -1)


def test_full_cluster_connections(full: BrokerConfig) -> None:
    cc = full.cluster_connection("static-cluster")
    assert cc.connector_name == "self"
    assert cc.address == "orders,!orders.internal"
    assert (cc.check_period, cc.connection_ttl, cc.min_large_message_size) == (1000, 5000, 50000)
    assert (cc.call_timeout, cc.retry_interval, cc.retry_interval_multiplier) == (6000, 700, 1.5)
    assert (cc.max_retry_interval, cc.initial_connect_attempts, cc.reconnect_attempts) == (
        9000,
        5,
        7,
    )
    assert cc.use_duplicate_detection is False
    assert cc.message_load_balancing is MessageLoadBalancing.OFF_WITH_REDISTRIBUTION
    assert (cc.max_hops, cc.confirmation_window_size, cc.producer_window_size) == (2, 32768, -1)
    assert (cc.call_failover_timeout, cc.notification_interval, cc.notification_attempts) == (
        30000,
        1500,
        4,
    )
    assert cc.static_connectors == ("b", "c")
    assert cc.allow_direct_connections_only is True
    assert cc.discovery_group_name is None
    discovered = full.cluster_connection("discovered")
    assert discovered.discovery_group_name == "dg"
    assert discovered.static_connectors == ()
    assert discovered.address == "audit"  # not overlapping static-cluster's: no warning


def test_full_ha_policy(full: BrokerConfig) -> None:
    assert full.ha_policy.policy is HAPolicy.PRIMARY_ONLY
    sd = full.ha_policy.scale_down
    assert sd is not None
    assert (sd.enabled, sd.group_name, sd.connectors, sd.commit_interval) == (
        False,
        "east",
        ("b", "c"),
        100,
    )
    assert sd.discovery_group_name is None


def test_full_address_settings(full: BrokerConfig) -> None:
    s = full.address_settings_for("anything")
    assert (s.dead_letter_address, s.expiry_address) == ("DLQ", "ExpiryQueue")
    assert s.auto_create_dead_letter_resources
    assert s.auto_create_expiry_resources
    assert (s.dead_letter_queue_prefix, s.dead_letter_queue_suffix) == ("D.", ".d")
    assert (s.expiry_queue_prefix, s.expiry_queue_suffix) == ("E.", ".e")
    assert s.no_expiry is True
    assert (s.expiry_delay, s.min_expiry_delay, s.max_expiry_delay) == (1000, 10, 20000)
    assert (s.redelivery_delay, s.redelivery_delay_multiplier) == (100, 2.0)
    assert (s.redelivery_collision_avoidance_factor, s.max_redelivery_delay) == (0.5, 60000)
    assert (s.max_delivery_attempts, s.send_to_dla_on_no_route) == (5, True)
    assert (s.max_size_bytes, s.max_size_messages) == (100 * 1024**2, 10000)
    assert s.max_size_bytes_reject_threshold == 200 * 1024**2
    assert (s.page_size_bytes, s.page_limit_bytes, s.page_limit_messages) == (
        1024**2,
        1024**3,
        1_000_000,
    )
    assert s.page_full_policy is PageFullPolicy.FAIL
    assert (s.max_read_page_messages, s.max_read_page_bytes) == (500, 4 * 1024**2)
    assert (s.prefetch_page_messages, s.prefetch_page_bytes) == (100, 1024**2)
    assert s.address_full_policy is AddressFullPolicy.BLOCK
    assert s.disk_full_policy is DiskFullPolicy.FAIL
    assert s.message_counter_history_day_limit == 7
    assert (s.default_last_value_queue, s.default_last_value_key) == (True, "lvq")
    assert s.default_non_destructive
    assert s.default_exclusive_queue
    assert s.default_group_rebalance
    assert s.default_group_rebalance_pause_dispatch
    assert (s.default_group_buckets, s.default_group_first_key) == (16, "first")
    assert (s.default_consumers_before_dispatch, s.default_delay_before_dispatch) == (2, 500)
    assert (s.default_purge_on_no_consumers, s.default_max_consumers) == (True, 3)
    assert s.default_queue_routing_type is RoutingType.ANYCAST
    assert s.default_address_routing_type is RoutingType.ANYCAST
    assert (s.default_consumer_window_size, s.default_ring_size) == (0, 100)
    assert s.redistribution_delay == 0
    assert s.slow_consumer_threshold == 10
    assert (
        s.slow_consumer_threshold_measurement_unit
        is SlowConsumerThresholdMeasurementUnit.MESSAGES_PER_MINUTE
    )
    assert (s.slow_consumer_policy, s.slow_consumer_check_period) == (SlowConsumerPolicy.KILL, 30)
    assert (s.auto_create_queues, s.auto_delete_queues, s.auto_delete_created_queues) == (
        False,
        False,
        True,
    )
    assert (s.auto_delete_queues_delay, s.auto_delete_queues_message_count) == (1000, -1)
    assert s.auto_delete_queues_skip_usage_check is True
    assert (s.auto_create_addresses, s.auto_delete_addresses, s.auto_delete_addresses_delay) == (
        False,
        False,
        2000,
    )
    assert s.auto_delete_addresses_skip_usage_check is True
    assert s.config_delete_queues is DeletionPolicy.FORCE
    assert s.config_delete_addresses is DeletionPolicy.FORCE
    assert s.config_delete_diverts is DeletionPolicy.FORCE
    assert (s.management_browse_page_size, s.management_message_attribute_size_limit) == (50, 1024)
    assert (s.retroactive_message_count, s.enable_metrics, s.enable_ingress_timestamp) == (
        3,
        False,
        True,
    )
    assert (s.id_cache_size, s.initial_queue_buffer_size) == (100, 1024)


def test_full_addresses(full: BrokerConfig) -> None:
    assert [a.name for a in full.addresses] == ["DLQ", "ExpiryQueue", "orders"]
    orders = full.address("orders")
    assert orders.routing_types == {RoutingType.ANYCAST, RoutingType.MULTICAST}
    q, audit = orders.queues
    assert (q.name, q.address, q.routing_type) == ("orders", "orders", RoutingType.ANYCAST)
    assert (q.filter, q.durable, q.max_consumers, q.purge_on_no_consumers) == (
        "region = 'eu'",
        False,
        4,
        True,
    )
    assert (audit.name, audit.routing_type, audit.durable, audit.max_consumers) == (
        "orders.audit",
        RoutingType.MULTICAST,
        True,
        None,
    )
    assert audit.purge_on_no_consumers is False
    assert [q.name for q in full.queues()] == ["DLQ", "ExpiryQueue", "orders", "orders.audit"]


def test_lookup_of_missing_name_is_key_error(full: BrokerConfig) -> None:
    with pytest.raises(KeyError, match="no connector named 'zzz'"):
        full.connector("zzz")


# --- substitution -------------------------------------------------------------------------------


def test_substitution_in_text_and_attributes() -> None:
    text = core(
        "<name>${NODE}</name>\n"
        "<journal-directory>${DATA:data}/journal</journal-directory>\n"
        "<journal-file-size>${SIZE:1MiB}</journal-file-size>\n"
        '<acceptors><acceptor name="${ACC:stomp}">tcp://${HOST:0.0.0.0}:${PORT}</acceptor></acceptors>'
    )
    config = parse_config(text, environ={"NODE": "b1", "PORT": "6000"})
    assert config.name == "b1"
    assert config.journal.directory == "data/journal"
    assert config.journal.file_size == 1024 * 1024
    assert (config.acceptors[0].name, config.acceptors[0].host, config.acceptors[0].port) == (
        "stomp",
        "0.0.0.0",
        6000,
    )


def test_substituted_value_is_validated() -> None:
    text = core("<journal-min-files>${MIN}</journal-min-files>")
    (problem,) = problems_of(text, environ={"MIN": "many"})
    assert (problem.line, problem.element) == (3, "journal-min-files")
    assert "'many'" in problem.message


def test_unset_variables_are_errors_with_their_own_lines() -> None:
    text = core(
        "<name>${NODE_NAME}</name>\n"
        "<journal-directory>\n"
        "  ${DATA_DIR}/journal\n"
        "</journal-directory>\n"
        '<acceptors><acceptor name="${ACCEPTOR}">tcp://h:1</acceptor></acceptors>'
    )
    problems = problems_of(text)
    assert where(problems) == [(3, "name"), (5, "journal-directory"), (7, "acceptor@name")]
    assert "'NODE_NAME'" in problems[0].message
    assert "'DATA_DIR'" in problems[1].message
    assert "'ACCEPTOR'" in problems[2].message


def test_unset_variable_in_ignored_element_is_not_an_error() -> None:
    config = parse_config(core("<jmx-domain>${NOT_SET}</jmx-domain>"), environ={})
    assert len(config.warnings) == 1


def test_container_text_that_substitutes_to_nothing_is_fine() -> None:
    # Artemis substitutes the raw file, so "${jdbc}" between elements is legal when empty.
    config = parse_config(core("${EXTRA:}\n<name>x</name>"), environ={})
    assert config.name == "x"


# --- errors -------------------------------------------------------------------------------------

MANY_ERRORS = core(
    """<name>ok</name>
<journal-min-files>zero</journal-min-files>
<journal-file-size>10 MB B</journal-file-size>
<persistence-enabled>yes</persistence-enabled>
<journal-compact-percentage>150</journal-compact-percentage>
<jurnal-type>NIO</jurnal-type>
<journal-type>nio</journal-type>
<acceptors>
  <acceptor name="a">tcp://h:99999</acceptor>
  <acceptor>tcp://h:1</acceptor>
</acceptors>
<address-settings>
  <address-setting match="#">
    <max-delivery-attempts>three</max-delivery-attempts>
    <address-full-policy>SPILL</address-full-policy>
  </address-setting>
</address-settings>
<persistence-enabled>true</persistence-enabled>"""
)


def test_all_errors_reported_at_once_with_lines_and_elements() -> None:
    problems = problems_of(MANY_ERRORS)
    assert where(problems) == [
        (4, "journal-min-files"),
        (5, "journal-file-size"),
        (6, "persistence-enabled"),
        (7, "journal-compact-percentage"),
        (8, "jurnal-type"),
        (9, "journal-type"),
        (11, "acceptor"),
        (12, "acceptor@name"),
        (16, "max-delivery-attempts"),
        (17, "address-full-policy"),
        (20, "persistence-enabled"),
    ]
    messages = [p.message for p in problems]
    assert "expected an integer, got 'zero'" in messages[0]
    assert "byte size" in messages[1]
    assert "expected true or false, got 'yes'" in messages[2]
    assert "150 must be between 0 and 100" in messages[3]
    assert "did you mean <journal-type>?" in messages[4]
    assert "upper case: NIO" in messages[5]
    assert "port must be a number from 0 to 65535" in messages[6]
    assert "missing required attribute 'name'" in messages[7]
    assert "may appear only once in <core> (first at line 6)" in messages[10]


def test_error_message_lists_file_line_element() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(MANY_ERRORS, "etc/node.xml", environ={})
    text = str(info.value)
    assert text.splitlines()[0] == "11 configuration problems:"
    assert (
        "  etc/node.xml:4: <journal-min-files>: expected an integer, got 'zero'"
        in text.splitlines()
    )


def test_value_error_points_at_the_value_line() -> None:
    text = core("<journal-min-files>\n\n   -3\n</journal-min-files>")
    (problem,) = problems_of(text)
    assert problem.line == 5
    assert "-3 must be at least 1" in problem.message


def test_unknown_element_suggests_closest_name() -> None:
    problems = problems_of(core("<persistance-enabled>true</persistance-enabled>"))
    assert where(problems) == [(3, "persistance-enabled")]
    assert "did you mean <persistence-enabled>?" in problems[0].message


def test_unknown_element_without_close_name() -> None:
    (problem,) = problems_of(core("<frobnicate/>"))
    assert problem.message == "unknown element: not an Artemis <core> element"


def test_unknown_element_inside_cluster_connection_suggests_its_vocabulary() -> None:
    text = core(
        "<connectors><connector name='c'>tcp://h:1</connector></connectors>\n"
        "<cluster-connections><cluster-connection name='x'>\n"
        "<connector-ref>c</connector-ref>\n"
        "<max-hop>2</max-hop>\n"
        "</cluster-connection></cluster-connections>"
    )
    (problem,) = problems_of(text)
    assert (problem.line, problem.element) == (6, "max-hop")
    assert "did you mean <max-hops>?" in problem.message


def test_unknown_attribute_suggests_closest() -> None:
    text = core("<address-settings><address-setting mach='#'/></address-settings>")
    problems = problems_of(text)
    assert sorted(where(problems)) == [(3, "address-setting@mach"), (3, "address-setting@match")]
    (typo,) = [p for p in problems if p.element == "address-setting@mach"]
    assert "did you mean 'match'?" in typo.message


def test_leaf_element_with_child_elements() -> None:
    (problem,) = problems_of(core("<name><first>x</first></name>"))
    assert problem.element == "first"
    assert "takes a value" in problem.message


def test_attribute_on_value_element() -> None:
    (problem,) = problems_of(core('<journal-min-files unit="files">2</journal-min-files>'))
    assert (problem.line, problem.element) == (3, "journal-min-files@unit")


def test_unexpected_text_in_container() -> None:
    (problem,) = problems_of(core("<acceptors>oops</acceptors>"))
    assert (problem.line, problem.element, problem.message) == (
        3,
        "acceptors",
        "unexpected text 'oops'",
    )


def test_malformed_xml_reports_expat_position() -> None:
    with pytest.raises(ConfigFileError) as info:
        parse_config("<configuration>\n  <core>\n  </cor>\n</configuration>", "bad.xml")
    (problem,) = info.value.problems
    assert problem.line == 3
    assert "mismatched tag" in problem.message
    assert "column 5" in problem.message
    assert str(info.value).endswith("bad.xml:3: malformed XML: mismatched tag (column 5)")


def test_doctype_is_refused() -> None:
    text = '<!DOCTYPE x [<!ENTITY a "b">]>\n<configuration/>'
    with pytest.raises(ConfigFileError, match="DOCTYPE"):
        parse_config(text)


def test_missing_file_is_a_config_error_naming_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "broker.xml"
    with pytest.raises(ConfigError) as info:
        load_config(missing)
    assert str(missing) in str(info.value)
    assert "No such file" in str(info.value)


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path)


def test_load_honours_declared_encoding(tmp_path: Path) -> None:
    path = tmp_path / "broker.xml"
    xml = '<?xml version="1.0" encoding="ISO-8859-1"?>\n' + core("<name>n\u00e9ud</name>")
    path.write_bytes(xml.encode("latin-1"))
    assert load_config(path, environ={}).name == "n\u00e9ud"


# --- namespaces and root ------------------------------------------------------------------------


def test_missing_namespaces_accepted_with_warning() -> None:
    config = parse_config("<configuration><core><name>x</name></core></configuration>", environ={})
    assert config.name == "x"
    (warning,) = config.warnings
    assert warning.element == "core"
    assert "urn:activemq:core" in warning.message


def test_bare_core_root_accepted_with_warning() -> None:
    config = parse_config('<core xmlns="urn:activemq:core"><name>x</name></core>', environ={})
    assert config.name == "x"
    assert "root element should be <configuration" in config.warnings[0].message


def test_wrong_root() -> None:
    (problem,) = problems_of('<broker xmlns="urn:activemq"/>')
    assert "root element must be <configuration" in problem.message


def test_missing_core() -> None:
    (problem,) = problems_of('<configuration xmlns="urn:activemq"/>')
    assert "missing <core" in problem.message


def test_wrong_core_namespace() -> None:
    (problem,) = problems_of(
        '<configuration xmlns="urn:activemq"><core xmlns="urn:other"/></configuration>'
    )
    assert problem.element == "core"
    assert problem.message == "expected namespace 'urn:activemq:core', got 'urn:other'"


def test_child_in_foreign_namespace() -> None:
    text = core('<x:name xmlns:x="urn:elsewhere">n</x:name>')
    (problem,) = problems_of(text)
    assert (problem.line, problem.element) == (3, "name")
    assert "urn:elsewhere" in problem.message


def test_xinclude_is_refused() -> None:
    text = (
        '<configuration xmlns="urn:activemq" xmlns:xi="http://www.w3.org/2001/XInclude">\n'
        '<core xmlns="urn:activemq:core"><xi:include href="more.xml"/></core>\n'
        "</configuration>"
    )
    (problem,) = problems_of(text)
    assert (problem.line, problem.element) == (2, "include")
    assert "XInclude is not supported" in problem.message


# --- warnings -----------------------------------------------------------------------------------


UNIMPLEMENTED = core(
    """<name>n</name>
<security-settings>
  <security-setting-plugin class-name="org.example.Ldap"/>
</security-settings>
<jmx-management-enabled>false</jmx-management-enabled>
<address-settings>
  <address-setting match="#"><auto-create-jms-queues>true</auto-create-jms-queues></address-setting>
</address-settings>
<addresses><address name="a"><anycast>
  <queue name="a" enabled="false"><user>bob</user></queue>
</anycast></address></addresses>"""
)


def test_one_warning_lists_every_unimplemented_element_with_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="artemis_py.config"):
        config = parse_config(UNIMPLEMENTED, "u.xml", environ={})
    (warning,) = config.warnings
    assert (warning.file, warning.line, warning.element) == ("u.xml", 5, "core")
    assert warning.message.endswith(
        "security-setting-plugin (line 5), jmx-management-enabled (line 7), "
        "auto-create-jms-queues (line 9), queue@enabled (line 12), user (line 12)"
    )
    assert [r.getMessage() for r in caplog.records] == [str(warning)]
    assert config.address("a").queues[0].name == "a"  # the rest still parsed


def test_deprecated_names_warn_and_still_apply() -> None:
    text = core(
        "<address-settings><address-setting match='#'>\n"
        "<last-value-queue>true</last-value-queue>\n"
        "</address-setting></address-settings>"
    )
    config = parse_config(text, environ={})
    (warning,) = config.warnings
    assert (warning.line, warning.element) == (4, "last-value-queue")
    assert "default-last-value-queue" in warning.message
    assert config.address_settings_for("x").default_last_value_queue is True


# --- acceptors ----------------------------------------------------------------------------------


def acceptor_problems(url: str) -> list[str]:
    return [
        p.message
        for p in problems_of(core(f"<acceptors><acceptor name='a'>{url}</acceptor></acceptors>"))
    ]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("vm://0", "only tcp:// URLs are supported"),
        ("localhost:61616", "expected a URL like tcp://host:61616"),
        ("tcp://h:1?protocols=STOMP,AMPQ", "unknown protocol 'AMPQ'; did you mean 'AMQP'?"),
        ("tcp://h:1?connectionTtl=soon", "URL parameter connectionTtl: expected a long integer"),
        ("tcp://h:1?stompMaxHeaders=0", "URL parameter stompMaxHeaders: 0 must be at least 1"),
        ("tcp://h:1?heartBeatToConnectionTtlModifier=0", "must be greater than 0"),
        ("tcp://h:1?tcpSendBufferSize=0", "URL parameter tcpSendBufferSize: 0 must be -1 or at"),
        ("tcp://h:1?stompMaxBodySize=1.5MB", "byte size"),
        ("tcp://h:1?a=1;a=2", "'a' is given twice"),
    ],
)
def test_acceptor_url_errors(url: str, message: str) -> None:
    (found,) = acceptor_problems(url)
    assert message in found


def test_acceptor_url_separators_and_case() -> None:
    config = parse_config(
        core(
            "<acceptors><acceptor name='a'>tcp://h:1?protocols=stomp,Core&amp;anycastPrefix=q.;"
            "stompEnableMessageId=TRUE</acceptor></acceptors>"
        ),
        environ={},
    )
    a = config.acceptors[0]
    assert a.protocols == frozenset({"STOMP", "CORE"})
    assert a.anycast_prefixes == ("q.",)
    assert a.stomp_enable_message_id is True  # URL booleans ignore case, as in Artemis


def test_misspelled_url_parameter_warns() -> None:
    config = parse_config(
        core(
            "<acceptors><acceptor name='a'>tcp://h:1?connectionTTL=5;anycastprefix=/q/</acceptor></acceptors>"
        ),
        environ={},
    )
    messages = [w.message for w in config.warnings]
    assert any("'connectionTTL'" in m and "'connectionTtl'" in m for m in messages)
    assert any("'anycastprefix'" in m and "'anycastPrefix'" in m for m in messages)
    assert config.acceptors[0].connection_ttl == 60000  # not read
    assert config.acceptors[0].params["connectionTTL"] == "5"  # but kept


def test_deprecated_stomp_consumer_credits() -> None:
    config = parse_config(
        core(
            "<acceptors><acceptor name='a'>tcp://h:1?stompConsumerCredits=500</acceptor></acceptors>"
        ),
        environ={},
    )
    assert config.acceptors[0].stomp_consumer_window_size == 500
    assert "stompConsumerWindowSize" in config.warnings[0].message


def test_duplicate_acceptor_name_and_port() -> None:
    text = core(
        "<acceptors>\n"
        "<acceptor name='a'>tcp://0.0.0.0:61613</acceptor>\n"
        "<acceptor name='a'>tcp://0.0.0.0:61614</acceptor>\n"
        "<acceptor name='b'>tcp://0.0.0.0:61613</acceptor>\n"
        "</acceptors>"
    )
    problems = problems_of(text)
    assert where(problems) == [(5, "acceptor"), (6, "acceptor")]
    assert "duplicate acceptor name 'a' (first at line 4)" in problems[0].message
    assert "already used by acceptor 'a'" in problems[1].message


def test_multi_host_acceptor() -> None:
    config = parse_config(
        core("<acceptors><acceptor name='a'>tcp://10.0.0.1,10.0.0.2:7000</acceptor></acceptors>"),
        environ={},
    )
    assert config.acceptors[0].hosts == ("10.0.0.1", "10.0.0.2")
    assert config.acceptors[0].port == 7000


# --- address settings and addresses -------------------------------------------------------------


@pytest.mark.parametrize(
    ("match", "message"),
    [
        ("orders#", "must be a whole word in 'orders#'; did you mean 'orders.#'?"),
        ("orders.eu*", "must be a whole word in 'orders.eu*'; did you mean 'orders.eu.*'?"),
        ("#.eu", "may only be the last word"),
        ("a.#.b", "may only be the last word"),
    ],
)
def test_invalid_address_setting_matches(match: str, message: str) -> None:
    (problem,) = problems_of(
        core(f"<address-settings><address-setting match='{match}'/></address-settings>")
    )
    assert problem.element == "address-setting@match"
    assert message in problem.message


def test_duplicate_address_setting_match() -> None:
    text = core(
        "<address-settings>\n<address-setting match='#'/>\n<address-setting match='#'/>\n</address-settings>"
    )
    (problem,) = problems_of(text)
    assert problem.line == 5
    assert "already matches '#' (line 4)" in problem.message


def test_address_setting_ranges() -> None:
    text = core(
        "<address-settings><address-setting match='#'>\n"
        "<page-size-bytes>0</page-size-bytes>\n"
        "<redelivery-collision-avoidance-factor>1.5</redelivery-collision-avoidance-factor>\n"
        "<initial-queue-buffer-size>1000</initial-queue-buffer-size>\n"
        "<redistribution-delay>-2</redistribution-delay>\n"
        "</address-setting></address-settings>"
    )
    problems = problems_of(text)
    assert where(problems) == [
        (4, "page-size-bytes"),
        (5, "redelivery-collision-avoidance-factor"),
        (6, "initial-queue-buffer-size"),
        (7, "redistribution-delay"),
    ]
    assert "power of 2" in problems[2].message


def test_address_errors() -> None:
    text = core(
        "<addresses>\n"
        "<address name='a'><anycast><queue name='q'/></anycast></address>\n"
        "<address name='a'><anycast/></address>\n"
        "<address name='b'/>\n"
        "<address name='c'><multicast><queue name='q'/></multicast></address>\n"
        "<address name='d'><anycast><queue name='r' max-consumers='-5'><filter/></queue></anycast></address>\n"
        "</addresses>"
    )
    problems = problems_of(text)
    assert where(problems) == [
        (5, "address"),
        (6, "address"),
        (7, "queue"),
        (8, "queue@max-consumers"),
        (8, "filter@string"),
    ]
    assert "duplicate address 'a' (first at line 4)" in problems[0].message
    assert "needs <anycast> or <multicast>" in problems[1].message
    assert "duplicate queue 'q' (first at line 4)" in problems[2].message


# --- journal -------------------------------------------------------------------------------------


def test_journal_file_size_minimum() -> None:
    (problem,) = problems_of(core("<journal-file-size>1000</journal-file-size>"))
    assert "must be at least 1024" in problem.message


def test_malformed_masked_cluster_password_is_refused() -> None:
    (problem,) = problems_of(core("<cluster-password>ENC(abc)</cluster-password>"))
    assert problem.element == "cluster-password"
    assert "masked" in problem.message


def test_a_queue_is_non_destructive_by_its_attribute_or_its_address_default() -> None:
    text = core(
        """<address-settings>
  <address-setting match="cache.#"><default-non-destructive>true</default-non-destructive>
  </address-setting>
</address-settings>
<addresses>
  <address name="prices"><anycast>
    <queue name="prices" non-destructive="true" last-value-key="stock"/>
    <queue name="ordinary"/>
  </anycast></address>
  <address name="cache.a"><anycast><queue name="cache.a" non-destructive="false"/></anycast>
  </address>
</addresses>"""
    )
    config = parse_config(text, "b.xml", environ={})
    assert config.warnings == ()
    prices, ordinary = config.address("prices").queues
    assert (prices.kind.non_destructive, prices.kind.last_value_key) == (True, "stock")
    assert ordinary.kind.non_destructive is None  # the address settings decide
    assert config.address("cache.a").queues[0].kind.non_destructive is False
    assert config.address_settings_for("cache.a").default_non_destructive


# -- max-redelivery-records: Artemis's default (10), -1 or a count ------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("", 10),
        ("<max-redelivery-records>1</max-redelivery-records>", 1),
        ("<max-redelivery-records>0</max-redelivery-records>", 0),
        ("<max-redelivery-records>-1</max-redelivery-records>", -1),
    ],
)
def test_max_redelivery_records_values_and_no_warning(body: str, expected: int) -> None:
    config = parse_config(core(body), environ={})
    assert config.max_redelivery_records == expected
    assert config.warnings == ()  # honoured: not named in the "not implemented" warning


@pytest.mark.parametrize("value", ["-2", "ten", "3000000000"])
def test_a_bad_max_redelivery_records_names_its_line(value: str) -> None:
    text = core(f"<max-redelivery-records>{value}</max-redelivery-records>")
    with pytest.raises(ConfigFileError) as info:
        parse_config(text, "broker.xml", environ={})
    [problem] = info.value.problems
    assert (problem.line, problem.element) == (3, "max-redelivery-records")
