"""High availability: a node's side of a primary/backup pair.

* :mod:`.shared_store` -- ``<ha-policy><shared-store>``: two nodes on one data directory; the
  backup waits for the primary's lock and takes over (docs/high-availability.md).
"""

from artemis_py.ha.shared_store import SharedStore, open_shared_store

__all__ = ["SharedStore", "open_shared_store"]
