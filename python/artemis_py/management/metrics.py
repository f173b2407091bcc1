"""The node's Prometheus metrics, served at ``/metrics`` (docs/management.md "Metrics").

Theory of operation
-------------------
Nothing here runs on the hot path. The broker counts with plain ``int`` attributes where
it works (a queue's ``messages_added``, a connection's ``frames_in``, a bridge's
``forwarded``, the journal writer's latency buckets); a scrape reads them and the node's
state (queue depths, paging, links) through :class:`NodeCollector`, a custom
prometheus_client collector, and prometheus_client writes the exposition (text, or
OpenMetrics when the scraper asks for it). So counting costs an increment, and a metric
nobody scrapes costs nothing more.

A scrape costs the loop about 0.1 ms per queue (prometheus_client's encoding is most of it).
:func:`scrape` therefore reads the state on the loop, where it changes, and encodes in a
worker thread: with thousands of queues the loop is shared with the encoder instead of
stalling for the whole scrape.

Each node has its own :class:`~prometheus_client.CollectorRegistry` (:class:`NodeMetrics`),
never the process-wide default one: several nodes in one process (tests, embedding) each
report their own state. The registry also holds prometheus_client's process collector
(``process_resident_memory_bytes``, ``process_cpu_seconds_total`` ...).

Names follow Prometheus conventions (``artemis_`` prefix, base units in the name, counters
end in ``_total``) and cover what Artemis's Prometheus plugin and RabbitMQ's
``rabbitmq_prometheus`` expose; every series carries the node's id as ``node``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import TYPE_CHECKING

import trio
from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from artemis_py import __version__
from artemis_py.broker.storage_views import JournalReport, journal_reports
from artemis_py.management import views
from artemis_py.management.site import ManagementSite
from artemis_py.sessions.stomp.errors import ERROR_KINDS

if TYPE_CHECKING:
    from artemis_py.node import Node

QUEUE_LABELS = ["node", "address", "queue", "routing_type"]
BRIDGE_LABELS = ["node", "cluster", "neighbour"]


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


def _counter(name: str, doc: str, labels: list[str]) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, labels=labels)


def histogram_buckets(report: JournalReport) -> list[tuple[str, float]]:
    """Cumulative ``(le, count)`` pairs from the journal writer's per-bucket counts."""
    latencies = report.latencies
    buckets = []
    total = 0
    for bound, count in zip((*latencies.bounds, float("inf")), latencies.counts, strict=True):
        total += count
        buckets.append(("+Inf" if bound == float("inf") else repr(bound), float(total)))
    return buckets


def identity(node_id: str, name: str | None, ha: views.HaView, live: bool) -> Iterator[Metric]:
    """``artemis_node`` (who the node is), ``artemis_ha_live`` (whether it serves) and, on
    a replication node, how its copy stands (:func:`replication`)."""
    info = InfoMetricFamily(
        "artemis_node", "The node: its id, name (broker.xml <name>) and version"
    )
    info.add_metric([], {"node": node_id, "name": name or "", "version": __version__})
    yield info
    gauge = _gauge(
        "artemis_ha_live",
        "1 while the node is live (serving clients), 0 otherwise; policy and role are "
        "its <ha-policy> and its side of a pair",
        ["node", "policy", "role"],
    )
    gauge.add_metric([node_id, ha["policy"], ha["role"]], 1 if live else 0)
    yield gauge
    yield from replication(node_id, ha)


def replication(node_id: str, ha: views.HaView) -> Iterator[Metric]:
    """``artemis_ha_replication_in_sync`` on a replication node; on its primary, how far
    the backup is behind per journal (docs/high-availability.md "Replication")."""
    if "replication" not in ha:
        return
    in_sync = _gauge(
        "artemis_ha_replication_in_sync",
        "1 while the pair's backup has every record of its primary's journals (replication "
        "'in sync'), 0 otherwise (no backup, synchronizing, looking for its primary, live)",
        ["node", "role"],
    )
    in_sync.add_metric([node_id, ha["role"]], 1 if ha["replication"] == "in sync" else 0)
    yield in_sync
    lags = ha.get("lag")
    if lags is None:
        return
    labels = ["node", "journal"]
    tickets = _gauge(
        "artemis_ha_replication_lag_tickets",
        "Journal submits the backup has not acknowledged yet (0 without a backup)",
        labels,
    )
    pending = _gauge(
        "artemis_ha_replication_pending_bytes",
        "Bytes of journal records encoded for the backup, not yet handed to its link",
        labels,
    )
    for journal, lag in lags.items():
        tickets.add_metric([node_id, journal], lag["tickets"])
        pending.add_metric([node_id, journal], lag["pending_bytes"])
    yield from (tickets, pending)


