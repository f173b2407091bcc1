"""Latency histograms: HDR histograms in microseconds, encoded to cross process boundaries.

Each worker records through a :class:`Recorder` into its own
:class:`~hdrh.histogram.HdrHistogram` and sends
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
    """Records µs values into ``histogram`` with the counts :func:`record` would give, in
    bulk: HdrHistogram's ``record_value`` is pure Python, a few µs a call.

    Each value is rounded down to the lowest value of its histogram bucket (HdrHistogram's
    "lowest equivalent value": the bucket's width is 2 to the number of bits the value has
    beyond the sub-bucket's), which lands in the same bucket, so the counts (and everything
    encoded and merged from them) are the same. The rounded values wait in a dict of value
    -> count until :meth:`flush` (when it holds ``FLUSH_AT`` distinct values, and in
    :meth:`encode`); the histogram is complete only after a flush.
    """

    FLUSH_AT: Final = 4096
    __slots__ = ("_bits", "_pending", "histogram")

    def __init__(self, histogram: HdrHistogram | None = None) -> None:
        self.histogram = histogram if histogram is not None else new_histogram()
        assert self.histogram.unit_magnitude == 0, "the rounding assumes a lowest value of 1"
        self._bits: int = self.histogram.sub_bucket_half_count_magnitude + 1
        self._pending: dict[int, int] = {}

    def record(self, micros: int) -> None:
        shift = micros.bit_length() - self._bits
        if shift > 0:
            micros = micros >> shift << shift  # negative values stay negative: clamped to 1
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
