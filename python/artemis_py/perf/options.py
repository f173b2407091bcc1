"""What a load test does: :class:`PerfOptions`, and the ``artemis-py perf`` options that make it.

Option names follow ``artemis perf client|producer|consumer`` where they apply (``--url``,
``--destination`` ``queue://NAME``/``topic://NAME``, ``--producers``, ``--consumers``,
``--message-size``, ``--persistent``, ``--rate``, ``--duration``, ``--warmup``,
``--tx-size``, ``--max-pending``). STOMP-specific: ``--ack-mode`` and ``--receipts``.
Message features (:mod:`.features`): ``--priorities LO-HI`` (``--priority-order``) and
``--groups N``; consumers then check what the features promise.

Receipts (persistent or not) come in three modes:

* ``--max-pending 1`` (default): each SEND waits for its RECEIPT (latency-bound);
* ``--max-pending N``: each producer keeps up to N SENDs unreceipted (N sender tasks on one
  connection, each timing its own SEND-to-RECEIPT);
* ``--no-receipts``: pipelined; only the final DISCONNECT is confirmed.

With ``--tx-size N`` producers send N messages per transaction and wait for the COMMIT's
receipt; consumers in a ``client`` ack mode acknowledge in transactions of N.

``--url`` (and ``--producer-url``/``--consumer-url``) take plain addresses, spread over
round-robin in the order given, or one *cluster URL* (one with parentheses or a query
string, docs/client.md): then the runner learns the members from the first node that
answers (``useTopologyForLoadBalancing``) and gives each connection the node its policy
picks (:mod:`.cluster`); with ``ha=true`` (or ``reconnectAttempts``) each actor fails over
on its own, and the report counts failovers and resends.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from artemis_py.client import (
    ACK_MODES,
    ANYCAST,
    DEFAULT_URL,
    BrokerUrl,
    Destination,
    parse_destination,
    parse_url,
)
from artemis_py.client.destination import add_destination_arguments
from artemis_py.client.url import ClientUrl, parse_client_url
from artemis_py.config.tls_params import TlsParams

__all__ = ["DEFAULT_DESTINATION", "PerfOptions", "add_arguments", "options_from_args"]

DEFAULT_DESTINATION: Final = "queue://TEST"
DEFAULT_MESSAGE_SIZE: Final = 1024
_USUAL_MULTICAST_PREFIX: Final = "/topic/"
"""A raw destination with this prefix (the etc/ samples' multicastPrefix) is taken for a
topic when no --multicast-prefix is given: every consumer gets every message."""
TIMESTAMP_HEADER: Final = "perf-ts"
"""The SEND header with the message's timestamp (``time.time_ns()``)."""
PRIORITY_ORDERS: Final = ("random", "cycle")
MAX_PRIORITY: Final = 9
"""JMS priorities are 0-9 (Artemis reads larger values as 9)."""


@dataclass(frozen=True, slots=True)
class PerfOptions:
    """One load test. ``producer_urls``/``consumer_urls`` get actors round-robin."""

    producer_urls: tuple[BrokerUrl, ...] = (parse_url(DEFAULT_URL),)
    consumer_urls: tuple[BrokerUrl, ...] = (parse_url(DEFAULT_URL),)
    destination: str = DEFAULT_DESTINATION
    stomp_destination: Destination = Destination("TEST", ANYCAST)
    topic: bool = False
    producers: int = 1
    consumers: int = 1
    message_size: int = DEFAULT_MESSAGE_SIZE
    persistent: bool = True
    receipts: bool = True
    max_pending: int = 1
    rate: float | None = None
    duration: float = 10.0
    warmup: float = 2.0
    tx_size: int = 0
    ack_mode: str = "auto"
    processes: int = 1
    drain_timeout: float = 10.0
    user: str | None = None
    password: str | None = None
    stomp_version: str = "1.2"
    monitor_pids: tuple[int, ...] = ()
    priorities: tuple[int, int] | None = None
    """``--priorities LO-HI``: each message gets a priority in LO..HI (None: none sent)."""
    priority_order: str = "random"
    groups: int = 0
    """``--groups N``: messages go round-robin to groups ``g0``..``g<N-1>`` (0: no groups)."""
    producer_cluster: ClientUrl | None = None
    consumer_cluster: ClientUrl | None = None
    """The cluster URLs the actors' nodes were picked from (None: plain addresses)."""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problems = []
        if self.producers < 0 or self.consumers < 0:
            problems.append("--producers and --consumers must not be negative")
        if self.producers == 0 and self.consumers == 0:
            problems.append("nothing to do: no producers and no consumers")
        if self.producers and not self.producer_urls:
            problems.append("no URL for the producers")
        if self.consumers and not self.consumer_urls:
            problems.append("no URL for the consumers")
        if self.max_pending < 1:
            problems.append("--max-pending must be at least 1")
        if self.rate is not None and not (self.rate > 0 and math.isfinite(self.rate)):
            problems.append("--rate must be a positive number of messages per second")
        if not self.duration > 0:
            problems.append("--duration must be positive")
        if self.warmup < 0:
            problems.append("--warmup must not be negative")
        if self.processes < 1:
            problems.append("--processes must be at least 1")
        if self.ack_mode not in ACK_MODES:
            problems.append(f"--ack-mode must be one of {', '.join(ACK_MODES)}")
        if self.tx_size < 0:
            problems.append("--tx-size must not be negative")
        problems.extend(self._cluster_problems())
        problems.extend(self._feature_problems())
        if problems:
            raise ValueError("; ".join(problems))

    def _cluster_problems(self) -> list[str]:
        problems = []
        for cluster in (self.producer_cluster, self.consumer_cluster):
            if cluster is not None and cluster.discovery is not None:
                problems.append(
                    f"perf takes tcp:// URLs: udp:// discovery is for producer and consumer ({cluster})"
                )
        if self.fails_over:
            if not self.receipts:
                problems.append("--no-receipts cannot be used with failover (ha=true)")
            if self.tx_size:
                problems.append("--tx-size cannot be used with failover (ha=true) yet")
        return problems

    def _feature_problems(self) -> list[str]:
        problems = []
        if self.priorities is not None:
            low, high = self.priorities
            if not 0 <= low <= high <= MAX_PRIORITY:
                problems.append(f"--priorities must be LO-HI within 0-{MAX_PRIORITY}")
        if self.priority_order not in PRIORITY_ORDERS:
            problems.append(f"--priority-order must be one of {', '.join(PRIORITY_ORDERS)}")
        if self.groups < 0:
            problems.append("--groups must not be negative")
        if self.groups and self.topic:
            problems.append("--groups needs a queue: on a topic every consumer gets every group")
        if self.has_features and self.fails_over:
            # A failover moves a group to another consumer: the check would report it.
            problems.append("--priorities and --groups are not checked with failover (ha=true)")
        return problems

    @property
    def has_features(self) -> bool:
        """Messages carry priorities or groups, and consumers check them (:mod:`.features`)."""
        return self.priorities is not None or self.groups > 0

    @property
    def fails_over(self) -> bool:
        """Some actor uses a failover connection (a cluster URL with ha=true or
        reconnectAttempts)."""
        return any(
            cluster is not None and cluster.options.fails_over
            for cluster in (self.producer_cluster, self.consumer_cluster)
        )

    @property
    def producer_tls(self) -> TlsParams | None:
        """The TLS parameters of the producers' cluster URL (``sslEnabled=true&...``)."""
        return self.producer_cluster.options.tls if self.producer_cluster else None

    @property
    def consumer_tls(self) -> TlsParams | None:
        return self.consumer_cluster.options.tls if self.consumer_cluster else None

    @property
    def pipelined(self) -> bool:
        return not self.receipts and self.tx_size == 0

    @property
    def expected_copies(self) -> int:
        """How many deliveries each sent message should produce (0: nobody consumes)."""
        if not self.consumers:
            return 0
        return self.consumers if self.topic else 1

    def receipt_mode(self) -> str:
        if self.tx_size:
            return f"transactions of {self.tx_size} (COMMIT receipt)"
        if not self.receipts:
            return "none (pipelined)"
        if self.max_pending == 1:
            return "every message, awaited"
        return f"every message, window of {self.max_pending}"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["stomp_destination"] = self.stomp_destination.name
        data["destination_type"] = self.stomp_destination.routing_type
        data["producer_urls"] = [str(u) for u in self.producer_urls]
        data["consumer_urls"] = [str(u) for u in self.consumer_urls]
        for side in ("producer_cluster", "consumer_cluster"):
            cluster = getattr(self, side)
            data[side] = None if cluster is None else str(cluster)
        data.pop("password")
        data.pop("extra")
        return data


# -- argument types ------------------------------------------------------------------------


def _urls(text: str) -> list[BrokerUrl | ClientUrl]:
    """Plain addresses, or one cluster URL (parentheses or a query string)."""
    try:
        if "?" in text or "(" in text:
            return [parse_client_url(text)]
        return [parse_url(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _number(kind: Callable[[str], Any], minimum: float, *, strict: bool = False) -> Any:
    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value) or value < minimum or (strict and value == minimum):
            relation = "greater than" if strict else "at least"
            raise argparse.ArgumentTypeError(f"must be {relation} {minimum:g}, got {text}")
        return value

    convert.__name__ = kind.__name__
    return convert


def _priority_range(text: str) -> tuple[int, int]:
    low, _, high = text.partition("-")
    try:
        pair = (int(low), int(high or low))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a priority range LO-HI: {text!r}") from None
    if not 0 <= pair[0] <= pair[1] <= MAX_PRIORITY:
        raise argparse.ArgumentTypeError(f"not a range within 0-{MAX_PRIORITY}: {text!r}")
    return pair


def _pids(text: str) -> list[int]:
    try:
        pids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of process ids: {text!r}") from None
    if any(pid <= 0 for pid in pids):
        raise argparse.ArgumentTypeError(f"not a list of process ids: {text!r}")
    return pids


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The load-test options (the CLI adds ``--json``, ``--plot`` and output options)."""
    _where_arguments(parser.add_argument_group("where"))
    _load_arguments(parser.add_argument_group("load"))
    _feature_arguments(parser.add_argument_group("message features"))
    _timing_arguments(parser.add_argument_group("timing"))


def _where_arguments(where: argparse._ArgumentGroup) -> None:
    where.add_argument(
        "--url",
        type=_urls,
        action="append",
        default=None,
        metavar="URL[,URL...]",
        help=f"STOMP acceptor(s), tcp://HOST:PORT; repeat or separate with commas to spread "
        f"producers and consumers round-robin over several nodes (default {DEFAULT_URL}). "
        "Or one cluster URL, '(tcp://A:PORT,tcp://B:PORT)?ha=true&...' (Artemis's "
        "parameters, docs/client.md): connections spread over the members by its policy, "
        "and with ha=true each fails over on its own",
    )
    where.add_argument(
        "--producer-url",
        type=_urls,
        action="append",
        default=None,
        metavar="URL[,URL...]",
        help="node(s) for the producers only (default: --url)",
    )
    where.add_argument(
        "--consumer-url",
        type=_urls,
        action="append",
        default=None,
        metavar="URL[,URL...]",
        help="node(s) for the consumers only (default: --url)",
    )
    where.add_argument("--user", default=None, help="login")
    where.add_argument("--password", default=None, help="passcode")
    add_destination_arguments(where, DEFAULT_DESTINATION)


def _load_arguments(load: argparse._ArgumentGroup) -> None:
    load.add_argument(
        "--producers",
        type=_number(int, 0),
        default=1,
        metavar="N",
        help="producers, each with a connection of its own (default 1)",
    )
    load.add_argument(
        "--consumers",
        type=_number(int, 0),
        default=1,
        metavar="N",
        help="consumers, each with a connection and a subscription of its own (default 1; "
        "on a topic every consumer gets every message)",
    )
    load.add_argument(
        "--message-size",
        type=_number(int, 0),
        default=DEFAULT_MESSAGE_SIZE,
        metavar="BYTES",
        help=f"body size (default {DEFAULT_MESSAGE_SIZE})",
    )
    load.add_argument(
        "--persistent",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="persistent:true (default) or false",
    )
    load.add_argument(
        "--receipts",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="ask for a RECEIPT per SEND (default); --no-receipts pipelines",
    )
    load.add_argument(
        "--max-pending",
        type=_number(int, 1),
        default=1,
        metavar="N",
        help="unreceipted SENDs per producer (default 1: await each receipt)",
    )
    load.add_argument(
        "--rate",
        type=_number(float, 0, strict=True),
        default=None,
        metavar="MSG/S",
        help="target send rate over all producers (default: as fast as possible); "
        "latencies are then measured from each message's scheduled time",
    )
    load.add_argument(
        "--tx-size",
        type=_number(int, 0),
        default=0,
        metavar="N",
        help="messages per transaction for producers and client-ack consumers (default 0: none)",
    )
    load.add_argument(
        "--ack-mode",
        choices=ACK_MODES,
        default="auto",
        help="STOMP ack mode of the consumers' subscriptions (default auto: the broker "
        "counts a message as acknowledged when it sends it); with client and "
        "client-individual each message is ACKed (in transactions of --tx-size, if given)",
    )


def _feature_arguments(features: argparse._ArgumentGroup) -> None:
    features.add_argument(
        "--priorities",
        type=_priority_range,
        default=None,
        metavar="LO-HI",
        help="send each message with a priority in LO..HI (0-9); consumers report the "
        "mean end-to-end latency per priority",
    )
    features.add_argument(
        "--priority-order",
        choices=PRIORITY_ORDERS,
        default="random",
        help="priorities drawn at random (default; the same sequence every run) or in turn",
    )
    features.add_argument(
        "--groups",
        type=_number(int, 0),
        default=0,
        metavar="N",
        help="send messages round-robin to N message groups (JMSXGroupID g0..g<N-1>); "
        "consumers check that each group goes to one consumer, in order (errors if not)",
    )


def _timing_arguments(timing: argparse._ArgumentGroup) -> None:
    timing.add_argument(
        "--duration",
        type=_number(float, 0, strict=True),
        default=10.0,
        metavar="SECONDS",
        help="measured seconds (default 10)",
    )
    timing.add_argument(
        "--warmup",
        type=_number(float, 0),
        default=2.0,
        metavar="SECONDS",
        help="seconds of load before the measurement (default 2)",
    )
    timing.add_argument(
        "--drain-timeout",
        type=_number(float, 0),
        default=10.0,
        metavar="SECONDS",
        help="after sending ends, how long consumers may go without a message before the "
        "run ends short (default 10)",
    )
    timing.add_argument(
        "--monitor-pid",
        type=_pids,
        action="append",
        default=None,
        metavar="PID[,PID...]",
        help="also report the CPU use of these processes (the nodes under test; Linux /proc), "
        "every second and over the window, beside the generator's own",
    )
    timing.add_argument(
        "--processes",
        type=_number(int, 1),
        default=1,
        metavar="N",
        help="load-generating processes; producers and consumers are spread over them (default 1)",
    )


Where = tuple[tuple[BrokerUrl, ...], ClientUrl | None]


def _where(
    option: str, groups: Sequence[list[BrokerUrl | ClientUrl]] | None, default: Where
) -> Where:
    """The addresses of one URL option, and its cluster URL if it is one."""
    urls = [url for group in groups or () for url in group]
    if not urls:
        return default
    clusters = [url for url in urls if isinstance(url, ClientUrl)]
    if not clusters:
        return tuple(url for url in urls if isinstance(url, BrokerUrl)), None
    if len(urls) > 1:
        raise ValueError(f"a cluster URL must be the only {option}: {clusters[0]}")
    return clusters[0].addresses, clusters[0]


def options_from_args(args: argparse.Namespace) -> PerfOptions:
    """Build and validate :class:`PerfOptions`; raises ValueError with a readable message."""
    urls, cluster = _where("--url", args.url, ((parse_url(DEFAULT_URL),), None))
    producer_urls, producer_cluster = _where("--producer-url", args.producer_url, (urls, cluster))
    consumer_urls, consumer_cluster = _where("--consumer-url", args.consumer_url, (urls, cluster))
    destination = parse_destination(
        args.destination,
        anycast_prefix=args.anycast_prefix,
        multicast_prefix=args.multicast_prefix,
    )
    topic = destination.multicast or (
        destination.routing_type is None
        and destination.name.startswith(args.multicast_prefix or _USUAL_MULTICAST_PREFIX)
    )
    return PerfOptions(
        producer_urls=producer_urls,
        consumer_urls=consumer_urls,
        producer_cluster=producer_cluster,
        consumer_cluster=consumer_cluster,
        destination=args.destination,
        stomp_destination=destination,
        topic=topic,
        producers=args.producers,
        consumers=args.consumers,
        message_size=args.message_size,
        persistent=args.persistent,
        receipts=args.receipts,
        max_pending=args.max_pending,
        rate=args.rate,
        duration=args.duration,
        warmup=args.warmup,
        tx_size=args.tx_size,
        ack_mode=args.ack_mode,
        processes=args.processes,
        drain_timeout=args.drain_timeout,
        user=args.user,
        password=args.password,
        monitor_pids=tuple(pid for group in args.monitor_pid or () for pid in group),
        priorities=args.priorities,
        priority_order=args.priority_order,
        groups=args.groups,
    )
