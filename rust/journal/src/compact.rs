//! Compaction: rewrite the live content of every file before the current one into fresh,
//! dense files, while appends continue.
//!
//! Theory of operation:
//! - Snapshot (under the state lock): the inputs are all data files before the current one;
//!   the items to copy are their live locations: adds and updates of live records (written
//!   as plain adds/updates, in each record's order) and the records of unfinished
//!   transactions (written as they are). Inputs are marked busy so nothing reclaims them.
//! - Copy (no lock): items are read back from the inputs (checksums verified) and written as
//!   batches into new files `{prefix}-{id}.{ext}.cmp` with fresh ids and the COMPACTED flag;
//!   each file's header records where its data ends, and it is fdatasynced.
//! - Commit point: the current file (as of the snapshot) is synced, so whatever made input
//!   content dead is durable; then the control file listing inputs and outputs is written
//!   and fdatasynced, and the directory fsynced. Recovery rolls a valid control file forward
//!   and otherwise deletes `*.cmp` files, so a crash gives the state before or after.
//! - Fix-up (under the state lock, atomically for everyone else): each copied location that
//!   is still live is replaced by its copy; copies that died meanwhile (a delete or a commit
//!   appended to the current file while we copied) stay in the outputs, and the files that
//!   depended on the inputs now depend on the outputs holding such copies. Replay order
//!   (compacted files first, then normal files) keeps those later deletes and commits
//!   applying after the copies; it is valid because the inputs are *all* files before the
//!   current one, so every compacted file belongs to the latest compaction.
//! - Finish: rename outputs to their final names, retire the inputs (pool or delete), fsync
//!   the directory, delete the control file. An error from the commit point on fails the
//!   journal (reopening completes the compaction); before it, the compaction is abandoned.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::files::{self, io_err, DataFile};
use crate::format::{
    self, decode_record, BatchBuilder, Control, FileHeader, Kind, RecordRef, FILE_HEADER_LEN,
    FLAG_COMPACTED, FLAG_DATA,
};
use crate::index::{FileId, Index, Loc, Rec};
use crate::journal::{lock, Inner, State};
use crate::{CompactionReport, Error, Result};
use wal::{read_exact_at, StoreFile};

#[derive(Clone, Copy, Debug)]
enum What {
    Add(u64),
    Update(u64),
    TxOp { tx: u64, id: u64 },
    Prepare(u64),
}

/// One location to copy.
#[derive(Clone, Copy, Debug)]
struct Item {
    what: What,
    old: Loc,
    new: Loc,
}

struct Snapshot {
    inputs: Vec<DataFile>,
    items: Vec<Item>,
    current: DataFile,
}

struct Output {
    id: FileId,
    tmp: PathBuf,
    handle: Arc<dyn StoreFile>,
    off: usize,
    seq: u64,
}

pub(crate) fn compact(inner: &Arc<Inner>) -> Result<CompactionReport> {
    let _serial = lock(&inner.compaction);
    if inner.abort_compaction.load(Ordering::Relaxed) {
        return Err(Error::Closed);
    }
    // Replication: the files listed to the backup must stay as they are, so a compaction
    // asked for meanwhile does nothing (it starts only under the lock we hold).
    if inner.state().repl.is_some() {
        return Ok(CompactionReport::default());
    }
    let Some(snap) = snapshot(inner)? else {
        return Ok(CompactionReport::default());
    };
    let mut outputs = Vec::new();
    let copied = copy(inner, &snap, &mut outputs).and_then(|items| {
        commit_point(inner, &snap, &outputs)?;
        Ok(items)
    });
    let items = match copied {
        Ok(items) => items,
        Err(e) => {
            abandon(inner, &snap, &outputs);
            return Err(e);
        }
    };
    fix_up(inner, &snap, &items, &outputs);
    if let Err(e) = finish(inner, &snap, &outputs) {
        inner.fail(e);
        let cause = inner.group.completion.failure();
        return Err(cause.map_or(Error::Closed, Error::Failed));
    }
    Ok(CompactionReport {
        files_before: snap.inputs.len(),
        files_after: outputs.len(),
        records_moved: items.len(),
    })
}

