"""TLS URL parameters of acceptors and connectors, and the key stores they name.

Artemis configures TLS on the transport URL (docs "Configuring the Transport", TransportConstants):
``tcp://host:port?sslEnabled=true;keyStorePath=...;keyStorePassword=...``. This module reads
those parameters into :class:`TlsParams` and opens the stores they name with ``cryptography``,
so that a broken setup (a missing file, a wrong password, a JKS store, an unknown protocol or
cipher suite) is reported when broker.xml is read or a client URL is parsed, not at the first
connection. Building ``ssl.SSLContext`` objects from them is :mod:`artemis_py.transport.tls_contexts`'s
job; the client parses its URLs with the same function.

Stores: PKCS12 (``.p12``/``.pfx``) and PEM (an optionally encrypted private key and the
certificate chain in one file; a PEM trust store is a bundle of certificates). A store's type
is ``keyStoreType``/``trustStoreType`` when given, else recognised from its content. JKS and
JCEKS stores are refused with the ``keytool`` command that converts them. Passwords may be
masked ``ENC(...)`` values (:func:`artemis_py.config.passwords.reveal`).

Java names cipher suites by their IANA names (``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256``),
OpenSSL by its own (``ECDHE-RSA-AES128-GCM-SHA256``): :data:`CIPHER_NAMES` maps the common
ones; an OpenSSL name is accepted as it is.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.serialization import pkcs12

from artemis_py.config.passwords import reveal

__all__ = [
    "CIPHER_NAMES",
    "PROTOCOL_NAMES",
    "TLS_PARAM_NAMES",
    "KeyMaterial",
    "StoreError",
    "TlsParams",
    "TlsRead",
    "load_key_store",
    "load_trust_store",
    "read_tls_params",
]

Role = Literal["acceptor", "connector"]

#: The TLS parameters artemis-py implements (Artemis TransportConstants names).
TLS_PARAM_NAMES = frozenset(
    {
        "sslEnabled",
        "keyStorePath",
        "keyStorePassword",
        "keyStoreType",
        "keyStoreAlias",
        "trustStorePath",
        "trustStorePassword",
        "trustStoreType",
        "needClientAuth",
        "wantClientAuth",
        "verifyHost",
        "trustAll",
        "enabledProtocols",
        "enabledCipherSuites",
        "sslAutoReload",
    }
)
#: Artemis TLS parameters read but not acted upon: named in the start-up warning.
_IGNORED = frozenset(
    {
        "keyStoreProvider",
        "trustStoreProvider",
        "sslProvider",
        "forceSSLParameters",
        "useDefaultSslContext",
        "sniHost",
        "sslContext",
    }
)
#: Artemis TLS parameters whose absence would make the connection less safe than the user
#: asked for: an error, not a warning.
_REFUSED = {
    "crlPath": "revoked certificates would be accepted",
    "trustManagerFactoryPlugin": "the plugin's trust decisions would not be made",
    "sslKrb5Config": "Kerberos cipher suites are not available",
    "keyPassword": "the key would not be decrypted with it",
}

#: Java protocol names -> the TLS version they name.
PROTOCOL_NAMES = {"TLSv1": (1, 0), "TLSv1.1": (1, 1), "TLSv1.2": (1, 2), "TLSv1.3": (1, 3)}

#: IANA (Java) cipher suite names -> OpenSSL names.
CIPHER_NAMES = {
    "TLS_AES_128_GCM_SHA256": "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384": "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256": "TLS_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256": "DHE-RSA-AES256-SHA256",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256": "DHE-RSA-AES128-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA": "DHE-RSA-AES256-SHA",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA": "DHE-RSA-AES128-SHA",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA256": "AES256-SHA256",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
}
TLS13_SUITES = frozenset(
    {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}
)
# Java's signalling pseudo-suite (RFC 5746): OpenSSL always sends it; nothing to enable.
_SIGNALLING = "TLS_EMPTY_RENEGOTIATION_INFO_SCSV"
_OPENSSL_NAME = re.compile(r"[A-Z0-9]+(-[A-Z0-9]+)+")
_STORE_TYPES = ("PKCS12", "PEM")


class StoreError(ValueError):
    """A key store or trust store cannot be used (the message says which and why)."""


@dataclass(frozen=True, slots=True)
class KeyMaterial:
    """A key store's private key, its certificate and the rest of the chain."""

    key: PrivateKeyTypes
    certificate: x509.Certificate
    chain: tuple[x509.Certificate, ...] = ()


