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

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use crate::config::Cfg;
use crate::files::{self, io_err, DataFile, FreeFile};
use crate::format::{
    self, parse_batch, scan_batches, Control, FileHeader, HeaderError, Name, Parsed, ScanHit,
    FILE_HEADER_LEN,
};
use crate::fs::{read_exact_at, FileSystem, JournalFile};
use crate::index::{Data, FileId, Index, Loc, TxKind};
use crate::logical::Logical;
use crate::{Error, LoadReport, Op, PreparedTransaction, RecordInfo, Result, Update};

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

/// A file found on open.
struct Found {
    header: FileHeader,
    path: PathBuf,
    handle: Arc<dyn JournalFile>,
}

fn corrupted(path: &std::path::Path, offset: u64, reason: impl Into<String>) -> Error {
    Error::Corrupted {
        path: path.to_path_buf(),
        offset,
        reason: reason.into(),
    }
}

fn read_file(f: &Found, buf: &mut Vec<u8>, size: u64) -> Result<()> {
    buf.resize(size as usize, 0);
    read_exact_at(&*f.handle, buf, 0).map_err(io_err("read", &f.path))
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

pub(crate) fn recover(cfg: &Cfg, fs: &dyn FileSystem) -> Result<Recovered> {
    let dir = cfg.dir();
    fs.create_dir_all(dir)
        .map_err(io_err("create directory", dir))?;
    let names = fs.list(dir).map_err(io_err("list", dir))?;
    let mut max_id = 0;
    let mut data_ids = Vec::new();
    let mut compacting = Vec::new();
    let mut has_control = false;
    let mut dir_changed = false;
    for name in &names {
        match format::parse_name(&cfg.prefix, &cfg.ext, name) {
            Some(Name::Data(id)) => data_ids.push(id),
            Some(Name::Creating(id)) => {
                let p = cfg.creating_path(id);
                fs.remove_file(&p).map_err(io_err("remove", &p))?;
                dir_changed = true;
                max_id = max_id.max(id);
            }
            Some(Name::Compacting(id)) => compacting.push(id),
            Some(Name::Control) => has_control = true,
            None => continue,
        }
    }
    for &id in data_ids.iter().chain(&compacting) {
        max_id = max_id.max(id);
    }

    // 1. Compaction leftovers.
    let control_path = cfg.control_path();
    let control = if has_control {
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
            dir_changed = true;
        }
        c
    } else {
        None
    };
    let outputs: HashSet<u64> = control
        .iter()
        .flat_map(|c| c.outputs.iter().copied())
        .collect();
    for &id in &compacting {
        let p = cfg.compacting_path(id);
        if outputs.contains(&id) {
            let to = cfg.data_path(id);
            fs.rename(&p, &to).map_err(io_err("rename", &p))?;
            data_ids.push(id);
        } else {
            fs.remove_file(&p).map_err(io_err("remove", &p))?;
        }
        dir_changed = true;
    }
    if let Some(c) = &control {
        for &id in c.inputs.iter().chain(&c.outputs) {
            max_id = max_id.max(id);
        }
    }

    // 2. Open and check every data file.
    data_ids.sort_unstable();
    data_ids.dedup();
    let mut found: Vec<(FileId, Found)> = Vec::new(); // (id in the name, file)
    for &name_id in &data_ids {
        let path = cfg.data_path(name_id);
        let handle = fs.open(&path).map_err(io_err("open", &path))?;
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
            Err(HeaderError::Foreign(reason)) => return Err(Error::ForeignFile { path, reason }),
            Err(HeaderError::Corrupt(reason)) => return Err(corrupted(&path, 0, reason)),
        };
        max_id = max_id.max(header.file_id);
        found.push((
            name_id,
            Found {
                header,
                path,
                handle,
            },
        ));
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
    let mut next_id = max_id + 1;
    let mut fresh_id = || {
        next_id += 1;
        next_id - 1
    };

    // Roll a committed compaction forward: its inputs are retired.
    if let Some(c) = &control {
        let inputs: HashSet<u64> = c.inputs.iter().copied().collect();
        for (_, f) in found.iter_mut() {
            if f.header.is_data() && inputs.contains(&f.header.file_id) {
                let id = fresh_id();
                f.handle
                    .write_all_at(&FileHeader::free(id).encode(), 0)
                    .map_err(io_err("write", &f.path))?;
                files::sync_file(cfg, &*f.handle, &f.path)?;
                f.header = FileHeader::free(id);
            }
        }
        files::sync_dir(cfg, fs)?;
        fs.remove_file(&control_path)
            .map_err(io_err("remove", &control_path))?;
        dir_changed = true;
    }

    // 3. Replay.
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
    let mut ix = Index::<Data>::default();
    for &i in compacted.iter().chain(&normal) {
        ix.add_file(found[i].1.header.file_id);
    }
    let mut buf = Vec::new();
    for &i in &compacted {
        let f = &found[i].1;
        let id = f.header.file_id;
        let end = f.header.data_end as usize;
        if end < FILE_HEADER_LEN || end as u64 > cfg.file_size {
            return Err(corrupted(&f.path, 0, format!("bad data end {end}")));
        }
        read_file(f, &mut buf, cfg.file_size)?;
        let mut off = FILE_HEADER_LEN;
        let mut seq = f.header.first_seq;
        while off < end {
            match parse_batch(&buf[..end], off, id) {
                Parsed::Valid(b) if b.seq == seq => {
                    apply_batch(&mut ix, id, &b);
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
    }

    // The chain of normal files. `p` is the last batch read.
    let mut p = normal
        .first()
        .map_or(0, |&i| found[i].1.header.first_seq.saturating_sub(1));
    // (position in `normal`, offset, whether something of ours lies beyond)
    let mut end: Option<(usize, usize, bool)> = None;
    let mut prev_end = FILE_HEADER_LEN;
    for (k, &i) in normal.iter().enumerate() {
        let f = &found[i].1;
        let id = f.header.file_id;
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
            end = Some((k - 1, prev_end, true));
            break;
        }
        read_file(f, &mut buf, cfg.file_size)?;
        let mut off = FILE_HEADER_LEN;
        let ours = loop {
            match parse_batch(&buf, off, id) {
                Parsed::Valid(b) if b.seq == p + 1 => {
                    apply_batch(&mut ix, id, &b);
                    p = b.seq;
                    off += b.len;
                }
                Parsed::Valid(_) | Parsed::Invalid(_) => break true,
                Parsed::NotOurs | Parsed::End => break false,
            }
        };
        let mut ours = ours;
        for hit in scan_batches(&buf, off + 1, id) {
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
        prev_end = off;
        if ours {
            end = Some((k, off, true));
            break;
        }
    }
    if end.is_none() && !normal.is_empty() {
        end = Some((normal.len() - 1, prev_end, false));
    }
    // Nothing after the end may claim to depend on a batch beyond it.
    if let Some((k, off, _)) = end {
        let at = &found[normal[k]].1.path;
        for &i in &normal[k + 1..] {
            let f = &found[i].1;
            let evidence = if f.header.durable_through > p {
                Some(f.header.durable_through)
            } else {
                read_file(f, &mut buf, cfg.file_size)?;
                scan_batches(&buf, FILE_HEADER_LEN, f.header.file_id).find_map(|h| match h {
                    ScanHit::Valid(b) if b.durable_through > p => Some(b.durable_through),
                    _ => None,
                })
            };
            if let Some(d) = evidence {
                return Err(corrupted(
                    at,
                    off as u64,
                    format!(
                        "batch {} is unreadable but {} says batch {d} was durable",
                        p + 1,
                        f.path.display()
                    ),
                ));
            }
        }
    }

    // 4. Cut a torn tail.
    let mut torn_tail = None;
    let mut resume = None;
    let mut cut_files: Vec<usize> = Vec::new();
    if let Some((k, off, ours)) = end {
        let f = &found[normal[k]].1;
        cut_files = normal[k + 1..].to_vec();
        if ours || !cut_files.is_empty() {
            torn_tail = Some((f.path.clone(), off as u64));
        }
        if ours {
            files::zero_fill(&*f.handle, &f.path, off as u64, cfg.file_size)?;
            files::sync_file(cfg, &*f.handle, &f.path)?;
        }
        resume = Some((f.header.file_id, off as u64));
    }
    for &i in &cut_files {
        let id = fresh_id();
        let f = &mut found[i].1;
        ix.remove_file(f.header.file_id);
        f.handle
            .write_all_at(&FileHeader::free(id).encode(), 0)
            .map_err(io_err("write", &f.path))?;
        files::sync_file(cfg, &*f.handle, &f.path)?;
        f.header = FileHeader::free(id);
    }

    // Names follow headers. A rename never replaces another file: ids are never reused,
    // so a name can only lag behind its own file's header.
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
    let mut files_out = BTreeMap::new();
    let mut pool = BTreeMap::new();
    for (name_id, f) in found {
        let id = f.header.file_id;
        let mut path = f.path;
        if name_id != id {
            let to = cfg.data_path(id);
            fs.rename(&path, &to).map_err(io_err("rename", &path))?;
            path = to;
            dir_changed = true;
        }
        if f.header.is_data() {
            files_out.insert(
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
    if dir_changed {
        files::sync_dir(cfg, fs)?;
    }
    // What was read is the durable base from now on (a crashed process may have left
    // written but unsynced data in the page cache).
    let durable_through = if cfg.datasync {
        for f in files_out.values() {
            f.handle.sync_data().map_err(io_err("fdatasync", &f.path))?;
        }
        p
    } else {
        0
    };

    // 5. Report.
    let (index, records, txs) = ix.strip();
    let mut report = LoadReport {
        torn_tail,
        ..LoadReport::default()
    };
    report.records = records
        .into_iter()
        .map(|(id, r)| RecordInfo {
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
        })
        .collect();
    report.records.sort_by_key(|r| r.id);
    let mut incomplete = Vec::new();
    for (tx_id, tx) in txs {
        let Some((_, xid)) = tx.prepare else {
            incomplete.push(tx_id);
            continue;
        };
        let ops = tx
            .ops
            .into_iter()
            .map(|o| match o.kind {
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
            })
            .collect();
        report.prepared.push(PreparedTransaction {
            tx_id,
            xid: xid.payload,
            ops,
        });
    }
    report.prepared.sort_by_key(|t| t.tx_id);
    incomplete.sort_unstable();
    let logical = Logical::from_index(&index);
    Ok(Recovered {
        index,
        logical,
        files: files_out,
        pool,
        resume,
        next_seq: p + 1,
        durable_through,
        next_file_id: next_id,
        report,
        incomplete,
    })
}
