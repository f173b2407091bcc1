"""Broker URLs as the Artemis CLI and client write them.

:func:`parse_url` reads one STOMP acceptor: ``tcp://host:port``, ``stomp://host:port``,
``host:port``, ``host`` and bracketed IPv6 literals (``tcp://[::1]:61613``). A missing port
is the STOMP default, 61613. A query string is refused there.

:func:`parse_client_url` reads the forms of a cluster-aware client (docs/client.md): one
address, a list (``(tcp://a:61613,tcp://b:61613)`` or without the parentheses), or
``udp://GROUP:PORT`` (discovery), each with the query parameters of :data:`_PARAMETERS`
(Artemis's names), and the TLS parameters of an Artemis connector (``sslEnabled``,
``trustStorePath``, ``keyStorePath``..., :mod:`artemis_py.config.tls_params`, docs/tls.md), whose
stores are opened here so that a wrong path or password is a usage error. Any other parameter
is refused by name rather than silently ignored, because this client does not implement it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from artemis_py.client.load_balancing import policy_name
from artemis_py.config.tls_params import TLS_PARAM_NAMES, TlsParams, read_tls_params

__all__ = [
    "DEFAULT_STOMP_PORT",
    "DEFAULT_URL",
    "BrokerUrl",
    "ClientUrl",
    "ConnectionOptions",
    "parse_client_url",
    "parse_url",
]

DEFAULT_STOMP_PORT: Final = 61613
DEFAULT_URL: Final = f"tcp://localhost:{DEFAULT_STOMP_PORT}"
_SCHEMES: Final = frozenset({"tcp", "stomp"})


@dataclass(frozen=True, slots=True)
class BrokerUrl:
    """Where a STOMP acceptor listens."""

    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"tcp://{host}:{self.port}"


def parse_url(url: str) -> BrokerUrl:
    """Parse ``url`` (see the module doc). Raises :class:`ValueError` with a readable message."""
    text = url.strip()
    if not text:
        raise ValueError("empty broker URL")
    if "://" not in text:
        text = "tcp://" + text
    parts = urlsplit(text)
    if parts.scheme.lower() not in _SCHEMES:
        raise ValueError(
            f"unsupported URL scheme {parts.scheme!r} in {url!r} (use tcp://HOST:PORT)"
        )
    if parts.query or parts.fragment or parts.path not in ("", "/"):
        raise ValueError(f"unsupported broker URL {url!r} (use tcp://HOST:PORT, no parameters)")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"credentials in the URL {url!r}: pass --user/--password instead")
    host = parts.hostname
    if not host:
        raise ValueError(f"no host in broker URL {url!r}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"invalid port in broker URL {url!r}") from None
    if port is None:
        port = DEFAULT_STOMP_PORT
    if port == 0:
        raise ValueError(f"invalid port 0 in broker URL {url!r}")
    return BrokerUrl(host, port)


# -- the cluster forms: lists, discovery and connection parameters ---------------------------

_PARAMETERS: Final = (
    "ha",
    "reconnectAttempts",
    "retryInterval",
    "retryIntervalMultiplier",
    "maxRetryInterval",
    "useTopologyForLoadBalancing",
    "connectionLoadBalancingPolicyClassName",
    "refreshTimeout",
    "initialWaitTimeout",
)
#: Parameters of ``udp://`` discovery only (clusters §3.1.4).
_DISCOVERY_PARAMETERS: Final = frozenset({"refreshTimeout", "initialWaitTimeout"})


@dataclass(frozen=True, slots=True)
class ConnectionOptions:
    """The query parameters of a client URL, with Artemis's defaults (clusters §5, client
    reconnection): times in ms; ``reconnect_attempts`` -1 = forever, 0 = never.

    ``reconnect_attempts`` is None when the URL does not say: then ``ha=true`` means
    forever and otherwise never (see :attr:`failover_attempts`). ``refresh_timeout`` and
    ``initial_wait_timeout`` are ``udp://`` discovery's (Artemis's ``refreshTimeout`` and
    ``initialWaitTimeout``, 10 s each by default). ``tls``: the TLS parameters, for every
    node of the URL.
    """

    ha: bool = False
    reconnect_attempts: int | None = None
    retry_interval: int = 2000
    retry_interval_multiplier: float = 1.0
    max_retry_interval: int = 2000
    use_topology: bool = True
    policy: str = "round-robin"
    refresh_timeout: int = 10000
    initial_wait_timeout: int = 10000
    tls: TlsParams = TlsParams()

    @property
    def failover_attempts(self) -> int:
        """Rounds of reconnection attempts after a connection is lost (-1: no limit)."""
        if self.reconnect_attempts is not None:
            return self.reconnect_attempts
        return -1 if self.ha else 0

    @property
    def fails_over(self) -> bool:
        return self.failover_attempts != 0


@dataclass(frozen=True, slots=True)
class ClientUrl:
    """A client URL: the nodes to start from (``addresses``) or a UDP discovery group
    (``discovery``, host and port), and the connection parameters."""

    addresses: tuple[BrokerUrl, ...]
    discovery: tuple[str, int] | None = None
    options: ConnectionOptions = ConnectionOptions()

    def __str__(self) -> str:
        if self.discovery is not None:
            return f"udp://{self.discovery[0]}:{self.discovery[1]}"
        if len(self.addresses) == 1:
            return str(self.addresses[0])
        return "(" + ",".join(str(a) for a in self.addresses) + ")"

    @property
    def host(self) -> str:
        """The first address's host (what single-node callers used to read)."""
        return self.addresses[0].host if self.addresses else ""

    @property
    def port(self) -> int:
        return self.addresses[0].port if self.addresses else 0


