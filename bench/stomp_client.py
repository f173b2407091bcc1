"""A minimal STOMP 1.2 client over one blocking socket, for bench/failover.py: CONNECT, SEND
with receipts, SUBSCRIBE and read frames, each with a timeout; nothing else."""

from __future__ import annotations

import socket
import time


class StompError(Exception):
    """The node refused, closed or answered with something else than expected."""


def encode(command: str, headers: dict[str, str], body: str = "") -> bytes:
    lines = [command, *(f"{k}:{v}" for k, v in headers.items())]
    return ("\n".join(lines) + "\n\n" + body).encode() + b"\x00"


def decode(raw: bytes) -> tuple[str, dict[str, str], str]:
    """One frame without its NUL; leading EOLs (heart-beats) are skipped."""
    head, _, body = raw.lstrip(b"\r\n").partition(b"\n\n")
    command, *lines = head.decode().splitlines()
    headers: dict[str, str] = {}
    for line in lines:
        key, _, value = line.partition(":")
        headers.setdefault(key, value)  # STOMP 1.2: the first of repeated headers wins
    return command, headers, body.decode()


class Stomp:
    """CONNECT on ``port`` and wait for CONNECTED; raises :class:`StompError` or OSError."""

    def __init__(self, port: int, timeout: float) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buffer = b""
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.send("CONNECT", {"accept-version": "1.2", "host": "127.0.0.1"})
            command, headers, body = self.frame(timeout)
            if command != "CONNECTED":
                raise StompError(f"{command} to CONNECT: {headers.get('message', body)!r}")
        except BaseException:
            self.sock.close()
            raise

    def send(self, command: str, headers: dict[str, str], body: str = "") -> None:
        self.sock.sendall(encode(command, headers, body))

    def frame(self, timeout: float) -> tuple[str, dict[str, str], str]:
        deadline = time.monotonic() + timeout
        while b"\x00" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise StompError(f"no frame within {timeout:g} s")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            if not data:
                raise StompError("connection closed by the node")
            self.buffer += data
        raw, _, self.buffer = self.buffer.partition(b"\x00")
        return decode(raw)

    def close(self) -> None:
        self.sock.close()


def try_connect(port: int, timeout: float) -> Stomp | None:
    try:
        return Stomp(port, timeout)
    except (OSError, StompError):
        return None


def send_persistent(port: int, destination: str, bodies: list[str]) -> None:
    """SEND each body to ``destination`` (persistent, with a receipt), then wait for every
    receipt."""
    client = Stomp(port, 10)
    try:
        for i, body in enumerate(bodies):
            headers = {"destination": destination, "persistent": "true", "receipt": f"r{i}"}
            client.send("SEND", headers, body)
        waiting = {f"r{i}" for i in range(len(bodies))}
        while waiting:
            command, headers, body = client.frame(10)
            if command != "RECEIPT":
                raise StompError(f"{command} instead of a RECEIPT: {headers} {body!r}")
            waiting.discard(headers.get("receipt-id", ""))
    finally:
        client.close()
