"""Certificates for TLS: a private certificate authority, node and client certificates, and
the key stores and trust stores that acceptors, connectors and clients load.

Everything is made with ``cryptography``. Keys are EC P-256 (ECDSA with SHA-256): Java 17 (so
Apache Artemis), OpenSSL (so Python's ``ssl`` and stomp.py) and every current TLS stack speak
it; a key is made in a millisecond where RSA 2048 takes tens, and an ECDSA handshake costs the
server less than an RSA one.

Stores come in the two types Artemis acceptors take besides JKS (Artemis docs, "Configuring
the Transport", ``keyStoreType``):

- ``PKCS12``: a key store holds one private key, its certificate and the chain, encrypted with
  the password (PBES2 / AES-256, the default of Java since 8u301 and 11.0.12, which Java 17
  reads); a trust store holds certificates only, each bag marked "trusted for any purpose"
  (the attribute Java's keytool writes, without which Java sees an empty trust store).
- ``PEM``: a key store is the encrypted private key (PKCS#8) followed by the certificate
  chain in one file; a trust store is a bundle of certificates (there is nothing secret).

Private keys never land unprotected on disk: key stores are encrypted with the password and
written with mode 0600.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# What we make is EC; what we read may also be RSA (a key store made by keytool or openssl).
PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
STORE_TYPES = ("PKCS12", "PEM")
# Clocks of the machines of a cluster disagree a little: a certificate made now is valid
# from a few minutes ago, or a peer whose clock is behind would see it "not yet valid".
CLOCK_SKEW = datetime.timedelta(minutes=5)


class CertificateStoreError(ValueError):
    """A key store or trust store cannot be written or read (the message names the file)."""


@dataclass(frozen=True)
class TlsFiles:
    """What :func:`create_tls_files` wrote: paths of the stores of a private CA's cluster."""

    directory: Path
    store_type: str
    ca: Path  # the CA certificate, PEM (give it to any client: it is the trust anchor)
    ca_key: Path  # the CA private key, encrypted PEM (to issue more certificates later)
    truststore: Path  # the CA certificate as a trust store of store_type
    client_keystore: Path  # a client certificate (for needClientAuth acceptors)
    keystores: Mapping[str, Path]  # node name -> that node's key store


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _san(host: str) -> x509.GeneralName:
    """An IP literal becomes an iPAddress entry, anything else a dNSName: hostname checks
    (Python's ``ssl``, Java's ``verifyHost``) match an IP only against iPAddress entries."""
    try:
        return x509.IPAddress(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return x509.DNSName(host)


def _builder(
    common_name: str,
    issuer: x509.Name,
    public: ec.EllipticCurvePublicKey,
    start: datetime.datetime,
    days: int,
    *,
    ca: bool,
) -> x509.CertificateBuilder:
    """What a CA's and an end certificate share: subject, issuer, validity, basic
    constraints (a CA signs end certificates only) and key usage (a CA signs certificates
    and CRLs; an end certificate signs handshakes)."""
    return (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(issuer)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=ca,
                crl_sign=ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )


def generate_ca(common_name: str, *, days: int = 3650) -> tuple[PrivateKey, x509.Certificate]:
    """A self-signed certificate authority that may sign end certificates only."""
    key = ec.generate_private_key(ec.SECP256R1())
    start = _now() - CLOCK_SKEW
    public = key.public_key()
    cert = (
        _builder(common_name, _name(common_name), public, start, days, ca=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def issue_certificate(
    ca_key: PrivateKey,
    ca_cert: x509.Certificate,
    common_name: str,
    hosts: Sequence[str],
    *,
    days: int = 825,
    not_before: datetime.datetime | None = None,
) -> tuple[PrivateKey, x509.Certificate]:
    """A new key and a certificate for it signed by the CA, for server and client auth.

    ``hosts`` become the subjectAltName entries (what hostname verification checks).
    ``not_before`` defaults to a few minutes ago; pass a past one to make an expired
    certificate (tests). 825 days is the longest validity clients accept for TLS servers.
    """
    if not hosts:
        raise ValueError(f"certificate {common_name!r}: give at least one host name or address")
    key = ec.generate_private_key(ec.SECP256R1())
    start = not_before if not_before is not None else _now() - CLOCK_SKEW
    public = key.public_key()
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    cert = (
        _builder(common_name, ca_cert.subject, public, start, days, ca=False)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert


def _check(password: str, store_type: str) -> None:
    if store_type not in STORE_TYPES:
        raise CertificateStoreError(
            f"store type {store_type!r} is not supported: use PKCS12 or PEM "
            "(convert a JKS store with: keytool -importkeystore -deststoretype PKCS12 ...)"
        )
    if not password:
        raise CertificateStoreError("a store password must not be empty")


def _write(path: Path, data: bytes, mode: int) -> None:
    """Write the whole file under a temporary name, then rename it: a node reloading its
    key store (sslAutoReload) never reads half of a new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _alias(cert: x509.Certificate) -> bytes:
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value).lower().encode() if names else b"certificate"


def write_keystore(
    path: Path,
    key: PrivateKey,
    cert: x509.Certificate,
    password: str,
    *,
    chain: Sequence[x509.Certificate] = (),
    store_type: str = "PKCS12",
) -> None:
    """A key store: ``key`` with ``cert`` and the ``chain`` above it, encrypted with
    ``password``, file mode 0600."""
    _check(password, store_type)
    encryption = serialization.BestAvailableEncryption(password.encode())
    if store_type == "PKCS12":
        # The friendly name is the alias keytool and Artemis's logs show.
        data = pkcs12.serialize_key_and_certificates(
            _alias(cert), key, cert, list(chain) or None, encryption
        )
    else:
        data = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )
        for each in (cert, *chain):
            data += each.public_bytes(serialization.Encoding.PEM)
    _write(Path(path), data, 0o600)


def write_truststore(
    path: Path, certs: Sequence[x509.Certificate], password: str, *, store_type: str = "PKCS12"
) -> None:
    """A trust store holding ``certs`` only (no key): PKCS12 with each certificate marked
    trusted, as Java reads trust stores, or a PEM bundle (``password`` is then unused)."""
    _check(password, store_type)
    if not certs:
        raise CertificateStoreError(f"{path}: a trust store needs at least one certificate")
    if store_type == "PKCS12":
        data = pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(c, _alias(c)) for c in certs],
            serialization.BestAvailableEncryption(password.encode()),
        )
    else:
        data = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)
    _write(Path(path), data, 0o644)


def _read_bytes(path: Path, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise CertificateStoreError(f"{what} {path}: {exc.strerror or exc}") from None


def load_keystore(
    path: Path, password: str, *, store_type: str = "PKCS12"
) -> tuple[PrivateKey, x509.Certificate, list[x509.Certificate]]:
    """Read a key store written by :func:`write_keystore` (or keytool, or openssl): its
    private key, certificate and chain. A wrong password or another format is a
    :class:`CertificateStoreError` naming the file."""
    _check(password, store_type)
    data = _read_bytes(path, "key store")
    try:
        if store_type == "PKCS12":
            store = pkcs12.load_pkcs12(data, password.encode())
            key = store.key
            cert = store.cert.certificate if store.cert else None
            chain = [c.certificate for c in store.additional_certs]
        else:
            key = serialization.load_pem_private_key(data, password.encode())
            cert, *chain = x509.load_pem_x509_certificates(data)
    except ValueError:
        raise CertificateStoreError(
            f"key store {path}: wrong keyStorePassword, or not a {store_type} key store"
        ) from None
    except TypeError:  # a PEM key that is not encrypted while a password was given
        raise CertificateStoreError(
            f"key store {path}: the private key is not encrypted (encrypt it with the password)"
        ) from None
    if key is None or cert is None:
        raise CertificateStoreError(f"key store {path}: it holds no private key and certificate")
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise CertificateStoreError(
            f"key store {path}: a {type(key).__name__} key; use an EC or RSA key"
        )
    return key, cert, chain


def load_truststore(
    path: Path, password: str, *, store_type: str = "PKCS12"
) -> list[x509.Certificate]:
    """The certificates of a trust store (PKCS12 or a PEM bundle), clear errors otherwise."""
    _check(password, store_type)
    data = _read_bytes(path, "trust store")
    try:
        if store_type == "PKCS12":
            store = pkcs12.load_pkcs12(data, password.encode())
            certs = [c.certificate for c in store.additional_certs]
            if store.cert is not None:
                certs.insert(0, store.cert.certificate)
        else:
            certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        raise CertificateStoreError(
            f"trust store {path}: wrong trustStorePassword, or not a {store_type} trust store"
        ) from None
    if not certs:
        raise CertificateStoreError(f"trust store {path}: it holds no certificate")
    return certs


def store_suffix(store_type: str) -> str:
    return ".p12" if store_type == "PKCS12" else ".pem"


def create_tls_files(
    directory: Path,
    nodes: Sequence[str],
    hosts: Sequence[str],
    password: str,
    *,
    store_type: str = "PKCS12",
    days: int = 825,
) -> TlsFiles:
    """A private CA and the stores of a cluster: one key store per node (``<node>-keystore``),
    a client key store, the trust store and ``ca.pem``.

    Every node certificate names all ``hosts`` (any node may move to any of them). When
    ``directory`` already holds ``ca.pem`` and ``ca-key.pem`` (encrypted with ``password``)
    that CA is reused, so nodes added later are trusted by the ones made before.
    """
    _check(password, store_type)
    directory = Path(directory)
    suffix = store_suffix(store_type)
    ca_path, ca_key_path = directory / "ca.pem", directory / "ca-key.pem"
    if ca_path.exists() and ca_key_path.exists():
        ca_key, ca_cert, _ = load_keystore(ca_key_path, password, store_type="PEM")
    else:
        ca_key, ca_cert = generate_ca("artemis-py CA " + secrets.token_hex(4))
        write_keystore(ca_key_path, ca_key, ca_cert, password, store_type="PEM")
        _write(ca_path, ca_cert.public_bytes(serialization.Encoding.PEM), 0o644)
    keystores: dict[str, Path] = {}
    for node in nodes:
        key, cert = issue_certificate(ca_key, ca_cert, node, hosts, days=days)
        keystores[node] = directory / f"{node}-keystore{suffix}"
        write_keystore(keystores[node], key, cert, password, chain=[ca_cert], store_type=store_type)
    client_key, client_cert = issue_certificate(ca_key, ca_cert, "client", hosts, days=days)
    client_keystore = directory / f"client-keystore{suffix}"
    write_keystore(
        client_keystore, client_key, client_cert, password, chain=[ca_cert], store_type=store_type
    )
    truststore = directory / f"truststore{suffix}"
    write_truststore(truststore, [ca_cert], password, store_type=store_type)
    return TlsFiles(
        directory=directory,
        store_type=store_type,
        ca=ca_path,
        ca_key=ca_key_path,
        truststore=truststore,
        client_keystore=client_keystore,
        keystores=keystores,
    )
