//! Recovery (load): rebuild the state from the files and find where appending resumes.
//!
//! Theory of operation:
//! 1. Leftovers: `*.tmp` (half-created files) are deleted. A valid compaction control file
//!    means a compaction committed: roll it forward (rename its `*.cmp` outputs, retire its
//!    inputs; idempotent). Otherwise `*.cmp` files (and a torn control file) are deleted.
//! 2. Every `{prefix}-{n}.{ext}` must have the configured size (`WrongFileSize`) and our
//!    header (`ForeignFile`; a damaged header is `Corrupted` at offset 0). Files whose header
//!    lacks the DATA flag are free; the rest are replayed: compacted files first (each must
//!    be intact up to its recorded end), then normal files by id.
//! 3. Normal files form one chain of batches with consecutive sequence numbers; each file's
//!    header records the sequence its first batch has. The chain ends at the first offset
//!    that does not hold the next batch. If something written by this journal lies beyond
//!    that point (a batch of this file that fails to validate, or validates out of order,
//!    or a later file), it is a torn tail, *unless* a later valid batch or file header says
//!    (via `durable_through`) that a batch after the end had been fdatasynced: then the
//!    end is corruption, reported with file and offset.
//! 4. A torn tail is cut: the rest of that file is zeroed (so stale batches can never be
//!    mistaken for new ones, whose sequence numbers continue from the cut), later data files
//!    are re-stamped free, and appending resumes at the cut.
//! 5. Transactions: committed ones were applied during replay; prepared ones are reported;
//!    the rest are returned to be rolled back durably by `open`.
//!
//! [`recover`] runs the phases in that order: the directory's files through `Directory`
//! (`directory.rs`: phases 1, 2 and the renames of 4), replay through `Replay`
//! (`replay.rs`: 3), then `cut_torn_tail` (4) and `load_report` (5), here. Retiring a committed compaction's inputs (phase 1) waits
//! until phase 2 has read the headers that say which files those are.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::config::Cfg;
use crate::files::{self, io_err, DataFile, FreeFile};
use crate::format::{self, FileHeader};
use crate::index::{Data, FileId, Index, Loc, Rec, TxKind, TxOp};
use crate::logical::Logical;
use crate::{Error, LoadReport, Op, PreparedTransaction, RecordInfo, Result, Update};

mod directory;
mod replay;

use directory::Directory;
use replay::{replay, ChainEnd, Replayed};
use wal::{read_exact_at, FileSystem, StoreFile};

pub(crate) struct Recovered {
    pub index: Index<()>,
    pub logical: Logical,
    pub files: BTreeMap<FileId, DataFile>,
    pub pool: BTreeMap<FileId, FreeFile>,
    /// Where appending resumes (file, offset); `None`: start a fresh file.
    pub resume: Option<(FileId, u64)>,
    pub next_seq: u64,
    pub durable_through: u64,
    pub next_file_id: FileId,
    pub report: LoadReport,
    /// Transactions to roll back (neither prepared nor finished).
    pub incomplete: Vec<u64>,
}

/// Recovers the journal in `cfg`'s directory: the phases above, in order.
pub(crate) fn recover(cfg: &Cfg, fs: &dyn FileSystem) -> Result<Recovered> {
    let mut dir = Directory {
        cfg,
        fs,
        max_id: 0,
        changed: false,
    };

    // 1. Compaction leftovers.
    let mut listing = dir.list()?;
    let control = dir.settle_compaction_outputs(&mut listing)?;

    // 2. Open and check every data file.
    let mut found = dir.open_data_files(listing.data_ids)?;
    let mut ids = FreshIds {
        next: dir.max_id + 1,
    };
    if let Some(c) = &control {
        dir.retire_compaction_inputs(c, &mut found, &mut ids)?;
    }

    // 3. Replay.
    let Replayed {
        mut ix,
        normal,
        last_seq,
        end,
    } = replay(cfg, &found)?;

    // 4. Cut a torn tail; then names follow headers, and what was read becomes durable.
    let cut = cut_torn_tail(cfg, &mut found, &mut ix, &normal, end, &mut ids)?;
    let (data_files, pool) = dir.name_files_after_headers(found)?;
    if dir.changed {
        files::sync_dir(cfg, fs)?;
    }
    let durable_through = sync_durable_base(cfg, &data_files, last_seq)?;

    // 5. Report.
    let (index, report, incomplete) = load_report(ix, cut.torn_tail);
    let logical = Logical::from_index(&index);
    Ok(Recovered {
        index,
        logical,
        files: data_files,
        pool,
        resume: cut.resume,
        next_seq: last_seq + 1,
        durable_through,
        next_file_id: ids.next,
        report,
        incomplete,
    })
}

/// A file found on open.
struct Found {
    header: FileHeader,
    path: PathBuf,
    handle: Arc<dyn StoreFile>,
}

impl Found {
    /// Re-stamps the file free under `id` (durably); its name is fixed later.
    fn stamp_free(&mut self, cfg: &Cfg, id: FileId) -> Result<()> {
        self.handle
            .write_all_at(&FileHeader::free(id).encode(), 0)
            .map_err(io_err("write", &self.path))?;
        files::sync_file(cfg, &*self.handle, &self.path)?;
        self.header = FileHeader::free(id);
        Ok(())
    }
}

