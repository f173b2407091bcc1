"""Partitions (issue 17 §5): three nodes on hosts of their own (network namespaces, see
hosts.py), under load, with links cut both ways, one way, and a node cut off from all.

The load is ``artemis-py check``'s own runner (:mod:`artemis_py.checker`) in a thread of
this process: a producer and a consumer per node, persistent messages with receipts,
client-individual ACKs with receipts. This process reaches every node through the bridge,
so the clients are never partitioned, only the nodes from each other. After each cut the
test waits until the nodes noticed (their bridges across it are down) and until the load
moved on; after the heal, until the cluster formed again and the bridges' backlogs drained.
At the end the checker's verdict must say: nothing receipted was lost, nothing unexpected;
duplicates are counted and printed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import trio

from artemis_py.checker import CheckOptions, History, Verdict, run_check
from artemis_py.client import BrokerUrl

from .conftest import (
    CLUSTER_ADDRESS_SETTINGS,
    DEFAULT_ADDRESSES,
    bridge,
    describe,
    status,
    unique,
    wait_for,
    wait_formed,
)
from .hosts import STOMP_PORT, HostCluster

PHASE = 100  # messages receipted and acknowledged between two steps
RATE = 150.0  # messages per second, all producers together (a 2-core machine)

# Redistribution at once (a backlog follows the consumers); no dead-lettering.
SETTINGS = CLUSTER_ADDRESS_SETTINGS.replace(
    "<max-delivery-attempts>3</max-delivery-attempts>",
    "<max-delivery-attempts>-1</max-delivery-attempts>\n"
    "        <redistribution-delay>0</redistribution-delay>",
)
assert SETTINGS != CLUSTER_ADDRESS_SETTINGS
EVERY_NODE_DIALS_EVERY_OTHER = {0: [1, 2], 1: [0, 2], 2: [0, 1]}


class Load:
    """The checker's runner in a thread, against every node, until :meth:`finish`."""

    def __init__(self, nodes: HostCluster) -> None:
        self.nodes = nodes
        self.queue = unique("partition")
        self.history = History(prefix=f"{self.queue} ")
        self.stop = threading.Event()
        self.failure: BaseException | None = None
        options = CheckOptions(
            urls=tuple(BrokerUrl(n.host, STOMP_PORT) for n in nodes),
            destination=f"/queue/{self.queue}",
            count=None,
            rate=RATE,
            timeout=30.0,  # the drain's quiet period: backlogs may wait for a bridge
            receipt_timeout=10.0,
            retry_interval=0.2,
        )
        self.thread = threading.Thread(target=self._run, args=(options,), daemon=True)
        self.thread.start()

    def _run(self, options: CheckOptions) -> None:
        try:
            trio.run(run_check, options, self.history, self.stop)
        except BaseException as exc:  # reported by the test's thread
            self.failure = exc

    def wait_progress(self, count: int = PHASE, timeout: float = 60) -> None:
        """Wait until ``count`` more messages were receipted and acknowledged."""
        receipted, acked = self.history.progress()

        def moved() -> bool:
            assert self.failure is None, f"the load failed: {self.failure!r}"
            now = self.history.progress()
            return now[0] >= receipted + count and now[1] >= acked + count

        wait_for(moved, timeout, 0.05, message=lambda: f"progress:\n{self.report()}")

    def report(self) -> str:
        verdict = self.history.verdict(len(self.nodes))
        with self.history.lock:
            errors = self.history.errors[-5:]
            events = self.history.events[:]
        return (
            f"{verdict.summary()}\nper node sent/receipted/delivered: "
            f"{list(zip(verdict.sent_to, verdict.receipted_by, verdict.received_from, strict=True))}"
            f"\nevents: {events}\nlast client errors: {errors}\n{describe(self.nodes)}"
        )

    def finish(self) -> Verdict:
        """Stop sending, drain, and return the verdict."""
        self.stop.set()
        self.thread.join(120)
        assert not self.thread.is_alive(), f"the checker did not finish:\n{self.report()}"
        assert self.failure is None, f"the load failed: {self.failure!r}"
        return self.history.verdict(len(self.nodes))


def ids(nodes: HostCluster) -> list[str]:
    return [status(n)["node_id"] for n in nodes]


def link_down(nodes: HostCluster, node_ids: list[str], a: int, b: int) -> Callable[[], bool]:
    """Whether node ``a``'s bridge to node ``b`` is not connected."""

    def down() -> bool:
        entry = bridge(status(nodes[a]), node_ids[b])
        return entry is None or not entry["connected"]

    down.__name__ = f"node{a}'s bridge to node{b} to go down"
    return down


def healed(nodes: HostCluster) -> None:
    """The cluster formed again, and no bridge holds a backlog."""
    wait_formed(nodes, timeout=60)

    def drained() -> bool:
        return all(b["depth"] == 0 for n in nodes for b in status(n)["bridges"])

    wait_for(
        drained, 60, 0.1, message=lambda: f"the bridges' backlogs to drain:\n{describe(nodes)}"
    )


def verdict_holds(load: Load) -> None:
    verdict = load.finish()
    summary = load.report()
    print(f"\n{summary}")
    assert verdict.receipted >= 4 * PHASE, summary  # the load really went on
    assert verdict.ok, summary  # nothing receipted lost, nothing unexpected


def cluster_of_three(hosts: Callable[..., HostCluster]) -> HostCluster:
    return hosts(
        3,
        static=EVERY_NODE_DIALS_EVERY_OTHER,
        address_settings=SETTINGS,
        addresses=DEFAULT_ADDRESSES,
    )


def test_a_link_cut_both_ways_then_one_way_heals_and_nothing_receipted_is_lost(
    hosts: Callable[..., HostCluster],
) -> None:
    nodes = cluster_of_three(hosts)
    network = nodes.network
    node_ids = ids(nodes)
    load = Load(nodes)
    try:
        load.wait_progress()

        network.cut_both(0, 1)
        load.history.event("cut 0<->1")
        wait_for(link_down(nodes, node_ids, 0, 1), 30, 0.1, message=lambda: describe(nodes))
        wait_for(link_down(nodes, node_ids, 1, 0), 30, 0.1, message=lambda: describe(nodes))
        load.wait_progress()
        network.heal()
        load.history.event("healed")
        healed(nodes)
        load.wait_progress()

        network.cut(0, 1)  # node0's packets to node1 vanish; node1's still reach node0
        load.history.event("cut 0->1")
        wait_for(link_down(nodes, node_ids, 0, 1), 30, 0.1, message=lambda: describe(nodes))
        load.wait_progress()
        network.heal()
        load.history.event("healed")
        healed(nodes)
        load.wait_progress()
    finally:
        load.stop.set()
    verdict_holds(load)


def test_a_node_cut_off_from_all_others_rejoins_and_nothing_receipted_is_lost(
    hosts: Callable[..., HostCluster],
) -> None:
    nodes = cluster_of_three(hosts)
    network = nodes.network
    node_ids = ids(nodes)
    load = Load(nodes)
    try:
        load.wait_progress()

        network.isolate(0)
        load.history.event("node0 isolated")
        for other in (1, 2):
            wait_for(link_down(nodes, node_ids, 0, other), 30, 0.1, message=lambda: describe(nodes))
            wait_for(link_down(nodes, node_ids, other, 0), 30, 0.1, message=lambda: describe(nodes))
        load.wait_progress()
        load.wait_progress()
        network.heal()
        load.history.event("healed")
        healed(nodes)
        load.wait_progress()
    finally:
        load.stop.set()
    verdict_holds(load)
