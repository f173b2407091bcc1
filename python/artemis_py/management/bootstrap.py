"""``bootstrap.xml``: where the management web server listens (Artemis "Embedded Web Server").

Artemis configures its web server in ``etc/bootstrap.xml`` beside ``broker.xml``::

    <broker xmlns="http://activemq.apache.org/schema">
       <web path="web">
          <binding name="artemis" uri="http://localhost:8161">
             <app name="console" url="console" war="console.war"/>
          </binding>
       </web>
    </broker>

:func:`read_bootstrap` reads the ``<web>`` element into a :class:`WebConfig`; ``artemis-py run
--web URI`` makes one with :func:`web_from_uri` (it overrides the file; ``--web off`` turns
the server off). Without either the server is off.

What is honoured: the first ``<binding>``'s ``uri`` (``http`` or ``https``, host and port)
and, for ``https``, its key and trust stores (``keyStorePath``, ``keyStorePassword``,
``keyStoreType``, ``trustStorePath``, ``trustStorePassword``, ``trustStoreType``,
``clientAuth``, ``includedTLSProtocols``, ``includedCipherSuites``, read as an acceptor's TLS
URL parameters are: :mod:`artemis_py.config.tls_params`); ``<web rootRedirectLocation>``. What
artemis-py has no use for (WAR files: ``path``, ``<app>``; Jetty's threads and customizer;
``<jaas-security>``, ``<server>``) gets a warning naming it, and a TLS attribute whose
absence would be less safe (``excludedTLSProtocols``, ``sniRequired``, ...) is an error: the
server never serves plain HTTP, or weaker HTTPS, than the file asks for.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from artemis_py.config.problems import ProblemCollector
from artemis_py.config.tls_params import TlsParams, read_tls_params
from artemis_py.config.values import substitute
from artemis_py.config.xmlreader import XmlElement, XmlSyntaxError, read_xml
from artemis_py.exceptions import ConfigError

__all__ = ["BOOTSTRAP_FILE", "DEFAULT_PORT", "WebConfig", "read_bootstrap", "web_from_uri"]

log = logging.getLogger("artemis_py.management")

BOOTSTRAP_FILE = "bootstrap.xml"
DEFAULT_PORT = 8161  # Artemis's
NAMESPACE = "http://activemq.apache.org/schema"

# <binding> attributes read as an acceptor's TLS URL parameters (Artemis name -> URL name).
_TLS_ATTRIBUTES = {
    "keyStorePath": "keyStorePath",
    "keyStorePassword": "keyStorePassword",
    "keyStoreType": "keyStoreType",
    "keyStoreAlias": "keyStoreAlias",
    "trustStorePath": "trustStorePath",
    "trustStorePassword": "trustStorePassword",
    "trustStoreType": "trustStoreType",
    "clientAuth": "needClientAuth",
    "includedTLSProtocols": "enabledProtocols",
    "includedCipherSuites": "enabledCipherSuites",
}
# Not implemented, and ignoring them would serve weaker HTTPS than asked for.
_TLS_REFUSED = ("excludedTLSProtocols", "excludedCipherSuites", "sniRequired", "passwordCodec")
# Not implemented; ignoring them is no less safe (named in a warning).
_BINDING_IGNORED = ("sniHostCheck", "sslAutoReload")
_WEB_IGNORED = (
    "customizer",
    "webContentEnabled",
    "maxThreads",
    "minThreads",
    "idleThreadTimeout",
    "scanPeriod",
    "maxRequestHeaderSize",
    "maxResponseHeaderSize",
)


@dataclass(frozen=True, slots=True)
class WebConfig:
    """Where the management web server listens, and how.

    ``uri`` is the binding as written (``http://localhost:8161``); ``tls`` is set for
    ``https``; ``root_redirect`` is where ``/`` redirects (``<web rootRedirectLocation>``,
    default the console); ``source`` says where it came from (for messages).
    """

    uri: str
    host: str
    port: int
    tls: TlsParams | None = None
    root_redirect: str = "console"
    source: str = "--web"

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"

    @property
    def loopback(self) -> bool:
        """Whether the server listens on a loopback address only."""
        return is_loopback(self.host)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost: it may resolve to anything


def _split_uri(uri: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an ``http(s)://host:port`` binding; ValueError says why."""
    parts = urlsplit(uri.strip())
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"'{uri}' is not an http:// or https:// URI")
    if parts.path not in ("", "/") or parts.query:
        raise ValueError(f"'{uri}': a binding is a scheme, a host and a port, without a path")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"'{uri}': the port is not a number from 0 to 65535") from None
    host = parts.hostname or "localhost"
    return parts.scheme, host, DEFAULT_PORT if port is None else port


def web_from_uri(uri: str) -> WebConfig:
    """``artemis-py run --web http://HOST:PORT``: plain HTTP (HTTPS needs bootstrap.xml's
    key store attributes). Raises ConfigError."""
    try:
        scheme, host, port = _split_uri(uri)
    except ValueError as exc:
        raise ConfigError(f"--web: {exc}") from None
    if scheme == "https":
        raise ConfigError(
            "--web: https needs a key store: configure it on the <binding> of bootstrap.xml "
            "(keyStorePath, keyStorePassword; docs/management.md)"
        )
    return WebConfig(uri=uri, host=host, port=port)


