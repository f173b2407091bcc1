"""Scale-down of queues read by offset: the departing node's side of keeping offsets.

The messages themselves move stamped (:func:`artemis_py.broker.adopted_streams.stamp`, called by
:mod:`.scale_down` for a queue with an offset mark). Once everything has moved and the
target has confirmed it, :func:`seal` sends a :class:`~artemis_py.protocol.cluster.Sealed`
frame with each such queue's streams and their final ends and marks; on the target,
:func:`seal_streams` makes those streams readable up to those ends.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from artemis_py.broker.pending import settle_in_order
from artemis_py.protocol import cluster as wire

if TYPE_CHECKING:
    from artemis_py.cluster.state import ClusterState

log = logging.getLogger("artemis_py.cluster")


def seal(connection: ClusterState, target: str) -> None:
    """Everything moved and was confirmed: tell the target where the streams of the queues
    read by offset end (:mod:`artemis_py.broker.adopted_streams`)."""
    offsets = connection.broker.offsets
    sealed = []
    for queue in connection.broker.queues():
        if not queue.marks and not queue.sealed:
            continue
        ends = {offsets.stream: offsets.stable_end(queue), **queue.sealed}
        sealed += [
            wire.SealedStream(queue.name, stream, end, queue.marks.get(stream, 0))
            for stream, end in ends.items()
        ]
    link = connection.outgoing.get(target)
    if sealed and link is not None:
        link.send(wire.Sealed(tuple(sealed)))


async def seal_streams(connection: ClusterState, frame: wire.Sealed, peer: str) -> None:
    """A node that scaled down to this one moved all of these streams here."""
    broker = connection.broker
    pendings = []
    for sealed in frame.streams:
        queue = broker.queue(sealed.queue)
        if queue is None:
            log.warning(
                "cluster %s: %s sealed stream %s of queue %s, which does not exist here",
                connection.name,
                peer,
                sealed.stream,
                sealed.queue,
            )
            continue
        pendings.append(broker.offsets.seal(queue, sealed.stream, sealed.end, sealed.mark))
        log.info(
            "cluster %s: stream %s of queue %s moved here completely from %s (ends at %d)",
            connection.name,
            sealed.stream,
            sealed.queue,
            peer,
            sealed.end,
        )
    await settle_in_order(pendings)
