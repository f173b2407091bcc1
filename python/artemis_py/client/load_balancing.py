"""Connection load-balancing policies: which node a new client connection goes to.

Artemis clients pick the node of each new connection with a
``connectionLoadBalancingPolicyClassName`` (clusters §"Client-Side Load balancing"); these
are the four it ships, under its class names or short ones:

======================  ===============================================================
``round-robin``         a random first node, then each next one in turn (the default)
``random``              a random node each time
``random-sticky``       a random node the first time, then that one again
``first-element``       always the first node of the list
======================  ===============================================================

A policy answers :meth:`ConnectionLoadBalancingPolicy.select` (an index below ``count``);
the client tries the others in list order from there when that node does not answer.
"""

from __future__ import annotations

import random
from typing import Final, Protocol

__all__ = [
    "POLICIES",
    "ConnectionLoadBalancingPolicy",
    "FirstElement",
    "Random",
    "RandomSticky",
    "RoundRobin",
    "make_policy",
    "policy_name",
]

_ARTEMIS_PACKAGE: Final = "org.apache.activemq.artemis.api.core.client.loadbalance."


class ConnectionLoadBalancingPolicy(Protocol):
    def select(self, count: int) -> int:
        """The index (0 <= index < ``count``) of the node for the next connection."""
        ...


class RoundRobin:
    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._next: int | None = None

    def select(self, count: int) -> int:
        if self._next is None:
            self._next = self._rng.randrange(count)
        index = self._next % count
        self._next = index + 1
        return index


class Random:
    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()

    def select(self, count: int) -> int:
        return self._rng.randrange(count)


class RandomSticky:
    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._chosen: int | None = None

    def select(self, count: int) -> int:
        if self._chosen is None or self._chosen >= count:
            self._chosen = self._rng.randrange(count)
        return self._chosen


class FirstElement:
    def select(self, count: int) -> int:
        return 0


POLICIES: Final = {
    "round-robin": ("RoundRobinConnectionLoadBalancingPolicy", RoundRobin),
    "random": ("RandomConnectionLoadBalancingPolicy", Random),
    "random-sticky": ("RandomStickyConnectionLoadBalancingPolicy", RandomSticky),
    "first-element": ("FirstElementConnectionLoadBalancingPolicy", FirstElement),
}
"""Short name -> (Artemis's class name, the class)."""


def policy_name(text: str) -> str:
    """The short name of a policy given by short name, Artemis class name (with or without
    its package) or the short name without dashes; ValueError naming it otherwise."""
    wanted = text.strip()
    if wanted.startswith(_ARTEMIS_PACKAGE):
        wanted = wanted[len(_ARTEMIS_PACKAGE) :]
    key = wanted.lower().replace("-", "").replace("_", "")
    for name, (class_name, _) in POLICIES.items():
        if key in (name.replace("-", ""), class_name.lower()):
            return name
    known = ", ".join(f"{name} ({cls})" for name, (cls, _) in POLICIES.items())
    raise ValueError(f"unknown connection load-balancing policy {text!r} (known: {known})")


def make_policy(name: str, rng: random.Random | None = None) -> ConnectionLoadBalancingPolicy:
    """A new policy of short name ``name``; ``rng`` makes the random ones reproducible."""
    short = policy_name(name)
    if short == "first-element":
        return FirstElement()
    if short == "random":
        return Random(rng)
    if short == "random-sticky":
        return RandomSticky(rng)
    return RoundRobin(rng)
