"""The node's Prometheus metrics (management/metrics.py): names, types and values after
known traffic, on an in-process node with a real journal and a real STOMP client; the
scrape is parsed with prometheus_client's own parser."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from prometheus_client import REGISTRY
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families

from artemis_py.broker.authorization import AuthorizationError
from artemis_py.broker.broker import BrokerError
from artemis_py.broker.paging import Full
from artemis_py.broker.queue import MaxConsumersReachedError
from artemis_py.client import open_stomp_connection
from artemis_py.config import parse_config
from artemis_py.exceptions import JournalFailedError
from artemis_py.management import metrics
from artemis_py.management.metrics import exposition, metrics_of
from artemis_py.node import Node, open_broker
from artemis_py.sessions.stomp.errors import refusal_kind
from conftest import wait_for

BROKER_XML = """\
<configuration xmlns="urn:activemq">
   <core xmlns="urn:activemq:core">
      <name>metrics-node</name>
      <persistence-enabled>true</persistence-enabled>
      <security-enabled>false</security-enabled>
      <journal-directory>data/journal</journal-directory>
      <bindings-directory>data/bindings</bindings-directory>
      <paging-directory>data/paging</paging-directory>
      <large-messages-directory>data/largemessages</large-messages-directory>
      <acceptors>
         <acceptor name="stomp">tcp://127.0.0.1:0?protocols=STOMP;anycastPrefix=/queue/;multicastPrefix=/topic/</acceptor>
      </acceptors>
      <address-settings>
         <address-setting match="m.dlq">
            <max-delivery-attempts>1</max-delivery-attempts>
            <dead-letter-address>DLQ</dead-letter-address>
         </address-setting>
      </address-settings>
      <addresses>
         <address name="DLQ"><anycast><queue name="DLQ"/></anycast></address>
      </addresses>
   </core>
</configuration>
"""

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    async with open_broker(parse_config(BROKER_XML), instance_dir=tmp_path) as started:
        yield started
        started.stop()


def scrape(node: Node) -> tuple[Samples, dict[str, str]]:
    """Every sample of a scrape by (name, labels), and every family's type."""
    body, content_type = exposition(node)
    assert content_type.startswith("text/plain")
    samples: Samples = {}
    types = {}
    for family in text_string_to_metric_families(body.decode()):
        types[family.name] = family.type
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples, types


def value(samples: Samples, metric: str, /, **labels: str) -> float:
    """The one sample called ``metric`` whose labels include ``labels``."""
    found = [v for (n, ls), v in samples.items() if n == metric and set(labels.items()) <= ls]
    assert len(found) == 1, f"{metric}{labels}: {len(found)} samples"
    return found[0]


def port_of(node: Node) -> int:
    return node.addresses("stomp")[0][1]


async def test_queue_connection_and_journal_metrics_after_known_traffic(node: Node) -> None:
    sent, acked = 5, 3
    async with open_stomp_connection("127.0.0.1", port_of(node)) as client:
        for i in range(sent):
            await client.send("/queue/m.orders", f"order {i}", headers={"persistent": "true"})
        sub = await client.subscribe("/queue/m.orders", ack="client-individual")
        got = [await sub.receive() for _ in range(sent)]
        for message in got[:acked]:
            await client.ack(message, receipt=True)
        samples, types = scrape(node)
        q = {"queue": "m.orders", "address": "m.orders", "routing_type": "ANYCAST"}
        assert value(samples, "artemis_queue_messages", **q) == sent - acked
        assert value(samples, "artemis_queue_delivering_messages", **q) == sent - acked
        assert value(samples, "artemis_queue_messages_added_total", **q) == sent
        assert value(samples, "artemis_queue_messages_acknowledged_total", **q) == acked
        assert value(samples, "artemis_queue_consumers", **q) == 1
        assert value(samples, "artemis_queue_messages_expired_total", **q) == 0
        assert value(samples, "artemis_connections") == 1
        assert value(samples, "artemis_sessions") == 1
        assert value(samples, "artemis_connections_opened_total") == 1
        # CONNECT, 5 SEND, SUBSCRIBE, 3 ACK in; CONNECTED, 5+1+3 RECEIPT, 5 MESSAGE out.
        assert value(samples, "artemis_frames_received_total") == 1 + sent + 1 + acked
        assert value(samples, "artemis_frames_sent_total") == 1 + sent + 1 + acked + sent
    assert all(
        value(samples, "artemis_errors_total", kind=k) == 0 for k in ("protocol", "security")
    )
    messages = {"journal": "messages"}
    assert value(samples, "artemis_journal_appends_total", **messages) >= sent + acked
    assert value(samples, "artemis_journal_fsyncs_total", **messages) > 0
    assert value(samples, "artemis_journal_fsync_seconds_count", **messages) > 0
    assert value(samples, "artemis_journal_fsync_seconds_bucket", le="+Inf", **messages) == value(
        samples, "artemis_journal_fsync_seconds_count", **messages
    )
    assert value(samples, "artemis_address_size_bytes", address="m.orders") > 0
    assert value(samples, "artemis_address_paging", address="m.orders") == 0
    assert value(samples, "process_resident_memory_bytes") > 0
    assert value(samples, "artemis_node_info", name="metrics-node") == 1
    assert all(
        dict(labels).get("node") == node.node_id for (n, labels) in samples if "artemis" in n
    )
    assert types["artemis_queue_messages"] == "gauge"
    assert types["artemis_queue_messages_added"] == "counter"
    assert types["artemis_journal_fsync_seconds"] == "histogram"
    assert types["process_cpu_seconds"] == "counter"
    # The connection closed: its counts stay, the deliveries it held went back.
    await wait_for(lambda: not node.clients.connections, message="the connection to close")
    samples, _ = scrape(node)
    assert value(samples, "artemis_connections") == 0
    assert value(samples, "artemis_frames_received_total") >= 1 + sent + 1 + acked
    assert value(samples, "artemis_queue_delivering_messages", queue="m.orders") == 0
    assert value(samples, "artemis_queue_messages", queue="m.orders") == sent - acked


