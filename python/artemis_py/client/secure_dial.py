"""A client connection's TLS: the context made from an acceptor URL's parameters, and the
handshake, each failure a :class:`TlsError` that says why (see :mod:`.connection`)."""

from __future__ import annotations

import ssl

import trio

from artemis_py.client.errors import ClientError
from artemis_py.config.tls_params import TlsParams
from artemis_py.transport.sockets import FastSocketStream
from artemis_py.transport.tls_contexts import TlsSetupError, client_context, dial_failure

__all__ = ["TlsError", "secure", "tls_context"]


class TlsError(ClientError):
    """A TLS connection could not be set up (the message says why: the stores, a plain
    port, an untrusted certificate)."""


async def tls_context(tls: TlsParams | ssl.SSLContext | None) -> ssl.SSLContext | None:
    """The context to dial with (None: plain TCP); opening key stores runs in a worker
    thread. Raises :class:`TlsError` if the stores cannot be used."""
    if tls is None or isinstance(tls, ssl.SSLContext):
        return tls
    if not tls.enabled:
        return None
    try:
        return await trio.to_thread.run_sync(client_context, tls)
    except TlsSetupError as exc:
        raise TlsError(str(exc)) from None


async def secure(
    stream: FastSocketStream, context: ssl.SSLContext, host: str, port: int, within: float
) -> trio.SSLStream[FastSocketStream]:
    """The TLS handshake, within ``within`` seconds; raises :class:`TlsError`."""
    secured = trio.SSLStream(stream, context, server_hostname=host)
    try:
        with trio.fail_after(within):
            await secured.do_handshake()
    except trio.BrokenResourceError as exc:
        await trio.aclose_forcefully(stream)
        raise TlsError(f"TLS connection to {host}:{port} failed: {dial_failure(exc)}") from None
    except trio.TooSlowError:
        await trio.aclose_forcefully(stream)
        raise TlsError(
            f"the server at {host}:{port} did not answer the TLS handshake within {within:g} s "
            "(is it a plain-TCP acceptor?)"
        ) from None
    return secured
