"""Large messages: which stored messages keep their body in a file, and their journal records.

Theory of operation
-------------------
Artemis stores a message of at least ``min-large-message-size`` (for STOMP the acceptor's
``stompMinLargeMessageSize``, 100 KiB by default) as a file of its own in
``large-messages-directory``; the journal gets a small record with the headers and the
body's length only. Here:

* **Which messages.** A durable message routed to a durable queue is *large* when the
  protocol marked it so on arrival (:attr:`Message.large`, from the acceptor's threshold,
  or the flag a neighbour forwarded it with), or when its journal record would not fit a
  journal file anyway (whatever threshold is configured, a persistent message never fails
  for being bigger than a journal file). Non-durable large messages stay in memory only:
  they do not survive a restart in any case.
* **Storing.** The body is queued to the file store and the LARGE_MESSAGE record to the
  journal, at the same moment, so journal order is unchanged; the send waits for both
  tickets before its receipt (the store stands in for a journal in a ``Ticket``). A crash
  between the two leaves either an orphaned file (removed at the next start) or a record
  without its complete file, for a message whose SEND was never receipted (skipped at the
  next start, with an error naming the file).
* **Deleting.** When the last queue acknowledges the message, the journal delete is
  synced (even for an acknowledgement nobody waits for) and the file is removed only once
  that delete is durable: a crash never leaves a live record without its file.
* **Memory.** The body is held once, in the message, shared by every queue's reference
  and every store-and-forward queue; the file store writes it without a copy.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

from artemis_py.broker.message import Message, decode_message, encode_message

if TYPE_CHECKING:
    from artemis_py.storage.large_messages import LargeMessageStore

log = logging.getLogger("artemis_py.broker.large_messages")

#: Messages journal record type: a large message's headers and body length (no body).
#: Artemis's number for its large-message add record (JournalRecordIds); 10-14 are taken.
LARGE_MESSAGE_RECORD = 30

_LENGTH = struct.Struct("<Q")


class LargeMessages:
    """The large messages of one node's persistence (``store`` None: none are stored as
    files, e.g. persistence disabled)."""

    def __init__(self, store: LargeMessageStore | None, record_limit: int) -> None:
        self.store = store
        # A message whose journal record would be bigger than this is stored as a file
        # whatever it was marked: records never span journal files.
        self.record_limit = record_limit
        self.ids: set[int] = set()  # stored large messages with a file

    def is_large(self, message: Message) -> bool:
        return self.store is not None and (message.large or message.size > self.record_limit)

    def write(self, message: Message) -> tuple[bytes, int]:
        """Queue ``message``'s body file; returns its journal record payload and the file
        store's ticket (wait for both before the send is durable)."""
        assert self.store is not None
        number = self.store.submit(message.message_id, message.body)
        message.large = True
        self.ids.add(message.message_id)
        payload = _LENGTH.pack(len(message.body)) + encode_message(message, with_body=False)
        return payload, number

    def forget(self, message_ids: Iterable[int]) -> list[int]:
        """Of ``message_ids`` (messages whose journal record goes), the large ones."""
        if not self.ids:
            return []
        gone = [i for i in message_ids if i in self.ids]
        self.ids.difference_update(gone)
        return gone

    def delete_after(self, after: Callable[[], Awaitable[None]], message_ids: list[int]) -> None:
        """Remove the files of ``message_ids`` once ``after()`` (their journal deletes
        durable) returns."""
        if self.store is not None and message_ids:
            self.store.delete_after(after, message_ids)

    # -- recovery ----------------------------------------------------------------------

    def recover(self, record_id: int, payload: bytes) -> Message | None:
        """The message of a LARGE_MESSAGE record with its body from its file; None (and
        an error in the log) when the file is missing or incomplete."""
        (length,) = _LENGTH.unpack_from(payload)
        message = decode_message(record_id, payload[_LENGTH.size :])
        body = self.store.found.pop(record_id, None) if self.store is not None else None
        if body is None or len(body) != length:
            path = self.store.path(record_id) if self.store is not None else f"{record_id}.msg"
            problem = "is missing" if body is None else f"holds {len(body)} bytes, not {length}"
            log.error(
                "large message %d skipped: its file %s %s (a crash before its SEND was "
                "receipted leaves this; otherwise the file was removed or damaged by hand)",
                record_id,
                path,
                problem,
            )
            if body is not None and self.store is not None:
                self.store.delete_after(None, [record_id])
            return None
        message.body = body
        self.ids.add(record_id)
        return message

    def finish_recovery(self) -> None:
        """Remove the files that no journal record claimed (logged once, with a count)."""
        if self.store is not None:
            self.store.remove_orphans(list(self.store.found))
