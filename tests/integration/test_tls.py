"""TLS acceptors with real processes: stomp.py and artemis-py's own client and CLI over TLS,
client certificates (needClientAuth), PKCS12 and PEM stores, masked passwords, and what a
wrong client does to a node (nothing: one line in its log, everyone else still served):
plain text on a TLS port, TLS on a plain port, an untrusted or expired client certificate.
``sslAutoReload`` serves a renewed certificate to new connections without a restart."""

from __future__ import annotations

import datetime
import json
import os
import socket
import ssl
from pathlib import Path

import pytest
import trio
from cryptography import x509

from artemis_py.client import open_stomp_connection
from artemis_py.client.connection import TlsError
from artemis_py.client.url import parse_client_url
from artemis_py.transport.certificates import (
    TlsFiles,
    create_tls_files,
    issue_certificate,
    load_keystore,
    write_keystore,
)
from artemis_py.transport.sockets import LINGER

from .conftest import BrokerProcess, Client, artemis_py, start_refused, unique, wait_for

PASSWORD = "s3cret-pass"
HOSTS = ["localhost", "127.0.0.1"]
# The suite's nodes run with the data plane on (conftest.py) unless the environment says 0.
PLANE = os.environ.get("ARTEMIS_PY_DATA_PLANE", "1") == "1"


def assert_served_by_the_expected_path(node: BrokerProcess) -> None:
    """The TLS acceptor is served by the data plane (rustls) when it is on, by the socket
    shell otherwise: its "listening" log line says which."""
    lines = [line for line in node.log().splitlines() if "listening for STOMP" in line]
    assert lines, node.log()
    for line in lines:
        assert "over TLS" in line, line
        assert ("(data plane)" in line) == PLANE, line


@pytest.fixture(scope="module")
def pem_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return create_tls_files(
        tmp_path_factory.mktemp("pem"), ["node"], HOSTS, PASSWORD, store_type="PEM"
    )


@pytest.fixture(scope="module")
def p12_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return create_tls_files(tmp_path_factory.mktemp("p12"), ["node"], HOSTS, PASSWORD)


def acceptor_tls(files: TlsFiles, *extra: str, password: str = PASSWORD) -> str:
    params = [
        "sslEnabled=true",
        f"keyStorePath={files.keystores['node']}",
        f"keyStorePassword={password}",
        *extra,
    ]
    return ";" + ";".join(params)


def client_auth(files: TlsFiles) -> tuple[str, ...]:
    return (
        "needClientAuth=true",
        f"trustStorePath={files.truststore}",
        f"trustStorePassword={PASSWORD}",
    )


def stomp_ssl(files: TlsFiles, keystore: Path | None = None) -> dict[str, object]:
    """stomp.py's set_ssl arguments: trust the CA; with a PEM ``keystore``, present it."""
    options: dict[str, object] = {"ca_certs": str(files.ca)}
    if keystore is not None:
        options.update(key_file=str(keystore), cert_file=str(keystore), password=PASSWORD)
    return options


def round_trip(client: Client) -> None:
    client.clear()
    queue, body = f"/queue/{unique('tls')}", unique("body")
    client.subscribe(queue)
    client.send(queue, body, receipt=True)
    assert client.wait_messages(1)[0].body == body


def logged(node: BrokerProcess, needle: str, times: int = 1) -> str:
    """The node's log once it holds ``needle`` ``times`` times, else ``""``."""
    text = node.log()
    return text if text.count(needle) >= times else ""


def served_serial(port: int, ca: Path) -> int:
    """The serial number of the certificate a new TLS connection to the node sees."""
    context = ssl.create_default_context(cafile=str(ca))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


class BioClient:
    """A client's TLS session over ``raw`` through memory BIOs: the test decides when what
    it has to send goes out (``flush``)."""

    def __init__(self, raw: socket.socket, context: ssl.SSLContext) -> None:
        self.raw = raw
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_hostname="127.0.0.1")

    def handshake(self) -> None:
        """Raises what the handshake raises."""
        while True:
            try:
                self.tls.do_handshake()
                return
            except ssl.SSLWantReadError:
                self.flush()
                self.incoming.write(self.raw.recv(65536))

    def flush(self) -> None:
        self.raw.sendall(self.outgoing.read())


