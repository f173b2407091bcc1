"""Cluster elements: cluster connections, broadcast/discovery groups, ha-policy, cross-references."""

from __future__ import annotations

import pytest

from artemis_py.config import (
    ClusterConnectionConfig,
    ConfigFileError,
    ConfigProblem,
    HAPolicy,
    MessageLoadBalancing,
    parse_config,
)

CONNECTORS = """<connectors>
  <connector name="self">tcp://a:61616</connector>
  <connector name="node-b">tcp://b:61616</connector>
</connectors>
<cluster-password>not-the-default</cluster-password>"""


def core(body: str) -> str:
    """<core> opens on line 2; the connectors take lines 3-7, so ``body`` starts on line 8."""
    return (
        '<configuration xmlns="urn:activemq">\n'
        '<core xmlns="urn:activemq:core">\n'
        f"{CONNECTORS}\n{body}\n"
        "</core>\n</configuration>\n"
    )


def problems_of(text: str) -> list[ConfigProblem]:
    with pytest.raises(ConfigFileError) as info:
        parse_config(text, "cluster.xml", environ={})
    return list(info.value.problems)


def cluster(body: str) -> str:
    return core(
        f"<cluster-connections>\n<cluster-connection name='c'>\n{body}\n</cluster-connection>\n</cluster-connections>"
    )


def test_cluster_connection_defaults_are_artemis_defaults() -> None:
    config = parse_config(cluster("<connector-ref>self</connector-ref>"), environ={})
    (cc,) = config.cluster_connections
    assert cc == ClusterConnectionConfig(name="c", connector_name="self")
    # Artemis clusters §4.1 and artemis-configuration.xsd:
    assert cc.address == ""
    assert cc.check_period == 30000
    assert cc.connection_ttl == 60000
    assert cc.min_large_message_size == 102400
    assert cc.call_timeout == 30000
    assert cc.retry_interval == 500
    assert cc.retry_interval_multiplier == 1.0
    assert cc.max_retry_interval == 2000
    assert cc.initial_connect_attempts == -1
    assert cc.reconnect_attempts == -1
    assert cc.use_duplicate_detection is True
    assert cc.message_load_balancing is MessageLoadBalancing.ON_DEMAND
    assert cc.max_hops == 1
    assert cc.confirmation_window_size == 1048576
    assert cc.producer_window_size == 1048576
    assert cc.call_failover_timeout == -1
    assert cc.notification_interval == 1000
    assert cc.notification_attempts == 2
    assert cc.static_connectors == ()
    assert cc.discovery_group_name is None
    assert cc.allow_direct_connections_only is False
    assert config.warnings == ()


@pytest.mark.parametrize(("legacy", "expected"), [("true", "STRICT"), ("false", "ON_DEMAND")])
def test_forward_when_no_consumers_is_deprecated_but_honoured(legacy: str, expected: str) -> None:
    text = cluster(
        "<connector-ref>self</connector-ref>\n"
        f"<forward-when-no-consumers>{legacy}</forward-when-no-consumers>"
    )
    config = parse_config(text, environ={})
    assert config.cluster_connections[0].message_load_balancing is MessageLoadBalancing[expected]
    (warning,) = config.warnings
    assert (warning.line, warning.element) == (11, "forward-when-no-consumers")
    assert "deprecated" in warning.message


def test_forward_when_no_consumers_takes_precedence_like_artemis() -> None:
    text = cluster(
        "<connector-ref>self</connector-ref>\n"
        "<message-load-balancing>OFF</message-load-balancing>\n"
        "<forward-when-no-consumers>true</forward-when-no-consumers>"
    )
    config = parse_config(text, environ={})
    assert config.cluster_connections[0].message_load_balancing is MessageLoadBalancing.STRICT
    assert "takes precedence" in config.warnings[0].message


