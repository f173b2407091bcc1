"""Links other nodes dialled: this node's side that stores what their bridges forward.

Theory of operation
-------------------
A CORE acceptor hands each cluster connection to :meth:`LinkAcceptor.serve`. Its handshake
names the cluster connection it is for (a node may be in several clusters), whose
:class:`IncomingLinks` serve it. It is one of:

* ``artemis-py cluster status`` / ``cluster stop`` (an admin with the cluster credentials):
  answered with this node's status, and for ``stop`` the node then stops gracefully;
* a node with this node's own id: a copied data directory (refused, the log says how to
  fix it), or this node itself dialling its own connector (closed quietly);
* a link from another node: this node publishes its topology and bindings on it (see
  :mod:`.binding_exchange`) and the departures it remembers (:mod:`.departures`), and
  stores the messages the other node's bridge forwards.

Forwarded messages are stored in *runs* (:class:`ForwardedRun`: what one read brought,
one journal submit), completed in order by one confirm task, and confirmed cumulatively
once durable, so the sender acknowledges them only when they cannot be lost here. The
duplicate ids stored with them make a resend after a broken link harmless.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import trio

from artemis_py.broker.message import decode_message
from artemis_py.broker.pending import Pending, settle_in_order
from artemis_py.cluster.retry import LogBackoff, unlogged
from artemis_py.cluster.streams import seal_streams
from artemis_py.cluster.take_over import create_queues
from artemis_py.cluster.topology import connector
from artemis_py.exceptions import StorageError
from artemis_py.protocol import cluster as wire
from artemis_py.transport.link import Link, LinkError

if TYPE_CHECKING:
    from artemis_py.broker.broker import Broker, Forwarded
    from artemis_py.broker.persistence import Ticket
    from artemis_py.cluster.cluster_connection import ClusterConnection

log = logging.getLogger("artemis_py.cluster")

PIPELINE_DEPTH = 1024
CONFIRM_BATCH = 256
RUN_LIMIT = 64  # forwarded messages stored in one journal submit, at most

#: A run of forwarded messages stored, and the seq of its last message.
Stored = tuple[Pending, int]


class LinkAcceptor:
    """Serves the links other nodes (and admin commands) open to this node, each with the
    cluster connection its handshake names: a node may be in several clusters."""

    def __init__(self, clusters: Sequence[ClusterConnection]) -> None:
        self.clusters = {cluster.name: cluster for cluster in clusters}
        self._refusals = LogBackoff()  # links refused in the handshake

    async def serve(self, stream: trio.abc.Stream, peer: str, initial: bytes) -> None:
        """Serve a link another node dialled (or a ``cluster status`` request)."""
        first = next(iter(self.clusters.values()))  # the node's settings are the same in all
        codec = wire.ServerConnection(
            node_id=first.node_id,
            instance_id=first.instance_id,
            cluster_names=tuple(self.clusters),
            user=first.user,
            password=first.password,
        )
        link = Link(stream, codec, peer, ping_interval=first.ping_interval, ttl=first.ttl)
        if initial:
            codec.receive_data(initial)
        try:
            with trio.fail_after(max(c.call_timeout for c in self.clusters.values())):
                established = await link.handshake()
        except (LinkError, trio.TooSlowError) as exc:
            self._refused(peer, str(exc) or "handshake timed out (call-timeout)")
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)
            return
        cluster = self.clusters[established.peer_cluster_name]
        link.ping_interval, link.ttl = cluster.ping_interval, cluster.ttl
        await cluster.links_in.serve(link, established, peer)

    def _refused(self, peer: str, why: str) -> None:
        # A dialler refused for its credentials comes back at its retry rate, each time
        # from a new port: one episode per host and reason.
        quiet = self._refusals.occurred((peer.rpartition(":")[0], why), trio.current_time())
        if quiet is not None:
            log.warning("cluster link from %s refused: %s%s", peer, why, unlogged(quiet))


class IncomingLinks:
    """Serves one cluster connection's links that other nodes dialled."""

    def __init__(self, cluster: ClusterConnection) -> None:
        self.cluster = cluster

    async def serve(self, link: Link, established: wire.Established, peer: str) -> None:
        """Serve a link whose handshake named this cluster connection."""
        cluster = self.cluster
        if established.purpose == "status":
            await link.goodbye(wire.Status(data=cluster.status()))
        elif established.purpose == "stop":
            log.info("cluster %s: %s asked this node to stop", cluster.name, peer)
            await link.goodbye(wire.Status(data={**cluster.status(), "stopping": True}))
            if cluster.on_stop_request is not None:
                cluster.on_stop_request()
        elif established.peer_node_id == cluster.node_id:
            await self._same_node_id(link, established, peer)
        else:
            await self._serve_link(link, peer)

    async def _same_node_id(self, link: Link, established: wire.Established, peer: str) -> None:
        cluster = self.cluster
        if established.peer_instance_id == cluster.instance_id:
            await link.goodbye(wire.Ping())  # this node dialled its own connector
            return
        host, port = established.peer_connector or ("?", 0)
        why = (
            f"the node at tcp://{host}:{port} (connecting from {peer}) has the same node ID "
            f"{cluster.node_id} as this node at {connector(cluster.local)}. Each node needs "
            "its own data directory: a copied one makes nodes indistinguishable. Give one of "
            "them a fresh data directory."
        )
        log.error("cluster %s: %s", cluster.name, why)
        await link.goodbye(wire.Error(reason=why))

    async def _serve_link(self, link: Link, peer: str) -> None:
        cluster = self.cluster
        cluster.incoming.add(link)
        link.send(wire.Topology(members=tuple(cluster.topology.members.values())))
        link.send(cluster.exchange.snapshot(link))
        cluster.replay_departures(link)
        send_channel, receive_channel = trio.open_memory_channel[Stored](PIPELINE_DEPTH)
        run = ForwardedRun(cluster.broker, send_channel, self._stored)
        link.before_read = run.flush
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._confirm_in_order, link, receive_channel)
                async with send_channel:
                    reason = await link.serve(lambda event: self._event(link, event, run))
            log.info(
                "cluster %s: link from node %s at %s closed: %s",
                cluster.name,
                link.peer_node_id,
                peer,
                reason,
            )
        finally:
            cluster.incoming.discard(link)

    def _stored(self, tickets: list[Ticket]) -> None:
        if tickets:  # a run of non-durable messages or duplicates only waits for nothing
            self.cluster.last_forwarded = tickets

    def _event(self, link: Link, event: object, run: ForwardedRun) -> Awaitable[None] | None:
        if isinstance(event, wire.Message):
            return run.add(event)
        # Whatever follows a message sees it stored (and a failure to store it first).
        flushed = run.flush()
        if flushed is not None:
            return _then(flushed, lambda: self._event(link, event, run))
        cluster = self.cluster
        if isinstance(event, wire.Topology):
            cluster.apply_topology(event, link)
        elif isinstance(event, wire.CreateQueues):
            create_queues(cluster, event, link.peer)
        elif isinstance(event, wire.Leaving):
            cluster.neighbour_scaled_down(event, link)
        elif isinstance(event, wire.Sealed):
            return seal_streams(cluster, event, link.peer)
        else:
            log.debug("cluster %s: ignoring %r from %s", cluster.name, event, link.peer)
        return None

    async def _confirm_in_order(
        self, link: Link, pipeline: trio.MemoryReceiveChannel[Stored]
    ) -> None:
        """Complete forwarded messages in order; confirm each run once it is durable.

        Takes what the reader has queued (runs of messages, see :class:`ForwardedRun`; up
        to CONFIRM_BATCH of them) and waits once for their latest tickets: a journal
        completes its tickets in order, so all are durable when those are. They are then
        completed in order and confirmed with one Confirm when the reader has nothing more
        queued (caught up), or every CONFIRM_BATCH messages during a long burst.
        """
        confirmed = 0  # the last seq confirmed
        while True:
            try:
                run = [await pipeline.receive()]
            except trio.EndOfChannel:
                return
            while len(run) < CONFIRM_BATCH:
                try:
                    run.append(pipeline.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
            try:
                await settle_in_order([pending for pending, _ in run])
            except StorageError:
                await self._confirm_durable_part(link, run)
                raise
            seq = run[-1][1]  # one seq per message: the difference counts them
            if seq - confirmed >= CONFIRM_BATCH or pipeline.statistics().current_buffer_used == 0:
                link.send(wire.Confirm(seq=seq))
                confirmed = seq

    async def _confirm_durable_part(self, link: Link, run: list[Stored]) -> None:
        """The journal failed during ``run``: complete and confirm what became durable
        before the failure, one by one, then close the link (raises the StorageError)."""
        confirmed = None
        try:
            for pending, seq in run:
                await pending.settled()
                confirmed = seq
        except StorageError as exc:
            log.error("cluster %s: cannot store forwarded messages: %s", self.cluster.name, exc)
            raise
        finally:
            if confirmed is not None:
                link.send(wire.Confirm(seq=confirmed))
            link.close()


class ForwardedRun:
    """The messages one read from an incoming link brought, stored together.

    The link reader adds each forwarded message here and flushes when it has handled all
    it read (before waiting for more), before any other frame, and every RUN_LIMIT
    messages: one journal submit and one item for the confirm task per run instead of per
    message. Duplicate ids are checked and remembered at the flush, so a run the link
    never flushed (it broke) leaves no trace and its messages are taken when resent.
    """

    def __init__(
        self,
        broker: Broker,
        pipeline: trio.MemorySendChannel[Stored],
        stored: Callable[[list[Ticket]], None],
    ) -> None:
        self.broker = broker
        self.pipeline = pipeline
        self.stored = stored  # told the tickets of each run submitted to the journal
        self.messages: list[wire.Message] = []

    def add(self, message: wire.Message) -> Awaitable[None] | None:
        self.messages.append(message)
        if len(self.messages) >= RUN_LIMIT:
            return self.flush()
        return None

    def flush(self) -> Awaitable[None] | None:
        """Store the run; the awaitable, if any, waits for room in the pipeline."""
        messages = self.messages
        if not messages:
            return None
        self.messages = []
        next_id = self.broker.next_id
        forwarded: list[Forwarded] = []
        for m in messages:
            try:
                message = decode_message(next_id(), m.payload)
            except ValueError as exc:
                raise LinkError(f"unreadable forwarded message: {exc}") from exc
            forwarded.append((message, m.targets, m.dup_id, m.payload))
        pending = self.broker.receive_forwarded(forwarded)
        self.stored(pending.tickets)
        item = (pending, messages[-1].seq)
        # send_nowait: no task switch while the confirm task keeps up.
        try:
            self.pipeline.send_nowait(item)
        except trio.WouldBlock:
            return self.pipeline.send(item)
        return None


async def _then(first: Awaitable[None], then: Callable[[], Awaitable[None] | None]) -> None:
    await first
    result = then()
    if result is not None:
        await result