def stomp_refused(port: int, files: TlsFiles, keystore: Path | None) -> None:
    """A TLS STOMP client, with ``keystore``'s certificate if given, that must not get a
    CONNECTED. (Raw ssl, not stomp.py: after a refusal under TLS 1.3, stomp.py's reader can
    spin on the closed socket and its connect(wait=True) never returns.)"""
    context = ssl.create_default_context(cafile=str(files.ca))
    if keystore is not None:
        context.load_cert_chain(str(keystore), password=PASSWORD)
    answer = b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        try:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                # TLS 1.3: the server refuses the certificate after the client's handshake
                # ended, so the refusal may only come with the first read.
                tls.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
                while chunk := tls.recv(4096):
                    answer += chunk
        except (ssl.SSLError, ConnectionError):
            pass
    assert not answer.startswith(b"CONNECTED"), answer


def test_stomp_py_over_tls_with_a_pkcs12_key_store(make_broker, p12_files):
    node = make_broker(acceptor_params=acceptor_tls(p12_files))
    assert f"on 127.0.0.1:{node.port} over TLS" in node.log()
    assert_served_by_the_expected_path(node)
    client = node.client(ssl=stomp_ssl(p12_files))
    round_trip(client)
    client.disconnect()


def test_client_certificates_with_pem_stores(make_broker, pem_files, tmp_path):
    node = make_broker(acceptor_params=acceptor_tls(pem_files, *client_auth(pem_files)))
    client = node.client(ssl=stomp_ssl(pem_files, pem_files.client_keystore))
    round_trip(client)
    # No certificate: refused, and the log says so in one line.
    stomp_refused(node.port, pem_files, None)
    wait_for(lambda: "sent no certificate" in node.log() or "certificate" in node.log())
    # A certificate from another CA, and an expired one from the right CA.
    other = create_tls_files(tmp_path / "other", [], HOSTS, PASSWORD, store_type="PEM")
    stomp_refused(node.port, pem_files, other.client_keystore)
    ca_key, ca_cert, _ = load_keystore(pem_files.ca_key, PASSWORD, store_type="PEM")
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=30)
    key, cert = issue_certificate(ca_key, ca_cert, "old", HOSTS, days=1, not_before=past)
    expired = tmp_path / "expired.pem"
    write_keystore(expired, key, cert, PASSWORD, chain=[ca_cert], store_type="PEM")
    stomp_refused(node.port, pem_files, expired)
    log = wait_for(
        lambda: logged(node, "client certificate refused", times=2),
        message="two refused certificates in the log",
    )
    assert "certificate has expired" in log
    assert "Traceback" not in log
    # The node still serves the client with a good certificate.
    round_trip(client)
    round_trip(node.client(ssl=stomp_ssl(pem_files, pem_files.client_keystore)))
    assert_served_by_the_expected_path(node)


def test_plain_text_on_a_tls_port_is_closed_and_the_node_keeps_serving(make_broker, p12_files):
    node = make_broker(acceptor_params=acceptor_tls(p12_files))
    with socket.create_connection(("127.0.0.1", node.port), timeout=5) as plain:
        plain.sendall(b"CONNECT\naccept-version:1.2\nhost:localhost\n\n\x00")
        data = plain.recv(4096)
        while data and not data.startswith(b"\x15"):  # a TLS alert record at most
            data = plain.recv(4096)
        assert b"CONNECTED" not in data
    log = wait_for(lambda: logged(node, "not a TLS handshake"))
    assert "Traceback" not in log
    round_trip(node.client(ssl=stomp_ssl(p12_files)))
    assert_served_by_the_expected_path(node)


async def test_our_client_over_tls_and_on_a_plain_port(make_broker, p12_files):
    tls_node = make_broker(acceptor_params=acceptor_tls(p12_files))
    plain_node = make_broker()
    query = f"sslEnabled=true&trustStorePath={p12_files.truststore}&trustStorePassword={PASSWORD}"
    url = parse_client_url(f"tcp://127.0.0.1:{tls_node.port}?{query}")
    async with open_stomp_connection("127.0.0.1", tls_node.port, tls=url.options.tls) as conn:
        await conn.send("/queue/ours", "hello", receipt=True)
    with pytest.raises(TlsError, match="did not answer the TLS handshake"):
        with trio.fail_after(15):
            async with open_stomp_connection(
                "127.0.0.1", plain_node.port, tls=url.options.tls, connect_timeout=5
            ):
                pass
    assert "Traceback" not in plain_node.log()


