"""Several hosts on one machine: a node per Linux network namespace, and partitions.

:class:`Network` builds a Linux bridge with an address of its own (so this test process
reaches every node through it) and, per node, a network namespace joined to the bridge by a
veth pair, with its own address in a /24 that no interface of the machine uses yet. Names
carry this process's pid, so parallel runs do not collide. :meth:`Network.close` removes
all of it (the namespaces take their veth ends with them) and reports what it could not.

:class:`HostNode` is a :class:`~cluster.conftest.ClusterNode` run with
``ip netns exec NAMESPACE``, listening on its own address with the ports of a production
node (STOMP 61613, cluster links 61616): every node the same ports, as on real hosts.

Partitions are routes inside the namespaces: :meth:`Network.cut` adds a ``blackhole`` route
in A's namespace towards B's address, so A's packets to B vanish while B's still reach A
(a one-way cut); both ways is two cuts. Established TCP connections are not reset: they
stall, as across a real partition, until heart-beats or the connection TTL give up on them.
:meth:`Network.heal` deletes the routes.

The ``hosts`` fixture (re-exported by ``conftest.py``) skips the test with the reason when
it cannot make namespaces (not root, no ``ip``); CI runs as root, so it runs there.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .conftest import Client, Cluster, ClusterNode, _used_by_this_test, make_cluster

STOMP_PORT = 61613
CLUSTER_PORT = 61616
_NET = "10.231"  # 10.231.X.0/24, X picked free at set-up

__all__ = ["CLUSTER_PORT", "STOMP_PORT", "Host", "HostCluster", "HostNode", "Network", "hosts"]


class NetworkError(Exception):
    """An ``ip`` command failed."""


def ip(*args: str, namespace: str | None = None) -> str:
    command = (
        ["ip", *args] if namespace is None else ["ip", "netns", "exec", namespace, "ip", *args]
    )
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=30)
    if done.returncode != 0:
        raise NetworkError(f"{' '.join(command)}: {done.stderr.strip()}")
    return done.stdout


@dataclass(frozen=True)
class Host:
    """One namespace on the bridge."""

    index: int
    namespace: str
    address: str
    veth: str  # the bridge's end of the pair; the namespace's end is called eth0

    @property
    def launcher(self) -> tuple[str, ...]:
        return ("ip", "netns", "exec", self.namespace)


def _free_subnet() -> str:
    """``10.231.X`` for an X no address of this machine is in (starting from the pid)."""
    used = ip("-o", "-4", "addr", "show")
    for step in range(250):
        candidate = f"{_NET}.{(os.getpid() + step) % 250 + 1}"
        if f" {candidate}." not in used:
            return candidate
    raise NetworkError(f"no free /24 in {_NET}.0.0/16")


class Network:
    """A bridge and ``count`` namespaces on it (see the module doc)."""

    def __init__(self, count: int) -> None:
        tag = os.getpid()
        self.bridge = f"apbr{tag}"
        self.prefix = f"artemis-py-{tag}-"
        self.subnet = _free_subnet()
        self.gateway = f"{self.subnet}.1"  # the bridge's (this process's) address
        self.hosts = [
            Host(i, f"{self.prefix}{i}", f"{self.subnet}.{10 + i}", f"apv{tag}n{i}")
            for i in range(count)
        ]
        self.cuts: set[tuple[int, int]] = set()

    def open(self) -> None:
        ip("link", "add", self.bridge, "type", "bridge")
        ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        for host in self.hosts:
            ip("netns", "add", host.namespace)
            ip(
                "link",
                "add",
                host.veth,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                host.namespace,
            )
            ip("link", "set", host.veth, "master", self.bridge, "up")
            ns = host.namespace
            ip("addr", "add", f"{host.address}/24", "dev", "eth0", namespace=ns)
            ip("link", "set", "eth0", "up", namespace=ns)
            ip("link", "set", "lo", "up", namespace=ns)  # a node's own address goes through lo

    def close(self) -> list[str]:
        """Remove everything; returns what is left over (should be nothing)."""
        links = self.links()
        for host in self.hosts:
            if host.veth in links:  # deletes both ends (a namespace's ends go lazily)
                try:
                    ip("link", "del", host.veth)
                except NetworkError:
                    pass  # reported below as a leftover
            if host.namespace in self.namespaces():
                try:
                    ip("netns", "del", host.namespace)
                except NetworkError:
                    pass  # reported below as a leftover
        if self.bridge in links:
            try:
                ip("link", "del", self.bridge)
            except NetworkError:
                pass
        return self.leftovers()

    def namespaces(self) -> list[str]:
        return [line.split()[0] for line in ip("netns", "list").splitlines() if line.strip()]

    def links(self) -> list[str]:
        # "7: NAME@PEER: <FLAGS> ..." or "7: NAME: <FLAGS> ..."
        return [line.split()[1].rstrip(":").split("@")[0] for line in ip("-o", "link").splitlines()]

    def leftovers(self) -> list[str]:
        ours = {self.bridge, *(h.veth for h in self.hosts)}
        return [n for n in self.namespaces() if n.startswith(self.prefix)] + [
            link for link in self.links() if link in ours
        ]

    # -- partitions ----------------------------------------------------------------------

    def cut(self, a: int, b: int) -> None:
        """Drop what host ``a`` sends to host ``b`` (one way)."""
        ip(
            "route",
            "add",
            "blackhole",
            f"{self.hosts[b].address}/32",
            namespace=self.hosts[a].namespace,
        )
        self.cuts.add((a, b))

    def cut_both(self, a: int, b: int) -> None:
        self.cut(a, b)
        self.cut(b, a)

    def isolate(self, a: int) -> None:
        """Cut host ``a`` from every other host, both ways (this process still reaches it)."""
        for b in range(len(self.hosts)):
            if b != a:
                self.cut_both(a, b)

    def heal(self, a: int | None = None, b: int | None = None) -> None:
        """Remove the cut ``a`` -> ``b``, or every cut when called without arguments."""
        targets = sorted(self.cuts) if a is None else [(a, b)]
        for x, y in targets:
            assert y is not None
            ip(
                "route",
                "del",
                "blackhole",
                f"{self.hosts[y].address}/32",
                namespace=self.hosts[x].namespace,
            )
            self.cuts.discard((x, y))


class HostNode(ClusterNode):
    """A cluster node in its own namespace, on its own address and the production ports.

    ``cluster_port`` (picked by :func:`make_cluster`) is ignored: every host uses
    :data:`CLUSTER_PORT`."""

    pick_ports = False

    def __init__(self, directory: Path, *, host: Host, cluster_port: int, **options: Any) -> None:
        super().__init__(directory, cluster_port=CLUSTER_PORT, **options)
        self.host = host.address
        self.launcher = host.launcher
        self.port = STOMP_PORT

    @property
    def url(self) -> str:
        return f"tcp://{self.host}:{self.port}"

    def client(self, **kwargs: Any) -> Client:
        """A stomp.py client of this node, on its host's address."""
        kwargs.setdefault("host", self.host)
        return super().client(**kwargs)


