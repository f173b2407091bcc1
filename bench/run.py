"""Messaging benchmark: artemis-py against Apache Artemis and ActiveMQ Classic, same run.

    bench/run                      # everything, about 10 minutes
    bench/run --targets artemis-py,artemis --scenarios 1,3 --duration 5

Each scenario is one ``artemis-py perf`` run per target; the targets run one at a time
(each stopped before the next starts, so ports never collide). The table at the end gives
each target's received msg/s and latency and the ratio artemis-py / peer, measured minutes
apart on the same machine. The nodes' CPU use in the window (``perf --monitor-pid`` on the
processes listening on the STOMP ports) is printed beside the load generator's, so a reader
can tell which of the two was the limit.

Targets:

* ``artemis-py``: a fresh instance directory in a temp dir with ``etc/broker.xml`` (STOMP
  61613) for scenarios 1-3; for 4-5 the three nodes of ``etc/cluster/symmetric/node1..3.xml``
  (STOMP 61613/61713/61813, data under data/node1..3 of a temp working directory,
  ``ARTEMIS_CLUSTER_PASSWORD`` set), when those files exist.
* ``artemis``: Apache Artemis via ``bench/peers/artemis.sh`` (one node; three-node cluster).
* ``activemq``: ActiveMQ Classic via ``bench/peers/activemq.sh`` (one node only).

Peers are installed on first use (network, minutes), cached under ~/.cache/artemis-py-bench.
Every run's JSON report (and PNG plot with ``--plots DIR``) is kept under ``--results``.

Scenario 3 runs at a stepped rate (bench/stepped.py, issue 29): ``perf --rate R`` steps
until end-to-end p99 passes ``--p99-bound`` or the consumers fall behind; the table gives
the highest rate each target sustained (``--scenario3 flat``: flat out, as before). After
the main tables: CPU per message (artemis-py's event-loop thread, the serial cost, and its
other threads; each node; the load generator), scenario 3's steps, and the Amdahl model
(bench/model.py), labelled as a model.

Scenario 7 (issue 30) is scenario 2's load with priorities 0-9 and 64 message groups;
``perf`` checks each group goes to one consumer, in order, and a table (bench/features.py)
gives what it found and the latency per priority.

``--tls`` (issue 18, the cost of TLS): each target runs each scenario twice, plain and with
TLS on every acceptor and connector (clients and cluster links; server certificates only,
no client certificates), from key stores made by :mod:`artemis_py.transport.certificates`
under the cache's ``tls/``; the load generator speaks TLS with the same trust store. A last
table gives TLS / plain per target and artemis-py TLS / Artemis TLS. Scenarios default to
2 and 5 with ``--tls``; ActiveMQ Classic is not run.

``--metrics`` (issue 19, the cost of counting): artemis-py only, every node with its
management web server on (``run --web``, 127.0.0.1:8161, +100 per cluster node). Each
scenario runs ``--rounds`` times unscraped and scraped (a thread GETs every node's
``/metrics`` once a second), alternating (A B B A ...) on the same nodes, so drift on a
shared machine hits both alike. The table gives the medians, scraped / unscraped (the issue
asks >= 0.97), node CPU per message, and the scrapes' count, time and size. Scenarios
default to 1, 2 and 3.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import features  # bench/features.py: scenario 7's groups and priorities (issue 30)
import model  # bench/model.py: the Amdahl model of issue 29
import stepped  # bench/stepped.py: scenario 3 at a stepped rate

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / "bench" / "peers"
CACHE = Path(
    os.environ.get("BENCH_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "artemis-py-bench"
)
# Every port moves by --port-shift (BENCH_PORT_SHIFT for the peer scripts) when the usual
# ones are taken on a shared machine; set in main().
SHIFT = 0
STOMP_PORTS = (61613, 61713, 61813)
CORE_PORTS = (61616, 61716, 61816)
WEB_PORTS = (8161, 8261, 8361)  # --metrics: each node's management web server


def single_urls() -> list[str]:
    return [f"tcp://127.0.0.1:{STOMP_PORTS[0] + SHIFT}"]


def cluster_urls() -> list[str]:
    return [f"tcp://127.0.0.1:{port + SHIFT}" for port in STOMP_PORTS]


CLUSTER_CONFIGS = [ROOT / "etc" / "cluster" / "symmetric" / f"node{i}.xml" for i in (1, 2, 3)]
TARGETS = ("artemis-py", "artemis", "activemq")
TLS = "+tls"  # suffix of a target's name in its TLS runs ("artemis-py+tls")


@dataclass(frozen=True)
class Scenario:
    number: int
    title: str
    cluster: bool
    options: str  # artemis-py perf options; {node1} and {nodes} are filled in per target
    metric: str  # the rate the ratio compares

    def args(self, urls: list[str], tls: bool = False) -> list[str]:
        node1, nodes = client_urls(urls[:1], tls), client_urls(urls, tls)
        return [a.format(node1=node1, nodes=nodes) for a in self.options.split()]


SCENARIOS = [
    Scenario(
        1,
        "1 node, persistent, 1 producer awaiting each receipt",
        False,
        "--url {node1} --producers 1 --consumers 1 --persistent --max-pending 1",
        "receipted",
    ),
    Scenario(
        2,
        "1 node, persistent, 16 producers, window of 8 receipts each",
        False,
        "--url {node1} --producers 16 --consumers 4 --persistent --max-pending 8",
        "received",
    ),
    Scenario(
        3,
        "1 node, non-persistent, pipelined (no receipts)",
        False,
        "--url {node1} --producers 4 --consumers 4 --no-persistent --no-receipts",
        "received",
    ),
    Scenario(
        4,
        "3-node cluster, ON_DEMAND, producers on node 1, consumers on all",
        True,
        "--producer-url {node1} --consumer-url {nodes} --producers 4 --consumers 3 "
        "--persistent --max-pending 8",
        "received",
    ),
    Scenario(
        5,
        "3-node cluster, producers and consumers on every node",
        True,
        "--url {nodes} --producers 6 --consumers 6 --persistent --max-pending 8",
        "received",
    ),
    Scenario(
        6,
        "1 node, persistent, paging (max-size-bytes 1 MiB), producers ahead of consumers",
        False,
        "--url {node1} --producers 16 --consumers 1 --persistent --max-pending 8 "
        "--ack-mode client-individual",
        "received",
    ),
    Scenario(
        7,
        "1 node, persistent, 16 producers, window of 8, priorities 0-9 and 64 groups",
        False,
        "--url {node1} --producers 16 --consumers 4 --persistent --max-pending 8 "
        "--priorities 0-9 --groups 64",
        "received",
    ),
]


# Scenario 6's address pages all the time: its memory limit is far below the backlog the
# producers build ahead of the single consumer. The same element goes into every target's
# broker.xml (bench/peers/artemis.sh inserts the same block into Apache Artemis's).
PAGING_SETTING = """<address-setting match="bench6">
            <max-size-bytes>1MiB</max-size-bytes>
            <page-size-bytes>1MiB</page-size-bytes>
            <address-full-policy>PAGE</address-full-policy>
         </address-setting>
      </address-settings>"""


def with_paging_setting(broker_xml: str) -> str:
    if "</address-settings>" not in broker_xml:
        raise RuntimeError("the broker.xml has no <address-settings> to add scenario 6's to")
    return broker_xml.replace("</address-settings>", PAGING_SETTING, 1)


def log(text: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def wait_ports(ports: list[int], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not all(port_open(p) for p in ports):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: STOMP ports {ports} not open after {timeout:g} s")
        time.sleep(0.2)


def ports_of(urls: list[str]) -> list[int]:
    return [int(u.rsplit(":", 1)[1]) for u in urls]


def check_free(urls: list[str]) -> None:
    busy = [p for p in ports_of(urls) if port_open(p)]
    if busy:
        raise RuntimeError(f"ports {busy} are in use by something else; stop it first")


def listening_pids(ports: list[int]) -> list[int]:
    """PIDs listening on ``ports`` (from ``ss``), to read the nodes' CPU time."""
    try:
        text = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    pids: set[int] = set()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 6 or not any(fields[3].endswith(f":{p}") for p in ports):
            continue
        for part in fields[5].split("pid=")[1:]:
            pids.add(int(part.split(",")[0]))
    return sorted(pids)