def test_producer_and_consumer_over_tls_with_a_client_certificate(make_broker, p12_files):
    node = make_broker(acceptor_params=acceptor_tls(p12_files, *client_auth(p12_files)))
    url = (
        f"tcp://127.0.0.1:{node.port}?sslEnabled=true&trustStorePath={p12_files.truststore}"
        f"&trustStorePassword={PASSWORD}&keyStorePath={p12_files.client_keystore}"
        f"&keyStorePassword={PASSWORD}"
    )
    queue = f"queue://{unique('cli')}"
    sent = artemis_py(
        "producer", "--url", url, "--destination", queue, "--message-count", "3", timeout=60
    )
    assert sent.returncode == 0, sent.stderr
    got = artemis_py(
        "consumer", "--url", url, "--destination", queue, "--message-count", "3", timeout=60
    )
    assert got.returncode == 0, got.stderr
    # Without the client certificate: one line saying why, no traceback.
    bare = url.split("&keyStorePath")[0]
    refused = artemis_py(
        "producer", "--url", bare, "--destination", queue, "--message-count", "1", timeout=60
    )
    assert refused.returncode == 1, refused.stderr
    assert "Traceback" not in refused.stderr
    assert "certificate" in refused.stderr.lower() or "refused" in refused.stderr.lower()
    # artemis-py check over the same URL: every message sent is received, once.
    checked = artemis_py(
        "check", "--url", url, "--queue", unique("check"), "--count", "20", "--json", timeout=60
    )
    assert checked.returncode == 0, checked.stderr
    report = json.loads(checked.stdout)
    assert report["ok"], report
    assert (report["received"], report["lost"]) == (20, 0), report


def test_a_refused_client_certificate_ends_the_stream_without_a_reset(make_broker, p12_files):
    """TLS 1.3 refuses a missing client certificate after the client's side of the handshake
    ended, so the client may have sent its first frames already. The node closes lingering:
    the client reads the end of the stream (its tools then explain the refusal), never a TCP
    reset. The frames here come with the client's Finished, more than the node reads at once."""
    node = make_broker(acceptor_params=acceptor_tls(p12_files, *client_auth(p12_files)))
    context = ssl.create_default_context(cafile=str(p12_files.ca))
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", node.port), timeout=10) as raw:
            client = BioClient(raw, context)
            client.handshake()
            client.tls.write(b"SEND\ndestination:q\n\n" + b"x" * 500_000 + b"\x00")
            client.flush()
            while raw.recv(65536):
                pass  # ConnectionResetError without the lingering close
    assert "Traceback" not in node.log()


def test_a_refused_handshake_is_logged_while_the_client_keeps_its_socket(
    make_broker, p12_files, tmp_path
):
    """A client that does not trust the node's certificate refuses the handshake (an alert)
    and keeps its socket open: the log says so at once, not when the node gives up waiting
    for the client's close (the close linger, ``sockets.LINGER``)."""
    node = make_broker(acceptor_params=acceptor_tls(p12_files))
    other = create_tls_files(tmp_path / "other", [], HOSTS, PASSWORD, store_type="PEM")
    context = ssl.create_default_context(cafile=str(other.ca))
    with socket.create_connection(("127.0.0.1", node.port), timeout=10) as raw:
        client = BioClient(raw, context)
        with pytest.raises(ssl.SSLCertVerificationError):
            client.handshake()
        client.flush()  # the client's alert
        log = wait_for(
            lambda: logged(node, "TLS connection from"),  # either path's words after it
            timeout=LINGER / 2,
            message="the refused handshake in the log while the client's socket is open",
        )
    assert "Traceback" not in log