def test_message_load_balancing_values() -> None:
    for value in MessageLoadBalancing:
        text = cluster(
            f"<connector-ref>self</connector-ref><message-load-balancing>{value}</message-load-balancing>"
        )
        assert parse_config(text, environ={}).cluster_connections[0].message_load_balancing is value
    (problem,) = problems_of(
        cluster(
            "<connector-ref>self</connector-ref><message-load-balancing>ROUND_ROBIN</message-load-balancing>"
        )
    )
    assert "OFF, STRICT, ON_DEMAND, OFF_WITH_REDISTRIBUTION" in problem.message


def test_cross_reference_errors_all_reported() -> None:
    text = core(
        "<discovery-groups><discovery-group name='dg'>"
        "<group-address>231.7.7.7</group-address><group-port>9876</group-port>"
        "</discovery-group></discovery-groups>\n"
        "<cluster-connections>\n"
        "<cluster-connection name='one'>\n"
        "  <connector-ref>slef</connector-ref>\n"
        "  <static-connectors><connector-ref>node-c</connector-ref></static-connectors>\n"
        "</cluster-connection>\n"
        "<cluster-connection name='two'>\n"
        "  <connector-ref>self</connector-ref>\n"
        "  <discovery-group-ref discovery-group-name='dg2'/>\n"
        "</cluster-connection>\n"
        "<cluster-connection name='three'>\n"
        "  <max-hops>1</max-hops>\n"
        "</cluster-connection>\n"
        "</cluster-connections>"
    )
    problems = problems_of(text)
    assert [(p.line, p.element) for p in problems] == [
        (11, "connector-ref"),
        (12, "connector-ref"),
        (16, "discovery-group-ref"),
        (18, "cluster-connection"),
    ]
    assert problems[0].message == "no connector named 'slef' is defined; did you mean 'self'?"
    assert problems[1].message.startswith("no connector named 'node-c' is defined")
    assert problems[2].message == "no discovery-group named 'dg2' is defined; did you mean 'dg'?"
    assert "needs <connector-ref>" in problems[3].message


def test_static_and_discovery_together_is_an_error() -> None:
    text = core(
        "<discovery-groups><discovery-group name='dg'>"
        "<group-address>231.7.7.7</group-address><group-port>9876</group-port>"
        "</discovery-group></discovery-groups>\n"
        + "<cluster-connections><cluster-connection name='c'>\n"
        "<connector-ref>self</connector-ref>\n"
        "<static-connectors><connector-ref>node-b</connector-ref></static-connectors>\n"
        "<discovery-group-ref discovery-group-name='dg'/>\n"
        "</cluster-connection></cluster-connections>"
    )
    (problem,) = problems_of(text)
    assert (problem.line, problem.element) == (12, "discovery-group-ref")
    assert "not both" in problem.message


def test_discovery_ref_without_any_discovery_groups() -> None:
    text = cluster(
        "<connector-ref>self</connector-ref><discovery-group-ref discovery-group-name='dg'/>"
    )
    (problem,) = problems_of(text)
    assert "(there are no <discovery-group>s)" in problem.message


def test_empty_static_connectors() -> None:
    (problem,) = problems_of(cluster("<connector-ref>self</connector-ref><static-connectors/>"))
    assert "at least one <connector-ref>" in problem.message


def test_cluster_value_ranges() -> None:
    text = cluster(
        "<connector-ref>self</connector-ref>\n"
        "<max-hops>-1</max-hops>\n"
        "<retry-interval>0</retry-interval>\n"
        "<reconnect-attempts>-2</reconnect-attempts>\n"
        "<confirmation-window-size>0</confirmation-window-size>\n"
        "<retry-interval-multiplier>0</retry-interval-multiplier>"
    )
    problems = problems_of(text)
    assert [p.element for p in problems] == [
        "max-hops",
        "retry-interval",
        "reconnect-attempts",
        "confirmation-window-size",
        "retry-interval-multiplier",
    ]
    assert [p.line for p in problems] == [11, 12, 13, 14, 15]