fn snapshot(inner: &Inner) -> Result<Option<Snapshot>> {
    let mut st = inner.state();
    if let Some(f) = &inner.group.completion.failure() {
        return Err(Error::Failed(f.clone()));
    }
    if st.writing.closing {
        return Err(Error::Closed);
    }
    let current = st.files[&st.current].clone();
    // Replay order: compacted files first, then normal files, each by id.
    let mut inputs: Vec<DataFile> = st
        .files
        .values()
        .filter(|f| f.id != st.current && !f.busy)
        .cloned()
        .collect();
    if inputs.is_empty() {
        return Ok(None);
    }
    inputs.sort_by_key(|f| (!f.compacted, f.id));
    let rank: HashMap<FileId, usize> = inputs.iter().enumerate().map(|(i, f)| (f.id, i)).collect();
    let key = |l: &Loc| rank.get(&l.file).map(|&r| (r, l.offset));
    let unset = Loc {
        file: 0,
        offset: 0,
        len: 0,
    };
    let item = |what, old| Item {
        what,
        old,
        new: unset,
    };
    let mut groups: Vec<((usize, u32), Vec<Item>)> = Vec::new();
    for (&id, r) in &st.index.records {
        let mut g = Vec::new();
        if key(&r.add).is_some() {
            g.push(item(What::Add(id), r.add));
        }
        for (l, ()) in &r.updates {
            if key(l).is_some() {
                g.push(item(What::Update(id), *l));
            }
        }
        if let Some(k) = g.first().and_then(|i| key(&i.old)) {
            groups.push((k, g));
        }
    }
    groups.sort_by_key(|g| g.0);
    let mut items: Vec<Item> = groups.into_iter().flat_map(|g| g.1).collect();
    let mut txs: Vec<((usize, u32), Vec<Item>)> = Vec::new();
    for (&tx, t) in &st.index.txs {
        let mut g: Vec<Item> = t
            .ops
            .iter()
            .filter(|o| key(&o.loc).is_some())
            .map(|o| item(What::TxOp { tx, id: o.id }, o.loc))
            .collect();
        if let Some((l, ())) = t.prepare.as_ref().filter(|p| key(&p.0).is_some()) {
            g.push(item(What::Prepare(tx), *l));
        }
        if let Some(k) = g.first().and_then(|i| key(&i.old)) {
            txs.push((k, g));
        }
    }
    txs.sort_by_key(|g| g.0);
    items.extend(txs.into_iter().flat_map(|g| g.1));
    for f in &inputs {
        if let Some(e) = st.files.get_mut(&f.id) {
            e.busy = true;
        }
    }
    st.compacting = true;
    Ok(Some(Snapshot {
        inputs,
        items,
        current,
    }))
}

fn check_abort(inner: &Inner) -> Result<()> {
    if inner.abort_compaction.load(Ordering::Relaxed) {
        return Err(Error::Closed);
    }
    if let Some(f) = &inner.group.completion.failure() {
        return Err(Error::Failed(f.clone()));
    }
    Ok(())
}

fn new_output(inner: &Inner) -> Result<Output> {
    let id = inner.new_file_id();
    let tmp = inner.cfg.compacting_path(id);
    let handle = inner.fs.create(&tmp).map_err(io_err("create", &tmp))?;
    if let Err(e) = handle.allocate(inner.cfg.file_size) {
        let _ = inner.fs.remove_file(&tmp);
        return Err(io_err("allocate", &tmp)(e).into());
    }
    Ok(Output {
        id,
        tmp,
        handle,
        off: FILE_HEADER_LEN,
        seq: 1,
    })
}

fn flush(b: &mut BatchBuilder, out: &mut Output) -> Result<()> {
    if b.is_empty() {
        return Ok(());
    }
    b.finish(out.id, out.seq, 0);
    out.handle
        .write_all_at(&b.buf, out.off as u64)
        .map_err(io_err("write", &out.tmp))?;
    out.off += b.batch_len();
    out.seq += 1;
    b.begin(out.id, None);
    Ok(())
}

fn seal(inner: &Inner, out: &Output) -> Result<()> {
    let h = FileHeader {
        file_id: out.id,
        flags: FLAG_DATA | FLAG_COMPACTED,
        first_seq: 1,
        durable_through: 0,
        data_end: out.off as u64,
    };
    out.handle
        .write_all_at(&h.encode(), 0)
        .map_err(io_err("write", &out.tmp))?;
    files::sync_file(&inner.cfg, &*out.handle, &out.tmp)
}

