"""The duplicate ids clients sent to a node that scales down, handed over to its target.

The departing node's per-address caches of ``_AMQ_DUPL_ID`` (:class:`~artemis_py.broker.
duplicate_cache.ClientDuplicates`) travel in the Leaving frames it sends to the target
(:func:`farewells`); the target adds them to its own caches (:func:`adopt_client_ids`), so
a client that resends to the target a message the departed node had accepted is still
detected (Artemis moves its duplicate-id caches at scale-down too).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from artemis_py.exceptions import StorageError
from artemis_py.protocol import cluster as wire

if TYPE_CHECKING:
    from artemis_py.cluster.state import ClusterState

log = logging.getLogger("artemis_py.cluster")

CLIENT_IDS_PER_FRAME = 1 << 20  # bytes of client duplicate ids per Leaving frame


def farewells(
    farewell: wire.Leaving,
    client_ids: list[tuple[str, tuple[str, ...]]],
    budget: int = CLIENT_IDS_PER_FRAME,
) -> list[wire.Leaving]:
    """The Leaving frames for the target: ``farewell`` with the clients' duplicate ids,
    spread over as many frames as it takes to keep each well below the frame size limit
    (about ``budget`` bytes of ids each; the repeats carry nothing else)."""
    chunks: list[list[wire.AddressIds]] = [[]]
    size = 0
    for address, ids in client_ids:
        start = 0
        size += len(address) + 32
        for end, dup_id in enumerate(ids, 1):
            size += len(dup_id) + 4
            if size >= budget:
                chunks[-1].append(wire.AddressIds(address, ids[start:end]))
                chunks.append([])
                size, start = 0, end
        if start < len(ids):
            chunks[-1].append(wire.AddressIds(address, ids[start:]))
    first, *more = chunks
    frames = [replace(farewell, client_ids=tuple(first))]
    frames += [replace(farewell, received=(), client_ids=tuple(c)) for c in more if c]
    return frames


def adopt_client_ids(connection: ClusterState, frame: wire.Leaving) -> None:
    """A node scaling down to this one handed over its clients' duplicate ids: they join
    this node's caches (journaled when ``persist-id-cache``)."""
    duplicates = connection.broker.client_duplicates
    ops = []
    added = 0
    for entry in frame.client_ids:
        new, entry_ops = duplicates.adopt(entry.address, entry.ids)
        added += new
        ops += entry_ops
    if not added:
        return  # heard already (the frame came over both links)
    try:
        connection.broker.persistence.submit(ops)
    except StorageError as exc:
        log.error(
            "cluster %s: cannot store the duplicate ids of %s: %s",
            connection.name,
            frame.node_id,
            exc,
        )
        return
    log.info(
        "cluster %s: took over %d client duplicate id(s) of %d address(es) from node %s",
        connection.name,
        added,
        len(frame.client_ids),
        frame.node_id,
    )
