"""A message delivered to a client subscription: a thin view over the MESSAGE frame."""

from __future__ import annotations

from dataclasses import dataclass
from typing import overload

from artemis_py.protocol.stomp import Frame

__all__ = ["Message"]


@dataclass(frozen=True, slots=True)
class Message:
    """One MESSAGE frame received on a subscription.

    The frame is kept whole (``frame``): headers in wire order, repeats included. The
    properties below read the headers STOMP and Artemis define; ``get`` reads any other.
    """

    frame: Frame

    @property
    def body(self) -> bytes:
        return self.frame.body

    @property
    def text(self) -> str:
        """The body decoded as UTF-8 (undecodable bytes replaced)."""
        return self.frame.body.decode("utf-8", "replace")

    @property
    def headers(self) -> tuple[tuple[str, str], ...]:
        return self.frame.headers

    @property
    def subscription(self) -> str:
        """The ``subscription`` header: the id of the subscription it was delivered to."""
        return self.frame.get("subscription", "")

    @property
    def destination(self) -> str:
        return self.frame.get("destination", "")

    @property
    def message_id(self) -> str:
        return self.frame.get("message-id", "")

    @property
    def ack_id(self) -> str | None:
        """The ``ack`` header a STOMP 1.2 server sets for ``client``/``client-individual``."""
        return self.frame.get("ack")

    @property
    def redelivered(self) -> bool:
        """Artemis sets ``redelivered:true`` when the message was delivered before."""
        return self.frame.get("redelivered", "false").lower() == "true"

    @property
    def content_type(self) -> str | None:
        return self.frame.get("content-type")

    @overload
    def get(self, name: str) -> str | None: ...
    @overload
    def get(self, name: str, default: str) -> str: ...

    def get(self, name: str, default: str | None = None) -> str | None:
        """The first ``name`` header, as :meth:`Frame.get`."""
        return self.frame.get(name, default)
