"""Reading ``<grouping-handler>``: Artemis's defaults, every element, and the errors (with
file, line and element) of what is refused: a missing or unknown type, values out of
Artemis's ranges, two handlers, a REMOTE handler no cluster connection can carry."""

from __future__ import annotations

import pytest

from artemis_py.config import (
    ConfigFileError,
    ConfigProblem,
    GroupingHandlerConfig,
    GroupingHandlerType,
    parse_config,
)

CLUSTER = """<connectors><connector name="self">tcp://a:61616</connector></connectors>
<cluster-password>not-the-default</cluster-password>
<cluster-connections><cluster-connection name="c">
<address>{address}</address><connector-ref>self</connector-ref>
</cluster-connection></cluster-connections>"""


def broker(*handlers: str, cluster_address: str | None = "") -> str:
    """A broker.xml whose first handler starts on line 3 (the cluster follows them)."""
    cluster = "" if cluster_address is None else CLUSTER.format(address=cluster_address)
    return (
        '<configuration xmlns="urn:activemq">\n'
        '<core xmlns="urn:activemq:core">\n'
        + "".join(f"{h}\n" for h in handlers)
        + f"{cluster}\n</core>\n</configuration>\n"
    )


def handler(body: str, name: str = "gh") -> str:
    return f'<grouping-handler name="{name}">{body}</grouping-handler>'


def problems_of(text: str) -> list[ConfigProblem]:
    with pytest.raises(ConfigFileError) as info:
        parse_config(text, "broker.xml", environ={})
    return list(info.value.problems)


def test_no_handler_by_default() -> None:
    assert parse_config(broker(), environ={}).grouping_handler is None


def test_defaults_are_artemis_s() -> None:
    config = parse_config(broker(handler("<type>LOCAL</type>")), environ={})
    assert config.grouping_handler == GroupingHandlerConfig(
        name="gh", type=GroupingHandlerType.LOCAL
    )
    h = config.grouping_handler
    assert h is not None
    assert (h.address, h.timeout, h.group_timeout, h.reaper_period) == ("", 5000, -1, 30000)
    assert h.line == 3
    # No longer listed among the settings artemis-py ignores.
    assert not any("grouping-handler" in w.message for w in config.warnings)


def test_every_element_is_read() -> None:
    body = (
        "<type>REMOTE</type><address>jms</address><timeout>750</timeout>"
        "<group-timeout>60000</group-timeout><reaper-period>1000</reaper-period>"
    )
    config = parse_config(broker(handler(body), cluster_address="jms"), environ={})
    assert config.grouping_handler == GroupingHandlerConfig(
        name="gh",
        type=GroupingHandlerType.REMOTE,
        address="jms",
        timeout=750,
        group_timeout=60000,
        reaper_period=1000,
    )


def test_unknown_type_is_an_error_with_its_line() -> None:
    (problem,) = problems_of(broker(handler("<type>CENTRAL</type>")))
    assert (problem.file, problem.line, problem.element) == ("broker.xml", 3, "type")
    assert "LOCAL, REMOTE" in problem.message
    assert "CENTRAL" in problem.message


def test_lower_case_type_is_refused_with_a_hint() -> None:
    (problem,) = problems_of(broker(handler("<type>local</type>")))
    assert "upper case: LOCAL" in problem.message


def test_missing_type_and_name() -> None:
    problems = problems_of(broker("<grouping-handler><timeout>10</timeout></grouping-handler>"))
    messages = " | ".join(p.message for p in problems)
    assert "missing required attribute 'name'" in messages
    assert "needs a <type>" in messages
    assert all(p.line == 3 for p in problems)


@pytest.mark.parametrize(
    ("element", "value"),
    [("timeout", "0"), ("group-timeout", "0"), ("group-timeout", "-2"), ("reaper-period", "0")],
)
def test_values_out_of_artemis_s_ranges(element: str, value: str) -> None:
    body = f"<type>LOCAL</type><{element}>{value}</{element}>"
    (problem,) = problems_of(broker(handler(body)))
    assert (problem.line, problem.element) == (3, element)


def test_two_handlers_are_an_error() -> None:
    # artemis-configuration.xsd allows one per node (Artemis's parser would keep the last).
    problems = problems_of(
        broker(handler("<type>LOCAL</type>"), handler("<type>REMOTE</type>", name="other"))
    )
    (problem,) = problems
    assert (problem.line, problem.element) == (4, "grouping-handler")
    assert "only once" in problem.message
    assert "line 3" in problem.message


def test_unknown_child_is_an_error_with_a_suggestion() -> None:
    (problem,) = problems_of(broker(handler("<type>LOCAL</type><timout>5</timout>")))
    assert problem.element == "timout"
    assert "timeout" in problem.message


def test_remote_handler_no_cluster_connection_carries_is_an_error() -> None:
    body = "<type>REMOTE</type><address>jms</address>"
    (problem,) = problems_of(broker(handler(body), cluster_address="orders"))
    assert (problem.line, problem.element) == (3, "grouping-handler")
    assert "no cluster connection covers address 'jms'" in problem.message
    (problem,) = problems_of(broker(handler("<type>REMOTE</type>"), cluster_address=None))
    assert "the empty address" in problem.message


def test_local_handler_without_a_cluster_is_a_warning() -> None:
    config = parse_config(broker(handler("<type>LOCAL</type>"), cluster_address=None), environ={})
    assert config.grouping_handler is not None
    (warning,) = [w for w in config.warnings if w.element == "grouping-handler"]
    assert warning.line == 3
    assert "decides for this node's queues only" in warning.message


def test_handler_address_covered_by_a_prefix() -> None:
    # Artemis passes a notification on when the cluster connection's filter covers it.
    body = "<type>REMOTE</type><address>jms.orders</address>"
    config = parse_config(broker(handler(body), cluster_address="jms"), environ={})
    assert config.grouping_handler is not None
