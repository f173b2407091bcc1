"""``artemis-py producer`` / ``consumer``: argument parsing, destination and URL mapping,
output formatting, and whole runs against a scripted STOMP server on a localhost port.

The commands call ``trio.run`` themselves, so the end-to-end tests are plain functions and
the server runs its own Trio loop in a thread.
"""

from __future__ import annotations

import argparse
import io
import queue
import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import trio

from artemis_py.cli import clients
from artemis_py.client import BrokerUrl, Destination, parse_destination, parse_url
from artemis_py.client.testing import FrameHook, ScriptedStompServer
from artemis_py.protocol.stomp import Frame


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="artemis-py")
    commands = parser.add_subparsers(dest="command", required=True)
    clients.add_parsers(commands)
    return parser


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


# -- parsing -----------------------------------------------------------------------------------


def test_producer_defaults() -> None:
    args = parse("producer")
    assert args.func is clients.producer_command
    assert args.url.addresses == (BrokerUrl("localhost", 61613),)
    assert not args.url.options.fails_over
    assert args.destination == "queue://TEST"
    assert args.message_count == 1000
    assert args.message_size == 0
    assert args.persistent is True
    assert args.receipts is True
    assert args.max_pending == 1
    assert args.user is None
    assert args.password is None
    assert args.stomp_version == "1.2"
    assert args.verbose is False
    assert clients.resolve_destination(args) == Destination("TEST", "ANYCAST")
    assert args.sleep == 0


def test_consumer_defaults() -> None:
    args = parse("consumer")
    assert args.func is clients.consumer_command
    assert args.ack_mode == "auto"
    assert args.timeout is None
    assert args.filter is None
    assert args.message_count == 1000


def test_producer_options() -> None:
    args = parse(
        "producer",
        "--url",
        "tcp://broker.example:61617",
        "--non-persistent",
        "--no-receipts",
        "--max-pending",
        "16",
        "--message-size",
        "1024",
        "--message-count",
        "5",
        "--user",
        "admin",
        "--password",
        "pw",
        "--header",
        "color=red",
        "--header",
        "JMSXGroupID=g=1",
    )
    assert args.url.addresses == (BrokerUrl("broker.example", 61617),)
    assert (args.persistent, args.receipts, args.max_pending) == (False, False, 16)
    assert (args.message_size, args.message_count) == (1024, 5)
    assert (args.user, args.password) == ("admin", "pw")
    assert args.header == [("color", "red"), ("JMSXGroupID", "g=1")]


def test_consumer_options() -> None:
    args = parse(
        "consumer", "--ack-mode", "client-individual", "--timeout", "2.5", "--selector", "a=1"
    )
    assert (args.ack_mode, args.timeout, args.filter) == ("client-individual", 2.5, "a=1")


@pytest.mark.parametrize(
    "argv",
    [
        ["producer", "--persistent", "--non-persistent"],
        ["producer", "--max-pending", "0"],
        ["producer", "--message-count", "-1"],
        ["producer", "--message-size", "big"],
        ["producer", "--header", "no-equals-sign"],
        ["producer", "--url", "ssl://broker:61617"],
        ["producer", "--url", "tcp://broker:99999"],
        ["consumer", "--ack-mode", "sometimes"],
        ["consumer", "--timeout", "0"],
        ["consumer", "--timeout", "soon"],
    ],
)
def test_invalid_arguments_are_usage_errors(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(argv)
    assert info.value.code == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        # No prefix unless asked for: the routing type travels in a header.
        (["--destination", "queue://orders"], Destination("orders", "ANYCAST")),
        (["--destination", "topic://prices"], Destination("prices", "MULTICAST")),
        (["--destination", "QUEUE://orders"], Destination("orders", "ANYCAST")),
        (["--destination", "queue://a.b::c"], Destination("a.b::c", "ANYCAST")),
        (
            ["--destination", "queue://orders", "--anycast-prefix", "/queue/"],
            Destination("/queue/orders", "ANYCAST"),
        ),
        (
            ["--destination", "topic://prices", "--multicast-prefix", "/topic/"],
            Destination("/topic/prices", "MULTICAST"),
        ),
        # A raw destination goes as it is, prefix and all, and the acceptor decides.
        (["--destination", "/queue/raw"], Destination("/queue/raw")),
        (["--destination", "plain-address"], Destination("plain-address")),
    ],
)
def test_destination_mapping(options: list[str], expected: Destination) -> None:
    assert clients.resolve_destination(parse("producer", *options)) == expected


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("", "empty destination"),
        ("queue://", "no name in destination 'queue://'"),
        ("fifo://x", "unknown destination type 'fifo' in 'fifo://x'"),
    ],
)
def test_invalid_destinations(name: str, error: str) -> None:
    with pytest.raises(ValueError, match=re.escape(error)):
        parse_destination(name)