# -- TLS (--tls) -------------------------------------------------------------------------------

TLS_DIR = CACHE / "tls"
# A benchmark's stores on a benchmark machine: the password only has to be the same on both
# sides, and the peer script writes it into Apache Artemis's broker.xml.
TLS_PASSWORD = "bench-tls-secret"
TLS_NODES = ("single", "node1", "node2", "node3")
_TRANSPORT = re.compile(r"(<(acceptor|connector) name=\"([^\"]*)\">)([^<]*)(</\2>)")


def make_tls_files() -> None:
    """One CA and a key store per node name (the same paths every run, so the TLS
    instances of Apache Artemis made by an earlier run keep naming the right files)."""
    from artemis_py.transport.certificates import create_tls_files

    create_tls_files(TLS_DIR, TLS_NODES, ["localhost", "127.0.0.1"], TLS_PASSWORD)


def tls_transports(broker_xml: str, node: str) -> str:
    """Every acceptor with ``node``'s key store, every connector trusting the CA: what
    bench/peers/artemis.sh does to Apache Artemis's broker.xml, with sed."""

    def rewrite(match: re.Match[str]) -> str:
        url = match.group(4)
        if match.group(2) == "acceptor":
            params = (
                f"sslEnabled=true;keyStorePath={TLS_DIR / f'{node}-keystore.p12'};"
                f"keyStorePassword={TLS_PASSWORD}"
            )
        else:
            params = (
                f"sslEnabled=true;trustStorePath={TLS_DIR / 'truststore.p12'};"
                f"trustStorePassword={TLS_PASSWORD}"
            )
        url += (";" if "?" in url else "?") + params
        return match.group(1) + url + match.group(5)

    return _TRANSPORT.sub(rewrite, broker_xml)


