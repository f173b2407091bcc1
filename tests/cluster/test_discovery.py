"""Discovery (clusters §3.1): nodes that list no static connectors find each other through
UDP multicast, a JGroups FILE_PING directory or a JGroups DNS_PING name, form the cluster
and route; a member that stops announcing itself is dropped after refresh-timeout."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

import integration.conftest as harness
from artemis_py.client import open_stomp_connection
from artemis_py.client.failover import open_cluster_connection
from artemis_py.protocol.discovery import MAGIC, Announcement, encode
from artemis_py.transport.link import LinkError

from .conftest import (
    ClusterNode,
    close_nodes,
    node_id,
    status,
    unique,
    wait_binding,
    wait_for,
    wait_formed,
)
from .test_client_failover import FAILOVER, SCALE_DOWN, consume_acking, remaining

REF = '<discovery-group-ref discovery-group-name="dg"/>'


def udp_group() -> tuple[str, int]:
    """A multicast group and port of this test's own."""
    address = f"239.255.{random.randrange(1, 255)}.{random.randrange(1, 255)}"
    return address, random.randrange(20000, 60000)


def udp_endpoint(group: tuple[str, int] | None = None) -> str:
    address, port = group or udp_group()
    return f"<group-address>{address}</group-address><group-port>{port}</group-port>"


def udp_groups(period: int = 200, refresh: int = 1500) -> str:
    return jgroups_or_udp(udp_endpoint(), period, refresh)


def groups_xml(
    broadcast: dict[str, str], discovery: dict[str, str], period: int = 200, refresh: int = 1500
) -> str:
    """Broadcast and discovery groups, by name -> endpoint."""
    bgs = "".join(
        f'<broadcast-group name="{name}">{endpoint}<broadcast-period>{period}'
        "</broadcast-period><connector-ref>self</connector-ref></broadcast-group>"
        for name, endpoint in broadcast.items()
    )
    dgs = "".join(
        f'<discovery-group name="{name}">{endpoint}<refresh-timeout>{refresh}'
        "</refresh-timeout><initial-wait-timeout>2000</initial-wait-timeout></discovery-group>"
        for name, endpoint in discovery.items()
    )
    return f"<broadcast-groups>{bgs}</broadcast-groups><discovery-groups>{dgs}</discovery-groups>"


def jgroups_or_udp(endpoint: str, period: int, refresh: int) -> str:
    return groups_xml({"bg": endpoint}, {"dg": endpoint}, period, refresh)


def discovered_in(node: ClusterNode, key: str = "discovery") -> list[str | None]:
    group = status(node)[key]
    return sorted(m["node_id"] for m in group["members"])


def discovered(node: ClusterNode) -> list[str | None]:
    return discovered_in(node)


def round_robin(nodes: list[ClusterNode], clients: Any) -> None:
    """STRICT round robin from node 0 reaches a consumer on every node."""
    queue = unique("disc")
    consumers = [clients(n) for n in nodes]
    for c in consumers:
        c.subscribe(f"/queue/{queue}")
    for n in nodes[1:]:
        wait_binding(nodes[0], queue, on=n, consumers=1)
    producer = clients(nodes[0])
    for i in range(3 * len(nodes)):
        producer.send(f"/queue/{queue}", f"m{i}")
    for c in consumers:
        c.wait_messages(3)


def test_udp_nodes_form_a_cluster_and_a_fourth_joins(cluster: Any, clients: Any) -> None:
    groups = udp_groups()
    nodes = cluster(
        4, start=False, static={}, policy="STRICT", extra_core=groups, cluster_extra=REF
    )
    nodes.start(0, 1, 2)
    wait_formed(nodes[:3])
    round_robin(nodes[:3], clients)
    ids = {node_id(n) for n in nodes[:3]}
    for n in nodes[:3]:
        assert set(discovered(n)) == ids - {node_id(n)}
    nodes.start(3)
    wait_formed(nodes)
    round_robin(list(nodes), clients)
    text = harness_render(nodes[0])
    assert "discovery group dg on udp://239.255." in text
    assert "3 member(s) found" in text


def harness_render(node: ClusterNode) -> str:
    from artemis_py.cli.cluster import render

    return render(status(node))


