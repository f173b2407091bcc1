"""Challenge-response authentication of a cluster link (the password never crosses the wire).

Each side contributes 32 random bytes (``client_nonce`` in Hello, ``server_nonce`` in
Challenge). Both then compute HMAC-SHA256, keyed with the cluster password, over a
*transcript* of everything the handshake agreed on. The client proves itself with the
``"client"`` transcript (Auth), the server with the ``"server"`` one (Welcome): the role label
means neither proof can be replayed as the other, and the nonces mean no proof can be replayed
on another connection. The transcript also binds the version, the cluster name, both
identities and the user, so a man in the middle cannot change them without the proofs failing.

Fields are length-prefixed (u32 big-endian + UTF-8), so no two different field lists give the
same transcript (``"ab" + "c"`` vs ``"a" + "bc"``).
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from typing import Final, Literal

__all__ = ["CREDENTIALS_REJECTED", "proof", "transcript"]

#: The Reject reason for a bad proof *or* an unknown user: the peer must not learn which.
CREDENTIALS_REJECTED: Final = (
    "cluster credentials rejected: check cluster-user and cluster-password on both nodes"
)

_LENGTH: Final = struct.Struct(">I")


def transcript(
    role: Literal["client", "server"],
    *,
    version: int,
    cluster_name: str,
    client_node_id: str,
    client_instance_id: str,
    server_node_id: str,
    server_instance_id: str,
    user: str,
    client_nonce: str,
    server_nonce: str,
) -> bytes:
    """The canonical bytes a ``role``'s proof is computed over (see the module doc)."""
    fields = (
        role,
        str(version),
        cluster_name,
        client_node_id,
        client_instance_id,
        server_node_id,
        server_instance_id,
        user,
        client_nonce,
        server_nonce,
    )
    out = bytearray()
    for field in fields:
        raw = field.encode("utf-8")
        out += _LENGTH.pack(len(raw))
        out += raw
    return bytes(out)


def proof(password: bytes, transcript: bytes) -> str:
    """HMAC-SHA256 of ``transcript`` keyed with the UTF-8 ``password``, as 64 hex digits."""
    return hmac.new(password, transcript, hashlib.sha256).hexdigest()