def test_duplicate_cluster_connection_names() -> None:
    text = core(
        "<cluster-connections>\n"
        "<cluster-connection name='c'><connector-ref>self</connector-ref></cluster-connection>\n"
        "<cluster-connection name='c'><connector-ref>self</connector-ref></cluster-connection>\n"
        "</cluster-connections>"
    )
    (problem,) = problems_of(text)
    assert problem.line == 10
    assert "duplicate cluster-connection name 'c' (first at line 9)" in problem.message


def test_unimplemented_cluster_children_are_warned() -> None:
    text = cluster("<connector-ref>self</connector-ref>\n<client-id>x</client-id>")
    config = parse_config(text, environ={})
    (warning,) = config.warnings
    assert "client-id (line 11)" in warning.message


def test_default_cluster_password_warns_when_clustering() -> None:
    text = (
        '<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">\n'
        "<connectors><connector name='self'>tcp://a:1</connector></connectors>\n"
        "<cluster-connections><cluster-connection name='c'><connector-ref>self</connector-ref>"
        "</cluster-connection></cluster-connections>\n"
        "</core></configuration>"
    )
    (warning,) = parse_config(text, environ={}).warnings
    assert warning.element == "cluster-password"
    assert "default" in warning.message


@pytest.mark.parametrize(
    ("address", "matching", "not_matching"),
    [
        ("", ["anything", "eu.orders"], []),
        ("eu", ["eu", "eu.uk", "europe"], ["us"]),
        ("!eu", ["us", "asia.eu"], ["eu", "eu.uk"]),
        ("eu.uk,eu.de", ["eu.uk.x", "eu.de"], ["eu.fr", "eu"]),
        ("eu,!eu.uk", ["eu.de", "eu"], ["eu.uk", "eu.uk.london", "us"]),
    ],
)
def test_cluster_address_filter(address: str, matching: list[str], not_matching: list[str]) -> None:
    cc = ClusterConnectionConfig(name="c", connector_name="self", address=address)
    assert all(cc.matches_address(a) for a in matching)
    assert not any(cc.matches_address(a) for a in not_matching)


@pytest.mark.parametrize(
    ("first", "second", "shared"),
    [
        ("", "", ""),
        ("eu", "", "eu"),
        ("eu", "eu.uk", "eu.uk"),
        ("eu,us", "asia,us.east", "us.east"),
        ("eu", "!eu.uk", "eu"),  # eu.de is in both
        ("eu", "us", None),
        ("eu.uk", "eu.de", None),
        ("eu", "!eu", None),
        ("eu,!eu.uk", "eu.uk", None),
        ("!eu", "eu.uk", None),
    ],
)
def test_cluster_address_overlap(first: str, second: str, shared: str | None) -> None:
    a = ClusterConnectionConfig(name="a", connector_name="self", address=first)
    b = ClusterConnectionConfig(name="b", connector_name="self", address=second)
    assert a.overlap(b) == shared
    assert b.overlap(a) == shared


def test_overlapping_cluster_connections_are_reported() -> None:
    text = core(
        "<cluster-connections>\n"
        "<cluster-connection name='east'><address>orders</address>"
        "<connector-ref>self</connector-ref></cluster-connection>\n"
        "<cluster-connection name='west'><address>audit</address>"
        "<connector-ref>self</connector-ref></cluster-connection>\n"
        "<cluster-connection name='all'><connector-ref>self</connector-ref></cluster-connection>\n"
        "</cluster-connections>"
    )
    warnings = parse_config(text, environ={}).warnings
    assert [(w.line, w.element) for w in warnings] == [(11, "cluster-connection")] * 2
    assert (
        "cluster-connection 'all' overlaps cluster-connection 'east' (<address>): "
        "addresses starting with 'orders' belong to 'east'" in warnings[0].message
    )
    assert "'all' overlaps cluster-connection 'west'" in warnings[1].message


# --- broadcast and discovery groups -------------------------------------------------------------


