"""The disk monitor's verdict (Artemis's FileStoreMonitor rules), its logs, the wake-up of held
sends, and what each disk-full-policy decides; real statvfs for the measuring."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import trio
import trio.testing

from artemis_py.broker.paging import Full, PagingManager
from artemis_py.broker.paging.address import BLOCK, DROP, MEMORY
from artemis_py.broker.paging.disk import DiskMonitor, DiskUsage, human_bytes, measure
from artemis_py.broker.persistence import Persistence
from artemis_py.broker.store import MemoryStore
from artemis_py.config import BrokerConfig, parse_config

MiB = 1 << 20


def monitor(**limits: int) -> DiskMonitor:
    return DiskMonitor(BrokerConfig(**limits), [Path("/data")])  # type: ignore[arg-type]


def usage(free: int, total: int = 100 * MiB) -> DiskUsage:
    return DiskUsage("/data", free, total)


def test_max_disk_usage_is_reached_at_the_percentage_used() -> None:
    disk = monitor(max_disk_usage=90)
    assert disk.within_limit(usage(11 * MiB))  # 89% used
    assert not disk.within_limit(usage(10 * MiB))  # 90%: at the limit is over it (Artemis: <)
    assert monitor(max_disk_usage=100).within_limit(usage(1))
    assert not monitor(max_disk_usage=0).within_limit(usage(100 * MiB))


def test_min_disk_free_replaces_max_disk_usage() -> None:
    disk = monitor(max_disk_usage=10, min_disk_free=5 * MiB)
    assert disk.within_limit(usage(5 * MiB + 1))  # 95% used: max-disk-usage is not the limit
    assert not disk.within_limit(usage(5 * MiB))
    assert disk.limit_text() == "min-disk-free 5.0MiB"


@pytest.mark.parametrize(
    ("limits", "watched"),
    [
        ({}, True),
        ({"max_disk_usage": -1}, False),
        ({"max_disk_usage": -1, "min_disk_free": 1}, True),
        ({"disk_scan_period": -1}, False),
    ],
)
def test_what_is_watched(limits: dict[str, int], watched: bool) -> None:
    assert monitor(**limits).watched is watched
    assert DiskMonitor(BrokerConfig(), []).watched is False  # no data directories


async def test_full_then_recovered_logs_once_each_and_wakes_the_held(
    caplog: pytest.LogCaptureFixture,
) -> None:
    disk = monitor(max_disk_usage=50)
    caplog.set_level(logging.INFO, "artemis_py.broker.paging")
    disk.update([usage(60 * MiB)])
    assert not disk.full
    disk.update([usage(60 * MiB), DiskUsage("/other", 10 * MiB, 100 * MiB)])
    disk.update([DiskUsage("/other", 9 * MiB, 100 * MiB)])
    assert disk.full
    assert disk.episodes == 1
    assert disk.usage is not None
    assert disk.usage.directory == "/other"  # the file system over the limit is reported
    released = trio.Event()

    async def held() -> None:
        await disk.space()
        released.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(held)
        await trio.testing.wait_all_tasks_blocked()
        assert not released.is_set()
        disk.update([usage(80 * MiB)])
        await released.wait()
    assert not disk.full
    codes = [r.getMessage()[:9] for r in caplog.records]
    assert codes == ["AMQ222210", "AMQ222211"]
    assert "10.0MiB free of 100.0MiB (90.0% used)" in caplog.records[0].getMessage()
    disk.update([])  # nothing measured: the verdict stands
    assert not disk.full


async def test_a_scan_measures_in_a_worker_thread(tmp_path: Path) -> None:
    disk = DiskMonitor(BrokerConfig(max_disk_usage=100), [tmp_path / "journal"])
    await disk.scan()
    stats = os.statvfs(tmp_path)
    assert disk.usage is not None
    assert disk.usage.total == stats.f_blocks * stats.f_frsize


def test_measure_counts_each_file_system_once_and_finds_missing_directories_parents(
    tmp_path: Path,
) -> None:
    (tmp_path / "a").mkdir()
    usages, problems = measure([tmp_path / "a", tmp_path / "not" / "yet", tmp_path])
    assert problems == []
    assert [u.directory for u in usages] == [str(tmp_path / "a")]


def test_human_bytes() -> None:
    assert [human_bytes(n) for n in (512, 1536, 10 * MiB, 3 << 30)] == [
        "512B",
        "1.5KiB",
        "10.0MiB",
        "3.0GiB",
    ]


def paging_with_policies() -> tuple[PagingManager, DiskMonitor]:
    config = parse_config(
        '<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">'
        "<address-settings>"
        + "".join(
            f'<address-setting match="{p.lower()}"><disk-full-policy>{p}</disk-full-policy>'
            "</address-setting>"
            for p in ("FAIL", "DROP")
        )
        + "</address-settings></core></configuration>",
        environ={},
    )
    disk = DiskMonitor(config, [Path("/data")])
    return PagingManager(config, Persistence(MemoryStore(), "node"), None, disk=disk), disk


def test_disk_full_policy_decides_while_the_disk_is_full() -> None:
    paging, disk = paging_with_policies()
    assert paging.address("block").decide(disk_full=False) is MEMORY
    disk.update([usage(1)])
    assert paging.address("block").decide(disk_full=True) is BLOCK  # the default
    assert paging.address("drop").decide(disk_full=True) is DROP
    assert paging.address("drop").dropped == 1
    with pytest.raises(Full, match="disk-full-policy FAIL"):
        paging.address("fail").decide(disk_full=True)
