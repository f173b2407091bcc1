"""What the management commands print (:mod:`.management`): Artemis's ``queue stat`` table
and its filter, one queue's whole state, and the address and connection listings, from the
management API's JSON."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Final

__all__ = [
    "OPERATIONS",
    "STAT_FIELDS",
    "render_address",
    "render_addresses",
    "render_connections",
    "render_queue",
    "render_stat",
    "select_queues",
    "table",
]

STAT_FIELDS: Final = (
    ("NAME", "name"),
    ("ADDRESS", "address"),
    ("CONSUMER_COUNT", "consumers"),
    ("MESSAGE_COUNT", "messages"),
    ("MESSAGES_ADDED", "added"),
    ("DELIVERING_COUNT", "delivering"),
    ("MESSAGES_ACKED", "acknowledged"),
    ("SCHEDULED_COUNT", "scheduled"),
    ("ROUTING_TYPE", "routing_type"),
    ("INTERNAL", "internal"),
)
"""``queue stat``'s columns: Artemis's titles, and the API's field each shows (Artemis
added SCHEDULED_COUNT and ROUTING_TYPE together in 2.10, INTERNAL later)."""

# Artemis's `queue stat --field` also takes its JSON names (messageCount, ...).
_ARTEMIS_JSON_NAMES: Final = {
    "consumercount": "consumers",
    "messagecount": "messages",
    "messagesadded": "added",
    "deliveringcount": "delivering",
    "messagesacked": "acknowledged",
    "scheduledcount": "scheduled",
    "routingtype": "routing_type",
    "internalqueue": "internal",
}

OPERATIONS: Final = ("CONTAINS", "NOT_CONTAINS", "EQUALS", "GREATER_THAN", "LESS_THAN")


def _field_key(field: str) -> str:
    wanted = field.strip()
    for title, key in STAT_FIELDS:
        if wanted.upper() == title or wanted == key:
            return key
    artemis_name = _ARTEMIS_JSON_NAMES.get(wanted.lower())
    if artemis_name is None:
        titles = ", ".join(title for title, _ in STAT_FIELDS)
        raise ValueError(f"--field must be one of {titles}, not {field!r}")
    return artemis_name


def _matcher(field: str, operation: str | None, value: str | None) -> tuple[str, Any]:
    key = _field_key(field)
    if value is None or not value.strip():
        raise ValueError("--value is needed with --field")
    op = (operation or "").upper()
    if op not in OPERATIONS:
        raise ValueError(f"--operation must be one of {', '.join(OPERATIONS)} with --field")
    numeric = key not in ("name", "address", "routing_type")
    if op in ("GREATER_THAN", "LESS_THAN") and not numeric:
        raise ValueError(f"--operation {op} compares counts: give a count --field")
    if numeric:
        try:
            number = int(value)
        except ValueError:
            raise ValueError(f"--value {value!r}: --field {field} is a count") from None
        tests = {
            "EQUALS": lambda v: v == number,
            "GREATER_THAN": lambda v: v > number,
            "LESS_THAN": lambda v: v < number,
            "CONTAINS": lambda v: value in str(v),
            "NOT_CONTAINS": lambda v: value not in str(v),
        }
    else:
        tests = {
            "EQUALS": lambda v: str(v) == value,
            "CONTAINS": lambda v: value in str(v),
            "NOT_CONTAINS": lambda v: value not in str(v),
        }
    return key, tests[op]


def select_queues(
    queues: list[dict[str, Any]],
    *,
    queue_name: str | None = None,
    field: str | None = None,
    operation: str | None = None,
    value: str | None = None,
    max_rows: int = 50,
) -> tuple[list[dict[str, Any]], int]:
    """The queues ``queue stat`` shows, by name, and how many matched before ``max_rows``.

    As Artemis: ``--queueName X`` keeps names containing X; ``--field F --operation OP
    --value V`` is the general filter; the two do not go together. ValueError says why
    options are wrong.
    """
    if queue_name and field:
        raise ValueError("--field and --queueName cannot be given together")
    if field is None and (operation or value):
        raise ValueError("--operation and --value need --field")
    if max_rows < 1:
        raise ValueError(f"--maxRows must be at least 1, got {max_rows}")
    selected = sorted(queues, key=lambda q: str(q.get("name", "")))
    if queue_name:
        selected = [q for q in selected if queue_name in str(q.get("name", ""))]
    elif field:
        key, test = _matcher(field, operation, value)
        selected = [q for q in selected if key in q and test(q[key])]
    return selected[:max_rows], len(selected)


def _cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters: its end is cut off, as Artemis cut it."""
    if width < 0 or len(text) <= width:
        return text
    return text[: max(width - 3, 1)] + "..."


