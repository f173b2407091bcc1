"""TLS for acceptors, cluster links and clients: ``ssl.SSLContext`` from :class:`TlsParams`.

:func:`server_context` and :func:`client_context` turn the settings read from a URL
(:mod:`artemis_py.config.tls_params`) into contexts; :class:`ServerTls` holds an acceptor's current
context and, with ``sslAutoReload=true``, replaces it when the key store or trust store file
changes, so a renewed certificate is used by new connections without a restart (connections
already open keep theirs). The files are polled from the Trio loop every
:data:`RELOAD_PERIOD` seconds; the reload itself (reading, decrypting) runs in a worker thread,
and a store that cannot be read (say, half written) keeps the old context and is tried again
when it changes again.

Private keys never land on disk unprotected: Python's ``ssl`` loads a key only from a file,
so the key is handed over through an anonymous in-memory file (``memfd_create``, read as
``/proc/self/fd/N``), encrypted with a random one-time password; where there is no memfd, a
temporary file holds the same encrypted key, removed at once.

:func:`plane_material` turns the same settings into what the Rust data plane's rustls listener
takes (DER bytes and names, read here so that the stores' formats are read in one place); with
the plane, :class:`ServerTls` hands a reloaded store's material to the plane's listeners.

:func:`handshake_failure` turns a failed handshake into one log line ("the client sent plain
text", "certificate verify failed: ...") without a traceback.
"""

from __future__ import annotations

import logging
import os
import secrets
import ssl
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import trio
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from artemis_py.config.tls_params import (
    CIPHER_NAMES,
    PROTOCOL_NAMES,
    TLS13_SUITES,
    KeyMaterial,
    StoreError,
    TlsParams,
    load_key_store,
    load_trust_store,
)
from artemis_py.exceptions import ArtemisError

__all__ = [
    "RELOAD_PERIOD",
    "ServerTls",
    "TlsSetupError",
    "client_context",
    "dial_failure",
    "handshake_failure",
    "plane_material",
    "server_context",
    "tls_refusal",
]

log = logging.getLogger("artemis_py.transport")

RELOAD_PERIOD = 1.0  # seconds between checks of sslAutoReload's files

_VERSIONS = {
    (1, 0): ssl.TLSVersion.TLSv1,
    (1, 1): ssl.TLSVersion.TLSv1_1,
    (1, 2): ssl.TLSVersion.TLSv1_2,
    (1, 3): ssl.TLSVersion.TLSv1_3,
}


# OpenSSL's reasons for bytes that are no TLS record (plain STOMP's "CONNECT" reads as an
# HTTPS proxy request).
_NOT_TLS = frozenset(
    {
        "HTTP_REQUEST",
        "HTTPS_PROXY_REQUEST",
        "WRONG_VERSION_NUMBER",
        "UNSUPPORTED_PROTOCOL",
        "UNKNOWN_PROTOCOL",
        "PACKET_LENGTH_TOO_LONG",
        "RECORD_LAYER_FAILURE",
    }
)


class TlsSetupError(ArtemisError, ValueError):
    """The TLS settings cannot be turned into a context (the message says why)."""


@contextmanager
def _key_file(material: KeyMaterial, password: bytes) -> Iterator[str]:
    """A path to the key (encrypted with ``password``) and its chain, readable while open."""
    pem = material.key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password),
    )
    for cert in (material.certificate, *material.chain):
        pem += cert.public_bytes(serialization.Encoding.PEM)
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("artemis-py-key", os.MFD_CLOEXEC)
        try:
            os.write(fd, pem)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.NamedTemporaryFile(suffix=".pem") as f:  # pragma: no cover - not Linux
        f.write(pem)
        f.flush()
        yield f.name


def _load_key(context: ssl.SSLContext, tls: TlsParams) -> None:
    assert tls.key_store_path is not None
    material = load_key_store(
        tls.key_store_path, tls.key_store_password, tls.key_store_type, tls.key_store_alias
    )
    password = secrets.token_bytes(32).hex().encode()
    with _key_file(material, password) as path:
        context.load_cert_chain(path, password=password)


def _load_trust(context: ssl.SSLContext, tls: TlsParams, purpose: ssl.Purpose) -> None:
    if tls.trust_store_path:
        certs = load_trust_store(
            tls.trust_store_path, tls.trust_store_password, tls.trust_store_type
        )
        context.load_verify_locations(
            cadata="".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)
        )
    else:
        # No trust store: the system's certificate authorities (Java: the JVM's cacerts).
        context.load_default_certs(purpose)


