"""TLS URL parameters (artemis_py.config.tls_params) and the contexts built from them
(artemis_py.transport.tls_contexts): Artemis's names and defaults, stores opened at read time, errors
that name the parameter, and what each setting does to the ``ssl.SSLContext``."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

import pytest

from artemis_py.client.url import parse_client_url
from artemis_py.config import parse_config
from artemis_py.config.tls_params import read_tls_params
from artemis_py.exceptions import ConfigError
from artemis_py.transport.certificates import TlsFiles, create_tls_files
from artemis_py.transport.tls_contexts import client_context, server_context

PASSWORD = "unit-pass"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return create_tls_files(tmp_path_factory.mktemp("tls"), ["node"], ["localhost"], PASSWORD)


@pytest.fixture(scope="module")
def pem(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return create_tls_files(
        tmp_path_factory.mktemp("pem"), ["node"], ["localhost"], PASSWORD, store_type="PEM"
    )


def server(files: TlsFiles, **extra: str) -> dict[str, str]:
    return {
        "sslEnabled": "true",
        "keyStorePath": str(files.keystores["node"]),
        "keyStorePassword": PASSWORD,
        **extra,
    }


def errors(params: dict[str, str], role: str = "acceptor") -> list[str]:
    return read_tls_params(params, role).errors  # type: ignore[arg-type]


def test_defaults_per_side(files: TlsFiles) -> None:
    assert read_tls_params({}, "acceptor").params.enabled is False
    acceptor = read_tls_params(server(files), "acceptor")
    assert acceptor.errors == []
    assert acceptor.params.verify_host is False
    connector = read_tls_params({"sslEnabled": "true"}, "connector")
    assert connector.errors == []
    assert connector.params.verify_host is True


def test_passwords_are_not_in_the_repr(files: TlsFiles) -> None:
    assert PASSWORD not in repr(read_tls_params(server(files), "acceptor").params)


def test_pkcs12_and_pem_stores_open(files: TlsFiles, pem: TlsFiles) -> None:
    for stores in (files, pem):
        trust = {"trustStorePath": str(stores.truststore), "trustStorePassword": PASSWORD}
        assert errors(server(stores, needClientAuth="true", **trust)) == []


def test_store_problems_name_the_parameter(files: TlsFiles, tmp_path: Path) -> None:
    (wrong,) = errors(server(files, keyStorePassword="nope"))
    assert wrong.startswith("keyStorePath:")
    assert "wrong password" in wrong
    (missing,) = errors(server(files, keyStorePath=str(tmp_path / "absent.p12")))
    assert "keyStorePath" in missing
    assert "no such file" in missing
    jks = tmp_path / "old.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + os.urandom(32))
    (found,) = errors(server(files, keyStorePath=str(jks)))
    assert "keytool -importkeystore" in found
    assert "-deststoretype PKCS12" in found
    (declared,) = errors(server(files, keyStoreType="JKS"))
    assert "keytool" in declared
    (alias,) = errors(server(files, keyStoreAlias="someone-else"))
    assert "no entry 'someone-else'" in alias
    (no_key,) = errors({"sslEnabled": "true"})
    assert "keyStorePath" in no_key


def test_protocols_and_cipher_suites(files: TlsFiles) -> None:
    (unknown,) = errors(server(files, enabledProtocols="TLSv1.2,SSLv3"))
    assert "'SSLv3'" in unknown
    (gap,) = errors(server(files, enabledProtocols="TLSv1.1,TLSv1.3"))
    assert "range" in gap
    read = read_tls_params(
        server(
            files,
            enabledCipherSuites="TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,"
            "TLS_EMPTY_RENEGOTIATION_INFO_SCSV,ECDHE-ECDSA-AES256-GCM-SHA384",
        ),
        "acceptor",
    )
    assert read.errors == []
    assert read.params.cipher_suites == (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384",
    )
    (bad,) = errors(server(files, enabledCipherSuites="TLS_NOT_A_SUITE"))
    assert "TLS_NOT_A_SUITE" in bad


def test_unimplemented_parameters_warn_or_refuse(files: TlsFiles) -> None:
    read = read_tls_params(server(files, sslProvider="OPENSSL", sniHost="x"), "acceptor")
    assert read.errors == []
    assert read.ignored == ["sniHost", "sslProvider"]
    (crl,) = errors(server(files, crlPath="/tmp/x.crl"))
    assert "crlPath" in crl
    assert "revoked" in crl
    (verify,) = errors(server(files, verifyHost="true"))
    assert "verifyHost" in verify


def test_server_context_settings(files: TlsFiles) -> None:
    trust = {"trustStorePath": str(files.truststore), "trustStorePassword": PASSWORD}
    need = server_context(
        read_tls_params(server(files, needClientAuth="true", **trust), "acceptor").params
    )
    assert need.verify_mode == ssl.CERT_REQUIRED
    want = server_context(
        read_tls_params(server(files, wantClientAuth="true", **trust), "acceptor").params
    )
    assert want.verify_mode == ssl.CERT_OPTIONAL
    plain = server_context(read_tls_params(server(files), "acceptor").params)
    assert plain.verify_mode == ssl.CERT_NONE
    limited = server_context(
        read_tls_params(
            server(
                files,
                enabledProtocols="TLSv1.2,TLSv1.3",
                enabledCipherSuites="TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            ),
            "acceptor",
        ).params
    )
    # No TLS 1.3 suite listed: as in Java, TLS 1.3 is left without one.
    assert limited.minimum_version == ssl.TLSVersion.TLSv1_2
    assert limited.maximum_version == ssl.TLSVersion.TLSv1_2
    assert [c["name"] for c in limited.get_ciphers() if "TLSv1.2" in c["protocol"]] == [
        "ECDHE-ECDSA-AES128-GCM-SHA256"
    ]


def test_client_context_settings(files: TlsFiles) -> None:
    trust = {
        "sslEnabled": "true",
        "trustStorePath": str(files.truststore),
        "trustStorePassword": PASSWORD,
    }
    verifying = client_context(read_tls_params(trust, "connector").params)
    assert verifying.verify_mode == ssl.CERT_REQUIRED
    assert verifying.check_hostname
    assert len(verifying.get_ca_certs()) == 1
    no_host = client_context(read_tls_params({**trust, "verifyHost": "false"}, "connector").params)
    assert no_host.verify_mode == ssl.CERT_REQUIRED
    assert not no_host.check_hostname
    trust_all = client_context(
        read_tls_params({"sslEnabled": "true", "trustAll": "true"}, "connector").params
    )
    assert trust_all.verify_mode == ssl.CERT_NONE


def test_client_url_takes_the_tls_parameters(files: TlsFiles) -> None:
    url = parse_client_url(
        f"tcp://localhost:61613?sslEnabled=true&trustStorePath={files.truststore}"
        f"&trustStorePassword={PASSWORD}"
    )
    assert url.options.tls.enabled
    assert url.options.tls.trust_store_path == str(files.truststore)
    with pytest.raises(ValueError, match="wrong password"):
        parse_client_url(
            f"tcp://localhost:61613?sslEnabled=true&trustStorePath={files.truststore}"
            "&trustStorePassword=nope"
        )


def test_broker_xml_errors_have_the_line_and_a_relative_path_is_beside_it(
    files: TlsFiles, tmp_path: Path
) -> None:
    (tmp_path / "node.p12").write_bytes(files.keystores["node"].read_bytes())
    xml = tmp_path / "broker.xml"

    def write(params: str) -> None:
        xml.write_text(
            '<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">\n'
            "<acceptors>\n"
            f'<acceptor name="tls">tcp://localhost:0?sslEnabled=true;{params}</acceptor>\n'
            "</acceptors></core></configuration>\n"
        )

    write(f"keyStorePath=node.p12;keyStorePassword={PASSWORD}")
    (acceptor,) = parse_config(xml.read_text(), str(xml), environ={}).acceptors
    assert acceptor.tls.key_store_path == str(tmp_path / "node.p12")
    write("keyStorePath=node.p12;keyStorePassword=wrong;enabledProtocols=TLSv9")
    with pytest.raises(ConfigError) as info:
        parse_config(xml.read_text(), str(xml), environ={})
    problems = info.value.problems  # type: ignore[attr-defined]
    assert {(p.line, p.element) for p in problems} == {(3, "acceptor")}
    assert any("TLSv9" in p.message for p in problems)
    assert any("wrong password" in p.message for p in problems)


@pytest.mark.parametrize("codec_key", [None, "site-key"])
def test_store_passwords_follow_mask_password_and_password_codec(
    files: TlsFiles, tmp_path: Path, codec_key: str | None
) -> None:
    """Artemis reads key store passwords in URLs as it reads <cluster-password>: masked with
    <password-codec>'s key, and without ENC() under <mask-password>true."""
    from artemis_py.config.passwords import mask, unwrap

    masked = unwrap(mask(PASSWORD, codec_key))
    codec = (
        "<password-codec>org.apache.activemq.artemis.utils.DefaultSensitiveStringCodec;"
        f"key={codec_key}</password-codec>"
        if codec_key
        else ""
    )

    def acceptor(mask_password: bool) -> str:
        return (
            '<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">\n'
            f"<mask-password>{str(mask_password).lower()}</mask-password>{codec}\n"
            "<acceptors>\n"
            '<acceptor name="tls">tcp://localhost:0?sslEnabled=true;'
            f"keyStorePath={files.keystores['node']};keyStorePassword={masked}</acceptor>\n"
            "</acceptors></core></configuration>\n"
        )

    (read,) = parse_config(acceptor(True), "broker.xml", environ={}).acceptors
    assert read.tls.key_store_password == PASSWORD
    with pytest.raises(ConfigError, match="wrong password"):
        parse_config(acceptor(False), "broker.xml", environ={})  # taken as the plain password
