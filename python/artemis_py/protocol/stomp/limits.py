"""Size limits the STOMP decoder enforces on incoming frames (STOMP 1.2 "Size Limits").

The spec lets a server cap the number of headers, the length of a header line and the size
of a body, and says to answer an over-size frame with an ERROR frame and close. Artemis itself
has no such knobs; the defaults follow ActiveMQ Classic's ``StompWireFormat`` (command 1024,
1000 headers, body 100 MiB) except for the header line, which is raised from Classic's 10 KiB
to 64 KiB because ``passcode`` may carry an OAuth/JWT bearer token and those routinely pass
10 KiB. ``max_header_bytes`` bounds what 1000 such lines could otherwise add up to (64 MiB).

``max_body_size`` is 100 MiB because the decoder holds a frame's whole body in memory before
handing it over; a client with bigger payloads should chunk them (or the acceptor can raise the
limit). All lengths are in bytes and exclude line terminators.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["FrameLimits"]

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True, slots=True)
class FrameLimits:
    """Limits on one incoming frame; exceeding any is a ``RemoteProtocolError``.

    Enforced while bytes are still arriving: a header line is rejected as soon as it is longer
    than allowed, without waiting for its end of line.
    """

    max_command_length: int = 1 * KiB
    """Bytes on the command line (the longest real command, UNSUBSCRIBE, has 11)."""
    max_header_line_length: int = 64 * KiB
    """Bytes in one ``name:value`` line, as on the wire (escaped)."""
    max_header_count: int = 1000
    """Header lines in one frame, repeats included."""
    max_header_bytes: int = 1 * MiB
    """Sum of all header line lengths of one frame."""
    max_body_size: int = 100 * MiB
    """Bytes in one frame body (with or without ``content-length``)."""

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if type(value) is not int or value < 1:
                raise ValueError(f"FrameLimits.{field.name} must be a positive int, got {value!r}")
