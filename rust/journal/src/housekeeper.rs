//! The housekeeper thread: keeps free files ready, reclaims files, starts compactions.
//! It does this I/O so that the writer does not have to stall on it.
//!
//! - Pre-allocation: at least one free file ready for the writer's next file switch, and
//!   `min_files` files (data + free) in total.
//! - Reclaim: a data file before the current one with no live content whose dependencies
//!   are gone (see `index`), compacted or the oldest normal file (see
//!   `State::reclaimable`), is retired: re-stamped with a fresh id into the pool (fsynced),
//!   or deleted once the pool holds `pool_files`. Before the first retirement it syncs the
//!   current file, so the deletes that made the file dead are durable before it is: the
//!   journal never makes an op's effect durable before the op itself.
//! - Reclaim and automatic compaction pause while replication is active (see
//!   `replication`).
//! - Compaction: when at least `compact_min_files` files precede the current one, their
//!   live bytes are below `compact_percentage` % of their size, and compacting them would
//!   leave fewer files, a compaction is started.

use std::sync::{Arc, PoisonError};

use crate::files::{self, io_err};
use crate::format::{BATCH_HEADER_LEN, FILE_HEADER_LEN};
use crate::journal::{Inner, State};
use crate::Result;
use wal::writer::Locked;

pub(crate) fn run(inner: &Arc<Inner>) {
    loop {
        {
            let mut st = inner.state();
            while !st.housekeeping && !st.writing.closing && !inner.group.completion.has_failed() {
                st = inner
                    .housekeeper_cv
                    .wait(st)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if st.writing.closing || inner.group.completion.has_failed() {
                return;
            }
            st.housekeeping = false;
        }
        if let Err(e) = work(inner) {
            inner.fail(e);
            return;
        }
    }
}

fn work(inner: &Arc<Inner>) -> Result<()> {
    let cfg = &inner.cfg;
    let fs = &*inner.fs;
    loop {
        let need = {
            let st = inner.state();
            !st.writing.closing
                && (st.pool.is_empty() || st.files.len() + st.pool.len() < cfg.min_files)
        };
        if !need {
            break;
        }
        let f = files::create_free_file(cfg, fs, inner.new_file_id())?;
        inner.state().pool.insert(f.id, f);
    }
    loop {
        let (file, keep_as, current) = {
            let mut st = inner.state();
            if st.writing.closing {
                return Ok(());
            }
            let Some(file) = st.reclaimable().and_then(|id| st.files.remove(&id)) else {
                break;
            };
            let keep_as = st.keep_in_pool(cfg).then(|| inner.new_file_id());
            (file, keep_as, st.files.get(&st.current).cloned())
        };
        // Fence: what made the file dead must be durable before the file is gone.
        if let Some(cur) = current.filter(|_| cfg.datasync) {
            cur.handle
                .sync_data()
                .map_err(io_err("fdatasync", &cur.path))?;
        }
        let free = files::retire(cfg, fs, &file, keep_as)?;
        let mut st = inner.state();
        st.index.remove_file(file.id);
        if let Some(f) = free {
            st.pool.insert(f.id, f);
        }
    }
    let start = should_compact(&inner.state(), cfg);
    if start {
        inner.spawn_compactor();
    }
    Ok(())
}

/// Whether an automatic compaction is due.
pub(crate) fn should_compact(st: &Locked<State>, cfg: &crate::config::Cfg) -> bool {
    if cfg.compact_min_files == 0 || st.compacting || st.writing.closing || st.repl.is_some() {
        return false;
    }
    let (mut n, mut live) = (0u64, 0u64);
    for f in st.files.values().filter(|f| f.id != st.current && !f.busy) {
        n += 1;
        live += st.index.files.get(&f.id).map_or(0, |s| s.live_bytes);
    }
    // Only if it frees files: with few inputs the output could be as many files as the
    // input, and the same compaction would run again and again.
    let usable = cfg.file_size - (FILE_HEADER_LEN + BATCH_HEADER_LEN) as u64;
    n >= cfg.compact_min_files as u64
        && live * 100 < n * cfg.file_size * u64::from(cfg.compact_percentage)
        && live.div_ceil(usable) < n
}
