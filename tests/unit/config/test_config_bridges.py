"""Reading ``<bridges>``: Artemis's defaults (its parser's), every element, what is named as
not implemented, and the errors (with lines) of what artemis-py refuses: no queue-name, no
target, an unknown connector or discovery group, transformers, a bridge to this node itself,
values Artemis's parser refuses."""

from __future__ import annotations

import pytest

from artemis_py.config import (
    BridgeConfig,
    ComponentRoutingType,
    ConfigFileError,
    ConfigProblem,
    parse_config,
    passwords,
)

TARGET = "<static-connectors><connector-ref>b</connector-ref></static-connectors>"


def bridges(*items: str, core: str = "") -> str:
    """A broker.xml with ``<bridges>`` holding ``items``, one per line from line 8."""
    return (
        '<configuration xmlns="urn:activemq">\n'
        '<core xmlns="urn:activemq:core">\n'
        f"{core}\n"
        '<acceptors><acceptor name="stomp">tcp://0.0.0.0:61616</acceptor></acceptors>\n'
        '<connectors><connector name="b">tcp://node-b:61616</connector>\n'
        '<connector name="me">tcp://localhost:61616</connector></connectors>\n'
        "<bridges>\n" + "".join(f"{item}\n" for item in items) + "</bridges>\n"
        "</core>\n"
        "</configuration>\n"
    )


def bridge(name: str, body: str = "", *, queue: str | None = "outbox", target: str = TARGET) -> str:
    queue_name = "" if queue is None else f"<queue-name>{queue}</queue-name>"
    return f'<bridge name="{name}">{queue_name}{body}{target}</bridge>'


def problems_of(text: str) -> list[ConfigProblem]:
    with pytest.raises(ConfigFileError) as info:
        parse_config(text, "broker.xml", environ={})
    return list(info.value.problems)


def test_defaults_are_artemis_s() -> None:
    config = parse_config(bridges(bridge("b1")), environ={})
    (b,) = config.bridges
    assert b == BridgeConfig(name="b1", queue_name="outbox", static_connectors=("b",))
    assert b.forwarding_address is None  # the message's own address
    assert b.routing_type is ComponentRoutingType.PASS
    assert (b.retry_interval, b.retry_interval_multiplier, b.max_retry_interval) == (
        2000,
        1.0,
        2000,
    )
    assert (b.initial_connect_attempts, b.reconnect_attempts) == (-1, -1)
    assert b.use_duplicate_detection is True
    # ActiveMQDefaultConfiguration's 10 MiB (what the parser uses), not the schema's 1 MiB.
    assert b.confirmation_window_size == 10 * 1024 * 1024
    assert b.producer_window_size == 1024 * 1024
    assert (b.check_period, b.connection_ttl, b.min_large_message_size) == (30000, 60000, 102400)
    assert (b.user, b.password) == (None, None)  # the node's cluster-user / cluster-password
    assert (b.concurrency, b.pending_ack_timeout, b.ha) == (1, 60000, False)
    assert b.line == 8
    assert not config.warnings  # bridges are no longer named as not implemented


def test_every_element_is_read() -> None:
    body = (
        "<forwarding-address>incoming</forwarding-address><filter string=\"color = 'red'\"/>"
        "<check-period>1000</check-period><connection-ttl>5000</connection-ttl>"
        "<retry-interval>100</retry-interval><retry-interval-multiplier>2.5"
        "</retry-interval-multiplier><max-retry-interval>9000</max-retry-interval>"
        "<initial-connect-attempts>3</initial-connect-attempts>"
        "<reconnect-attempts>0</reconnect-attempts><producer-window-size>64K"
        "</producer-window-size><user>bridger</user><password>s3cret</password>"
        "<routing-type>ANYCAST</routing-type><pending-ack-timeout>500</pending-ack-timeout>"
    )
    config = parse_config(bridges(bridge("b1", body)), environ={})
    (b,) = config.bridges
    assert b.forwarding_address == "incoming"
    assert b.filter == "color = 'red'"
    assert (b.check_period, b.connection_ttl) == (1000, 5000)
    assert (b.retry_interval, b.retry_interval_multiplier, b.max_retry_interval) == (100, 2.5, 9000)
    assert (b.initial_connect_attempts, b.reconnect_attempts) == (3, 0)
    assert b.producer_window_size == 64 * 1024
    assert (b.user, b.password) == ("bridger", "s3cret")
    assert b.routing_type is ComponentRoutingType.ANYCAST
    assert b.pending_ack_timeout == 500
    assert not config.warnings


def test_a_discovery_group_is_a_target() -> None:
    core = (
        '<discovery-groups><discovery-group name="dg"><group-address>231.7.7.7</group-address>'
        "<group-port>9876</group-port></discovery-group></discovery-groups>"
    )
    target = '<discovery-group-ref discovery-group-name="dg"/>'
    (b,) = parse_config(bridges(bridge("b1", target=target), core=core), environ={}).bridges
    assert (b.static_connectors, b.discovery_group_name) == ((), "dg")