def test_a_member_that_stops_broadcasting_is_dropped(cluster: Any) -> None:
    nodes = cluster(3, static={}, extra_core=udp_groups(), cluster_extra=REF)
    wait_for(lambda: all(len(discovered(n)) == 2 for n in nodes), 10)
    frozen = node_id(nodes[2])
    assert nodes[2].process is not None
    nodes[2].process.send_signal(signal.SIGSTOP)
    try:
        wait_for(
            lambda: all(
                discovered(n) == sorted({node_id(m) for m in nodes[:2]} - {node_id(n)})
                for n in nodes[:2]
            ),
            10,
            message=lambda: f"node 2 ({frozen}) dropped: {[discovered(n) for n in nodes[:2]]}",
        )
        assert "not heard of for 1.5 s: dropped" in nodes[0].log()
    finally:
        nodes[2].process.send_signal(signal.SIGCONT)
    # It broadcasts again: found again.
    wait_for(lambda: frozen in discovered(nodes[0]), 10)


def test_garbage_and_strangers_on_the_group_port_are_ignored_with_a_warning(
    cluster: Any, clients: Any
) -> None:
    """Datagrams on the group's address and port that are not this group's announcements
    (garbage, another format, another group's) are logged, rate-limited per sender and
    reason, and change nothing: the cluster stays formed and serves clients."""
    group = udp_group()
    endpoint = udp_endpoint(group)
    nodes = cluster(
        2,
        static={},
        policy="STRICT",
        formed=False,
        extra_core=groups_xml({"bg": endpoint}, {"dg": endpoint}),
        cluster_extra=REF,
    )
    wait_formed(nodes)
    ids = {node_id(n) for n in nodes}
    stranger = Announcement("udp://239.255.0.1:9999", "stranger", (("127.0.0.1", 1),))
    reasons = {
        bytes(range(256)) * 2: "not an artemis-py announcement (another format or program)",
        b'{"type": "announce", "node": "x"}': "not an artemis-py announcement",
        b"APY": "too short for an announcement (3 bytes)",
        MAGIC + b"\x02" + bytes(8) + b"\xff\xff": "truncated",
        encode(stranger): "an announcement for 'udp://239.255.0.1:9999'",
    }
    burst = 50
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        for _ in range(burst):
            for data in reasons:
                sock.sendto(data, group)
        port = sock.getsockname()[1]

        def lines(node: ClusterNode, reason: str) -> list[str]:
            return [
                line
                for line in node.log(since_start=True).splitlines()
                if "WARNING" in line and f":{port} sent on udp://" in line and reason in line
            ]

        for n in nodes:
            wait_for(
                lambda n=n: all(lines(n, r) for r in reasons.values()),
                10,
                message=lambda n=n: f"{n.name}'s warnings; log:\n{n.log_tail()}",
            )
        # Rate-limited: a burst is one line (two if it straddled a second), not 50.
        for n in nodes:
            for reason in reasons.values():
                assert 1 <= len(lines(n, reason)) <= 2, lines(n, reason)

        # One more after the first gap: the line says how many went unlogged meanwhile.
        def summed_up() -> bool:
            sock.sendto(b"APY", group)
            return any("more time(s)" in line for line in lines(nodes[0], "too short"))

        wait_for(summed_up, 10, 0.2, message=lambda: nodes[0].log_tail())

    # Nothing changed: the members are the two nodes, the cluster still routes.
    for n in nodes:
        assert discovered(n) == sorted(ids - {node_id(n)})
        assert n.running
        assert "Traceback" not in n.log()
    wait_formed(nodes)
    round_robin(list(nodes), clients)


def test_file_ping_three_nodes(cluster: Any, clients: Any, tmp_path: Path) -> None:
    stack = tmp_path / "jgroups.xml"
    stack.write_text(
        '<config>\n<TCP bind_port="7800"/>\n'
        f'<FILE_PING location="{tmp_path / "ping"}"/>\n<MERGE3/>\n</config>\n'
    )
    endpoint = f"<jgroups-file>{stack}</jgroups-file><jgroups-channel>c1</jgroups-channel>"
    groups = jgroups_or_udp(endpoint, 200, 1500)
    nodes = cluster(
        3, static={}, policy="STRICT", formed=False, extra_core=groups, cluster_extra=REF
    )
    wait_formed(nodes)
    round_robin(list(nodes), clients)
    files = sorted(p.name for p in (tmp_path / "ping" / "c1").iterdir())
    assert files == sorted(f"{node_id(n)}.list" for n in nodes)
    assert "JGroups protocols ignored" in nodes[0].log()
    assert "TCP, MERGE3" in nodes[0].log()
    gone = node_id(nodes[2])
    nodes[2].stop()  # removes its file
    assert not (tmp_path / "ping" / "c1" / f"{gone}.list").exists()
    wait_for(lambda: gone not in discovered(nodes[0]), 10)


# --- DNS_PING: nodes on 127.0.0.2-4, one port, a name resolving to all three -------------