class HostCluster(Cluster):
    """The nodes of a cluster on a :class:`Network`."""

    network: Network


def _make_network(count: int) -> Network:
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (CI runs as root)")
    if shutil.which("ip") is None:
        pytest.skip("the 'ip' command (iproute2) is not installed")
    network = Network(count)
    try:
        network.open()
    except NetworkError as exc:
        leftovers = network.close()
        assert not leftovers, f"left behind after a failed set-up: {leftovers}"
        pytest.skip(f"cannot make network namespaces here: {exc}")
    return network


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[Callable[..., HostCluster]]:
    """``hosts(n, start=True, formed=True, **options)`` -> a cluster of ``n`` nodes, each on a
    host of its own (a network namespace), as :func:`make_cluster` makes them (``options``
    are its options); ``.network`` cuts and heals links. Nodes still running at the end of
    the test must stop cleanly; the network is removed even when the test fails."""
    made: list[HostCluster] = []
    counter = itertools.count(1)

    def factory(
        count: int, *, start: bool = True, formed: bool = True, **options: Any
    ) -> HostCluster:
        network = _make_network(count)
        node_options = options.pop("node_options", {})
        per_node = {i: {"host": network.hosts[i], **node_options.get(i, {})} for i in range(count)}
        nodes = HostCluster(
            make_cluster(
                tmp_path / f"hosts{next(counter)}",
                count,
                node_class=HostNode,
                node_options=per_node,
                **options,
            )
        )
        nodes.network = network
        made.append(nodes)
        for node in nodes:
            _used_by_this_test.append((node, 0))
        if start:
            nodes.start()
            if formed:
                nodes.wait_formed()
        return nodes

    yield factory
    errors: list[str] = []
    for nodes in made:
        errors.extend(nodes.close())
        leftovers = nodes.network.close()
        if leftovers:
            errors.append(f"network left behind: {leftovers}")
    assert not errors, "\n".join(errors)