def test_group_defaults() -> None:
    text = core(
        "<broadcast-groups><broadcast-group name='bg'><group-address>231.7.7.7</group-address>"
        "<group-port>9876</group-port><connector-ref>self</connector-ref></broadcast-group>"
        "</broadcast-groups>\n"
        "<discovery-groups><discovery-group name='dg'><group-address>ff02::1</group-address>"
        "<group-port>9876</group-port></discovery-group></discovery-groups>"
    )
    config = parse_config(text, environ={})
    bg, dg = config.broadcast_group("bg"), config.discovery_group("dg")
    assert (bg.broadcast_period, bg.local_bind_port, bg.local_bind_address) == (2000, -1, None)
    assert (dg.refresh_timeout, dg.initial_wait_timeout, dg.local_bind_port) == (10000, 10000, -1)
    assert dg.group_address == "ff02::1"


def test_group_errors() -> None:
    text = core(
        "<broadcast-groups>\n"
        "<broadcast-group name='bg'>\n"
        "  <group-address>10.0.0.1</group-address>\n"
        "  <connector-ref>nobody</connector-ref>\n"
        "</broadcast-group>\n"
        "</broadcast-groups>\n"
        "<discovery-groups>\n"
        "<discovery-group name='dg'>\n"
        "  <group-port>70000</group-port>\n"
        "</discovery-group>\n"
        "<discovery-group name='jg'>\n"
        "  <jgroups-file>j.xml</jgroups-file>\n"
        "  <group-address>231.7.7.7</group-address>\n"
        "</discovery-group>\n"
        "</discovery-groups>"
    )
    problems = problems_of(text)
    assert [(p.line, p.element) for p in problems] == [
        (9, "broadcast-group"),  # no group-port
        (9, "broadcast-group"),  # no announced connector (the only ref is undefined)
        (10, "group-address"),
        (11, "connector-ref"),
        (15, "discovery-group"),  # no group-address
        (16, "group-port"),
        (18, "discovery-group"),  # JGroups mixed with UDP
    ]
    assert "not a multicast IP address" in problems[2].message
    assert "70000 must be between 1 and 65535" in problems[5].message
    assert "mixes JGroups" in problems[6].message


# --- ha-policy ----------------------------------------------------------------------------------


def test_primary_only_scale_down_defaults() -> None:
    text = core("<ha-policy><primary-only><scale-down/></primary-only></ha-policy>")
    sd = parse_config(text, environ={}).ha_policy.scale_down
    assert sd is not None
    assert (
        sd.enabled,
        sd.group_name,
        sd.connectors,
        sd.discovery_group_name,
        sd.commit_interval,
    ) == (
        True,
        None,
        (),
        None,
        -1,
    )


def test_live_only_is_the_old_name() -> None:
    text = core(
        "<ha-policy><live-only><scale-down><connectors><connector-ref>node-b</connector-ref>"
        "</connectors></scale-down></live-only></ha-policy>"
    )
    config = parse_config(text, environ={})
    assert config.ha_policy.policy is HAPolicy.PRIMARY_ONLY
    assert config.ha_policy.scale_down is not None
    assert config.ha_policy.scale_down.connectors == ("node-b",)
    assert "old name of <primary-only>" in config.warnings[0].message


def test_scale_down_reference_errors() -> None:
    text = core(
        "<ha-policy><primary-only><scale-down>\n"
        "<discovery-group-ref discovery-group-name='dg'/>\n"
        "<connectors><connector-ref>node-x</connector-ref></connectors>\n"
        "<commit-interval>0</commit-interval>\n"
        "</scale-down></primary-only></ha-policy>"
    )
    problems = problems_of(text)
    assert [(p.line, p.element) for p in problems] == [
        (8, "scale-down"),
        (9, "discovery-group-ref"),
        (10, "connector-ref"),
        (11, "commit-interval"),
    ]
    assert "not both" in problems[0].message


def test_two_ha_policies() -> None:
    text = core("<ha-policy>\n<primary-only/>\n<live-only/>\n</ha-policy>")
    (problem,) = problems_of(text)
    assert (problem.line, problem.element) == (10, "live-only")
    assert "takes one policy" in problem.message