def client_urls(urls: list[str], tls: bool) -> str:
    """The load generator's ``--url`` value for ``urls`` (one node or the cluster's).

    With TLS it is one cluster URL carrying the trust store, as Artemis clients write it;
    ``useTopologyForLoadBalancing=false`` keeps the connections on the nodes listed,
    spread round-robin like a plain list (perf hands out a plain list's nodes in turn)."""
    if not tls:
        return ",".join(urls)
    query = (
        f"sslEnabled=true&trustStorePath={TLS_DIR / 'truststore.p12'}"
        f"&trustStorePassword={TLS_PASSWORD}&useTopologyForLoadBalancing=false"
    )
    nodes = urls[0] if len(urls) == 1 else f"({','.join(urls)})"
    return f"{nodes}?{query}"


# -- targets -----------------------------------------------------------------------------------


def artemis_py_command() -> list[str]:
    script = shutil.which("artemis-py")
    if script:
        return [script]
    return [sys.executable, "-c", "import sys; from artemis_py.cli import main; sys.exit(main())"]


@contextlib.contextmanager
def artemis_py_nodes(
    cluster: bool, workdir: Path, tls: bool, web: bool = False
) -> Iterator[list[str]]:
    """Start one artemis-py node (etc/broker.xml) or the three cluster nodes; ``web``: each
    with its management web server on (WEB_PORTS)."""
    env = dict(os.environ, STOMP_PORT=str(61613 + SHIFT), CORE_PORT=str(61616 + SHIFT))
    env.pop("ARTEMIS_DATA", None)
    processes: list[subprocess.Popen[bytes]] = []
    if cluster:
        env.setdefault("ARTEMIS_CLUSTER_PASSWORD", "bench-cluster-secret")
        cwd, urls = workdir / "cluster", cluster_urls()
        cwd.mkdir(parents=True)
        configs = []
        for path in CLUSTER_CONFIGS:  # copied, with the ports moved by --port-shift
            text = path.read_text()
            for port in (*STOMP_PORTS, *CORE_PORTS):
                text = text.replace(f":{port}<", f":{port + SHIFT}<").replace(
                    f":{port}?", f":{port + SHIFT}?"
                )
            if tls:
                text = tls_transports(text, path.stem)
            configs.append(cwd / path.name)
            configs[-1].write_text(text)
    else:
        cwd = workdir / "single"
        (cwd / "etc").mkdir(parents=True)
        text = with_paging_setting((ROOT / "etc" / "broker.xml").read_text())
        if tls:
            text = tls_transports(text, "single")
        (cwd / "etc" / "broker.xml").write_text(text)
        configs, urls = [cwd / "etc" / "broker.xml"], single_urls()
    check_free(urls)
    try:
        for i, config in enumerate(configs):
            logfile = open(cwd / f"node{i + 1}.log", "ab")  # noqa: SIM115 - closed with the node
            flags = ["--web", web_urls()[i]] if web else []
            processes.append(
                subprocess.Popen(
                    [*artemis_py_command(), "run", str(config), *flags],
                    cwd=cwd,
                    env=env,
                    stdout=logfile,
                    stderr=logfile,
                    stdin=subprocess.DEVNULL,
                )
            )
        wait_ports(ports_of(urls), 60, "artemis-py")
        if cluster:
            time.sleep(3)  # let the cluster connections form
        yield urls
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.contextmanager
def peer(script: str, layout: str | None, tls: bool = False) -> Iterator[list[str]]:
    urls = cluster_urls() if layout == "cluster" else single_urls()
    extra = [layout] if layout else []
    check_free(urls)
    env = dict(os.environ, BENCH_PORT_SHIFT=str(SHIFT))
    if tls:  # TLS instances of their own (artemis.sh reads these)
        env.update(BENCH_TLS_DIR=str(TLS_DIR), BENCH_TLS_PASSWORD=TLS_PASSWORD)
    try:
        subprocess.run([str(PEERS / script), "start", *extra], check=True, env=env)
        yield urls
    finally:
        subprocess.run([str(PEERS / script), "stop", *extra], check=False, env=env)


def target_nodes(
    target: str, cluster: bool, workdir: Path
) -> contextlib.AbstractContextManager[list[str]]:
    tls = target.endswith(TLS)
    base = target.removesuffix(TLS)
    if base == "artemis-py":
        return artemis_py_nodes(cluster, workdir, tls)
    if base == "artemis":
        return peer("artemis.sh", "cluster" if cluster else "single", tls)
    return peer("activemq.sh", None)


