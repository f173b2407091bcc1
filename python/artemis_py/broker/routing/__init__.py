"""Routing: which queues a message goes to, on this node and on others.

* :mod:`.post_office` holds the addresses, the local queues bound to them and the remote
  bindings learned from other nodes, and makes the routing decision;
* :mod:`.load_balancing` is that decision for an address with remote bindings (the cluster
  connection's ``message-load-balancing`` policy, round robin);
* :mod:`.remote_binding` is what the node knows about a queue on another node, and the
  route (a neighbour's store-and-forward queue) that messages for it take;
* :mod:`.forwarding` turns remote bindings into destinations: a store-and-forward queue
  per neighbour, with the bindings it is for over there named beside the message
  (its theory of operation follows a forwarded message from routing to the next node).

The cluster package fills the post office's remote bindings; nothing here imports it.
"""

from artemis_py.broker.routing.forwarding import Destination, forwarding, tag, targets_of
from artemis_py.broker.routing.post_office import (
    INTERNAL_PREFIX,
    Address,
    BindingListener,
    PostOffice,
    is_internal,
    split_fqqn,
)
from artemis_py.broker.routing.remote_binding import NeighbourRoute, RemoteQueueBinding

__all__ = [
    "INTERNAL_PREFIX",
    "Address",
    "BindingListener",
    "Destination",
    "NeighbourRoute",
    "PostOffice",
    "RemoteQueueBinding",
    "forwarding",
    "is_internal",
    "split_fqqn",
    "tag",
    "targets_of",
]
