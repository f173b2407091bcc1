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
//! (phases 1, 2 and the renames of 4), replay through `Replay` (3), then `cut_torn_tail`
//! (4) and `load_report` (5). Retiring a committed compaction's inputs (phase 1) waits
//! until phase 2 has read the headers that say which files those are.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use crate::config::Cfg;
use crate::files::{self, io_err, DataFile, FreeFile};
use crate::format::{
    self, parse_batch, scan_batches, Control, FileHeader, HeaderError, Name, Parsed, ScanHit,
    FILE_HEADER_LEN,
};
use crate::index::{Data, FileId, Index, Loc, Rec, TxKind, TxOp};
use crate::logical::Logical;
use crate::{Error, LoadReport, Op, PreparedTransaction, RecordInfo, Result, Update};
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
// Phases 1 and 2: the directory's files

/// The journal directory as recovery finds and changes it.
struct Directory<'a> {
    cfg: &'a Cfg,
    fs: &'a dyn FileSystem,
    /// The highest file id seen so far.
    max_id: FileId,
    /// Whether a file was renamed or removed: the directory must be synced.
    changed: bool,
}

/// The journal's files in the directory, by the ids in their names.
struct Listing {
    data_ids: Vec<FileId>,
    compacting: Vec<FileId>,
    has_control: bool,
}

