"""Destination names as the Artemis CLI spells them, mapped to STOMP destinations.

``artemis producer --destination queue://ORDERS`` names an anycast queue and
``topic://PRICES`` a multicast address. A STOMP acceptor recognises routing types by name
prefixes (Artemis acceptor parameters ``anycastPrefix`` / ``multicastPrefix``; the usual
configuration, and our defaults, are ``/queue/`` and ``/topic/``), so ``queue://ORDERS``
becomes ``/queue/ORDERS``. Anything without one of the two schemes is passed through as it is
(``/queue/ORDERS``, a bare address, or a fully qualified ``address::queue``).
"""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT_ANYCAST_PREFIX", "DEFAULT_MULTICAST_PREFIX", "stomp_destination"]

DEFAULT_ANYCAST_PREFIX: Final = "/queue/"
DEFAULT_MULTICAST_PREFIX: Final = "/topic/"


def stomp_destination(
    name: str,
    *,
    anycast_prefix: str = DEFAULT_ANYCAST_PREFIX,
    multicast_prefix: str = DEFAULT_MULTICAST_PREFIX,
) -> str:
    """The STOMP ``destination`` header for ``name`` (see the module doc).

    Raises :class:`ValueError` for an empty name or an empty name after the scheme.
    """
    scheme, sep, rest = name.partition("://")
    if sep:
        kind = scheme.lower()
        if kind == "queue":
            prefix = anycast_prefix
        elif kind == "topic":
            prefix = multicast_prefix
        else:
            raise ValueError(
                f"unknown destination type {scheme!r} in {name!r} (use queue://NAME or topic://NAME)"
            )
        if not rest:
            raise ValueError(f"no name in destination {name!r}")
        return prefix + rest
    if not name:
        raise ValueError("empty destination")
    return name
