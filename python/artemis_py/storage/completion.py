"""Waiting for the tickets of a native store (the journal, a page store) on the Trio loop.

Both native stores have one Rust writer thread, hand out tickets that complete in order, and
poke an eventfd after every batch (or when the writer fails). This module turns that into
awaitable waits, and keeps the writer from being woken once per submit.

Theory of operation
-------------------
* **Completion comes back through the eventfd.** There is no pump task: the first task to
  wait becomes the *leader* and waits for the eventfd itself with
  ``trio.lowlevel.wait_readable``; later waiters park in a heap ordered by ticket. Before each
  wait the leader resets the eventfd, reads ``progress()`` and wakes every waiter whose
  ticket is <= the completed ticket; resetting before reading progress means no completion
  is missed. After a wake-up it reads progress again; if that settles its own ticket it
  returns at once and leaves the reset to the next leader (which does it after its submit,
  off the path from completion to that submit). When its own ticket is done the leader
  hands the role to the lowest waiter still parked (it is woken to lead) or, if none is,
  leaves it vacant. A lone appender is thus woken straight from the loop's poll, with no
  pump task between. If the writer failed, every waiter above the completed ticket gets the
  store's failure error.
* **Invariant:** while any waiter is parked there is a leader, and it is waiting for the
  eventfd or about to read progress; every completion after the last reset leaves the
  eventfd readable.
* **Waits are not abandoned.** A wait returns only once the outcome is known (written, or
  failed); a cancellation that arrives meanwhile is delivered at the caller's next
  checkpoint. So a cancelled caller never believes a record was not written when it was.
* **One writer wake-up per loop pass** (:class:`DeferredWake`). A submit made on the Trio
  thread leaves the writer asleep (a deferred submit) and marks the store; a Trio instrument
  wakes the writer of each marked store in ``before_io_wait``, i.e. once the tasks runnable
  in this pass have run and before the loop polls. The submits of one pass therefore share a
  batch and one wake-up. Sparse traffic keeps the immediate wake-up: when the last pass that
  submitted anything submitted once and the writer is idle, the first submit of a pass wakes
  the writer at once, so a lone producer's fdatasync overlaps the rest of its pass. (What a pass-end hook submits,
  records the pass held to its end, does not count: an ack-only pass between busy ones
  does not make the traffic look sparse.) Submits from other threads wake the writer at
  once.
* **Batch latency, for the metrics** (:class:`Latencies`): each time the leader is woken by
  a completion it records how long it waited, counted from the later of its wait's start
  and the writer's deferred wake-up: the batch's write and fdatasync as the loop sees them.
  A bucket increment per batch, read by a scrape; nothing on the path of a single append.
"""

from __future__ import annotations

import heapq
import os
import threading
from bisect import bisect_left
from collections.abc import Callable
from time import perf_counter
from typing import Protocol

import outcome
import trio

from artemis_py.exceptions import StorageError


class NativeProgress(Protocol):
    """What a native store offers its waiters."""

    def progress(self) -> tuple[int, bool]: ...
    def fileno(self) -> int: ...
    def wake_writer(self) -> None: ...


#: Upper bounds (seconds) of :class:`Latencies`' buckets; one more bucket holds the rest.
LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
)  # fmt: skip


