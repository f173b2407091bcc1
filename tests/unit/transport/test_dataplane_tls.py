"""The data plane's TLS listeners through its Python face: the stores read by
``tls_contexts.plane_material`` as the node reads them, Python's ``ssl`` as the client.
A STOMP client over TLS, a failed handshake reported as ``CLOSED`` with cause ``"tls"``,
a client certificate needed, a hand-off relayed through a Unix socket pair, settings rustls
cannot serve refused, and ``set_tls`` for new connections."""

from __future__ import annotations

import dataclasses
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from test_dataplane_binding import CONNECT, Plane, read_to_end

from artemis_py._native import DataPlane
from artemis_py.config.tls_params import TlsParams
from artemis_py.transport.certificates import TlsFiles, create_tls_files
from artemis_py.transport.tls_contexts import TlsSetupError, plane_material
from artemis_py.transport.tls_contexts import client_context as tls_client_context

PASSWORD = "s3cret-pass"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    directory = tmp_path_factory.mktemp("plane-tls")
    return create_tls_files(directory, ["node"], ["localhost", "127.0.0.1"], PASSWORD)


def params(files: TlsFiles, **changes: object) -> TlsParams:
    tls = TlsParams(
        enabled=True,
        key_store_path=str(files.keystores["node"]),
        key_store_password=PASSWORD,
    )
    return dataclasses.replace(tls, **changes)  # type: ignore[arg-type]


def client_context(files: TlsFiles, cert: Path | None = None) -> ssl.SSLContext:
    """A client trusting ``files``' CA, presenting ``cert`` (a key store) if given."""
    tls = TlsParams(
        enabled=True,
        trust_store_path=str(files.truststore),
        trust_store_password=PASSWORD,
        key_store_path=str(cert) if cert is not None else None,
        key_store_password=PASSWORD if cert is not None else None,
    )
    return tls_client_context(tls)


async def tls_client(port: int, context: ssl.SSLContext) -> trio.SSLStream[trio.SocketStream]:
    raw = await trio.open_tcp_stream("127.0.0.1", port)
    stream = trio.SSLStream(raw, context, server_hostname="127.0.0.1")
    try:
        await stream.do_handshake()
    except BaseException:
        await trio.aclose_forcefully(raw)
        raise
    return stream


@pytest.fixture
async def tls_plane(files: TlsFiles) -> AsyncIterator[tuple[Plane, int]]:
    native = DataPlane(1)
    try:
        listener, (_, port) = native.listen(
            "127.0.0.1", 0, tls=plane_material(params(files)), handoff_prefixes=[b"GET "]
        )
        yield Plane(native, port), listener
    finally:
        native.shutdown()


async def test_a_stomp_client_over_tls(tls_plane: tuple[Plane, int], files: TlsFiles) -> None:
    plane, _ = tls_plane
    async with await tls_client(plane.port, client_context(files)) as client:
        await client.send_all(CONNECT)
        (frame,) = await plane.kind(DataPlane.FRAME)
        assert frame[2].command == "CONNECT"


async def test_plain_text_is_closed_with_the_reason(tls_plane: tuple[Plane, int]) -> None:
    plane, _ = tls_plane
    async with await trio.open_tcp_stream("127.0.0.1", plane.port) as plain:
        await plain.send_all(CONNECT)
        answer = await read_to_end(plain)
        assert b"CONNECTED" not in answer
    (closed,) = await plane.kind(DataPlane.CLOSED)
    assert closed[2] == "tls"
    assert closed[3].startswith("not a TLS handshake (the client sent plain text")


async def test_a_tls_hand_off_is_a_unix_socket_relayed_by_the_plane(
    tls_plane: tuple[Plane, int], files: TlsFiles
) -> None:
    plane, _ = tls_plane
    async with await tls_client(plane.port, client_context(files)) as client:
        await client.send_all(b"GET / HTTP/1.1\r\n\r\n")
        (event,) = await plane.kind(DataPlane.HANDED_OFF)
        _, _, sock, initial, lease = event
        assert initial.startswith(b"GET ")
        assert sock.family == socket.AF_UNIX
        with sock:
            sock.setblocking(True)
            sock.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        assert (await read_to_end(client)).startswith(b"HTTP/1.1 400")
        lease.release()
    (closed,) = await plane.kind(DataPlane.CLOSED)
    assert closed[2] == "requested"


