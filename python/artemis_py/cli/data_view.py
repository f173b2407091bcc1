"""What ``artemis-py data print`` shows and ``data summary`` counts.

:class:`Inventory` holds what the two journals recovered (the live records: what the node
would load) and where the page stores are; it prints them as plain lines, each starting with
what it is about (a record id, ``address``, ``queue``, ``page``), so ``grep`` finds them.
Record types are named, and their payloads decoded, by the broker's one registry of record
types (:mod:`artemis_py.broker.records`); page files are read by the page store's own
``read_page_file``.

Counting paged messages (Artemis's page cursors): a record in a page file counts for each
queue it names, unless its transaction was never committed (a tx id without a PAGE_TX
record), the queue acknowledged it (PAGE_ACK at its position) or completed its page
(PAGE_COMPLETE).
"""

from __future__ import annotations

import json
import struct
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from artemis_py.broker import records as rec
from artemis_py.cli.output import preview
from artemis_py.exceptions import ArtemisError
from artemis_py.storage import LoadReport, Op, Record
from artemis_py.storage.large_message_files import file_name

if TYPE_CHECKING:
    from artemis_py.broker.message import Message

PageReader = Callable[[Path], tuple[int, list[Any], "tuple[int, str] | None"]]

ADDRESS_FILE = "address.txt"
PAGE_SUFFIX = ".page"
_PROPERTIES_SHOWN = 4
_BODY_SHOWN = 60


@dataclass(frozen=True, slots=True)
class PageStoreFiles:
    """One address's page store as found on disk (page files in page order)."""

    directory: Path
    address: str
    pages: tuple[tuple[int, Path], ...]


def list_page_stores(paging_dir: Path) -> list[PageStoreFiles]:
    """Every store directory under ``paging_dir`` (none if it does not exist)."""
    stores: list[PageStoreFiles] = []
    if not paging_dir.is_dir():
        return stores
    for directory in sorted(d for d in paging_dir.iterdir() if d.is_dir()):
        try:
            address = (directory / ADDRESS_FILE).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            address = f"? ({ADDRESS_FILE}: {exc})"
        pages = []
        for entry in directory.glob(f"*{PAGE_SUFFIX}"):
            if entry.stem.isdigit():
                pages.append((int(entry.stem), entry))
        stores.append(PageStoreFiles(directory, address, tuple(sorted(pages))))
    return sorted(stores, key=lambda s: s.address)


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _message_summary(record_id: int, payload: bytes) -> str:
    try:
        message = rec.decode_message_record(record_id, payload)
    except ValueError as exc:
        return f"unreadable ({exc})"
    return _describe(message)


def _large_summary(record_id: int, payload: bytes) -> str:
    """LARGE_MESSAGE: the headers, with the body's length; the body is in its file."""
    try:
        length, message = rec.decode_large_message(record_id, payload)
    except (ValueError, struct.error) as exc:
        return f"unreadable ({exc})"
    return _describe(message, length, file_name(record_id))


def _describe(message: Message, size: int | None = None, in_file: str | None = None) -> str:
    routing = message.routing_type.name if message.routing_type is not None else "-"
    props = ", ".join(f"{k}={v}" for k, v in message.properties[:_PROPERTIES_SHOWN])
    if len(message.properties) > _PROPERTIES_SHOWN:
        props += f", ... ({len(message.properties)} in all)"
    if in_file is not None:  # a LARGE_MESSAGE record
        shown = f"in-file={in_file}"
    elif message.body_ref is not None:  # a large message's page record: a reference
        shown = f"in-file={file_name(message.body_ref.file_id)}"
    else:
        body = preview(message.body)
        if len(body) > _BODY_SHOWN:
            body = body[:_BODY_SHOWN] + "..."
        shown = f"body={_quote(body)}"
    return (
        f"address={message.address} routing={routing} "
        f"durable={'yes' if message.durable else 'no'} priority={message.priority} "
        f"body-size={message.body_length if size is None else size} "
        f"properties=[{props}] {shown}"
    )


