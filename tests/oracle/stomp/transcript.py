"""One STOMP conversation on a codec, written down as everything a caller can observe.

:func:`converse` feeds a byte stream, in the given pieces, to a ``Connection`` made by a
factory (the package's Rust-backed one, or the oracle's), answers a CONNECT the way the node
does, and returns the log: every event, every state change, every error (class, message,
``error_headers``) and what the connection then says when asked again, the bytes it sent.
Two codecs behave alike on a stream exactly when their logs are equal.

:func:`encodings` is the encoder's side: a frame written under every header rule, with its
body and sent apart (``body_length``), as bytes or the error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from artemis_py._native import stomp_encode_frame
from artemis_py.protocol.errors import ProtocolError
from artemis_py.protocol.stomp import (
    CLIENT,
    NEED_DATA,
    PAUSED,
    Command,
    ConnectionClosed,
    Frame,
    FrameLimits,
    Role,
    VersionNegotiationError,
    error_frame,
    negotiate_version,
)
from oracle.stomp.headers import HeaderRules
from oracle.stomp.writer import encode_frame

__all__ = ["CONNECT", "converse", "encodings", "oracle_encodings"]

CONNECT = Frame(Command.CONNECT, (("accept-version", "1.0,1.1,1.2"), ("host", "h")))
RULES = ("1.0", "raw", "1.1", "1.2")
Log = list[tuple[Any, ...]]


def _error(exc: ProtocolError) -> tuple[Any, ...]:
    return ("error", type(exc).__name__, exc.message, exc.error_headers)


def _state(conn: Any) -> tuple[Any, ...]:
    return ("state", conn.version, conn.our_state, conn.their_state)


def _events(conn: Any, batch: bool) -> Iterable[Any]:
    """The connection's events until NEED_DATA (not included), PAUSED (included) or the
    end; with ``batch``, through ``next_events()`` where the codec has it."""
    if batch and hasattr(conn, "next_events"):
        while True:
            events = conn.next_events()
            yield from events
            if events and isinstance(events[-1], ConnectionClosed):
                return
            event = conn.next_event()  # NEED_DATA or PAUSED (or the error after the batch)
            if event is NEED_DATA:
                return
            yield event
    else:
        while (event := conn.next_event()) is not NEED_DATA:
            yield event


def _accept(conn: Any, log: Log, connect: Frame) -> bool:
    """Answer a CONNECT as the node does; False when that ended the conversation."""
    try:
        version = negotiate_version(connect.get("accept-version"))
    except VersionNegotiationError as exc:
        log.append(_error(exc))
        refusal = error_frame(exc.message, headers=exc.error_headers)
        log.append(("sent", conn.send(refusal)))
        return False
    conn.accept_connect(version)
    log.append(("sent", conn.send(Frame(Command.CONNECTED, (("version", version),)))))
    return True


def converse(
    factory: Callable[[Role, FrameLimits], Any],
    role: Role,
    pieces: Iterable[bytes],
    limits: FrameLimits,
    *,
    batch: bool = False,
) -> Log:
    """The log of ``pieces`` (non-empty; the end of the stream follows) fed to a new
    connection of ``role``. With ``batch`` the events are read in batches and the log has
    the states only at the end (a batch's events are decoded before the caller sees any)."""
    conn = factory(role, limits)
    log: Log = [("repr", repr(conn))]
    if role is CLIENT:
        log.append(("sent", conn.send(CONNECT)))
    last_frame = None
    try:
        for piece in [*pieces, b""]:
            conn.receive_data(piece)
            for event in _events(conn, batch):
                if event is PAUSED:
                    log.append(("paused",))
                    assert last_frame is not None
                    if not _accept(conn, log, last_frame):
                        log.append(_state(conn))
                        return log
                    continue
                log.append(("event", event))
                if isinstance(event, Frame):
                    last_frame = event
                if not batch:
                    log.append(_state(conn))
                if isinstance(event, ConnectionClosed):
                    log.append(_state(conn))
                    return log
    except ProtocolError as exc:
        log.append(_error(exc))
        log.append(_state(conn))
        try:
            event = conn.next_event()
        except ProtocolError as again:
            log.append(_error(again))
        else:
            log.append(("no error after a failure", event))
        log.append(("sent", _outcome(conn.send, _goodbye(conn.our_role, exc))))
        log.append(("repr", repr(conn)))
    return log


def _goodbye(role: Role, exc: ProtocolError) -> Frame:
    """What ends a failed conversation: the server's ERROR frame, the client's DISCONNECT."""
    if role is CLIENT:
        return Frame("DISCONNECT", (("receipt", "bye"),))
    return error_frame(exc.message, headers=exc.error_headers)


def _outcome(call: Callable[..., bytes], *args: Any) -> Any:
    try:
        return call(*args)
    except ProtocolError as exc:
        return _error(exc)


def _variants(frame: Frame) -> list[tuple[Frame, int | None]]:
    """The frame, and the frame with its body sent apart."""
    return [(frame, None), (Frame(frame.command, frame.headers), len(frame.body))]


def encodings(frame: Frame) -> list[Any]:
    """``frame`` encoded by the Rust codec under every rule, with and without its body."""
    return [
        _outcome(stomp_encode_frame, variant, rules, body_length)
        for variant, body_length in _variants(frame)
        for rules in RULES
    ]


def oracle_encodings(frame: Frame) -> list[Any]:
    """The same by the oracle's encoder."""
    return [
        _outcome(encode_frame, variant, HeaderRules(rules), body_length)
        for variant, body_length in _variants(frame)
        for rules in RULES
    ]
