"""The section readers: one module per part of broker.xml, each turning its elements into the
frozen dataclasses of :mod:`..model`.

Every reader is a function taking the :class:`~..element_reader.ElementReader` of the file
being read (which collects problems and the valid-but-unimplemented names) and the children of
its parent element. :func:`~.document.read_document` walks the whole tree and calls the others:

* :mod:`.document` -- ``<configuration>``, ``<core>``'s own values, the journal, wildcards;
* :mod:`.transports` -- acceptors and connectors (their ``tcp://`` URLs and parameters);
* :mod:`.addresses` -- address settings, addresses and their queues;
* :mod:`.discovery` -- broadcast groups, discovery groups and references to them;
* :mod:`.cluster_connections` -- cluster connections;
* :mod:`.ha_policy` -- the HA policy and its scale-down;
* :mod:`.grouping_handler` -- the grouping handler (clustered message grouping).
"""

from .document import read_document

__all__ = ["read_document"]