def _unshare_works() -> str | None:
    if shutil.which("unshare") is None:
        return "unshare is not installed"
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount --bind /etc/hosts /etc/hosts && true"],
        capture_output=True,
        check=False,
    )
    if probe.returncode != 0:
        return f"unshare -m / mount --bind is not permitted here: {probe.stderr.decode()[:200]}"
    return None


class DnsNode(ClusterNode):
    """A node on its own loopback address, whose process sees ``hosts`` as /etc/hosts."""

    def __init__(self, directory: Path, *, host: str, hosts: Path, **options: Any) -> None:
        super().__init__(directory, **options)
        self.host, self.hosts = host, hosts

    @property
    def connector(self) -> str:
        return f"tcp://{self.host}:{self.cluster_port}"

    def broker_xml(self) -> str:
        return (
            super()
            .broker_xml()
            .replace(
                f"tcp://127.0.0.1:{self.cluster_port}?", f"tcp://{self.host}:{self.cluster_port}?"
            )
        )

    def wait_ready(self, timeout: float = 20) -> None:
        harness.BrokerProcess.wait_ready(self, timeout)
        needle = f"cluster links on {self.host}:{self.cluster_port}"
        wait_for(lambda: needle in self.log(since_start=True), timeout)

    def _spawn(self) -> None:
        # The node runs in a mount namespace of its own with the test's /etc/hosts.
        original = harness.node_command

        def wrapped() -> tuple[list[str], dict[str, str]]:
            command, env = original()
            script = f'mount --bind "{self.hosts}" /etc/hosts && exec "$@"'
            return ["unshare", "-m", "sh", "-c", script, "sh", *command], env

        harness.node_command = wrapped
        try:
            super()._spawn()
        finally:
            harness.node_command = original


class NamedDnsNode(DnsNode):
    """A DNS node whose connector names its host (``nodeN.brokers.test``, in ``hosts``), as
    a Kubernetes pod's does; it listens on the address the name maps to."""

    @property
    def connector(self) -> str:
        return f"tcp://node{self.index}.brokers.test:{self.cluster_port}"


def _dns_nodes(tmp_path: Path, named: bool, extra_core: str = "") -> Iterator[list[DnsNode]]:
    reason = _unshare_works()
    if reason is not None:
        pytest.skip(reason)
    hosts = tmp_path / "hosts"
    hosts.write_text(
        "127.0.0.1 localhost\n"
        + "".join(f"127.0.0.{i} brokers.test.svc\n" for i in (2, 3, 4))
        + "".join(f"127.0.0.{i + 2} node{i}.brokers.test\n" for i in range(3))
    )
    stack = tmp_path / "jgroups.xml"
    stack.write_text('<config>\n<TCP/>\n<dns.DNS_PING dns_query="brokers.test.svc"/>\n</config>\n')
    endpoint = f"<jgroups-file>{stack}</jgroups-file><jgroups-channel>c</jgroups-channel>"
    groups = (
        "<discovery-groups><discovery-group name='dg'>"
        f"{endpoint}<refresh-timeout>1500</refresh-timeout>"
        "<initial-wait-timeout>2000</initial-wait-timeout>"
        "</discovery-group></discovery-groups>"
    )
    port = harness.free_port()
    node_class = NamedDnsNode if named else DnsNode
    nodes = [
        node_class(
            tmp_path / f"node{i}",
            index=i,
            cluster_port=port,
            host=f"127.0.0.{i + 2}",
            hosts=hosts,
            extra_core=groups + extra_core,
            cluster_extra=REF,
            policy="STRICT",
        )
        for i in range(3)
    ]
    for n in nodes:
        n.peers = list(nodes)
        harness._used_by_this_test.append((n, 0))
    try:
        yield nodes
    finally:
        errors = close_nodes(nodes)
        assert not errors, "\n".join(errors)


@pytest.fixture
def dns_nodes(tmp_path: Path) -> Iterator[list[DnsNode]]:
    yield from _dns_nodes(tmp_path, named=False)


@pytest.fixture
def named_dns_nodes(tmp_path: Path) -> Iterator[list[DnsNode]]:
    scale_down = (
        "<ha-policy><primary-only><scale-down>"
        '<discovery-group-ref discovery-group-name="dg"/>'
        "</scale-down></primary-only></ha-policy>"
    )
    yield from _dns_nodes(tmp_path, named=True, extra_core=scale_down)


def dns_formed(nodes: list[DnsNode]) -> bool:
    try:
        datas = [status(n) for n in nodes]
    except LinkError:
        return False
    return all(sum(b["connected"] for b in d["bridges"]) == len(nodes) - 1 for d in datas)


