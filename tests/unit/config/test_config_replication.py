"""``<ha-policy><replication>``: every element, Artemis's defaults, bad values, old names and
the cluster-connection the pair finds itself through."""

from __future__ import annotations

import pytest

from artemis_py.config import (
    ConfigFileError,
    ConfigProblem,
    HAPolicy,
    ReplicationConfig,
    parse_config,
)

CLUSTER = """<connectors>
  <connector name="self">tcp://a:61616</connector>
  <connector name="node-b">tcp://b:61616</connector>
</connectors>
<cluster-password>not-the-default</cluster-password>
<cluster-connections>
  <cluster-connection name="my-cluster"><address>a</address><connector-ref>self</connector-ref></cluster-connection>
  <cluster-connection name="other"><address>b</address><connector-ref>self</connector-ref></cluster-connection>
</cluster-connections>"""


def ha(body: str, cluster: str = CLUSTER) -> str:
    """A broker.xml whose ``<ha-policy>`` opens on line 12 (with ``CLUSTER``) and holds
    ``body``."""
    return (
        '<configuration xmlns="urn:activemq">\n'
        '<core xmlns="urn:activemq:core">\n'
        f"{cluster}\n"
        f"<ha-policy>{body}</ha-policy>\n"
        "</core>\n</configuration>\n"
    )


def problems_of(text: str) -> list[ConfigProblem]:
    with pytest.raises(ConfigFileError) as info:
        parse_config(text, "broker.xml", environ={})
    return list(info.value.problems)


def test_primary_defaults_are_artemis_s() -> None:
    config = parse_config(ha("<replication><primary/></replication>"), environ={})
    assert config.warnings == ()
    policy = config.ha_policy
    assert policy.policy is HAPolicy.REPLICATION
    assert (policy.shared_store, policy.scale_down) == (None, None)
    assert not policy.replication_backup
    assert not policy.shared_store_backup
    assert policy.replication == ReplicationConfig()
    # FileConfigurationParser with ActiveMQDefaultConfiguration and
    # ReplicatedPolicyConfiguration; an absent retry-replication-wait takes vote-retry-wait's.
    assert policy.replication == ReplicationConfig(
        backup=False,
        group_name=None,
        cluster_name=None,
        check_for_active_server=False,
        initial_replication_sync_timeout=30000,
        max_saved_replicated_journals_size=2,
        vote_on_replication_failure=False,
        quorum_size=-1,
        quorum_vote_wait=30,
        vote_retries=12,
        vote_retry_wait=5000,
        retry_replication_wait=5000,
    )


def test_backup_defaults_are_artemis_s() -> None:
    config = parse_config(ha("<replication><backup/></replication>"), environ={})
    assert config.warnings == ()
    assert config.ha_policy.replication_backup
    settings = config.ha_policy.replication
    assert settings == ReplicationConfig(backup=True)
    # ReplicaPolicyConfiguration: allow-failback false, restart-backup true (the schema
    # says true and false).
    assert settings is not None
    assert (settings.allow_failback, settings.restart_backup, settings.scale_down) == (
        False,
        True,
        None,
    )


def test_every_primary_element() -> None:
    text = ha(
        "<replication><primary>\n"
        "<group-name>pair-1</group-name>\n"
        "<cluster-name>other</cluster-name>\n"
        "<check-for-active-server>true</check-for-active-server>\n"
        "<initial-replication-sync-timeout>9000</initial-replication-sync-timeout>\n"
        "<max-saved-replicated-journals-size>-1</max-saved-replicated-journals-size>\n"
        "<vote-on-replication-failure>true</vote-on-replication-failure>\n"
        "<quorum-size>3</quorum-size>\n"
        "<vote-retries>0</vote-retries>\n"
        "<vote-retry-wait>1000</vote-retry-wait>\n"
        "<quorum-vote-wait>15</quorum-vote-wait>\n"
        "<retry-replication-wait>3000</retry-replication-wait>\n"
        "</primary></replication>"
    )
    config = parse_config(text, environ={})
    assert config.warnings == ()
    assert config.ha_policy.replication == ReplicationConfig(
        group_name="pair-1",
        cluster_name="other",
        check_for_active_server=True,
        initial_replication_sync_timeout=9000,
        max_saved_replicated_journals_size=-1,
        vote_on_replication_failure=True,
        quorum_size=3,
        vote_retries=0,
        vote_retry_wait=1000,
        quorum_vote_wait=15,
        retry_replication_wait=3000,
    )