def _cut_middle(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, its middle left out: the two ends of
    names that share a long prefix (``$.artemis.internal.sf.CLUSTER.NODE-ID``) differ."""
    if width < 0 or len(text) <= width:
        return text
    if width < 5:
        return _cut(text, width)
    tail = (width - 3) // 2
    return text[: width - 3 - tail] + "..." + text[len(text) - tail :]


def _column(values: Sequence[str], width: int) -> list[str]:
    """A column's cells cut to ``width``, each still telling its value from the others:
    values the plain cut makes equal are cut in the middle, and those still equal are
    shown whole (Artemis cuts them all to the same text)."""
    cut = [_cut(v, width) for v in values]
    if len(set(cut)) == len(set(values)):
        return cut
    clashing = {c for c in cut if len({v for v, d in zip(values, cut, strict=True) if d == c}) > 1}
    cut = [_cut_middle(v, width) if c in clashing else c for v, c in zip(values, cut, strict=True)]
    seen: dict[str, set[str]] = {}
    for v, c in zip(values, cut, strict=True):
        seen.setdefault(c, set()).add(v)
    return [v if len(seen[c]) > 1 else c for v, c in zip(values, cut, strict=True)]


def table(
    titles: Sequence[str], rows: Sequence[Sequence[object]], max_column_size: int = -1
) -> str:
    """Artemis's CLI table: ``|``-separated columns, each as wide as its widest cell, no
    wider than ``max_column_size`` except to keep two different values apart."""
    if max_column_size != -1 and max_column_size < 1:
        raise ValueError(f"--maxColumnSize must be -1 or at least 1, got {max_column_size}")
    columns = [
        _column([_text(row[i]) for row in rows], max_column_size) for i in range(len(titles))
    ]
    cells = [list(row) for row in zip(*columns, strict=True)] if rows else []
    widths = [len(t) for t in titles]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

    def line(values: Sequence[str]) -> str:
        return "|" + "|".join(v.ljust(w) + " " for v, w in zip(values, widths, strict=True)) + "|"

    return "\n".join([line(titles), *(line(row) for row in cells)])


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def render_stat(queues: list[dict[str, Any]], max_column_size: int = 25) -> str:
    rows = [[q.get(key) for _, key in STAT_FIELDS] for q in queues]
    return table([title for title, _ in STAT_FIELDS], rows, max_column_size)


def render_addresses(addresses: list[dict[str, Any]]) -> str:
    if not addresses:
        return "no addresses"
    rows = [
        [
            a.get("name"),
            ",".join(a.get("routing_types") or []),
            ",".join(a.get("queues") or []),
            a.get("size_bytes"),
            a.get("paging"),
        ]
        for a in sorted(addresses, key=lambda a: str(a.get("name", "")))
    ]
    return table(["NAME", "ROUTING_TYPES", "QUEUES", "SIZE_BYTES", "PAGING"], rows)


def render_address(address: dict[str, Any]) -> str:
    queues = address.get("queues") or []
    return "\n".join(
        [
            f"address {address.get('name')}",
            f"  routing types: {', '.join(address.get('routing_types') or []) or 'none'}",
            f"  queues ({len(queues)}): {', '.join(queues) or 'none'}",
            f"  size: {address.get('size_bytes')} bytes, paging: "
            + ("yes" if address.get("paging") else "no"),
            "  auto-created: " + ("yes" if address.get("auto_created") else "no"),
        ]
    )


def _yes(value: object) -> str:
    return "yes" if value else "no"


def _limit(value: object) -> str:
    return "no limit" if value in (None, -1) else str(value)


def render_queue(queue: dict[str, Any]) -> str:
    """``queue show --name X``: every count and setting of one queue, its kind included
    (docs/queues.md: exclusive, last-value, non-destructive, groups, held messages)."""
    q = queue.get
    key = q("last_value_key")
    return "\n".join(
        [
            f"queue {q('name')}",
            f"  address: {q('address')}, routing type: {q('routing_type')}, "
            f"durable: {_yes(q('durable'))}",
            f"  filter: {q('filter') or 'none'}",
            f"  consumers: {q('consumers')} (at most: {_limit(q('max_consumers'))}), "
            f"paused: {_yes(q('paused'))}",
            f"  messages: {q('messages')} (delivering: {q('delivering')}, "
            f"scheduled: {q('scheduled')}, paged: {q('paged')})",
            f"  added: {q('added')}, acknowledged: {q('acknowledged')}, "
            f"expired: {q('expired')}, killed: {q('killed')}, replaced: {q('replaced')}",
            f"  exclusive: {_yes(q('exclusive'))}, non-destructive: "
            f"{_yes(q('non_destructive'))}, last-value key: {key if key is not None else 'none'}",
            f"  groups with an owner: {q('groups')}",
            f"  auto-created: {_yes(q('auto_created'))}, temporary: {_yes(q('temporary'))}, "
            f"internal: {_yes(q('internal'))}",
        ]
    )


_CONNECTION_FIELDS: Final = (
    ("ID", "id"),
    ("REMOTE_ADDRESS", "remote_address"),
    ("PROTOCOL", "protocol"),
    ("VERSION", "version"),
    ("USER", "user"),
    ("CREATED", "created"),
    ("SESSIONS", "sessions"),
    ("CONSUMERS", "consumers"),
    ("FRAMES_IN", "frames_in"),
    ("FRAMES_OUT", "frames_out"),
)


def _when(value: object) -> object:
    """``created`` as local time when the API gives epoch seconds (else as given)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))
    return value


