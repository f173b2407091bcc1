"""/metrics on a real node (its web server on, from a bootstrap.xml beside broker.xml) after
stomp.py clients did known traffic; the scrape is parsed with prometheus_client's parser."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families

from .conftest import BrokerProcess, Client, unique, wait_for

Samples = list[tuple[str, dict[str, str], float]]


def scrape(node: BrokerProcess) -> Samples:
    response = httpx.get(f"{node.web_url}/metrics", timeout=10)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return [
        (s.name, s.labels, s.value)
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    ]


def value(samples: Samples, metric: str, /, **labels: str) -> float:
    found = [v for n, ls, v in samples if n == metric and labels.items() <= ls.items()]
    assert len(found) == 1, f"{metric}{labels}: {len(found)} samples"
    return found[0]


def test_metrics_count_what_stomp_clients_did(
    make_broker: Callable[..., BrokerProcess], clients: Callable[..., Client]
) -> None:
    node = make_broker(persistence=True, web=True)
    sent, acked = 7, 4
    name = unique("metrics")
    client = clients(node)
    for i in range(sent):
        client.send(f"/queue/{name}", f"m{i}", persistent="true")
    client.subscribe(f"/queue/{name}", ack="client-individual")
    for frame in client.wait_messages(sent)[:acked]:
        client.ack(frame)
    samples = scrape(node)
    queue = {"queue": name, "address": name}
    assert value(samples, "artemis_queue_messages", **queue) == sent - acked
    assert value(samples, "artemis_queue_delivering_messages", **queue) == sent - acked
    assert value(samples, "artemis_queue_messages_added_total", **queue) == sent
    assert value(samples, "artemis_queue_messages_acknowledged_total", **queue) == acked
    assert value(samples, "artemis_queue_consumers", **queue) == 1
    assert value(samples, "artemis_connections") == 1
    assert value(samples, "artemis_sessions") == 1
    assert value(samples, "artemis_journal_fsyncs_total", journal="messages") > 0
    assert value(samples, "artemis_journal_appends_total", journal="messages") >= sent + acked
    assert value(samples, "artemis_journal_fsync_seconds_count", journal="messages") > 0
    # CONNECT, the SENDs, SUBSCRIBE and the ACKs (each with a receipt) so far.
    assert value(samples, "artemis_frames_received_total") == 1 + sent + 1 + acked
    assert value(samples, "process_resident_memory_bytes") > 0
    client.disconnect()
    wait_for(
        lambda: value(scrape(node), "artemis_connections") == 0,
        message="the connection to close",
    )
    samples = scrape(node)
    assert value(samples, "artemis_queue_delivering_messages", **queue) == 0
    assert value(samples, "artemis_queue_messages", **queue) == sent - acked
    assert value(samples, "artemis_queue_consumers", **queue) == 0


def test_openmetrics_for_a_scraper_that_asks(make_broker: Callable[..., BrokerProcess]) -> None:
    node = make_broker(web=True)
    response = httpx.get(
        f"{node.web_url}/metrics",
        headers={"Accept": "application/openmetrics-text; version=1.0.0; charset=utf-8"},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/openmetrics-text")
    names = {family.name for family in parse_om(response.text)}
    assert {"artemis_queue_messages", "artemis_connections", "process_cpu_seconds"} <= names
