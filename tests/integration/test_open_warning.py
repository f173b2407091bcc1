"""A node with security off that listens beyond this machine says so at start (issue 28):
the samples bind 0.0.0.0 with <security-enabled>false</security-enabled>."""

from __future__ import annotations

WARNING = "security is disabled (<security-enabled>false</security-enabled>)"


def start_on(make_broker, host: str, **options):
    node = make_broker(start=False, **options)
    node.host = host  # where its acceptors listen (clients still come from 127.0.0.1)
    return node.start()


def test_security_off_on_every_address_warns_once_with_the_way_out(make_broker, raw_clients):
    node = start_on(make_broker, "0.0.0.0", extra_acceptors={"second": ""})
    log = node.log(since_start=True)
    assert log.count(WARNING) == 1, log
    line = next(line for line in log.splitlines() if WARNING in line)
    assert "WARNING" in line, line
    assert f"stomp on 0.0.0.0:{node.port}" in line, line
    assert f"second on 0.0.0.0:{node.extra_ports['second']}" in line, line
    assert "anyone who can reach it can send and consume messages without credentials" in line
    assert "<security-enabled>true</security-enabled>" in line, line
    assert "artemis-py user add" in line, line
    # And it is true: a client without credentials is let in.
    assert raw_clients(node).connect().command == "CONNECTED"


def test_security_off_on_loopback_only_is_quiet(make_broker):
    node = make_broker()
    assert "listening for STOMP on 127.0.0.1" in node.log()
    assert WARNING not in node.log()


def test_security_on_is_quiet(make_broker):
    node = start_on(make_broker, "0.0.0.0", security=True, users={"app": "secret"})
    assert "listening for STOMP on 0.0.0.0" in node.log()
    assert WARNING not in node.log()
