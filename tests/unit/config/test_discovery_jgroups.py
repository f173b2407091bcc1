"""A discovery/broadcast group's JGroups stack file: what is read, refused and ignored."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from artemis_py.config import ConfigFileError, load_config

BROKER = """<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">
<connectors><connector name="self">tcp://10.0.0.1:61616</connector></connectors>
<cluster-password>not-the-default</cluster-password>
<broadcast-groups><broadcast-group name="bg">
  <jgroups-file>{file}</jgroups-file><jgroups-channel>ch</jgroups-channel>
  <connector-ref>self</connector-ref>
</broadcast-group></broadcast-groups>
<discovery-groups><discovery-group name="dg">
  <jgroups-file>{file}</jgroups-file><jgroups-channel>ch</jgroups-channel>
</discovery-group></discovery-groups>
<cluster-connections><cluster-connection name="c">
  <connector-ref>self</connector-ref><discovery-group-ref discovery-group-name="dg"/>
</cluster-connection></cluster-connections>
</core></configuration>
"""


def write(tmp_path: Path, stack: str, file: str = "jgroups.xml") -> Path:
    (tmp_path / "etc").mkdir(exist_ok=True)
    (tmp_path / "etc" / "jgroups.xml").write_text(f"<config>\n{stack}\n</config>\n")
    broker = tmp_path / "etc" / "broker.xml"
    broker.write_text(BROKER.format(file=file))
    return broker


def test_file_ping_location_is_relative_to_the_stack_file(tmp_path: Path) -> None:
    broker = write(tmp_path, '<TCP bind_port="7800"/>\n<FILE_PING location="../ping"/>')
    config = load_config(broker, environ={})
    for group in (config.discovery_group("dg"), config.broadcast_group("bg")):
        assert group.jgroups is not None
        assert group.jgroups.protocol == "FILE_PING"
        assert group.jgroups.location == str(tmp_path / "ping")
    assert config.discovery_group("dg").endpoint == "jgroups:ch"


def test_dns_ping_and_substitution(tmp_path: Path) -> None:
    broker = write(
        tmp_path,
        '<TCP/>\n<dns.DNS_PING dns_query="${Q:brokers.ns.svc}" dns_record_type="aaaa"/>\n'
        '<MERGE3/><FD_ALL3/><pbcast.GMS join_timeout="2000"/>',
    )
    stack = load_config(broker, environ={"Q": "peers.local"}).discovery_group("dg").jgroups
    assert stack is not None
    assert (stack.protocol, stack.dns_query, stack.dns_record_type) == (
        "DNS_PING",
        "peers.local",
        "AAAA",
    )
    assert stack.ignored == ("TCP", "MERGE3", "FD_ALL3", "pbcast.GMS")


def test_other_protocols_are_one_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "artemis_py.config")
    broker = write(tmp_path, '<TCP/>\n<FILE_PING location="/x"/>\n<MERGE3/>\n<UNICAST3/>')
    config = load_config(broker, environ={})
    ignored = [w for w in config.warnings if "JGroups protocols ignored" in w.message]
    assert len(ignored) == 1  # one file, two groups: one warning
    assert ignored[0].file == str(tmp_path / "etc" / "jgroups.xml")
    assert ignored[0].message.endswith(": TCP, MERGE3, UNICAST3")


@pytest.mark.parametrize(
    ("stack", "line", "message"),
    [
        ('<TCP/>\n<TCPPING initial_hosts="a[7800]"/>', 3, "discovery protocol TCPPING is not"),
        ("<TCP/>\n<org.jgroups.protocols.kubernetes.KUBE_PING/>", 3, "KUBE_PING is not"),
        ("<TCP/>\n<MERGE3/>", 1, "no discovery protocol (FILE_PING or DNS_PING)"),
        ("<FILE_PING/>\n<DNS_PING dns_query='x'/>", 3, "one discovery protocol per stack"),
        ("<DNS_PING/>", 2, "needs dns_query"),
        ("<DNS_PING dns_query='x' dns_record_type='SRV'/>", 2, "record type SRV is not"),
        ("<FILE_PING location='${NOPE}'/>", 2, "NOPE"),
        ("<FILE_PING>", 3, "malformed XML"),
    ],
)
def test_unusable_stacks_are_errors_naming_the_file(
    tmp_path: Path, stack: str, line: int, message: str
) -> None:
    broker = write(tmp_path, stack)
    with pytest.raises(ConfigFileError) as info:
        load_config(broker, environ={})
    problems = info.value.problems
    assert problems
    assert all(p.file == str(tmp_path / "etc" / "jgroups.xml") for p in problems)
    assert problems[0].line == line
    assert message in problems[0].message


def test_an_unreadable_file_is_an_error_at_the_element(tmp_path: Path) -> None:
    broker = write(tmp_path, "", file="missing.xml")
    with pytest.raises(ConfigFileError) as info:
        load_config(broker, environ={})
    (first, second) = info.value.problems
    assert (first.file, first.line, first.element) == (str(broker), 5, "jgroups-file")
    assert "cannot read JGroups file" in first.message
    assert "missing.xml" in first.message
    assert second.line == 9