def _limit(context: ssl.SSLContext, tls: TlsParams) -> None:
    """enabledProtocols and enabledCipherSuites."""
    if tls.protocols:
        versions = sorted(PROTOCOL_NAMES[p] for p in tls.protocols)
        if versions[0] < (1, 2):
            # OpenSSL's default security level refuses TLS 1.0/1.1 outright.
            context.set_ciphers("DEFAULT:@SECLEVEL=0")
        context.minimum_version = _VERSIONS[versions[0]]
        context.maximum_version = _VERSIONS[versions[-1]]
    suites = [s for s in tls.cipher_suites if s not in TLS13_SUITES]
    if suites:
        try:
            context.set_ciphers(":".join(suites))
        except ssl.SSLError:
            raise TlsSetupError(
                f"enabledCipherSuites: none of {', '.join(suites)} is available in "
                f"{ssl.OPENSSL_VERSION}"
            ) from None
    if tls.cipher_suites and not TLS13_SUITES.intersection(tls.cipher_suites):
        # As in Java, listing no TLS 1.3 suite leaves TLS 1.3 without a suite to use.
        context.maximum_version = ssl.TLSVersion.TLSv1_2


def server_context(tls: TlsParams) -> ssl.SSLContext:
    """The context of a TLS acceptor; raises :class:`TlsSetupError`."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        _load_key(context, tls)
        if tls.need_client_auth or tls.want_client_auth:
            _load_trust(context, tls, ssl.Purpose.CLIENT_AUTH)
            context.verify_mode = ssl.CERT_REQUIRED if tls.need_client_auth else ssl.CERT_OPTIONAL
        _limit(context, tls)
    except (StoreError, ssl.SSLError) as exc:
        raise TlsSetupError(str(exc)) from None
    return context


def client_context(tls: TlsParams) -> ssl.SSLContext:
    """The context of a TLS connector or client; raises :class:`TlsSetupError`."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        if tls.trust_all:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        else:
            _load_trust(context, tls, ssl.Purpose.SERVER_AUTH)
            context.check_hostname = tls.verify_host
        if tls.key_store_path:
            _load_key(context, tls)
        _limit(context, tls)
    except (StoreError, ssl.SSLError) as exc:
        raise TlsSetupError(str(exc)) from None
    return context


#: A TLS listener's settings as the data plane takes them (``DataPlane.listen(tls=...)``):
#: the certificate chain (DER, the server's first), the private key (PKCS8 DER), client auth
#: ("none", "want", "need"), the trust anchors (DER), protocols (Java names), cipher suites
#: (IANA names).
PlaneTls = tuple[list[bytes], bytes, str, list[bytes], list[str], list[str]]

# OpenSSL names -> IANA names (TlsParams keeps OpenSSL's; rustls knows suites by IANA's).
_IANA = {openssl: iana for iana, openssl in CIPHER_NAMES.items()}


def _system_anchors() -> list[x509.Certificate]:
    """The system's certificate authorities (what ``load_default_certs`` reads: the CA bundle
    file and the CA directory), for client auth without a trust store."""
    paths = ssl.get_default_verify_paths()
    # The first of each that exists, as OpenSSL takes the environment's (SSL_CERT_FILE,
    # SSL_CERT_DIR: ``cafile``, ``capath``) over its built-in one.
    bundle = next(
        (f for f in (paths.cafile, paths.openssl_cafile) if f and os.path.isfile(f)), None
    )
    directory = next(
        (d for d in (paths.capath, paths.openssl_capath) if d and os.path.isdir(d)), None
    )
    files = [bundle] if bundle else []
    if directory:
        # Hashed names (``abcd1234.0``, often links to the bundle's certificates) and
        # whatever else is there: every file that holds PEM certificates counts.
        try:
            files += sorted(os.path.join(directory, name) for name in os.listdir(directory))
        except OSError:
            pass  # a directory we may not list adds nothing
    anchors: dict[bytes, x509.Certificate] = {}  # by DER: a CA is often there twice
    for path in files:
        for cert in _pem_certificates(path):
            anchors.setdefault(cert.public_bytes(serialization.Encoding.DER), cert)
    if not anchors:
        raise TlsSetupError(
            "needClientAuth/wantClientAuth without trustStorePath: no system CA bundle found "
            "for the data plane; give a trustStorePath"
        )
    return list(anchors.values())


def _pem_certificates(path: str) -> list[x509.Certificate]:
    """The PEM certificates in ``path``; none if it is no regular file, cannot be read or
    holds none (a CA directory also holds CRLs, ``.r0``, and other files)."""
    if not os.path.isfile(path):
        return []
    try:
        with open(path, "rb") as f:
            return x509.load_pem_x509_certificates(f.read())
    except (OSError, ValueError):
        return []