def available(target: str, scenario: Scenario) -> str | None:
    """None if ``target`` can run ``scenario``, else why not."""
    target = target.removesuffix(TLS)
    if scenario.number == 6 and target == "activemq":
        return "not run (ActiveMQ Classic limits memory per destination differently)"
    if scenario.number == 7 and target == "activemq":
        return "not run (ActiveMQ Classic honours priorities only with a destination policy)"
    if not scenario.cluster:
        return None
    if target == "activemq":
        return "not run (ActiveMQ Classic has no symmetric cluster in this benchmark)"
    if target == "artemis-py" and not all(p.exists() for p in CLUSTER_CONFIGS):
        return "not available (no etc/cluster/symmetric/node1..3.xml: clustering not merged yet)"
    return None


# -- running -----------------------------------------------------------------------------------


def run_perf(
    target: str,
    scenario: Scenario,
    urls: list[str],
    args: argparse.Namespace,
    *,
    stem: str | None = None,
    extra: tuple[str, ...] = (),
) -> dict[str, Any]:
    """One ``artemis-py perf`` run; ``extra`` options come last and win (argparse keeps the
    last of a repeated option)."""
    stem = stem or f"s{scenario.number}-{target}"
    json_path = args.results / f"{stem}.json"
    command = [
        *artemis_py_command(), "perf", *scenario.args(urls, target.endswith(TLS)),
        "--destination", f"queue://bench{scenario.number}",
        "--duration", str(args.duration), "--warmup", str(args.warmup),
        "--processes", str(args.processes), "--drain-timeout", "5",
        "--quiet", "--json", str(json_path), *extra,
    ]  # fmt: skip
    if args.plots:
        command += [
            "--plot",
            str(args.plots / f"{stem}.png"),
            "--title",
            f"{target}: {scenario.title}",
        ]
    pids = listening_pids(ports_of(urls))
    if pids:
        command += ["--monitor-pid", ",".join(map(str, pids))]
    result = subprocess.run(command, capture_output=True, text=True)
    print(result.stdout, end="", flush=True)
    if result.returncode not in (0, 1) or not json_path.exists():
        raise RuntimeError(f"artemis-py perf failed ({result.returncode}):\n{result.stderr}")
    report = json.loads(json_path.read_text())
    print(f"  load average {os.getloadavg()[0]:.2f}\n", flush=True)
    return report


def run_stepped(
    target: str,
    scenario: Scenario,
    urls: list[str],
    args: argparse.Namespace,
    stepped_runs: dict[str, dict[str, Any]],
) -> dict[str, Any] | None:
    """Scenario 3 at a stepped rate (bench/stepped.py): the report of the highest step that
    passed (saved as the scenario's report, with the steps under "stepped"), or None."""

    def run_step(number: int, rate: float) -> dict[str, Any]:
        log(f"scenario {scenario.number} on {target}, step {number}: {rate:,.0f} msg/s")
        extra = (
            "--rate", f"{rate:.0f}", "--destination", f"queue://bench{scenario.number}-step{number}",
            "--duration", str(args.step_duration), "--warmup", str(args.step_warmup),
            "--drain-timeout", "20",
        )  # fmt: skip
        return run_perf(
            target,
            scenario,
            urls,
            args,
            stem=f"s{scenario.number}-{target}-step{number}",
            extra=extra,
        )

    steps, best = stepped.search(
        run_step,
        start=args.step_start,
        factor=args.step_factor,
        refine=args.step_refine,
        max_steps=args.step_max,
        bound_ms=args.p99_bound,
        tolerance=args.step_tolerance,
        log=log,
    )
    sustained = max((s.offered for s in steps if s.failure is None), default=None)
    info = {"bound_ms": args.p99_bound, "sustained": sustained,
            "steps": [s.as_json() for s in steps]}  # fmt: skip
    stepped_runs[target] = info
    if best is None:
        return None
    best = dict(best, stepped=info)
    (args.results / f"s{scenario.number}-{target}.json").write_text(json.dumps(best, indent=2))
    return best


def rate_of(report: dict[str, Any], scenario: Scenario) -> float:
    """The rate a scenario compares: the sustained (offered) rate of a stepped run, else
    the measured rate of ``scenario.metric``."""
    if report.get("stepped"):
        return float(report["stepped"]["sustained"])
    return float(report["rates"][scenario.metric])


def metric_label(scenario: Scenario, results: dict[tuple[int, str], dict[str, Any] | None]) -> str:
    for (number, _), report in results.items():
        if number == scenario.number and report and report.get("stepped"):
            bound = report["stepped"]["bound_ms"]
            return f"highest rate sustained, end-to-end p99 <= {bound:g} ms"
    return scenario.metric


def fmt_rate(report: dict[str, Any] | None, scenario: Scenario) -> str:
    if report is None:
        return "–"
    rate = rate_of(report, scenario)
    flag = "" if report["totals"]["complete"] and not report["errors"]["count"] else " (!)"
    return f"{rate:,.0f}{flag}"


def fmt_latency(report: dict[str, Any] | None) -> str:
    if report is None:
        return "–"
    lat = report["latency_us"]
    key = "send_to_receipt" if lat["send_to_receipt"]["count"] else "end_to_end"
    s = lat[key]
    if not s["count"]:
        return "–"
    return f"{s['p50'] / 1000:.2f} / {s['p99'] / 1000:.1f}"