@dataclass(frozen=True, slots=True)
class TlsParams:
    """The TLS settings of one acceptor or connector (Artemis's defaults).

    Paths are absolute. Passwords are plain (an ``ENC(...)`` value is revealed) and never
    shown by ``repr``. ``verify_host`` is Artemis's per-side default when absent: true for a
    connector (the server's certificate must name the host dialled), false for an acceptor.
    ``key_store_type``/``trust_store_type`` are ``PKCS12`` or ``PEM``, or ``None``: recognised
    from the file. ``cipher_suites`` are OpenSSL names (empty: OpenSSL's defaults);
    ``protocols`` the Java names (empty: OpenSSL's defaults, TLS 1.2 and 1.3).
    """

    enabled: bool = False
    key_store_path: str | None = None
    key_store_password: str | None = field(default=None, repr=False)
    key_store_type: str | None = None
    key_store_alias: str | None = None
    trust_store_path: str | None = None
    trust_store_password: str | None = field(default=None, repr=False)
    trust_store_type: str | None = None
    need_client_auth: bool = False
    want_client_auth: bool = False
    verify_host: bool = False
    trust_all: bool = False
    protocols: tuple[str, ...] = ()
    cipher_suites: tuple[str, ...] = ()
    auto_reload: bool = False

    @property
    def watched_files(self) -> tuple[str, ...]:
        """The files whose renewal ``sslAutoReload`` picks up."""
        return tuple(p for p in (self.key_store_path, self.trust_store_path) if p)


@dataclass(slots=True)
class TlsRead:
    """What :func:`read_tls_params` found: the settings, errors, and ignored parameters."""

    params: TlsParams
    errors: list[str]
    ignored: list[str]


def _bool(name: str, value: str, errors: list[str]) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        errors.append(f"URL parameter {name}={value!r}: expected true or false")
        return False
    return lowered == "true"


def _reveal(name: str, value: str, unmask: Callable[[str], str] | None, errors: list[str]) -> str:
    try:
        return (unmask or reveal)(value)
    except ValueError as exc:
        errors.append(f"URL parameter {name}: {exc}")
        return value


def _path(name: str, value: str, base_dir: str | None, errors: list[str]) -> str:
    """An absolute path: a relative one is looked up next to broker.xml first, then in the
    working directory (where Artemis looks)."""
    path = os.path.expanduser(value.strip())
    if not os.path.isabs(path):
        beside = os.path.join(base_dir, path) if base_dir else None
        path = os.path.abspath(beside if beside and os.path.exists(beside) else path)
    if not os.path.isfile(path):
        errors.append(f"URL parameter {name}: no such file: {path}")
    return path


def _store_type(name: str, value: str, errors: list[str]) -> str | None:
    kind = value.strip().upper().replace("#", "")
    if kind in ("JKS", "JCEKS"):
        errors.append(f"URL parameter {name}={value}: {_jks_advice(kind)}")
        return None
    if kind not in _STORE_TYPES:
        errors.append(f"URL parameter {name}={value}: supported store types are PKCS12 and PEM")
        return None
    return kind


def _jks_advice(kind: str, path: str = "STORE.jks") -> str:
    return (
        f"{kind} key stores are Java-only; convert it to PKCS12 with "
        f"`keytool -importkeystore -srckeystore {path} -destkeystore store.p12 "
        f"-deststoretype PKCS12` and name the .p12 file"
    )


def _protocols(value: str, errors: list[str]) -> tuple[str, ...]:
    names = [p.strip() for p in value.split(",") if p.strip()]
    known = [n for n in names if n in PROTOCOL_NAMES]
    for name in names:
        if name not in PROTOCOL_NAMES:
            errors.append(
                f"URL parameter enabledProtocols: unknown or unsupported protocol '{name}' "
                f"(known: {', '.join(PROTOCOL_NAMES)})"
            )
    versions = sorted(PROTOCOL_NAMES[n] for n in known)
    every = sorted(PROTOCOL_NAMES.values())
    if versions and every[every.index(versions[0]) : every.index(versions[-1]) + 1] != versions:
        errors.append(
            "URL parameter enabledProtocols: the protocols must be a range without gaps "
            f"(got {', '.join(known)})"
        )
    return tuple(known)