class Latencies:
    """Durations counted in fixed buckets (``le`` bounds, as Prometheus histograms are):
    written on the loop only, so no lock; a scrape turns them into a histogram."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.sum += seconds


def _not_cancellable(_: object) -> trio.lowlevel.Abort:
    # A waiter learns the outcome of its write whatever happens to its caller: a cancelled
    # client gets "outcome unknown" from its own code, never a false "not written".
    return trio.lowlevel.Abort.FAILED


class Completion:
    """The waiters of one native store.

    ``failure()`` builds a fresh error for each task that learns the writer failed;
    ``closed(message)`` the error for a wait on a closed store. The owner sets
    :attr:`last_ticket` when it submits and calls :meth:`settle` once its close returned.
    """

    def __init__(
        self,
        native: NativeProgress,
        failure: Callable[[], StorageError],
        closed: Callable[[str], StorageError],
        name: str,
    ) -> None:
        self._native = native
        self._failure = failure
        self._closed = closed
        self._name = name
        # (ticket, id(task), task): a task waits for one ticket at a time, so the id keeps
        # equal tickets from comparing tasks.
        self._waiters: list[tuple[int, int, trio.lowlevel.Task]] = []
        self.last_ticket = 0
        self._fd = native.fileno()
        # True while some task leads (waits for the eventfd for everyone).
        self._leading = False
        # Set once the store's close has returned and every outcome is final.
        self.settled = False
        # How long the leader waited for each completion (module docstring), and when the
        # writer was last woken at a pass's end (set by the store's DeferredWake).
        self.latencies = Latencies()
        self.woken_at = 0.0

    def done(self, ticket: int) -> bool:
        """Whether ``ticket`` is complete (it was, if the writer failed after it)."""
        return ticket <= self._native.progress()[0]

    async def wait(self, ticket: int) -> None:
        """Return when ``ticket`` is complete; raise the failure if the writer failed first."""
        if ticket > self.last_ticket:
            raise ValueError(f"ticket {ticket} was never issued by {self._name}")
        completed, failed = self._native.progress()
        if ticket <= completed:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        if failed:
            await trio.lowlevel.cancel_shielded_checkpoint()
            raise self._failure()
        await self.park(ticket)

    async def park(self, ticket: int) -> None:
        """Return (or raise) once ``ticket``'s outcome is known, leading if nobody does.

        Needs no look at ``progress()`` before parking: every completion or failure after the
        caller's submit (or its own check) pokes the eventfd, and the leader reads progress
        after resetting it, so the ticket's outcome reaches this task.
        """
        if self.settled:
            raise self._closed(f"{self._name} is closed; the outcome of ticket {ticket} is unknown")
        if self._leading:
            # Park the task itself (no Event, no shielded scope: this is the hot path of
            # every synced append). The leader reschedules it with the outcome, or with
            # True to make it the next leader.
            task = trio.lowlevel.current_task()
            heapq.heappush(self._waiters, (ticket, id(task), task))
            if not await trio.lowlevel.wait_task_rescheduled(_not_cancellable):
                return
        await self._lead(ticket)

    async def _lead(self, ticket: int) -> None:
        """Wait for the eventfd and wake the waiters that each completion settles, until
        ``ticket``'s outcome is known; then hand the role over."""
        self._leading = True
        fd = self._fd
        shield = False
        try:
            while True:
                # Reset, then read progress: a completion after the reset leaves it readable.
                try:  # not contextlib.suppress: this runs once per batch
                    os.eventfd_read(fd)
                except BlockingIOError:
                    pass
                completed, failed = self.dispatch()
                if ticket <= completed:
                    # Done before we waited (non-sync, or a fast disk): still yield once.
                    await trio.lowlevel.cancel_shielded_checkpoint()
                    return
                if failed:
                    raise self._failure()
                if self.settled:
                    raise self._closed(f"{self._name} closed before the write completed")
                started = perf_counter()
                try:
                    if shield:
                        with trio.CancelScope(shield=True):
                            await trio.lowlevel.wait_readable(fd)
                    else:
                        # Unshielded: a shield costs ~8 us per wait here. A cancel (rare)
                        # switches this leader to shielded waits instead.
                        await trio.lowlevel.wait_readable(fd)
                except trio.Cancelled:
                    # Not abandoned (module docstring): the caller's scope stays cancelled,
                    # so its next checkpoint raises this again.
                    shield = True
                    continue
                self.latencies.observe(perf_counter() - max(started, self.woken_at))
                # The usual wake-up completes this ticket: return without the reset, which
                # the next leader does after its submit, off the path to it.
                if ticket <= self.dispatch()[0]:
                    return
        finally:
            # Hand over: the lowest parked ticket leads next. It resets and reads progress
            # before it waits, so nothing completed meanwhile is missed.
            if self._waiters:
                task = heapq.heappop(self._waiters)[2]
                trio.lowlevel.reschedule(task, outcome.Value(True))
            else:
                self._leading = False

    def dispatch(self) -> tuple[int, bool]:
        """Wake every parked waiter whose outcome is known; return ``progress()``."""
        completed, failed = self._native.progress()
        waiters = self._waiters
        while waiters and waiters[0][0] <= completed:
            trio.lowlevel.reschedule(heapq.heappop(waiters)[2], outcome.Value(None))
        if failed:
            while waiters:
                task = heapq.heappop(waiters)[2]
                trio.lowlevel.reschedule(task, outcome.Error(self._failure()))
        return completed, failed

    def settle(self) -> None:
        """After the store's close returned: every outcome is final, settle all waiters.

        The leader is woken by close's last completion; the eventfd is poked once more in
        case close had no batch to complete, so it never waits on a closed store.
        """
        self.settled = True
        self.dispatch()
        error = self._closed(f"{self._name} closed before the write completed")
        while self._waiters:
            task = heapq.heappop(self._waiters)[2]
            trio.lowlevel.reschedule(task, outcome.Error(error))
        os.eventfd_write(self._fd, 1)


