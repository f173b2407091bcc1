"""How ``artemis-py producer`` and ``consumer`` connect: their ``--url`` and failover.

``--url`` takes every form of :func:`~artemis_py.client.url.parse_client_url` (docs/client.md):

* **No failover** (``tcp://HOST:PORT``, or a list without ``ha=true`` or
  ``reconnectAttempts``): one plain :class:`~artemis_py.client.ClientConnection`, to the
  node, or for a list to the first node that answers, tried from the policy's pick on. A
  single address is exactly the connection these commands always made.
* **Failover**: a :class:`~artemis_py.client.failover.FailoverConnection`. Each move is
  reported on stderr in one line; every send is receipted (resent when its RECEIPT did not
  come), so ``--no-receipts`` is refused with it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from artemis_py.cli.output import Progress
from artemis_py.client import ClientConnection, ClientError, open_stomp_connection
from artemis_py.client.failover import ClusterLocator, FailoverConnection, open_cluster_connection
from artemis_py.client.url import BrokerUrl, ClientUrl, parse_client_url

__all__ = ["client_url", "failover_notice", "open_connection"]


def client_url(text: str) -> ClientUrl:
    """``--url``: any client URL form (a malformed one is a usage error)."""
    try:
        url = parse_client_url(text)
        ClusterLocator(url)
    except (ValueError, ClientError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return url


def failover_notice(
    name: str, progress: Progress
) -> Callable[[BrokerUrl, BrokerUrl, ClientError], None]:
    """The ``on_failover`` of a command: one line on stderr (under the progress bar)."""

    def notice(old: BrokerUrl, new: BrokerUrl, error: ClientError) -> None:
        progress.close()
        print(
            f"artemis-py {name}: failed over from {old} to {new} after: {error}",
            file=sys.stderr,
            flush=True,
        )

    return notice


@asynccontextmanager
async def open_connection(
    args: argparse.Namespace, name: str, progress: Progress, *, max_pending: int | None = None
) -> AsyncIterator[ClientConnection | FailoverConnection]:
    """The connection of a run (see the module doc); ``max_pending`` is the window of
    ``send(..., wait=False)`` (None: the client's default)."""
    url: ClientUrl = args.url
    options: dict[str, Any] = {
        "login": args.user,
        "passcode": args.password,
        "version": args.stomp_version,
        "heartbeat": (args.heart_beat, args.heart_beat),
    }
    if url.options.tls.enabled:  # sslEnabled=true and the stores in --url (docs/tls.md)
        options["tls"] = url.options.tls
    if url.options.fails_over or url.discovery is not None:  # udp:// listens as it runs
        async with open_cluster_connection(
            url,
            on_failover=failover_notice(name, progress),
            max_pending=max_pending or 1,
            **options,
        ) as failover:
            yield failover
        return
    if max_pending is not None:
        options["max_pending"] = max_pending
    async with AsyncExitStack() as stack:
        conn: ClientConnection | None = None
        failure: OSError | None = None
        for address in ClusterLocator(url).candidates():
            try:
                conn = await stack.enter_async_context(
                    open_stomp_connection(address.host, address.port, **options)
                )
            except OSError as exc:  # the next node, if the URL names several
                failure = exc
                continue
            break
        if conn is None:
            assert failure is not None
            raise failure
        yield conn
