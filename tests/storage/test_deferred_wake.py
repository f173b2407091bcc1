"""When a store's writer is woken (``storage.completion.DeferredWake``): at once for the
first submit of a pass when traffic is sparse and the writer idle, at the pass's end
otherwise; and what a pass-end hook submits (records the pass held) is no sign of sparse
traffic."""

from __future__ import annotations

import threading

from artemis_py.exceptions import StorageError
from artemis_py.storage.completion import Completion, DeferredWake


class Native:
    """Counts the writer's wake-ups; ``completed`` is the last ticket written."""

    def __init__(self) -> None:
        self.wakes = 0
        self.completed = 0

    def progress(self) -> tuple[int, bool]:
        return (self.completed, False)

    def fileno(self) -> int:
        return -1

    def wake_writer(self) -> None:
        self.wakes += 1


def on_loop() -> tuple[DeferredWake, Native]:
    native = Native()
    wake = DeferredWake(native)
    wake.loop_thread = threading.get_ident()  # (what attach does, without its instrument)
    return wake, native


def test_a_sparse_pass_s_first_submit_wakes_the_writer_at_once_the_others_at_its_end() -> None:
    wake, native = on_loop()
    assert not wake.defer()  # the first submit ever: sparse, woken by the submit itself
    assert wake.defer()  # a second one in the pass waits for its end
    wake.wake()
    assert native.wakes == 1
    assert wake.defer()  # the last pass submitted twice: busy, so even the first waits


def test_an_ack_only_pass_between_busy_ones_does_not_make_the_traffic_sparse() -> None:
    wake, native = on_loop()
    wake.defer()
    wake.defer()
    wake.wake()  # a busy pass: two submits of its own
    # A pass whose only submit is what a pass-end hook releases (held acknowledgements).
    wake.pass_end_hooks.append(lambda: wake.defer())
    wake.wake()
    wake.pass_end_hooks.clear()
    assert wake.defer()  # still busy: this pass's first submit waits for the pass's end
    wake.wake()
    assert native.wakes == 3  # (one per pass)


def test_a_sparse_pass_s_first_submit_waits_while_the_writer_is_busy() -> None:
    native = Native()
    completion = Completion(native, StorageError, StorageError, "journal")
    wake = DeferredWake(native, completion)
    wake.loop_thread = threading.get_ident()
    completion.last_ticket = 1  # ticket 1 submitted, not yet written: the writer is busy
    assert wake.would_defer()
    assert wake.defer()  # it takes this record after its batch anyway: wait for company
    wake.wake()
    native.completed = 1  # idle again, and the last pass submitted once
    assert not wake.would_defer()
    assert not wake.defer()
