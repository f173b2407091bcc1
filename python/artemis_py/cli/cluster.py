"""``artemis-py cluster status``: the cluster as one node sees it; ``cluster stop``: stop a
node gracefully. Both authenticate with the cluster credentials, read from the node's
broker.xml or given as options; ``cluster status --url http://HOST:PORT`` asks the node's
management API instead, as a user with the manage permission (:mod:`.management`)."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Final

import trio

from artemis_py.cli import management
from artemis_py.cluster.status import fetch_status
from artemis_py.config import BrokerConfig, load_config
from artemis_py.config.defaults import CLUSTER_USER
from artemis_py.config.tls_params import TLS_PARAM_NAMES, TlsParams, read_tls_params
from artemis_py.config.urls import parse_transport_url
from artemis_py.exceptions import ConfigError
from artemis_py.protocol.cluster import CREDENTIALS_REJECTED, Purpose
from artemis_py.transport.link import LinkError, LinkRefused

DEFAULT_USER: Final = "cluster-admin"
"""The cluster user when neither ``--user`` nor a broker.xml names one: the cluster-user of
every sample configuration (``etc/``) and of docs/clustering.md, so the documented
``--url ... --cluster ... --password ...`` works against them. A node whose broker.xml has no
``<cluster-user>`` uses Artemis's default instead (:data:`CLUSTER_USER`)."""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "cluster", help="inspect a cluster", description="Inspect a running cluster."
    )
    sub = parser.add_subparsers(
        dest="cluster_command", metavar="COMMAND", required=True, help="status or stop"
    )
    status = sub.add_parser(
        "status",
        help="members, bridges and remote bindings as one node sees them",
        description="Print the cluster as one node sees it: members with node IDs and "
        "connectors, bridges and their store-and-forward depth, and remote bindings with "
        "consumer counts. Reads the cluster name and credentials from broker.xml, or takes "
        "them as options.",
    )
    _connection_arguments(status)
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.set_defaults(func=status_command)
    stop = sub.add_parser(
        "stop",
        help="stop a node gracefully (it scales down first if configured to)",
        description="Ask a node to stop, as SIGTERM would: with scale-down configured it "
        "moves every message to another node first; its log says where they went. "
        "Authenticates with the cluster credentials, read from broker.xml or given as "
        "options.",
    )
    _connection_arguments(stop)
    stop.set_defaults(func=stop_command)


def _connection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "config",
        nargs="?",
        type=Path,
        help="the node's broker.xml: where its cluster acceptor is, the cluster-connection "
        "name and the cluster credentials (the options below override it)",
    )
    parser.add_argument(
        "--url",
        help="the node's cluster acceptor, tcp://HOST:PORT (not its STOMP port; default: the "
        "broker.xml's connector for the node itself); for status also the node's management "
        "API, http://HOST:PORT, where --user/--password are a user with the manage permission",
    )
    parser.add_argument(
        "--cluster", help="the cluster-connection name (default: the broker.xml's first)"
    )
    parser.add_argument(
        "--user",
        help="the node's cluster-user (default: the broker.xml's, else "
        f"{DEFAULT_USER}, the user of the sample configurations; a broker.xml without "
        f"<cluster-user> means {CLUSTER_USER})",
    )
    parser.add_argument(
        "--password", help="the node's cluster-password (default: the broker.xml's)"
    )


def _rejected(user: str, source: str) -> str:
    return (
        f"the node rejected the cluster credentials of user {user!r} ({source}): give its "
        "cluster-user with --user and its cluster-password with --password (a broker.xml "
        f"without <cluster-user> means {CLUSTER_USER})"
    )


def _ask(args: argparse.Namespace, purpose: Purpose) -> dict[str, Any] | int:
    """The node's answer, or an exit status after printing why there is none."""
    url, cluster, user, password = args.url, args.cluster, args.user, args.password
    source = "given with --user"
    tls = TlsParams()
    if args.config is not None:
        loaded = _load(args.config, password)
        if isinstance(loaded, int):
            return loaded
        config, password = loaded
        if not config.cluster_connections:
            print(f"artemis-py: {args.config} has no cluster connection", file=sys.stderr)
            return 2
        named = {c.name: c for c in config.cluster_connections}
        if cluster is not None and cluster not in named:
            print(
                f"artemis-py: {args.config} has no cluster-connection named {cluster!r} "
                f"(it has {', '.join(map(repr, named))})",
                file=sys.stderr,
            )
            return 2
        cc = named[cluster] if cluster is not None else config.cluster_connections[0]
        connector = next(c for c in config.connectors if c.name == cc.connector_name)
        if url is None:
            url, tls = f"tcp://{connector.host}:{connector.port}", connector.tls
        cluster = cluster or cc.name
        if not user:
            user, source = config.cluster_user, f"the cluster-user of {args.config}"
        password = password if password is not None else config.cluster_password
    if url is None or cluster is None or password is None:
        print(
            "artemis-py: give the node's broker.xml, or --url, --cluster and --password",
            file=sys.stderr,
        )
        return 2
    if not user:
        user, source = DEFAULT_USER, "the default"
    try:
        parsed = parse_transport_url(url)
        host, port = parsed.hosts[0], parsed.port
        if parsed.params:  # --url tcp://h:p?sslEnabled=true;trustStorePath=... (docs/tls.md)
            tls = _url_tls(dict(parsed.params))
        return trio.run(
            lambda: fetch_status(
                host, port, cluster=cluster, user=user, password=password, purpose=purpose, tls=tls
            )
        )
    except LinkRefused as exc:
        reason = str(exc)
        if reason == CREDENTIALS_REJECTED:
            reason = _rejected(user, source)
        print(f"artemis-py: {reason}", file=sys.stderr)
        return 1
    except (LinkError, ValueError) as exc:
        print(f"artemis-py: {exc}", file=sys.stderr)
        return 1