def test_a_destination_names_its_routing_type_in_the_header_of_each_verb() -> None:
    queue, topic, raw = (parse_destination(n) for n in ("queue://q", "topic://t", "/queue/r"))
    assert queue.send_headers() == [("destination", "q"), ("destination-type", "ANYCAST")]
    assert topic.subscribe_headers() == [("destination", "t"), ("subscription-type", "MULTICAST")]
    assert raw.send_headers() == raw.subscribe_headers() == [("destination", "/queue/r")]


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("tcp://localhost:61613", BrokerUrl("localhost", 61613)),
        ("tcp://broker", BrokerUrl("broker", 61613)),
        ("stomp://broker:1234/", BrokerUrl("broker", 1234)),
        ("broker:5", BrokerUrl("broker", 5)),
        ("TCP://[::1]:61614", BrokerUrl("::1", 61614)),
    ],
)
def test_parse_url(url: str, expected: BrokerUrl) -> None:
    assert parse_url(url) == expected


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("", "empty broker URL"),
        ("ssl://h:1", "unsupported URL scheme 'ssl' in 'ssl://h:1'"),
        ("tcp://h:0", "invalid port 0 in broker URL 'tcp://h:0'"),
        ("tcp://h:x", "invalid port in broker URL 'tcp://h:x'"),
        ("tcp://h:1?sslEnabled=true", "unsupported broker URL 'tcp://h:1?sslEnabled=true'"),
        ("tcp://u:p@h:1", "credentials in the URL 'tcp://u:p@h:1'"),
    ],
)
def test_parse_url_rejects(url: str, error: str) -> None:
    with pytest.raises(ValueError, match=re.escape(error)):
        parse_url(url)


def test_broker_url_str() -> None:
    assert str(BrokerUrl("::1", 5)) == "tcp://[::1]:5"
    assert str(parse_url("h")) == "tcp://h:61613"


# -- output ------------------------------------------------------------------------------------


def test_format_summary() -> None:
    line = clients.format_summary("Produced", 1000, 2 * 1024 * 1024, 2.0, "/queue/TEST")
    assert line == "Produced 1000 messages to /queue/TEST in 2.000 s: 500.0 msg/s, 1.00 MiB/s"
    line = clients.format_summary("Consumed", 1, 10, 0.0, "/topic/t", extra="0 redelivered")
    assert (
        line == "Consumed 1 message from /topic/t in 0.000 s: 0.0 msg/s, 0.00 MiB/s, 0 redelivered"
    )


def test_progress_bar_redraws_one_line_and_erases_it() -> None:
    now = [0.0]
    out = io.StringIO()
    progress = clients.Progress(out, 10, "producer", enabled=True, width=10, clock=lambda: now[0])
    now[0] = 1.0
    progress.update(5)
    assert out.getvalue() == "\r\x1b[Kproducer [#####-----] 5/10  50%  5 msg/s"
    progress.update(6)  # within the redraw interval: skipped
    assert out.getvalue().count("\r") == 1
    progress.update(10)  # the last one is always drawn
    assert out.getvalue().endswith("[##########] 10/10 100%  10 msg/s")
    progress.close()
    assert out.getvalue().endswith("\r\x1b[K")
    assert "\n" not in out.getvalue()


def test_progress_disabled_writes_nothing() -> None:
    out = io.StringIO()
    progress = clients.Progress(out, None, "consumer", enabled=False)
    progress.update(3)
    progress.close()
    assert out.getvalue() == ""
    assert progress.line(3, 1.0) == "consumer 3 messages  3 msg/s"


# -- whole runs against a scripted server ------------------------------------------------------