def render_connections(connections: list[dict[str, Any]]) -> str:
    if not connections:
        return "no connections"
    rows = [
        [_when(c.get(key)) if key == "created" else c.get(key) for _, key in _CONNECTION_FIELDS]
        for c in connections
    ]
    return table([title for title, _ in _CONNECTION_FIELDS], rows)


def render_ha(ha: dict[str, Any]) -> str:
    """A node's pair side: ``shared-store backup, live``, or for replication its peer and
    how its copy stands: ``replication primary, live, backup 127.0.0.1:5555 in sync, lag 0``
    (the lag summed over the journals, in journal records not yet acknowledged)."""
    text = f"{ha.get('policy')} {ha.get('role')}, {ha.get('state')}"
    replication = ha.get("replication")
    if replication is None:
        return text
    if "lag" in ha:  # a primary
        backup = ha.get("backup")
        if backup is None:
            return f"{text}, no backup"
        lag = sum(journal.get("tickets", 0) for journal in (ha.get("lag") or {}).values())
        return f"{text}, backup {backup} {replication}, lag {lag}"
    primary = ha.get("primary")
    if replication == "live":  # a backup that took over: it replicates nothing now
        return text
    if primary is None:
        return f"{text}, {replication}"
    return f"{text}, primary {primary} {replication}"


def render_cluster(data: dict[str, Any]) -> str:
    """``cluster status --url http://...``: the management API's ``/api/cluster``."""
    node = data.get("node") or {}
    lines = [f"node {node.get('node_id')} ({node.get('name')})"]
    if ha := node.get("ha"):
        lines[0] += f", {render_ha(ha)}"
    for cc in data.get("cluster_connections") or []:
        members = cc.get("members") or []
        at = f" at {cc['connector']}" if cc.get("connector") else ""
        lines += [
            "",
            f"cluster connection {cc.get('name')}{at} on address {cc.get('address')!r}: "
            f"{cc.get('message_load_balancing')}, max-hops {cc.get('max_hops')}",
            f"members ({len(members)}):",
        ]
        for m in members:
            # The topology carries no node names: the API names a member by its connector.
            name = m.get("name")
            named = f" ({name})" if name not in (m.get("connector"), m.get("node_id")) else ""
            where = f"  {m.get('node_id')}  {m.get('connector')}{named}"
            if m.get("self"):
                lines.append(f"{where}  this node")
                continue
            bridge = m.get("bridge") or {}
            link = "connected" if bridge.get("connected") else "DISCONNECTED"
            lines.append(
                f"{where}  {m.get('state')}, bridge "
                f"{link}  waiting {bridge.get('store_and_forward_depth')}  in flight "
                f"{bridge.get('in_flight')}  forwarded {bridge.get('forwarded')}  "
                f"redistributed {bridge.get('redistributed')}"
            )
        if not members:
            lines.append("  none")
    if not data.get("cluster_connections"):
        lines.append("no cluster connection")
    return "\n".join(lines)
