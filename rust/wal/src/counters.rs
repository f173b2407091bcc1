//! The writer counters both stores report in their stats.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{io_err, IoError, StoreFile};

/// Counted since the store was opened.
#[derive(Debug, Default)]
pub struct Counters {
    /// `pwrite`s.
    pub writes: AtomicU64,
    /// `fdatasync`s.
    pub syncs: AtomicU64,
    pub records: AtomicU64,
    pub bytes: AtomicU64,
}

impl Counters {
    /// Writes `buf` at `offset` of `file` (at `path`, for the error) and counts it.
    pub fn write(
        &self,
        file: &dyn StoreFile,
        path: &Path,
        buf: &[u8],
        offset: u64,
    ) -> Result<(), IoError> {
        file.write_all_at(buf, offset)
            .map_err(io_err("write", path))?;
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// `fdatasync`s `file` (at `path`, for the error) and counts it.
    pub fn sync(&self, file: &dyn StoreFile, path: &Path) -> Result<(), IoError> {
        file.sync_data().map_err(io_err("fdatasync", path))?;
        self.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    pub fn count_records(&self, n: u64) {
        self.records.fetch_add(n, Ordering::Relaxed);
    }

    /// What has been counted so far.
    pub fn snapshot(&self) -> IoStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        IoStats {
            writes: get(&self.writes),
            syncs: get(&self.syncs),
            records: get(&self.records),
            bytes: get(&self.bytes),
        }
    }
}

/// A snapshot of [`Counters`], in a store's stats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoStats {
    /// `pwrite`s (the journal writes one per batch).
    pub writes: u64,
    /// `fdatasync`s.
    pub syncs: u64,
    pub records: u64,
    pub bytes: u64,
}