class NodeCollector(Collector):
    """Reads one node's counters and state at scrape time."""

    def __init__(self, node: Node) -> None:
        self.node = node

    def collect(self) -> Iterable[Metric]:
        node_id = self.node.node_id
        yield from self._node(node_id)
        yield from self._queues(node_id)
        yield from self._addresses(node_id)
        yield from self._disk(node_id)
        yield from self._journals(node_id)
        yield from self._cluster(node_id)
        yield from self._connections(node_id)

    def _node(self, node_id: str) -> Iterator[Metric]:
        ha = views.ha_view(self.node)
        yield from identity(node_id, self.node.config.name, ha, ha["state"] == "live")

    def _queues(self, node_id: str) -> Iterator[Metric]:
        messages = _gauge(
            "artemis_queue_messages",
            "Messages in the queue: ready, delivering (not yet acknowledged), paged and held",
            QUEUE_LABELS,
        )
        delivering = _gauge(
            "artemis_queue_delivering_messages",
            "Messages delivered to consumers and not yet acknowledged",
            QUEUE_LABELS,
        )
        consumers = _gauge("artemis_queue_consumers", "Consumers of the queue", QUEUE_LABELS)
        paused = _gauge(
            "artemis_queue_paused", "1 while the queue is paused (delivers nothing)", QUEUE_LABELS
        )
        added = _counter(
            "artemis_queue_messages_added", "Messages that entered the queue", QUEUE_LABELS
        )
        acked = _counter(
            "artemis_queue_messages_acknowledged",
            "Messages acknowledged by consumers (for a store-and-forward queue: confirmed by "
            "the neighbour)",
            QUEUE_LABELS,
        )
        expired = _counter(
            "artemis_queue_messages_expired", "Messages that expired in the queue", QUEUE_LABELS
        )
        killed = _counter(
            "artemis_queue_messages_killed",
            "Messages dead-lettered after max-delivery-attempts, or purged",
            QUEUE_LABELS,
        )
        scheduled = _gauge(
            "artemis_queue_scheduled_messages",
            "Messages held until their delivery time (scheduled, or waiting a redelivery delay)",
            QUEUE_LABELS,
        )
        for queue in self.node.broker.queues():
            labels = [node_id, queue.address, queue.name, queue.routing_type.name]
            messages.add_metric(labels, queue.message_count)
            delivering.add_metric(labels, queue.delivering)
            consumers.add_metric(labels, len(queue.consumers))
            paused.add_metric(labels, 1 if queue.paused else 0)
            added.add_metric(labels, queue.messages_added)
            acked.add_metric(labels, queue.messages_acknowledged)
            expired.add_metric(labels, queue.messages_expired)
            killed.add_metric(labels, queue.messages_killed)
            scheduled.add_metric(labels, len(queue.scheduled))
        yield from (messages, delivering, consumers, paused, added, acked, expired, killed)
        yield scheduled

    def _addresses(self, node_id: str) -> Iterator[Metric]:
        labels = ["node", "address"]
        size = _gauge(
            "artemis_address_size_bytes",
            "Bytes of the address's messages held in memory (max-size-bytes counts these)",
            labels,
        )
        paging = _gauge("artemis_address_paging", "1 while the address pages", labels)
        pages = _gauge("artemis_address_pages", "Page files of the address", labels)
        dropped = _counter(
            "artemis_address_messages_dropped",
            "Messages dropped because the address or the disk was full (a full-policy DROP)",
            labels,
        )
        manager = self.node.broker.paging
        for name in list(self.node.broker.post_office.addresses):
            state = manager.addresses.get(name)
            values = [node_id, name]
            size.add_metric(values, state.size if state is not None else 0)
            paging.add_metric(values, 1 if state is not None and state.paging else 0)
            pages.add_metric(values, len(state.page_records) if state is not None else 0)
            dropped.add_metric(values, state.dropped if state is not None else 0)
        memory = _gauge(
            "artemis_address_memory_usage_bytes",
            "Bytes of messages held in memory by all addresses (global-max-size counts these)",
            ["node"],
        )
        memory.add_metric([node_id], manager.size)
        limit = _gauge(
            "artemis_address_memory_limit_bytes", "global-max-size of the node", ["node"]
        )
        limit.add_metric([node_id], manager.global_max_size)
        yield from (size, paging, pages, dropped, memory, limit)

    def _disk(self, node_id: str) -> Iterator[Metric]:
        """The disk under the data directories, as its last scan found it (only while it is
        watched: persistence on, a limit and a scan period)."""
        disk = self.node.broker.paging.disk
        usage = disk.usage
        if not disk.watched or usage is None:
            return
        labels = ["node", "directory"]
        values = [node_id, usage.directory]
        families = (
            # Artemis's broker metric disk.store.usage: the fraction of the disk used.
            ("artemis_disk_store_usage", "Fraction of the disk used (1 - usable / total)",
             usage.used),
            ("artemis_disk_usable_bytes", "Bytes of the disk a writer may still take",
             usage.usable),
            ("artemis_disk_total_bytes", "Bytes of the disk", usage.total),
            ("artemis_disk_full",
             "1 while the disk is beyond max-disk-usage or min-disk-free (producers held)",
             1 if disk.full else 0),
        )  # fmt: skip
        for name, doc, value in families:
            gauge = _gauge(name, doc, labels)
            gauge.add_metric(values, value)
            yield gauge

    def _journals(self, node_id: str) -> Iterator[Metric]:
        reports = journal_reports(self.node.broker.persistence)
        if not reports:  # persistence-enabled false: no journal
            return
        labels = ["node", "journal"]
        families: list[tuple[Metric, Callable[[JournalReport], int]]] = [
            (_counter("artemis_journal_appends", "Records appended to the journal", labels),
             lambda r: r.stats.records_written),
            (_counter("artemis_journal_writes", "Batches written (one write each)", labels),
             lambda r: r.stats.batches),
            (_counter("artemis_journal_fsyncs", "fdatasync calls of the journal writer", labels),
             lambda r: r.stats.syncs),
            (_counter("artemis_journal_written_bytes", "Bytes written to the journal", labels),
             lambda r: r.stats.bytes_written),
            (_counter("artemis_journal_compactions", "Journal compactions", labels),
             lambda r: r.stats.compactions),
            (_gauge("artemis_journal_files", "Journal data files in use", labels),
             lambda r: r.stats.data_files),
            (_gauge("artemis_journal_free_files", "Journal files pooled for reuse", labels),
             lambda r: r.stats.free_files),
            (_gauge("artemis_journal_live_records", "Live records in the journal", labels),
             lambda r: r.stats.live_records),
        ]  # fmt: skip
        for family, value in families:
            for report in reports:
                family.add_metric([node_id, report.name], value(report))  # type: ignore[attr-defined]
            yield family
        fsync = HistogramMetricFamily(
            "artemis_journal_fsync_seconds",
            "Time from a journal batch's start (its writer woken, or a task waiting for it) "
            "until the loop saw it written and fdatasynced",
            labels=labels,
        )
        for report in reports:
            fsync.add_metric(
                [node_id, report.name], histogram_buckets(report), report.latencies.sum
            )
        yield fsync

    def _cluster(self, node_id: str) -> Iterator[Metric]:
        connected = _gauge(
            "artemis_cluster_bridge_connected",
            "1 while the bridge to the neighbour is connected",
            BRIDGE_LABELS,
        )
        depth = _gauge(
            "artemis_cluster_store_and_forward_messages",
            "Messages waiting in the store-and-forward queue for the neighbour",
            BRIDGE_LABELS,
        )
        in_flight = _gauge(
            "artemis_cluster_bridge_in_flight_messages",
            "Messages sent over the bridge and not yet confirmed by the neighbour",
            BRIDGE_LABELS,
        )
        forwarded = _counter(
            "artemis_cluster_bridge_forwarded_messages",
            "Messages the neighbour confirmed (forwarded over the bridge)",
            BRIDGE_LABELS,
        )
        redistributed = _counter(
            "artemis_cluster_redistributed_messages",
            "Messages redistributed to the neighbour (moved to its store-and-forward queue)",
            BRIDGE_LABELS,
        )
        members = _gauge(
            "artemis_cluster_members", "Other nodes of the cluster that are up", ["node", "cluster"]
        )
        for cc in self.node.cluster_connections:
            members.add_metric([node_id, cc.name], sum(1 for m in cc.topology.others() if m.up))
            moved = cc.redistributor.moved_to if cc.redistributor is not None else {}
            for neighbour, route in list(cc.routes.items()):
                labels = [node_id, cc.name, neighbour]
                bridge = cc.bridges.get(neighbour)
                connected.add_metric(labels, 1 if route.connected else 0)
                depth.add_metric(labels, route.sf_queue.message_count)
                flying = len(bridge.in_flight) if bridge is not None and route.connected else 0
                in_flight.add_metric(labels, flying)
                forwarded.add_metric(labels, bridge.forwarded if bridge is not None else 0)
                redistributed.add_metric(labels, moved.get(route.sf_queue.name, 0))
        yield from (connected, depth, in_flight, forwarded, redistributed, members)

    def _connections(self, node_id: str) -> Iterator[Metric]:
        clients = self.node.clients
        live = list(clients.connections)
        labels = ["node"]
        connections = _gauge("artemis_connections", "Open client (STOMP) connections", labels)
        connections.add_metric([node_id], len(live))
        sessions = _gauge("artemis_sessions", "Sessions (connected STOMP clients)", labels)
        sessions.add_metric([node_id], sum(1 for c in live if c.session.connected))
        opened = _counter("artemis_connections_opened", "Client connections accepted", labels)
        opened.add_metric([node_id], clients.opened)
        frames_in = _counter(
            "artemis_frames_received", "STOMP frames received from clients", labels
        )
        frames_in.add_metric([node_id], clients.frames_in + sum(c.frames_in for c in live))
        frames_out = _counter("artemis_frames_sent", "STOMP frames sent to clients", labels)
        frames_out.add_metric([node_id], clients.frames_out + sum(c.frames_out for c in live))
        errors = _counter(
            "artemis_errors",
            "ERROR frames sent to clients, by kind (protocol, security, resource, storage, "
            "timeout, refused)",
            ["node", "kind"],
        )
        counts = dict.fromkeys(ERROR_KINDS, 0) | clients.errors
        for connection in live:
            if connection.error_kind is not None:
                counts[connection.error_kind] = counts.get(connection.error_kind, 0) + 1
        for kind, count in counts.items():
            errors.add_metric([node_id, kind], count)
        yield from (connections, sessions, opened, frames_in, frames_out, errors)


