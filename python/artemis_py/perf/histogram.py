"""Latency histograms: HDR histograms in microseconds, encoded to cross process boundaries.

Each worker records through a :class:`Recorder` (which counts equal values in a dict and
hands them to HdrHistogram in bulk: its ``record_value`` is pure Python, a few µs a call,
where a dict increment is a tenth of that) into its own
:class:`~hdrh.histogram.HdrHistogram`, and sends
:func:`encode` of it (HdrHistogram's compressed, base64 wire format, the one HdrHistogram's
other implementations read) to the runner, which :func:`merge` s them. Merging adds counts
bucket by bucket, so the merged percentiles are exact to the histogram's precision, unlike
averaging per-process percentiles.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from hdrh.histogram import HdrHistogram  # type: ignore[import-untyped]

__all__ = [
    "HIGHEST_US",
    "PERCENTILES",
    "Histogram",
    "Recorder",
    "decode",
    "encode",
    "merge",
    "new_histogram",
    "record",
    "summarize",
]

Histogram = HdrHistogram
LOWEST_US: Final = 1
HIGHEST_US: Final = 600_000_000  # 10 minutes; anything slower is recorded as this
SIGNIFICANT_DIGITS: Final = 3
PERCENTILES: Final = (50.0, 90.0, 99.0, 99.9)


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def record(histogram: HdrHistogram, micros: int) -> None:
    """Record ``micros`` clamped into the histogram's range (a clock step can go negative)."""
    histogram.record_value(min(max(micros, LOWEST_US), HIGHEST_US))


class Recorder:
    """Records µs values into ``histogram`` exactly as :func:`record` would, in bulk.

    Values wait in a dict of value -> count until :meth:`flush` (called when the dict holds
    ``FLUSH_AT`` distinct values, and by :meth:`encode`), so the histogram is only complete
    after a flush.
    """

    FLUSH_AT: Final = 4096
    __slots__ = ("_pending", "histogram")

    def __init__(self, histogram: HdrHistogram | None = None) -> None:
        self.histogram = histogram if histogram is not None else new_histogram()
        self._pending: dict[int, int] = {}

    def record(self, micros: int) -> None:
        pending = self._pending
        pending[micros] = pending.get(micros, 0) + 1
        if len(pending) >= self.FLUSH_AT:
            self.flush()

    def flush(self) -> None:
        histogram = self.histogram
        for micros, count in self._pending.items():
            histogram.record_value(min(max(micros, LOWEST_US), HIGHEST_US), count)
        self._pending.clear()

    def encode(self) -> str:
        """:func:`encode` of the histogram, everything recorded so far included."""
        self.flush()
        return encode(self.histogram)


def encode(histogram: HdrHistogram) -> str:
    text: str = histogram.encode().decode("ascii")
    return text


def decode(text: str) -> HdrHistogram:
    return HdrHistogram.decode(text.encode("ascii"))


def merge(encoded: Iterable[str]) -> HdrHistogram:
    total = new_histogram()
    for text in encoded:
        total.add(decode(text))
    return total


def summarize(histogram: HdrHistogram) -> dict[str, float | int | None]:
    """count, min, mean, p50, p90, p99, p99.9 and max in µs (None when nothing was recorded)."""
    count = histogram.get_total_count()
    summary: dict[str, float | int | None] = {"count": count}
    if not count:
        summary.update({"min": None, "mean": None, "max": None})
        summary.update({_key(p): None for p in PERCENTILES})
        return summary
    summary["min"] = histogram.get_min_value()
    summary["mean"] = round(histogram.get_mean_value(), 1)
    for p in PERCENTILES:
        summary[_key(p)] = histogram.get_value_at_percentile(p)
    summary["max"] = histogram.get_max_value()
    return summary


def _key(percentile: float) -> str:
    return f"p{percentile:g}"
