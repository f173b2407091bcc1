"""Where a discovery group hears of members: the UDP receiver, the FILE_PING directory
reader and the DNS_PING resolver (each a :data:`~.group.Source`).

A source never ends the node: an endpoint that fails (a port taken, a directory not
readable, a name that does not resolve) is logged, ever less often while it keeps failing
(:class:`~artemis_py.cluster.retry.LogBackoff`), and tried again; the node keeps serving.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from functools import partial

import trio

from artemis_py.cluster.discovery.group import DiscoveryGroup, Source
from artemis_py.cluster.retry import LogBackoff, unlogged
from artemis_py.config import DiscoveryGroupConfig
from artemis_py.protocol.discovery import MAX_SIZE
from artemis_py.transport.multicast import open_receiver

__all__ = ["SUFFIX", "dns_ping", "file_ping", "udp"]

log = logging.getLogger("artemis_py.cluster.discovery")

#: A FILE_PING member file: ``<location>/<channel>/<node id>.list``.
SUFFIX = ".list"
# How long a failed UDP bind waits before the next attempt.
RETRY = 5.0


class _Failures:
    """Logs a failure that repeats, ever less often."""

    def __init__(self, group: DiscoveryGroup) -> None:
        self.group = group
        self.backoff = LogBackoff()

    def occurred(self, what: str, error: str) -> None:
        quiet = self.backoff.occurred(error, trio.current_time())
        if quiet is not None:
            log.warning(
                "discovery group %s: %s: %s%s", self.group.name, what, error, unlogged(quiet)
            )


def udp(config: DiscoveryGroupConfig) -> Source:
    """The group's multicast datagrams."""
    assert config.group_address is not None

    async def run(group: DiscoveryGroup, task_status: trio.TaskStatus[None]) -> None:
        failures = _Failures(group)
        started = False
        while True:
            try:
                sock = await open_receiver(
                    config.group_address or "", config.group_port, config.local_bind_address
                )
            except OSError as exc:
                failures.occurred(f"cannot listen on {group.endpoint}", exc.strerror or str(exc))
                if not started:
                    started = True
                    task_status.started()
                await trio.sleep(RETRY)
                continue
            with sock:
                if not started:
                    started = True
                    task_status.started()
                while True:
                    data, sender = await sock.recvfrom(MAX_SIZE + 1)
                    group.receive(data, f"{sender[0]}:{sender[1]}", trio.current_time())

    return run


def file_ping(directory: str, period: float) -> Source:
    """The member files of a FILE_PING directory, read every ``period`` seconds. A file
    older than the group's refresh-timeout (by its modification time) is a member gone."""

    async def run(group: DiscoveryGroup, task_status: trio.TaskStatus[None]) -> None:
        failures = _Failures(group)
        task_status.started()
        while True:
            try:
                files = await trio.to_thread.run_sync(_read_files, directory)
            except OSError as exc:
                failures.occurred(f"cannot read {directory}", exc.strerror or str(exc))
            else:
                now = trio.current_time()
                for name, age, data in files:
                    if age < group.refresh_timeout:
                        group.receive(data, os.path.join(directory, name), now - max(age, 0.0))
            await trio.sleep(period)

    return run


def _read_files(directory: str) -> list[tuple[str, float, bytes]]:
    """(name, age in seconds, content) of each member file; none if the directory does not
    exist yet (the first broadcaster creates it)."""
    found = []
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    now = time.time()
    for entry in entries:
        if not entry.name.endswith(SUFFIX) or not entry.is_file():
            continue
        try:
            age = now - entry.stat().st_mtime
            with open(entry.path, "rb") as f:
                data = f.read(MAX_SIZE + 1)
        except FileNotFoundError:
            continue  # removed by its node meanwhile
        found.append((entry.name, age, data))
    return found


def dns_ping(query: str, record_type: str, port: int, own_host: str, period: float) -> Source:
    """The addresses ``query`` resolves to, every ``period`` seconds; each is a member at
    ``port`` (the members' connector port, this node's own). This node's own addresses
    (those of ``own_host``, its connector host) are left out."""
    family = socket.AF_INET6 if record_type == "AAAA" else socket.AF_INET

    async def run(group: DiscoveryGroup, task_status: trio.TaskStatus[None]) -> None:
        failures = _Failures(group)
        resolve = partial(trio.socket.getaddrinfo, type=socket.SOCK_STREAM)
        task_status.started()
        while True:
            try:
                found = {info[4][0] for info in await resolve(query, port, family)}
            except OSError as exc:
                failures.occurred(f"cannot resolve {query!r}", exc.strerror or str(exc))
            else:
                own = await _own_addresses(own_host, port, family)
                now = trio.current_time()
                for address in sorted(found - own):
                    group.heard(((str(address), port),), now)
            await trio.sleep(period)

    return run


async def _own_addresses(host: str, port: int, family: int) -> set[str]:
    try:
        infos = await trio.socket.getaddrinfo(host, port, family, socket.SOCK_STREAM)
    except OSError:
        return {host}
    return {host, *(str(info[4][0]) for info in infos)}
