"""Nodes whose ``paged.#`` addresses page after a few KiB (tiny pages, so tests cross many)."""

from __future__ import annotations

from pathlib import Path

import pytest

from integration.conftest import (  # noqa: F401 - fixtures used by the tests here
    DEFAULT_ADDRESS_SETTINGS,
    clients,
    make_broker,
    raw_clients,
    wait_for,
)


def paging_settings(policy: str = "PAGE", extra: str = "", match: str = "paged.#") -> str:
    return (
        DEFAULT_ADDRESS_SETTINGS
        + f"""
      <address-setting match="{match}">
        <max-size-bytes>20KiB</max-size-bytes>
        <page-size-bytes>16KiB</page-size-bytes>
        <max-read-page-messages>10</max-read-page-messages>
        <address-full-policy>{policy}</address-full-policy>{extra}
      </address-setting>
"""
    )


def page_files(node) -> list[Path]:
    return sorted((node.data_dir / "paging").glob("*/*.page"))


@pytest.fixture
def paged_node(make_broker):  # noqa: F811
    return make_broker(persistence=True, address_settings=paging_settings())


def take_acking(client, count: int, *, receipt: bool = True, key: str = "seq") -> list:
    """Receive ``count`` messages on a subscription, acknowledging each as it comes (a queue
    depages only while its depaged messages in flight stay under max-read-page-messages);
    returns their ``seq`` headers as numbers (``key="body"``: their bodies)."""
    acked = 0
    while acked < count:
        wait_for(
            lambda done=acked: len(client.messages) > done,
            30,
            message=lambda done=acked: f"{done} of {count}",
        )
        for frame in client.messages[acked:count]:
            client.ack(frame, receipt=receipt)
            acked += 1
    client.sync()
    if key == "body":
        return [m.body for m in client.messages[:count]]
    return [int(m.headers[key]) for m in client.messages[:count]]


def data_summary_queues(node) -> list[dict]:
    """``artemis-py data summary --json`` of a stopped node: its queues (id, name, counts)."""
    import json

    from integration.test_cli import artemis_py

    result = artemis_py("data", "summary", "--json", str(node.data_dir))
    assert result.returncode == 0, f"data summary failed: {result.stderr.strip()[-2000:]}"
    return json.loads(result.stdout)["queues"]


def data_summary(node) -> dict[str, int]:
    """Total messages per queue name of a stopped node (``data summary``)."""
    return {q["name"]: q["total"] for q in data_summary_queues(node)}