@dataclass(slots=True)
class Inventory:
    """The journals' live records and the page stores of one data directory."""

    messages: LoadReport
    bindings: LoadReport
    journal_dirs: dict[str, Path]
    paging_dir: Path
    read_page: PageReader
    queues: dict[int, rec.QueueSpec] = field(default_factory=dict)
    # page cursors from the messages journal
    page_acks: set[tuple[str, int, int, int]] = field(default_factory=set)  # addr, q, page, off
    page_completes: set[tuple[str, int, int]] = field(default_factory=set)  # addr, queue, page
    page_txs: set[int] = field(default_factory=set)
    # page records of large messages that a LARGE_PAGE_REF record keeps: addr, page, offset
    page_refs: set[tuple[str, int, int]] = field(default_factory=set)

    @classmethod
    def build(
        cls,
        messages: LoadReport,
        bindings: LoadReport,
        *,
        journal_dirs: dict[str, Path],
        paging_dir: Path,
        read_page: PageReader,
    ) -> Inventory:
        inventory = cls(messages, bindings, journal_dirs, paging_dir, read_page)
        for record in bindings.records:
            if record.record_type == rec.QUEUE_RECORD:
                inventory.queues[record.id] = rec.decode_queue(record.id, _latest(record))
        for record in messages.records:
            if record.record_type == rec.PAGE_ACK:
                ack = rec.decode_page_ack(record.payload)
                inventory.page_acks.add((ack.address, ack.queue_id, ack.page, ack.offset))
            elif record.record_type == rec.PAGE_COMPLETE:
                done = rec.decode_page_complete(record.payload)
                inventory.page_completes.add((done.address, done.queue_id, done.page))
            elif record.record_type == rec.PAGE_TX:
                inventory.page_txs.add(rec.decode_page_tx(record.payload))
            elif record.record_type == rec.LARGE_PAGE_REF:
                ref = rec.decode_page_ref(record.payload)
                inventory.page_refs.add((ref.address, ref.page, ref.offset))
        return inventory

    def queue_name(self, queue_id: int) -> str:
        spec = self.queues.get(queue_id)
        return f"{queue_id}({spec.name})" if spec else f"{queue_id}(deleted)"

    # -- print --------------------------------------------------------------------------

    def print_bindings(self) -> Iterator[str]:
        records = self.bindings.records
        yield f"# bindings journal {self.journal_dirs['bindings']}: {len(records)} live records"
        yield from _torn(self.bindings)
        for record in records:
            payload = _latest(record)
            name = rec.record_name("bindings", record.record_type)
            if record.record_type == rec.ADDRESS_RECORD:
                a = rec.decode_address(record.id, payload)
                routing = ",".join(sorted(rt.name for rt in a.routing_types))
                detail = f"name={a.name} routing={routing} auto-created={_yes(a.auto_created)}"
            elif record.record_type == rec.QUEUE_RECORD:
                q = rec.decode_queue(record.id, payload)
                detail = (
                    f"name={q.name} address={q.address} routing={q.routing_type.name} "
                    f"filter={_quote(q.filter or '')} max-consumers={q.max_consumers} "
                    f"purge-on-no-consumers={_yes(q.purge_on_no_consumers)} "
                    f"auto-created={_yes(q.auto_created)}"
                )
            elif record.record_type == rec.ID_BLOCK_RECORD:
                detail = f"ids-below={rec.decode_id_block(payload)}"
            else:
                detail = f"size={len(payload)}"
            yield f"{record.id} {name} {detail}"

    def print_messages(self) -> Iterator[str]:
        records = self.messages.records
        yield f"# messages journal {self.journal_dirs['messages']}: {len(records)} live records"
        yield from _torn(self.messages)
        for record in records:
            yield from self._message_lines(record)
        for tx in self.messages.prepared:
            yield f"prepared tx={tx.tx_id} xid={bytes(tx.xid).hex()} ops={len(tx.ops)}"
            for op in tx.ops:
                yield f"prepared tx={tx.tx_id}   {_prepared_op(op)}"

    def _message_lines(self, record: Record) -> Iterator[str]:
        kind = record.record_type
        name = rec.record_name("messages", kind)
        payload = record.payload
        if kind == rec.MESSAGE_RECORD:
            detail = _message_summary(record.id, payload)
        elif kind == rec.LARGE_MESSAGE_RECORD:
            detail = _large_summary(record.id, payload)
        elif kind == rec.LARGE_PAGE_REF:
            ref = rec.decode_page_ref(payload)
            queues = ",".join(self.queue_name(q) for q in sorted(ref.queue_ids))
            detail = (
                f"file={file_name(ref.file_id)} address={ref.address} page={ref.page} "
                f"offset={ref.offset} queues=[{queues}]"
            )
        elif kind == rec.DUPLICATE_ID_RECORD:
            detail = f"duplicate-id={bytes(payload).decode('utf-8', 'backslashreplace')}"
        elif kind == rec.CLIENT_DUPLICATE_ID_RECORD:
            address, dup_id = rec.decode_client_id(payload)
            detail = f"address={address} duplicate-id={dup_id}"
        elif kind == rec.PAGE_ACK:
            ack = rec.decode_page_ack(payload)
            detail = (
                f"queue={self.queue_name(ack.queue_id)} address={ack.address} "
                f"page={ack.page} offset={ack.offset}"
            )
        elif kind == rec.PAGE_COMPLETE:
            done = rec.decode_page_complete(payload)
            detail = (
                f"queue={self.queue_name(done.queue_id)} address={done.address} page={done.page}"
            )
        elif kind == rec.PAGE_TX:
            detail = f"tx={rec.decode_page_tx(payload)}"
        elif kind in (rec.OFFSET_MARK, rec.SEALED_STREAM):
            queue_id, stream, value = rec.decode_offset_mark(payload)
            what = "mark" if kind == rec.OFFSET_MARK else "sealed-end"
            detail = f"queue={self.queue_name(queue_id)} stream={stream} {what}={value}"
        else:
            detail = f"size={len(payload)}"
        yield f"{record.id} {name} {detail}"
        for update in record.updates:
            utype = update.record_type
            uname = rec.record_name("messages", utype)
            if utype == rec.ADD_REF:
                queue_id, offset = rec.decode_add_ref(record.id, update.payload)
                udetail = f"queue={self.queue_name(queue_id)} offset={offset}"
            elif utype == rec.ACK_REF:
                udetail = f"queue={self.queue_name(rec.decode_ref(update.payload))}"
            elif utype == rec.DELIVERY_COUNT:
                queue_id, count = rec.decode_delivery_count(update.payload)
                udetail = f"queue={self.queue_name(queue_id)} count={count}"
            elif utype == rec.SCHEDULED_DELIVERY_TIME:
                queue_id, due_ms = rec.decode_scheduled_time(update.payload)
                udetail = f"queue={self.queue_name(queue_id)} time={_time(due_ms)}"
            elif utype == rec.ROUTE_TO:
                queue_id, names = rec.decode_route_to(update.payload)
                udetail = f"queue={self.queue_name(queue_id)} bindings={','.join(names)}"
            else:
                udetail = f"size={len(update.payload)}"
            yield f"{record.id}   {uname} {udetail}"

    def print_paging(self) -> Iterator[str]:
        stores = list_page_stores(self.paging_dir)
        yield f"# paging directory {self.paging_dir}: {len(stores)} page stores"
        for store in stores:
            yield (
                f"address {store.address} store={store.directory.name} "
                f"pages={len(store.pages)} bytes={_store_bytes(store)}"
            )
            for number, path in store.pages:
                yield from self._page_lines(store, number, path)
        yield from self._cursor_lines()

    def _page_lines(self, store: PageStoreFiles, number: int, path: Path) -> Iterator[str]:
        records, bad, error = self._read(path)
        if error is not None:
            yield f"page {store.address} {number} unreadable: {error}"
            return
        yield f"page {store.address} {number} records={len(records)} bytes={_size(path)}"
        for r in records:
            queues = ",".join(self.queue_name(q) for q in r.queue_ids)
            yield (
                f"paged {store.address} {r.page}:{r.offset} message={r.message_id} tx={r.tx_id} "
                f"queues={queues} queue-offset={r.queue_offset} "
                f"{_message_summary(r.message_id, r.message)}"
            )
        if bad is not None:
            yield f"page {store.address} {number} bad record at offset {bad[0]}: {bad[1]}"

    def _cursor_lines(self) -> Iterator[str]:
        acks: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
        for address, queue_id, page, offset in self.page_acks:
            acks[(address, queue_id)].append((page, offset))
        completes: dict[tuple[str, int], list[int]] = defaultdict(list)
        for address, queue_id, page in self.page_completes:
            completes[(address, queue_id)].append(page)
        for key in sorted(set(acks) | set(completes)):
            address, queue_id = key
            done = " ".join(str(n) for n in sorted(completes.get(key, [])))
            acked = " ".join(f"{pg}:{off}" for pg, off in sorted(acks.get(key, [])))
            yield (
                f"cursor {address} queue={self.queue_name(queue_id)} "
                f"completed-pages=[{done}] acked=[{acked}]"
            )
        if self.page_txs:
            yield f"committed page transactions: {' '.join(map(str, sorted(self.page_txs)))}"

    def _read(self, path: Path) -> tuple[Sequence[Any], tuple[int, str] | None, str | None]:
        assert self.read_page is not None
        try:
            _, records, bad = self.read_page(path)
        except (ArtemisError, OSError, ValueError) as exc:
            return [], None, str(exc)
        return records, bad, None

    # -- summary ------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        in_journal: Counter[int] = Counter()
        for record in self.messages.records:
            if record.record_type in (rec.MESSAGE_RECORD, rec.LARGE_MESSAGE_RECORD):
                for queue_id, n in _refs(record).items():
                    if n > 0:
                        in_journal[queue_id] += 1
        paged: Counter[int] = Counter()
        addresses = []
        stores = list_page_stores(self.paging_dir)
        for store in stores:
            counts = self._count_store(store, paged)
            addresses.append(
                {
                    "address": store.address,
                    "store": store.directory.name,
                    "pages": len(store.pages),
                    "bytes": _store_bytes(store),
                    **counts,
                }
            )
        queues = []
        for queue_id in sorted(set(self.queues) | set(in_journal) | set(paged)):
            spec = self.queues.get(queue_id)
            queues.append(
                {
                    "id": queue_id,
                    "name": spec.name if spec else None,
                    "address": spec.address if spec else None,
                    "journal": in_journal[queue_id],
                    "paged": paged[queue_id],
                    "total": in_journal[queue_id] + paged[queue_id],
                }
            )
        return {
            "queues": queues,
            "addresses": addresses,
            "journals": {name: _journal_files(path) for name, path in self.journal_dirs.items()},
        }

    def _count_store(self, store: PageStoreFiles, paged: Counter[int]) -> dict[str, Any]:
        """Add the store's live paged messages to ``paged`` (per queue); return its totals."""
        records_total = uncommitted = 0
        unreadable = []
        for number, path in store.pages:
            records, _, error = self._read(path)
            if error is not None:
                unreadable.append(f"{number}: {error}")
            for r in records:
                records_total += 1
                if r.tx_id and r.tx_id not in self.page_txs:
                    uncommitted += 1
                    continue
                if not self._kept(store.address, r):
                    continue
                for queue_id in r.queue_ids:
                    if (store.address, queue_id, r.page) in self.page_completes:
                        continue
                    if (store.address, queue_id, r.page, r.offset) in self.page_acks:
                        continue
                    paged[queue_id] += 1
        return {"records": records_total, "uncommitted": uncommitted, "unreadable": unreadable}

    def _kept(self, address: str, record: Any) -> bool:
        """Whether recovery keeps a page record: a large message's reference only with the
        LARGE_PAGE_REF record that keeps its file (none: its SEND was never receipted)."""
        try:
            by_reference = rec.decode_message_record(record.message_id, record.message).body_ref
        except ValueError:
            return False
        return by_reference is None or (address, record.page, record.offset) in self.page_refs


