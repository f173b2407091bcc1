"""Latency histograms: HDR histograms in microseconds, encoded to cross process boundaries.

Each worker records into its own :class:`~hdrh.histogram.HdrHistogram` and sends
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
