"""The discovery announcement: what a broadcast group sends and a discovery group (a node's,
or a ``udp://`` client's) reads.

This is artemis-py's own format, not Artemis's: a Java node neither reads ours nor sends
one we accept (its cluster links are CORE, ours are not either), so a mixed group is
reported as strangers' packets, never half understood. One announcement is one UDP
datagram, or the content of one FILE_PING file.

Layout (big-endian; a string is a u16 byte length then UTF-8)::

    magic     4 bytes  b"APYd"
    version   u8       1 or 2
    sequence  u64      counts the sender's announcements since it started
    group     string   the endpoint both sides name (``udp://231.7.7.7:9876``,
                       ``jgroups:<channel>``): a datagram for another group on the same
                       port is not taken for ours
    node id   string
    count     u8       connectors that follow (1 .. 16)
    connector string   ``host:port`` (an IPv6 host in brackets), ``count`` times
    -- version 2 only:
    count     u8       client URLs that follow (0 .. 16)
    client    string   a STOMP URL clients reach the node by (``tcp://host:61613``)

Nothing may follow the last field of the version. Version 2 adds the node's client URLs
(what a ``udp://`` client connects to); :func:`encode` writes version 1 when there are
none, so that only announcements that need them are unreadable to a version-1 node (which
logs them as strangers' packets; the cluster still forms, over the links the newer node
dials). :func:`decode` reads both, and raises :class:`PacketError` for anything else,
saying what was wrong; it never raises anything else on any input.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["MAGIC", "VERSION", "Announcement", "PacketError", "decode", "encode"]

MAGIC = b"APYd"
#: The newest version written (:func:`decode` reads 1 and 2).
VERSION = 2
MAX_CONNECTORS = 16
#: Kept under a typical path MTU, so that a datagram is never fragmented.
MAX_SIZE = 1400

_HEAD = struct.Struct(">4sBQ")


class PacketError(ValueError):
    """Not an announcement this node can use; ``str()`` says why (for a log line)."""


@dataclass(frozen=True, slots=True)
class Announcement:
    """One node's announcement: who it is and where to reach it."""

    group: str
    node_id: str
    connectors: tuple[tuple[str, int], ...]
    sequence: int = 0
    #: The node's STOMP URLs (version 2; empty in a version 1 announcement).
    clients: tuple[str, ...] = ()


def format_connector(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_connector(text: str) -> tuple[str, int]:
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise PacketError(f"connector {text[:60]!r} is not host:port")
    port = int(port_text)
    if not 0 < port < 65536:
        raise PacketError(f"connector {text[:60]!r} has port {port}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, port


def _string(value: str) -> bytes:
    data = value.encode()
    if len(data) > 0xFFFF:
        raise ValueError("string too long for an announcement")
    return struct.pack(">H", len(data)) + data


def encode(announcement: Announcement) -> bytes:
    """The bytes of ``announcement``; ValueError if it cannot be one (our own bug)."""
    connectors = announcement.connectors
    clients = announcement.clients
    if not 0 < len(connectors) <= MAX_CONNECTORS:
        raise ValueError(f"an announcement carries 1 to {MAX_CONNECTORS} connectors")
    if len(clients) > MAX_CONNECTORS:
        raise ValueError(f"an announcement carries at most {MAX_CONNECTORS} client URLs")
    parts = [
        _HEAD.pack(MAGIC, 2 if clients else 1, announcement.sequence),
        _string(announcement.group),
        _string(announcement.node_id),
        bytes([len(connectors)]),
        *(_string(format_connector(h, p)) for h, p in connectors),
    ]
    if clients:
        parts += [bytes([len(clients)]), *(_string(url) for url in clients)]
    data = b"".join(parts)
    if len(data) > MAX_SIZE:
        raise ValueError(f"an announcement of {len(data)} bytes exceeds {MAX_SIZE}")
    return data


class _Reader:
    def __init__(self, data: bytes, offset: int) -> None:
        self.data, self.offset = data, offset

    def take(self, n: int) -> bytes:
        end = self.offset + n
        if end > len(self.data):
            raise PacketError(f"truncated ({len(self.data)} bytes)")
        chunk, self.offset = self.data[self.offset : end], end
        return chunk

    def string(self) -> str:
        (length,) = struct.unpack(">H", self.take(2))
        try:
            return self.take(length).decode()
        except UnicodeDecodeError:
            raise PacketError("a string is not UTF-8") from None


def decode(data: bytes) -> Announcement:
    """The announcement in ``data``, or :class:`PacketError` saying why there is none."""
    if len(data) < _HEAD.size:
        raise PacketError(f"too short for an announcement ({len(data)} bytes)")
    magic, version, sequence = _HEAD.unpack_from(data)
    if magic != MAGIC:
        raise PacketError("not an artemis-py announcement (another format or program)")
    if version not in (1, 2):
        raise PacketError(f"announcement version {version}; this node reads 1 and {VERSION}")
    reader = _Reader(data, _HEAD.size)
    group = reader.string()
    node_id = reader.string()
    if not node_id:
        raise PacketError("no node id")
    (count,) = reader.take(1)
    if not 0 < count <= MAX_CONNECTORS:
        raise PacketError(f"{count} connectors (1 to {MAX_CONNECTORS} expected)")
    connectors = tuple(parse_connector(reader.string()) for _ in range(count))
    clients: tuple[str, ...] = ()
    if version >= 2:
        (count,) = reader.take(1)
        if count > MAX_CONNECTORS:
            raise PacketError(f"{count} client URLs (at most {MAX_CONNECTORS} expected)")
        clients = tuple(reader.string() for _ in range(count))
    if reader.offset != len(data):
        raise PacketError(f"{len(data) - reader.offset} byte(s) after the announcement")
    return Announcement(group, node_id, connectors, sequence, clients)
