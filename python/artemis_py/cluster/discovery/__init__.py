"""Discovery: how nodes find each other without a static list (Artemis clusters §3.1).

* :mod:`.packet` -- the announcement a node sends (artemis-py's own format);
* :mod:`.membership` -- the members heard of, until ``refresh-timeout`` (sans-IO);
* :mod:`.group` -- a discovery group, running; :mod:`.sources` -- what it listens to (UDP
  multicast, a JGroups FILE_PING directory, a JGroups DNS_PING name);
* :mod:`.broadcaster` -- a broadcast group, running; :mod:`.udp` -- the sockets;
* :mod:`.service` -- the node's groups, started from its configuration, and how a cluster
  connection's dialler and scale-down use them.
"""