def test_every_backup_element() -> None:
    text = ha(
        "<replication><backup>\n"
        "<group-name>pair-1</group-name>\n"
        "<cluster-name>my-cluster</cluster-name>\n"
        "<max-saved-replicated-journals-size>5</max-saved-replicated-journals-size>\n"
        "<restart-backup>false</restart-backup>\n"
        "<allow-failback>true</allow-failback>\n"
        "<initial-replication-sync-timeout>9000</initial-replication-sync-timeout>\n"
        "<vote-on-replication-failure>true</vote-on-replication-failure>\n"
        "<quorum-size>2</quorum-size>\n"
        "<vote-retries>-1</vote-retries>\n"
        "<vote-retry-wait>1000</vote-retry-wait>\n"
        "<retry-replication-wait>3000</retry-replication-wait>\n"
        "<quorum-vote-wait>15</quorum-vote-wait>\n"
        "</backup></replication>"
    )
    config = parse_config(text, environ={})
    assert config.warnings == ()
    assert config.ha_policy.replication == ReplicationConfig(
        backup=True,
        group_name="pair-1",
        cluster_name="my-cluster",
        max_saved_replicated_journals_size=5,
        restart_backup=False,
        allow_failback=True,
        initial_replication_sync_timeout=9000,
        vote_on_replication_failure=True,
        quorum_size=2,
        vote_retries=-1,
        vote_retry_wait=1000,
        retry_replication_wait=3000,
        quorum_vote_wait=15,
    )


def test_an_absent_retry_replication_wait_takes_vote_retry_wait_s_value() -> None:
    text = ha(
        "<replication><primary><vote-retry-wait>700</vote-retry-wait></primary></replication>"
    )
    settings = parse_config(text, environ={}).ha_policy.replication
    assert settings is not None
    assert (settings.vote_retry_wait, settings.retry_replication_wait) == (700, 700)


def test_an_empty_cluster_name_means_the_first_cluster_connection() -> None:
    text = ha("<replication><backup><cluster-name> </cluster-name></backup></replication>")
    settings = parse_config(text, environ={}).ha_policy.replication
    assert settings is not None
    assert settings.cluster_name is None


def test_a_backup_s_scale_down_is_parsed_and_named_as_not_implemented() -> None:
    text = ha(
        "<replication><backup>\n"
        "<scale-down><group-name>g</group-name>\n"
        "<connectors><connector-ref>node-b</connector-ref></connectors></scale-down>\n"
        "</backup></replication>"
    )
    config = parse_config(text, environ={})
    settings = config.ha_policy.replication
    assert settings is not None
    assert settings.scale_down is not None
    assert settings.scale_down.connectors == ("node-b",)
    assert settings.scale_down.group_name == "g"
    assert config.ha_policy.scale_down is None
    (warning,) = config.warnings
    assert (warning.line, warning.element) == (13, "scale-down")
    assert "replication backup's <scale-down> is not implemented" in warning.message


def test_a_disabled_backup_scale_down_needs_no_warning() -> None:
    text = ha(
        "<replication><backup><scale-down><enabled>false</enabled></scale-down>"
        "</backup></replication>"
    )
    assert parse_config(text, environ={}).warnings == ()


@pytest.mark.parametrize(
    ("old", "new", "backup"), [("master", "primary", False), ("slave", "backup", True)]
)
def test_old_role_names_warn_and_mean_the_same(old: str, new: str, backup: bool) -> None:
    text = ha(f"<replication>\n<{old}><quorum-size>2</quorum-size></{old}></replication>")
    config = parse_config(text, environ={})
    assert config.ha_policy.replication == ReplicationConfig(backup=backup, quorum_size=2)
    (warning,) = config.warnings
    assert (warning.line, warning.element) == (13, old)
    assert f"old name of <{new}>" in warning.message


def test_check_for_live_server_is_the_old_name() -> None:
    text = ha(
        "<replication><primary>\n<check-for-live-server>true</check-for-live-server>\n"
        "</primary></replication>"
    )
    config = parse_config(text, environ={})
    assert config.ha_policy.replication == ReplicationConfig(check_for_active_server=True)
    (warning,) = config.warnings
    assert (warning.line, warning.element) == (13, "check-for-live-server")
    assert "old name of <check-for-active-server>" in warning.message
    text = ha(
        "<replication><primary>\n<check-for-live-server>true</check-for-live-server>\n"
        "<check-for-active-server>true</check-for-active-server>\n</primary></replication>"
    )
    (problem,) = problems_of(text)
    assert (problem.line, problem.element) == (13, "check-for-live-server")


