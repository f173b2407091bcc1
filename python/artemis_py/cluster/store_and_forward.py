"""Names of the store-and-forward queues: one per cluster connection and neighbour.

Messages for a neighbour wait in a durable queue of this node, an internal one (never
balanced, published or moved as a client's queue would be), named as Artemis names it, so
that a restart finds what still waits for whom.
"""

from __future__ import annotations

from artemis_py.broker.routing import INTERNAL_PREFIX

SF_PREFIX = INTERNAL_PREFIX + "sf."


def sf_queue_name(cluster: str, node_id: str) -> str:
    """The store-and-forward queue for messages bound for ``node_id`` (Artemis's name)."""
    return f"{SF_PREFIX}{cluster}.{node_id}"


def neighbour_of(cluster: str, queue_name: str) -> str | None:
    """The node id a store-and-forward queue of ``cluster`` is for (None: not one)."""
    prefix = f"{SF_PREFIX}{cluster}."
    return queue_name[len(prefix) :] if queue_name.startswith(prefix) else None