def test_dns_ping_three_nodes(dns_nodes: list[DnsNode], clients: Any) -> None:
    for n in dns_nodes:
        n.start()

    wait_for(
        lambda: dns_formed(dns_nodes),
        20,
        0.1,
        message=lambda: str([status(n) for n in dns_nodes]),
    )
    group = status(dns_nodes[0])["discovery"]
    assert sorted(m["connector"] for m in group["members"]) == [
        f"127.0.0.3:{dns_nodes[0].cluster_port}",
        f"127.0.0.4:{dns_nodes[0].cluster_port}",
    ]
    assert os.path.exists("/etc/hosts")  # the test's own namespace was not touched
    assert "brokers.test.svc" not in Path("/etc/hosts").read_text()


def test_a_dns_ping_name_that_does_not_resolve_is_a_warning_and_the_node_serves(
    cluster: Any, clients: Any, tmp_path: Path
) -> None:
    """A DNS_PING name with no addresses (``.invalid`` never resolves, RFC 6761): the
    node warns naming it, keeps trying (each period; logged ever less often), and serves
    clients meanwhile."""
    name = "artemis-py-test.invalid"
    stack = tmp_path / "jgroups.xml"
    stack.write_text(f'<config>\n<TCP/>\n<dns.DNS_PING dns_query="{name}"/>\n</config>\n')
    endpoint = f"<jgroups-file>{stack}</jgroups-file><jgroups-channel>c</jgroups-channel>"
    groups = (
        f"<discovery-groups><discovery-group name='dg'>{endpoint}"
        "<refresh-timeout>1000</refresh-timeout><initial-wait-timeout>500</initial-wait-timeout>"
        "</discovery-group></discovery-groups>"
    )
    (node,) = cluster(1, static={}, formed=False, extra_core=groups, cluster_extra=REF)
    needle = f"discovery group dg: cannot resolve '{name}'"

    def warnings() -> list[str]:
        return [line for line in node.log(since_start=True).splitlines() if needle in line]

    # Resolved every 0.5 s (half the refresh-timeout); the second line comes after the
    # first gap of the log back-off, with the failures not logged in between.
    wait_for(lambda: len(warnings()) >= 2, 15, message=lambda: node.log_tail())
    assert "WARNING" in warnings()[0]
    assert "more time(s) since the last such line" in warnings()[1]
    queue = unique("dns-down")
    consumer, producer = clients(node), clients(node)
    consumer.subscribe(f"/queue/{queue}")
    producer.send(f"/queue/{queue}", "served")
    assert [m.body for m in consumer.wait_messages(1)] == ["served"]
    assert node.running
    assert status(node)["discovery"]["members"] == []


def test_scale_down_target_is_a_discovered_member(cluster: Any, clients: Any) -> None:
    """Node 2 scales down through a discovery group of its own, on which only the node
    with the highest id of the other two announces itself: that node is the target (without
    discovery it would be the lowest id among the cluster's members)."""
    main, second = udp_endpoint(), udp_endpoint()
    scale_down = (
        "<ha-policy><primary-only><scale-down>"
        '<discovery-group-ref discovery-group-name="sd"/>'
        "</scale-down></primary-only></ha-policy>"
    )
    nodes = cluster(
        3,
        static={},
        formed=False,
        extra_core=groups_xml({"bg": main}, {"dg": main}),
        cluster_extra=REF,
        node_options={
            2: {"extra_core": groups_xml({"bg": main}, {"dg": main, "sd": second}) + scale_down}
        },
    )
    wait_formed(nodes)
    target_node = max(nodes[:2], key=node_id)
    target_node.stop()
    target_node.extra_core = groups_xml({"bg": main, "bg2": second}, {"dg": main})
    target_node.start()
    wait_formed(nodes)
    target = node_id(target_node)
    wait_for(lambda: discovered_in(nodes[2], "scale_down_discovery") == [target], 10)
    queue = unique("moved")
    producer = clients(nodes[2])
    for i in range(5):
        producer.send(f"/queue/{queue}", f"m{i}")
    producer.disconnect()
    assert nodes[2].stop() == 0
    log = nodes[2].log(since_start=True)
    assert f"scale-down to node {target}" in log, log[-3000:]
    assert "moved 5 message(s)" in log, log[-3000:]
    consumer = clients(target_node)
    consumer.subscribe(f"/queue/{queue}")
    assert sorted(m.body for m in consumer.wait_messages(5)) == [f"m{i}" for i in range(5)]


