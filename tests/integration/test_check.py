"""``artemis-py check`` against real nodes: a three-node cluster keeps every receipted
message (exit 0, the JSON report's counts add up), and a queue that drops what it is sent
is reported as loss (exit 1)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from cluster.conftest import cli, cluster  # noqa: F401 - the cluster fixture, for this module

from .conftest import DEFAULT_ADDRESSES, BrokerProcess, Client, unique


def check(*urls: str, queue: str, extra: tuple[str, ...] = ()) -> tuple[int, dict[str, Any]]:
    """Run ``artemis-py check --json`` against ``urls``; (exit code, report)."""
    done = cli("check", "--url", *urls, "--queue", queue, "--json", *extra, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)


def test_check_finds_every_receipted_message_on_a_three_node_cluster(
    cluster: Callable[..., list[Any]],  # noqa: F811 - the imported fixture
    clients: Callable[..., Client],
) -> None:
    nodes = cluster(3)
    queue = unique("check")
    # Someone else's message on the queue: counted as foreign, not as a failure.
    clients(nodes[1]).send(f"/queue/{queue}", "not the checker's", persistent="true")
    urls = [f"tcp://127.0.0.1:{n.port}" for n in nodes]

    code, report = check(*urls, queue=queue, extra=("--count", "300", "--timeout", "5"))

    assert code == 0, report
    assert report["ok"] is True
    assert (report["sent"], report["receipted"], report["received"]) == (300, 300, 300)
    assert (report["lost"], report["unexpected"], report["foreign"]) == (0, 0, 1)
    duplicated = report["duplicated"]
    assert duplicated["total"] == sum(v for k, v in duplicated.items() if k != "total")
    assert report["deliveries"] == report["received"] + duplicated["total"]
    assert [n["url"] for n in report["nodes"]] == urls
    assert all(n["sent"] > 0 for n in report["nodes"]), report["nodes"]  # every node was used
    assert sum(n["delivered"] for n in report["nodes"]) == report["deliveries"]


LOSSY = "lossy"  # a queue whose filter takes nothing the checker sends: receipted, then dropped
LOSSY_QUEUE = (
    f'<address name="{LOSSY}"><anycast><queue name="{LOSSY}">'
    "<filter string=\"color = 'red'\"/></queue></anycast></address>"
)


def test_check_reports_receipted_messages_that_never_come_back_as_lost(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    node = make_broker(addresses=DEFAULT_ADDRESSES + LOSSY_QUEUE)

    code, report = check(
        f"tcp://127.0.0.1:{node.port}", queue=LOSSY, extra=("--count", "20", "--timeout", "2")
    )

    assert code == 1, report
    assert report["ok"] is False
    assert (report["receipted"], report["received"], report["lost"]) == (20, 0, 20)
    assert report["lost_numbers"] == list(range(1, 21))

    url = f"tcp://127.0.0.1:{node.port}"
    text = cli("check", "--url", url, "--queue", LOSSY, "--count", "5", "--timeout", "1")
    assert text.returncode == 1
    assert "FAILED: 5 receipted message(s) lost: 1, 2, 3, 4, 5" in text.stdout, text.stdout


def test_check_without_a_node_to_talk_to_exits_2() -> None:
    done = cli("check", "--url", "tcp://127.0.0.1:1", "--timeout", "1", "--receipt-timeout", "1")
    assert done.returncode == 2
    assert "no send was receipted" in done.stderr
    assert "Traceback" not in done.stderr
    assert "cannot connect: Connection refused" in done.stdout