def _prepared_op(op: Op) -> str:
    """An op of a prepared transaction: ``add_tx`` / ``update_tx`` name their record type."""
    if op.kind in ("add_tx", "update_tx"):
        _, _, record_id, record_type, payload = op
        name = rec.record_name("messages", record_type)
        if record_type == rec.MESSAGE_RECORD:
            return f"{op.kind} {record_id} {name} {_message_summary(record_id, payload)}"
        if record_type == rec.ADD_REF:
            queue_id, offset = rec.decode_add_ref(record_id, payload)
            return f"{op.kind} {record_id} {name} queue={queue_id} offset={offset}"
        if record_type == rec.ACK_REF:
            return f"{op.kind} {record_id} {name} queue={rec.decode_ref(payload)}"
        return f"{op.kind} {record_id} {name} size={len(payload)}"
    return repr(op)


def render_summary(summary: dict[str, Any]) -> Iterator[str]:
    yield "queues (messages: in the journal + paged = total):"
    for q in summary["queues"]:
        name = q["name"] if q["name"] is not None else "(deleted)"
        yield (
            f"queue {name} id={q['id']} address={q['address'] or '-'} journal={q['journal']} "
            f"paged={q['paged']} total={q['total']}"
        )
    yield "page stores:"
    for a in summary["addresses"]:
        line = (
            f"address {a['address']} store={a['store']} pages={a['pages']} bytes={a['bytes']} "
            f"records={a['records']}"
        )
        if a["uncommitted"]:
            line += f" uncommitted={a['uncommitted']}"
        yield line
        for why in a["unreadable"]:
            yield f"address {a['address']} unreadable page {why}"
    if not summary["addresses"]:
        yield "  none"
    yield "journals:"
    for name, j in summary["journals"].items():
        yield f"journal {name} {j['directory']} files={j['files']} bytes={j['bytes']}"