impl Directory<'_> {
    fn note_id(&mut self, id: FileId) {
        self.max_id = self.max_id.max(id);
    }

    /// Creates the directory if missing and lists the journal's files in it; `*.tmp`
    /// files (half-created) are deleted.
    fn list(&mut self) -> Result<Listing> {
        let (cfg, fs) = (self.cfg, self.fs);
        let dir = cfg.dir();
        fs.create_dir_all(dir)
            .map_err(io_err("create directory", dir))?;
        let names = fs.list(dir).map_err(io_err("list", dir))?;
        let mut listing = Listing {
            data_ids: Vec::new(),
            compacting: Vec::new(),
            has_control: false,
        };
        for name in &names {
            match format::parse_name(&cfg.prefix, &cfg.ext, name) {
                Some(Name::Data(id)) => listing.data_ids.push(id),
                Some(Name::Creating(id)) => {
                    let p = cfg.creating_path(id);
                    fs.remove_file(&p).map_err(io_err("remove", &p))?;
                    self.changed = true;
                    self.note_id(id);
                }
                Some(Name::Compacting(id)) => listing.compacting.push(id),
                Some(Name::Control) => listing.has_control = true,
                None => {}
            }
        }
        for &id in listing.data_ids.iter().chain(&listing.compacting) {
            self.note_id(id);
        }
        Ok(listing)
    }

    /// A valid control file means the compaction committed: its `*.cmp` outputs are
    /// renamed into place (joining `listing.data_ids`) and it is returned, for
    /// [`Self::retire_compaction_inputs`]. Other `*.cmp` files, and a torn control file,
    /// are deleted.
    fn settle_compaction_outputs(&mut self, listing: &mut Listing) -> Result<Option<Control>> {
        let (cfg, fs) = (self.cfg, self.fs);
        let control = if listing.has_control {
            self.read_control()?
        } else {
            None
        };
        let outputs: HashSet<u64> = control
            .iter()
            .flat_map(|c| c.outputs.iter().copied())
            .collect();
        for &id in &listing.compacting {
            let p = cfg.compacting_path(id);
            if outputs.contains(&id) {
                let to = cfg.data_path(id);
                fs.rename(&p, &to).map_err(io_err("rename", &p))?;
                listing.data_ids.push(id);
            } else {
                fs.remove_file(&p).map_err(io_err("remove", &p))?;
            }
            self.changed = true;
        }
        if let Some(c) = &control {
            for &id in c.inputs.iter().chain(&c.outputs) {
                self.note_id(id);
            }
        }
        Ok(control)
    }

    /// The control file's contents; None (and the file deleted) if it is torn.
    fn read_control(&mut self) -> Result<Option<Control>> {
        let (cfg, fs) = (self.cfg, self.fs);
        let control_path = cfg.control_path();
        let f = fs
            .open(&control_path)
            .map_err(io_err("open", &control_path))?;
        let len = f.len().map_err(io_err("stat", &control_path))?;
        let mut b = vec![0u8; len.min(1 << 24) as usize];
        read_exact_at(&*f, &mut b, 0).map_err(io_err("read", &control_path))?;
        let c = Control::decode(&b);
        if c.is_none() {
            // Torn: the compaction never committed.
            fs.remove_file(&control_path)
                .map_err(io_err("remove", &control_path))?;
            self.changed = true;
        }
        Ok(c)
    }

    /// Opens the data files (by id in the name) and checks their size and header, and
    /// that no two share a file id.
    fn open_data_files(&mut self, mut data_ids: Vec<FileId>) -> Result<Vec<(FileId, Found)>> {
        data_ids.sort_unstable();
        data_ids.dedup();
        let mut found: Vec<(FileId, Found)> = Vec::new(); // (id in the name, file)
        for &name_id in &data_ids {
            found.push((name_id, self.open_data_file(name_id)?));
        }
        let mut seen = HashSet::new();
        for (_, f) in &found {
            if !seen.insert(f.header.file_id) {
                return Err(corrupted(
                    &f.path,
                    0,
                    format!("file id {} is used by two files", f.header.file_id),
                ));
            }
        }
        Ok(found)
    }

    fn open_data_file(&mut self, name_id: FileId) -> Result<Found> {
        let cfg = self.cfg;
        let path = cfg.data_path(name_id);
        let handle = self.fs.open(&path).map_err(io_err("open", &path))?;
        let len = handle.len().map_err(io_err("stat", &path))?;
        if len != cfg.file_size {
            return Err(Error::WrongFileSize {
                path,
                expected: cfg.file_size,
                actual: len,
            });
        }
        let mut h = [0u8; FILE_HEADER_LEN];
        read_exact_at(&*handle, &mut h, 0).map_err(io_err("read", &path))?;
        let header = match FileHeader::decode(&h) {
            Ok(h) => h,
            Err(HeaderError::Foreign(reason)) => {
                return Err(Error::ForeignFile(wal::ForeignFile { path, reason }))
            }
            Err(HeaderError::Corrupt(reason)) => return Err(corrupted(&path, 0, reason)),
        };
        self.note_id(header.file_id);
        Ok(Found {
            header,
            path,
            handle,
        })
    }

    /// Rolls a committed compaction forward: its inputs are retired (re-stamped free),
    /// then the control file is deleted. A crash part-way repeats it on the next open.
    fn retire_compaction_inputs(
        &mut self,
        c: &Control,
        found: &mut [(FileId, Found)],
        ids: &mut FreshIds,
    ) -> Result<()> {
        let (cfg, fs) = (self.cfg, self.fs);
        let inputs: HashSet<u64> = c.inputs.iter().copied().collect();
        for (_, f) in found.iter_mut() {
            if f.header.is_data() && inputs.contains(&f.header.file_id) {
                f.stamp_free(cfg, ids.fresh())?;
            }
        }
        files::sync_dir(cfg, fs)?;
        let control_path = cfg.control_path();
        fs.remove_file(&control_path)
            .map_err(io_err("remove", &control_path))?;
        self.changed = true;
        Ok(())
    }

    /// Names follow headers: renames each file whose name lags behind the id in its
    /// header, and sorts the files into data files and free ones. A rename never replaces
    /// another file: ids are never reused, so a name can only lag behind its own file's
    /// header.
    fn name_files_after_headers(
        &mut self,
        found: Vec<(FileId, Found)>,
    ) -> Result<(BTreeMap<FileId, DataFile>, BTreeMap<FileId, FreeFile>)> {
        let names: HashSet<FileId> = found.iter().map(|(n, _)| *n).collect();
        for (name_id, f) in &found {
            let id = f.header.file_id;
            if *name_id != id && names.contains(&id) {
                return Err(corrupted(
                    &f.path,
                    0,
                    format!("holds file id {id}, but another file has that name"),
                ));
            }
        }
        let mut data_files = BTreeMap::new();
        let mut pool = BTreeMap::new();
        for (name_id, f) in found {
            let id = f.header.file_id;
            let mut path = f.path;
            if name_id != id {
                let to = self.cfg.data_path(id);
                self.fs
                    .rename(&path, &to)
                    .map_err(io_err("rename", &path))?;
                path = to;
                self.changed = true;
            }
            if f.header.is_data() {
                data_files.insert(
                    id,
                    DataFile {
                        id,
                        path,
                        handle: f.handle,
                        compacted: f.header.is_compacted(),
                        busy: false,
                    },
                );
            } else {
                pool.insert(id, FreeFile { id, path });
            }
        }
        Ok((data_files, pool))
    }
}

