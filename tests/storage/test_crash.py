"""Crash test: SIGKILL a process that appends with sync, restart it, check what survived.

Theory of operation
-------------------
* The **child** is this file run as a script (``python test_crash.py child ...``). It opens the
  journal through the facade, prints what it recovered (``R`` lines, then ``READY``), and
  then appends for ever from several Trio tasks: adds of new ids, updates of live ids,
  deletes, sometimes two or three of them in one submit, mostly with sync. A background task
  compacts over and over. Files are 256 KiB, so rollover, reclaim (into the pool and beyond
  it) and compaction keep happening while the child gets killed.
* The child prints ``S <seq> ...`` (with the ops) **before** each submit and ``A <seq>``
  after an awaited sync submit returned. Each line is one ``write(2)`` of less than
  ``PIPE_BUF`` bytes, so it is in the pipe, whole, the moment the call returns: the parent
  knows every submit that might have reached the disk and every one that was acknowledged.
* The **parent** SIGKILLs the child at a random moment (20-300 ms after ``READY``; every
  sixth round 0-15 ms after it started opening, to hit recovery itself), runs it again on
  the same directory, and checks the recovered state against the model:

  - every record is intact: each add and update carries a payload and record type derived
    from ``(id, version)``, and the child reports a digest of what it actually read;
  - the state equals the state after *some prefix* of the submits made since the last check,
    at least as long as the acknowledged part: acknowledged adds and updates are there with
    their latest acknowledged version, acknowledged deletes are gone, ops in flight at the
    kill are either fully there or fully absent (a multi-op submit is atomic), and nothing
    later in the journal survives while something earlier was lost.

  Tickets complete in order and the journal is written in submit order, so "prefix" is
  exactly the durability contract (Artemis: a sync append returns once it and everything
  before it is on disk).

A SIGKILL loses what the process had not yet handed to the kernel (queued submits, the
batch being built, half a compaction or recovery), not the page cache: power loss and torn
sector writes are the Rust fault-injection tests' job (``rust/journal/tests``).

Knobs (environment): ``ARTEMIS_CRASH_SEED`` to replay a run, ``ARTEMIS_CRASH_ROUNDS``.
"""

from __future__ import annotations

import hashlib
import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROUNDS = int(os.environ.get("ARTEMIS_CRASH_ROUNDS", "25"))
FILE_SIZE = 256 * 1024
WRITERS = 4  # concurrent appending tasks in the child: batches of several submits
ID_STRIDE = 10_000_000  # round r adds ids r*ID_STRIDE, r*ID_STRIDE+1, ...: never reused
MAX_VERSION = 12  # a record updated this often gets deleted instead
CHILD_LIFETIME = 20.0  # the child gives up (and the round fails) if never killed
READ_TIMEOUT = 60.0  # parent: how long a child may take to reach its kill point

Fingerprint = tuple[int, int, str]  # (record type, payload length, payload digest)
Op3 = tuple[str, int, int]  # ("a" | "u" | "d", id, version)


# -- what every record holds: derived from (id, version) alone -----------------------------


def record_type(id: int, version: int) -> int:
    return 10 + (id + version) % 7


