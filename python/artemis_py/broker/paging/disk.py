"""Watching the disk under the node's data (Artemis's FileStoreMonitor and what its paging
manager does with it): ``max-disk-usage``, ``min-disk-free`` and ``disk-scan-period``.

Theory of operation
-------------------
* **Scanning.** :meth:`DiskMonitor.run` measures the file systems of the data directories
  (journal, bindings, paging, large messages; each file system once) when the node starts
  and then every ``disk-scan-period`` ms. ``statvfs`` runs in a worker thread: a slow or
  hung file system never stalls the loop, and nothing is measured per message.
* **The limit.** As in Artemis, one limit applies: ``min-disk-free`` (bytes) when it is set,
  else ``max-disk-usage`` (percent); -1 for both means the disk is not watched, and so does
  ``disk-scan-period`` -1 (Artemis never schedules the scan then). Usage is Artemis's:
  ``1 - usable / total``, where usable is what an unprivileged writer may still take
  (``f_bavail``), so a file system's reserved blocks count as used. The disk is *full* when
  any file system is at or over ``max-disk-usage``, or has ``min-disk-free`` or less left.
* **The verdict is one attribute.** :attr:`DiskMonitor.full` is what every send reads
  (:meth:`~artemis_py.broker.paging.address.AddressPaging.decide`): O(1) per message. While
  it is true, each address's ``disk-full-policy`` decides (BLOCK by default: the send waits
  in :meth:`space`, so nothing more reaches the journal or the pages for it). Consumers are
  served throughout: acknowledgements are written, and they are what frees the space.
* **Recovery is the next scan's.** The scan that finds room again clears the flag and wakes
  every held send; the logs say when the node became full and when it recovered, with
  Artemis's codes (AMQ222210/AMQ222211 for ``max-disk-usage``, AMQ224128/AMQ224129 for
  ``min-disk-free``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from artemis_py.config import BrokerConfig

log = logging.getLogger("artemis_py.broker.paging")

__all__ = ["DiskMonitor", "DiskUsage", "human_bytes", "measure"]


@dataclass(frozen=True, slots=True)
class DiskUsage:
    """One file system as a scan found it: ``directory`` is the data directory measured."""

    directory: str
    usable: int  # bytes an unprivileged writer may still take (f_bavail)
    total: int  # bytes of the file system (f_blocks)

    @property
    def used(self) -> float:
        """The fraction used, as Artemis computes it (0 for a file system of no size)."""
        return 1.0 - self.usable / self.total if self.total > 0 else 0.0


def measure(directories: Sequence[Path]) -> tuple[list[DiskUsage], list[str]]:
    """The usage of each file system holding ``directories`` (blocking: call it in a worker
    thread), and the problems met. A directory not created yet is measured at its nearest
    existing parent, where it will be."""
    usages: list[DiskUsage] = []
    problems: list[str] = []
    seen: set[int] = set()
    for directory in directories:
        path = directory
        try:
            while not path.exists() and path.parent != path:
                path = path.parent
            device = path.stat().st_dev
            if device in seen:
                continue
            seen.add(device)
            stats = os.statvfs(path)
        except OSError as exc:
            problems.append(f"{directory}: {exc}")
            continue
        usages.append(
            DiskUsage(
                str(directory), stats.f_bavail * stats.f_frsize, stats.f_blocks * stats.f_frsize
            )
        )
    return usages, problems


def human_bytes(size: int) -> str:
    """``size`` in the binary units broker.xml uses (``3.1MiB``)."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f}{unit}" if unit == "B" else f"{value:.1f}{unit}"
        value /= 1024
    raise AssertionError("unreachable")


