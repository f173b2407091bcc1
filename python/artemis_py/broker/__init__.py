"""The broker core of a node, whatever protocol or cluster link brings the work.

* :mod:`.broker`: :class:`~.broker.Broker`, the operations (send, acknowledge, commit,
  forward, redistribute, create and delete queues) and the face other packages use;
* :mod:`.pending`: the durable part of an operation and the one place that waits for it;
* :mod:`.routing`: addresses, local queues and remote bindings, and the routing decision
  (load balancing included);
* :mod:`.queue`: queues and delivery to consumers; :mod:`.message`: messages and their
  encoding; :mod:`.filter`: selectors;
* :mod:`.persistence`: the journal records of all of it, and recovery;
  :mod:`.duplicate_cache`: duplicate ids.

Nothing here imports the protocols, the transport or the cluster.
"""
