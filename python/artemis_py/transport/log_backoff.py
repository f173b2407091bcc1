"""How often a failure that repeats is logged: once at once, then ever less often.

Used by cluster links (a refused link is retried every retry-interval), discovery, and
acceptors (a node or client that keeps offering a refused TLS certificate).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

__all__ = ["LogBackoff", "unlogged"]


@dataclass(slots=True)
class _Episode:
    last_seen: float
    next_at: float  # the next failure from this time on is logged
    gap: float
    quiet: int = 0  # failures not logged since the last line


class LogBackoff:
    """Which of a repeating failure's occurrences to log (a link refused on every retry).

    The first occurrence of an episode is logged at once. Later ones are logged ever less
    often: FIRST_GAP seconds after that line, then twice as long each time, at most
    MAX_GAP apart. Each such line can say how many occurrences went unlogged. An episode
    ends after MAX_GAP seconds without an occurrence, or when the owner starts afresh (a
    dialler does once its link is up). Without this, a wrong cluster password logged a
    line on both nodes at every retry (every 100 ms with short retry settings).
    """

    FIRST_GAP = 1.0
    MAX_GAP = 60.0

    def __init__(self) -> None:
        self._episodes: dict[Hashable, _Episode] = {}

    def occurred(self, key: Hashable, now: float) -> int | None:
        """Another occurrence of ``key`` at ``now``. Returns None if it is not to be
        logged, else how many occurrences went unlogged since the last line (0 at the
        start of an episode)."""
        episode = self._episodes.get(key)
        if episode is None or now - episode.last_seen > self.MAX_GAP:
            self._forget_quiet(now)
            self._episodes[key] = _Episode(now, now + self.FIRST_GAP, self.FIRST_GAP)
            return 0
        episode.last_seen = now
        if now < episode.next_at:
            episode.quiet += 1
            return None
        quiet, episode.quiet = episode.quiet, 0
        episode.gap = min(episode.gap * 2, self.MAX_GAP)
        episode.next_at = now + episode.gap
        return quiet

    def _forget_quiet(self, now: float) -> None:
        # Keys come from peers (their address and the reason): keep only live episodes.
        for key in [k for k, e in self._episodes.items() if now - e.last_seen > self.MAX_GAP]:
            del self._episodes[key]


def unlogged(count: int) -> str:
    """The end of a log line that stands for ``count`` more occurrences, if any."""
    return f" ({count} more time(s) since the last such line)" if count else ""