class StandbyCollector(Collector):
    """A site with no live node (a waiting backup, site.py): who it is, ``artemis_ha_live
    0`` and a replication backup's ``artemis_ha_replication_in_sync``; nothing else exists
    without a broker."""

    def __init__(self, site: ManagementSite) -> None:
        self.site = site

    def collect(self) -> Iterable[Metric]:
        side = self.site.pair
        node_id = (side.node_id if side is not None else None) or ""
        yield from identity(node_id, self.site.config.name, self.site.ha(), False)


class _Collected(Collector):
    """Families collected already (on the loop), for an encoder in a worker thread."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


class NodeMetrics:
    """One node's registry: its :class:`NodeCollector` (or :class:`StandbyCollector`) and
    the process collectors."""

    def __init__(self, collector: Collector) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(collector)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)

    def exposition(self, accept_header: str | None = None) -> tuple[bytes, str]:
        """The scrape's body and content type: Prometheus text, or OpenMetrics when the
        ``Accept`` header asks for it (prometheus_client's content negotiation)."""
        encoder, content_type = choose_encoder(accept_header or "")
        return encoder(self.registry), content_type

    async def scrape(self, accept_header: str | None = None) -> tuple[bytes, str]:
        """:meth:`exposition`, encoded in a worker thread (see the module docstring)."""
        encoder, content_type = choose_encoder(accept_header or "")
        families = list(self.registry.collect())
        body = await trio.to_thread.run_sync(partial(encoder, _Collected(families)))
        return body, content_type


_registries: weakref.WeakKeyDictionary[Node | ManagementSite, NodeMetrics] = (
    weakref.WeakKeyDictionary()
)


def metrics_of(node: Node | ManagementSite) -> NodeMetrics:
    """The metrics of a node, or of a site with no live node (one registry per each, made
    on first use)."""
    metrics = _registries.get(node)
    if metrics is None:
        collector = (
            StandbyCollector(node) if isinstance(node, ManagementSite) else NodeCollector(node)
        )
        metrics = _registries[node] = NodeMetrics(collector)
    return metrics


def exposition(node: Node, registry_accept_header: str | None = None) -> tuple[bytes, str]:
    """``(body, content_type)`` of a scrape of ``node``; ``registry_accept_header`` is the
    request's ``Accept`` header (None: Prometheus text format)."""
    return metrics_of(node).exposition(registry_accept_header)


async def scrape(
    node: Node | ManagementSite, accept_header: str | None = None
) -> tuple[bytes, str]:
    """:func:`exposition` for a request handler on the node's loop: the state is read on the
    loop, the text encoded in a worker thread."""
    return await metrics_of(node).scrape(accept_header)
