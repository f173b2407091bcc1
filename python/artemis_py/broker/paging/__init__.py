"""Paging: memory limits per address and for the node, and page files for what exceeds them.

* :mod:`.manager`: the node's limits, placing each send (memory, pages, wait, fail, drop),
  the depaging and page-deletion tasks;
* :mod:`.address`: one address's accounting, policy decision and pages;
* :mod:`.cursor`: one queue's position and acknowledgements in its address's pages;
* :mod:`.by_offset`: a queue's paged messages read by offset without depaging them
  (browse, listing, acknowledging up to an offset);
* :mod:`.recovery`: rebuilding the cursors after a restart.

The page files themselves are :mod:`artemis_py.storage.paging` (Rust). ``docs/paging.md``
describes the behaviour for users.
"""

from artemis_py.broker.paging.address import AddressPaging, Full, Held
from artemis_py.broker.paging.cursor import PageCursor
from artemis_py.broker.paging.manager import PagingManager, Placement, default_global_max_size

__all__ = [
    "AddressPaging",
    "Full",
    "Held",
    "PageCursor",
    "PagingManager",
    "Placement",
    "default_global_max_size",
]
