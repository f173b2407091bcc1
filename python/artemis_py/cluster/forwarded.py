"""Messages another node forwarded over a link, read and handed to the broker: what the
receiving side of a cluster link (:mod:`.dispatch`) and of a core bridge
(:mod:`.bridge_target`) both do with a run of them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from artemis_py.broker.message import decode_message
from artemis_py.transport.link import LinkError

if TYPE_CHECKING:
    from artemis_py.broker.broker import Broker, Forwarded
    from artemis_py.broker.pending import Pending
    from artemis_py.protocol import cluster as wire


def receive_run(broker: Broker, messages: Sequence[wire.Message]) -> Pending:
    """Store a run of forwarded messages in one journal submit (duplicate ids checked and
    remembered: :meth:`~artemis_py.broker.sending.Sending.receive_forwarded`); a message
    that cannot be read breaks the link (:class:`LinkError`)."""
    forwarded: list[Forwarded] = []
    for m in messages:
        try:
            message = decode_message(broker.next_id(), m.payload)
        except ValueError as exc:
            raise LinkError(f"unreadable forwarded message: {exc}") from exc
        forwarded.append((message, m.targets, m.dup_id, m.payload))
    return broker.receive_forwarded(forwarded)
