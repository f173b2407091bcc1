"""Acceptors: TCP listeners that hand each connection to its protocol.

An acceptor whose ``protocols`` parameter includes STOMP (or has no ``protocols``, meaning
all) serves STOMP. Other protocols (CORE, AMQP, MQTT, OPENWIRE) are not spoken yet; an
acceptor that lists only those is not started and the log says so.
"""

from __future__ import annotations

import logging

import trio

from artemis_py.broker.server import Broker
from artemis_py.config import AcceptorConfig
from artemis_py.transport.security import Authenticator
from artemis_py.transport.stomp import StompConnection

log = logging.getLogger("artemis_py.transport")


async def serve_acceptor(
    broker: Broker,
    acceptor: AcceptorConfig,
    authenticator: Authenticator,
    *,
    task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on the acceptor's host and port and serve connections until cancelled."""
    if not acceptor.accepts("STOMP"):
        log.info(
            "acceptor %s (%s) not started: only STOMP is implemented so far",
            acceptor.name,
            ",".join(sorted(acceptor.protocols or ())),
        )
        task_status.started([])
        return
    listeners: list[trio.SocketListener] = []
    for configured in acceptor.hosts:
        host = None if configured in ("0.0.0.0", "", "*") else configured
        try:
            listeners += await trio.open_tcp_listeners(acceptor.port, host=host)
        except OSError as exc:
            for listener in listeners:
                await listener.aclose()
            raise OSError(
                exc.errno,
                f"acceptor {acceptor.name} cannot listen on {configured}:{acceptor.port}: "
                f"{exc.strerror}",
            ) from exc
    task_status.started(listeners)
    for listener in listeners:
        host_port = listener.socket.getsockname()[:2]
        log.info("acceptor %s listening for STOMP on %s:%d", acceptor.name, *host_port)

    async def handle(stream: trio.SocketStream) -> None:
        try:
            host, port = stream.socket.getpeername()[:2]
            peer = f"{host}:{port}"
        except OSError:
            peer = "?"
        connection = StompConnection(broker, stream, acceptor, authenticator, peer)
        try:
            await connection.run()
        except* Exception:
            # One broken connection must never take the acceptor down with it.
            log.exception("connection %s from %s failed", connection.id, peer)

    await trio.serve_listeners(handle, listeners)
