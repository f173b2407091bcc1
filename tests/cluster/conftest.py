"""Cluster integration-test harness: several real ``artemis-py run`` nodes linked in a cluster.

Built on ``tests/integration/conftest.py`` (its :class:`BrokerProcess`, :class:`Client` and
:func:`wait_for` are reused, not copied):

* :class:`ClusterNode` is a :class:`BrokerProcess` whose broker.xml also has a CORE acceptor
  for cluster links on a port chosen before any node starts (so that connectors can name each
  other), ``<connectors>`` for itself and every other node, the cluster credentials and one
  ``<cluster-connection name="test">`` with short retry / check-period / TTL settings.
* The ``cluster`` fixture is a factory: ``cluster(3, policy="STRICT")`` makes (and by
  default starts) three nodes with persistent data under ``tmp_path``. By default node ``i``
  lists only node 0 as its static connector and node 0 lists node 1, so every other link has
  to come from topology learning. ``static={0: [1], 1: [2]}`` and ``direct_only=True`` build
  chains instead.
* :func:`status` asks a node for its view of the cluster through the status API
  (``artemis_py.cluster.status.fetch_status``); :func:`wait_formed` and :func:`wait_binding`
  poll it. Consumer information travels asynchronously, so tests that rely on ON_DEMAND
  routing must :func:`wait_binding` for the consumer counts they need before sending.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from artemis_py.cluster.status import fetch_status
from artemis_py.config.tls_params import TlsParams, read_tls_params
from artemis_py.transport.link import LinkError
from integration.conftest import (  # the same module object pytest loaded for tests/integration
    DEFAULT_ADDRESS_SETTINGS,
    DEFAULT_ADDRESSES,
    BrokerProcess,
    Client,
    Running,  # noqa: F401 - re-exported: an artemis-py command in the background
    _used_by_this_test,
    artemis_py,
    clients,  # noqa: F401 - re-exported fixture: clients(node) -> Client, closed after the test
    close_nodes,
    free_port,
    node_command,  # noqa: F401 - re-exported: tests run the CLI from this checkout
    pytest_runtest_makereport,  # noqa: F401 - re-exported: attaches node logs to failures
    pytest_runtest_setup,  # noqa: F401 - re-exported: resets the per-test node list
    stays,
    unique,
    wait_for,
)

__all__ = [
    "DEFAULT_ADDRESSES",
    "FEW_DEPAGED",
    "SMALL_MEMORY",
    "Client",
    "ClusterNode",
    "binding",
    "bridge",
    "cli",
    "close_nodes",
    "status",
    "stays",
    "unique",
    "wait_binding",
    "wait_for",
    "wait_formed",
]

CLUSTER_NAME = "test"
CLUSTER_USER = "cluster-test"
CLUSTER_PASSWORD = "s3cret-for-tests-only"

# Persistent queues that survive their last consumer (so tests can create a queue on a node by
# subscribing and unsubscribing), plus the integration defaults (DLQ, auto-create).
CLUSTER_ADDRESS_SETTINGS = DEFAULT_ADDRESS_SETTINGS.replace(
    "<auto-create-addresses>true</auto-create-addresses>",
    "<auto-create-addresses>true</auto-create-addresses>\n"
    "        <auto-delete-queues>false</auto-delete-queues>\n"
    "        <auto-delete-addresses>false</auto-delete-addresses>",
)

# Paging in a cluster: the node's global limit makes every address page, store-and-forward
# ones included; FEW_DEPAGED keeps only a few paged messages in memory at a time, so what
# moves them (scale-down) goes round several times.
SMALL_MEMORY = "<global-max-size>24KiB</global-max-size>"
FEW_DEPAGED = CLUSTER_ADDRESS_SETTINGS.replace(
    "<auto-delete-queues>",
    "<max-read-page-messages>10</max-read-page-messages><auto-delete-queues>",
)


# The cluster connections' timing in tests: quick retries, a short connection-ttl (the
# in-process tier, tests/cluster_inprocess, uses the same).
LINK_TIMING = """<check-period>500</check-period>
        <connection-ttl>3000</connection-ttl>
        <call-timeout>2000</call-timeout>
        <retry-interval>100</retry-interval>
        <max-retry-interval>500</max-retry-interval>"""


class ClusterNode(BrokerProcess):
    """A node with a cluster acceptor and one cluster connection named ``test``."""

    def __init__(
        self,
        directory: Path,
        *,
        index: int,
        cluster_port: int,
        policy: str = "ON_DEMAND",
        max_hops: int = 1,
        address: str | None = None,
        direct_only: bool = False,
        user: str = CLUSTER_USER,
        password: str | None = CLUSTER_PASSWORD,
        cluster_extra: str = "",
        cluster_protocols: str = "CORE",
        cluster_name: str = CLUSTER_NAME,
        more_clusters: str = "",
        acceptor_tls: str = "",
        connector_tls: str = "",
        **options: Any,
    ) -> None:
        """``acceptor_tls`` / ``connector_tls``: TLS URL parameters (``key=value;...``) of
        the cluster acceptor and of every connector (this node's, as the dialling side)."""
        options.setdefault("persistence", True)
        options.setdefault("address_settings", CLUSTER_ADDRESS_SETTINGS)
        super().__init__(directory, name=f"node{index}", **options)
        self.index = index
        self.cluster_port = cluster_port
        self.policy = policy
        self.max_hops = max_hops
        self.address = address
        self.direct_only = direct_only
        self.user = user
        self.password = password  # None: no <cluster-password> element (Artemis's default)
        self.cluster_extra = cluster_extra
        self.cluster_protocols = cluster_protocols
        self.cluster_name = cluster_name
        self.more_clusters = more_clusters  # further <cluster-connection> elements
        self.acceptor_tls = acceptor_tls
        self.connector_tls = connector_tls
        self.peers: list[ClusterNode] = []  # every node of the cluster, self included
        self.static: list[int] = []  # indexes of the nodes in <static-connectors>

    @property
    def connector(self) -> str:
        return f"tcp://{self.host}:{self.cluster_port}"

    def cluster_xml(self) -> str:
        connectors = "\n".join(
            f'      <connector name="{"self" if p is self else p.name}">{p.connector}'
            f"{'?' + self.connector_tls if self.connector_tls else ''}</connector>"
            for p in self.peers
        )
        static = ""
        if self.static:
            refs = "\n".join(
                f"          <connector-ref>{self.peers[i].name}</connector-ref>"
                for i in self.static
            )
            attr = ' allow-direct-connections-only="true"' if self.direct_only else ""
            static = f"<static-connectors{attr}>\n{refs}\n        </static-connectors>"
        address = f"<address>{self.address}</address>" if self.address is not None else ""
        password = (
            f"<cluster-password>{self.password}</cluster-password>"
            if self.password is not None
            else ""
        )
        return f"""
    <connectors>
{connectors}
    </connectors>
    <cluster-user>{self.user}</cluster-user>
    {password}
    <cluster-connections>
      <cluster-connection name="{self.cluster_name}">
        {address}
        <connector-ref>self</connector-ref>
        {LINK_TIMING}
        <message-load-balancing>{self.policy}</message-load-balancing>
        <max-hops>{self.max_hops}</max-hops>
        {self.cluster_extra}
        {static}
      </cluster-connection>
      {self.more_clusters}
    </cluster-connections>
"""

    def broker_xml(self) -> str:
        xml = super().broker_xml()
        acceptor = (
            f'<acceptor name="cluster">tcp://{self.host}:{self.cluster_port}'
            f"?protocols={self.cluster_protocols}"
            f"{';' + self.acceptor_tls if self.acceptor_tls else ''}</acceptor>\n    </acceptors>"
        )
        assert xml.count("</acceptors>") == 1
        xml = xml.replace("</acceptors>", acceptor)
        return xml.replace("  </core>", self.cluster_xml() + "  </core>")

    def wait_ready(self, timeout: float = 20) -> None:
        super().wait_ready(timeout)
        needle = f"cluster links on {self.host}:{self.cluster_port}"
        wait_for(
            lambda: needle in self.log(since_start=True),
            timeout,
            message=lambda: f"{self.name}'s cluster acceptor; log:\n{self.log_tail()}",
        )

    def status(self, password: str | None = None) -> dict[str, Any]:
        return status(self, password=password)

    @property
    def status_tls(self) -> TlsParams | None:
        """How ``cluster status`` dials this node: its connectors' TLS parameters."""
        if not self.connector_tls:
            return None
        params = dict(kv.split("=", 1) for kv in self.connector_tls.split(";"))
        return read_tls_params(params, "connector").params

    def __repr__(self) -> str:
        return f"<{self.name} stomp={self.port} cluster={self.cluster_port}>"


# ---------------------------------------------------------------------------------------------
# the status API


cli = artemis_py  # ``cli(ARGS)``: run ``artemis-py ARGS`` from this checkout to the end


def status(
    node: ClusterNode, *, password: str | None = None, cluster: str | None = None
) -> dict[str, Any]:
    """The node's view of the cluster (its first, or ``cluster``; raises LinkError if it
    cannot be had)."""
    return trio.run(
        lambda: fetch_status(
            node.host,
            node.cluster_port,
            cluster=cluster or node.cluster_name,
            user=node.user,
            password=password if password is not None else (node.password or ""),
            tls=node.status_tls,
        )
    )


def try_status(node: ClusterNode) -> dict[str, Any] | None:
    try:
        return status(node)
    except LinkError:
        return None


def node_id(node: ClusterNode) -> str:
    """The node ID of a running node (from its status)."""
    return status(node)["node_id"]


def bridge(data: dict[str, Any], to: str) -> dict[str, Any] | None:
    """The bridge entry to node ``to`` (a node id) in a status dict."""
    return next((b for b in data["bridges"] if b["node_id"] == to), None)


def binding(data: dict[str, Any], queue: str, origin: str | None = None) -> list[dict[str, Any]]:
    """The remote bindings of ``queue`` (from node ``origin``, if given) in a status dict."""
    return [
        b
        for b in data["remote_bindings"]
        if b["queue"] == queue and (origin is None or b["origin"] == origin)
    ]


def formed(nodes: Sequence[ClusterNode]) -> bool | str:
    """Whether every node has a connected bridge to every other (a symmetric cluster)."""
    datas = [try_status(n) for n in nodes]
    if any(d is None for d in datas):
        return False
    ids = {d["node_id"] for d in datas if d is not None}
    if len(ids) != len(nodes):
        return False
    for d in datas:
        assert d is not None
        for other in ids - {d["node_id"]}:
            b = bridge(d, other)
            if b is None or not b["connected"]:
                return False
    return True


def describe(nodes: Sequence[ClusterNode]) -> str:
    lines = []
    for n in nodes:
        d = try_status(n)
        if d is None:
            lines.append(f"{n.name}: no status")
            continue
        lines.append(
            f"{n.name} ({d['node_id'][:8]}): members "
            f"{[(m['node_id'][:8], m['up'], m['bridge'], m['incoming']) for m in d['members']]}"
            f" bridges {[(b['node_id'][:8], b['connected'], b['depth']) for b in d['bridges']]}"
            f" bindings {[(b['queue'], b['origin'][:8], b['consumers']) for b in d['remote_bindings']]}"
        )
    return "\n".join(lines)


def wait_formed(nodes: Sequence[ClusterNode], timeout: float = 20) -> None:
    wait_for(
        lambda: formed(nodes),
        timeout,
        0.1,
        message=lambda: f"the cluster to form:\n{describe(nodes)}",
    )


def wait_binding(
    node: ClusterNode,
    queue: str,
    *,
    on: ClusterNode,
    consumers: int | None = None,
    timeout: float = 15,
    cluster: str | None = None,
) -> dict[str, Any]:
    """Wait until ``node`` knows ``on``'s queue ``queue`` (connected, with ``consumers``
    consumers if given; in its first cluster, or ``cluster``) and return that remote
    binding."""
    origin = node_id(on)

    def found() -> dict[str, Any] | None:
        for b in binding(status(node, cluster=cluster), queue, origin):
            if b["connected"] and (consumers is None or b["consumers"] == consumers):
                return b
        return None

    return wait_for(
        found,
        timeout,
        0.05,
        message=lambda: (
            f"{node.name} to see {queue} on {on.name} with {consumers} consumer(s): "
            f"{binding(status(node, cluster=cluster), queue)}"
        ),
    )


def consume_everywhere(
    nodes: Sequence[ClusterNode], connect: Callable[..., Client], queue: str
) -> list[Client]:
    """A consumer of ``/queue/<queue>`` on every node of ``nodes``, returned once the first
    node sees each of the others' bindings with its consumer."""
    consumers = [connect(n) for n in nodes]
    for c in consumers:
        c.subscribe(f"/queue/{queue}")
    for n in nodes[1:]:
        wait_binding(nodes[0], queue, on=n, consumers=1)
    return consumers


# ---------------------------------------------------------------------------------------------
# fixtures


class Cluster(list[ClusterNode]):
    """The nodes of one cluster (a list), with helpers."""

    def start(self, *indexes: int) -> None:
        for i in indexes or range(len(self)):
            self[i].start()

    def wait_formed(self, timeout: float = 20) -> None:
        wait_formed(self, timeout)

    def close(self) -> list[str]:
        return close_nodes(self)


def make_cluster(
    base: Path,
    count: int,
    *,
    static: dict[int, list[int]] | None = None,
    node_options: dict[int, dict[str, Any]] | None = None,
    node_class: type[ClusterNode] = ClusterNode,
    **options: Any,
) -> Cluster:
    """``count`` stopped nodes under ``base``. ``options`` apply to every node,
    ``node_options[i]`` to node i only; ``static`` maps a node to its static connectors;
    ``node_class`` makes the nodes (hosts.py's HostNode: one network namespace each)."""
    ports = [free_port() for _ in range(count)]
    nodes = Cluster()
    for i in range(count):
        opts = {**options, **(node_options or {}).get(i, {})}
        nodes.append(node_class(base / f"node{i}", index=i, cluster_port=ports[i], **opts))
    for i, node in enumerate(nodes):
        node.peers = list(nodes)
        if static is not None:
            node.static = list(static.get(i, []))
        else:
            node.static = [1] if i == 0 else [0]
    return nodes


def running(nodes: Cluster) -> Iterator[Cluster]:
    """For a module or session fixture: start ``nodes``, wait until they formed the
    cluster, yield them, and at the end check that each stops cleanly."""
    try:
        nodes.start()
        nodes.wait_formed()
        yield nodes
    finally:
        errors = nodes.close()
        assert not errors, "\n".join(errors)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """``cluster(n, start=True, formed=True, **options)`` -> a Cluster of n nodes (see
    :func:`make_cluster`); nodes still running at the end of the test must stop cleanly."""
    made: list[Cluster] = []
    counter = itertools.count(1)

    def factory(count: int, *, start: bool = True, formed: bool = True, **options: Any) -> Cluster:
        nodes = make_cluster(tmp_path / f"cluster{next(counter)}", count, **options)
        made.append(nodes)
        for node in nodes:
            _used_by_this_test.append((node, 0))
        if start:
            nodes.start()
            if formed:
                nodes.wait_formed()
        return nodes

    yield factory
    errors = [e for nodes in made for e in nodes.close()]
    assert not errors, "\n".join(errors)


def use_shared(nodes: Cluster) -> None:
    """Attach the shared nodes' logs (from now on) to the report if the test fails, and
    restart any node a previous test left stopped."""
    for node in nodes:
        if not node.running:
            node.start()
    for node in nodes:
        _used_by_this_test.append((node, node.log_path.stat().st_size))


# ---------------------------------------------------------------------------------------------
# the shared symmetric cluster

# node 1's queue "filtered" only takes red messages; nodes 0 and 2 have it without a filter.
FILTERED = "filtered"
FILTERED_QUEUE = f"""
      <address name="{FILTERED}">
        <anycast><queue name="{FILTERED}"><filter string="color = 'red'"/></queue></anycast>
      </address>"""
PLAIN_QUEUE = f"""
      <address name="{FILTERED}"><anycast><queue name="{FILTERED}"/></anycast></address>"""


@pytest.fixture(scope="session")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A symmetric three-node ON_DEMAND cluster shared by the tests that ask for ``nodes``;
    they use queue and topic names of their own (:func:`unique`) so that nothing leaks."""
    nodes = make_cluster(
        tmp_path_factory.mktemp("symmetric"),
        3,
        policy="ON_DEMAND",
        node_options={
            i: {"addresses": DEFAULT_ADDRESSES + (FILTERED_QUEUE if i == 1 else PLAIN_QUEUE)}
            for i in range(3)
        },
    )
    yield from running(nodes)


@pytest.fixture
def nodes(shared_cluster: Cluster) -> Cluster:
    """The shared cluster, running and formed (a node a test stopped is started again)."""
    use_shared(shared_cluster)
    shared_cluster.wait_formed()
    return shared_cluster


# -- messages --------------------------------------------------------------------------------


def numbers(client: Client) -> list[int]:
    return [int(m.body.split("-")[-1]) for m in client.messages]


def drain(consumers: list[Client], total: int, timeout: float = 15) -> list[list[int]]:
    """Wait until the consumers together have ``total`` messages, then make sure no more
    arrive (sync every consumer), and return each consumer's message numbers in order."""
    wait_for(
        lambda: sum(len(c.messages) for c in consumers) >= total,
        timeout,
        message=lambda: f"{total} messages, got {[numbers(c) for c in consumers]}",
    )
    for c in consumers:
        c.sync()
    return [numbers(c) for c in consumers]


def send_shared(
    producer: Client, destination: str, consumers: list[Client], count: int = 9
) -> list[list[int]]:
    """Send ``m-0`` .. ``m-<count-1>`` (persistent) to ``destination``; the consumers get
    them all, an equal share each (round robin). Returns each consumer's message numbers."""
    for i in range(count):
        producer.send(destination, f"m-{i}", persistent="true")
    got = drain(consumers, count)
    assert sorted(i for g in got for i in g) == list(range(count)), got
    assert [len(g) for g in got] == [count // len(consumers)] * len(consumers), got
    return got


# Nodes on hosts of their own (network namespaces) and partitions between them: hosts.py,
# which builds on this module (hence imported at its end).
from .hosts import hosts  # noqa: E402, F401 - re-exported fixture
