"""Interop: the real stomp.py client against a tiny loopback echo server built on the codec.

The server thread is deliberately naive (one connection, one subscription, messages sent to
the subscribed destination are echoed back as MESSAGE frames). It exercises both directions:
stomp.py's encoder against our decoder, and our encoder (escaping, content-length bodies with
NULs) against stomp.py's decoder, for every version stomp.py speaks.
"""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

import pytest

from artemis_py.protocol.stomp import (
    NEED_DATA,
    PAUSED,
    SERVER,
    Connection,
    ConnectionClosed,
    Frame,
    ProtocolError,
    error_frame,
    negotiate_version,
)

os.environ.setdefault("STOMP_SKIP_HOSTNAME_SCAN", "1")  # no DNS lookups at import
stomp = pytest.importorskip("stomp")

TIMEOUT = 10.0


class EchoServer:
    """Serves one STOMP connection on 127.0.0.1 in a thread, recording what it received."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(TIMEOUT)
        self.port = self.listener.getsockname()[1]
        self.received: list[Frame] = []
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            sock, _ = self.listener.accept()
            with sock:
                sock.settimeout(TIMEOUT)
                self._serve(sock)
        except BaseException as exc:  # reported by join()
            self.failure = exc
        finally:
            self.listener.close()

    def _serve(self, sock: socket.socket) -> None:
        conn = Connection(SERVER)
        subscription: tuple[str, str] | None = None
        sequence = 0
        while True:
            conn.receive_data(sock.recv(65536))
            while True:
                try:
                    event = conn.next_event()
                except ProtocolError as exc:
                    sock.sendall(conn.send(error_frame(exc.message)))
                    raise
                if event is NEED_DATA:
                    break
                if event is PAUSED:
                    connect = self.received[-1]
                    version = negotiate_version(connect.get("accept-version"))
                    conn.accept_connect(version)
                    connected = Frame("CONNECTED", (("version", version), ("heart-beat", "0,0")))
                    sock.sendall(conn.send(connected))
                    continue
                if isinstance(event, ConnectionClosed):
                    return
                if not isinstance(event, Frame):
                    continue
                self.received.append(event)
                if event.command == "SUBSCRIBE":
                    sub_id = event.get("id") or "default"
                    subscription = (sub_id, event.get("destination", ""))
                elif event.command == "SEND" and subscription is not None:
                    sequence += 1
                    headers = [
                        ("subscription", subscription[0]),
                        ("message-id", str(sequence)),
                        ("destination", subscription[1]),
                        *[
                            (k, v)
                            for k, v in event.headers
                            if k not in ("destination", "content-length")
                        ],
                        ("content-length", str(len(event.body))),
                    ]
                    sock.sendall(conn.send(Frame("MESSAGE", tuple(headers), event.body)))
                receipt = event.get("receipt")
                if receipt is not None:
                    sock.sendall(conn.send(Frame("RECEIPT", (("receipt-id", receipt),))))

    def join(self) -> None:
        self.thread.join(TIMEOUT)
        assert not self.thread.is_alive(), "server thread did not finish"
        if self.failure is not None:
            raise self.failure


class Collector(stomp.ConnectionListener):  # type: ignore[name-defined]
    """Records MESSAGE and ERROR frames; waits with a timeout (stomp.py's TestListener can't)."""

    def __init__(self) -> None:
        self.messages: list[tuple[dict[str, str], bytes]] = []
        self.errors: list[tuple[dict[str, str], bytes]] = []
        self.arrived = threading.Event()

    def on_message(self, frame: Any) -> None:
        self.messages.append((frame.headers, frame.body))
        self.arrived.set()

    def on_error(self, frame: Any) -> None:
        self.errors.append((frame.headers, frame.body))
        self.arrived.set()


CONNECTIONS = {"1.0": "Connection10", "1.1": "Connection11", "1.2": "Connection12"}


@pytest.mark.parametrize("version", sorted(CONNECTIONS))
def test_stomppy_client_round_trip(version: str) -> None:
    server = EchoServer()
    client_class: Any = getattr(stomp, CONNECTIONS[version])
    client = client_class([("127.0.0.1", server.port)], auto_decode=False, timeout=TIMEOUT)
    collector = Collector()
    client.set_listener("collector", collector)
    # 1.0 cannot carry line breaks in headers; 1.1+ escapes them.
    note = "colon:back\\slash" if version == "1.0" else "colon:back\\slash\nnew line"
    body = b"binary\x00body\xff\x00"
    try:
        client.connect("guest", "guest", wait=True)
        client.subscribe(destination="/queue/echo", id="sub-1", ack="auto")
        client.send(destination="/queue/echo", body=body, headers={"x-note": note})
        assert collector.arrived.wait(TIMEOUT), "no MESSAGE came back"
        assert collector.errors == []
        [(headers, received_body)] = collector.messages
        assert received_body == body
        assert headers["x-note"] == note
        assert headers["subscription"] == "sub-1"
        client.disconnect(receipt="bye")
    finally:
        if client.is_connected():
            client.disconnect()
    server.join()
    commands = [frame.command for frame in server.received]
    assert commands[0] in ("CONNECT", "STOMP")
    assert commands[1:] == ["SUBSCRIBE", "SEND", "DISCONNECT"]
    send = server.received[2]
    assert send.body == body
    assert send.get("x-note") == note
