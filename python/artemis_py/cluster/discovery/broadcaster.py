"""A broadcast group, running: this node's announcement, every ``broadcast-period``.

Over UDP it is one datagram to the group; with a JGroups FILE_PING stack it is the file
``<location>/<channel>/<node id>.list`` rewritten (so its modification time says the
node is alive) and removed when the node stops. With DNS_PING there is nothing to send:
the DNS name announces the members. Failures are logged ever less often and the node
keeps serving.
"""

from __future__ import annotations

import logging
import os
import tempfile

import trio

from artemis_py.cluster.discovery.sources import SUFFIX
from artemis_py.cluster.retry import LogBackoff, unlogged
from artemis_py.config import BroadcastGroupConfig
from artemis_py.protocol.discovery import Announcement, encode
from artemis_py.transport.multicast import open_sender

__all__ = ["Broadcaster"]

log = logging.getLogger("artemis_py.cluster.discovery")


class Broadcaster:
    """One ``<broadcast-group>`` of this node."""

    def __init__(
        self,
        config: BroadcastGroupConfig,
        node_id: str,
        connectors: tuple[tuple[str, int], ...],
        clients: tuple[str, ...] = (),
    ) -> None:
        self.config = config
        self.name = config.name
        self.node_id = node_id
        self.connectors = connectors
        self.clients = clients  # the node's STOMP URLs, for udp:// clients
        self.period = config.broadcast_period / 1000
        self.sequence = 0
        self._failures = LogBackoff()

    def announcement(self) -> bytes:
        self.sequence += 1
        return encode(
            Announcement(
                self.config.endpoint, self.node_id, self.connectors, self.sequence, self.clients
            )
        )

    def _failed(self, what: str, exc: OSError) -> None:
        error = exc.strerror or str(exc)
        quiet = self._failures.occurred((what, error), trio.current_time())
        if quiet is not None:
            log.warning("broadcast group %s: %s: %s%s", self.name, what, error, unlogged(quiet))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        stack = self.config.jgroups
        if stack is None:
            await self._udp(task_status)
        elif stack.protocol == "FILE_PING":
            assert stack.location is not None
            directory = os.path.join(stack.location, self.config.jgroups_channel or "")
            await self._file_ping(directory, task_status)
        else:
            log.info("broadcast group %s: %s announces the members", self.name, stack.protocol)
            task_status.started()

    async def _udp(self, task_status: trio.TaskStatus[None]) -> None:
        config = self.config
        target = (config.group_address, config.group_port)
        started = False
        while True:
            try:
                sock = await open_sender(
                    config.group_address or "", config.local_bind_address, config.local_bind_port
                )
            except OSError as exc:
                self._failed(f"cannot bind to {config.local_bind_address}", exc)
                sock = None
            if not started:
                started = True
                log.info("broadcast group %s: announcing on %s", self.name, config.endpoint)
                task_status.started()
            if sock is None:
                await trio.sleep(max(self.period, 1.0))
                continue
            with sock:
                while True:
                    try:
                        await sock.sendto(self.announcement(), target)
                    except OSError as exc:
                        self._failed(f"cannot send to {config.endpoint}", exc)
                    await trio.sleep(self.period)

    async def _file_ping(self, directory: str, task_status: trio.TaskStatus[None]) -> None:
        path = os.path.join(directory, f"{self.node_id}{SUFFIX}")
        log.info("broadcast group %s: announcing in %s", self.name, path)
        task_status.started()
        try:
            while True:
                try:
                    await trio.to_thread.run_sync(_write, path, self.announcement())
                except OSError as exc:
                    self._failed(f"cannot write {path}", exc)
                await trio.sleep(self.period)
        finally:
            with trio.CancelScope(shield=True):
                try:
                    await trio.to_thread.run_sync(os.remove, path)
                except OSError:
                    pass  # never written, or removed by hand


def _write(path: str, data: bytes) -> None:
    """Replace the file at once, so that a reader never sees half of it."""
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