def _latest(record: Record) -> bytes:
    """A bindings record's payload after its updates (an address's routing types change)."""
    payload = record.payload
    for update in record.updates:
        payload = update.payload
    return bytes(payload)


def _refs(record: Record) -> Counter[int]:
    refs: Counter[int] = Counter()
    for update in record.updates:
        if update.record_type == rec.ADD_REF:
            refs[rec.decode_ref(update.payload)] += 1
        elif update.record_type == rec.ACK_REF:
            refs[rec.decode_ref(update.payload)] -= 1
    return refs


def _torn(report: LoadReport) -> Iterator[str]:
    if report.torn_tail is not None:
        path, offset = report.torn_tail
        yield f"# torn tail of {Path(path).name} at offset {offset} (ignored, as recovery does)"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _time(epoch_ms: int) -> str:
    """An epoch-ms time as recorded, and readable (UTC)."""
    try:
        moment = datetime.fromtimestamp(epoch_ms / 1000, UTC)
    except (OverflowError, OSError, ValueError):
        return str(epoch_ms)
    return f"{epoch_ms} ({moment.isoformat(timespec='milliseconds').replace('+00:00', 'Z')})"


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _store_bytes(store: PageStoreFiles) -> int:
    return sum(_size(path) for _, path in store.pages)


# The node's identity and lock files beside the journal (shared-store HA adds two; see
# docs/high-availability.md): not the journal's.
NODE_FILES = frozenset({"server.lock", "server.state", "server.backup.lock"})


def _journal_files(directory: Path) -> dict[str, Any]:
    files = [f for f in directory.iterdir() if f.is_file() and f.name not in NODE_FILES]
    return {
        "directory": str(directory),
        "files": len(files),
        "bytes": sum(_size(f) for f in files),
    }