def read_bootstrap(path: Path, instance_dir: Path | None = None) -> WebConfig | None:
    """The web server ``path`` configures (None: it has no ``<web>``). Raises ConfigError
    listing every problem with file and line; logs a warning for each setting not used."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text: {exc}") from None
    problems = ProblemCollector(str(path))
    try:
        root = read_xml(text)
    except XmlSyntaxError as exc:
        raise ConfigError(f"{path}:{exc.line}: malformed XML: {exc.message}") from None
    environ = dict(os.environ)
    instance = (instance_dir or path.absolute().parent.parent).absolute()
    environ.setdefault("artemis.instance", str(instance))
    environ.setdefault("artemis.instance.etc", str(path.absolute().parent))
    reader = _Reader(problems, environ, str(path.absolute().parent))
    web = reader.broker(root)
    problems.raise_if_errors()
    for warning in problems.warnings:
        log.warning("%s", warning)
    return web


class _Reader:
    def __init__(self, problems: ProblemCollector, environ: dict[str, str], base: str) -> None:
        self.problems = problems
        self.environ = environ
        self.base = base

    def attribute(self, element: XmlElement, name: str) -> str | None:
        raw = element.attributes.get(name)
        if raw is None:
            return None
        value, errors = substitute(raw, self.environ)
        for error in errors:
            self.problems.error(element.line, f"{element.tag}@{name}", str(error))
        return value

    def broker(self, root: XmlElement) -> WebConfig | None:
        if root.tag != "broker" or root.namespace not in ("", NAMESPACE):
            self.problems.error(
                root.line, root.tag, f'the root element must be <broker xmlns="{NAMESPACE}">'
            )
            return None
        web = None
        for child in root.children:
            if child.tag == "web":
                if web is not None:
                    self.problems.error(child.line, "web", "only one <web> element is allowed")
                    continue
                web = self.web(child)
            elif child.tag == "jaas-security":
                if self.attribute(child, "domain") not in (None, "activemq"):
                    self.problems.warn(
                        child.line,
                        "jaas-security",
                        "ignored: users and roles are read from artemis-users.properties and "
                        "artemis-roles.properties beside broker.xml (docs/security.md)",
                    )
            elif child.tag == "server":
                pass  # `artemis-py run` is given broker.xml; the server element names it too
            else:
                self.problems.warn(child.line, child.tag, "not implemented: ignored")
        return web

    def web(self, element: XmlElement) -> WebConfig | None:
        for name in _WEB_IGNORED:
            if name in element.attributes:
                self.problems.warn(element.line, f"web@{name}", "not implemented: ignored")
        redirect = (self.attribute(element, "rootRedirectLocation") or "console").strip("/")
        bindings = [c for c in element.children if c.tag == "binding"]
        for child in element.children:
            if child.tag != "binding":
                self.problems.warn(child.line, child.tag, "not implemented: ignored")
        if not bindings:
            self.problems.error(element.line, "web", "needs a <binding uri=...>")
            return None
        for extra in bindings[1:]:
            self.problems.warn(
                extra.line, "binding", "only the first <binding> is served: this one is ignored"
            )
        return self.binding(bindings[0], redirect)

    def binding(self, element: XmlElement, redirect: str) -> WebConfig | None:
        uri = self.attribute(element, "uri")
        if not uri:
            self.problems.error(element.line, "binding", "the uri attribute is required")
            return None
        try:
            scheme, host, port = _split_uri(uri)
        except ValueError as exc:
            self.problems.error(element.line, "binding@uri", str(exc))
            return None
        apps = [c for c in element.children if c.tag == "app"]
        if apps:
            self.problems.warn(
                apps[0].line,
                "app",
                "ignored (no WAR files here): artemis-py serves its console at /console, the "
                "API at /api/ and metrics at /metrics itself",
            )
        for name in _BINDING_IGNORED:
            if name in element.attributes:
                self.problems.warn(element.line, f"binding@{name}", "not implemented: ignored")
        tls = self.tls(element) if scheme == "https" else None
        if scheme == "http":
            for name in (*_TLS_ATTRIBUTES, *_TLS_REFUSED):
                if name in element.attributes:
                    self.problems.warn(
                        element.line, f"binding@{name}", "ignored: the uri is http, not https"
                    )
        return WebConfig(
            uri=uri, host=host, port=port, tls=tls, root_redirect=redirect, source=self.base
        )

    def tls(self, element: XmlElement) -> TlsParams | None:
        for name in _TLS_REFUSED:
            if name in element.attributes:
                self.problems.error(
                    element.line,
                    f"binding@{name}",
                    "not implemented, and ignoring it would serve weaker HTTPS than configured",
                )
        params = {"sslEnabled": "true"}
        for attribute, parameter in _TLS_ATTRIBUTES.items():
            value = self.attribute(element, attribute)
            if value is not None:
                params[parameter] = value
        read = read_tls_params(params, "acceptor", base_dir=self.base)
        for error in read.errors:
            # The TLS reader names URL parameters; the binding's attributes are meant.
            self.problems.error(element.line, "binding", error.replace("URL parameter ", ""))
        return read.params