@contextmanager
def serving(server: ScriptedStompServer) -> Iterator[int]:
    """Run ``server`` on a localhost port in a thread with its own Trio loop."""
    started: queue.Queue[tuple[int, trio.lowlevel.TrioToken, trio.CancelScope]] = queue.Queue()

    async def main() -> None:
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                port = await nursery.start(server.serve_tcp)
                started.put((port, trio.lowlevel.current_trio_token(), scope))

    thread = threading.Thread(target=trio.run, args=(main,), daemon=True)
    thread.start()
    port, token, scope = started.get(timeout=10)
    try:
        yield port
    finally:
        trio.from_thread.run_sync(scope.cancel, trio_token=token)
        thread.join(10)
        assert not thread.is_alive()


def run_cli(*argv: str) -> int:
    args = parse(*argv)
    return int(args.func(args))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    ("options", "receipts"),
    [([], 5), (["--max-pending", "3"], 5), (["--no-receipts"], 0)],
)
def test_producer_run(
    options: list[str], receipts: int, capsys: pytest.CaptureFixture[str]
) -> None:
    server = ScriptedStompServer()
    with serving(server) as port:
        code = run_cli(
            "producer",
            "--url",
            f"tcp://127.0.0.1:{port}",
            "--destination",
            "queue://orders",
            "--message-count",
            "5",
            "--message-size",
            "100",
            "--header",
            "color=red",
            "--user",
            "u",
            "--password",
            "p",
            *options,
        )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert err == ""
    assert out.startswith("Produced 5 messages to queue://orders in ")
    sends = [frame for frame in server.frames if frame.command == "SEND"]
    assert len(sends) == 5
    assert all(frame.body == sends[0].body and len(frame.body) == 100 for frame in sends)
    assert all(frame.get("persistent") == "true" for frame in sends)
    assert all(frame.get("color") == "red" for frame in sends)
    assert all(frame.get("destination") == "orders" for frame in sends)
    assert all(frame.get("destination-type") == "ANYCAST" for frame in sends)
    assert sum(frame.get("receipt") is not None for frame in sends) == receipts
    assert server.frames[0].get("login") == "u"
    assert server.frames[-1].command == "DISCONNECT"


def test_producer_text_messages_non_persistent(capsys: pytest.CaptureFixture[str]) -> None:
    server = ScriptedStompServer()
    with serving(server) as port:
        code = run_cli(
            "producer",
            "--url",
            f"127.0.0.1:{port}",
            "--message-count",
            "2",
            "--non-persistent",
            "--verbose",
        )
    out, _ = capsys.readouterr()
    assert code == 0
    sends = [frame for frame in server.frames if frame.command == "SEND"]
    assert [frame.body for frame in sends] == [b"test message: 1", b"test message: 2"]
    assert all(frame.get("content-length") is None for frame in sends)  # text messages
    assert all(frame.get("persistent") == "false" for frame in sends)
    assert (sends[0].get("destination"), sends[0].get("destination-type")) == ("TEST", "ANYCAST")
    assert "sent 1/2: 15 bytes" in out


def deliver_on_subscribe(count: int, *, redelivered: int = 0) -> FrameHook:
    """A hook that delivers ``count`` messages (the first ``redelivered`` flagged so)."""

    async def hook(server: ScriptedStompServer, frame: Frame) -> bool:
        if frame.command == "SUBSCRIBE":
            for number in range(count):
                await server.send_message(
                    frame.get("id", ""), b"payload-%d" % number, redelivered=number < redelivered
                )
        return False

    return hook