def _cipher_suites(value: str, errors: list[str]) -> tuple[str, ...]:
    suites: list[str] = []
    for name in (s.strip() for s in value.split(",")):
        if not name or name == _SIGNALLING:
            continue
        mapped = CIPHER_NAMES.get(name)
        if mapped is None and _OPENSSL_NAME.fullmatch(name):
            mapped = name  # already an OpenSSL name
        if mapped is None:
            errors.append(
                f"URL parameter enabledCipherSuites: no OpenSSL equivalent known for '{name}' "
                "(use its OpenSSL name, e.g. ECDHE-RSA-AES128-GCM-SHA256)"
            )
            continue
        suites.append(mapped)
    return tuple(suites)


def read_tls_params(
    params: Mapping[str, str],
    role: Role,
    *,
    base_dir: str | None = None,
    check: bool = True,
    unmask: Callable[[str], str] | None = None,
) -> TlsRead:
    """Read the TLS parameters of an acceptor's or connector's URL.

    ``errors`` are one line each, naming the parameter; ``ignored`` names the parameters
    read but not implemented. With ``check`` (and ``sslEnabled=true``), the stores are opened
    with their passwords so that a wrong one is an error now. ``unmask`` reads a password as
    broker.xml's ``<mask-password>`` and ``<password-codec>`` say (default: only ``ENC(...)``
    values are masked, with Artemis's default key).
    """
    # Long: one branch per parameter, in Artemis's documentation order.
    errors: list[str] = []
    values: dict[str, object] = {}
    get = params.get
    enabled = _bool("sslEnabled", get("sslEnabled", "false"), errors)
    for name, attr in (
        ("needClientAuth", "need_client_auth"),
        ("wantClientAuth", "want_client_auth"),
        ("verifyHost", "verify_host"),
        ("trustAll", "trust_all"),
        ("sslAutoReload", "auto_reload"),
    ):
        if name in params:
            values[attr] = _bool(name, params[name], errors)
    values.setdefault("verify_host", role == "connector")
    for name, attr in (("keyStorePath", "key_store_path"), ("trustStorePath", "trust_store_path")):
        if name in params and enabled:
            values[attr] = _path(name, params[name], base_dir, errors)
    for name, attr in (
        ("keyStorePassword", "key_store_password"),
        ("trustStorePassword", "trust_store_password"),
    ):
        if name in params:
            values[attr] = _reveal(name, params[name], unmask, errors)
    for name, attr in (("keyStoreType", "key_store_type"), ("trustStoreType", "trust_store_type")):
        if name in params:
            values[attr] = _store_type(name, params[name], errors)
    if "keyStoreAlias" in params:
        values["key_store_alias"] = params["keyStoreAlias"].strip()
    if "enabledProtocols" in params:
        values["protocols"] = _protocols(params["enabledProtocols"], errors)
    if "enabledCipherSuites" in params:
        values["cipher_suites"] = _cipher_suites(params["enabledCipherSuites"], errors)
    tls = TlsParams(enabled=enabled, **values)  # type: ignore[arg-type]
    ignored = sorted(name for name in params if name in _IGNORED)
    if enabled:
        errors += _refused(params, role, tls)
        if check:
            errors += check_stores(tls)
    return TlsRead(tls, errors, ignored)


def _refused(params: Mapping[str, str], role: Role, tls: TlsParams) -> list[str]:
    errors = [
        f"URL parameter {name} is not implemented, and ignoring it would be less safe: {why}"
        for name, why in _REFUSED.items()
        if name in params
    ]
    if role == "acceptor":
        if tls.key_store_path is None:
            errors.append("sslEnabled=true needs keyStorePath (the node's key and certificate)")
        if tls.verify_host:
            errors.append(
                "URL parameter verifyHost=true on an acceptor (checking a client "
                "certificate's host name) is not implemented"
            )
    return errors