def plane_material(tls: TlsParams) -> PlaneTls:
    """An acceptor's TLS settings for the data plane; raises :class:`TlsSetupError`
    (a store that cannot be read, a cipher suite the plane cannot name)."""
    assert tls.key_store_path is not None
    der = serialization.Encoding.DER
    try:
        material = load_key_store(
            tls.key_store_path, tls.key_store_password, tls.key_store_type, tls.key_store_alias
        )
        key = material.key.private_bytes(
            der, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        chain = [c.public_bytes(der) for c in (material.certificate, *material.chain)]
        anchors: list[bytes] = []
        auth = "need" if tls.need_client_auth else "want" if tls.want_client_auth else "none"
        if auth != "none":
            certs = (
                load_trust_store(
                    tls.trust_store_path, tls.trust_store_password, tls.trust_store_type
                )
                if tls.trust_store_path
                else _system_anchors()
            )
            anchors = [c.public_bytes(der) for c in certs]
    except StoreError as exc:
        raise TlsSetupError(str(exc)) from None
    suites = []
    for name in tls.cipher_suites:
        iana = _IANA.get(name, name if name in TLS13_SUITES else None)
        if iana is None:
            raise TlsSetupError(
                f"enabledCipherSuites: {name} has no IANA name known to the data plane; "
                "give its IANA name (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, ...), or serve "
                "this acceptor from the socket shell (ARTEMIS_PY_DATA_PLANE=0)"
            )
        suites.append(iana)
    return chain, key, auth, anchors, list(tls.protocols), suites


def _signature(paths: tuple[str, ...]) -> tuple[tuple[int, int], ...]:
    found = []
    for path in paths:
        try:
            st = os.stat(path)
            found.append((st.st_mtime_ns, st.st_size))
        except OSError:
            found.append((0, 0))
    return tuple(found)


class ServerTls:
    """An acceptor's TLS context, renewed from its files with ``sslAutoReload``."""

    def __init__(self, name: str, tls: TlsParams) -> None:
        self.name = name
        self.tls = tls
        self._signature = _signature(tls.watched_files)
        self.context = server_context(tls)
        self.reloads = 0
        # The data plane's listeners of the acceptor: each takes a reloaded store's material.
        self.installers: list[Callable[[PlaneTls], None]] = []

    async def watch(self) -> None:
        """Poll the store files and reload the context when they change (until cancelled)."""
        while True:
            await trio.sleep(RELOAD_PERIOD)
            signature = await trio.to_thread.run_sync(_signature, self.tls.watched_files)
            if signature == self._signature:
                continue
            self._signature = signature
            try:
                context = await trio.to_thread.run_sync(server_context, self.tls)
                if self.installers:
                    material = await trio.to_thread.run_sync(plane_material, self.tls)
                    for install in self.installers:
                        await trio.to_thread.run_sync(install, material)
                self.context = context
            except (TlsSetupError, ValueError) as exc:
                log.warning(
                    "acceptor %s: the changed key store or trust store was not loaded (%s); "
                    "new connections keep the previous certificate",
                    self.name,
                    exc,
                )
                continue
            self.reloads += 1
            log.info("acceptor %s: key store and trust store reloaded", self.name)


def handshake_failure(exc: BaseException, initial: bytes = b"") -> str:
    """Why a server-side handshake failed, in one line for the log."""
    reason = exc.__cause__ if isinstance(exc, trio.BrokenResourceError) and exc.__cause__ else exc
    if isinstance(reason, ssl.SSLCertVerificationError):
        return f"client certificate refused: {reason.verify_message}"
    if isinstance(reason, ssl.SSLError):
        text = reason.reason or str(reason)
        if text in _NOT_TLS:
            return f"not a TLS handshake ({text}: a plain-TCP client on a TLS port?)"
        if text == "PEER_DID_NOT_RETURN_A_CERTIFICATE":
            return "the client sent no certificate (needClientAuth=true)"
        if "ALERT" in text:
            return f"the client refused the handshake ({text})"
        return text
    if isinstance(reason, trio.TooSlowError):
        return "no TLS handshake within the acceptor's handshake-timeout"
    return str(reason) or type(reason).__name__


def dial_failure(exc: BaseException) -> str:
    """Why a dialling side's handshake failed, in a few words for an error message."""
    reason = exc.__cause__ if exc.__cause__ is not None else exc
    if isinstance(reason, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {reason.verify_message}"
    if isinstance(reason, ssl.SSLError):
        text = reason.reason or str(reason)
        if text in ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG"):
            return f"the server did not answer the TLS handshake ({text}: a plain port?)"
        if "ALERT" in text:
            return f"the server refused the handshake ({text}: does it trust this certificate?)"
        if text == "UNEXPECTED_EOF_WHILE_READING":
            return (
                "the server closed the connection in the TLS handshake (does it need a client "
                "certificate, keyStorePath, or not trust the one given?)"
            )
        return text
    if isinstance(reason, trio.BrokenResourceError | OSError) or not str(reason):
        return (
            "the server did not answer the TLS handshake: it closed the connection (a plain port?)"
        )
    return str(reason)


def tls_refusal(exc: BaseException) -> ssl.SSLError | None:
    """The TLS error behind ``exc`` (its chain of causes), if any: with TLS 1.3 a server's
    refusal of the client's certificate comes with the first read after the handshake."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ssl.SSLError):
            return cause
        cause = cause.__cause__
    return None
