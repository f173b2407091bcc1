"""``<ha-policy><shared-store>``: every element, Artemis's defaults, bad values, old names."""

from __future__ import annotations

import pytest

from artemis_py.config import (
    ConfigFileError,
    ConfigProblem,
    HAPolicy,
    SharedStoreConfig,
    parse_config,
)

CONNECTORS = """<connectors>
  <connector name="node-b">tcp://b:61616</connector>
</connectors>"""


def ha(body: str) -> str:
    """A broker.xml whose ``<ha-policy>`` opens on line 6 and holds ``body``."""
    return (
        '<configuration xmlns="urn:activemq">\n'
        '<core xmlns="urn:activemq:core">\n'
        f"{CONNECTORS}\n"
        f"<ha-policy>{body}</ha-policy>\n"
        "</core>\n</configuration>\n"
    )


def problems_of(text: str) -> list[ConfigProblem]:
    with pytest.raises(ConfigFileError) as info:
        parse_config(text, "broker.xml", environ={})
    return list(info.value.problems)


def test_primary_defaults_are_artemis_s() -> None:
    config = parse_config(ha("<shared-store><primary/></shared-store>"), environ={})
    assert config.ha_policy.policy is HAPolicy.SHARED_STORE
    assert config.ha_policy.shared_store == SharedStoreConfig(
        backup=False, failover_on_shutdown=False, wait_for_activation=True
    )
    assert not config.ha_policy.shared_store_backup
    assert config.ha_policy.scale_down is None
    assert config.warnings == ()


def test_backup_defaults_are_artemis_s() -> None:
    config = parse_config(ha("<shared-store><backup/></shared-store>"), environ={})
    settings = config.ha_policy.shared_store
    assert settings is not None
    # restart-backup: the schema says false, Artemis's parser and classes default to true.
    assert (
        settings.backup,
        settings.failover_on_shutdown,
        settings.allow_failback,
        settings.restart_backup,
        settings.scale_down,
    ) == (True, False, True, True, None)
    assert config.ha_policy.shared_store_backup
    assert config.warnings == ()


def test_every_primary_element() -> None:
    text = ha(
        "<shared-store><primary>\n"
        "<failover-on-shutdown>true</failover-on-shutdown>\n"
        "<wait-for-activation>false</wait-for-activation>\n"
        "</primary></shared-store>"
    )
    config = parse_config(text, environ={})
    assert config.ha_policy.shared_store == SharedStoreConfig(
        failover_on_shutdown=True, wait_for_activation=False
    )
    # A node always waits until it is live (open_broker returns then): false is named.
    (warning,) = config.warnings
    assert "wait-for-activation (line 8)" in warning.message


def test_every_backup_element() -> None:
    text = ha(
        "<shared-store><backup>\n"
        "<allow-failback>false</allow-failback>\n"
        "<failover-on-shutdown>true</failover-on-shutdown>\n"
        "<restart-backup>false</restart-backup>\n"
        "</backup></shared-store>"
    )
    settings = parse_config(text, environ={}).ha_policy.shared_store
    assert settings == SharedStoreConfig(
        backup=True, failover_on_shutdown=True, allow_failback=False, restart_backup=False
    )


def test_a_backup_s_scale_down_is_parsed_and_named_as_not_implemented() -> None:
    text = ha(
        "<shared-store><backup>\n"
        "<scale-down><group-name>g</group-name>\n"
        "<connectors><connector-ref>node-b</connector-ref></connectors></scale-down>\n"
        "</backup></shared-store>"
    )
    config = parse_config(text, environ={})
    settings = config.ha_policy.shared_store
    assert settings is not None
    assert settings.scale_down is not None
    assert settings.scale_down.connectors == ("node-b",)
    assert settings.scale_down.group_name == "g"
    # A primary-only scale-down is another thing: the node does not scale down on stop.
    assert config.ha_policy.scale_down is None
    (warning,) = config.warnings
    assert (warning.line, warning.element) == (7, "scale-down")
    assert "not implemented" in warning.message
    assert "becomes live" in warning.message


def test_a_disabled_backup_scale_down_needs_no_warning() -> None:
    text = ha(
        "<shared-store><backup><scale-down><enabled>false</enabled></scale-down>"
        "</backup></shared-store>"
    )
    assert parse_config(text, environ={}).warnings == ()


@pytest.mark.parametrize(
    ("old", "new", "backup"), [("master", "primary", False), ("slave", "backup", True)]
)
def test_old_role_names_warn_and_mean_the_same(old: str, new: str, backup: bool) -> None:
    text = ha(
        f"<shared-store>\n<{old}><failover-on-shutdown>true</failover-on-shutdown></{old}>"
        "</shared-store>"
    )
    config = parse_config(text, environ={})
    assert config.ha_policy.shared_store == SharedStoreConfig(
        backup=backup, failover_on_shutdown=True
    )
    (warning,) = config.warnings
    assert (warning.line, warning.element) == (7, old)
    assert f"old name of <{new}>" in warning.message


def test_bad_values_are_reported_with_file_and_line() -> None:
    text = ha(
        "<shared-store><backup>\n"
        "<allow-failback>yes</allow-failback>\n"
        "<restart-backup>TRUE</restart-backup>\n"
        "<failover-on-shutdown>1</failover-on-shutdown>\n"
        "<allow-fail-back>true</allow-fail-back>\n"
        "</backup></shared-store>"
    )
    problems = problems_of(text)
    assert [(p.file, p.line, p.element) for p in problems] == [
        ("broker.xml", 7, "allow-failback"),
        ("broker.xml", 8, "restart-backup"),
        ("broker.xml", 9, "failover-on-shutdown"),
        ("broker.xml", 10, "allow-fail-back"),
    ]
    assert "lower case" in problems[1].message
    assert "allow-failback" in problems[3].message  # the closest valid name is suggested


def test_a_primary_element_in_a_backup_is_an_error() -> None:
    text = ha(
        "<shared-store><backup>\n<wait-for-activation>true</wait-for-activation>\n</backup></shared-store>"
    )
    (problem,) = problems_of(text)
    assert (problem.line, problem.element) == (7, "wait-for-activation")


def test_one_role_only() -> None:
    text = ha("<shared-store>\n<primary/>\n<backup/>\n</shared-store>")
    (problem,) = problems_of(text)
    assert (problem.line, problem.element) == (8, "backup")
    assert "takes one role" in problem.message


def test_no_role_runs_as_primary_only_with_a_warning() -> None:
    config = parse_config(ha("<shared-store/>"), environ={})
    assert config.ha_policy.policy is HAPolicy.PRIMARY_ONLY
    assert config.ha_policy.shared_store is None
    (warning,) = config.warnings
    assert "names no <primary> or <backup>" in warning.message


def test_deprecated_failback_delay_and_colocated_are_named() -> None:
    text = ha(
        "<shared-store><primary>\n<failback-delay>5000</failback-delay>\n</primary></shared-store>"
    )
    (warning,) = parse_config(text, environ={}).warnings
    assert "failback-delay (line 7)" in warning.message
    text = ha("<shared-store>\n<colocated/>\n</shared-store>")
    messages = [w.message for w in parse_config(text, environ={}).warnings]
    assert any("colocated (line 7)" in m for m in messages), messages