_VARIABLE: Final = re.compile(r"\$\{\s*([^}:\s]*)\s*(:?)[^}]*\}")
_CLUSTER_PASSWORD: Final = re.compile(r"<cluster-password>(.*?)</cluster-password>", re.DOTALL)


def _load(path: Path, password: str | None) -> tuple[BrokerConfig, str | None] | int:
    """The broker.xml at ``path`` and the cluster password to use (``password`` if given,
    else the file's), or an exit status after printing why not.

    The samples take ``<cluster-password>`` from ``${ARTEMIS_CLUSTER_PASSWORD}``: in a
    terminal where the nodes' variable is not set, the password is ``--password`` or asked
    for, and only when every unset variable of the file is in ``<cluster-password>``.
    """
    try:
        return load_config(path), password
    except ConfigError as exc:
        error = exc
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = ""
    inside = [m.span(1) for m in _CLUSTER_PASSWORD.finditer(text)]
    unset = [m for m in _VARIABLE.finditer(text) if not m[2] and m[1] not in os.environ]
    if not unset or not all(any(a <= m.start() < b for a, b in inside) for m in unset):
        print(f"artemis-py: {error}", file=sys.stderr)
        return 2
    names = sorted({m[1] for m in unset})
    if password is None and sys.stdin.isatty():
        password = getpass.getpass(
            f"cluster-password of {path} ({', '.join(names)} is not set here): "
        )
    if password is None:
        print(
            f"artemis-py: {path} takes its <cluster-password> from {', '.join(names)}, which "
            "is not set here: export it as for the nodes, or give --password",
            file=sys.stderr,
        )
        return 2
    try:
        config = load_config(path, environ={**os.environ, **{n: "" for n in names}})
    except ConfigError:
        print(f"artemis-py: {error}", file=sys.stderr)
        return 2
    return config, password


def _url_tls(params: dict[str, str]) -> TlsParams:
    """The TLS parameters of ``--url`` (a connector's); anything else is refused."""
    unknown = sorted(set(params) - TLS_PARAM_NAMES)
    if unknown:
        raise ValueError(f"--url: unknown parameter(s) {', '.join(unknown)} (only TLS ones)")
    read = read_tls_params(params, "connector")
    if read.errors:
        raise ValueError(f"--url: {read.errors[0]}")
    return read.params


def status_command(args: argparse.Namespace) -> int:
    if args.url and args.url.startswith(("http://", "https://")):
        return management.cluster_status(args)
    data = _ask(args, "status")
    if isinstance(data, int):
        return data
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(render(data))
    return 0


def stop_command(args: argparse.Namespace) -> int:
    data = _ask(args, "stop")
    if isinstance(data, int):
        return data
    print(f"node {data['node_id']} at {data['connector']} is stopping")
    return 0


def _short(node_id: str) -> str:
    return node_id[:8]


def render(data: dict[str, Any]) -> str:
    lines = [
        f"node {data['node_id']} at {data['connector']}: cluster {data['cluster']}, "
        f"{data['message_load_balancing']}, max-hops {data['max_hops']}",
        "",
        f"members ({len(data['members'])}):",
    ]
    for m in data["members"]:
        if m["self"]:
            state = "this node"
        else:
            state = ("up" if m["up"] else "left") + (
                f", bridge {'connected' if m['bridge'] else 'down'}, "
                f"incoming link {'yes' if m['incoming'] else 'no'}"
            )
        lines.append(f"  {m['node_id']}  {m['connector'] or '(connector unknown)'}  {state}")
    lines += ["", "bridges (store-and-forward queues):"]
    for b in data["bridges"]:
        lines.append(
            f"  -> {_short(b['node_id'])}  {'connected' if b['connected'] else 'DISCONNECTED'}"
            f"  waiting {b['depth']}  in flight {b['in_flight']}  forwarded {b['forwarded']}"
        )
    if not data["bridges"]:
        lines.append("  none")
    bindings = sorted(data["remote_bindings"], key=lambda b: (b["address"], b["name"]))
    lines += ["", f"remote bindings ({len(bindings)}):"]
    for b in bindings:
        where = f"on {_short(b['origin'])}"
        if b["via"] != b["origin"]:
            where += f" via {_short(b['via'])}"
        filt = f"  filter {b['filter']!r}" if b["filter"] else ""
        lines.append(
            f"  {b['address']}  {b['routing_type']} queue {b['queue']} {where}"
            f" (distance {b['distance']})  consumers {b['consumers']}{filt}"
            + ("" if b["connected"] else "  [disconnected]")
        )
    for connector, why in data.get("given_up", {}).items():
        lines.append(f"\ngave up on {connector}: {why}")
    lines += _render_discovery(data.get("discovery"))
    scale_down = data.get("scale_down_discovery")
    if scale_down is not None and scale_down != data.get("discovery"):
        lines += _render_discovery(scale_down, " (scale-down)")
    return "\n".join(lines)


def _render_discovery(group: dict[str, Any] | None, use: str = "") -> list[str]:
    if group is None:
        return []
    members = group["members"]
    lines = [
        "",
        f"discovery group {group['name']}{use} on {group['endpoint']} "
        f"(refresh-timeout {group['refresh_timeout_ms']} ms): {len(members)} member(s) found",
    ]
    for m in members:
        lines.append(
            f"  {m['node_id'] or '(id not announced)'}  {m['connector']}"
            f"  last seen {m['last_seen_ms_ago']} ms ago"
        )
    return lines
