"""Sends that wait for a message group's decision (clustered grouping).

Theory of operation
-------------------
On a node with a ``<grouping-handler>``, routing a grouped message may need a decision that
another node makes (:mod:`.routing.grouping`): routing then raises
:class:`~.routing.grouping.GroupUndecided`. A client's send can wait for it, as a send
waits for room in a full address: :class:`GroupedSending` gives the broker's ``route``,
``send`` and ``commit`` for such a node.

* ``route`` lets routing wait (``may_wait``) and, when it must, answers
  :class:`Undecided`: an empty list of queues that carries the wait and the routing to do
  again. It travels where queues go: into ``send``, or into a STOMP transaction until
  COMMIT.
* ``send`` of an :class:`Undecided` returns a pending whose gate waits, routes again, and
  only then sends; ``commit`` does the same for each undecided send of the transaction,
  in order, before committing it. A pipelining client keeps its order: its later frames
  settle after this one.
* A wait that times out (the handler's ``timeout``) raises BrokerError: the client gets an
  ERROR naming the group, as Artemis throws on the send. A route that keeps needing
  decisions (their bindings keep going away) gives up after :data:`MAX_TRIES`, as
  Artemis's BindingsImpl does.

A node without a grouping handler uses the parts' own methods, and pays nothing for this.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

from artemis_py.broker.message import Message
from artemis_py.broker.pending import Pending
from artemis_py.broker.queue import Queue
from artemis_py.broker.routing.grouping import GroupRouter, GroupUndecided
from artemis_py.broker.write_order import after
from artemis_py.exceptions import BrokerError

if TYPE_CHECKING:
    from artemis_py.broker.duplicate_cache import Claim
    from artemis_py.broker.sending import Sending, Transaction

MAX_TRIES = 10  # Artemis's BindingsImpl.MAX_GROUP_RETRY


class Undecided(list[Queue]):
    """No queues yet: routing waits for a group's decision (``wait``), then ``again``."""

    __slots__ = ("again", "wait")

    def __init__(
        self, wait: Callable[[], Awaitable[None]], again: Callable[[], list[Queue]]
    ) -> None:
        super().__init__()
        self.wait = wait
        self.again = again

    def __bool__(self) -> bool:
        return True  # a send, not a message routed nowhere

    async def routed(self) -> list[Queue]:
        """The queues, once the decisions are in (BrokerError if they never come)."""
        wait = self.wait
        for _ in range(MAX_TRIES):
            await wait()
            try:
                return self.again()
            except GroupUndecided as undecided:
                wait = undecided.wait
        raise BrokerError(
            f"a message group's binding was still not decided after {MAX_TRIES} proposals"
        )


class GroupedSending:
    """The broker's route, send and commit on a node with a grouping handler."""

    def __init__(self, sending: Sending, router: GroupRouter) -> None:
        self.sending = sending
        self.router = router

    def route(self, message: Message, queue_name: str | None = None) -> list[Queue]:
        if message.group_id is None:
            return self.sending.route(message, queue_name)
        again = partial(self._route_waiting, message, queue_name)
        try:
            return again()
        except GroupUndecided as undecided:
            return Undecided(undecided.wait, again)

    def _route_waiting(self, message: Message, queue_name: str | None) -> list[Queue]:
        router = self.router
        router.may_wait = True
        try:
            return self.sending.route(message, queue_name)
        finally:
            router.may_wait = False

    def send(
        self,
        message: Message,
        queues: list[Queue],
        *,
        internal: bool = False,
        claim: Claim | None = None,
    ) -> Pending:
        if type(queues) is not Undecided:
            return self.sending.send(message, queues, internal=internal, claim=claim)
        routed: list[list[Queue]] = []

        async def decided() -> None:
            routed.append(await queues.routed())

        return after(decided, lambda: self.sending.send(message, routed[0], claim=claim))

    def commit(self, tx: Transaction, *, from_client: bool = False) -> Pending:
        if not any(type(queues) is Undecided for _, queues in tx.sends):
            return self.sending.commit(tx, from_client=from_client)
        sends: list[tuple[Message, list[Queue]]] = []

        async def decided() -> None:
            for message, queues in tx.sends:
                if isinstance(queues, Undecided):
                    queues = await queues.routed()
                sends.append((message, queues))

        def commit() -> Pending:
            return self.sending.commit(replace(tx, sends=sends), from_client=from_client)

        return after(decided, commit)