def test_a_tls_error_in_a_session_ends_it_and_its_deliveries_go_back(make_broker, p12_files):
    """A client whose TLS session breaks after the handshake (a record that fails its
    integrity check) is gone: its session ends, and what it had not acknowledged goes to
    another consumer."""
    node = make_broker(acceptor_params=acceptor_tls(p12_files))
    queue = f"/queue/{unique('tls-broken')}"
    context = ssl.create_default_context(cafile=str(p12_files.ca))
    with (
        socket.create_connection(("127.0.0.1", node.port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        tls.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
        tls.sendall(f"SUBSCRIBE\nid:1\ndestination:{queue}\nack:client\n\n\x00".encode())
        tls.sendall(b"SEND\ndestination:" + queue.encode() + b"\nreceipt:r\n\nkept\x00")
        received = b""
        while b"MESSAGE" not in received or b"RECEIPT" not in received:
            received += tls.recv(65536)
        # An application-data record whose MAC cannot check out, under the session's keys.
        os.write(tls.fileno(), b"\x17\x03\x03\x00\x20" + b"\x00" * 32)
        other = node.client(ssl=stomp_ssl(p12_files))
        other.subscribe(queue)
        assert [m.body for m in other.wait_messages(1, timeout=10)] == ["kept"]
        other.disconnect()
    assert "Traceback" not in node.log()


def test_broken_tls_configuration_is_refused_at_start(make_broker, p12_files, tmp_path):
    log = start_refused(
        make_broker(start=False, acceptor_params=acceptor_tls(p12_files, password="wrong"))
    )
    assert "wrong password" in log
    assert "keyStorePath" in log
    jks = tmp_path / "store.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + os.urandom(64))
    params = f";sslEnabled=true;keyStorePath={jks};keyStorePassword=x"
    log = start_refused(make_broker(start=False, acceptor_params=params))
    assert "keytool -importkeystore" in log


def test_masked_key_store_password(make_broker, p12_files):
    passwords = pytest.importorskip("artemis_py.config.passwords")
    masked = f"ENC({passwords.mask_bare(PASSWORD)})"
    node = make_broker(acceptor_params=acceptor_tls(p12_files, password=masked))
    round_trip(node.client(ssl=stomp_ssl(p12_files)))


def test_ssl_auto_reload_serves_a_renewed_certificate(make_broker, tmp_path):
    files = create_tls_files(tmp_path / "tls", ["node"], HOSTS, PASSWORD)
    node = make_broker(acceptor_params=acceptor_tls(files, "sslAutoReload=true"))
    first = served_serial(node.port, files.ca)
    client = node.client(ssl={"ca_certs": str(files.ca)})
    ca_key, ca_cert, _ = load_keystore(files.ca_key, PASSWORD, store_type="PEM")
    key, cert = issue_certificate(ca_key, ca_cert, "node", HOSTS)
    renewed = tmp_path / "renewed.p12"
    write_keystore(renewed, key, cert, PASSWORD, chain=[ca_cert])
    os.replace(renewed, files.keystores["node"])
    wait_for(lambda: served_serial(node.port, files.ca) == cert.serial_number, 15)
    assert cert.serial_number != first
    round_trip(client)  # the connection made before the reload goes on
    assert "reloaded" in node.log()
    assert_served_by_the_expected_path(node)


@pytest.mark.skipif(not PLANE, reason="the data plane's limits (ARTEMIS_PY_DATA_PLANE=0 here)")
@pytest.mark.parametrize(
    ("setting", "named"),
    [
        (
            "enabledProtocols=TLSv1.1,TLSv1.2",
            "enabledProtocols: TLSv1.1 cannot be served by the data plane",
        ),
        (
            "enabledCipherSuites=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_RSA_WITH_AES_128_CBC_SHA",
            "enabledCipherSuites: TLS_RSA_WITH_AES_128_CBC_SHA not available",
        ),
    ],
)
def test_settings_the_data_plane_cannot_serve_keep_the_acceptor_on_the_event_loop(
    make_broker, p12_files, setting, named
):
    """rustls speaks TLS 1.2 and 1.3 only, and not every suite OpenSSL has: such an
    acceptor is served by Python's ssl as before, and the node names the setting at start,
    never dropping it in silence."""
    node = make_broker(acceptor_params=acceptor_tls(p12_files, setting))
    log = node.log()
    assert f"acceptor stomp: served on the event loop, not by the data plane: {named}" in log
    lines = [line for line in log.splitlines() if "listening for STOMP" in line]
    assert lines
    assert all("over TLS" in line and "(data plane)" not in line for line in lines), lines
    context = ssl.create_default_context(cafile=str(p12_files.ca))
    with (
        socket.create_connection(("127.0.0.1", node.port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        tls.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
        assert tls.recv(64).startswith(b"CONNECTED\n")


def test_a_tls_1_2_suite_list_serves_tls_1_2_only(make_broker, p12_files):
    """enabledCipherSuites without a TLS 1.3 suite limits the acceptor to TLS 1.2 (as in
    Java), on either path."""
    suites = "enabledCipherSuites=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
    node = make_broker(acceptor_params=acceptor_tls(p12_files, suites))
    context = ssl.create_default_context(cafile=str(p12_files.ca))
    with (
        socket.create_connection(("127.0.0.1", node.port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        assert tls.version() == "TLSv1.2"
        assert tls.cipher()[0] == "ECDHE-ECDSA-AES128-GCM-SHA256"
        tls.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
        assert tls.recv(64).startswith(b"CONNECTED\n")
    assert_served_by_the_expected_path(node)
