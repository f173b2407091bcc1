"""What an established cluster link's frames mean, without I/O (h11-style: events in,
actions out; no trio, no clock, no broker).

Theory of operation
-------------------
The codec (:mod:`.connection`) turns bytes into frames and checks that each side sends only
its own kinds. A :class:`LinkState` says what each frame asks of the node, as *actions* that
the cluster's one dispatcher (:mod:`artemis_py.cluster.dispatch`) carries out:

* :class:`Store` -- a *run* of forwarded messages to store in one journal submit. Messages
  are gathered until the reader has handled everything it read (:meth:`LinkState.caught_up`,
  called before it waits for more), until :data:`RUN_LIMIT` have come, or until another
  frame arrives: whatever follows a message sees it stored first.
* :class:`Acknowledge` -- the peer has the messages up to ``seq`` durably (a Confirm): the
  bridge acknowledges them here.
* :class:`Send` -- a frame for the peer: a cumulative Confirm once stored runs are durable
  (:meth:`LinkState.durable`), at the latest every :data:`CONFIRM_BATCH` messages during a
  long burst, else as soon as no stored run waits.
* :class:`Apply` -- news for the cluster connection: topology, a departure (Leaving), the
  peer's bindings and consumers, queues to create for a node scaling down, sealed streams,
  and clustered grouping's proposals and decisions.

Invariants: a run's messages are in the order received, and runs are reported in order; a
Confirm never names a seq below one already sent; a link's frames of the other direction
never reach here (the codec refused them).
"""

from __future__ import annotations

from dataclasses import dataclass

from artemis_py.protocol.cluster.frames import (
    Bindings,
    Confirm,
    Consumers,
    CreateQueues,
    Leaving,
    Message,
    Proposal,
    ProposalResponse,
    Sealed,
    Topology,
    Unproposal,
)

__all__ = [
    "CONFIRM_BATCH",
    "RUN_LIMIT",
    "Acknowledge",
    "Action",
    "Apply",
    "LinkState",
    "News",
    "Send",
    "Store",
]

RUN_LIMIT = 64  # forwarded messages stored in one journal submit, at most
CONFIRM_BATCH = 256  # messages stored before a Confirm goes out during a long burst

#: Frames that tell the cluster connection something (see :class:`Apply`).
News = (
    Topology
    | Leaving
    | Bindings
    | Consumers
    | CreateQueues
    | Sealed
    | Proposal
    | ProposalResponse
    | Unproposal
)


_NEWS = (
    Topology,
    Leaving,
    Bindings,
    Consumers,
    CreateQueues,
    Sealed,
    Proposal,
    ProposalResponse,
    Unproposal,
)


@dataclass(frozen=True, slots=True)
class Store:
    """Store these forwarded messages together; ``last_seq`` is the last one's seq."""

    messages: tuple[Message, ...]

    @property
    def last_seq(self) -> int:
        return self.messages[-1].seq


@dataclass(frozen=True, slots=True)
class Acknowledge:
    """The peer confirmed every message up to ``seq``."""

    seq: int


@dataclass(frozen=True, slots=True)
class Send:
    """Send ``frame`` to the peer."""

    frame: Confirm


@dataclass(frozen=True, slots=True)
class Apply:
    """News for the cluster connection."""

    news: News


Action = Store | Acknowledge | Send | Apply


class LinkState:
    """The meaning of one established link's frames (see the module doc)."""

    def __init__(self, *, run_limit: int = RUN_LIMIT, confirm_batch: int = CONFIRM_BATCH) -> None:
        self.run_limit = run_limit
        self.confirm_batch = confirm_batch
        self._run: list[Message] = []
        self._confirmed = 0  # the last seq confirmed to the peer
        self._durable = 0  # the last seq stored durably

    def receive(self, event: object) -> list[Action]:
        """What a frame from the peer asks for (nothing for one without meaning here)."""
        if isinstance(event, Message):
            self._run.append(event)
            return self._flush() if len(self._run) >= self.run_limit else []
        actions = self._flush()  # whatever follows a message sees it stored
        if isinstance(event, Confirm):
            actions.append(Acknowledge(event.seq))
        elif isinstance(event, _NEWS):
            actions.append(Apply(event))
        return actions

    def caught_up(self) -> list[Action]:
        """Everything read so far was handled: store the run gathered (before reading on)."""
        return self._flush()

    def durable(self, seq: int, *, more_waiting: bool) -> list[Action]:
        """The runs up to ``seq`` are durable; ``more_waiting``: stored runs not yet."""
        self._durable = max(self._durable, seq)
        if self._durable - self._confirmed >= self.confirm_batch or not more_waiting:
            return self._confirm()
        return []

    def failed(self) -> list[Action]:
        """Storing failed: confirm what became durable before (the link then closes)."""
        return self._confirm()

    def _confirm(self) -> list[Action]:
        if self._durable <= self._confirmed:
            return []
        self._confirmed = self._durable
        return [Send(Confirm(seq=self._durable))]

    def _flush(self) -> list[Action]:
        if not self._run:
            return []
        run, self._run = tuple(self._run), []
        return [Store(run)]