// ---------------------------------------------------------------------------------------
// Phase 3: replay

/// Where the chain of normal files ends.
#[derive(Clone, Copy)]
struct ChainEnd {
    /// The file it ends in, as a position in the normal files.
    file: usize,
    /// Where the next batch would have been.
    offset: usize,
    /// Whether something written by this journal lies beyond, in that file or a later one.
    ours_beyond: bool,
}

/// What replay rebuilt.
struct Replayed {
    ix: Index<Data>,
    /// The normal data files by file id, as positions in `found`.
    normal: Vec<usize>,
    /// The sequence number of the last batch read.
    last_seq: u64,
    /// None when there are no normal files.
    end: Option<ChainEnd>,
}

/// Replays the data files into an index: compacted files first (each must be intact up to
/// its recorded end), then the chain of normal files by id. Errors if the chain's end is
/// corruption rather than a torn tail.
fn replay(cfg: &Cfg, found: &[(FileId, Found)]) -> Result<Replayed> {
    let mut compacted: Vec<usize> = Vec::new();
    let mut normal: Vec<usize> = Vec::new();
    for (i, (_, f)) in found.iter().enumerate() {
        if f.header.is_data() && f.header.is_compacted() {
            compacted.push(i);
        } else if f.header.is_data() {
            normal.push(i);
        }
    }
    compacted.sort_by_key(|&i| found[i].1.header.file_id);
    normal.sort_by_key(|&i| found[i].1.header.file_id);
    let mut r = Replay {
        cfg,
        ix: Index::<Data>::default(),
        buf: Vec::new(),
        last_seq: 0,
    };
    for &i in compacted.iter().chain(&normal) {
        r.ix.add_file(found[i].1.header.file_id);
    }
    for &i in &compacted {
        r.compacted_file(&found[i].1)?;
    }
    let end = r.chain(found, &normal)?;
    if let Some(end) = end {
        r.check_nothing_durable_after(found, &normal, end)?;
    }
    Ok(Replayed {
        ix: r.ix,
        normal,
        last_seq: r.last_seq,
        end,
    })
}

/// Replay's state: the index being rebuilt and the last batch of the chain read.
struct Replay<'a> {
    cfg: &'a Cfg,
    ix: Index<Data>,
    /// One file's contents at a time.
    buf: Vec<u8>,
    /// The sequence number of the last batch read.
    last_seq: u64,
}