def _flag(name: str, value: str) -> bool:
    lowered = value.lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"URL parameter {name}={value!r}: expected true or false")
    return lowered == "true"


def _int(name: str, value: str, minimum: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"URL parameter {name}={value!r}: not an integer") from None
    if number < minimum:
        raise ValueError(f"URL parameter {name}={value!r}: must be at least {minimum}")
    return number


def _tls(params: dict[str, str], url: str) -> TlsParams:
    read = read_tls_params(params, "connector")
    if read.errors:
        raise ValueError(f"{read.errors[0]} in {url!r}")
    return read.params


def _options(query: str, url: str, discovery: bool) -> ConnectionOptions:
    values: dict[str, Any] = {}
    tls: dict[str, str] = {}
    for part in query.replace(";", "&").split("&"):
        if not part:
            continue
        name, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"URL parameter {name!r} has no value in {url!r}")
        if name in TLS_PARAM_NAMES:
            tls[name] = unquote(value)
            continue
        if name not in _PARAMETERS:
            raise ValueError(
                f"unknown URL parameter {name!r} in {url!r} (known: {', '.join(_PARAMETERS)} "
                "and the TLS parameters of docs/tls.md)"
            )
        if name in _DISCOVERY_PARAMETERS and not discovery:
            raise ValueError(f"URL parameter {name!r} is for udp:// discovery only: {url!r}")
        if name == "ha":
            values["ha"] = _flag(name, value)
        elif name == "reconnectAttempts":
            values["reconnect_attempts"] = _int(name, value, -1)
        elif name == "retryInterval":
            values["retry_interval"] = _int(name, value, 1)
        elif name == "maxRetryInterval":
            values["max_retry_interval"] = _int(name, value, 1)
        elif name == "retryIntervalMultiplier":
            try:
                multiplier = float(value)
            except ValueError:
                multiplier = float("nan")
            if not (1.0 <= multiplier < float("inf")):
                raise ValueError(f"URL parameter {name}={value!r}: must be a number >= 1")
            values["retry_interval_multiplier"] = multiplier
        elif name == "useTopologyForLoadBalancing":
            values["use_topology"] = _flag(name, value)
        elif name == "refreshTimeout":
            values["refresh_timeout"] = _int(name, value, 1)
        elif name == "initialWaitTimeout":
            values["initial_wait_timeout"] = _int(name, value, 0)
        else:
            values["policy"] = policy_name(value)
    if tls:
        values["tls"] = _tls(tls, url)
    return ConnectionOptions(**values)


def parse_client_url(url: str) -> ClientUrl:
    """Parse a client URL; raises :class:`ValueError` with a one-line message naming the
    problem. Forms: ``tcp://h:p``, ``h:p``, ``tcp://a:p,tcp://b:p``,
    ``(tcp://a:p,tcp://b:p)?params``, ``tcp://h:p?params``, ``udp://group:port?params``."""
    text = url.strip()
    if not text:
        raise ValueError("empty broker URL")
    body, _, query = text.partition("?")
    options = _options(query, url, "udp://" in body.lower())
    if body.startswith("("):
        if not body.endswith(")"):
            raise ValueError(f"unbalanced parenthesis in broker URL {url!r}")
        body = body[1:-1]
    elif ")" in body:
        raise ValueError(f"unbalanced parenthesis in broker URL {url!r}")
    parts = [part.strip() for part in body.split(",")]
    if not all(parts):
        raise ValueError(f"empty address in broker URL {url!r}")
    if any(part.lower().startswith("udp://") for part in parts):
        if len(parts) != 1:
            raise ValueError(f"udp:// discovery cannot be mixed with other addresses: {url!r}")
        return ClientUrl((), _discovery(parts[0], url), options)
    return ClientUrl(tuple(parse_url(part) for part in parts), None, options)


def _discovery(part: str, url: str) -> tuple[str, int]:
    split = urlsplit(part)
    if split.path not in ("", "/") or split.username is not None:
        raise ValueError(f"unsupported discovery URL {url!r} (use udp://GROUP:PORT)")
    try:
        port = split.port
    except ValueError:
        raise ValueError(f"invalid port in discovery URL {url!r}") from None
    if not split.hostname or not port:
        raise ValueError(f"discovery URL {url!r} needs a group address and port")
    try:
        multicast = ipaddress.ip_address(split.hostname).is_multicast
    except ValueError:
        multicast = False
    if not multicast:
        raise ValueError(
            f"discovery URL {url!r}: {split.hostname!r} is not a multicast group address "
            f"(the group-address of the cluster's broadcast group, e.g. 231.7.7.7)"
        )
    return split.hostname, port
