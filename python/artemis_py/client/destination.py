"""Destination names as the Artemis CLI spells them, mapped to what a STOMP frame says.

``artemis producer --destination queue://ORDERS`` names the anycast queue ``ORDERS`` and
``topic://PRICES`` the multicast address ``PRICES``. Over STOMP the routing type travels in
a header Artemis reads (docs/stomp.md): ``destination-type`` on a SEND and
``subscription-type`` on a SUBSCRIBE, ``ANYCAST`` or ``MULTICAST``. With it the name needs no
prefix, so ``queue://ORDERS`` means the same on every acceptor: one without prefixes (what
``artemis create`` generates) and one with ``anycastPrefix=/queue/`` alike. A prefix is put in
front of the name only when the caller asks for one (``anycast_prefix``/``multicast_prefix``:
for a STOMP server that reads routing types from prefixes alone, as ActiveMQ Classic does).

Anything without one of the two schemes is a raw STOMP destination and goes out as it is,
without a routing-type header (``/queue/ORDERS`` on an acceptor with that prefix, a bare
address that the acceptor's prefixes and the address settings decide about, or a fully
qualified ``address::queue``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

__all__ = [
    "ANYCAST",
    "MULTICAST",
    "Destination",
    "DestinationLike",
    "add_destination_arguments",
    "parse_destination",
]

ANYCAST: Final = "ANYCAST"
MULTICAST: Final = "MULTICAST"
_SCHEMES: Final = {"queue": ANYCAST, "topic": MULTICAST}
Pairs: TypeAlias = Sequence[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class Destination:
    """A STOMP ``destination`` header and the routing type it is meant with (None: the
    acceptor's prefixes and the broker's address settings decide, as for a raw name)."""

    name: str
    routing_type: str | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("empty destination")
        if self.routing_type not in (None, ANYCAST, MULTICAST):
            raise ValueError(f"routing type must be {ANYCAST} or {MULTICAST}")

    @property
    def multicast(self) -> bool:
        return self.routing_type == MULTICAST

    def send_headers(self, others: Pairs = ()) -> list[tuple[str, str]]:
        """A SEND's headers: ``destination`` and ``destination-type``, then ``others``."""
        return self._headers("destination-type", others)

    def subscribe_headers(self, others: Pairs = ()) -> list[tuple[str, str]]:
        """A SUBSCRIBE's headers: ``destination`` and ``subscription-type``, then ``others``."""
        return self._headers("subscription-type", others)

    def _headers(self, type_header: str, others: Pairs) -> list[tuple[str, str]]:
        headers = [("destination", self.name)]
        # A routing-type header of the caller's own among ``others`` goes instead of ours.
        if self.routing_type is not None and not any(name == type_header for name, _ in others):
            headers.append((type_header, self.routing_type))
        return headers + list(others)


DestinationLike = str | Destination
"""What the client's ``send`` and ``subscribe`` take: a :class:`Destination`, or a name
:func:`parse_destination` reads."""


def parse_destination(
    name: DestinationLike, *, anycast_prefix: str = "", multicast_prefix: str = ""
) -> Destination:
    """The :class:`Destination` ``name`` stands for (see the module doc); a
    :class:`Destination` is returned as it is.

    Raises :class:`ValueError` for an empty name, an unknown ``SCHEME://`` or nothing after
    the scheme.
    """
    if isinstance(name, Destination):
        return name
    scheme, sep, rest = name.partition("://")
    if not sep:
        return Destination(name)
    routing_type = _SCHEMES.get(scheme.lower())
    if routing_type is None:
        raise ValueError(
            f"unknown destination type {scheme!r} in {name!r} (use queue://NAME or topic://NAME)"
        )
    if not rest:
        raise ValueError(f"no name in destination {name!r}")
    prefix = anycast_prefix if routing_type == ANYCAST else multicast_prefix
    return Destination(prefix + rest, routing_type)


def add_destination_arguments(group: argparse._ArgumentGroup, default: str) -> None:
    """The command-line options ``--destination``, ``--anycast-prefix`` and
    ``--multicast-prefix`` (producer, consumer and perf); :func:`parse_destination` reads them."""
    group.add_argument(
        "--destination",
        default=default,
        help=f"queue://NAME or topic://NAME, or a raw STOMP destination such as /queue/NAME, "
        f"sent as it is (default {default}); queue:// is sent with destination-type ANYCAST "
        "(subscription-type on a subscribe), topic:// with MULTICAST, so either works on any "
        "acceptor, with or without anycastPrefix/multicastPrefix",
    )
    for kind, scheme in (("anycast", "queue"), ("multicast", "topic")):
        group.add_argument(
            f"--{kind}-prefix",
            default="",
            metavar="PREFIX",
            help=f"put PREFIX in front of a {scheme}://NAME (default: none; only for a STOMP "
            f"server that reads routing types from prefixes alone, e.g. ActiveMQ Classic's "
            f"/{scheme}/)",
        )
