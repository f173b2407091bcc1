"""The management web server over HTTPS: a bootstrap.xml ``<binding uri="https://...">`` with
Artemis's key store attributes (docs/management.md "Enabling it"), stores made by
``artemis_py.transport.certificates.create_tls_files``."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from artemis_py.transport.certificates import TlsFiles, create_tls_files

from .conftest import BrokerProcess, start_refused

PASSWORD = "s3cret-pass"


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return create_tls_files(
        tmp_path_factory.mktemp("web-tls"), ["node"], ["localhost", "127.0.0.1"], PASSWORD
    )


class HttpsNode(BrokerProcess):
    """A node whose bootstrap.xml binds the web server with https and a key store."""

    def __init__(self, directory: Path, *, key_store: Path, password: str, **options: Any):
        super().__init__(directory, web=True, **options)
        self.key_store = key_store
        self.key_store_password = password

    @property
    def web_url(self) -> str:
        return f"https://{self.host}:{self.web_port}"

    def write_config(self) -> None:
        super().write_config()
        (self.config_path.parent / "bootstrap.xml").write_text(
            '<broker xmlns="http://activemq.apache.org/schema"><web path="web">'
            f'<binding name="artemis" uri="{self.web_url}" keyStorePath="{self.key_store}" '
            f'keyStorePassword="{self.key_store_password}"/></web></broker>\n'
        )


@pytest.fixture
def https_node(tmp_path: Path) -> Callable[..., HttpsNode]:
    made: list[HttpsNode] = []

    def make(key_store: Path, password: str = PASSWORD, start: bool = True) -> HttpsNode:
        node = HttpsNode(tmp_path / f"node{len(made)}", key_store=key_store, password=password)
        made.append(node)
        if start:
            node.start()
        return node

    yield make
    for node in made:
        node.close()


def test_the_api_answers_over_https_to_a_client_that_trusts_the_ca(
    https_node: Callable[..., HttpsNode], tls_files: TlsFiles
) -> None:
    node = https_node(tls_files.keystores["node"])
    trusting = ssl.create_default_context(cafile=str(tls_files.ca))
    answer = httpx.get(f"{node.web_url}/api/node", verify=trusting, timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.json()["web"] == node.web_url

    # A client that does not trust the node's CA refuses it.
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{node.web_url}/api/node", timeout=10)

    # Plain HTTP to the HTTPS port: the TLS handshake fails, nothing is served.
    with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
        httpx.get(f"http://{node.host}:{node.web_port}/api/node", timeout=10)


@pytest.mark.parametrize("broken", ["wrong password", "not a key store", "missing", "no key"])
def test_a_broken_key_store_is_a_start_up_error_naming_bootstrap_xml(
    https_node: Callable[..., HttpsNode], tls_files: TlsFiles, tmp_path: Path, broken: str
) -> None:
    if broken == "wrong password":
        node = https_node(tls_files.keystores["node"], password="not-the-password", start=False)
    elif broken == "no key":  # a trust store: a certificate without its private key
        node = https_node(tls_files.truststore, start=False)
    elif broken == "missing":
        node = https_node(tmp_path / "nowhere.p12", start=False)
    else:
        garbage = tmp_path / "garbage.p12"
        garbage.write_bytes(b"this is not PKCS12")
        node = https_node(garbage, start=False)
    log = start_refused(node)
    assert f"{node.config_path.parent / 'bootstrap.xml'}:1: <binding>: keyStorePath: " in log
    assert str(node.key_store) in log, log