impl Replay<'_> {
    /// Replays a compacted file, which must hold consecutive valid batches up to its end.
    fn compacted_file(&mut self, f: &Found) -> Result<()> {
        let id = f.header.file_id;
        let end = f.header.data_end as usize;
        if end < FILE_HEADER_LEN || end as u64 > self.cfg.file_size {
            return Err(corrupted(&f.path, 0, format!("bad data end {end}")));
        }
        read_file(f, &mut self.buf, self.cfg.file_size)?;
        let mut off = FILE_HEADER_LEN;
        let mut seq = f.header.first_seq;
        while off < end {
            match parse_batch(&self.buf[..end], off, id) {
                Parsed::Valid(b) if b.seq == seq => {
                    apply_batch(&mut self.ix, id, &b);
                    off += b.len;
                    seq += 1;
                }
                Parsed::Valid(b) => {
                    return Err(corrupted(
                        &f.path,
                        off as u64,
                        format!("batch {} where batch {seq} belongs", b.seq),
                    ))
                }
                Parsed::Invalid(reason) => return Err(corrupted(&f.path, off as u64, reason)),
                Parsed::NotOurs | Parsed::End => {
                    return Err(corrupted(&f.path, off as u64, "compacted data missing"))
                }
            }
        }
        Ok(())
    }

    /// Follows the chain of batches through the normal files (`normal`, positions in
    /// `found`); returns where it ends.
    fn chain(&mut self, found: &[(FileId, Found)], normal: &[usize]) -> Result<Option<ChainEnd>> {
        self.last_seq = normal
            .first()
            .map_or(0, |&i| found[i].1.header.first_seq.saturating_sub(1));
        let mut prev_end = FILE_HEADER_LEN;
        for (k, &i) in normal.iter().enumerate() {
            let f = &found[i].1;
            let p = self.last_seq;
            if k > 0 && f.header.first_seq != p + 1 {
                if f.header.first_seq <= p {
                    return Err(corrupted(
                        &f.path,
                        0,
                        format!(
                            "file starts at batch {} but batch {p} was read before it",
                            f.header.first_seq
                        ),
                    ));
                }
                // Batches at the end of the previous file are missing.
                return Ok(Some(ChainEnd {
                    file: k - 1,
                    offset: prev_end,
                    ours_beyond: true,
                }));
            }
            let (off, ours) = self.normal_file(f)?;
            prev_end = off;
            if ours {
                return Ok(Some(ChainEnd {
                    file: k,
                    offset: off,
                    ours_beyond: true,
                }));
            }
        }
        Ok(normal.len().checked_sub(1).map(|k| ChainEnd {
            file: k,
            offset: prev_end,
            ours_beyond: false,
        }))
    }

    /// Replays the batches of a normal file that continue the chain; returns the offset
    /// where the chain stops in it and whether something of ours lies beyond it there.
    /// A valid batch beyond it that says a batch after the chain was durable makes the
    /// stop corruption.
    fn normal_file(&mut self, f: &Found) -> Result<(usize, bool)> {
        let id = f.header.file_id;
        read_file(f, &mut self.buf, self.cfg.file_size)?;
        let mut off = FILE_HEADER_LEN;
        let mut ours = loop {
            match parse_batch(&self.buf, off, id) {
                Parsed::Valid(b) if b.seq == self.last_seq + 1 => {
                    apply_batch(&mut self.ix, id, &b);
                    self.last_seq = b.seq;
                    off += b.len;
                }
                Parsed::Valid(_) | Parsed::Invalid(_) => break true,
                Parsed::NotOurs | Parsed::End => break false,
            }
        };
        let p = self.last_seq;
        for hit in scan_batches(&self.buf, off + 1, id) {
            ours = true;
            if let ScanHit::Valid(b) = hit {
                if b.durable_through > p {
                    return Err(corrupted(
                        &f.path,
                        off as u64,
                        format!(
                            "batch {} is unreadable but batch {} at offset {} says it was durable",
                            p + 1,
                            b.seq,
                            b.offset
                        ),
                    ));
                }
            }
        }
        Ok((off, ours))
    }

    /// Nothing after the end may claim to depend on a batch beyond it: a later normal
    /// file whose header or one of whose batches says so makes the end corruption.
    fn check_nothing_durable_after(
        &mut self,
        found: &[(FileId, Found)],
        normal: &[usize],
        end: ChainEnd,
    ) -> Result<()> {
        let at = &found[normal[end.file]].1.path;
        let p = self.last_seq;
        for &i in &normal[end.file + 1..] {
            let f = &found[i].1;
            if let Some(d) = self.durable_claim(f)? {
                return Err(corrupted(
                    at,
                    end.offset as u64,
                    format!(
                        "batch {} is unreadable but {} says batch {d} was durable",
                        p + 1,
                        f.path.display()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A batch after the last one read that `f` says was durable, if any.
    fn durable_claim(&mut self, f: &Found) -> Result<Option<u64>> {
        let p = self.last_seq;
        if f.header.durable_through > p {
            return Ok(Some(f.header.durable_through));
        }
        read_file(f, &mut self.buf, self.cfg.file_size)?;
        Ok(
            scan_batches(&self.buf, FILE_HEADER_LEN, f.header.file_id).find_map(|h| match h {
                ScanHit::Valid(b) if b.durable_through > p => Some(b.durable_through),
                _ => None,
            }),
        )
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
