"""``artemis-py run [broker.xml]``: start a node and run it until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import ctypes
import gc
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from artemis_py.broker.authentication import Authenticator
from artemis_py.broker.authorization import Authorizer
from artemis_py.cluster.scale_down import ScaleDownReport
from artemis_py.config import BrokerConfig, default_config, load_config
from artemis_py.exceptions import ArtemisError, ConfigError, leaves
from artemis_py.ha import open_pair
from artemis_py.management.bootstrap import BOOTSTRAP_FILE, WebConfig, read_bootstrap, web_from_uri
from artemis_py.management.server import serve_management
from artemis_py.management.site import ManagementSite
from artemis_py.node import Node, journal_settings, open_broker

log = logging.getLogger("artemis_py.cli")

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

# glibc's mallopt parameter for its number of malloc arenas.
_M_ARENA_MAX = -8
# Allocations (net of frees) of the cyclic garbage collector's young generation before it
# runs; Python's default is 700. A node's messages, frames and references are acyclic and
# die by reference counting; at 700 the collector ran hundreds of times a second and kept
# re-scanning the messages in flight it had promoted (about a fifth of the event loop in
# benchmark scenario 3 with the data plane). 50,000 is above what a busy node holds in
# flight, so a collection runs when garbage accumulates.
GC_YOUNG_THRESHOLD = 50_000


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "run",
        help="run a node",
        description="Run a node from an Artemis broker.xml (default: one STOMP node on "
        "port 61613 with data under ./data).",
    )
    parser.add_argument("config", nargs="?", type=Path, help="path to broker.xml")
    parser.add_argument(
        "--log-level",
        type=log_level,
        default="INFO",
        help=f"one of {', '.join(LOG_LEVELS)}, in any case (default INFO)",
    )
    parser.add_argument(
        "--web",
        metavar="URI|off",
        help="serve the management API, metrics and console at http://HOST:PORT (overrides "
        "the <web> binding of bootstrap.xml beside broker.xml; 'off' turns it off; default: "
        "bootstrap.xml's, else off; docs/management.md)",
    )
    parser.set_defaults(func=command)


def web_config(option: str | None, config_path: Path | None) -> WebConfig | None:
    """The management web server's binding: ``--web``, else bootstrap.xml beside broker.xml
    (``artemis create`` puts both in etc/), else none. Raises ConfigError."""
    if option is not None:
        return None if option.strip().lower() == "off" else web_from_uri(option)
    if config_path is None:
        return None
    bootstrap = config_path.absolute().parent / BOOTSTRAP_FILE
    if not bootstrap.is_file():
        return None
    return read_bootstrap(bootstrap, instance_dir(config_path))


def log_level(text: str) -> str:
    """``--log-level``: a level name in any case (an unknown one is a usage error, not INFO)."""
    level = text.strip().upper()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(
            f"unknown log level {text!r}; use one of {', '.join(LOG_LEVELS)}"
        )
    return level


def instance_dir(config_path: Path | None) -> Path:
    """Where relative directories in broker.xml are resolved.

    Artemis resolves them against the broker instance (``${artemis.instance}``), the
    directory holding ``etc/broker.xml``. We do the same when the file sits in a directory
    called ``etc``; otherwise the current directory is the instance.
    """
    if config_path is not None:
        parent = config_path.absolute().parent
        if parent.name == "etc":
            return parent.parent
    return Path.cwd()


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def limit_malloc_arenas(arenas: int = 2) -> None:
    """Let glibc keep at most ``arenas`` malloc arenas (unless ``MALLOC_ARENA_MAX`` says
    otherwise). By default every thread that allocates gets an arena of its own (up to
    8 per core), and each keeps the high-water mark of what it once held: page reads
    and journal writes in worker threads made a node draining a paged backlog grow by
    about 25 MiB more than the messages it holds. Elsewhere than glibc this does nothing."""
    if "MALLOC_ARENA_MAX" in os.environ or not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None).mallopt(_M_ARENA_MAX, arenas)
    except (OSError, AttributeError):  # not glibc
        pass


def tune_garbage_collector() -> None:
    """Collect cycles far less often than Python's default (see :data:`GC_YOUNG_THRESHOLD`)."""
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


def freeze_startup_objects() -> None:
    """Move what the node built to start (modules, configuration, recovered messages) out
    of the collector's generations: they live until the process ends or die by reference
    counting, so scanning them again in every full collection is wasted."""
    gc.collect()
    gc.freeze()