def test_bad_values_are_reported_with_file_and_line() -> None:
    text = ha(
        "<replication><primary>\n"
        "<check-for-active-server>yes</check-for-active-server>\n"
        "<initial-replication-sync-timeout>0</initial-replication-sync-timeout>\n"
        "<max-saved-replicated-journals-size>-2</max-saved-replicated-journals-size>\n"
        "<quorum-size>0</quorum-size>\n"
        "<vote-retries>-2</vote-retries>\n"
        "<vote-retry-wait>0</vote-retry-wait>\n"
        "<quorum-vote-wait>0</quorum-vote-wait>\n"
        "<retry-replication-wait>-1</retry-replication-wait>\n"
        "<quorum-size>2</quorum-size>\n"
        "<vote-on-replication-failure>TRUE</vote-on-replication-failure>\n"
        "<allow-failback>true</allow-failback>\n"
        "<quorum-sise>2</quorum-sise>\n"
        "</primary></replication>"
    )
    problems = problems_of(text)
    assert [(p.file, p.line, p.element) for p in problems] == [
        ("broker.xml", 13, "check-for-active-server"),
        ("broker.xml", 14, "initial-replication-sync-timeout"),
        ("broker.xml", 15, "max-saved-replicated-journals-size"),
        ("broker.xml", 16, "quorum-size"),
        ("broker.xml", 17, "vote-retries"),
        ("broker.xml", 18, "vote-retry-wait"),
        ("broker.xml", 19, "quorum-vote-wait"),
        ("broker.xml", 20, "retry-replication-wait"),
        ("broker.xml", 21, "quorum-size"),  # only once
        ("broker.xml", 22, "vote-on-replication-failure"),
        ("broker.xml", 23, "allow-failback"),  # a backup's element
        ("broker.xml", 24, "quorum-sise"),
    ]
    by_line = {p.line: p.message for p in problems}
    assert "at least 1" in by_line[14]
    assert "-1 or at least 0" in by_line[15]
    assert "-1 or at least 1" in by_line[16]
    assert "may appear only once" in by_line[21]
    assert "quorum-size" in by_line[24]  # the closest valid name is suggested


def test_a_primary_element_in_a_backup_is_an_error() -> None:
    text = ha(
        "<replication><backup>\n<check-for-active-server>true</check-for-active-server>\n"
        "</backup></replication>"
    )
    (problem,) = problems_of(text)
    assert (problem.line, problem.element) == (13, "check-for-active-server")


def test_one_role_only() -> None:
    text = ha("<replication>\n<primary/>\n<backup/>\n</replication>")
    (problem,) = problems_of(text)
    assert (problem.line, problem.element) == (14, "backup")
    assert "takes one role" in problem.message


def test_a_cluster_name_must_name_a_cluster_connection() -> None:
    text = ha(
        "<replication><backup>\n<cluster-name>my-clustr</cluster-name>\n</backup></replication>"
    )
    (problem,) = problems_of(text)
    assert (problem.file, problem.line, problem.element) == ("broker.xml", 13, "cluster-name")
    assert "no cluster-connection named 'my-clustr'" in problem.message
    assert "did you mean 'my-cluster'?" in problem.message


@pytest.mark.parametrize("cluster_name", ["", "<cluster-name>my-cluster</cluster-name>"])
def test_replication_needs_a_cluster_connection(cluster_name: str) -> None:
    connectors_only = CLUSTER[: CLUSTER.index("<cluster-password>")].rstrip()
    text = ha(f"<replication>\n<primary>{cluster_name}</primary></replication>", connectors_only)
    (problem,) = problems_of(text)
    assert (problem.file, problem.line, problem.element) == ("broker.xml", 8, "primary")
    assert "replication needs a <cluster-connection>" in problem.message
    assert "find each other" in problem.message


def test_no_role_runs_as_primary_only_with_a_warning() -> None:
    config = parse_config(ha("<replication/>"), environ={})
    assert config.ha_policy.policy is HAPolicy.PRIMARY_ONLY
    assert config.ha_policy.replication is None
    (warning,) = config.warnings
    assert "names no <primary> or <backup>" in warning.message


def test_colocated_is_named_and_the_node_runs_as_primary_only() -> None:
    config = parse_config(ha("<replication>\n<colocated/>\n</replication>"), environ={})
    assert config.ha_policy.policy is HAPolicy.PRIMARY_ONLY
    assert config.ha_policy.replication is None
    messages = [w.message for w in config.warnings]
    assert any("colocated (line 13)" in m for m in messages), messages
    assert any("runs as primary-only" in m for m in messages), messages


def test_deprecated_and_pluggable_quorum_elements_are_named() -> None:
    text = ha(
        "<replication><backup>\n<failback-delay>5000</failback-delay>\n"
        "<manager><class-name>x</class-name></manager>\n</backup></replication>"
    )
    (warning,) = parse_config(text, environ={}).warnings
    assert "failback-delay (line 13)" in warning.message
    assert "manager (line 14)" in warning.message
    text = ha(
        "<replication><primary>\n<coordination-id>peer</coordination-id>\n</primary></replication>"
    )
    (warning,) = parse_config(text, environ={}).warnings
    assert "coordination-id (line 13)" in warning.message
