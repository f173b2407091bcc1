"""What ``artemis-py producer`` / ``consumer`` print: a progress line while they run, one
summary line at the end, and the counts the summary is made of (:class:`Tally`)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TextIO

__all__ = ["Progress", "Tally", "format_summary", "preview"]

MiB: Final = 1024 * 1024
_PREVIEW_CHARS: Final = 200


@dataclass(slots=True)
class Tally:
    """The counts of one run, filled in as it goes and printed when it ends."""

    count: int = 0
    """Messages sent (producer) or received and handed over (consumer)."""
    nbytes: int = 0
    redelivered: int = 0
    unconfirmed: int = 0
    """Of ``count``: sends or acknowledgements the broker had not confirmed when the run
    ended (only after an abort; a clean end is confirmed by the DISCONNECT receipt)."""
    first: float = 0.0
    """``time.perf_counter()`` at the start of the timed part (0: it did not start)."""
    last: float = 0.0
    """``time.perf_counter()`` at its end."""

    @property
    def elapsed(self) -> float:
        return self.last - self.first if self.first else 0.0


class Progress:
    """A one-line progress bar redrawn with ``\\r`` (plain ANSI, no dependency).

    Redraws at most every ``interval`` seconds; :meth:`close` erases the line so the summary
    or an error message starts on a clean line.
    """

    def __init__(
        self,
        stream: TextIO,
        total: int | None,
        label: str,
        *,
        enabled: bool,
        width: int = 30,
        interval: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.total = total or None
        self.label = label
        self.enabled = enabled
        self.width = width
        self.interval = interval
        self._clock = clock
        self._start = clock()
        self._last_draw = -math.inf
        self._drawn = False

    def line(self, done: int, elapsed: float) -> str:
        """The text of the bar after ``done`` messages in ``elapsed`` seconds."""
        rate = done / elapsed if elapsed > 0 else 0.0
        if self.total is None:
            return f"{self.label} {done} messages  {rate:,.0f} msg/s"
        fraction = min(done / self.total, 1.0)
        filled = int(self.width * fraction)
        bar = "#" * filled + "-" * (self.width - filled)
        return f"{self.label} [{bar}] {done}/{self.total} {fraction:4.0%}  {rate:,.0f} msg/s"

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        now = self._clock()
        if now - self._last_draw < self.interval and done != self.total:
            return
        self._last_draw = now
        self.stream.write("\r\x1b[K" + self.line(done, now - self._start))
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False


def format_summary(
    verb: str,
    count: int,
    nbytes: int,
    elapsed: float,
    destination: str,
    *,
    extra: str = "",
) -> str:
    """``Produced 1000 messages to /queue/TEST in 1.234 s: 810.4 msg/s, 0.12 MiB/s``."""
    rate = count / elapsed if elapsed > 0 else 0.0
    mib_rate = nbytes / MiB / elapsed if elapsed > 0 else 0.0
    noun = "message" if count == 1 else "messages"
    preposition = "to" if verb == "Produced" else "from"
    text = (
        f"{verb} {count} {noun} {preposition} {destination} in {elapsed:.3f} s: "
        f"{rate:,.1f} msg/s, {mib_rate:.2f} MiB/s"
    )
    return f"{text}, {extra}" if extra else text


def preview(body: bytes) -> str:
    """The start of a message body as one short line of text."""
    text = body[: _PREVIEW_CHARS * 4].decode("utf-8", "replace")
    text = " ".join(text.split())
    return text[:_PREVIEW_CHARS] + ("..." if len(text) > _PREVIEW_CHARS else "")