/// Writes the items into new files; returns them with their new locations.
fn copy(inner: &Inner, snap: &Snapshot, outputs: &mut Vec<Output>) -> Result<Vec<Item>> {
    let cfg = &inner.cfg;
    let files: HashMap<FileId, &DataFile> = snap.inputs.iter().map(|f| (f.id, f)).collect();
    let mut items = snap.items.clone();
    let mut b = BatchBuilder::default();
    let mut rbuf = Vec::new();
    let limit = cfg.buffer_size.max(64 * 1024).min(cfg.max_body);
    let mut body = 0usize;
    for (n, it) in items.iter_mut().enumerate() {
        if n % 1024 == 0 {
            check_abort(inner)?;
        }
        let src = files[&it.old.file];
        rbuf.resize(it.old.len as usize, 0);
        read_exact_at(&*src.handle, &mut rbuf, u64::from(it.old.offset))
            .map_err(io_err("read", &src.path))?;
        let (r, _, _) = decode_record(&rbuf, format::seed(src.id)).map_err(|reason| {
            Error::Corrupted(wal::Corruption {
                path: src.path.clone(),
                offset: u64::from(it.old.offset),
                reason,
            })
        })?;
        let r = match it.what {
            What::Add(_) => RecordRef {
                kind: Kind::Add,
                tx_id: 0,
                ..r
            },
            What::Update(_) => RecordRef {
                kind: Kind::Update,
                tx_id: 0,
                ..r
            },
            What::TxOp { .. } | What::Prepare(_) => r,
        };
        let len = r.encoded_len();
        let fits = |out: &Output, body: usize| {
            out.off + format::batch_len(body + len) <= cfg.file_size as usize
        };
        if let Some(out) = outputs.last_mut() {
            if !b.is_empty() && (body + len > limit || !fits(out, body)) {
                flush(&mut b, out)?;
                body = 0;
            }
        }
        if outputs.last().map_or(true, |o| !fits(o, 0)) {
            if let Some(o) = outputs.last() {
                seal(inner, o)?;
            }
            let o = new_output(inner)?;
            b.begin(o.id, None);
            outputs.push(o);
        }
        // Not empty: a fitting output was pushed above if there was none.
        let out = &outputs[outputs.len() - 1];
        it.new = Loc {
            file: out.id,
            offset: (out.off + b.next_offset()) as u32,
            len: len as u32,
        };
        b.push(&r);
        body += len;
    }
    if let Some(out) = outputs.last_mut() {
        flush(&mut b, out)?;
        seal(inner, out)?;
    }
    check_abort(inner)?;
    Ok(items)
}

fn commit_point(inner: &Inner, snap: &Snapshot, outputs: &[Output]) -> Result<()> {
    let cfg = &inner.cfg;
    // Deletes and commits that made input content dead are durable before the inputs go.
    files::sync_file(cfg, &*snap.current.handle, &snap.current.path)?;
    let control = Control {
        inputs: snap.inputs.iter().map(|f| f.id).collect(),
        outputs: outputs.iter().map(|o| o.id).collect(),
    };
    let path = cfg.control_path();
    let written = (|| {
        let f = inner.fs.create(&path).map_err(io_err("create", &path))?;
        f.write_all_at(&control.encode(), 0)
            .map_err(io_err("write", &path))?;
        files::sync_file(cfg, &*f, &path)?;
        files::sync_dir(cfg, &*inner.fs)
    })();
    if let Err(e) = written {
        // Unknown whether the control file is durable: only reopening can tell.
        inner.fail(e);
        let cause = inner.group.completion.failure();
        return Err(cause.map_or(Error::Closed, Error::Failed));
    }
    Ok(())
}

/// Undo a compaction that did not reach its commit point.
fn abandon(inner: &Inner, snap: &Snapshot, outputs: &[Output]) {
    for o in outputs {
        let _ = inner.fs.remove_file(&o.tmp);
    }
    let mut st = inner.state();
    for f in &snap.inputs {
        if let Some(e) = st.files.get_mut(&f.id) {
            e.busy = false;
        }
    }
    st.compacting = false;
}

/// After the copy, under the state lock: the index points at the copies, dependencies on
/// the inputs move to their copies, and the outputs replace the inputs in the file table.
fn fix_up(inner: &Inner, snap: &Snapshot, items: &[Item], outputs: &[Output]) {
    let mut st = inner.state();
    let st: &mut State = &mut st;
    let inputs: HashSet<FileId> = snap.inputs.iter().map(|f| f.id).collect();
    for o in outputs {
        st.index.add_file(o.id);
    }
    let subst = relocate(&mut st.index, items);
    move_deps(&mut st.index, &inputs, &subst);
    for &i in &inputs {
        st.index.remove_file(i);
        st.files.remove(&i);
    }
    for o in outputs {
        st.files.insert(
            o.id,
            DataFile {
                id: o.id,
                path: o.tmp.clone(),
                handle: o.handle.clone(),
                compacted: true,
                busy: true,
            },
        );
    }
}

