"""Diverts: which diverts take a copy of a message sent to an address, and the copy.

Theory of operation (Artemis's ``DivertBinding`` in ``BindingsImpl.route``)
----------------------------------------------------------------------------
The diverts of an address are those declared on it and those whose pattern (with wildcard
routing on) matches it. For a message sent there:

1. the *exclusive* diverts come first: each whose filter accepts the message diverts it.
   If any did, the message goes nowhere else: not to the address's queues, not to its
   non-exclusive diverts;
2. otherwise the *non-exclusive* diverts, grouped by routing name: in each group the next
   divert round robin whose filter accepts the message diverts it (a group of one, the
   default, is that divert when its filter accepts), and the message goes to the
   address's queues as well.

A divert's routing ignores the message's routing type: it is the copy's routing type that
its ``routing-type`` sets. Each copy (:func:`diverted_copy`) is a message of its own: a new
id, the forwarding address, and the ``_AMQ_ORIG_*`` properties naming the original's
address, message id and routing type and the divert (as ``_AMQ_ORIG_QUEUE``, as Artemis
does); its expiration is the original's.

:class:`DivertTable` answers "the diverts of this address" with one dictionary lookup: it is
built once from the configuration (diverts are only configured in broker.xml) and keeps the
answers for patterns per concrete address, as :mod:`.wildcard_links` does for queues. The
round-robin positions live in the answer, per concrete address (Artemis keeps them per
address's bindings).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from artemis_py.broker.filter import Filter
from artemis_py.broker.message import Message
from artemis_py.config import AddressMatcher, ComponentRoutingType, RoutingType, WildcardSyntax

ORIG_ADDRESS = "_AMQ_ORIG_ADDRESS"
ORIG_QUEUE = "_AMQ_ORIG_QUEUE"
ORIG_MESSAGE_ID = "_AMQ_ORIG_MESSAGE_ID"
ORIG_ROUTING_TYPE = "_AMQ_ORIG_ROUTING_TYPE"
# Artemis's RoutingType.getType() values, as _AMQ_ORIG_ROUTING_TYPE carries them.
_ROUTING_TYPE_CODES = {RoutingType.MULTICAST: "0", RoutingType.ANYCAST: "1"}
# So many concrete addresses' answers for patterns are kept before they are computed anew.
_CACHE_LIMIT = 4096


@dataclass(frozen=True, slots=True)
class Divert:
    """A divert, ready to route: ``forwarding`` is each (address, queue or None) it copies
    to, in order."""

    name: str
    address: str
    forwarding: tuple[tuple[str, str | None], ...]
    exclusive: bool
    filter: Filter | None
    routing_name: str
    routing_type: ComponentRoutingType

    def accepts(self, lookup: Callable[[str], object]) -> bool:
        return self.filter is None or self.filter.matches(lookup)


class AddressDiverts:
    """The diverts of one concrete address and the round-robin position of each group."""

    __slots__ = ("exclusive", "groups", "positions")

    def __init__(self, diverts: Iterable[Divert]) -> None:
        self.exclusive = tuple(d for d in diverts if d.exclusive)
        groups: dict[str, list[Divert]] = {}
        for divert in diverts:
            if not divert.exclusive:
                groups.setdefault(divert.routing_name, []).append(divert)
        self.groups = tuple(tuple(group) for group in groups.values())
        self.positions = [0] * len(self.groups)

    def choose(self, lookup: Callable[[str], object]) -> tuple[list[Divert], bool]:
        """The diverts that take a copy of the message ``lookup`` describes, and whether
        they take it away from the address's queues (an exclusive one accepted it)."""
        chosen = [d for d in self.exclusive if d.accepts(lookup)]
        if chosen:
            return chosen, True
        positions = self.positions
        for index, group in enumerate(self.groups):
            size = len(group)
            start = positions[index]
            for step in range(size):
                divert = group[(start + step) % size]
                if divert.accepts(lookup):
                    chosen.append(divert)
                    positions[index] = (start + step + 1) % size
                    break
        return chosen, False


class DivertTable:
    """Every divert of the node, by the concrete address whose sends they see."""

    __slots__ = ("_answers", "_concrete", "_patterns", "diverts")

    def __init__(self, diverts: Iterable[Divert], wildcards: WildcardSyntax | None) -> None:
        self.diverts = tuple(diverts)
        self._concrete: dict[str, list[Divert]] = {}
        self._patterns: list[tuple[AddressMatcher, Divert]] = []
        for divert in self.diverts:
            matcher = None if wildcards is None else AddressMatcher(divert.address, wildcards)
            if matcher is not None and matcher.is_wildcard:
                self._patterns.append((matcher, divert))
            else:
                self._concrete.setdefault(divert.address, []).append(divert)
        self._answers: dict[str, AddressDiverts | None] = {}
        self._reset()

    def _reset(self) -> None:
        self._answers = {
            address: AddressDiverts(self._with_patterns(address, diverts))
            for address, diverts in self._concrete.items()
        }

    def _with_patterns(self, address: str, own: list[Divert]) -> list[Divert]:
        """``own`` and the pattern diverts matching ``address``, in the file's order."""
        matching = {d.name for m, d in self._patterns if m.matches(address)}
        names = matching | {d.name for d in own}
        return [d for d in self.diverts if d.name in names]

    def on(self, address: str) -> AddressDiverts | None:
        """The diverts of the concrete ``address`` (None: it has none)."""
        try:
            return self._answers[address]
        except KeyError:
            pass
        if not self._patterns:
            return None
        if len(self._answers) >= _CACHE_LIMIT + len(self._concrete):
            self._reset()
        found = self._with_patterns(address, [])
        answer = self._answers[address] = AddressDiverts(found) if found else None
        return answer


def diverted_copy(message: Message, divert: Divert, address: str, message_id: int) -> Message:
    """The copy of ``message`` that ``divert`` sends to ``address``, under ``message_id``."""
    copy = message.copy(message_id)  # (its body, properties, priority, expiration...)
    copy.address = address
    kind = divert.routing_type
    if kind is ComponentRoutingType.STRIP:
        copy.routing_type = None
    elif kind is ComponentRoutingType.ANYCAST:
        copy.routing_type = RoutingType.ANYCAST
    elif kind is ComponentRoutingType.MULTICAST:
        copy.routing_type = RoutingType.MULTICAST
    # (a copy of a copy: the last divert's, as Artemis)
    copy.set_properties(original_properties(message, divert.name))
    return copy


def original_properties(message: Message, queue: str | None) -> dict[str, str]:
    """The ``_AMQ_ORIG_*`` properties a copy of ``message`` (or the message itself, sent
    on elsewhere) carries: its address, id and routing type, and ``queue`` (a divert's
    name, the queue it left) when there is one (Artemis's referenceOriginalMessage)."""
    original = {ORIG_ADDRESS: message.address, ORIG_MESSAGE_ID: str(message.message_id)}
    if queue is not None:
        original[ORIG_QUEUE] = queue
    if message.routing_type is not None:
        original[ORIG_ROUTING_TYPE] = _ROUTING_TYPE_CODES[message.routing_type]
    return original