fn corrupted(path: &std::path::Path, offset: u64, reason: impl Into<String>) -> Error {
    Error::Corrupted(wal::Corruption {
        path: path.to_path_buf(),
        offset,
        reason: reason.into(),
    })
}

fn read_file(f: &Found, buf: &mut Vec<u8>, size: u64) -> Result<()> {
    buf.resize(size as usize, 0);
    read_exact_at(&*f.handle, buf, 0).map_err(io_err("read", &f.path))?;
    Ok(())
}

fn apply_batch(ix: &mut Index<Data>, file: FileId, b: &format::Batch<'_>) {
    for (off, len, r) in b.records() {
        ix.apply(
            &r,
            Loc {
                file,
                offset: off as u32,
                len: len as u32,
            },
        );
    }
}

/// Allocates file ids above every id seen (in names, the control file and headers), so an
/// id is never reused.
struct FreshIds {
    next: FileId,
}

impl FreshIds {
    fn fresh(&mut self) -> FileId {
        self.next += 1;
        self.next - 1
    }
}

// ---------------------------------------------------------------------------------------
// Phase 4: the cut

/// What cutting the torn tail decided.
struct Cut {
    /// The file and offset of the cut, when something was cut.
    torn_tail: Option<(PathBuf, u64)>,
    /// Where appending resumes (file, offset); `None`: start a fresh file.
    resume: Option<(FileId, u64)>,
}

/// Cuts the chain at its end: the rest of that file is zeroed if something of ours lies
/// there, later normal files are re-stamped free (and leave the index), and appending
/// resumes at the end.
fn cut_torn_tail(
    cfg: &Cfg,
    found: &mut [(FileId, Found)],
    ix: &mut Index<Data>,
    normal: &[usize],
    end: Option<ChainEnd>,
    ids: &mut FreshIds,
) -> Result<Cut> {
    let Some(end) = end else {
        return Ok(Cut {
            torn_tail: None,
            resume: None,
        });
    };
    let f = &found[normal[end.file]].1;
    let cut_files = &normal[end.file + 1..];
    let offset = end.offset as u64;
    let torn_tail = (end.ours_beyond || !cut_files.is_empty()).then(|| (f.path.clone(), offset));
    if end.ours_beyond {
        files::zero_fill(&*f.handle, &f.path, offset, cfg.file_size)?;
        files::sync_file(cfg, &*f.handle, &f.path)?;
    }
    let resume = Some((f.header.file_id, offset));
    for &i in cut_files {
        let id = ids.fresh();
        let f = &mut found[i].1;
        ix.remove_file(f.header.file_id);
        f.stamp_free(cfg, id)?;
    }
    Ok(Cut { torn_tail, resume })
}

/// What was read is the durable base from now on (a crashed process may have left
/// written but unsynced data in the page cache): returns the `durable_through` to resume
/// with.
fn sync_durable_base(
    cfg: &Cfg,
    data_files: &BTreeMap<FileId, DataFile>,
    last_seq: u64,
) -> Result<u64> {
    if !cfg.datasync {
        return Ok(0);
    }
    for f in data_files.values() {
        f.handle.sync_data().map_err(io_err("fdatasync", &f.path))?;
    }
    Ok(last_seq)
}

// ---------------------------------------------------------------------------------------
// Phase 5: the report

/// The run-time index, the load report, and the transactions to roll back (neither
/// prepared nor finished), each sorted by id.
fn load_report(
    ix: Index<Data>,
    torn_tail: Option<(PathBuf, u64)>,
) -> (Index<()>, LoadReport, Vec<u64>) {
    let (index, records, txs) = ix.strip();
    let mut report = LoadReport {
        torn_tail,
        ..LoadReport::default()
    };
    report.records = records.into_iter().map(record_info).collect();
    report.records.sort_by_key(|r| r.id);
    let mut incomplete = Vec::new();
    for (tx_id, tx) in txs {
        let Some((_, xid)) = tx.prepare else {
            incomplete.push(tx_id);
            continue;
        };
        report.prepared.push(PreparedTransaction {
            tx_id,
            xid: xid.payload,
            ops: tx.ops.into_iter().map(|o| tx_op(tx_id, o)).collect(),
        });
    }
    report.prepared.sort_by_key(|t| t.tx_id);
    incomplete.sort_unstable();
    (index, report, incomplete)
}

fn record_info((id, r): (u64, Rec<Data>)) -> RecordInfo {
    RecordInfo {
        id,
        record_type: r.data.record_type,
        payload: r.data.payload,
        updates: r
            .updates
            .into_iter()
            .map(|(_, d)| Update {
                record_type: d.record_type,
                payload: d.payload,
            })
            .collect(),
    }
}

/// A prepared transaction's operation as the report gives it.
fn tx_op(tx_id: u64, o: TxOp<Data>) -> Op {
    match o.kind {
        TxKind::Add => Op::AddTx {
            tx_id,
            id: o.id,
            record_type: o.data.record_type,
            payload: o.data.payload,
        },
        TxKind::Update => Op::UpdateTx {
            tx_id,
            id: o.id,
            record_type: o.data.record_type,
            payload: o.data.payload,
        },
        TxKind::Delete => Op::DeleteTx { tx_id, id: o.id },
    }
}
