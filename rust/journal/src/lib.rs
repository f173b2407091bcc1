//! Append-only journal with Apache `ActiveMQ` Artemis semantics: records (add, update,
//! delete, transactional add/update/delete, prepare, commit, rollback) appended to
//! pre-allocated files with natural group commit, recovered on open, reclaimed and
//! compacted in the background. Pure Rust (no pyo3); the bindings wrap [`Journal`].
//!
//! # Theory of operation
//!
//! - **Files** (`files`, `format`): `{prefix}-{id}.{ext}`, all exactly `file_size` bytes,
//!   pre-allocated with `fallocate`. The 64-byte header holds a magic, the format version,
//!   flags (DATA = in use, COMPACTED) and the file id; every use of a file gets a fresh id,
//!   and every checksum depends on it, so bytes from an earlier use never validate. Free
//!   files wait in a pool and are re-stamped DATA when the writer moves into them.
//! - **Batches** (`writer`): natural group commit. Whoever holds the writer role (the
//!   writer thread, or a caller blocked in `wait`/`append` while the role is free) drains
//!   the submit queue; each batch is one `pwrite` and (if any submit asked for sync) one
//!   `fdatasync`. A batch header carries a global sequence number and `durable_through`,
//!   the highest sequence known fdatasynced when it was written. Records never span files;
//!   one submit never spans batches.
//! - **Validation** (`logical`): `submit` checks ops against the state including queued ops
//!   and applies them all or none.
//! - **Index** (`index`): where each live record lives, per-file live counts, and which
//!   files must outlive which (a delete or commit must outlive what it negates).
//! - **Recovery** (`recovery`): replay; a torn tail is cut, corruption (an unreadable batch
//!   that a later batch says was durable) is `Error::Corrupted` with file and offset.
//! - **Reclaim** (`housekeeper`): dead files go back to the pool (or are deleted beyond
//!   `pool_files`); files are pre-allocated ahead of the writer.
//! - **Compaction** (`compact`): live records of all files before the current one are
//!   rewritten into new files behind a durable control file (the commit point), while
//!   appends continue.
//! - **Replication** (`replication`): a tap encodes every submit as a frame for a backup;
//!   the files holding the records before it are listed for copying and left untouched
//!   until it stops; a gate can hold completion back until the backup has a ticket.
//! - **Failure**: the first I/O error puts the journal in a failed state; it never writes
//!   again until reopened, so it cannot corrupt what it wrote; everything synced stays.
//!
//! See `docs/journal.md` for the on-disk format and the guarantees in full.

mod compact;
mod config;
mod error;
mod files;
mod format;
mod housekeeper;
mod index;
mod journal;
mod logical;
mod recovery;
mod replication;
mod writer;

pub use config::JournalConfig;
pub use error::{Error, Result};
pub use journal::Journal;
pub use replication::{
    decode_frames, encode_frame, Frame, ReplicationStart, ReplicationState, FRAME_MAGIC,
};
pub use wal::{
    root_errno, Corruption, Fault, FaultyFileSystem, FileSystem, ForeignFile, FsOp, IoError,
    IoStats, StdFileSystem, StoreFile, Ticket,
};

use std::path::PathBuf;

/// One record to append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Add {
        id: u64,
        record_type: u8,
        payload: Vec<u8>,
    },
    Update {
        id: u64,
        record_type: u8,
        payload: Vec<u8>,
    },
    Delete {
        id: u64,
    },
    AddTx {
        tx_id: u64,
        id: u64,
        record_type: u8,
        payload: Vec<u8>,
    },
    UpdateTx {
        tx_id: u64,
        id: u64,
        record_type: u8,
        payload: Vec<u8>,
    },
    DeleteTx {
        tx_id: u64,
        id: u64,
    },
    Prepare {
        tx_id: u64,
        xid: Vec<u8>,
    },
    Commit {
        tx_id: u64,
    },
    Rollback {
        tx_id: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    pub record_type: u8,
    pub payload: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordInfo {
    pub id: u64,
    pub record_type: u8,
    pub payload: Vec<u8>,
    pub updates: Vec<Update>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedTransaction {
    pub tx_id: u64,
    pub xid: Vec<u8>,
    pub ops: Vec<Op>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadReport {
    pub records: Vec<RecordInfo>,
    pub prepared: Vec<PreparedTransaction>,
    pub incomplete_transactions_rolled_back: usize,
    pub torn_tail: Option<(PathBuf, u64)>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JournalStats {
    pub data_files: usize,
    pub free_files: usize,
    pub live_records: usize,
    /// Batches written (one `pwrite` each), syncs, records and bytes written.
    pub io: wal::IoStats,
    pub compactions: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionReport {
    pub files_before: usize,
    pub files_after: usize,
    pub records_moved: usize,
}

/// What [`Journal::progress`] reports.
pub type Progress = wal::Progress<Error>;
