"""Departures a node remembers: the nodes that scaled down, and where their messages went.

Theory of operation
-------------------
A node that hears a ``Leaving`` frame (:meth:`.Membership.neighbour_scaled_down`)
remembers the departure here: the departed node's id, its target, the version of its last
announcement, and the duplicate ids of the forwarded messages it had stored (the frame's
``received``, grouped by the node that sent them).

Every new link, either direction, gets the departures this node remembers as ``Leaving``
frames (:meth:`Departures.replay`). A node that was down or cut off while a neighbour scaled
down thus learns of it when it comes back, and its store-and-forward backlog for the
departed node goes to the target (:func:`~.take_over.take_over`) instead of waiting for a
node that is gone. Each replayed frame carries only the ids the link's peer sent: those are
the ones it may still hold with their confirmation lost.

Bounds:

* a departure is forgotten when the departed node announces itself up with a newer version
  than the one it left with (it runs again: what waits for it goes to it); an older
  announcement, relayed late, does not count;
* at most :data:`MAX_DEPARTURES` are kept, the oldest forgotten first. A node that returns
  after more departures than that keeps its backlog for the older ones until the departed
  node comes back (what happened before departures were remembered at all).

The memory survives a restart: with persistence enabled it is written to
``departures-<cluster>.json`` in the journal directory (next to ``server.lock``) after each
change, through a temporary file, fsync and rename, so a crash leaves the old or the new
version, never half of one. A file that cannot be read is logged and ignored (what it held
is lost, as before this memory existed; messages are not).
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from artemis_py.protocol import cluster as wire

log = logging.getLogger("artemis_py.cluster")

MAX_DEPARTURES = 32
FORMAT = 1


@dataclass(frozen=True, slots=True)
class Departure:
    """A node that scaled down to ``target``."""

    node_id: str
    target: str
    version: int  # of the departed node's announcement when it left (0: unknown)
    at: float  # wall-clock seconds, for the operator (``cluster status``)
    # sender node id -> the rest of each duplicate id ("sender:rest") the departed node stored
    received: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def frame(self, peer: str | None) -> wire.Leaving:
        """The ``Leaving`` frame to replay to ``peer``: with the ids ``peer`` sent."""
        ids = self.received.get(peer, ()) if peer is not None else ()
        return wire.Leaving(
            node_id=self.node_id, target=self.target, received=tuple(f"{peer}:{i}" for i in ids)
        )


def group_received(received: Iterable[str], keep: str) -> dict[str, tuple[str, ...]]:
    """Duplicate ids ("sender:rest") by sender, without those of ``keep`` (this node: its
    own take-over used them already)."""
    grouped: dict[str, list[str]] = {}
    for dup_id in received:
        sender, sep, rest = dup_id.partition(":")
        if sep and sender != keep:
            grouped.setdefault(sender, []).append(rest)
    return {sender: tuple(ids) for sender, ids in grouped.items()}


def file_name(cluster: str) -> str:
    return "departures-" + re.sub(r"[^A-Za-z0-9_.-]", "_", cluster) + ".json"


class Departures:
    """The departures one cluster connection remembers (oldest first), and their file."""

    def __init__(self, node_id: str, path: Path | None) -> None:
        self.node_id = node_id
        self.path = path  # None: persistence disabled, memory only
        self._known: dict[str, Departure] = {}
        self._lock = trio.Lock()

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._known

    def __iter__(self) -> Iterator[Departure]:
        return iter(list(self._known.values()))

    def __len__(self) -> int:
        return len(self._known)

    def add(self, event: wire.Leaving, version: int) -> Departure:
        departure = Departure(
            event.node_id,
            event.target,
            version,
            time.time(),
            group_received(event.received, self.node_id),
        )
        self._known.pop(event.node_id, None)
        self._known[event.node_id] = departure
        while len(self._known) > MAX_DEPARTURES:
            del self._known[next(iter(self._known))]
        return departure

    def returned(self, member: wire.Member) -> bool:
        """``member`` is announced up: forget its departure if this is a later run than the
        one that left (True when it was forgotten)."""
        known = self._known.get(member.node_id)
        if known is None or member.version <= known.version:
            return False
        del self._known[member.node_id]
        return True

    def replay(self, peer: str | None) -> list[wire.Leaving]:
        """What a new link to ``peer`` is told (nothing about ``peer`` itself)."""
        return [d.frame(peer) for d in self._known.values() if d.node_id != peer]

    # -- the file ----------------------------------------------------------------------

    def load(self) -> None:
        """Read the file a previous run left (a small file, read once at start)."""
        if self.path is None:
            return
        try:
            data = json.loads(self.path.read_text("utf-8"))
            if data.get("format") != FORMAT:
                raise ValueError(f"unknown format {data.get('format')!r}")
            for item in data["departures"]:
                departure = _departure(item)
                self._known[departure.node_id] = departure
        except FileNotFoundError:
            return
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning(
                "cannot read %s (%s): the departures it remembered are forgotten",
                self.path,
                exc,
            )
            self._known.clear()
            return
        if self._known:
            log.info(
                "remembering %d node(s) that scaled down: %s",
                len(self._known),
                ", ".join(f"{d.node_id} (to {d.target})" for d in self._known.values()),
            )

    async def save(self) -> None:
        """Write the current memory (serialized: the last writer writes the latest)."""
        if self.path is None:
            return
        async with self._lock:
            data = {
                "format": FORMAT,
                "departures": [_plain(d) for d in self._known.values()],
            }
            try:
                await trio.to_thread.run_sync(_write, self.path, json.dumps(data))
            except OSError as exc:
                log.error(
                    "cannot write %s: %s (departures are remembered until a restart)",
                    self.path,
                    exc,
                )


def _plain(departure: Departure) -> dict[str, Any]:
    return {
        "node_id": departure.node_id,
        "target": departure.target,
        "version": departure.version,
        "at": departure.at,
        "received": {k: list(v) for k, v in departure.received.items()},
    }


def _departure(item: dict[str, Any]) -> Departure:
    received = item.get("received", {})
    if not isinstance(received, dict):
        raise ValueError("received is not an object")
    departure = Departure(
        str(item["node_id"]),
        str(item["target"]),
        int(item["version"]),
        float(item["at"]),
        {str(k): tuple(str(i) for i in v) for k, v in received.items()},
    )
    return departure


def _write(path: Path, text: str) -> None:
    """In a worker thread: replace ``path`` with ``text`` atomically and durably."""
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
