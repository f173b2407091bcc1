"""The receiving side of a core bridge: a link another node's bridge dialled to this one.

Theory of operation
-------------------
A core bridge (:mod:`.core_bridge`) dials this node with purpose ``"bridge"``, proving this
node's cluster user and password, and sends messages as a cluster link does, with no
``targets``: each message is routed here by its address (which the bridge set), as
:meth:`~artemis_py.broker.sending.Sending.receive_forwarded` does with a forwarded message
whose bindings are gone. The link's frames go through the same
:class:`~artemis_py.protocol.cluster.link_state.LinkState` as a cluster link's: runs of
messages are stored with one journal submit each (:func:`.forwarded.receive_run`, which
drops a duplicate id seen before), and the confirm task
(:class:`~artemis_py.transport.confirmations.Confirmations`) confirms them cumulatively once
they are durable, so the bridge acknowledges a message on its node only when it cannot be
lost here. Nothing else flows on such a link: no topology, no bindings; any news the peer
sends is logged and ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING

import trio

from artemis_py.cluster.forwarded import receive_run
from artemis_py.protocol import cluster as wire
from artemis_py.protocol.cluster.link_state import Action, LinkState, Send, Store
from artemis_py.transport.confirmations import Confirmations

if TYPE_CHECKING:
    from artemis_py.broker.broker import Broker
    from artemis_py.transport.link import Link

log = logging.getLogger("artemis_py.bridges")


class BridgeTarget:
    """Serves the links other nodes' core bridges dial to this node."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.links: set[Link] = set()

    async def serve(self, link: Link, established: wire.Established, peer: str) -> None:
        """Serve one bridge's link until it ends."""
        name = f"bridge '{established.peer_cluster_name}' of node {established.peer_node_id}"
        if established.peer_node_id == self.broker.node_id:
            # This node's own bridge dialled back to it (its connector names this node):
            # the bridge notices too, and stops.
            await link.goodbye(wire.Error(reason="a bridge cannot forward to its own node"))
            return
        state = LinkState()
        confirmations = Confirmations(link, state, name)
        link.before_read = lambda: self._perform(link, confirmations, state.caught_up())
        log.info("%s at %s connected", name, peer)
        self.links.add(link)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(confirmations.run)
                async with confirmations:
                    reason = await link.serve(
                        lambda event: self._perform(link, confirmations, state.receive(event))
                    )
            log.info("%s at %s disconnected: %s", name, peer, reason)
        finally:
            self.links.discard(link)

    def _perform(
        self, link: Link, confirmations: Confirmations, actions: Sequence[Action]
    ) -> Awaitable[None] | None:
        """Carry out a bridge link's actions in order: store runs, send Confirms; nothing
        else is due on it. The awaitable, if any, waits for room in the confirm pipeline
        and then carries out the rest."""
        for i, action in enumerate(actions):
            if isinstance(action, Store):
                pending = receive_run(self.broker, action.messages)
                wait = confirmations.stored(pending, action.last_seq)
                if wait is not None:
                    return self._then(wait, link, confirmations, actions[i + 1 :])
            elif isinstance(action, Send):
                link.send(action.frame)
            else:
                log.debug("bridge link from %s: ignoring %r", link.peer, action)
        return None

    async def _then(
        self,
        wait: Awaitable[None],
        link: Link,
        confirmations: Confirmations,
        rest: Sequence[Action],
    ) -> None:
        await wait
        more = self._perform(link, confirmations, rest)
        if more is not None:
            await more
