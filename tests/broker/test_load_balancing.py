"""Server-side load balancing (clusters §4), without sockets: local queues and remote
bindings of one address, and the policies' choices."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from artemis_py.broker.duplicate_cache import DuplicateIDCache
from artemis_py.broker.filter import Filter
from artemis_py.broker.message import Message
from artemis_py.broker.queue import Queue
from artemis_py.broker.records import DUPLICATE_ID_RECORD
from artemis_py.broker.routing.load_balancing import RoundRobin, route
from artemis_py.broker.routing.post_office import Address, PostOffice
from artemis_py.broker.routing.remote_binding import NeighbourRoute, RemoteQueueBinding
from artemis_py.cluster.retry import RetryPolicy
from artemis_py.cluster.topology import DuplicateNodeIdError, Member, Topology
from artemis_py.config import ClusterConnectionConfig, MessageLoadBalancing, RoutingType
from artemis_py.storage import Op

ANY = RoutingType.ANYCAST
MULTI = RoutingType.MULTICAST
ON_DEMAND = MessageLoadBalancing.ON_DEMAND
STRICT = MessageLoadBalancing.STRICT
OFF = MessageLoadBalancing.OFF


@dataclass(eq=False)
class Consumer:
    selector: Filter | None = None

    def has_credit(self) -> bool:
        return False  # the tests route; nothing is delivered

    def deliver(self, ref: object) -> None:  # pragma: no cover
        raise AssertionError


def local(
    name: str, routing: RoutingType = ANY, *, consumers: int = 0, address: str = "a"
) -> Queue:
    queue = Queue(1, name, address, routing)
    for _ in range(consumers):
        queue.add_consumer(Consumer())
    return queue


def remote(
    node: str,
    queue: str = "a",
    routing: RoutingType = ANY,
    *,
    consumers: tuple[str | None, ...] = (),
    connected: bool = True,
    filter: str | None = None,
) -> RemoteQueueBinding:
    return RemoteQueueBinding(
        name=f"{queue}@{node}",
        queue_name=queue,
        address="a",
        routing_type=routing,
        filter=Filter.parse(filter),
        filter_text=filter,
        distance=1,
        origin_node_id=node,
        name_on_neighbour=queue,
        route=NeighbourRoute(node, local(f"sf.{node}"), connected),
        consumers=tuple(Filter.parse(s) for s in consumers),
        consumer_texts=consumers,
    )


def message(**props: str) -> Message:
    return Message(1, "a", properties=tuple(props.items()))


def targets(queues: list[Queue], bindings: list[RemoteQueueBinding]) -> list[str]:
    return [q.name for q in queues] + [b.route.node_id for b in bindings]


def run(policy, local_queues, bindings, count, msg=None, routing=ANY):  # type: ignore[no-untyped-def]
    rr = RoundRobin()
    msg = msg or message()
    return [
        targets(*route("a", routing, local_queues, bindings, msg.filter_value, policy, rr))
        for _ in range(count)
    ]


def test_round_robin_over_local_and_remote_queues_with_consumers() -> None:
    got = run(
        ON_DEMAND,
        [local("a", consumers=1)],
        [remote("B", consumers=(None,)), remote("C", consumers=(None,))],
        6,
    )
    assert got == [["a"], ["B"], ["C"], ["a"], ["B"], ["C"]]


def test_on_demand_keeps_messages_local_when_nobody_consumes() -> None:
    assert run(ON_DEMAND, [local("a")], [remote("B"), remote("C")], 3) == [["a"]] * 3


def test_on_demand_forwards_only_to_nodes_with_consumers() -> None:
    got = run(ON_DEMAND, [local("a")], [remote("B"), remote("C", consumers=(None,))], 3)
    assert got == [["C"]] * 3


def test_strict_round_robins_without_consumers() -> None:
    got = run(STRICT, [local("a")], [remote("B"), remote("C")], 6)
    assert got == [["a"], ["B"], ["C"], ["a"], ["B"], ["C"]]


def test_a_disconnected_node_is_not_chosen_while_a_connected_one_matches() -> None:
    got = run(STRICT, [], [remote("B", connected=False), remote("C")], 3)
    assert got == [["C"]] * 3


def test_a_single_binding_always_gets_the_message() -> None:
    assert run(ON_DEMAND, [], [remote("B", connected=False)], 2) == [["B"]] * 2


def test_consumer_selectors_decide_on_demand_targets() -> None:
    bindings = [
        remote("B", consumers=("color = 'red'",)),
        remote("C", consumers=("color = 'blue'",)),
    ]
    assert run(ON_DEMAND, [local("a")], bindings, 2, message(color="blue")) == [["C"]] * 2
    assert run(ON_DEMAND, [local("a")], bindings, 1, message(color="green")) == [["a"]]


def test_queue_filters_decide_candidates() -> None:
    bindings = [remote("B", filter="color = 'red'"), remote("C")]
    assert run(STRICT, [], bindings, 2, message(color="blue")) == [["C"]] * 2


def test_off_never_forwards_anycast() -> None:
    got = run(OFF, [local("a")], [remote("B", consumers=(None,))], 2)
    assert got == [["a"]] * 2


def test_every_multicast_subscription_name_gets_one_copy() -> None:
    subs = [local("s1", MULTI, consumers=1)]
    bindings = [
        remote("B", "s1", MULTI, consumers=(None,)),
        remote("B", "s2", MULTI),
        remote("C", "s3", MULTI),
    ]
    got = run(ON_DEMAND, subs, bindings, 2, routing=MULTI)
    # s1 is shared by this node and B (round robin); s2 and s3 exist once each.
    assert got == [["s1", "B", "C"], ["B", "B", "C"]]


def test_off_still_copies_to_subscriptions_that_exist_only_elsewhere() -> None:
    got = run(
        OFF,
        [local("s1", MULTI)],
        [remote("B", "s1", MULTI, consumers=(None,)), remote("B", "s2", MULTI)],
        1,
        routing=MULTI,
    )
    assert got == [["s1", "B"]]


def test_the_post_office_uses_the_cluster_policy_only_for_addresses_with_remote_bindings() -> None:
    po = PostOffice()
    po.add_address(Address(1, "a", {ANY}))
    po.add_queue(local("a"))
    po.load_balancing = lambda address: STRICT
    assert po.route(po.addresses["a"], ANY, message().filter_value)[1] == []
    po.add_remote_binding(remote("B"))
    chosen = [po.route(po.addresses["a"], ANY, message().filter_value) for _ in range(2)]
    assert [targets(*c) for c in chosen] == [["a"], ["B"]]


def test_listeners_hear_of_queues_and_consumers() -> None:
    heard: list[str] = []

    class Listener:
        def queue_added(self, queue: Queue) -> None:
            heard.append(f"+{queue.name}")

        def queue_removed(self, queue: Queue) -> None:
            heard.append(f"-{queue.name}")

        def consumers_changed(self, queue: Queue) -> None:
            heard.append(f"{queue.name}:{queue.consumer_count}")

    po = PostOffice()
    po.listeners.append(Listener())
    po.add_address(Address(1, "a", {ANY}))
    queue = local("q")
    po.add_queue(queue)
    consumer = Consumer()
    queue.add_consumer(consumer)
    queue.remove_consumer(consumer)
    po.remove_queue(queue)
    assert heard == ["+q", "q:1", "q:0", "-q"]


# -- retry, topology, duplicate ids ----------------------------------------------------------


def test_retry_intervals_grow_to_the_maximum_and_attempts_are_bounded() -> None:
    policy = RetryPolicy(
        ClusterConnectionConfig(
            "c",
            "self",
            retry_interval=100,
            retry_interval_multiplier=2.0,
            max_retry_interval=500,
            initial_connect_attempts=3,
            reconnect_attempts=0,
        )
    )
    assert [policy.delay(n) for n in (1, 2, 3, 4, 5)] == [0.1, 0.2, 0.4, 0.5, 0.5]
    assert [policy.may_try(n, connected_before=False) for n in (0, 2, 3)] == [True, True, False]
    assert policy.may_try(0, connected_before=True) is False
    forever = RetryPolicy(ClusterConnectionConfig("c", "self"))
    assert forever.may_try(10**6, connected_before=True)


def member(
    node: str, instance: str = "i1", port: int = 1, version: int = 1, up: bool = True
) -> Member:
    return Member(node, instance, "h", port, up, version)


def test_topology_takes_newer_announcements_only() -> None:
    topology = Topology(member("me", port=0))
    assert topology.update(member("B", version=5))
    assert not topology.update(member("B", version=5))
    assert not topology.update(member("B", version=4, up=False))
    assert topology.update(member("B", version=6, up=False))
    assert [m.node_id for m in topology.others()] == ["B"]


def test_a_second_node_with_this_node_id_is_reported_with_both_connectors() -> None:
    topology = Topology(member("me", "mine", port=1))
    with pytest.raises(DuplicateNodeIdError, match="tcp://h:1 and tcp://h:2"):
        topology.update(member("me", "theirs", port=2))
    topology.update(member("me", "theirs", port=2))  # reported once


def test_the_sides_of_an_ha_pair_share_a_node_id_without_a_duplicate() -> None:
    """A takeover or failback moves a paired node's ID to its pair's connector: the newer
    announcement wins; only an unpaired claim is a copied data directory."""
    paired = replace(member("B", "primary", port=1, version=1), paired=True)
    topology = Topology(member("me", port=0))
    topology.update(paired)
    backup = replace(member("B", "backup", port=2, version=2), paired=True)
    assert topology.update(backup)
    assert [(m.port, m.instance_id) for m in topology.others()] == [(2, "backup")]
    with pytest.raises(DuplicateNodeIdError):
        topology.update(member("B", "copy", port=3, version=3))
    live = Topology(replace(member("me", "backup", port=2), paired=True))
    live.update(replace(member("me", "primary", port=1, version=9), paired=True))


def test_duplicate_id_cache_evicts_the_oldest_and_journals_it() -> None:
    cache = DuplicateIDCache(2)
    assert cache.add(b"a", 10) == [Op.add(10, DUPLICATE_ID_RECORD, b"a")]
    assert cache.add(b"x", None) == []  # a non-durable message's id: memory only
    ops = cache.add(b"b", 11)
    assert ops == [Op.add(11, DUPLICATE_ID_RECORD, b"b"), Op.delete(10)]  # a was evicted
    ops = cache.add(b"c", 12)
    assert ops == [Op.add(12, DUPLICATE_ID_RECORD, b"c")]  # x was evicted: nothing stored
    assert b"a" not in cache
    assert b"b" in cache
    assert b"c" in cache
    cache.discard(b"c")
    assert b"c" not in cache
    recovered = DuplicateIDCache(1)
    assert len(recovered.recover([(11, b"b"), (12, b"c")])) == 1
    assert b"c" in recovered
    assert b"b" not in recovered