async def test_expired_and_killed_are_counted_apart_from_acknowledged(node: Node) -> None:
    async with open_stomp_connection("127.0.0.1", port_of(node)) as client:
        await client.send("/queue/m.expiring", "late", headers={"expires": "1"})
        await client.send("/queue/m.dlq", "poison")
        expiring = await client.subscribe("/queue/m.expiring", ack="client-individual")
        dlq = await client.subscribe("/queue/m.dlq", ack="client-individual")
        await client.nack(await dlq.receive(), receipt=True)
        samples, _ = scrape(node)
        del expiring
    assert value(samples, "artemis_queue_messages_expired_total", queue="m.expiring") == 1
    assert value(samples, "artemis_queue_messages_acknowledged_total", queue="m.expiring") == 0
    assert value(samples, "artemis_queue_messages", queue="m.expiring") == 0
    assert value(samples, "artemis_queue_messages_killed_total", queue="m.dlq") == 1
    assert value(samples, "artemis_queue_messages_acknowledged_total", queue="m.dlq") == 0
    assert value(samples, "artemis_queue_messages", queue="DLQ") == 1


async def test_error_frames_are_counted_by_kind(node: Node) -> None:
    stream = await trio.open_tcp_stream("127.0.0.1", port_of(node))
    async with stream:
        await stream.send_all(b"SEND\ndestination:/queue/m.x\n\nbefore CONNECT\x00")
        while await stream.receive_some(4096):  # the ERROR, then the close
            pass
    await wait_for(lambda: not node.clients.connections, message="the connection to close")
    samples, _ = scrape(node)
    assert value(samples, "artemis_errors_total", kind="protocol") == 1
    assert value(samples, "artemis_errors_total", kind="refused") == 0


def test_refusals_have_kinds() -> None:
    def full() -> BrokerError:
        try:
            raise Full("address m.x is full")
        except Full as exc:
            try:
                raise BrokerError(str(exc)) from exc
            except BrokerError as error:
                return error

    assert refusal_kind(AuthorizationError("user u may not send to m.x")) == "security"
    assert refusal_kind(full()) == "resource"
    assert refusal_kind(MaxConsumersReachedError("max-consumers")) == "resource"
    assert refusal_kind(JournalFailedError("disk")) == "storage"
    assert refusal_kind(BrokerError("queue m.x does not exist")) == "refused"


async def test_openmetrics_when_asked_a_threaded_scrape_and_a_registry_of_its_own(
    node: Node,
) -> None:
    body, content_type = exposition(node, "application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    assert body.endswith(b"# EOF\n")
    names = {f.name for f in parse_om(body.decode())}
    assert {"artemis_queue_messages", "artemis_journal_fsync_seconds"} <= names
    # The loop's variant (encoded in a worker thread) gives the same families.
    threaded, content_type = await metrics.scrape(node)
    assert content_type.startswith("text/plain")
    families = {f.name for f in text_string_to_metric_families(threaded.decode())}
    assert families == {
        f.name for f in text_string_to_metric_families(exposition(node)[0].decode())
    }
    registry = metrics_of(node).registry
    assert registry is not REGISTRY
    assert metrics_of(node).registry is registry
    assert REGISTRY.get_sample_value("artemis_connections", {"node": node.node_id}) is None
