"""LIKE patterns: ``%`` matches any sequence, ``_`` one character, ESCAPE makes one literal.

A pattern is split at its ``%`` into fixed-length segments matched leftmost-first: linear in
the subject for the common shapes and never exponential (unlike translating the pattern to
one backtracking regular expression), since selectors come from clients.
"""

from __future__ import annotations

import re

__all__ = ["LikePattern", "split_pattern"]

Segment = list[str | None]
"""The literal characters between two ``%``, with None for each ``_``."""


def split_pattern(pattern: str, escape: str | None) -> list[Segment] | None:
    """``pattern`` cut at its unescaped ``%``; None if it ends with its ESCAPE character."""
    segments: list[Segment] = [[]]
    chars = iter(pattern)
    for ch in chars:
        if ch == escape:
            literal = next(chars, None)
            if literal is None:
                return None
            segments[-1].append(literal)
        elif ch == "%":
            segments.append([])
        elif ch == "_":
            segments[-1].append(None)
        else:
            segments[-1].append(ch)
    return segments


class LikePattern:
    """A compiled LIKE pattern; calling it with a subject string says whether it matches."""

    __slots__ = ("_lengths", "_segments", "_wildcard")

    def __init__(self, segments: list[Segment]) -> None:
        compiled: list[str | re.Pattern[str]] = []
        for seg in segments:
            if None in seg:
                body = "".join("." if ch is None else re.escape(ch) for ch in seg)
                compiled.append(re.compile(body, re.DOTALL))
            else:
                compiled.append("".join(ch for ch in seg if ch is not None))
        self._segments = compiled
        self._lengths = [len(seg) for seg in segments]
        self._wildcard = len(segments) > 1

    def __call__(self, subject: str) -> bool:
        segs, lens = self._segments, self._lengths
        if not self._wildcard:
            return len(subject) == lens[0] and _at(segs[0], subject, 0)
        start, end = lens[0], len(subject) - lens[-1]
        if start > end or not _at(segs[0], subject, 0) or not _at(segs[-1], subject, end):
            return False
        for i in range(1, len(segs) - 1):
            found = _find(segs[i], subject, start, end)
            if found < 0:
                return False
            start = found + lens[i]
        return True


def _at(seg: str | re.Pattern[str], subject: str, pos: int) -> bool:
    if isinstance(seg, str):
        return subject.startswith(seg, pos)
    return seg.match(subject, pos) is not None


def _find(seg: str | re.Pattern[str], subject: str, start: int, end: int) -> int:
    if isinstance(seg, str):
        return subject.find(seg, start, end)
    found = seg.search(subject, start, end)
    return -1 if found is None else found.start()
