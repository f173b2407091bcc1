"""Sending on a node with diverts: the copies a send makes, stored and queued with it.

Theory of operation
-------------------
A node whose broker.xml declares no divert uses :class:`~.sending.Sending` as it is, so
diverts cost its sends nothing. A node with diverts uses :class:`DivertingSending`, whose
:meth:`~DivertingSending.route` asks the :class:`~.routing.diverts.DivertTable` for the
diverts of the message's address (one dictionary lookup when there are none):

* for each divert that takes the message (:mod:`.routing.diverts`), a copy under a new id
  is routed to each of its forwarding addresses like any send there: auto-creation (for a
  copy with a routing type; as in Artemis, one without creates nothing), that
  address's own diverts (a chain; loops were refused at start, :mod:`..config.readers.diverts`),
  its remote bindings (the copy is load-balanced to other nodes like any message sent
  there), and an ``address::queue`` names one queue;
* an exclusive divert leaves the original no queue; otherwise it is routed as usual.

The answer is :class:`Diverted`: the original's queues (a list, as without diverts) that
carries the copies and their queues beside them. It travels where the queues go: into
:meth:`~DivertingSending.send`, or into a STOMP transaction's sends until COMMIT, or into a
dead-letter or expiry move. There the original and its copies become one
:class:`~.sending.Transaction`: placed by their addresses' limits, written in one journal
transaction, and queued once it is durable, so a sender's RECEIPT means the copies are as
durable as the original, and a crash keeps all of them or none. A duplicate id the send
claimed is journaled when any of them is (an exclusively diverted original is not stored).

Routing again (a forwarded message whose bindings are gone, redistribution) never diverts:
Artemis diverts where a message is sent, and a message from another node was diverted
there. (Artemis consults exclusive diverts for a message a neighbour forwards too; with the
same diverts on every node, as a cluster is configured, they never match there, since the
sending node's own diverts would have taken the message.)
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING

from artemis_py.broker.filter import Filter, FilterSyntaxError
from artemis_py.broker.message import Message
from artemis_py.broker.paging import Full, Placement
from artemis_py.broker.pending import Pending
from artemis_py.broker.queue import Queue
from artemis_py.broker.routing import split_fqqn
from artemis_py.broker.routing.diverts import Divert, DivertTable, diverted_copy
from artemis_py.broker.sending import Sending, Transaction
from artemis_py.broker.write_order import after
from artemis_py.config import BrokerConfig, ConfigProblem, DivertConfig
from artemis_py.config.problems import raise_problems
from artemis_py.exceptions import BrokerError

if TYPE_CHECKING:
    from artemis_py.broker.addresses import Addresses
    from artemis_py.broker.duplicate_cache import Claim, DuplicateIDCache
    from artemis_py.broker.paging import PagingManager
    from artemis_py.broker.persistence import Persistence
    from artemis_py.broker.routing import PostOffice

#: One message and its queues, as a transaction holds its sends.
Send = tuple[Message, list[Queue]]


class Diverted(list[Queue]):
    """The queues of a message some divert took (an exclusive divert: none), with the
    copies the diverts made and their queues (``copies``). True when either is not empty:
    a send with nothing but copies is still a send."""

    __slots__ = ("copies",)

    def __init__(self, queues: Iterable[Queue] = ()) -> None:
        super().__init__(queues)
        self.copies: list[Send] = []

    def __bool__(self) -> bool:
        return bool(self.copies) or len(self) > 0


def compile_diverts(config: BrokerConfig) -> DivertTable:
    """The node's diverts from broker.xml; a filter that does not parse is a configuration
    error naming the divert's line (the config package cannot parse filters)."""
    diverts = []
    problems = []
    for spec in config.diverts:
        try:
            diverts.append(_compiled(spec))
        except FilterSyntaxError as exc:
            problems.append(
                ConfigProblem(
                    config.source or "broker.xml",
                    spec.line or None,
                    "divert",
                    f"divert '{spec.name}': invalid filter: {exc}",
                )
            )
    if problems:
        raise_problems(problems)  # (as the parser reports, with file and line)
    return DivertTable(diverts, config.wildcards if config.wildcard_routing_enabled else None)


def _compiled(spec: DivertConfig) -> Divert:
    return Divert(
        name=spec.name,
        address=spec.address,
        forwarding=tuple(split_fqqn(name) for name in spec.forwarding_addresses),
        exclusive=spec.exclusive,
        filter=Filter.parse(spec.filter),
        # Artemis's default routing name is a random one: a group of its own.
        routing_name=spec.routing_name if spec.routing_name is not None else "\0" + spec.name,
        routing_type=spec.routing_type,
    )


