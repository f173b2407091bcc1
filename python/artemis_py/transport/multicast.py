"""UDP multicast: the broadcast group's sender and the receiver of a discovery group (a
node's, or a ``udp://`` client's: :mod:`artemis_py.client.discovery`).

The sender is bound to ``local-bind-address:local-bind-port`` (wildcard and an anonymous
port by default; the address is also the interface multicast leaves by), with loopback on
so that nodes on one host hear each other, and a TTL of 1 as Java's MulticastSocket has by
default (the group stays on the local network). The receiver binds the group's port with
SO_REUSEADDR/SO_REUSEPORT, so that several nodes of one host can listen on it, and joins
the group on ``local-bind-address``'s interface (any, by default).
"""

from __future__ import annotations

import ipaddress
import socket

import trio

__all__ = ["TTL", "open_receiver", "open_sender"]

TTL = 1


def _family(group_address: str) -> socket.AddressFamily:
    ip = ipaddress.ip_address(group_address)
    return socket.AF_INET6 if ip.version == 6 else socket.AF_INET


async def open_sender(
    group_address: str, local_address: str | None, local_port: int
) -> trio.socket.SocketType:
    """A socket that sends to the multicast group (the caller closes it)."""
    family = _family(group_address)
    sock = trio.socket.socket(family, socket.SOCK_DGRAM)
    try:
        if family == socket.AF_INET:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, TTL)
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
            if local_address:
                sock.setsockopt(
                    socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(local_address)
                )
        else:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, TTL)
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_LOOP, 1)
        if local_address or local_port > 0:
            await sock.bind((local_address or "", max(local_port, 0)))
    except BaseException:
        sock.close()
        raise
    return sock


async def open_receiver(
    group_address: str, group_port: int, local_address: str | None
) -> trio.socket.SocketType:
    """A socket that receives the group's datagrams (the caller closes it)."""
    family = _family(group_address)
    sock = trio.socket.socket(family, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if hasattr(socket, "SO_REUSEPORT"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        # Bound to the group address (Linux): datagrams sent to other groups on the same
        # port are not delivered to this socket.
        await sock.bind((group_address, group_port))
        if family == socket.AF_INET:
            interface = socket.inet_aton(local_address or "0.0.0.0")
            membership = socket.inet_aton(group_address) + interface
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, membership)
        else:
            # Interface 0: the kernel's choice (an IPv6 local-bind-address is not mapped
            # to its interface; docs/clustering.md says so).
            membership = socket.inet_pton(socket.AF_INET6, group_address) + bytes(4)
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_JOIN_GROUP, membership)
    except BaseException:
        sock.close()
        raise
    return sock