@pytest.mark.parametrize(
    ("ack_mode", "wire_ack_mode"),
    [("auto", "client-individual"), ("client", "client"), ("client-individual",) * 2],
)
def test_consumer_run(
    ack_mode: str, wire_ack_mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The server pushes 6 messages at once (it ignores the window); the consumer takes 4.
    server = ScriptedStompServer(on_frame=deliver_on_subscribe(6, redelivered=1))
    with serving(server) as port:
        code = run_cli(
            "consumer",
            "--url",
            f"tcp://127.0.0.1:{port}",
            "--destination",
            "topic://news",
            "--message-count",
            "4",
            "--ack-mode",
            ack_mode,
            "--filter",
            "color = 'red'",
            "--verbose",
        )
    out, err = capsys.readouterr()
    assert code == 0, err
    subscribe = next(frame for frame in server.frames if frame.command == "SUBSCRIBE")
    assert subscribe.get("destination") == "news"
    assert subscribe.get("subscription-type") == "MULTICAST"
    assert subscribe.get("ack") == wire_ack_mode
    assert subscribe.get("consumer-window-size") == "0"  # one message at a time
    assert subscribe.get("selector") == "color = 'red'"
    acks = [frame.get("id") for frame in server.frames if frame.command == "ACK"]
    assert acks == ["ack-1", "ack-2", "ack-3", "ack-4"]  # what it took, not what it was sent
    lines = out.splitlines()
    assert lines[0] == "received 1: m-1 (redelivered): payload-0"
    assert lines[-1].startswith("Consumed 4 messages from topic://news in ")
    assert lines[-1].endswith(", 1 redelivered")


def test_consumer_stops_after_the_idle_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    server = ScriptedStompServer(on_frame=deliver_on_subscribe(2))
    with serving(server) as port:
        code = run_cli(
            "consumer", "--url", f"tcp://127.0.0.1:{port}", "--message-count", "10",
            "--timeout", "0.2",
        )  # fmt: skip
    out, _ = capsys.readouterr()
    assert code == 0
    assert out.startswith("Consumed 2 messages from queue://TEST")
    assert out.rstrip().endswith("0 redelivered (stopped: no message for 0.2 s)")
    assert server.frames[-1].command == "DISCONNECT"


def test_connection_refused_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    code = run_cli("producer", "--url", f"tcp://127.0.0.1:{port}", "--message-count", "1")
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""
    assert (
        err
        == f"artemis-py producer: cannot connect to tcp://127.0.0.1:{port}: Connection refused\n"
    )


def test_error_frame_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    server = ScriptedStompServer(refuse_connect="AMQ229031: Unable to validate user bob")
    with serving(server) as port:
        code = run_cli("consumer", "--url", f"tcp://127.0.0.1:{port}", "--user", "bob")
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""
    assert err == (
        "artemis-py consumer: the broker sent an ERROR: AMQ229031: Unable to validate user bob\n"
    )


def test_error_during_the_run_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    async def refuse_third_send(server: ScriptedStompServer, frame: Frame) -> bool:
        if frame.command == "SEND" and len(server.received("SEND")) == 3:
            await server.send_error("AMQ229032: not authorized", receipt_id=frame.get("receipt"))
            return True
        return False

    server = ScriptedStompServer(on_frame=refuse_third_send)
    with serving(server) as port:
        code = run_cli("producer", "--url", f"tcp://127.0.0.1:{port}", "--max-pending", "2")
    _out, err = capsys.readouterr()
    assert code == 1
    assert "Traceback" not in err
    assert err == "artemis-py producer: the broker sent an ERROR: AMQ229032: not authorized\n"


def test_invalid_destination_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = run_cli("producer", "--destination", "fifo://x")
    assert code == 2
    assert "unknown destination type 'fifo'" in capsys.readouterr().err


# -- cluster URLs and failover -----------------------------------------------------------------

ARTEMIS_POLICY = "org.apache.activemq.artemis.api.core.client.loadbalance."


def test_cluster_url_options() -> None:
    args = parse(
        "consumer",
        "--url",
        "(tcp://a:1,tcp://b:2)?ha=true&retryInterval=100&connectionLoadBalancingPolicyClassName="
        f"{ARTEMIS_POLICY}FirstElementConnectionLoadBalancingPolicy",
    )
    assert args.url.addresses == (BrokerUrl("a", 1), BrokerUrl("b", 2))
    options = args.url.options
    assert options.fails_over
    assert options.retry_interval == 100
    assert options.policy == "first-element"
    assert not parse("producer", "--url", "tcp://a:1,tcp://b:2").url.options.fails_over


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("tcp://a:1?retry=5", "unknown URL parameter 'retry'"),
        ("(tcp://a:1,tcp://b:2", "unbalanced parenthesis"),
        ("tcp://a:1?ha=maybe", "expected true or false"),
        ("udp://10.0.0.1:9876", "multicast"),
    ],
)
def test_bad_cluster_urls_are_one_line_usage_errors(
    url: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["producer", "--url", url])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_no_receipts_with_failover_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = run_cli("producer", "--url", "tcp://127.0.0.1:1?ha=true", "--no-receipts")
    assert code == 2
    assert "--no-receipts cannot be used with failover" in capsys.readouterr().err


