"""A running node: storage, the broker core and its acceptors, put together.

``open_broker`` is the embedded API (an in-process broker, Classic's "embedded broker"
topology) and what ``artemis-py run`` uses::

    async with artemis_py.open_broker(config) as node:
        print(node.node_id, node.addresses("stomp"))
        await trio.sleep_forever()

Leaving the block stops the node gracefully: acceptors stop accepting, connections close
(their unacknowledged deliveries go back to their queues), queued journal work completes,
then the journals and the data-directory lock are released.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import trio

from artemis_py.broker.persistence import Persistence
from artemis_py.broker.server import Broker
from artemis_py.config import BrokerConfig, default_config
from artemis_py.storage import JournalSettings, open_storage
from artemis_py.transport.acceptor import serve_acceptor
from artemis_py.transport.security import Authenticator

log = logging.getLogger("artemis_py.node")


class Node:
    """A started node. ``broker`` is the core; ``listeners`` maps acceptor names to sockets."""

    def __init__(self, broker: Broker, nursery: trio.Nursery) -> None:
        self.broker = broker
        self.config = broker.config
        self.node_id = broker.node_id
        self.listeners: dict[str, list[trio.SocketListener]] = {}
        self._nursery = nursery

    def addresses(self, acceptor: str) -> list[tuple[str, int]]:
        """(host, port) pairs an acceptor listens on (useful with port 0)."""
        return [listener.socket.getsockname()[:2] for listener in self.listeners.get(acceptor, [])]

    def stop(self) -> None:
        """Ask the node to stop; the ``open_broker`` block then unwinds."""
        self._nursery.cancel_scope.cancel()


def journal_settings(config: BrokerConfig) -> JournalSettings:
    journal = config.journal
    return JournalSettings(
        file_size=journal.file_size,
        min_files=journal.min_files,
        pool_files=journal.pool_files,
        buffer_size=journal.buffer_size,
        buffer_timeout_ns=journal.buffer_timeout,
        datasync=journal.datasync,
        sync_transactional=journal.sync_transactional,
        sync_non_transactional=journal.sync_non_transactional,
        compact_min_files=journal.compact_min_files,
        compact_percentage=journal.compact_percentage,
    )


@asynccontextmanager
async def open_broker(
    config: BrokerConfig | None = None,
    *,
    instance_dir: Path | None = None,
    config_dir: Path | None = None,
) -> AsyncIterator[Node]:
    """Start a node from ``config`` (default: the embedded single-node default).

    Relative directories in the configuration are resolved against ``instance_dir``
    (default: the current directory); ``config_dir`` is where ``artemis-users.properties``
    is looked up when security is enabled.
    """
    config = config if config is not None else default_config()
    base = instance_dir or Path.cwd()
    async with AsyncExitStack() as stack:
        if config.persistence_enabled:
            storage = await stack.enter_async_context(
                open_storage(
                    base / config.journal.directory,
                    base / config.journal.bindings_directory,
                    journal_settings(config),
                )
            )
            persistence = Persistence(storage, storage.node_id)
        else:
            persistence = Persistence(None, str(uuid.uuid4()))
        broker = Broker(config, persistence)
        broker.recover()
        authenticator = Authenticator.from_directory(config.security_enabled, config_dir)
        async with trio.open_nursery() as nursery:
            node = Node(broker, nursery)
            for acceptor in config.acceptors:
                listeners = await nursery.start(serve_acceptor, broker, acceptor, authenticator)
                node.listeners[acceptor.name] = listeners
            log.info(
                "node %s (%s) started: %s",
                config.name or "artemis-py",
                broker.node_id,
                ", ".join(f"{n}={node.addresses(n)}" for n in node.listeners) or "no acceptors",
            )
            try:
                yield node
            finally:
                nursery.cancel_scope.cancel()
        log.info("node %s stopped", broker.node_id)
