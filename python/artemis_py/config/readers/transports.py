"""``<acceptors>`` and ``<connectors>``: named ``tcp://host:port?params`` URLs.

An acceptor's URL parameters that artemis-py reads are typed onto :class:`~..model.
AcceptorConfig` (see :data:`ACCEPTOR_PARAMS`); every parameter is also kept as written in
``params``. A parameter we do not read but that looks like a misspelling of one we do (wrong
case, a letter off) gets a warning, since URL keys are case-sensitive.

``stompEnableMessageId=true`` and ``webSocketCompressionSupported=true`` are named in the
start-up warning about unimplemented settings (read, but nothing adds the header yet; STOMP
over WebSocket is served without permessage-deflate, which clients fall back from). The TLS parameters (``sslEnabled``, ``keyStorePath``
...) are read into ``tls`` by :func:`~..tls.read_tls_params`, which also opens the stores, so a
missing file or a wrong password is reported here with the element's line (docs/tls.md).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from types import MappingProxyType

from ..element_reader import Children, ElementReader, value_line
from ..model import ARTEMIS_PROTOCOLS, AcceptorConfig, ConnectorConfig
from ..tls_params import TLS_PARAM_NAMES, Role, TlsParams, read_tls_params
from ..urls import TransportURL, parse_transport_url
from ..values import (
    at_least,
    bytes32,
    bytes64,
    checked,
    int32,
    int64,
    minus_one_or_at_least,
    parse_bool,
    positive_float,
)
from ..vocabulary import VOCABULARIES, suggest
from ..xmlreader import XmlElement

__all__ = ["ACCEPTOR_PARAMS", "Unmask", "read_acceptors", "read_connectors"]

#: Reads a password as written in broker.xml (``<mask-password>``, ``<password-codec>``).
Unmask = Callable[[str], str]


def _url_bool(text: str) -> bool:
    # URL parameters are read with Java's Boolean.parseBoolean, which ignores case.
    return parse_bool(text.lower())


def _encoder_type(text: str) -> str:
    # Artemis's AMQ229248 (its values are case-sensitive).
    if text not in ("binary", "text"):
        raise ValueError(
            f"Invalid value for webSocketEncoderType: '{text}'. Supported values: 'binary', 'text'."
        )
    return text


#: Acceptor URL parameters artemis-py reads: name -> (converter, AcceptorConfig field).
ACCEPTOR_PARAMS: dict[str, tuple[Callable[[str], object], str]] = {
    "connectionTtl": (checked(int64, minus_one_or_at_least(1)), "connection_ttl"),
    "connectionTtlMin": (checked(int64, at_least(0)), "connection_ttl_min"),
    "connectionTtlMax": (checked(int64, at_least(0)), "connection_ttl_max"),
    "heartBeatToConnectionTtlModifier": (positive_float, "heart_beat_to_connection_ttl_modifier"),
    "stompConsumerWindowSize": (
        checked(int32, minus_one_or_at_least(0)),
        "stomp_consumer_window_size",
    ),
    "stompEnableMessageId": (_url_bool, "stomp_enable_message_id"),
    "tcpSendBufferSize": (checked(int32, minus_one_or_at_least(1)), "tcp_send_buffer_size"),
    "tcpReceiveBufferSize": (checked(int32, minus_one_or_at_least(1)), "tcp_receive_buffer_size"),
    "stompMaxBodySize": (checked(bytes64, at_least(1)), "stomp_max_body_size"),
    "stompMinLargeMessageSize": (checked(bytes32, at_least(1)), "stomp_min_large_message_size"),
    "stompMaxHeaders": (checked(int32, at_least(1)), "stomp_max_headers"),
    "stompMaxHeaderLength": (checked(bytes32, at_least(1)), "stomp_max_header_length"),
    "stompMaxHeadersSize": (checked(bytes64, at_least(1)), "stomp_max_headers_size"),
    "handshake-timeout": (checked(int32, at_least(0)), "handshake_timeout"),
    "connectionsAllowed": (checked(int64, minus_one_or_at_least(0)), "connections_allowed"),
    "webSocketMaxFramePayloadLength": (
        checked(int32, at_least(1)),
        "web_socket_max_frame_payload_length",
    ),
    "webSocketEncoderType": (_encoder_type, "web_socket_encoder_type"),
}
_OTHER_KNOWN_PARAMS = (
    frozenset({"protocols", "anycastPrefix", "multicastPrefix", "webSocketCompressionSupported"})
    | TLS_PARAM_NAMES
)
_DEPRECATED_PARAMS = {
    "stompConsumerCredits": "stompConsumerWindowSize",
    "stompMaxFramePayloadLength": "webSocketMaxFramePayloadLength",
}


def _transport(
    reader: ElementReader, element: XmlElement
) -> tuple[str | None, str, TransportURL | None]:
    """An acceptor's or connector's name, URL as written, and parsed URL (``None``: reported)."""
    name = reader.attribute(element, "name")
    text = reader.text(element)
    if text is None:
        return name, "", None
    url = text.strip()
    try:
        return name, url, parse_transport_url(url)
    except ValueError as exc:
        reader.problems.error(value_line(element), element.tag, str(exc))
        return name, url, None


def read_acceptors(
    reader: ElementReader, kids: Children, connection_ttl_override: int, unmask: Unmask
) -> tuple[AcceptorConfig, ...]:
    if "acceptors" not in kids:
        return ()
    acceptors: list[AcceptorConfig] = []
    names: dict[str, int] = {}
    bound: dict[tuple[str, int], str] = {}
    for element in reader.children(kids["acceptors"][0]).get("acceptor", []):
        reader.check_attributes(element, VOCABULARIES["acceptor"])
        name, url, parsed = _transport(reader, element)
        if name is not None:
            reader.duplicate(element, name, names, "acceptor")  # reported; still checked below
        if name is None or parsed is None:
            continue
        for host in parsed.hosts:
            if parsed.port != 0 and (host, parsed.port) in bound:
                reader.error(
                    element,
                    f"{host}:{parsed.port} is already used by acceptor '{bound[(host, parsed.port)]}'",
                )
            bound.setdefault((host, parsed.port), name)
        acceptors.append(
            _acceptor(reader, element, name, url, parsed, connection_ttl_override, unmask)
        )
    return tuple(acceptors)


def _acceptor(
    reader: ElementReader,
    element: XmlElement,
    name: str,
    url: str,
    parsed: TransportURL,
    connection_ttl_override: int,
    unmask: Unmask,
) -> AcceptorConfig:
    params = dict(parsed.params)
    typed = _typed_params(reader, element, params)
    protocols: frozenset[str] | None = None
    if "protocols" in params:
        protocols = _protocols(reader, element, params["protocols"])
    if "connection_ttl" not in typed and connection_ttl_override != -1:
        typed["connection_ttl"] = connection_ttl_override
    if typed.get("stomp_enable_message_id"):
        reader.not_implemented("URL parameter stompEnableMessageId", element.line)
    if _url_bool(params.get("webSocketCompressionSupported", "false")):
        reader.not_implemented("URL parameter webSocketCompressionSupported", element.line)
    tls = _tls(reader, element, params, "acceptor", unmask)
    return AcceptorConfig(
        name=name,
        url=url,
        hosts=parsed.hosts,
        port=parsed.port,
        params=MappingProxyType(params),
        protocols=protocols,
        anycast_prefixes=_prefixes(params.get("anycastPrefix", "")),
        multicast_prefixes=_prefixes(params.get("multicastPrefix", "")),
        tls=tls,
        **typed,  # type: ignore[arg-type]
    )


def _typed_params(
    reader: ElementReader, element: XmlElement, params: dict[str, str]
) -> dict[str, object]:
    """The parameters of :data:`ACCEPTOR_PARAMS`, converted, by AcceptorConfig field."""
    typed: dict[str, object] = {}
    for key, value in params.items():
        target = _DEPRECATED_PARAMS.get(key)
        if target is not None:
            reader.warn(element, f"URL parameter '{key}' is deprecated; use '{target}'")
            if target in params:
                continue
            key = target
        if key in ACCEPTOR_PARAMS:
            convert, field_name = ACCEPTOR_PARAMS[key]
            try:
                typed[field_name] = convert(value)
            except ValueError as exc:
                reader.problems.error(
                    value_line(element), element.tag, f"URL parameter {key}: {exc}"
                )
        elif key not in _OTHER_KNOWN_PARAMS:
            _check_param_spelling(reader, element, key)
    return typed


def _protocols(reader: ElementReader, element: XmlElement, value: str) -> frozenset[str]:
    names = [p.strip().upper() for p in value.split(",") if p.strip()]
    for proto in names:
        if proto not in ARTEMIS_PROTOCOLS:
            hint = suggest(proto, ARTEMIS_PROTOCOLS)
            reader.problems.error(
                value_line(element),
                element.tag,
                f"URL parameter protocols: unknown protocol '{proto}'"
                + (f"; did you mean '{hint}'?" if hint else ""),
            )
    return frozenset(names)


def _check_param_spelling(reader: ElementReader, element: XmlElement, key: str) -> None:
    """Warn about a URL parameter that looks like a misspelling of one we read."""
    known = [*ACCEPTOR_PARAMS, *_OTHER_KNOWN_PARAMS]
    by_lower = {k.lower(): k for k in known}
    hint = by_lower.get(key.lower())
    if hint is None:
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.85)
        hint = close[0] if close else None
    if hint is not None:
        reader.warn(
            element,
            f"URL parameter '{key}' is not read (keys are case-sensitive); did you mean '{hint}'?",
        )


def _tls(
    reader: ElementReader, element: XmlElement, params: dict[str, str], role: Role, unmask: Unmask
) -> TlsParams:
    """The TLS parameters, their stores opened: each problem is an error at the URL's line."""
    file = reader.problems.file
    base_dir = os.path.dirname(os.path.abspath(file)) if os.path.isfile(file) else None
    read = read_tls_params(params, role, base_dir=base_dir, unmask=unmask)
    for message in read.errors:
        reader.problems.error(value_line(element), element.tag, message)
    for name in read.ignored:
        reader.not_implemented(f"URL parameter {name}", element.line)
    return read.params


def _prefixes(value: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in value.split(",") if p.strip())


def read_connectors(
    reader: ElementReader, kids: Children, unmask: Unmask
) -> tuple[ConnectorConfig, ...]:
    if "connectors" not in kids:
        return ()
    connectors: list[ConnectorConfig] = []
    names: dict[str, int] = {}
    for element in reader.children(kids["connectors"][0]).get("connector", []):
        reader.check_attributes(element, VOCABULARIES["connector"])
        name, url, parsed = _transport(reader, element)
        if name is not None:
            reader.duplicate(element, name, names, "connector")  # reported; still checked below
        if name is None or parsed is None:
            continue
        if len(parsed.hosts) != 1:
            reader.error(element, "a connector connects to exactly one host")
        params = dict(parsed.params)
        tls = _tls(reader, element, params, "connector", unmask)
        connectors.append(
            ConnectorConfig(
                name=name,
                url=url,
                host=parsed.hosts[0],
                port=parsed.port,
                params=MappingProxyType(params),
                tls=tls,
            )
        )
    return tuple(connectors)
