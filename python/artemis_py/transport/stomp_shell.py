"""What a STOMP connection's shell does the same whichever moves its bytes.

Two shells drive a :class:`~artemis_py.sessions.stomp.StompSession`: :mod:`.stomp` reads
and writes a Trio stream (TLS and WebSocket clients), :mod:`.plane_connection` has the
Rust data plane do it (plain-TCP clients). Both keep the same contract, and this is where
they keep it alike: a frame with nothing ahead of it and nothing to wait for completes at
once; otherwise its step goes to the pipeline, which settles steps in frame order and then
sends their RECEIPTs (never before durability); a browse is read in its turn; and a
closing connection's last ACKs are handled and settled, and the ACKs nobody waited for are
written, before the session returns its other deliveries.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

import trio

from artemis_py.broker.pending import Pending, durable, settle_in_order
from artemis_py.exceptions import BrokerError, StorageError
from artemis_py.protocol.stomp import Frame
from artemis_py.sessions.stomp import StompError, StompSession, browsing
from artemis_py.sessions.stomp.actions import Browse
from artemis_py.sessions.stomp.errors import refusal_kind

if TYPE_CHECKING:
    from artemis_py.broker.offset_reading import BrowseResult, StreamInfo

log = logging.getLogger("artemis_py.stomp")

#: What the pipeline holds: a pending to settle or a browse to carry out (or None), and a
#: receipt to send (or None).
Step = tuple[Pending | Browse | None, str | None]
#: Steps a pipeline settles in a row, their records durable already, before it lets the
#: other tasks run (settling a durable one needs no wait, so no task switch).
_RUN_BEFORE_YIELD = 64


class Steps(Protocol):
    """Where a pipeline takes its steps from: a memory channel's receiving end, or
    anything that reads as one (the data plane's connections keep a lighter queue)."""

    def receive_nowait(self) -> Step: ...

    async def receive(self) -> Step: ...


def ttl_expired_message(peer: str, ttl: float) -> str:
    """Artemis's words (AMQ229014), in the ERROR before it closes a connection that sent
    nothing within its TTL (connectionTtl or the negotiated heart-beats')."""
    return (
        f"AMQ229014: Did not receive data from {peer} within the "
        f"{round(ttl * 1000)}ms connection TTL. The connection will now be closed."
    )


def no_connect_message(handshake_timeout: int) -> str:
    """The ERROR of a connection whose CONNECT did not come within ``handshake-timeout``
    (the data plane writes it itself: the listener is given it)."""
    return f"no CONNECT frame within {handshake_timeout} s (handshake-timeout)"


class SessionShell:
    """The shared part of both shells (see the module doc); each shell supplies
    ``send_frame`` and ``_refuse_step`` (what a pipeline step refused in its turn does to
    it: a browse that cannot be read, a journal that failed)."""

    session: StompSession
    id: str
    peer: str
    error_kind: str | None  # of the ERROR frame sent, if any
    _failed: bool  # an ERROR refused a frame: nothing after it is handled
    _pipelined: int  # steps sent to the pipeline and not yet settled
    _closing: bool  # nothing but an ERROR goes out any more

    def send_frame(self, frame: Frame) -> None:
        raise NotImplementedError

    def send_receipt(self, receipt: str, pending: Pending | None) -> None:
        """Send the RECEIPT of a frame (a shell may encode it without a Frame)."""
        self.send_frame(self.session.receipt_frame(receipt, pending))

    async def _refuse_step(self, refusal: StompError, receipt: str | None) -> None:
        """Refuse the frame of a pipeline step in its turn (an ERROR, then the close);
        nothing if the connection is closing already."""
        raise NotImplementedError

    async def _browse(self, browse: Browse, receipt: str | None) -> None:
        """A browse in its turn; one that cannot be read refuses the frame."""
        refusal = await self._read_browse(browse)
        if refusal is not None:
            await self._refuse_step(refusal, receipt)

    def _step_settled(self) -> None:
        """A pipeline step was settled (a shell may resume reading)."""

    def _refused(self, message: str) -> None:
        """A frame was refused (or the protocol broken): ``message`` is logged, and nothing
        the client sends after it is handled."""
        log.info("connection %s from %s: %s", self.id, self.peer, message)
        self._failed = True

    def _queue_error(
        self,
        message: str,
        receipt: str | None,
        extra_headers: tuple[tuple[str, str], ...] = (),
        kind: str = "refused",
    ) -> None:
        """Send an ERROR as the connection's last frame: nothing else goes out after it."""
        self._closing = True
        self.error_kind = kind
        self.send_frame(self.session.error_frame(message, receipt, extra_headers))

    def _done_now(self, pending: Pending | Browse | None, receipt: str | None) -> bool:
        """Complete a handled frame and send its RECEIPT now, in frame order, when nothing
        is ahead of it and nothing to wait for (never a browse: it reads); False when it
        must go to the pipeline."""
        if self._pipelined or not (pending is None or pending.immediate):
            return False
        assert not isinstance(pending, Browse)
        if pending is not None:
            pending.complete()
        if receipt is not None:
            self.send_receipt(receipt, pending)
        return True

    async def _run_pipeline(self, receive: Steps) -> None:
        """Settle the steps in order until the channel is closed and empty."""
        run = 0  # steps taken since this task last let the others run
        while True:
            # receive_nowait first: a run of queued steps whose records are durable already
            # is settled without a task switch each; a long one yields now and then.
            step: Step | None = None
            try:
                step = receive.receive_nowait()
            except trio.WouldBlock:
                pass  # (not awaited in here: the exception would live as long as the wait)
            except trio.EndOfChannel:
                return
            if step is None:
                run = 0
                try:
                    step = await receive.receive()
                except trio.EndOfChannel:
                    return
            elif (run := run + 1) % _RUN_BEFORE_YIELD == 0:
                await trio.lowlevel.cancel_shielded_checkpoint()
            pending, receipt = step
            if isinstance(pending, Browse):
                await self._browse(pending, receipt)
                pending = None
            elif pending is not None:
                if pending.durable_now():
                    pending.complete()  # (without making two coroutines to find that out)
                else:
                    try:
                        await pending.settled()
                    except (StorageError, BrokerError) as exc:
                        # The journal failed, or a send held back (a full address or disk)
                        # was refused once it could go on (its address is FAIL): this frame
                        # and the ones after it cannot be answered. The client hears why, as
                        # for a frame refused at once.
                        refusal = StompError(str(exc), kind=refusal_kind(exc))
                        await self._refuse_step(refusal, receipt)
                        return
            if receipt is not None:
                self.send_receipt(receipt, pending)
            self._pipelined -= 1
            self._step_settled()

    async def _read_browse(self, browse: Browse) -> StompError | None:
        """Carry out a browse the session named: read it through the broker's offset
        reading (page files in worker threads), then the session sends what was found. A
        page file that cannot be read gives the refusal to answer (logged here)."""
        offsets, queue = self.session.broker.offsets, browse.queue
        found: BrowseResult | list[StreamInfo] | None = None
        try:
            if queue is not None and browse.listing:
                found = await offsets.streams(queue)
            elif queue is not None:
                found = await offsets.browse(
                    queue, browse.stream, browse.start, browse.end, browse.limit
                )
        except (StorageError, OSError, ValueError) as exc:
            return browsing.unreadable(browse, exc)
        browsing.answer(self.session, browse, found)
        return None

    async def _settle_last_acks(self, frames: Iterable[Frame]) -> None:
        """Handle the ACK and NACK among a closing connection's last ``frames`` and settle
        them. Other frames are skipped (nobody gets their RECEIPT); handling stops at a
        DISCONNECT or a refused ACK."""
        session = self.session
        pendings: list[Pending] = []
        for frame in frames:
            if frame.command == "DISCONNECT":
                break
            if frame.command not in ("ACK", "NACK"):
                log.debug("connection %s: %s after the close ignored", self.id, frame.command)
                continue
            try:
                pending = session.handle(frame)
            except StompError as exc:
                log.debug("connection %s: last %s refused: %s", self.id, frame.command, exc)
                break
            if isinstance(pending, Pending):
                pendings.append(pending)
        if pendings:
            log.debug("connection %s: %d last acknowledgements", self.id, len(pendings))
            try:
                await settle_in_order(pendings)
            except StorageError as exc:
                log.error("connection %s: last acknowledgements failed: %s", self.id, exc)

    async def _acks_written(self) -> None:
        """Wait until the ACKs nobody waited for (no receipt) are written: the node
        closes the connection only then, and a client that saw it close may count on them
        (a process crash cannot undo them). Only sessions that sent such ACKs wait."""
        if not self.session.unawaited_acks:
            return
        try:
            await durable(self.session.broker.persistence.written())
        except StorageError as exc:
            log.error("connection %s: acknowledgements not written: %s", self.id, exc)