/// Points the index at the copies of the records still live; returns, per input file, the
/// outputs holding copies that someone may still depend on.
fn relocate(ix: &mut Index<()>, items: &[Item]) -> HashMap<FileId, BTreeSet<FileId>> {
    let mut subst: HashMap<FileId, BTreeSet<FileId>> = HashMap::new();
    for it in items {
        let (old, new) = (it.old, it.new);
        let live = relocate_one(ix, it);
        if live {
            ix.live_inc(new);
        }
        // Dead copies (a delete or commit appended meanwhile negates them) and transaction
        // records (a commit or rollback will refer to them) must outlive what negates them.
        if !live || matches!(it.what, What::TxOp { .. } | What::Prepare(_)) {
            subst.entry(old.file).or_default().insert(new.file);
        }
    }
    subst
}

/// Moves the index's location of `it` to its copy; `false` if the record died meanwhile.
fn relocate_one(ix: &mut Index<()>, it: &Item) -> bool {
    let (old, new) = (it.old, it.new);
    let in_record = |r: &mut Rec<()>| {
        if r.add == old {
            r.add = new;
            return true;
        }
        match r.updates.iter_mut().find(|u| u.0 == old) {
            Some(u) => {
                u.0 = new;
                true
            }
            None => false,
        }
    };
    match it.what {
        What::Add(id) | What::Update(id) => ix.records.get_mut(&id).is_some_and(in_record),
        What::TxOp { tx, id } => match ix.txs.get_mut(&tx) {
            Some(t) => match t.ops.iter_mut().find(|o| o.loc == old) {
                Some(o) => {
                    o.loc = new;
                    true
                }
                None => false,
            },
            // Committed meanwhile: the copy may now be the record's add or update.
            None => ix.records.get_mut(&id).is_some_and(in_record),
        },
        What::Prepare(tx) => match ix.txs.get_mut(&tx).and_then(|t| t.prepare.as_mut()) {
            Some(p) if p.0 == old => {
                p.0 = new;
                true
            }
            _ => false,
        },
    }
}

/// Files that depended on an input now depend on its copies (`subst`); what the inputs
/// depended on among themselves holds between their copies.
fn move_deps(
    ix: &mut Index<()>,
    inputs: &HashSet<FileId>,
    subst: &HashMap<FileId, BTreeSet<FileId>>,
) {
    let input_deps: Vec<(FileId, BTreeSet<FileId>)> = inputs
        .iter()
        .map(|&i| {
            (
                i,
                ix.files.get(&i).map(|s| s.deps.clone()).unwrap_or_default(),
            )
        })
        .collect();
    for (&fid, stats) in &mut ix.files {
        if inputs.contains(&fid) {
            continue;
        }
        let hit: Vec<FileId> = stats
            .deps
            .iter()
            .filter(|d| inputs.contains(d))
            .copied()
            .collect();
        for i in hit {
            stats.deps.remove(&i);
            if let Some(s) = subst.get(&i) {
                stats.deps.extend(s.iter().copied().filter(|&o| o != fid));
            }
        }
    }
    for (i, deps) in input_deps {
        for j in deps.iter().filter(|j| inputs.contains(j)) {
            let (Some(a), Some(b)) = (subst.get(&i), subst.get(j)) else {
                continue;
            };
            for &x in a {
                for &y in b.iter().filter(|&&y| y != x) {
                    if let Some(s) = ix.files.get_mut(&x) {
                        s.deps.insert(y);
                    }
                }
            }
        }
    }
}

fn finish(inner: &Inner, snap: &Snapshot, outputs: &[Output]) -> Result<()> {
    let cfg = &inner.cfg;
    let fs = &*inner.fs;
    for o in outputs {
        let to = cfg.data_path(o.id);
        fs.rename(&o.tmp, &to).map_err(io_err("rename", &o.tmp))?;
        if let Some(f) = inner.state().files.get_mut(&o.id) {
            f.path = to;
        }
    }
    for f in &snap.inputs {
        let keep_as = inner.state().keep_in_pool(cfg).then(|| inner.new_file_id());
        if let Some(free) = files::retire(cfg, fs, f, keep_as)? {
            inner.state().pool.insert(free.id, free);
        }
    }
    files::sync_dir(cfg, fs)?;
    let control = cfg.control_path();
    fs.remove_file(&control)
        .map_err(io_err("remove", &control))?;
    files::sync_dir(cfg, fs)?;
    let mut st = inner.state();
    for o in outputs {
        if let Some(f) = st.files.get_mut(&o.id) {
            f.busy = false;
        }
    }
    st.compacting = false;
    inner.counters.compactions.fetch_add(1, Ordering::Relaxed);
    inner.poke_housekeeper(&mut st);
    Ok(())
}