async def test_a_client_certificate_is_needed(files: TlsFiles) -> None:
    tls = params(
        files,
        need_client_auth=True,
        trust_store_path=str(files.truststore),
        trust_store_password=PASSWORD,
    )
    native = DataPlane(1)
    try:
        _, (_, port) = native.listen("127.0.0.1", 0, tls=plane_material(tls))
        plane = Plane(native, port)
        with pytest.raises((trio.BrokenResourceError, ssl.SSLError)):
            async with await tls_client(port, client_context(files)) as bare:
                await bare.send_all(CONNECT)
                await read_to_end(bare)
        (closed,) = await plane.kind(DataPlane.CLOSED)
        assert closed[2:] == ("tls", "the client sent no certificate (needClientAuth=true)")
        context = client_context(files, files.client_keystore)
        async with await tls_client(port, context) as client:
            await client.send_all(CONNECT)
            (frame,) = await plane.kind(DataPlane.FRAME)
            assert frame[2].command == "CONNECT"
    finally:
        native.shutdown()


async def test_client_auth_without_a_trust_store_trusts_the_system_ca_directory(
    files: TlsFiles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """needClientAuth without trustStorePath: the plane trusts what the socket shell's
    ``load_default_certs`` does, the CA directory too (``c_rehash``'s hashed names, beside
    CRLs and other files), each CA once."""
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "1a2b3c4d.0").write_bytes(files.ca.read_bytes())
    (certs / "ca.pem").symlink_to(certs / "1a2b3c4d.0")  # the same CA again
    (certs / "1a2b3c4d.r0").write_text("-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n")
    (certs / "README").write_text("not a certificate")
    (certs / "sub").mkdir()
    missing = str(tmp_path / "missing")
    paths = ssl.DefaultVerifyPaths(
        None, str(certs), "SSL_CERT_FILE", missing, "SSL_CERT_DIR", missing
    )
    monkeypatch.setattr(ssl, "get_default_verify_paths", lambda: paths)
    tls = params(files, need_client_auth=True)
    material = plane_material(tls)
    ca = x509.load_pem_x509_certificate(files.ca.read_bytes())
    assert material[3] == [ca.public_bytes(serialization.Encoding.DER)]
    native = DataPlane(1)
    try:  # a client certificate that CA signed is served
        _, (_, port) = native.listen("127.0.0.1", 0, tls=material)
        plane = Plane(native, port)
        async with await tls_client(port, client_context(files, files.client_keystore)) as client:
            await client.send_all(CONNECT)
            (frame,) = await plane.kind(DataPlane.FRAME)
            assert frame[2].command == "CONNECT"
    finally:
        native.shutdown()
    # Nothing that holds a certificate: the error as before.
    (certs / "1a2b3c4d.0").unlink()
    with pytest.raises(TlsSetupError, match="no system CA bundle found"):
        plane_material(tls)


def test_settings_rustls_cannot_serve_are_value_errors(files: TlsFiles) -> None:
    native = DataPlane(1)
    try:
        old = plane_material(params(files, protocols=("TLSv1.1", "TLSv1.2")))
        with pytest.raises(ValueError, match=r"TLSv1\.1 cannot be served by the data plane"):
            native.listen("127.0.0.1", 0, tls=old)
        cbc = plane_material(params(files, cipher_suites=("AES128-SHA",)))
        assert cbc[5] == ["TLS_RSA_WITH_AES_128_CBC_SHA"]  # the OpenSSL name, made IANA's
        with pytest.raises(ValueError, match="TLS_RSA_WITH_AES_128_CBC_SHA not available"):
            native.listen("127.0.0.1", 0, tls=cbc)
        with pytest.raises(TlsSetupError, match="no IANA name"):
            plane_material(params(files, cipher_suites=("DHE-RSA-AES256-CCM",)))
    finally:
        native.shutdown()


async def test_set_tls_serves_new_connections_with_new_material(
    tls_plane: tuple[Plane, int], files: TlsFiles, tmp_path: Path
) -> None:
    plane, listener = tls_plane
    other = create_tls_files(tmp_path, ["node"], ["127.0.0.1"], PASSWORD)
    plane.plane.set_tls(listener, plane_material(params(other)))
    # The old CA no longer verifies the server; the new one does.
    with pytest.raises((trio.BrokenResourceError, ssl.SSLError)):
        await tls_client(plane.port, client_context(files))
    async with await tls_client(plane.port, client_context(other)) as client:
        await client.send_all(CONNECT)
        await plane.kind(DataPlane.FRAME)
    with pytest.raises(ValueError, match="TLSv1"):
        plane.plane.set_tls(listener, plane_material(params(other, protocols=("TLSv1",))))