class DivertingSending(Sending):
    """:class:`~.sending.Sending` with the node's diverts (see the module docstring)."""

    def __init__(
        self,
        diverts: DivertTable,
        persistence: Persistence,
        paging: PagingManager,
        post_office: PostOffice,
        addresses: Addresses,
        duplicates: DuplicateIDCache,
        node_id: str,
    ) -> None:
        super().__init__(persistence, paging, post_office, addresses, duplicates, node_id)
        self.diverts = diverts

    def route(self, message: Message, queue_name: str | None = None) -> list[Queue]:
        """The queues ``message`` goes to, a :class:`Diverted` when a divert took it."""
        return self._route(message, queue_name, copy=False)

    def _route(self, message: Message, queue_name: str | None, *, copy: bool) -> list[Queue]:
        on_address = self.diverts.on(message.address)
        if on_address is None:
            return self._undiverted(message, queue_name, copy)
        chosen, exclusive = on_address.choose(message.filter_value)
        if not chosen:
            return self._undiverted(message, queue_name, copy)
        if exclusive:
            # Taken from the address's queues; the address must still exist (or be made).
            if not self._creates_nothing(message, queue_name, copy):
                self.addresses.resolve_address(message.address, message.routing_type, for_send=True)
            routed = Diverted()
        else:
            routed = Diverted(self._undiverted(message, queue_name, copy))
        next_id = self.persistence.next_id
        for divert in chosen:
            for address, queue in divert.forwarding:
                diverted = diverted_copy(message, divert, address, next_id())
                queues = self._route(diverted, queue, copy=True)
                routed.copies.append((diverted, list(queues)))
                if isinstance(queues, Diverted):  # the forwarding address's own diverts
                    routed.copies += queues.copies
        return routed

    def _undiverted(self, message: Message, queue_name: str | None, copy: bool) -> list[Queue]:
        if self._creates_nothing(message, queue_name, copy):
            return []
        return self.route_undiverted(message, queue_name)

    def _creates_nothing(self, message: Message, queue_name: str | None, copy: bool) -> bool:
        """Whether ``message`` is a copy without a routing type (STRIP, or PASS of none) to
        an address that does not exist: Artemis auto-creates only for a routing type, so
        such a copy reaches no queue (only that address's diverts), and the send goes on."""
        return (
            copy
            and message.routing_type is None
            and queue_name is None
            and self.post_office.address(message.address) is None
        )

    def send(
        self,
        message: Message,
        queues: list[Queue],
        *,
        internal: bool = False,
        claim: Claim | None = None,
    ) -> Pending:
        """As :meth:`.Sending.send`; a diverted message is sent with its copies in one
        transaction, each placed by its address's limits (any of them full: the send
        waits or fails, as the original alone would)."""
        if not isinstance(queues, Diverted):
            return super().send(message, queues, internal=internal, claim=claim)
        sends: list[Send] = [(message, list(queues)), *queues.copies]
        paging, next_id = self.paging, self.persistence.next_id
        placements: list[Placement] = []
        try:
            for each, each_queues in sends:
                placement = paging.place(each, each_queues, next_id(), internal=internal)
                if placement.wait is not None:
                    for placed in placements:
                        placed.release()
                    resend = partial(self.send, message, queues, internal=internal, claim=claim)
                    return after(placement.wait, resend)
                placements.append(placement)
        except Full as exc:
            for placed in placements:
                placed.release()
            raise BrokerError(str(exc)) from exc  # (the cause: the metrics' error kind)
        if claim is not None:
            _claim_copies(claim, {message.message_id: queues.copies})
        return super().commit(Transaction(sends, [], claim, placements))

    def commit(self, tx: Transaction, *, from_client: bool = False) -> Pending:
        """As :meth:`.Sending.commit`, with each diverted send's copies after it."""
        placed = len(tx.placements)
        rest = tx.sends[placed:]
        if any(isinstance(queues, Diverted) for _, queues in rest):
            expanded: list[Send] = []
            copies: dict[int, list[Send]] = {}
            for message, queues in rest:
                expanded.append((message, list(queues)))
                if isinstance(queues, Diverted):
                    expanded += queues.copies
                    copies[message.message_id] = queues.copies
            tx.sends = tx.sends[:placed] + expanded
            if tx.claim is not None:
                _claim_copies(tx.claim, copies)
        return super().commit(tx, from_client=from_client)


def _claim_copies(claim: Claim, copies: dict[int, list[Send]]) -> None:
    """Let each duplicate id of ``claim`` count the copies (by original message id) of the
    messages that carry it: it is journaled when one of them is, since an exclusively
    diverted original is not."""
    for message_ids in claim.entries.values():
        for message_id in list(message_ids):
            message_ids += [copy.message_id for copy, _ in copies.get(message_id, ())]
