"""``artemis-py perf`` on a cluster URL: which node each connection goes to, and the actors
that fail over.

* **Spreading** (in the runner, before actors are assigned to processes): for each cluster
  URL, :func:`spread` learns the live members from the first of its nodes that answers (a
  CONNECT with ``topology:true``, docs/stomp.md), unless ``useTopologyForLoadBalancing``
  is false, and asks the URL's policy for one node per connection, producers first, then
  consumers (one policy per URL, as one Artemis ServerLocator). The picks replace
  ``producer_urls``/``consumer_urls``, which :func:`~.worker.assign` hands out in order.
* **Failing over** (in the workers, with ``ha=true`` or ``reconnectAttempts``): each actor
  has a failover connection of its own that starts at its picked node, then moves where
  the URL's policy says. Every send is receipted (and resent after a loss, with its
  ``_AMQ_DUPL_ID``); ``--max-pending N`` is N sender tasks, as for plain URLs. The per-node
  counts go to the node a message was receipted by or delivered from. These are separate
  functions so the plain actors' loops stay as they are.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from artemis_py.client import ClientError, Message, open_stomp_connection
from artemis_py.client.errors import connect_failure
from artemis_py.client.failover import ClusterLocator, FailoverConnection, open_cluster_connection
from artemis_py.client.load_balancing import ConnectionLoadBalancingPolicy, make_policy
from artemis_py.client.url import BrokerUrl, ClientUrl, parse_url
from artemis_py.exceptions import leaves
from artemis_py.perf.options import TIMESTAMP_HEADER, PerfOptions

if TYPE_CHECKING:
    from artemis_py.perf.worker import _Worker

__all__ = ["SpreadError", "failover_consumer", "failover_producer", "spread"]


class SpreadError(Exception):
    """No node of a cluster URL answered."""


# -- spreading (the runner) --------------------------------------------------------------------


async def _members(cluster: ClientUrl, options: PerfOptions) -> tuple[BrokerUrl, ...]:
    errors: list[str] = []
    for address in cluster.addresses:
        try:
            async with open_stomp_connection(
                address.host,
                address.port,
                login=options.user,
                passcode=options.password,
                version=options.stomp_version,
                headers=[("topology", "true")],
                tls=cluster.options.tls,
            ) as conn:
                announced = conn.topology or ()
        except (OSError, ClientError) as exc:
            reason = connect_failure(exc) if isinstance(exc, OSError) else str(exc)
            errors.append(f"{address}: cannot connect: {reason}")
            continue
        members: list[BrokerUrl] = []
        for text in announced:
            try:
                members.append(parse_url(text))
            except ValueError:
                continue
        return tuple(members) or cluster.addresses
    raise SpreadError("; ".join(errors))


def members(cluster: ClientUrl, options: PerfOptions) -> tuple[BrokerUrl, ...]:
    """The nodes ``cluster``'s connections are spread over (see the module doc)."""
    if not cluster.options.use_topology:
        return cluster.addresses
    return trio.run(_members, cluster, options)


def spread(options: PerfOptions) -> PerfOptions:
    """``options`` with one picked node per actor for each side given by a cluster URL."""
    if options.producer_cluster is None and options.consumer_cluster is None:
        return options
    policies: dict[ClientUrl, tuple[tuple[BrokerUrl, ...], ConnectionLoadBalancingPolicy]] = {}

    def picks(cluster: ClientUrl | None, count: int, plain: tuple[BrokerUrl, ...]) -> Any:
        if cluster is None or not count:
            return plain
        if cluster not in policies:
            policies[cluster] = (members(cluster, options), make_policy(cluster.options.policy))
        nodes, policy = policies[cluster]
        return tuple(nodes[policy.select(len(nodes))] for _ in range(count))

    return dataclasses.replace(
        options,
        producer_urls=picks(options.producer_cluster, options.producers, options.producer_urls),
        consumer_urls=picks(options.consumer_cluster, options.consumers, options.consumer_urls),
    )


# -- failing over (the workers) ----------------------------------------------------------------


