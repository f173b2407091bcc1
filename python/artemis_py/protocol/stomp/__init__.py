"""Sans-IO STOMP 1.0/1.1/1.2 codec and connection state (h11-style), server and client side.

* :class:`Connection` -- ``receive_data(bytes)``, ``next_event()`` (or ``next_events()``:
  every complete event at once, as a list), ``send(frame, body_length=None) -> bytes``,
  ``send_heartbeat()``, ``accept_connect(version)``. It is the Rust codec (``rust/stomp``,
  through ``artemis_py._native.StompConnection``): it yields the :class:`Frame` objects and
  raises the exceptions of this package, and no call into it can end the process (a panic
  inside it is that connection's protocol error).
* :class:`Frame`, :class:`Heartbeat`, :class:`ConnectionClosed`; :data:`NEED_DATA`,
  :data:`PAUSED`; :class:`Command`; :func:`error_frame`.
* :class:`FrameLimits` -- size limits on incoming frames (:mod:`.limits` has the defaults).
* :func:`negotiate_version`, :func:`parse_heartbeat`, :func:`negotiate_heartbeat`,
  :func:`artemis_heartbeat`.
* Errors: :class:`LocalProtocolError`, :class:`RemoteProtocolError` (from
  :mod:`artemis_py.protocol.errors`) and :class:`VersionNegotiationError`.

The decoder's theory of operation, the per-version header rules and the connection states
are the crate's module docs (``rust/stomp/src/decoder.rs``, ``headers.rs``,
``connection.rs``). The Python codec it replaced is the oracle of the differential tests,
in ``tests/oracle/stomp``.

Choices where the specs leave room (lenient in what we accept, strict in what we send):

* EOL may be CRLF in every version, not only 1.2. Every EOL between frames is a
  :class:`Heartbeat` event, in 1.0 too (some 1.0 clients send a LF after each NUL).
* STOMP 1.0 header values lose their leading spaces/tabs, as in Artemis's 1.0 decoder.
* A raw ``:`` inside a header value is kept (the 1.1/1.2 grammar forbids it; senders do it).
* Repeated headers: all are kept in order, :meth:`Frame.get` returns the first (1.2 rule,
  applied to every version; Artemis's map keeps the last) and the first ``content-length``
  frames the body.
* ``content-length`` must be ASCII digits and be followed by NUL (Artemis 1.1+ would skip to
  the next NUL); bodies on frames other than SEND/MESSAGE/ERROR are accepted when received but
  refused when sent; commands are case-sensitive, with nothing else on their line.
* Before version negotiation an ERROR frame is written and read with the 1.0 rules.
"""

from artemis_py._native import StompConnection as Connection
from artemis_py.protocol.errors import LocalProtocolError, ProtocolError, RemoteProtocolError
from artemis_py.protocol.stomp.frames import (
    BODY_COMMANDS,
    CLIENT_COMMANDS,
    NEED_DATA,
    PAUSED,
    SERVER_COMMANDS,
    Command,
    ConnectionClosed,
    Event,
    Frame,
    Heartbeat,
    Sentinel,
    error_frame,
)
from artemis_py.protocol.stomp.headers import HeaderRules
from artemis_py.protocol.stomp.heartbeat import (
    HeartbeatPlan,
    HeartbeatSettings,
    artemis_heartbeat,
    negotiate_heartbeat,
    parse_heartbeat,
)
from artemis_py.protocol.stomp.limits import FrameLimits
from artemis_py.protocol.stomp.roles import CLIENT, SERVER, ConnectionState, Role
from artemis_py.protocol.stomp.versions import (
    SUPPORTED_VERSIONS,
    VersionNegotiationError,
    negotiate_version,
    parse_versions,
)

__all__ = [
    "BODY_COMMANDS",
    "CLIENT",
    "CLIENT_COMMANDS",
    "NEED_DATA",
    "PAUSED",
    "SERVER",
    "SERVER_COMMANDS",
    "SUPPORTED_VERSIONS",
    "Command",
    "Connection",
    "ConnectionClosed",
    "ConnectionState",
    "Event",
    "Frame",
    "FrameLimits",
    "HeaderRules",
    "Heartbeat",
    "HeartbeatPlan",
    "HeartbeatSettings",
    "LocalProtocolError",
    "ProtocolError",
    "RemoteProtocolError",
    "Role",
    "Sentinel",
    "VersionNegotiationError",
    "artemis_heartbeat",
    "error_frame",
    "negotiate_heartbeat",
    "negotiate_version",
    "parse_heartbeat",
    "parse_versions",
]