def table(results: dict[tuple[int, str], dict[str, Any] | None], scenarios: list[Scenario],
          targets: list[str]) -> str:  # fmt: skip
    peers = [t for t in targets if t != "artemis-py"]
    head = ["scenario", "metric"]
    head += [f"{t} msg/s" for t in targets]
    head += [f"artemis-py / {p}" for p in peers if "artemis-py" in targets]
    head += [f"{t} p50 / p99 ms" for t in targets]
    ours_too = "artemis-py" in targets
    if ours_too:
        head.append("artemis-py node / loop µs/msg")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in scenarios:
        row = [f"{s.number}. {s.title}", metric_label(s, results)]
        row += [fmt_rate(results.get((s.number, t)), s) for t in targets]
        for p in peers if "artemis-py" in targets else []:
            row.append(_ratio(results, s, "artemis-py", p))
        row += [fmt_latency(results.get((s.number, t))) for t in targets]
        if ours_too:
            ours = results.get((s.number, "artemis-py"))
            row.append(f"{fmt_node_cpu(ours, s)} / {fmt_node_cpu(ours, s, 'loop_cores')}")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def _ratio(
    results: dict[tuple[int, str], dict[str, Any] | None], s: Scenario, top: str, bottom: str
) -> str:
    ours, theirs = results.get((s.number, top)), results.get((s.number, bottom))
    if ours and theirs and rate_of(theirs, s):
        return f"**{rate_of(ours, s) / rate_of(theirs, s):.2f}**"
    return "–"


def tls_table(
    results: dict[tuple[int, str], dict[str, Any] | None],
    scenarios: list[Scenario],
    targets: list[str],
) -> str:
    """--tls: msg/s plain and with TLS per target, TLS / plain, artemis-py TLS / Artemis TLS,
    and the latencies."""
    bases = [t for t in targets if not t.endswith(TLS)]
    head = ["scenario"]
    for t in bases:
        head += [f"{t} plain msg/s", f"{t} TLS msg/s", f"{t} TLS / plain"]
    both = "artemis-py" in bases and "artemis" in bases
    if both:
        head.append("artemis-py TLS / Artemis TLS")
    head += [f"{t} p50 / p99 ms" for t in targets]
    head += [f"{t} node µs/msg" for t in targets]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in scenarios:
        row = [f"{s.number}. {s.title}"]
        for t in bases:
            row += [fmt_rate(results.get((s.number, t)), s)]
            row += [fmt_rate(results.get((s.number, t + TLS)), s)]
            row += [_ratio(results, s, t + TLS, t)]
        if both:
            row.append(_ratio(results, s, "artemis-py" + TLS, "artemis" + TLS))
        row += [fmt_latency(results.get((s.number, t))) for t in targets]
        row += [fmt_node_cpu(results.get((s.number, t)), s) for t in targets]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def fmt_node_cpu(report: dict[str, Any] | None, scenario: Scenario, key: str = "cores") -> str:
    """Node CPU per message (all nodes, µs): steadier than msg/s on a shared machine.
    ``key`` "loop_cores": the nodes' main threads alone (artemis-py's event loops), the
    serial cost that no number of cores spreads."""
    if report is None:
        return "–"
    cores = report.get("monitored", {}).get(key)
    rate = report["rates"][scenario.metric]
    return "?" if cores is None or not rate else f"{cores / rate * 1e6:.0f}"


def per_message(report: dict[str, Any] | None, scenario: Scenario, cores: float | None) -> str:
    """``cores`` used in the window as CPU µs per message of the scenario's measured rate."""
    if report is None:
        return "–"
    rate = report["rates"][scenario.metric]
    return "?" if cores is None or not rate else f"{cores / rate * 1e6:.1f}"


