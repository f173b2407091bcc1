"""The Kubernetes deployment's broker.xml (etc/kubernetes/) runs a cluster, unchanged.

Three nodes run the file and its JGroups stack as they are, each on a host of its own (a
network namespace, :mod:`.hosts`) with the environment a pod of the StatefulSet gets
(``POD_IP``, ``HOSTNAME``, the cluster password, the data volume) and an ``/etc/hosts`` in
which the headless Service's name resolves to the three pods, as the cluster DNS answers it
(``ip netns exec`` puts ``/etc/netns/NS/hosts`` in the namespace's place). The nodes find each
other by DNS_PING alone, form the cluster, and a node stopped as Kubernetes stops a pod
(SIGTERM) scales down with every receipted message.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from artemis_py.cluster.status import fetch_status

from .conftest import BrokerProcess, Client, _used_by_this_test, close_nodes, unique, wait_for
from .hosts import CLUSTER_PORT, STOMP_PORT, Host, Network, _make_network

DEPLOY = Path(__file__).resolve().parents[2] / "etc" / "kubernetes"
SERVICE = "artemis-py-cluster"  # the headless Service (services.yaml), DNS_PING's query
PASSWORD = "a secret of the test"
MESSAGES = 200


class Pod(BrokerProcess):
    """A node running etc/kubernetes/broker.xml on ``host`` with a pod's environment."""

    def __init__(self, directory: Path, host: Host) -> None:
        etc = directory / "etc"
        etc.mkdir(parents=True)
        for name in ("broker.xml", "jgroups-dns-ping.xml"):
            shutil.copy(DEPLOY / name, etc / name)
        super().__init__(directory, name=f"artemis-py-{host.index}", config_path=etc / "broker.xml")
        self.host = "0.0.0.0"  # where broker.xml's acceptors listen (what wait_ready looks for)
        self.port = STOMP_PORT
        self.address = host.address
        self.launcher = (
            *host.launcher,
            "env",
            f"POD_IP={host.address}",
            f"HOSTNAME={self.name}",
            f"ARTEMIS_CLUSTER_PASSWORD={PASSWORD}",
            f"ARTEMIS_DATA={directory / 'data'}",
        )

    def status(self) -> dict[str, Any] | None:
        try:
            return trio.run(
                lambda: fetch_status(
                    self.address,
                    CLUSTER_PORT,
                    cluster="artemis-py",
                    user="cluster-admin",
                    password=PASSWORD,
                )
            )
        except Exception:  # not up yet: the caller waits
            return None

    def client(self, **kwargs: Any) -> Client:
        return Client(STOMP_PORT, host=self.address, **kwargs)


@pytest.fixture
def pods(tmp_path: Path) -> Iterator[list[Pod]]:
    network: Network = _make_network(3)
    names = [Path("/etc/netns") / host.namespace for host in network.hosts]
    nodes: list[Pod] = []
    try:
        for host, etc in zip(network.hosts, names, strict=True):
            etc.mkdir(parents=True)
            records = "".join(f"{h.address} {SERVICE}\n" for h in network.hosts)
            (etc / "hosts").write_text(f"127.0.0.1 localhost\n{records}")
            nodes.append(Pod(tmp_path / f"pod{host.index}", host))
            _used_by_this_test.append((nodes[-1], 0))  # its log is attached to a failure
        yield nodes
    finally:
        errors = close_nodes(nodes)
        for etc in names:
            shutil.rmtree(etc, ignore_errors=True)
        leftovers = network.close()
        assert not leftovers, f"network left behind: {leftovers}"
        assert not errors, "\n".join(errors)


def bridges_up(node: Pod) -> int:
    data = node.status()
    return 0 if data is None else sum(1 for b in data["bridges"] if b["connected"])


def test_the_deployment_s_broker_xml_forms_a_cluster_by_dns_and_scales_down(
    pods: list[Pod],
) -> None:
    for node in pods:
        node.start()
    wait_for(
        lambda: all(bridges_up(n) == 2 for n in pods),
        30,
        0.2,
        message=lambda: f"every pod linked to both others: {[n.status() for n in pods]}",
    )
    leaving = pods[2]
    queue = f"/queue/{unique('orders')}"
    producer = leaving.client()
    for n in range(MESSAGES):
        producer.send(queue, f"order {n}", persistent="true")  # receipted: on the disk
    producer.conn.disconnect()

    assert leaving.stop() == 0  # SIGTERM, as Kubernetes stops a pod: scale down, exit 0
    assert "scale-down to node" in leaving.log()

    consumers = [node.client() for node in pods[:2]]
    for consumer in consumers:
        consumer.subscribe(queue)
    wait_for(
        lambda: sum(len(c.messages) for c in consumers) >= MESSAGES,
        30,
        message=lambda: f"{MESSAGES} messages, got {[len(c.messages) for c in consumers]}",
    )
    bodies = sorted(m.body for c in consumers for m in c.messages)
    assert bodies == sorted(f"order {n}" for n in range(MESSAGES))  # all there, none twice
    for consumer in consumers:
        consumer.conn.disconnect()