def command(args: argparse.Namespace) -> int:
    setup_logging(args.log_level)
    limit_malloc_arenas()
    tune_garbage_collector()
    try:
        config = load_config(args.config) if args.config else default_config()
        web = web_config(args.web, args.config)
    except ConfigError as exc:
        print(f"artemis-py: {exc}", file=sys.stderr)
        return 2
    failures: list[BaseException] = []
    reports: list[ScaleDownReport] = []
    try:
        reports = trio.run(serve, config, args.config, web)
    except* (ArtemisError, OSError) as group:
        # Startup problems (port in use, data directory locked, unreadable journal) reach
        # us from inside the node's nursery: report each on one line, no traceback.
        failures.extend(leaves(group))
    for failure in failures:
        print(f"artemis-py: {failure}", file=sys.stderr)
    for report in reports:
        print(f"artemis-py: {report.summary()}", file=sys.stderr)
    return 1 if failures or not all(report.complete for report in reports) else 0


async def serve(
    config: BrokerConfig, config_path: Path | None, web: WebConfig | None = None
) -> list[ScaleDownReport]:
    """Run until a signal, then stop gracefully; a second signal abandons a scale-down.

    A shared-store node first waits until it may be live (a signal ends the wait), and a
    live backup that gave its primary the role back waits as backup again when
    restart-backup says so (docs/high-availability.md). Its web server runs all along.
    """
    base = instance_dir(config_path)
    config_dir = config_path.parent.absolute() if config_path else None
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_standby_site(config, config_dir, web) as site:
            while True:
                async with open_pair(config, base, journal_settings(config)) as ha:
                    if site is not None:
                        site.pair = ha
                    if ha is not None and not await _unless_signalled(signals, ha.acquire):
                        return []
                    async with open_broker(
                        config,
                        instance_dir=base,
                        config_dir=config_dir,
                        web=web if site is None else None,  # the site's server serves it
                        ha=ha,
                    ) as node:
                        freeze_startup_objects()
                        await _serve_until_signal(signals, node, site)
                if not (ha and ha.failed_back and ha.settings.restart_backup):
                    return node.scale_down_reports


@asynccontextmanager
async def open_standby_site(
    config: BrokerConfig, config_dir: Path | None, web: WebConfig | None
) -> AsyncIterator[ManagementSite | None]:
    """The web server of a shared-store node, serving for the life of the process: a
    waiting node's state meanwhile, the full API while it is live (management/site.py).
    None for any other node: its web server starts with its broker (node.py)."""
    ha_policy = config.ha_policy
    paired = ha_policy.shared_store is not None or ha_policy.replication is not None
    shared = paired and config.persistence_enabled
    if web is None or not shared:
        yield None
        return
    site = ManagementSite(
        config,
        Authenticator.from_directory(config.security_enabled, config_dir),
        Authorizer.from_config(config, config_dir),
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_management, site, web)
        yield site
        nursery.cancel_scope.cancel()


async def _serve_until_signal(
    signals: AsyncIterator[int], node: Node, site: ManagementSite | None
) -> None:
    """:func:`_until_signal_then_stop` with ``node`` behind ``site`` meanwhile."""
    if site is None:
        await _until_signal_then_stop(signals, node)
        return
    site.attach(node)
    try:
        await _until_signal_then_stop(signals, node)
    finally:
        site.detach()


async def _until_signal_then_stop(signals: AsyncIterator[int], node: Node) -> None:
    """Wait for a signal, then stop ``node`` gracefully (a second one abandons that).
    The node may also stop itself (cancelling this): a cluster asking it to, a failback."""
    async for signum in signals:
        log.info("%s received: stopping", signal.Signals(signum).name)
        break
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_abandon_on_second_signal, signals, nursery.cancel_scope)
        await node.shut_down()
        nursery.cancel_scope.cancel()


async def _unless_signalled(
    signals: AsyncIterator[int], wait: Callable[[], Awaitable[object]]
) -> bool:
    """Run ``wait()`` unless a signal comes first (it is then cancelled): whether it ran to
    the end with no signal received."""
    signalled = False

    async def on_signal(cancel_scope: trio.CancelScope) -> None:
        nonlocal signalled
        async for signum in signals:
            log.info(
                "%s received while waiting to become live: stopping", signal.Signals(signum).name
            )
            signalled = True
            cancel_scope.cancel()
            return

    async with trio.open_nursery() as nursery:
        nursery.start_soon(on_signal, nursery.cancel_scope)
        await wait()
        nursery.cancel_scope.cancel()
    return not signalled


async def _abandon_on_second_signal(
    signals: AsyncIterator[int], graceful: trio.CancelScope
) -> None:
    async for signum in signals:
        log.warning(
            "%s received again: stopping now; messages not moved yet stay in this node's journal",
            signal.Signals(signum).name,
        )
        graceful.cancel()
        return
