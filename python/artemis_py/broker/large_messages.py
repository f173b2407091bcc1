"""Large messages: which stored messages keep their body in a file, and their journal records
(LARGE_MESSAGE, LARGE_PAGE_REF; their formats are in :mod:`.records`).

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
* **Storing.** The body is queued to the file store first; the message's journal records
  (LARGE_MESSAGE, LARGE_PAGE_REF, a transaction's commit, a forwarded message's duplicate
  id) are submitted only once the file is durable (the broker gates them like the records
  that follow page records), and the receipt waits for both. So after a crash a record
  always has its complete file: no transaction comes back in part and no queue holds a
  message whose file is empty. A crash before the records leaves an orphaned file (removed
  at the next start) or, for a paged one, a page record no LARGE_PAGE_REF keeps (skipped).
  A record without its file can then only mean the file was removed or damaged by hand:
  the message is skipped with a warning naming the file.
* **Deleting.** When the last queue acknowledges the message, the journal delete is
  synced (even for an acknowledgement nobody waits for) and the file is removed only once
  that delete is durable: a crash never leaves a live record without its file.
* **Memory.** Until its file is durable the body is held once, in the message, shared by
  every queue's reference and every store-and-forward queue; the file store writes it
  without a copy. Once the file is durable the message keeps only a reference to it
  (:class:`~artemis_py.broker.message.LargeBody`) and senders stream the body from the
  file. Recovery checks each file's length and keeps the reference; no body is read.
* **Paging by reference.** A persistent large message that pages has its file
  written as usual and a page record with its headers and the body's length only; a
  LARGE_PAGE_REF journal record (the file, the page position, the queues) keeps the file
  alive while a queue still has to read that page record. When the last of those queues
  acknowledges it (or is deleted), the record's delete goes with that acknowledgement's
  PAGE_ACK (or on its own), and the file goes once that is durable and no other record
  (LARGE_MESSAGE or LARGE_PAGE_REF) holds it. At start the orphan sweep keeps every file
  such a record names; the paging recovery then drops the records whose page record is
  acknowledged, completed, torn off or of a transaction never committed
  (:meth:`LargeMessages.check_page_refs`). A transaction's LARGE_PAGE_REF records are
  written with its commit, once its files and page records are durable; if that wait
  fails or is abandoned (whoever waited went away) no record is written and the files go
  at once (:meth:`LargeMessages.abandon`).
* **Copies.** A copy under a new id (redistribution, dead letters, expiry) shares the
  original's reference until it is stored; storing it links its own file to the
  original's (no body is read or written). A copy of a message whose body is in a file
  is always stored, even for non-durable queues only: its body exists nowhere else.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING

from artemis_py.broker.message import LargeBody, Message
from artemis_py.broker.records import (
    PageRef,
    decode_large_message,
    decode_page_ref,
    encode_large_message,
    page_ref_op,
)
from artemis_py.storage import Op

if TYPE_CHECKING:
    from artemis_py.storage.large_message_files import LargeMessageStore

log = logging.getLogger("artemis_py.broker.large_messages")


class LargeMessages:
    """The large messages of one node's persistence (``store`` None: none are stored as
    files, e.g. persistence disabled)."""

    def __init__(self, store: LargeMessageStore | None, record_limit: int) -> None:
        self.store = store
        # A message whose journal record would be bigger than this is stored as a file
        # whatever it was marked: records never span journal files.
        self.record_limit = record_limit
        self.ids: set[int] = set()  # stored large messages with a file
        # LARGE_PAGE_REF records by record id, by page position, and per file
        self.page_refs: dict[int, PageRef] = {}
        self._by_position: dict[tuple[str, int, int], int] = {}
        self._paged_files: Counter[int] = Counter()
        self._released: dict[int, list[int]] = {}  # tx id (0: none) -> files page acks freed

    def is_large(self, message: Message) -> bool:
        return self.store is not None and (
            message.large or message.body_ref is not None or message.size > self.record_limit
        )

    def write(self, message: Message) -> tuple[bytes, int]:
        """Queue ``message``'s body file (a link for a copy; nothing if it has its file
        already); returns its journal record payload and the file store's ticket (wait
        for both before the send is durable). Once the file is durable the message drops
        its body and keeps the reference."""
        ref = self.write_file(message)
        message.large = True
        self.ids.add(message.message_id)
        return encode_large_message(message, ref.length), ref.ticket

    def write_file(self, message: Message) -> LargeBody:
        """Queue ``message``'s file unless it has it; its reference (with the ticket)."""
        store = self.store
        assert store is not None
        message_id = message.message_id
        ref = message.body_ref
        if ref is None or ref.file_id != message_id:
            own = LargeBody(store, message_id, message.body_length)
            if ref is None:
                own.ticket = store.submit(message_id, message.body, partial(_drop_body, message))
            else:  # a copy: its file is a link to the original's
                own.ticket = store.submit(message_id, ref.file_id)
            message.body_ref = ref = own
        return ref

    # -- paging by reference -------------------------------------------------------------

    def pages_by_reference(self, message: Message) -> bool:
        """Whether ``message`` pages as a reference to its file."""
        return message.durable and self.is_large(message)

    def page_ref_op(
        self,
        record_id: int,
        message: Message,
        address: str,
        position: tuple[int, int],
        queues: Iterable[int],
        tx_id: int = 0,
    ) -> Op:
        """The LARGE_PAGE_REF record of ``message`` paged at ``position`` for ``queues``
        (by transaction ``tx_id``: it counts only once that commits, like the page record)."""
        ref = PageRef(message.message_id, address, *position, tx_id, set(queues))
        self._add_page_ref(record_id, ref)
        return page_ref_op(record_id, ref)

    def _add_page_ref(self, record_id: int, ref: PageRef) -> None:
        self.page_refs[record_id] = ref
        self._by_position[(ref.address, ref.page, ref.offset)] = record_id
        self._paged_files[ref.file_id] += 1

    def page_acked(
        self, address: str, position: tuple[int, int], queue_id: int, tx_id: int | None
    ) -> list[Op]:
        """A queue acknowledged a depaged message: the delete of its LARGE_PAGE_REF record
        when it was the last queue (its file goes after the acknowledgement's batch)."""
        record_id = self._by_position.get((address, *position))
        if record_id is None:
            return []
        ref = self.page_refs[record_id]
        ref.queue_ids.discard(queue_id)
        if ref.queue_ids:
            return []
        self._released.setdefault(tx_id or 0, []).extend(self._drop_page_ref(record_id))
        return [Op.delete(record_id) if tx_id is None else Op.delete_tx(tx_id, record_id)]

    def queue_removed(self, queue_id: int) -> tuple[list[Op], list[int]]:
        """A queue was deleted: the LARGE_PAGE_REF records forget it (it will never read
        their page records). Returns the deletes of the records it was the last queue of,
        and the files to remove once those deletes are durable."""
        ops: list[Op] = []
        files: list[int] = []
        for record_id, ref in list(self.page_refs.items()):
            if queue_id not in ref.queue_ids:
                continue
            ref.queue_ids.discard(queue_id)
            if not ref.queue_ids:
                ops.append(Op.delete(record_id))
                files += self._drop_page_ref(record_id)
        return ops, files

    def abandon(self, messages: Iterable[Message]) -> None:
        """The journal records of ``messages`` will never be written (they wait for the
        files, see :meth:`write_file`): remove the files written for them."""
        own = [
            m.message_id
            for m in messages
            if m.body_ref is not None and m.body_ref.file_id == m.message_id
        ]
        if own and self.store is not None:
            self.store.delete_after(None, own)

    def _drop_page_ref(self, record_id: int) -> list[int]:
        """Forget a LARGE_PAGE_REF record; its file if nothing else holds it."""
        ref = self.page_refs.pop(record_id)
        self._by_position.pop((ref.address, ref.page, ref.offset), None)
        self._paged_files[ref.file_id] -= 1
        if self._paged_files[ref.file_id] > 0:
            return []
        del self._paged_files[ref.file_id]
        return [] if ref.file_id in self.ids else [ref.file_id]

    def released(self, tx_id: int | None = None) -> list[int]:
        """Files freed by the page acknowledgements of ``tx_id`` (None: outside one)."""
        return self._released.pop(tx_id or 0, [])

    def attach(self, message: Message, address: str, position: tuple[int, int]) -> bool:
        """A message decoded from a page record refers to its file in this store; False
        when no LARGE_PAGE_REF record holds that file (it was never made durable: the
        message's SEND was never receipted)."""
        ref = message.body_ref
        if ref is None:
            return True
        if (address, *position) not in self._by_position:
            log.warning(
                "paged large message %d skipped: no record keeps its file %s (a crash before "
                "its SEND was receipted leaves this)",
                message.message_id,
                self.store.path(ref.file_id) if self.store is not None else ref.file_id,
            )
            return False
        ref.store = self.store
        return True

    def recover_page_ref(self, record_id: int, payload: bytes) -> bool:
        """A LARGE_PAGE_REF record at start: its file is kept (the orphan sweep spares it)
        until :meth:`check_page_refs`; False when the file is missing or not found."""
        ref = decode_page_ref(payload)
        if self.store is None or ref.file_id not in self.store.found:
            log.warning(
                "large message %d skipped from the pages of %s: its file %s is missing (a "
                "crash before its SEND was receipted leaves this; otherwise the file was "
                "removed by hand)",
                ref.file_id,
                ref.address,
                self.store.path(ref.file_id) if self.store is not None else ref.file_id,
            )
            return False
        self._add_page_ref(record_id, ref)
        return True

    def check_page_refs(self, live: Callable[[PageRef, int], bool]) -> list[Op]:
        """After the paging recovery: keep of each LARGE_PAGE_REF record the queues for
        which ``live(ref, queue id)``; the records left without one are deleted (returned)
        and so are the files nothing else holds (after those deletes)."""
        ops: list[Op] = []
        files: list[int] = []
        for record_id, ref in list(self.page_refs.items()):
            ref.queue_ids = {q for q in ref.queue_ids if live(ref, q)}
            if not ref.queue_ids:
                ops.append(Op.delete(record_id))
                files += self._drop_page_ref(record_id)
        self._released.setdefault(0, []).extend(files)
        return ops

    def forget(self, message_ids: Iterable[int]) -> list[int]:
        """Of ``message_ids`` (messages whose journal record goes), the large ones whose
        file goes too (no page record refers to it)."""
        if not self.ids:
            return []
        gone = [i for i in message_ids if i in self.ids]
        self.ids.difference_update(gone)
        return [i for i in gone if i not in self._paged_files]

    def freed(self, acks: Iterable[tuple[int, int, bool]]) -> list[int]:
        """The files that acknowledgements outside a transaction free: of messages whose
        last reference went (``acks``: message id, queue id, last), and of page
        acknowledgements. Asked at every acknowledgement: most free none."""
        if not self.ids and not self._released:
            return []
        return self.forget(ack[0] for ack in acks if ack[2]) + self.released()

    def delete_after(self, after: Callable[[], Awaitable[None]], message_ids: list[int]) -> None:
        """Remove the files of ``message_ids`` once ``after()`` (their journal deletes
        durable) returns."""
        if self.store is not None and message_ids:
            self.store.delete_after(after, message_ids)

    # -- recovery ----------------------------------------------------------------------

    def recover(self, record_id: int, payload: bytes) -> Message | None:
        """The message of a LARGE_MESSAGE record, referring to its file; None (and an
        error in the log) when the file is missing or not of the recorded length."""
        length, message = decode_large_message(record_id, payload)
        found = self.store.found.get(record_id) if self.store is not None else None
        if found is None or found != length:
            path = self.store.path(record_id) if self.store is not None else f"{record_id}.msg"
            problem = "is missing" if found is None else f"holds {found} bytes, not {length}"
            log.warning(
                "large message %d skipped: its file %s %s (a crash before its SEND was "
                "receipted leaves this; otherwise the file was removed or damaged by hand)",
                record_id,
                path,
                problem,
            )
            if found is not None and self.store is not None:
                self.store.delete_after(None, [record_id])
            return None
        message.body_ref = LargeBody(self.store, record_id, length)
        self.ids.add(record_id)
        return message

    def finish_recovery(self) -> None:
        """Remove the files that no journal record claimed (logged once, with a count)."""
        if self.store is not None:
            held = self.ids.union(self._paged_files)  # LARGE_MESSAGE, LARGE_PAGE_REF records
            self.store.remove_orphans([i for i in self.store.found if i not in held])
            self.store.found.clear()


def _drop_body(message: Message) -> None:
    """The file is durable: the message keeps only its reference (senders stream it)."""
    message.body = b""