def cost_table(
    results: dict[tuple[int, str], dict[str, Any] | None],
    scenarios: list[Scenario],
    targets: list[str],
) -> str:
    """CPU µs per message: artemis-py's event-loop thread (the serial cost), its other
    threads, and the load generator; the peers' node and generator."""
    head = ["scenario"]
    for t in targets:
        if t.removesuffix(TLS) == "artemis-py":
            head += [f"{t}: loop thread µs/msg (serial)", f"{t}: other threads µs/msg"]
        head += [f"{t}: node µs/msg", f"{t}: generator µs/msg"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in scenarios:
        row = [str(s.number)]
        for t in targets:
            report = results.get((s.number, t))
            monitored = (report or {}).get("monitored") or {}
            cores, loop = monitored.get("cores"), monitored.get("loop_cores")
            if t.removesuffix(TLS) == "artemis-py":
                other = None if cores is None or loop is None else cores - loop
                row += [per_message(report, s, loop), per_message(report, s, other)]
            gen = report["generator"]["cores_used"] if report else None
            row += [per_message(report, s, cores), per_message(report, s, gen)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def serial_cost_line(results: dict[tuple[int, str], dict[str, Any] | None]) -> str | None:
    """Issue 29's headline: artemis-py's loop-thread CPU per message in scenario 2."""
    report = results.get((2, "artemis-py"))
    s2 = next(s for s in SCENARIOS if s.number == 2)
    loop = ((report or {}).get("monitored") or {}).get("loop_cores")
    if report is None or loop is None:
        return None
    return (
        f"**Serial cost** (scenario 2, artemis-py event-loop thread CPU per message): "
        f"**{per_message(report, s2, loop)} µs** (issue 29 asks at most 20)"
    )


def cpu_table(
    results: dict[tuple[int, str], dict[str, Any] | None],
    scenarios: list[Scenario],
    targets: list[str],
) -> str:
    """Cores used in the window: the load generator (all its processes) / the node(s)."""
    head = ["scenario", *[f"{t}: generator / node cores" for t in targets]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in scenarios:
        row = [str(s.number)]
        for t in targets:
            report = results.get((s.number, t))
            if report is None:
                row.append("–")
                continue
            node = report.get("monitored", {}).get("cores")
            gen = report["generator"]
            row.append(
                f"{gen['cores_used']:.2f} (max {gen['busiest_process_cores']:.2f}/process) / "
                + ("?" if node is None else f"{node:.2f}")
            )
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def summary_plot(
    results: dict[tuple[int, str], dict[str, Any] | None],
    scenarios: list[Scenario],
    targets: list[str],
    path: Path,
) -> None:
    """One small PNG: msg/s per scenario and target (left), p50/p99 latency (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.2), dpi=80)
    width = 0.8 / len(targets)
    x = range(len(scenarios))
    for i, t in enumerate(targets):
        rates, p50, p99 = [], [], []
        for s in scenarios:
            report = results.get((s.number, t))
            rates.append(report["rates"][s.metric] if report else 0)
            lat = report["latency_us"] if report else None
            key = "send_to_receipt"
            if lat and not lat[key]["count"]:
                key = "end_to_end"
            p50.append((lat[key]["p50"] or 0) / 1000 if lat else 0)
            p99.append((lat[key]["p99"] or 0) / 1000 if lat else 0)
        offsets = [j - 0.4 + width * (i + 0.5) for j in x]
        left.bar(offsets, rates, width, label=t)
        right.bar(offsets, p99, width, label=f"{t} p99", alpha=0.45)
        right.bar(offsets, p50, width, label=f"{t} p50", color=f"C{i}")
    labels = [str(s.number) for s in scenarios]
    left.set_xticks(list(x), labels)
    left.set_xlabel("scenario")
    left.set_ylabel("msg/s")
    left.legend(fontsize=7)
    left.set_title("throughput (scenario 1: receipted, others: received)", fontsize=9)
    right.set_xticks(list(x), labels)
    right.set_xlabel("scenario")
    right.set_yscale("log")
    right.set_ylim(top=right.get_ylim()[1] * 30)  # room for the legend above the bars
    right.set_ylabel("ms")
    right.legend(fontsize=6, ncol=3, loc="upper center")
    right.set_title("latency p50 (solid) / p99 (light)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# -- the cost of metrics (--metrics) -------------------------------------------------------------

SCRAPED = "+scraped"  # suffix of the artemis-py runs with /metrics scraped every second


def web_urls() -> list[str]:
    return [f"http://127.0.0.1:{port + SHIFT}" for port in WEB_PORTS]


class Scraper:
    """GETs every node's /metrics once a second (as Prometheus would) in a thread while
    entered (again and again), and keeps each scrape's duration and size."""

    def __init__(self, urls: list[str], interval: float = 1.0) -> None:
        self.urls = [f"{url}/metrics" for url in urls]
        self.interval = interval
        self.durations: list[float] = []
        self.sizes: list[int] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Scraper:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            for url in self.urls:
                began = time.monotonic()
                try:
                    with urllib.request.urlopen(url, timeout=5) as response:
                        self.sizes.append(len(response.read()))
                except OSError as exc:
                    self.failures.append(f"{url}: {exc}")
                    continue
                self.durations.append(time.monotonic() - began)
            next_at += self.interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def summary(self) -> str:
        if not self.durations:
            return f"no scrape succeeded ({len(self.failures)} failed)"
        ms = sorted(d * 1000 for d in self.durations)
        failed = f", {len(self.failures)} failed" if self.failures else ""
        return (
            f"{len(ms)} scrapes{failed}, {ms[len(ms) // 2]:.1f} ms median / {ms[-1]:.1f} ms max, "
            f"{max(self.sizes) / 1024:.1f} KiB"
        )


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of ``pids`` so far (from /proc)."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def scrape_cost(urls: list[str], web: str, count: int = 200) -> str:
    """Node CPU per /metrics request of the idle node serving ``web`` (and, to compare,
    per request of a small JSON endpoint): the cost of a scrape without the noise of a
    loaded machine."""
    pids = listening_pids(ports_of(urls[:1]))
    costs = []
    for path in ("/metrics", "/api/node"):
        urllib.request.urlopen(web + path, timeout=10).read()
        before = cpu_seconds(pids)
        for _ in range(count):
            urllib.request.urlopen(web + path, timeout=10).read()
        costs.append((cpu_seconds(pids) - before) / count * 1000)
    return f"{costs[0]:.2f} ms of node CPU per idle scrape (GET /api/node: {costs[1]:.2f} ms)"


def run_metrics(
    scenarios: list[Scenario], args: argparse.Namespace, workdir: Path, notes: list[str]
) -> dict[int, tuple[list[dict[str, Any]], list[dict[str, Any]], str]]:
    """Each scenario ``args.rounds`` times unscraped and scraped, alternating on the same
    nodes: {scenario: (unscraped reports, scraped reports, the scrapes' summary)}; the
    idle scrape cost of each layout goes into ``notes``."""
    measured: dict[int, tuple[list[dict[str, Any]], list[dict[str, Any]], str]] = {}
    for cluster in (False, True):
        group = [s for s in scenarios if s.cluster == cluster]
        if not group or (cluster and available("artemis-py", group[0])):
            continue
        log(f"starting artemis-py ({'3-node cluster' if cluster else '1 node'}, web on)")
        with artemis_py_nodes(cluster, workdir / f"metrics-{cluster}", False, web=True) as urls:
            webs = web_urls()[: len(urls)]
            notes.append(
                f"{'3-node cluster' if cluster else '1 node'}: {scrape_cost(urls, webs[0])}"
            )
            log(notes[-1])
            for s in group:
                plain: list[dict[str, Any]] = []
                scraped: list[dict[str, Any]] = []
                scraper = Scraper(webs)
                for r in range(args.rounds):
                    order = (False, True) if r % 2 == 0 else (True, False)  # A B B A ...
                    for scrape in order:
                        name = f"artemis-py{SCRAPED if scrape else ''}-r{r + 1}"
                        log(f"scenario {s.number}, round {r + 1}: {name}")
                        if scrape:
                            with scraper:
                                scraped.append(run_perf(name, s, urls, args))
                        else:
                            plain.append(run_perf(name, s, urls, args))
                measured[s.number] = (plain, scraped, scraper.summary())
        log("stopped artemis-py")
    return measured


def metrics_table(
    measured: dict[int, tuple[list[dict[str, Any]], list[dict[str, Any]], str]],
    scenarios: list[Scenario],
) -> str:
    head = [
        "scenario", "unscraped msg/s (median)", "scraped msg/s (median)",
        "scraped / unscraped", "per round (median)", "node µs/msg unscraped / scraped",
        "node µs/msg ratio",
        "rounds", "scrapes",
    ]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in scenarios:
        if s.number not in measured:
            continue
        plain, scraped, scrapes = measured[s.number]

        def median(reports: list[dict[str, Any]], s: Scenario = s) -> float:
            return statistics.median(r["rates"][s.metric] for r in reports)

        def cpu(reports: list[dict[str, Any]], s: Scenario = s) -> str:
            return "/".join(fmt_node_cpu(r, s) for r in reports)

        def cpu_median(reports: list[dict[str, Any]], s: Scenario = s) -> float | None:
            values = [fmt_node_cpu(r, s) for r in reports]
            return statistics.median(map(float, values)) if "?" not in values else None

        a, b = median(plain), median(scraped)
        # Each round's two runs are next to each other: their ratio cancels slow drift.
        rounds = [
            q["rates"][s.metric] / p["rates"][s.metric]
            for p, q in zip(plain, scraped, strict=True)
            if p["rates"][s.metric]
        ]
        per_round = f"{statistics.median(rounds):.3f}" if rounds else "–"
        ca, cb = cpu_median(plain), cpu_median(scraped)
        cpu_ratio = f"{cb / ca:.3f}" if ca and cb else "–"
        ratio = f"**{b / a:.3f}**" if a else "–"
        flag = "" if all(r["totals"]["complete"] and not r["errors"]["count"]
                         for r in plain + scraped) else " (!)"  # fmt: skip
        row = [
            f"{s.number}. {s.title}", f"{a:,.0f}{flag}", f"{b:,.0f}", ratio, per_round,
            f"{cpu(plain)} / {cpu(scraped)}", cpu_ratio, str(len(plain)), scrapes,
        ]  # fmt: skip
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default=",".join(TARGETS), help="comma-separated")
    parser.add_argument(
        "--scenarios", default=None, help="comma-separated numbers (default 1-7; --tls: 2,5)"
    )
    parser.add_argument(
        "--tls",
        action="store_true",
        help="run each target plain and with TLS on every acceptor and connector, and print "
        "the cost of TLS (ActiveMQ Classic is left out)",
    )
    parser.add_argument(
        "--metrics",
        action="store_true",
        help="artemis-py only, web server on: each scenario unscraped and with /metrics "
        "scraped every second, alternating --rounds times; prints scraped / unscraped",
    )
    parser.add_argument("--rounds", type=int, default=3, help="--metrics: runs per variant")
    parser.add_argument("--duration", type=float, default=8.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=4.0, help="seconds (JVMs: JIT)")
    parser.add_argument("--processes", type=int, default=2, help="load-generator processes")
    parser.add_argument("--results", type=Path, default=None, help="directory for JSON reports")
    stepped.add_arguments(parser)
    parser.add_argument("--plots", type=Path, default=None, help="directory for PNG plots")
    parser.add_argument(
        "--port-shift",
        type=int,
        default=int(os.environ.get("BENCH_PORT_SHIFT", "0")),
        help="add this to every port (STOMP 61613+N, ...) if the usual ones are taken",
    )
    args = parser.parse_args()
    global SHIFT
    SHIFT = args.port_shift
    targets = [t for t in args.targets.split(",") if t]
    unknown = set(targets) - set(TARGETS)
    if unknown:
        parser.error(f"unknown targets {sorted(unknown)}; choose from {TARGETS}")
    if args.tls:
        targets = [v for t in targets if t != "activemq" for v in (t, t + TLS)]
        make_tls_files()
    if args.scenarios is None:
        args.scenarios = "2,5" if args.tls else "1,2,3" if args.metrics else "1,2,3,4,5,6,7"
    wanted = {int(n) for n in args.scenarios.split(",") if n}
    scenarios = [s for s in SCENARIOS if s.number in wanted]
    if args.results is None:
        args.results = CACHE / "results" / time.strftime("%Y%m%d-%H%M%S")
    args.results.mkdir(parents=True, exist_ok=True)
    if args.plots:
        args.plots.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    load_before = os.getloadavg()
    results: dict[tuple[int, str], dict[str, Any] | None] = {}
    stepped_runs: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    if args.metrics:
        with tempfile.TemporaryDirectory(prefix="artemis-py-bench-") as tmp:
            measured = run_metrics(scenarios, args, Path(tmp), notes)
        load_after = os.getloadavg()
        print()
        print(metrics_table(measured, scenarios))
        print()
        for note in notes:
            print(f"- {note}")
        print(
            f"- {os.cpu_count()} CPUs; load average {load_before[0]:.2f} before, "
            f"{load_after[0]:.2f} after; {time.monotonic() - began:.0f} s in all; "
            f"{args.duration:g} s measured after {args.warmup:g} s warm-up per run, "
            f"{args.rounds} rounds; reports in {args.results}"
        )
        return 0
    with tempfile.TemporaryDirectory(prefix="artemis-py-bench-") as tmp:
        for target in targets:
            for cluster in (False, True):
                group = [s for s in scenarios if s.cluster == cluster]
                runnable = []
                for s in group:
                    why = available(target, s)
                    if why:
                        notes.append(f"scenario {s.number}, {target}: {why}")
                        log(notes[-1])
                        results[(s.number, target)] = None
                    else:
                        runnable.append(s)
                if not runnable:
                    continue
                layout = "3-node cluster" if cluster else "1 node"
                log(f"starting {target} ({layout})")
                with target_nodes(target, cluster, Path(tmp) / target) as urls:
                    for s in runnable:
                        log(f"scenario {s.number} on {target}: {s.title}")
                        if s.number == 3 and args.scenario3 == "stepped":
                            report = run_stepped(target, s, urls, args, stepped_runs)
                            if report is None:
                                notes.append(f"scenario 3, {target}: no step passed")
                        else:
                            report = run_perf(target, s, urls, args)
                        results[(s.number, target)] = report
                log(f"stopped {target} ({layout})")
    load_after = os.getloadavg()
    print()
    if args.tls:
        print(tls_table(results, scenarios, targets))
    else:
        print(table(results, scenarios, targets))
    print()
    print(cpu_table(results, scenarios, targets))
    print()
    print(cost_table(results, scenarios, targets))
    print()
    checked = features.table(results, targets)
    if checked:
        print(checked)
        print()
    serial = serial_cost_line(results)
    if serial:
        print(f"- {serial}")
        print()
    if stepped_runs:
        print(stepped.steps_table(stepped_runs))
        print()
        for line in stepped.summary(stepped_runs):
            print(f"- {line}")
        print()
    if not args.tls:
        print("Model (bench/model.py; per-node msg/s from the CPU per message above):")
        print()
        print(model.model_table(results, {s.number: s.metric for s in SCENARIOS}))
        print()
        print(f"- {model.ASSUMPTIONS}")
        print()
    if args.plots:
        summary_plot(results, scenarios, targets, args.plots / "summary.png")
    for note in notes:
        print(f"- {note}")
    print(
        f"- {os.cpu_count()} CPUs; load average {load_before[0]:.2f} before, "
        f"{load_after[0]:.2f} after; {time.monotonic() - began:.0f} s in all; "
        f"{args.duration:g} s measured after {args.warmup:g} s warm-up, "
        f"{args.processes} generator processes; reports in {args.results}"
    )
    print("- msg/s: receipted (scenario 1) or received messages per second in the window; "
          "p50 / p99: send-to-receipt latency, or end-to-end without receipts; "
          "(!) = errors or lost messages")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
