"""The dialler: this node's links to other nodes, kept up (the outgoing side of the cluster).

Theory of operation
-------------------
A cluster connection dials its static connectors, then every member it learns of through
topology announcements (unless the connection is explicit: direct connections only, or the
end of a chain). One task per connector keeps a link up:

* a failed attempt is retried after ``retry-interval`` times ``retry-interval-multiplier``
  per failure in a row, capped at ``max-retry-interval``; it gives up after
  ``initial-connect-attempts`` failures before the first link, or ``reconnect-attempts``
  after a link broke (-1: never; clusters §4.1);
* a node that answers with this node's own id is a copied data directory, or this node
  itself: the task ends; so does a second task that reaches a node already linked;
* once a link is up, it is served (:meth:`.dispatch.Dispatcher.serve_outgoing`: a bridge
  drains the node's store-and-forward queue over it, and the node's topology, bindings and
  confirmations come back over it) until it ends;
* a link to a node that announced its departure (a graceful stop, a scale-down) ends
  without a warning, and only a static connector is redialled;
* a connector found by discovery is redialled only while discovery still knows it
  (``wanted``): a member dropped after ``refresh-timeout`` keeps a link that is up, but
  is not redialled once it is gone.

Refused links (wrong credentials, another cluster, a certificate not trusted over TLS) are
logged once, then ever less often (:class:`~artemis_py.cluster.retry.LogBackoff`).

TLS (docs/tls.md): a static connector dials with its own TLS parameters; a node learned from
the topology or discovery, with those of the cluster connection's ``connector-ref`` (the
nodes of a cluster announce alike connectors). The stores are read at each dial, in a worker
thread, so renewed files are used by the next link.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import trio

from artemis_py.cluster.retry import LogBackoff, unlogged
from artemis_py.cluster.topology import connector
from artemis_py.config.tls_params import TlsParams
from artemis_py.protocol import cluster as wire
from artemis_py.transport.link import Link, LinkError, LinkRefused, LinkTlsError, connect
from artemis_py.transport.tls_contexts import TlsSetupError, client_context

if TYPE_CHECKING:
    from artemis_py.cluster.state import ClusterState

log = logging.getLogger("artemis_py.cluster")

#: Dials host:port and completes the handshake (raises OSError, LinkError, TooSlowError).
Connect = Callable[[str, int], Awaitable[Link]]
#: Serves an established link until it ends; returns why it ended.
Serve = Callable[[Link], Awaitable[str]]


class Dialler:
    """Keeps a link up to every node the cluster connection wants to reach."""

    def __init__(self, cluster: ClusterState, connect: Connect | None = None) -> None:
        self.cluster = cluster
        self.connect = connect or self._connect
        self.dials = cluster.dials
        self.serve: Serve | None = None  # set by the cluster connection before it runs

    @property
    def given_up(self) -> dict[str, str]:
        """connector -> why the dialler stopped dialling it."""
        return self.dials.given_up

    def dialling(self, host: str, port: int) -> bool:
        return (host, port) in self.dials.dialling

    def dial(
        self,
        host: str,
        port: int,
        *,
        static: bool,
        wanted: Callable[[], bool] | None = None,
    ) -> None:
        """Keep a link to the node at host:port up, unless a task already does; with
        ``wanted``, only while it says so (checked before each redial). Only while the
        cluster connection runs."""
        nursery = self.cluster.nursery
        if nursery is not None and (host, port) not in self.dials.dialling:
            self.dials.dialling.add((host, port))
            nursery.start_soon(self._keep_up, host, port, static, wanted)

    async def _keep_up(
        self, host: str, port: int, static: bool, wanted: Callable[[], bool] | None
    ) -> None:
        cluster, retry = self.cluster, self.cluster.retry
        target = f"tcp://{host}:{port}"
        failures = 0
        connected_before = False
        peer_node: str | None = None
        refusals = LogBackoff()  # an episode per reason, until a link is up
        try:
            while not cluster.stopping:
                if not retry.may_try(failures, connected_before=connected_before):
                    self._give_up(target, failures)
                    return
                if failures:
                    await trio.sleep(retry.delay(failures))
                    if peer_node is not None and not static and cluster.departed(peer_node):
                        return  # it shut down gracefully; it announces itself on restart
                    if wanted is not None and not wanted():
                        log.info(
                            "cluster %s: %s is no longer discovered; not redialled",
                            cluster.name,
                            target,
                        )
                        return
                try:
                    link = await self.connect(host, port)
                except LinkRefused as exc:
                    failures += 1
                    quiet = refusals.occurred(str(exc), trio.current_time())
                    if quiet is not None:
                        log.error(
                            "cluster %s: %s refused the link: %s%s",
                            cluster.name,
                            target,
                            exc,
                            unlogged(quiet),
                        )
                    continue
                except (OSError, LinkError, trio.TooSlowError) as exc:
                    failures += 1
                    self.dials.unreachable.add((host, port))
                    log.log(
                        logging.INFO if failures == 1 else logging.DEBUG,
                        "cluster %s: cannot reach %s (%s); retrying",
                        cluster.name,
                        target,
                        str(exc) or "timed out",
                    )
                    continue
                peer_node = self.dials.node_at[(host, port)] = link.peer_node_id
                if not await self._wanted(link, target):
                    return
                self.dials.given_up.pop(target, None)
                self.dials.unreachable.discard((host, port))
                failures = 0
                refusals = LogBackoff()
                connected_before = True
                assert self.serve is not None
                reason = await self.serve(link)
                if cluster.stopping or peer_node in cluster.scaled_down:
                    return  # a node that scaled down announces itself if it comes back
                self._link_ended(peer_node, target, reason)
                failures = 1
        finally:
            self.dials.dialling.discard((host, port))

    def _give_up(self, target: str, failures: int) -> None:
        why = f"gave up after {failures} failed attempt(s)"
        self.dials.given_up[target] = why
        log.warning(
            "cluster %s: %s to %s; the node is considered down until it announces itself again",
            self.cluster.name,
            why,
            target,
        )

    async def _wanted(self, link: Link, target: str) -> bool:
        """Whether a new link is to be served: not this node itself, not a node another
        task already has a link to (both are closed)."""
        cluster = self.cluster
        established = link.established
        assert established is not None
        if established.peer_node_id == cluster.node_id:
            await link.goodbye(wire.Ping())
            if established.peer_instance_id != cluster.instance_id:
                log.error(
                    "cluster %s: %s has this node's node ID %s (this node is %s). Each node "
                    "needs its own data directory; a copied one makes nodes indistinguishable. "
                    "Give one node a fresh data directory.",
                    cluster.name,
                    target,
                    cluster.node_id,
                    connector(cluster.local),
                )
            return False
        if established.peer_node_id in cluster.outgoing:
            await link.goodbye(wire.Ping())  # another dialler already has this node
            return False
        return True

    def _link_ended(self, peer_node: str, target: str, reason: str) -> None:
        if self.cluster.departed(peer_node):
            # It announced a graceful stop before closing the link: a known departure,
            # not a loss (it is redialled only if it is a static connector).
            log.info(
                "cluster %s: node %s at %s left the cluster (%s)",
                self.cluster.name,
                peer_node,
                target,
                reason,
            )
            return
        log.warning(
            "cluster %s: link to node %s at %s lost: %s; reconnecting",
            self.cluster.name,
            peer_node,
            target,
            reason,
        )

    def codec(self) -> wire.ClientConnection:
        """A new link's codec, as this cluster connection's dialling side."""
        cluster = self.cluster
        return wire.ClientConnection(
            node_id=cluster.node_id,
            instance_id=cluster.instance_id,
            cluster_name=cluster.name,
            connector=(cluster.local.host, cluster.local.port),
            user=cluster.user,
            password=cluster.password,
            max_hops=cluster.config.max_hops,
            purpose="link",
        )

    async def _connect(self, host: str, port: int) -> Link:
        cluster = self.cluster
        codec = self.codec()
        tls = self._tls(host, port)
        context = None
        if tls.enabled:
            try:
                context = await trio.to_thread.run_sync(client_context, tls)
            except TlsSetupError as exc:
                raise LinkRefused(f"TLS setup: {exc}") from None
        try:
            return await connect(
                host,
                port,
                codec,
                call_timeout=cluster.call_timeout,
                ping_interval=cluster.ping_interval,
                ttl=cluster.ttl,
                ssl_context=context,
            )
        except LinkTlsError as exc:
            trust = tls.trust_store_path or "the system's certificate authorities"
            raise LinkTlsError(f"{exc} (trust store: {trust})") from None

    def _tls(self, host: str, port: int) -> TlsParams:
        """The TLS parameters to dial host:port with (see the module doc)."""
        connectors = {c.name: c for c in self.cluster.broker.config.connectors}
        for name in self.cluster.config.static_connectors:
            static = connectors[name]
            if (static.host, static.port) == (host, port):
                return static.tls
        return connectors[self.cluster.config.connector_name].tls