def failover_url(*ports: int) -> str:
    addresses = ",".join(f"tcp://127.0.0.1:{port}" for port in ports)
    return (
        f"({addresses})?ha=true&retryInterval=10&useTopologyForLoadBalancing=false"
        "&connectionLoadBalancingPolicyClassName=first-element"
    )


def close_at(command: str, number: int) -> FrameHook:
    """A hook that closes the connection (unanswered) at the ``number``-th ``command``."""

    async def hook(server: ScriptedStompServer, frame: Frame) -> bool:
        if frame.command == command and len(server.received(command)) == number:
            await server.close()
            return True
        return False

    return hook


@pytest.mark.parametrize("max_pending", ["1", "4"])
def test_producer_fails_over_and_resends(
    max_pending: str, capsys: pytest.CaptureFixture[str]
) -> None:
    first = ScriptedStompServer(on_frame=close_at("SEND", 3))
    second = ScriptedStompServer()
    with serving(first) as port1, serving(second) as port2:
        code = run_cli(
            "producer", "--url", failover_url(port1, port2), "--message-count", "6",
            "--max-pending", max_pending,
        )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith("Produced 6 messages to queue://TEST")
    # One line; its cause is a close or, with sends in flight, a reset (timing).
    assert err.startswith(
        f"artemis-py producer: failed over from tcp://127.0.0.1:{port1} to "
        f"tcp://127.0.0.1:{port2} after: "
    )
    assert err.count("\n") == 1
    first_ids = {f.get("_AMQ_DUPL_ID") for f in first.received("SEND")}
    second_sends = second.received("SEND")
    # The third send (at least) was never receipted: it went again, with its duplicate id.
    assert len(second_sends) >= 4
    assert first_ids & {f.get("_AMQ_DUPL_ID") for f in second_sends}
    bodies = {f.body for s in (first, second) for f in s.received("SEND")}
    assert bodies == {b"test message: %d" % n for n in range(1, 7)}


def test_consumer_fails_over_and_subscribes_again(capsys: pytest.CaptureFixture[str]) -> None:
    async def first_hook(server: ScriptedStompServer, frame: Frame) -> bool:
        if frame.command == "SUBSCRIBE":
            for number in range(3):
                await server.send_message(frame.get("id", ""), b"first-%d" % number)
        elif frame.command == "ACK" and len(server.received("ACK")) == 2:
            await server.close()  # the second ACK is not receipted
            return True
        return False

    first = ScriptedStompServer(on_frame=first_hook)
    second = ScriptedStompServer(on_frame=deliver_on_subscribe(3, redelivered=2))
    with serving(first) as port1, serving(second) as port2:
        code = run_cli(
            "consumer", "--url", failover_url(port1, port2), "--message-count", "4",
            "--timeout", "5",
        )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert err == (
        f"artemis-py consumer: failed over from tcp://127.0.0.1:{port1} to "
        f"tcp://127.0.0.1:{port2} after: the server closed the connection\n"
    )
    # Two handed over on the first node (the second's ACK cut off), two on the second.
    assert out.startswith("Consumed 4 messages from queue://TEST")
    assert out.rstrip().endswith("2 redelivered")
    subscribe = second.received("SUBSCRIBE")[0]
    assert subscribe.get("consumer-window-size") == "0"  # made again, with its headers
    acks = second.received("ACK")
    assert len(acks) == 2
    assert all(f.get("receipt") for f in acks)


def test_a_list_without_failover_takes_the_first_node_that_answers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = ScriptedStompServer()
    down = free_port()
    with serving(server) as port:
        code = run_cli(
            "producer", "--url",
            f"(tcp://127.0.0.1:{down},tcp://127.0.0.1:{port})"
            "?connectionLoadBalancingPolicyClassName=first-element",
            "--message-count", "2",
        )  # fmt: skip
    _out, err = capsys.readouterr()
    assert code == 0, err
    assert err == ""
    sends = server.received("SEND")
    assert len(sends) == 2
    assert all(f.get("_AMQ_DUPL_ID") is None for f in sends)
