"""The private CA, node certificates and their stores (transport/certificates.py): what they
name, how long they live, that they verify against the CA in a real TLS handshake, that the
stores read back with the password (and only with it), and that Java's keytool reads them."""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import ssl
import subprocess

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from artemis_py.transport.certificates import (
    CertificateStoreError,
    create_tls_files,
    generate_ca,
    issue_certificate,
    load_keystore,
    load_truststore,
    write_keystore,
    write_truststore,
)

PASSWORD = "s3cret"


@pytest.fixture(scope="module")
def ca():
    return generate_ca("test CA")


def test_hosts_become_dns_and_ip_subject_alt_names(ca):
    _, cert = issue_certificate(*ca, "node1", ["localhost", "127.0.0.1", "::1", "broker.example"])
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost", "broker.example"]
    assert san.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    ]
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(usage) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    with pytest.raises(ValueError, match="at least one host"):
        issue_certificate(*ca, "node1", [])


def test_validity_and_chain(ca):
    ca_key, ca_cert = ca
    start = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
    _, cert = issue_certificate(ca_key, ca_cert, "old", ["localhost"], days=10, not_before=start)
    assert cert.not_valid_before_utc == start
    assert cert.not_valid_after_utc == start + datetime.timedelta(days=10)
    _, fresh = issue_certificate(ca_key, ca_cert, "fresh", ["localhost"], days=30)
    now = datetime.datetime.now(datetime.UTC)
    assert fresh.not_valid_before_utc < now < fresh.not_valid_after_utc
    assert fresh.not_valid_after_utc - now < datetime.timedelta(days=30)
    fresh.verify_directly_issued_by(ca_cert)
    _, other_cert = generate_ca("another CA")
    with pytest.raises(ValueError, match="subject does not match"):
        fresh.verify_directly_issued_by(other_cert)
    assert ca_cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, hostname: str) -> None:
    """A full TLS handshake in memory (no sockets)."""
    s_in, s_out, c_in, c_out = (ssl.MemoryBIO() for _ in range(4))
    server_side = server.wrap_bio(s_in, s_out, server_side=True)
    client_side = client.wrap_bio(c_in, c_out, server_hostname=hostname)
    done = {"server": False, "client": False}
    for _ in range(10):
        for name, side in (("client", client_side), ("server", server_side)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            return
    raise AssertionError("handshake did not finish")


def test_pem_stores_verify_in_a_real_handshake_with_client_auth(tmp_path):
    files = create_tls_files(
        tmp_path, ["node1"], ["localhost", "127.0.0.1"], PASSWORD, store_type="PEM"
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(files.keystores["node1"], password=PASSWORD)
    server.load_verify_locations(files.truststore)
    server.verify_mode = ssl.CERT_REQUIRED
    client = ssl.create_default_context(cafile=str(files.ca))
    client.load_cert_chain(files.client_keystore, password=PASSWORD)
    _handshake(server, client, "127.0.0.1")
    _handshake(server, client, "localhost")
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
        _handshake(server, client, "elsewhere.example")
    untrusted = ssl.create_default_context(
        cafile=str(create_tls_files(tmp_path / "b", ["x"], ["localhost"], PASSWORD).ca)
    )
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(server, untrusted, "localhost")


@pytest.mark.parametrize("store_type", ["PKCS12", "PEM"])
def test_stores_round_trip_with_the_password_only(tmp_path, ca, store_type):
    ca_key, ca_cert = ca
    key, cert = issue_certificate(ca_key, ca_cert, "node1", ["localhost"])
    path = tmp_path / "keystore"
    write_keystore(path, key, cert, PASSWORD, chain=[ca_cert], store_type=store_type)
    assert path.stat().st_mode & 0o077 == 0
    assert b"BEGIN PRIVATE KEY" not in path.read_bytes()
    loaded_key, loaded_cert, chain = load_keystore(path, PASSWORD, store_type=store_type)
    assert loaded_cert == cert
    assert chain == [ca_cert]
    assert loaded_key.private_numbers() == key.private_numbers()
    with pytest.raises(CertificateStoreError, match=f"key store {path}: wrong keyStorePassword"):
        load_keystore(path, "wrong", store_type=store_type)
    trust = tmp_path / "truststore"
    write_truststore(trust, [ca_cert], PASSWORD, store_type=store_type)
    assert load_truststore(trust, PASSWORD, store_type=store_type) == [ca_cert]
    if store_type == "PKCS12":
        with pytest.raises(CertificateStoreError, match="wrong trustStorePassword"):
            load_truststore(trust, "wrong")


def test_clear_errors(tmp_path, ca):
    key, cert = issue_certificate(*ca, "n", ["localhost"])
    with pytest.raises(CertificateStoreError, match="JKS store with: keytool"):
        write_keystore(tmp_path / "k", key, cert, PASSWORD, store_type="JKS")
    with pytest.raises(CertificateStoreError, match="must not be empty"):
        write_keystore(tmp_path / "k", key, cert, "")
    with pytest.raises(CertificateStoreError, match=r"key store .*missing\.p12: No such file"):
        load_keystore(tmp_path / "missing.p12", PASSWORD)
    plain = tmp_path / "plain.pem"
    plain.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        + cert.public_bytes(serialization.Encoding.PEM)
    )
    with pytest.raises(CertificateStoreError, match="not encrypted"):
        load_keystore(plain, PASSWORD, store_type="PEM")


def test_a_second_run_reuses_the_ca(tmp_path):
    first = create_tls_files(tmp_path, ["node1"], ["localhost"], PASSWORD)
    second = create_tls_files(tmp_path, ["node2"], ["localhost"], PASSWORD)
    assert first.ca.read_bytes() == second.ca.read_bytes()
    _, node2, chain = load_keystore(second.keystores["node2"], PASSWORD)
    node2.verify_directly_issued_by(chain[0])
    assert chain[0].public_bytes(serialization.Encoding.PEM) == first.ca.read_bytes()


@pytest.mark.skipif(shutil.which("keytool") is None, reason="needs Java's keytool")
def test_java_reads_the_pkcs12_key_store_and_trust_store(tmp_path):
    files = create_tls_files(tmp_path, ["node1"], ["localhost"], PASSWORD)
    for path, entry in (
        (files.keystores["node1"], "PrivateKeyEntry"),
        (files.truststore, "trustedCertEntry"),
    ):
        listing = subprocess.run(
            [
                "keytool",
                "-list",
                "-keystore",
                str(path),
                "-storetype",
                "PKCS12",
                "-storepass",
                PASSWORD,
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "contains 1 entry" in listing
        assert entry in listing
