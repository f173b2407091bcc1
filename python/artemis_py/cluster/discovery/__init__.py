"""Discovery: how nodes find each other without a static list (Artemis clusters §3.1).

* :mod:`artemis_py.protocol.discovery` -- the announcement a node sends (artemis-py's own
  format; the client's ``udp://`` discovery reads it too);
* :mod:`.membership` -- the members heard of, until ``refresh-timeout`` (sans-IO);
* :mod:`.group` -- a discovery group, running; :mod:`.sources` -- what it listens to (UDP
  multicast, a JGroups FILE_PING directory, a JGroups DNS_PING name);
* :mod:`.broadcaster` -- a broadcast group, running; the sockets are
  :mod:`artemis_py.transport.multicast` (shared with the client);
* :mod:`.service` -- the node's groups, started from its configuration, and how a cluster
  connection's dialler and scale-down use them.
"""