class DeferredWake:
    """Defers waking a store's writer to the end of the loop pass (module docstring)."""

    def __init__(self, native: NativeProgress, completion: Completion | None = None) -> None:
        self._native = native
        self._completion = completion  # told when the writer is woken (its latencies)
        # The Trio thread whose instrument wakes the writer; None: every submit wakes it.
        self.loop_thread: int | None = None
        self._wake_due = False
        self._pass_submits = 0  # submits in this loop pass
        self._last_pass_submits = 0  # in the last pass that submitted anything
        self._instrument: _WriterWaker | None = None
        # Run at each pass's end before the writer is woken: they submit what they held.
        self.pass_end_hooks: list[Callable[[], None]] = []

    def would_defer(self) -> bool:
        """Whether :meth:`defer` would say yes now (nothing is counted)."""
        return self.loop_thread == threading.get_ident() and not (
            self._pass_submits == 0 and self._sparse()
        )

    def defer(self) -> bool:
        """Whether the submit about to be made may leave waking the writer to the pass end
        (then it is marked due)."""
        if self.loop_thread != threading.get_ident():
            return False
        self._pass_submits += 1
        if self._pass_submits == 1 and self._sparse():
            return False  # wake it now
        self._wake_due = True
        return True

    def _sparse(self) -> bool:
        """Whether the pass's first submit should wake the writer at once: the last pass
        that submitted anything submitted once, and the writer is idle (a writer busy with
        a batch takes this record only after it anyway, so it can wait for the pass's
        company)."""
        if self._last_pass_submits > 1:
            return False
        completion = self._completion
        return completion is None or completion.last_ticket <= self._native.progress()[0]

    def wake(self) -> None:
        """Before the loop polls: run the pass-end hooks, then wake the writer if a
        deferred submit left it asleep."""
        # The pass's own submits: what the hooks submit now (records the pass held, an
        # ack-only pass's acknowledgements) is no sign of the traffic being sparse.
        submits = self._pass_submits
        for hook in self.pass_end_hooks:
            hook()
        if submits:
            self._last_pass_submits = submits
        self._pass_submits = 0
        if self._wake_due:
            self._wake_due = False
            self._native.wake_writer()
            if self._completion is not None:
                self._completion.woken_at = perf_counter()

    def attach(self) -> None:
        """Start deferring: called on the Trio thread."""
        self._instrument = _WriterWaker(self)
        trio.lowlevel.add_instrument(self._instrument)
        self.loop_thread = threading.get_ident()

    def detach(self) -> None:
        """Stop deferring (wakes the writer for anything deferred); idempotent."""
        self.loop_thread = None
        self.wake()
        if self._instrument is not None:
            instrument, self._instrument = self._instrument, None
            trio.lowlevel.remove_instrument(instrument)


class _WriterWaker(trio.abc.Instrument):
    """Wakes one store's writer before the loop polls."""

    def __init__(self, wake: DeferredWake) -> None:
        self.wake = wake

    def before_io_wait(self, timeout: float) -> None:
        self.wake.wake()
