"""A node that guards its disk (max-disk-usage, min-disk-free, disk-scan-period, and each
address's disk-full-policy), on a real small file system: a 64 MiB tmpfs mounted for the
test, holding the node's data directories and a filler file that takes the disk past its
limit. Real nodes, real stomp.py clients; docs/disk.md says what these check."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from .conftest import DEFAULT_ADDRESS_SETTINGS, BrokerProcess, Client, stays, unique, wait_for

MiB = 1 << 20
DISK_SIZE = 64 * MiB
SCAN = "<disk-scan-period>100</disk-scan-period>"
PERSISTENT = {"persistent": "true"}


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 MiB tmpfs, unmounted after the test (after its nodes stop: request it first)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    must = os.environ.get("CI") == "true"  # CI runs as root: there the test must run
    reason = None
    if os.geteuid() != 0:
        reason = "mounting a tmpfs for the test needs root"
    else:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE}", "tmpfs", str(mount)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            reason = f"cannot mount a tmpfs: {done.stderr.strip()}"
    if reason is not None:
        if must:
            pytest.fail(f"{reason} (CI=true: this test must run)")
        pytest.skip(reason)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path, size: int) -> Path:
    """A filler file of ``size`` bytes on ``disk`` (written: tmpfs counts what is written)."""
    path = disk / "filler"
    chunk = b"\0" * MiB
    with path.open("wb") as f:
        for _ in range(size // MiB):
            f.write(chunk)
    return path


def disk_node(
    make_broker: Callable[..., BrokerProcess], disk: Path, limit: str, **options: object
) -> BrokerProcess:
    return make_broker(persistence=True, data_dir=disk / "data", extra_core=limit + SCAN, **options)


def logged(node: BrokerProcess, code: str) -> Callable[[], int]:
    return lambda: node.log(since_start=True).count(code)


def test_a_full_disk_holds_producers_and_they_go_on_when_space_returns(
    small_disk: Path, make_broker: Callable[..., BrokerProcess], clients: Callable[..., Client]
) -> None:
    node = disk_node(make_broker, small_disk, "<max-disk-usage>50</max-disk-usage>", web=True)
    q = unique("/queue/disk.block")
    producer, consumer = clients(node), clients(node)
    for i in range(3):
        producer.send(q, f"before-{i}", **PERSISTENT)
    assert not node_disk(node)["full"]

    filler = fill(small_disk, 40 * MiB)  # with the node's files: well past 50% of 64 MiB
    wait_for(logged(node, "AMQ222210"), 5, message="the disk-full warning")
    assert "max-disk-usage 50%" in node.log(since_start=True)

    # A SEND and a transaction's COMMIT are held: no RECEIPT while the disk is full.
    held = producer.next_receipt()
    producer.conn.send(q, "held", headers={**PERSISTENT, "receipt": held})
    tx_client = clients(node)
    tx = unique("tx")
    tx_client.begin(tx)
    tx_client.conn.send(q, "in-tx", headers={**PERSISTENT, "transaction": tx})
    committed = tx_client.next_receipt()
    tx_client.conn.commit(tx, headers={"receipt": committed})

    # Meanwhile the disk's state is in the metrics and the management API.
    samples = scrape(node)
    assert samples["artemis_disk_full"] == 1
    assert samples["artemis_disk_store_usage"] > 0.5
    assert samples["artemis_disk_total_bytes"] == DISK_SIZE
    view = node_disk(node)
    assert view["full"] is True, view
    assert view["limit"] == "max-disk-usage 50%", view
    assert view["usage"] > 0.5

    # Consumers are served (and their acknowledgements written) while producers wait.
    consumer.subscribe(q, ack="client-individual")
    got = consumer.wait_messages(3)
    for frame in got:
        consumer.ack(frame)
    assert [m.body for m in got] == ["before-0", "before-1", "before-2"]
    stays(
        lambda: held not in producer.receipts and committed not in tx_client.receipts,
        1.0,
        message="the held SEND and COMMIT to stay unanswered while the disk is full",
    )
    assert not producer.errors
    assert not tx_client.errors

    filler.unlink()  # space returns: the next scan lets the held frames through by themselves
    producer.wait_receipt(held, 5)
    tx_client.wait_receipt(committed, 5)
    wait_for(logged(node, "AMQ222211"), 5, message="the recovery log")
    consumer.wait_messages(5)
    assert sorted(m.body for m in consumer.messages[3:]) == ["held", "in-tx"]
    assert scrape(node)["artemis_disk_full"] == 0
    assert node_disk(node)["full"] is False


def test_messages_fill_the_disk_toward_its_limit_and_the_journal_never_runs_out(
    small_disk: Path, make_broker: Callable[..., BrokerProcess], clients: Callable[..., Client]
) -> None:
    """The producer itself fills the disk (large messages, each a file of its own): it is
    held once the limit is crossed, with room to spare, and nothing fails for lack of
    space; consuming frees the files and the producer finishes by itself."""
    node = disk_node(make_broker, small_disk, "<max-disk-usage>40</max-disk-usage>")
    q = unique("/queue/disk.fill")
    count, body = 150, "x" * (200 * 1024)  # 30 MiB in all; the limit is at 25.6 MiB
    producer = clients(node)
    sent = threading.Event()

    def produce() -> None:
        for i in range(count):
            r = producer.next_receipt()
            producer.conn.send(q, body, headers={**PERSISTENT, "seq": str(i), "receipt": r})
            # (held for as long as the test below takes to make room)
            wait_for(lambda r=r: r in producer.receipts or producer.errors, 60)
            if producer.errors:
                return
        sent.set()

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    wait_for(logged(node, "AMQ222210"), 20, message="the disk-full warning")
    receipted = len(producer.receipts)
    stays(
        lambda: len(producer.receipts) == receipted,
        1.0,
        message="the producer to be held once the disk is full",
    )
    assert receipted < count
    assert not sent.is_set()
    assert not producer.errors
    assert "No space left" not in node.log()

    consumer = clients(node)
    consumer.subscribe(q, ack="client-individual")
    for n in range(count):  # acknowledging deletes the files: the disk empties
        frames = consumer.wait_messages(n + 1, 20)
        consumer.ack(frames[n], receipt=False)
    assert sent.wait(20), "the producer finishes once consuming made room"
    thread.join()
    assert [int(m.headers["seq"]) for m in consumer.messages] == list(range(count))
    assert logged(node, "AMQ222211")()


def test_disk_full_policy_fail_refuses_and_drop_drops(
    small_disk: Path, make_broker: Callable[..., BrokerProcess], clients: Callable[..., Client]
) -> None:
    settings = DEFAULT_ADDRESS_SETTINGS + "".join(
        f'<address-setting match="disk.{policy.lower()}.#">'
        f"<disk-full-policy>{policy}</disk-full-policy></address-setting>"
        for policy in ("FAIL", "DROP")
    )
    # min-disk-free replaces max-disk-usage (Artemis logs AMQ224130 that it does).
    limit = "<min-disk-free>32MiB</min-disk-free>"
    node = disk_node(make_broker, small_disk, limit, address_settings=settings)
    assert logged(node, "AMQ224130")()
    failing, dropping = unique("/queue/disk.fail.q"), unique("/queue/disk.drop.q")
    producer = clients(node)
    producer.send(failing, "kept", **PERSISTENT)

    filler = fill(small_disk, 40 * MiB)
    wait_for(logged(node, "AMQ224128"), 5, message="the min-disk-free warning")

    dropper = clients(node)
    dropper.send(dropping, "dropped", **PERSISTENT)  # receipted, as Artemis does for DROP
    producer.conn.send(failing, "refused", headers={**PERSISTENT, "receipt": "r-refused"})
    error = producer.wait_error(5)
    assert "disk is full" in error.body, error.body
    assert "disk-full-policy FAIL" in error.body, error.body
    assert error.headers.get("receipt-id") == "r-refused"

    filler.unlink()
    wait_for(logged(node, "AMQ224129"), 5, message="the recovery log")
    consumer = clients(node)
    consumer.subscribe(failing)
    consumer.subscribe(dropping)
    dropper.send(dropping, "after", **PERSISTENT)
    consumer.wait_messages(2)
    consumer.sync()
    assert sorted(m.body for m in consumer.messages) == ["after", "kept"]


def test_a_node_started_on_a_full_disk_holds_its_first_send(
    small_disk: Path, make_broker: Callable[..., BrokerProcess], clients: Callable[..., Client]
) -> None:
    filler = fill(small_disk, 48 * MiB)
    node = disk_node(make_broker, small_disk, "<max-disk-usage>60</max-disk-usage>")
    assert logged(node, "AMQ222210")(), "scanned before clients are served"
    producer = clients(node)
    q = unique("/queue/disk.start")
    held = producer.next_receipt()
    producer.conn.send(q, "first", headers={**PERSISTENT, "receipt": held})
    stays(lambda: held not in producer.receipts, 0.5, message="the first send to be held")
    filler.unlink()
    producer.wait_receipt(held, 5)


def scrape(node: BrokerProcess) -> dict[str, float]:
    response = httpx.get(f"{node.web_url}/metrics", timeout=10)
    assert response.status_code == 200, response.text
    return {
        s.name: s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
        if s.name.startswith("artemis_disk_")
    }


def node_disk(node: BrokerProcess) -> dict[str, object]:
    response = httpx.get(f"{node.web_url}/api/node", timeout=10)
    assert response.status_code == 200, response.text
    disk: dict[str, object] = response.json()["disk"]
    return disk