def test_settings_without_effect_are_named_unless_at_artemis_s_default() -> None:
    at_default = (
        "<ha>false</ha><use-duplicate-detection>true</use-duplicate-detection>"
        "<concurrency>1</concurrency><confirmation-window-size>10MiB</confirmation-window-size>"
    )
    assert not parse_config(bridges(bridge("b1", at_default)), environ={}).warnings
    other = (
        "<ha>true</ha><use-duplicate-detection>false</use-duplicate-detection>"
        "<concurrency>3</concurrency><confirmation-window-size>1MiB</confirmation-window-size>"
        "<min-large-message-size>1K</min-large-message-size><client-id>me</client-id>"
        "<reconnect-attempts-same-node>2</reconnect-attempts-same-node>"
    )
    (warning,) = parse_config(bridges(bridge("b1", other)), environ={}).warnings
    for name in (
        "ha",
        "use-duplicate-detection",
        "concurrency",
        "confirmation-window-size",
        "min-large-message-size",
        "client-id",
        "reconnect-attempts-same-node",
    ):
        assert f"{name} (line 8)" in warning.message


def test_failover_on_server_shutdown_is_deprecated() -> None:
    item = bridge("b1", "<failover-on-server-shutdown>true</failover-on-server-shutdown>")
    (warning,) = parse_config(bridges(item), environ={}).warnings
    assert (warning.line, warning.element) == (8, "failover-on-server-shutdown")
    assert "deprecated" in warning.message


@pytest.mark.parametrize(
    ("item", "element", "message"),
    [
        (bridge("q", queue=None), "bridge", "bridge 'q' needs a <queue-name>"),
        (bridge("q", queue=" "), "queue-name", "<queue-name> is empty"),
        (bridge("t", target=""), "bridge", "needs <static-connectors> or <discovery-group-ref>"),
        (bridge("c", target="<static-connectors><connector-ref>bb</connector-ref></static-connectors>"),
         "connector-ref", "no connector named 'bb' is defined; did you mean 'b'?"),
        (bridge("c", target="<static-connectors/>"), "static-connectors", "at least one"),
        (bridge("d", target='<discovery-group-ref discovery-group-name="dg"/>'),
         "discovery-group-ref", "no discovery-group named 'dg'"),
        (bridge("j", "<transformer-class-name>org.Example</transformer-class-name>"),
         "transformer-class-name", "bridge 'j': transformers are Java classes"),
        (bridge("j", "<transformer><class-name>org.Example</class-name></transformer>"),
         "transformer", "bridge 'j': transformers are Java classes"),
        (bridge("me", target="<static-connectors><connector-ref>me</connector-ref></static-connectors>"),
         "static-connectors", "bridge 'me' would forward to this node itself: connector 'me'"),
        (bridge("r", "<routing-type>BOTH</routing-type>"), "routing-type", "expected one of"),
        (bridge("r", "<retry-interval>0</retry-interval>"), "retry-interval", "at least 1"),
        (bridge("r", "<reconnect-attempts>-2</reconnect-attempts>"), "reconnect-attempts", "-1"),
        (bridge("r", "<producer-window-size>0</producer-window-size>"), "producer-window-size", "-1"),
        (bridge("r", "<concurrency>0</concurrency>"), "concurrency", "at least 1"),
        (bridge("r", "<retry-interval-multiplier>0</retry-interval-multiplier>"),
         "retry-interval-multiplier", "greater than 0"),
        # Not an element of Artemis's bridgeType (a cluster connection's only).
        (bridge("r", "<call-timeout>100</call-timeout>"), "call-timeout", "unknown element"),
        ('<bridge><queue-name>q</queue-name>' + TARGET + "</bridge>", "bridge@name",
         "missing required attribute 'name'"),
    ],
)  # fmt: skip
def test_bad_bridge(item: str, element: str, message: str) -> None:
    (problem,) = problems_of(bridges(item))
    assert (problem.file, problem.line, problem.element) == ("broker.xml", 8, element)
    assert message in problem.message


def test_duplicate_names_are_refused() -> None:
    (problem,) = problems_of(bridges(bridge("b1"), bridge("b1", queue="other")))
    assert (problem.line, problem.element) == (9, "bridge")
    assert "duplicate bridge name 'b1' (first at line 8)" in problem.message


def test_a_cluster_connection_s_own_connector_is_this_node() -> None:
    core = (
        '<cluster-connections><cluster-connection name="c"><connector-ref>b</connector-ref>'
        "</cluster-connection></cluster-connections>"
    )
    (problem,) = problems_of(bridges(bridge("loop"), core=core))
    assert problem.line == 8
    assert "connector this node's cluster connection announces as its own" in problem.message


def test_the_password_is_unmasked_as_the_others() -> None:
    item = bridge("b1", f"<password>{passwords.mask('s3cret')}</password>")
    (b,) = parse_config(bridges(item), environ={}).bridges
    assert b.password == "s3cret"
    assert "s3cret" not in repr(b)