class DiskMonitor:
    """The disk state of one node, refreshed by :meth:`run`."""

    def __init__(self, config: BrokerConfig, directories: Sequence[Path]) -> None:
        self.max_disk_usage = config.max_disk_usage
        self.min_disk_free = config.min_disk_free
        self.period = config.disk_scan_period / 1000
        self.directories = list(directories)
        self.full = False
        self.episodes = 0  # how many times the disk became full (for once-per-episode logs)
        self.usage: DiskUsage | None = None  # the file system reported (see _reported)
        self._space = trio.Event()
        self._space.set()
        self._problems: set[str] = set()  # reported once each

    @property
    def watched(self) -> bool:
        """Whether the disk is watched at all (a limit, a scan period, directories)."""
        limited = self.min_disk_free != -1 or self.max_disk_usage != -1
        return limited and self.period > 0 and bool(self.directories)

    def limit_text(self) -> str:
        if self.min_disk_free != -1:
            return f"min-disk-free {human_bytes(self.min_disk_free)}"
        return f"max-disk-usage {self.max_disk_usage}%"

    def state_text(self) -> str:
        """The reported file system, for logs and refusals: its room and the limit."""
        usage = self.usage
        if usage is None:
            return self.limit_text()
        return (
            f"{human_bytes(usage.usable)} free of {human_bytes(usage.total)} "
            f"({usage.used * 100:.1f}% used) under {usage.directory}, {self.limit_text()}"
        )

    def within_limit(self, usage: DiskUsage) -> bool:
        # Artemis's FileStoreMonitor: min-disk-free, when set, replaces max-disk-usage.
        if self.min_disk_free != -1:
            return usage.usable > self.min_disk_free
        return usage.used < self.max_disk_usage / 100

    # -- scanning ----------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Scan now (a node that starts on a full disk holds its first send), then every
        ``disk-scan-period``, until cancelled."""
        if not self.watched:
            task_status.started()
            return
        if self.min_disk_free != -1 and self.max_disk_usage != -1:
            log.info(
                "AMQ224130: min-disk-free %s is the disk's limit; max-disk-usage %d%% is "
                "ignored (both are set)",
                human_bytes(self.min_disk_free),
                self.max_disk_usage,
            )
        await self.scan()
        task_status.started()
        while True:
            await trio.sleep(self.period)
            await self.scan()

    async def scan(self) -> None:
        """Measure the disks (in a worker thread) and update the verdict."""
        usages, problems = await trio.to_thread.run_sync(measure, self.directories)
        for problem in problems:
            if problem not in self._problems:
                self._problems.add(problem)
                log.error("cannot measure the disk of a data directory: %s", problem)
        self.update(usages)

    def update(self, usages: Sequence[DiskUsage]) -> None:
        """Take a scan's measures: become full or recover, and say so once."""
        if not usages:
            return  # nothing could be measured: the last verdict stands
        over = [u for u in usages if not self.within_limit(u)]
        self.usage = over[0] if over else max(usages, key=lambda u: u.used)
        if over and not self.full:
            self.full = True
            self.episodes += 1
            self._space = trio.Event()
            self._log_full()
        elif not over and self.full:
            self.full = False
            self._space.set()
            self._log_recovered()

    async def space(self) -> None:
        """Return once the disk is within its limit (at once when it is)."""
        while self.full:
            await self._space.wait()

    def _log_full(self) -> None:
        usage = self.usage
        assert usage is not None
        if self.min_disk_free != -1:
            log.warning(
                "AMQ224128: the disk under %s has %s free, not more than min-disk-free %s: "
                "producers are held back until there is room",
                usage.directory,
                human_bytes(usage.usable),
                human_bytes(self.min_disk_free),
            )
            return
        log.warning(
            "AMQ222210: the disk under %s has %s free of %s (%.1f%% used), beyond "
            "max-disk-usage %d%%: producers are held back until there is room",
            usage.directory,
            human_bytes(usage.usable),
            human_bytes(usage.total),
            usage.used * 100,
            self.max_disk_usage,
        )

    def _log_recovered(self) -> None:
        usage = self.usage
        assert usage is not None
        if self.min_disk_free != -1:
            # (Artemis logs this one as a warning too.)
            log.warning(
                "AMQ224129: the disk under %s has %s free, more than min-disk-free %s: "
                "producers go on",
                usage.directory,
                human_bytes(usage.usable),
                human_bytes(self.min_disk_free),
            )
            return
        log.info(
            "AMQ222211: the disk under %s has %s free of %s (%.1f%% used), below "
            "max-disk-usage %d%%: producers go on",
            usage.directory,
            human_bytes(usage.usable),
            human_bytes(usage.total),
            usage.used * 100,
            self.max_disk_usage,
        )