# --- a udp:// client -------------------------------------------------------------------------


async def udp_client(
    url: str, nodes: Any, queue: str, count: int, async_wait_for: Any
) -> dict[str, Any]:
    """A producer and a consumer on ``url``; the producer's node is stopped (in a thread)
    after a quarter of the messages were receipted."""
    result: dict[str, Any] = {"acked": [], "received": []}
    destination = f"/queue/{queue}"
    reading = trio.CancelScope()

    async with open_cluster_connection(url) as producer, open_cluster_connection(url) as consumer:
        assert producer.url is not None
        victim = next(n for n in nodes if n.port == producer.url.port)
        await async_wait_for(lambda: len(producer.locator.topology) == 3, message="topology")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume_acking, consumer, destination, result, reading)
            for number in range(count):
                await producer.send(destination, f"m{number}", headers={"persistent": "true"})
                if number == count // 4:
                    nursery.start_soon(trio.to_thread.run_sync, victim.stop)
            result["failovers"] = producer.failovers
            result["victim"] = victim
            reading.cancel()
    return result


def test_a_udp_client_finds_the_cluster_and_fails_over_across_a_scale_down(
    cluster: Any, clients: Any, request: pytest.FixtureRequest
) -> None:
    group = udp_group()
    endpoint = udp_endpoint(group)
    nodes = cluster(
        3,
        static={},
        formed=False,
        extra_core=groups_xml({"bg": endpoint}, {"dg": endpoint}) + SCALE_DOWN,
        cluster_extra=REF,
    )
    wait_formed(nodes)
    url = f"udp://{group[0]}:{group[1]}?initialWaitTimeout=5000&{FAILOVER}"
    queue = unique("udp")
    count = 200
    result = trio.run(
        udp_client, url, list(nodes), queue, count, request.getfixturevalue("wait_for")
    )
    assert result["failovers"] == 1
    acked = result["acked"]
    unsure = set(result["received"]) - set(acked)
    survivors = [n for n in nodes if n is not result["victim"]]
    left = remaining(clients, survivors, queue, count - len(acked) - len(unsure), len(unsure))
    stored = Counter(acked + left)
    assert set(stored) | unsure == {f"m{n}" for n in range(count)}  # nothing lost
    assert max(stored.values()) == 1  # nothing stored twice


async def send_to(node: DnsNode, queue: str, count: int) -> None:
    async with open_stomp_connection(node.host, node.port) as conn:
        for i in range(count):
            await conn.send(f"/queue/{queue}", f"m{i}", headers={"persistent": "true"})


async def consume_from(nodes: list[DnsNode], queue: str, count: int) -> list[str]:
    """Every message of ``queue`` on ``nodes`` (ACKed), once ``count`` have come."""
    bodies: list[str] = []
    done = trio.Event()

    async def consume(node: DnsNode) -> None:
        async with open_stomp_connection(node.host, node.port) as conn:
            subscription = await conn.subscribe(f"/queue/{queue}", ack="client-individual")
            async for message in subscription:
                bodies.append(message.text)
                await conn.ack(message)
                if len(bodies) >= count:
                    done.set()

    async with trio.open_nursery() as nursery:
        for node in nodes:
            nursery.start_soon(consume, node)
        with trio.move_on_after(20):
            await done.wait()
        nursery.cancel_scope.cancel()
    return bodies


def test_dns_ping_scale_down_finds_a_target_whose_connector_is_a_name(
    named_dns_nodes: list[DnsNode],
) -> None:
    """DNS_PING knows the members by address (127.0.0.x) while their connectors name
    hosts (nodeN.brokers.test): the scale-down still finds its target, nothing is lost."""
    nodes = named_dns_nodes
    for n in nodes:
        n.start()
    wait_for(lambda: dns_formed(nodes), 20, 0.1, message=lambda: str([status(n) for n in nodes]))
    members = status(nodes[0])["discovery"]["members"]
    assert sorted(m["connector"].split(":")[0] for m in members) == ["127.0.0.3", "127.0.0.4"]
    survivors = {node_id(n) for n in nodes[:2]}
    queue = unique("dns")
    trio.run(send_to, nodes[2], queue, 20)
    assert nodes[2].stop() == 0
    log = nodes[2].log(since_start=True)
    assert "moved 20 message(s)" in log, log[-3000:]
    assert any(f"scale-down to node {s} at tcp://node" in log for s in survivors), log[-3000:]
    bodies = trio.run(consume_from, nodes[:2], queue, 20)
    assert sorted(bodies) == sorted(f"m{i}" for i in range(20))
