"""The broker core of a node, whatever protocol or cluster link brings the work.

* :mod:`.broker`: :class:`~.broker.Broker`, the face other packages use; its operations
  are those of :mod:`.sending` (route, send, commit, forward, redistribute),
  :mod:`.addresses` (create and delete addresses and queues) and :mod:`.acknowledging`;
* :mod:`.pending`: the durable part of an operation and the one place that waits for it;
* :mod:`.routing`: addresses, local queues and remote bindings, and the routing decision
  (load balancing included);
* :mod:`.queue`: queues and delivery to consumers; :mod:`.message`: messages and their
  encoding; :mod:`.filter`: selectors;
* :mod:`.persistence`: what the broker writes (over a :mod:`.store`), and recovery;
  :mod:`.records`: every journal record format; :mod:`.duplicate_cache`: duplicate ids.

The modules form floors that import only downwards (``pyproject.toml``, "floors of the
broker"; docs/architecture.md).

Nothing here imports the protocols, the transport or the cluster.
"""
