"""End to end, exactly once: a three-node cluster read by a streaming query into Spark's
file sink with a checkpoint, while producers send, across the three faults of issue 16:
the driver killed with SIGKILL and restarted from its checkpoint, a node killed with
SIGKILL and restarted, and a node scaled down with SIGTERM.

Each test asserts that every receipted message is in the output exactly once (read back
with ``spark.read``, which honours the file sink's ``_spark_metadata`` log, so files of an
interrupted batch do not count) and that nothing else is: a message whose send failed
without a receipt may be there, once, or not at all.

Message load balancing is OFF, so every node keeps what is sent to it and has a stream of
its own. Faults are placed by the checkpoint's ``commits/`` entries, not by the clock.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trio

from artemis_py.client import ClientError, open_stomp_connection
from cluster.conftest import Cluster
from cluster.test_scale_down import scale_down_xml
from integration.conftest import wait_for

from .e2e_driver import start_query
from .test_source import declare, node_ids, our_error, urls

pytestmark = pytest.mark.spark

TESTS = Path(__file__).resolve().parent.parent


class Traffic:
    """Persistent, receipted sends to the nodes in turn (20 per connection) from a thread,
    until stopped. A send that fails (the node is down or leaving) is given up, and the
    next goes to the next node with a new body: resending the same body elsewhere could
    store it twice (it may have been stored before the failure)."""

    def __init__(self, nodes: Cluster, queue: str, *, limit: int = 4000) -> None:
        self.nodes = nodes
        self.destination = f"/queue/{queue}"
        self.limit = limit
        self.attempted: list[str] = []
        self.receipted: list[str] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=trio.run, args=(self._main,), daemon=True)

    def __enter__(self) -> Traffic:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "the producer did not stop"

    async def _main(self) -> None:
        turn = 0
        while not self._stop.is_set() and len(self.attempted) < self.limit:
            node = self.nodes[turn % len(self.nodes)]
            turn += 1
            try:
                async with open_stomp_connection("127.0.0.1", node.port) as conn:
                    for _ in range(20):
                        body = f"m{len(self.attempted)}"
                        self.attempted.append(body)
                        await conn.send(self.destination, body, headers={"persistent": "true"})
                        self.receipted.append(body)
                        await trio.sleep(0.002)
            except (OSError, ClientError, trio.BrokenResourceError):
                self.failures += 1
                await trio.sleep(0.02)


def committed(checkpoint: Path) -> int:
    """How many batches the query has committed (entries of its commit log)."""
    commits = checkpoint / "commits"
    return sum(1 for p in commits.iterdir() if p.name.isdigit()) if commits.exists() else 0


def wait_committed(checkpoint: Path, count: int, timeout: float = 120) -> None:
    wait_for(
        lambda: committed(checkpoint) >= count,
        timeout,
        message=lambda: f"{count} committed batches (have {committed(checkpoint)})",
    )


def check_exactly_once(spark: Any, out: Path, traffic: Traffic) -> None:
    rows = spark.read.parquet(str(out)).select("body").collect()
    got = Counter(bytes(row.body).decode() for row in rows)
    twice = sorted(body for body, n in got.items() if n > 1)
    assert not twice, f"{len(twice)} messages twice in the output, e.g. {twice[:5]}"
    missing = set(traffic.receipted) - set(got)
    assert not missing, f"{len(missing)} receipted messages missing, e.g. {sorted(missing)[:5]}"
    unknown = set(got) - set(traffic.attempted)
    assert not unknown, f"{len(unknown)} messages nobody sent, e.g. {sorted(unknown)[:5]}"
    print(
        f"\n{len(traffic.receipted)} receipted, {len(traffic.attempted)} attempted, "
        f"{traffic.failures} failed connections, {len(got)} in the output"
    )


QUEUE = "orders"


def orders_cluster(cluster: Any, **options: Any) -> Cluster:
    """Three nodes, load balancing OFF, the queue declared on each."""
    nodes: Cluster = cluster(3, policy="OFF", **options)
    declare(nodes, QUEUE)
    return nodes


@pytest.fixture
def paths(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "out", tmp_path / "checkpoint"


def run_to_the_end(query: Any, traffic: Traffic) -> None:
    """Stop the producer, let the query read everything sent, then stop it."""
    traffic.stop()
    try:
        query.processAllAvailable()
    finally:
        query.stop()


# -- the driver -----------------------------------------------------------------------------


class Driver:
    """``spark.e2e_driver`` in a process group of its own (Python, its JVM, Spark's Python
    workers), so that SIGKILL takes the whole driver down at once, as a crash would."""

    def __init__(self, nodes: Cluster, queue: str, out: Path, checkpoint: Path) -> None:
        self.args = [urls(nodes), queue, str(out), str(checkpoint)]
        self.log = checkpoint.parent / "driver.log"

    def start(self, *flags: str) -> subprocess.Popen[bytes]:
        with self.log.open("ab") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "spark.e2e_driver", *self.args, *flags],
                cwd=TESTS,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
        wait_for(lambda: not group_alive(process.pid), 20, message="the driver's processes to end")

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


# Two Spark driver processes, one after the other, each starting its JVM: 105 s of call and
# 19 s of setup (the shared Spark session) measured on a busy 2-core machine.
@pytest.mark.timeout(300)
def test_the_driver_killed_and_restarted_from_its_checkpoint(
    spark: Any, cluster: Any, paths: tuple[Path, Path]
) -> None:
    nodes = orders_cluster(cluster)
    out, checkpoint = paths
    driver = Driver(nodes, QUEUE, out, checkpoint)
    with Traffic(nodes, QUEUE) as traffic:
        process = driver.start()
        try:
            wait_committed(checkpoint, 3)
        except AssertionError:
            driver.kill(process)
            raise AssertionError(f"driver log:\n{driver.tail()}") from None
        driver.kill(process)
        killed_at = committed(checkpoint)
    restarted = driver.start("--available-now")
    assert restarted.wait(180) == 0, f"driver log:\n{driver.tail()}"
    assert committed(checkpoint) > killed_at
    check_exactly_once(spark, out, traffic)


# -- a node ---------------------------------------------------------------------------------


def query_through(spark: Any, nodes: Cluster, paths: tuple[Path, Path], fault: Any) -> Traffic:
    """Run the query while the producer sends: ``fault()`` after 3 committed batches, 3 more
    batches, then the rest of what was sent read, and the query stopped."""
    out, checkpoint = paths
    with Traffic(nodes, QUEUE) as traffic:
        query = start_query(spark, urls(nodes), QUEUE, out, checkpoint)
        try:
            wait_committed(checkpoint, 3)
            fault()
            wait_committed(checkpoint, committed(checkpoint) + 3)
        finally:
            run_to_the_end(query, traffic)
    return traffic


def test_a_node_killed_and_restarted_during_the_query(
    spark: Any, cluster: Any, paths: tuple[Path, Path]
) -> None:
    nodes = orders_cluster(cluster)

    def crash() -> None:
        nodes[1].kill()
        nodes[1].start()

    traffic = query_through(spark, nodes, paths, crash)
    assert traffic.failures > 0  # the producer saw the node go
    check_exactly_once(spark, paths[0], traffic)


def test_a_node_that_stays_down_fails_the_query_naming_it_and_a_restart_reads_on(
    spark: Any, cluster: Any, paths: tuple[Path, Path]
) -> None:
    nodes = orders_cluster(cluster)
    down = node_ids(nodes)[1]
    out, checkpoint = paths
    with Traffic(nodes, QUEUE) as traffic:
        query = start_query(spark, urls(nodes), QUEUE, out, checkpoint, nodeTimeoutMs="2000")
        try:
            wait_committed(checkpoint, 3)
            nodes[1].kill()
            with pytest.raises(Exception) as info:  # pyspark's StreamingQueryException
                query.awaitTermination(60)
        finally:
            query.stop()
    message = our_error(info.value)
    assert down in message or f":{nodes[1].port}" in message, message
    # Nothing it did not commit was acknowledged: once the node is back, a restart from the
    # checkpoint reads every message exactly once.
    nodes[1].start()
    again = start_query(spark, urls(nodes), QUEUE, out, checkpoint, available_now=True)
    try:
        assert again.awaitTermination(120), "the restarted query did not finish"
    finally:
        again.stop()
    check_exactly_once(spark, out, traffic)


def test_a_node_scaled_down_during_the_query(
    spark: Any, cluster: Any, paths: tuple[Path, Path]
) -> None:
    nodes = orders_cluster(cluster, node_options={2: {"extra_core": scale_down_xml("node0")}})

    def scale_down() -> None:
        assert nodes[2].stop() == 0  # SIGTERM: scale down to node0, then exit

    traffic = query_through(spark, nodes, paths, scale_down)
    assert "scale-down" in nodes[2].log().lower()
    check_exactly_once(spark, paths[0], traffic)