def payload(id: int, version: int) -> bytes:
    """16..3015 bytes: id and version, then a pattern seeded by both."""
    seed = hashlib.blake2b(f"{id}:{version}".encode(), digest_size=32).digest()
    size = int.from_bytes(seed[:2], "little") % 3000
    head = id.to_bytes(8, "little") + version.to_bytes(8, "little")
    return head + (seed * (size // len(seed) + 1))[:size]


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def fingerprint(id: int, version: int) -> Fingerprint:
    data = payload(id, version)
    return (record_type(id, version), len(data), digest(data))


# -- the child -------------------------------------------------------------------------------


def child_main(directory: str, round_no: int, seed: int, mode: str) -> None:
    import trio

    trio.run(_child, directory, round_no, seed, mode)


def _emit(line: str) -> None:
    # One write(2) per line, < PIPE_BUF: atomic, and in the pipe before the next statement.
    data = (line + "\n").encode()
    assert len(data) < 4096
    os.write(1, data)


async def _child(directory: str, round_no: int, seed: int, mode: str) -> None:
    import itertools

    import trio

    from artemis_py.storage import JournalSettings, Op, open_journal

    settings = JournalSettings(
        file_size=FILE_SIZE,
        min_files=2,
        pool_files=3,  # more reclaimed files than that are deleted, not pooled
        compact_min_files=3,
        compact_percentage=40,
    )
    rng = random.Random(seed)
    _emit("O")
    async with open_journal(directory, settings) as journal:
        loaded = journal.loaded
        for r in loaded.records:
            versions = [(r.record_type, r.payload)] + [
                (u.record_type, u.payload) for u in r.updates
            ]
            _emit(f"R {r.id} " + " ".join(f"{rt}:{len(p)}:{digest(p)}" for rt, p in versions))
        torn = int(loaded.torn_tail is not None)
        _emit(f"P {len(loaded.prepared)} {loaded.incomplete_transactions_rolled_back} {torn}")
        _emit("READY")
        if mode == "verify":
            return

        live = {r.id: len(r.updates) for r in loaded.records}  # id -> latest version
        ids = itertools.count(round_no * ID_STRIDE)
        seqs = itertools.count(1)

        def choose() -> tuple[list[Op], str]:
            """Ops for one submit (applied to ``live`` at once: submit follows directly)."""
            ops: list[Op] = []
            parts: list[str] = []
            touched: set[int] = set()
            for _ in range(1 if rng.random() < 0.8 else rng.randint(2, 3)):
                candidates = [i for i in live if i not in touched]
                if len(candidates) < 20:
                    kind = "a"
                elif len(live) > 120:
                    kind = rng.choices("aud", weights=(2, 4, 4))[0]
                else:
                    kind = rng.choices("aud", weights=(4, 5, 1))[0]
                if kind == "a":
                    id = next(ids)
                    live[id] = 0
                    ops.append(Op.add(id, record_type(id, 0), payload(id, 0)))
                    parts.append(f"a{id}")
                else:
                    id = rng.choice(candidates)
                    version = live[id] + 1
                    if kind == "d" or version > MAX_VERSION:
                        del live[id]
                        ops.append(Op.delete(id))
                        parts.append(f"d{id}")
                    else:
                        live[id] = version
                        ops.append(Op.update(id, record_type(id, version), payload(id, version)))
                        parts.append(f"u{id}:{version}")
                touched.add(id)
            return ops, " ".join(parts)

        async def append_forever() -> None:
            while True:
                ops, text = choose()
                seq = next(seqs)
                sync = rng.random() < 0.9
                _emit(f"S {seq} {text}")
                ticket = journal.submit(ops, sync=sync)
                if sync:
                    await journal.wait(ticket)
                    _emit(f"A {seq}")
                else:
                    await trio.lowlevel.checkpoint()

        async def compact_forever() -> None:
            while True:
                await trio.sleep(rng.uniform(0.0, 0.08))
                report = await journal.compact()
                stats = journal.stats()
                _emit(f"C {report.records_moved} {stats.compactions} {stats.data_files}")

        with trio.move_on_after(CHILD_LIFETIME):
            async with trio.open_nursery() as nursery:
                for _ in range(WRITERS):
                    nursery.start_soon(append_forever)
                nursery.start_soon(compact_forever)
    _emit("TIMEOUT")


# -- the parent ------------------------------------------------------------------------------


@dataclass
class Transcript:
    """What one child run printed (only whole lines)."""

    ready: bool = False
    recovered: dict[int, list[Fingerprint]] = field(default_factory=dict)
    prepared: int = 0
    rolled_back: int = 0
    torn_tail: bool = False
    submits: list[list[Op3]] = field(default_factory=list)
    acked: int = 0  # submits[:acked] were acknowledged (tickets complete in order)
    moved: int = 0  # records moved by the child's compactions
    compactions: int = 0  # JournalStats.compactions at the last report (automatic ones too)


def parse(lines: list[str]) -> Transcript:
    t = Transcript()
    for line in lines:
        tag, _, rest = line.partition(" ")
        if tag == "R":
            id_text, *versions = rest.split(" ")
            t.recovered[int(id_text)] = [
                (int(rt), int(size), dig) for rt, size, dig in (v.split(":") for v in versions)
            ]
        elif tag == "P":
            prepared, rolled_back, torn = rest.split(" ")
            t.prepared, t.rolled_back, t.torn_tail = int(prepared), int(rolled_back), torn == "1"
        elif tag == "READY":
            t.ready = True
        elif tag == "S":
            seq_text, *ops = rest.split(" ")
            assert int(seq_text) == len(t.submits) + 1, f"submit lines out of order: {line!r}"
            t.submits.append([parse_op(op) for op in ops])
        elif tag == "A":
            t.acked = max(t.acked, int(rest))
        elif tag == "C":
            moved, compactions, _files = rest.split(" ")
            t.moved += int(moved)
            t.compactions = int(compactions)
    return t


def parse_op(text: str) -> Op3:
    if text[0] == "u":
        id_text, version = text[1:].split(":")
        return ("u", int(id_text), int(version))
    return (text[0], int(text[1:]), 0)


def apply(state: dict[int, int], ops: list[Op3]) -> None:
    for kind, id, version in ops:
        if kind == "a":
            assert id not in state, f"model: add of live id {id}"
            state[id] = 0
        elif kind == "u":
            assert state.get(id) == version - 1, f"model: update {id} to {version}"
            state[id] = version
        else:
            del state[id]


class Model:
    """The last verified state and the submits made since, for the next recovery to match."""

    def __init__(self) -> None:
        self.base: dict[int, int] = {}
        self.submits: list[list[Op3]] = []
        self.acked = 0

    def check(self, recovered: dict[int, list[Fingerprint]], where: str) -> int:
        """Verify a recovery; it becomes the new base. Returns how many submits survived."""
        for id, versions in recovered.items():
            for version, found in enumerate(versions):
                if found != fingerprint(id, version):
                    raise AssertionError(
                        f"{where}: record {id} version {version} is corrupt or foreign: "
                        f"found (type, size, digest) {found}, expected {fingerprint(id, version)}"
                    )
        got = {id: len(versions) - 1 for id, versions in recovered.items()}
        state = dict(self.base)
        for ops in self.submits[: self.acked]:
            apply(state, ops)
        acked_state = dict(state)
        survived = None
        if state == got:
            survived = self.acked
        else:
            for k in range(self.acked, len(self.submits)):
                apply(state, self.submits[k])
                if state == got:
                    survived = k + 1
                    break
        if survived is None:
            raise AssertionError(
                f"{where}: recovered state is no prefix of the submits at least as long as the "
                f"{self.acked} acknowledged ones (of {len(self.submits)} submitted); "
                f"differences from the acknowledged state (id: acknowledged version -> "
                f"recovered version, None = absent): {diff(acked_state, got)}"
            )
        self.base = got
        self.submits = []
        self.acked = 0
        return survived

    def extend(self, t: Transcript) -> None:
        self.submits = t.submits
        self.acked = t.acked


def diff(expected: dict[int, int], got: dict[int, int]) -> str:
    ids = sorted(i for i in expected.keys() | got.keys() if expected.get(i) != got.get(i))
    shown = ", ".join(f"{i}: {expected.get(i)} -> {got.get(i)}" for i in ids[:20])
    return shown + (f" ... ({len(ids)} in all)" if len(ids) > 20 else "")


def run_child(
    directory: Path, round_no: int, seed: int, mode: str, kill_after: str | None, delay: float
) -> Transcript:
    """Run the child; if ``kill_after`` is a line tag, SIGKILL it ``delay`` s after that line."""
    stderr_path = directory.parent / f"child-{round_no}.stderr"
    with stderr_path.open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, __file__, "child", str(directory), str(round_no), str(seed), mode],
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
    assert proc.stdout is not None
    stdout = proc.stdout
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for raw in stdout:
            if raw.endswith(b"\n"):  # a partial last line never counts
                lines.put(raw[:-1].decode())
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    seen: list[str] = []

    def failure(what: str) -> AssertionError:
        return AssertionError(
            f"round {round_no} (seed {seed}): {what}; last lines {seen[-5:]}; child stderr:\n"
            + stderr_path.read_text(errors="replace")[-4000:]
        )

    try:
        if kill_after is not None:
            deadline = time.monotonic() + READ_TIMEOUT
            while not seen or seen[-1] != kill_after:
                try:
                    line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    raise failure(f"no {kill_after!r} line within {READ_TIMEOUT}s") from None
                if line is None:
                    proc.wait()
                    raise failure(f"child exited ({proc.returncode}) before {kill_after!r}")
                seen.append(line)
            time.sleep(delay)  # the random moment of the crash, not a wait for a condition
            if proc.poll() is not None:
                raise failure(f"child exited ({proc.returncode}) before it was killed")
            proc.send_signal(signal.SIGKILL)
        returncode = proc.wait(timeout=READ_TIMEOUT)
        reader.join(timeout=READ_TIMEOUT)
        while (line := lines.get_nowait()) is not None:
            seen.append(line)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        stdout.close()
    if kill_after is not None and returncode != -signal.SIGKILL:
        raise failure(f"child exited with {returncode} instead of being killed")
    if kill_after is None and returncode != 0:
        raise failure(f"child exited with {returncode}")
    return parse(seen)


def test_acknowledged_appends_survive_sigkill(tmp_path: Path) -> None:
    seed = int(os.environ.get("ARTEMIS_CRASH_SEED", random.randrange(2**32)))
    rng = random.Random(seed)
    directory = tmp_path / "journal"
    model = Model()
    totals = dict.fromkeys(
        (
            "submits",
            "acked",
            "lost in flight",
            "torn tails",
            "opens killed",
            "compactions",
            "moved",
        ),
        0,
    )
    file_ids: set[int] = set()
    started = time.monotonic()
    for round_no in range(1, ROUNDS + 1):
        during_open = round_no % 6 == 0
        t = run_child(
            directory,
            round_no,
            rng.randrange(2**32),
            "crash",
            kill_after="O" if during_open else "READY",
            delay=rng.uniform(0.0, 0.015) if during_open else rng.uniform(0.02, 0.3),
        )
        where = f"round {round_no} (ARTEMIS_CRASH_SEED={seed})"
        if t.ready:  # a kill during the open leaves the previous round's check pending
            pending = len(model.submits)
            totals["lost in flight"] += pending - model.check(t.recovered, where)
            assert (t.prepared, t.rolled_back) == (0, 0), f"{where}: no transactions were used"
            totals["torn tails"] += t.torn_tail
            model.extend(t)
            totals["submits"] += len(t.submits)
            totals["acked"] += t.acked
            totals["compactions"] += t.compactions
            totals["moved"] += t.moved
        else:
            totals["opens killed"] += 1
        file_ids |= {
            int(m.group(1))
            for p in directory.iterdir()
            if (m := re.fullmatch(r"activemq-data-(\d+)\.amq", p.name))
        }
    final = run_child(directory, ROUNDS + 1, rng.randrange(2**32), "verify", None, 0.0)
    assert final.ready
    model.check(final.recovered, f"final clean open (ARTEMIS_CRASH_SEED={seed})")

    # The test must have exercised what it claims to.
    summary = f"seed {seed}, {time.monotonic() - started:.1f}s: {totals}, file ids {len(file_ids)}"
    print(summary)
    assert totals["acked"] >= 20 * ROUNDS, f"too few acknowledged appends: {summary}"
    assert totals["moved"] > 0, f"no compaction moved anything: {summary}"
    assert max(file_ids) >= 20, f"too little file rollover: {summary}"


if __name__ == "__main__" and sys.argv[1:2] == ["child"]:
    child_main(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
