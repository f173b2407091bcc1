"""Cluster connections, bridges, topology, remote bindings and load balancing."""
