"""Management and observability of a running node (docs/management.md).

* :mod:`.bootstrap` reads ``bootstrap.xml`` (Artemis's web server configuration, beside
  ``broker.xml``) into a :class:`~.bootstrap.WebConfig`;
* :mod:`.server` serves the management web server inside the node's Trio nursery;
* :mod:`.api` is the JSON API under ``/api/``, :mod:`.operations` what its operations do
  to the broker, :mod:`.auth` who may call it;
* :mod:`.metrics` is the Prometheus exposition at ``/metrics``;
* :mod:`.console` serves the web console's built files at ``/console``.

The package sits below the node (the node starts the server) and above the cluster,
transport and broker it reads; it refers to the node's type in annotations only.
"""