def check_stores(tls: TlsParams) -> list[str]:
    """Open the stores ``tls`` names; one error per store that cannot be used."""
    errors: list[str] = []
    if tls.key_store_path and os.path.isfile(tls.key_store_path):  # else reported already
        try:
            load_key_store(
                tls.key_store_path, tls.key_store_password, tls.key_store_type, tls.key_store_alias
            )
        except StoreError as exc:
            errors.append(f"keyStorePath: {exc}")
    if tls.trust_store_path and os.path.isfile(tls.trust_store_path):
        try:
            load_trust_store(tls.trust_store_path, tls.trust_store_password, tls.trust_store_type)
        except StoreError as exc:
            errors.append(f"trustStorePath: {exc}")
    return errors


# -- stores ----------------------------------------------------------------------------------


def _read_store(path: str, declared: str | None) -> tuple[bytes, str]:
    """The store's bytes and its type (declared, or recognised from the content)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror or exc}") from None
    if data[:4] == b"\xfe\xed\xfe\xed":
        raise StoreError(f"{path} is a JKS store: {_jks_advice('JKS', path)}")
    if data[:4] == b"\xce\xce\xce\xce":
        raise StoreError(f"{path} is a JCEKS store: {_jks_advice('JCEKS', path)}")
    found = "PEM" if b"-----BEGIN " in data[:4096] else "PKCS12"
    if declared is not None and declared != found:
        raise StoreError(f"{path} is declared {declared} but holds {found} data")
    return data, found


def _pkcs12(path: str, data: bytes, password: str | None) -> pkcs12.PKCS12KeyAndCertificates:
    secret = password.encode() if password else None
    try:
        return pkcs12.load_pkcs12(data, secret)
    except ValueError:
        raise StoreError(
            f"cannot open {path}: wrong password, or not a PKCS12 store"
            + ("" if password else " (no password given)")
        ) from None


def load_key_store(
    path: str, password: str | None, store_type: str | None = None, alias: str | None = None
) -> KeyMaterial:
    """The private key and certificate chain of a PKCS12 or PEM key store."""
    data, kind = _read_store(path, store_type)
    if kind == "PKCS12":
        store = _pkcs12(path, data, password)
        if store.key is None or store.cert is None:
            raise StoreError(f"{path} holds no private key with its certificate")
        name = store.cert.friendly_name
        if alias is not None and name is not None and name.decode(errors="replace") != alias:
            raise StoreError(
                f"{path} has no entry '{alias}' (it holds '{name.decode(errors='replace')}'; "
                "artemis-py reads the first key entry of a store)"
            )
        key = store.key
        certs = [store.cert.certificate, *(c.certificate for c in store.additional_certs)]
    else:
        key = _pem_key(path, data, password)
        certs = _pem_certificates(path, data)
    leaf = _matching_certificate(path, key, certs)
    return KeyMaterial(key, leaf, tuple(c for c in certs if c is not leaf))


def _pem_key(path: str, data: bytes, password: str | None) -> PrivateKeyTypes:
    match = re.search(
        rb"-----BEGIN ([A-Z ]*)PRIVATE KEY-----.*?-----END \1PRIVATE KEY-----", data, re.S
    )
    if match is None:
        raise StoreError(f"{path} holds no PEM private key")
    block = match.group(0)
    encrypted = b"ENCRYPTED" in block or b"Proc-Type: 4,ENCRYPTED" in block
    try:
        return serialization.load_pem_private_key(
            block, password.encode() if (password and encrypted) else None
        )
    except (ValueError, TypeError):
        raise StoreError(
            f"cannot open the private key in {path}: wrong password, or a damaged key"
        ) from None


def _pem_certificates(path: str, data: bytes) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError:
        raise StoreError(f"{path} holds no readable PEM certificate") from None


def _matching_certificate(
    path: str, key: PrivateKeyTypes, certs: Sequence[x509.Certificate]
) -> x509.Certificate:
    public = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    for cert in certs:
        spki = cert.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        if spki == public:
            return cert
    raise StoreError(f"{path} holds no certificate for its private key")


def load_trust_store(
    path: str, password: str | None, store_type: str | None = None
) -> tuple[x509.Certificate, ...]:
    """The certificates of a PKCS12 trust store or a PEM bundle."""
    data, kind = _read_store(path, store_type)
    if kind == "PEM":
        certs = _pem_certificates(path, data)
    else:
        store = _pkcs12(path, data, password)
        certs = [c.certificate for c in store.additional_certs]
        if store.cert is not None:
            certs.insert(0, store.cert.certificate)
    if not certs:
        raise StoreError(f"{path} holds no certificate")
    return tuple(certs)