class _FirstThen:
    """A policy whose first pick is the first node (the actor's own), then ``then``'s."""

    def __init__(self, then: ConnectionLoadBalancingPolicy) -> None:
        self.then = then
        self.first = True

    def select(self, count: int) -> int:
        if self.first:
            self.first = False
            return 0
        return self.then.select(count)


def _locator(cluster: ClientUrl, start: BrokerUrl) -> ClusterLocator:
    rest = tuple(address for address in cluster.addresses if address != start)
    url = ClientUrl((start, *rest), None, cluster.options)
    return ClusterLocator(url, policy=_FirstThen(make_policy(cluster.options.policy)))


def _open(worker: _Worker, cluster: ClientUrl, url: BrokerUrl) -> Any:
    options = worker.options
    return open_cluster_connection(
        _locator(cluster, url),
        login=options.user,
        passcode=options.password,
        version=options.stomp_version,
        tls=cluster.options.tls,
    )


def _count_moves(worker: _Worker, conn: FailoverConnection) -> None:
    worker.tally.failovers += conn.failovers
    worker.tally.resends += conn.resends


def _failed(worker: _Worker, who: str, url: BrokerUrl, group: BaseExceptionGroup[Any]) -> None:
    error = leaves(group)[0]
    worker.tally.error(who, error)
    if not worker.started.is_set() and not worker.all_ready.is_set():
        worker._failed_before_start(url, error)


async def failover_producer(worker: _Worker, number: int, url: BrokerUrl) -> None:
    """A producer on a failover connection (see the module doc)."""
    options = worker.options
    assert options.producer_cluster is not None
    who = f"producer {number} ({url})"
    try:
        async with _open(worker, options.producer_cluster, url) as conn:
            try:
                worker._actor_ready()
                await worker.started.wait()
                next_ts = worker._schedule(number)
                async with trio.open_nursery() as senders:
                    for _ in range(options.max_pending):
                        senders.start_soon(_send_loop, worker, conn, next_ts)
            finally:
                _count_moves(worker, conn)
    except* (ClientError, OSError) as group:
        _failed(worker, who, url, group)


async def _send_loop(
    worker: _Worker, conn: FailoverConnection, next_ts: Callable[[], int | None]
) -> None:
    options = worker.options
    tally = worker.tally
    destination = options.stomp_destination
    payload = worker.payload
    while True:
        ts = next_ts()
        if ts is None:
            return
        if options.rate is not None:
            await worker._wait_ns(ts)
        await conn.send(destination, payload, headers=worker._headers(ts))
        done = time.time_ns()
        tally.sent += 1
        tally.receipted += 1
        tally.node_sent[str(conn.url)] += 1
        if worker._in_window(ts):
            tally.window_sent += 1
            worker.receipt_latency.record((done - ts) // 1000)
        if worker._in_window(done):
            tally.window_receipted += 1


async def failover_consumer(worker: _Worker, number: int, url: BrokerUrl) -> None:
    """A consumer on a failover connection: it subscribes again after each move."""
    options = worker.options
    assert options.consumer_cluster is not None
    who = f"consumer {number} ({url})"
    consuming = trio.CancelScope()
    worker.consumer_scopes.append(consuming)
    try:
        async with _open(worker, options.consumer_cluster, url) as conn:
            try:
                subscription = await conn.subscribe(options.stomp_destination, ack=options.ack_mode)
                worker._actor_ready()
                with consuming:
                    async for message in subscription:
                        _received(worker, message, str(conn.url))
                        if options.ack_mode != "auto":
                            await conn.ack(message)
            finally:
                _count_moves(worker, conn)
    except* (ClientError, OSError) as group:
        _failed(worker, who, url, group)


def _received(worker: _Worker, message: Message, node: str) -> None:
    now = time.time_ns()
    tally = worker.tally
    tally.received += 1
    tally.node_received[node] += 1
    if worker._in_window(now):
        tally.window_received += 1
    stamp = message.get(TIMESTAMP_HEADER)
    if stamp is not None and worker._in_window(int(stamp)):
        worker.e2e_latency.record((now - int(stamp)) // 1000)
