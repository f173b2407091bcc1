"""The confirm task of a cluster link's receiving side: the shell that waits for the journal.

Theory of operation
-------------------
The dispatcher (:mod:`artemis_py.cluster.dispatch`) stores each run of forwarded messages
with one journal submit and hands its :class:`~artemis_py.broker.pending.Pending` and last
seq to :meth:`Confirmations.stored`, in the order the runs came. One task
(:meth:`Confirmations.run`) takes what has queued (up to ``CONFIRM_BATCH`` runs), waits once
for their latest tickets (a journal completes its tickets in order, so all are durable when
those are), completes them in order, and tells the link's
:class:`~artemis_py.protocol.cluster.link_state.LinkState`, which says whether a Confirm goes
out now. The sender acknowledges a message only once it cannot be lost here.

If the journal fails, what became durable before the failure is completed and confirmed one
run at a time, then the link closes and the StorageError propagates.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Sequence
from types import TracebackType

import trio

from artemis_py.broker.pending import Pending, settle_in_order
from artemis_py.exceptions import StorageError
from artemis_py.protocol.cluster.link_state import CONFIRM_BATCH, Action, LinkState, Send
from artemis_py.transport.link import Link

log = logging.getLogger("artemis_py.cluster")

PIPELINE_DEPTH = 1024  # stored runs waiting to be durable, per link

#: A run of forwarded messages stored, and the seq of its last message.
Stored = tuple[Pending, int]


class Confirmations:
    """Confirms one link's stored runs once durable (see the module doc)."""

    def __init__(self, link: Link, state: LinkState, label: str) -> None:
        self.link = link
        self.state = state
        self.label = label  # for the log: the cluster's name
        self._send, self._receive = trio.open_memory_channel[Stored](PIPELINE_DEPTH)

    def stored(self, pending: Pending, last_seq: int) -> Awaitable[None] | None:
        """A run was submitted; the awaitable, if any, waits for room in the pipeline."""
        item = (pending, last_seq)
        # send_nowait: no task switch while the confirm task keeps up.
        try:
            self._send.send_nowait(item)
        except trio.WouldBlock:
            return self._send.send(item)
        return None

    async def __aenter__(self) -> Confirmations:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """No more runs: the confirm task finishes what is queued, then ends."""
        await self._send.aclose()

    async def run(self) -> None:
        """Complete and confirm stored runs until the link's side is closed."""
        pipeline = self._receive
        while True:
            try:
                runs = [await pipeline.receive()]
            except trio.EndOfChannel:
                return
            while len(runs) < CONFIRM_BATCH:
                try:
                    runs.append(pipeline.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
            try:
                await settle_in_order([pending for pending, _ in runs])
            except StorageError:
                await self._confirm_durable_part(runs)
                raise
            waiting = pipeline.statistics().current_buffer_used > 0
            self._send_all(self.state.durable(runs[-1][1], more_waiting=waiting))

    async def _confirm_durable_part(self, runs: list[Stored]) -> None:
        """The journal failed during ``runs``: complete and confirm what became durable
        before the failure, one by one, then close the link (raises the StorageError)."""
        try:
            for pending, seq in runs:
                await pending.settled()
                self._send_all(self.state.durable(seq, more_waiting=True))
        except StorageError as exc:
            log.error("cluster %s: cannot store forwarded messages: %s", self.label, exc)
            raise
        finally:
            self._send_all(self.state.failed())
            self.link.close()

    def _send_all(self, actions: Sequence[Action]) -> None:
        for action in actions:
            assert isinstance(action, Send)  # (all a durable run asks for)
            self.link.send(action.frame)
