"""Wildcard routing in the post office (no sockets, no disk): a queue bound to a pattern
takes what is sent to the addresses it matches, with their own queues, under the same
anycast/multicast rules; patterns come and go with what is bound to them."""

from __future__ import annotations

from artemis_py.broker.filter import Filter
from artemis_py.broker.queue import Queue
from artemis_py.broker.routing import NeighbourRoute, RemoteQueueBinding
from artemis_py.broker.routing.post_office import Address, PostOffice
from artemis_py.config import MessageLoadBalancing, RoutingType, WildcardSyntax

ANY = RoutingType.ANYCAST
MULTI = RoutingType.MULTICAST
NO_FILTER = Filter.parse("")


def lookup(_: str) -> object:
    return None


def bind(po: PostOffice, name: str, address: str, routing: RoutingType = MULTI) -> Queue:
    if po.address(address) is None:
        po.add_address(Address(len(po.addresses) + 1, address, {ANY, MULTI}))
    q = Queue(len(po.queues) + 100, name, address, routing, filter=NO_FILTER)
    po.add_queue(q)
    return q


def routed(po: PostOffice, address: str, routing: RoutingType | None = MULTI) -> list[str]:
    if po.address(address) is None:
        po.add_address(Address(len(po.addresses) + 1, address, {ANY, MULTI}))
    queues, remote = po.route(po.addresses[address], routing, lookup)
    assert remote == []
    return sorted(q.name for q in queues)


def test_a_pattern_s_queues_take_what_is_sent_to_the_addresses_it_matches() -> None:
    po = PostOffice(WildcardSyntax())
    bind(po, "all-news", "news.#")
    bind(po, "one-level", "news.*")
    bind(po, "eu-only", "news.eu")
    assert routed(po, "news.eu") == ["all-news", "eu-only", "one-level"]
    assert routed(po, "news.eu.sport") == ["all-news"]
    assert routed(po, "news") == ["all-news"]  # '#' matches zero words
    assert routed(po, "sport.news") == []
    bind(po, "everything", "#")
    assert routed(po, "sport.news") == ["everything"]


def test_anycast_picks_one_queue_among_the_address_s_and_the_pattern_s() -> None:
    po = PostOffice(WildcardSyntax())
    bind(po, "orders.eu", "orders.eu", ANY)
    bind(po, "orders.all", "orders.#", ANY)
    chosen = [routed(po, "orders.eu", ANY) for _ in range(4)]
    assert chosen == [["orders.eu"], ["orders.all"], ["orders.eu"], ["orders.all"]]
    # A multicast send leaves anycast queues alone, the pattern's as the address's.
    assert routed(po, "orders.eu", MULTI) == []


def test_a_pattern_that_loses_its_last_binding_stops_matching() -> None:
    po = PostOffice(WildcardSyntax())
    q = bind(po, "sub", "news.#")
    assert routed(po, "news.eu") == ["sub"]
    po.remove_queue(q)
    po.remove_address("news.#")
    assert routed(po, "news.eu") == []
    assert not po.wildcards.matchers


def test_custom_syntax_and_routing_off() -> None:
    po = PostOffice(WildcardSyntax(delimiter="/", any_words=">", single_word="+"))
    bind(po, "sub", "news/>")
    bind(po, "literal", "news.#")  # not a pattern in this syntax
    assert routed(po, "news/eu/sport") == ["sub"]
    assert routed(po, "news.eu") == []
    off = PostOffice(None)
    bind(off, "sub", "news.#")
    assert not off.wildcards.is_wildcard("news.#")
    assert routed(off, "news.eu") == []


def remote_binding(name: str, address: str, route: NeighbourRoute) -> RemoteQueueBinding:
    return RemoteQueueBinding(
        name=name,
        queue_name=name,
        address=address,
        routing_type=MULTI,
        filter=None,
        filter_text=None,
        distance=1,
        origin_node_id="node-b",
        name_on_neighbour=name,
        route=route,
        consumers=(None,),
    )


def test_a_pattern_bound_on_another_node_draws_messages_there() -> None:
    po = PostOffice(WildcardSyntax())
    po.load_balancing = lambda _: MessageLoadBalancing.ON_DEMAND
    bind(po, "sf", "$.artemis.internal.sf", ANY)
    route = NeighbourRoute("node-b", po.queues["sf"], connected=True)
    binding = remote_binding("remote-sub", "news.#", route)
    po.add_remote_binding(binding)
    po.add_address(Address(99, "news.eu", {MULTI}))
    queues, remote = po.route(po.addresses["news.eu"], MULTI, lookup)
    assert queues == []
    assert remote == [binding]
    po.remove_remote_binding(binding)
    assert po.route(po.addresses["news.eu"], MULTI, lookup) == ([], [])
