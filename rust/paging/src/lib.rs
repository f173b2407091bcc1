//! Page files: per-address append-only stores of paged messages (Artemis's paging, with
//! checksums). Pure Rust (no pyo3); the bindings wrap [`PageStore`].
//!
//! # Theory of operation
//!
//! - **Layout**: one directory per address holding `address.txt` (the address name) and
//!   page files `%09d.page`. Page numbers start at 1, increase, and are never reused in a
//!   store; a record's position `(page, offset)` therefore names it for the store's life.
//! - **Format** (`format`): a header (magic, version, page number), then records
//!   `len | crc32c | payload`; the CRC covers the page number and the record's offset, so
//!   stale bytes never validate. A record never spans pages. New pages are version 2
//!   (records carry the message's queue offset); version 1 pages stay readable, each page
//!   read with the layout its header names.
//! - **Appending** (`store`): positions are assigned and records encoded at once, under the
//!   state lock, into per-page segments queued for the writer; nothing blocks on I/O.
//! - **Writing** (`writer`): one writer thread takes everything queued (natural group
//!   commit): one `pwrite` per page segment and one `fdatasync` if any append in the batch
//!   asked for sync. Before the first write into a new page the finished page is
//!   fdatasynced and the new file's creation is made durable (directory fsync), so only the
//!   last page of a store can have a torn tail. Tickets complete in order.
//! - **Reading** (`read`): only what the writer has written (`written_end` per page), and
//!   never past the first bad record.
//! - **Recovery** (`recovery`): every page but the last must parse completely (else
//!   [`Error::Corrupted`] with file and offset); the last page's torn tail is cut. Appends
//!   after a reopen always go to a fresh page, so a position handed out before a crash is
//!   never given to another record, even when the crash lost it.
//! - **Failure**: the first I/O error fails the store; it never writes again, so what it
//!   synced stays, and positions not written are never readable.
//!
//! See `docs/page-files.md` for the format and guarantees in full.

mod error;
pub mod format;
mod read;
mod recovery;
mod store;
mod writer;

pub use error::{Error, Result};
pub use read::read_page_file;
pub use store::PageStore;
pub use wal::{
    root_errno, Corruption, Fault, FaultyFileSystem, FileSystem, ForeignFile, FsOp, IoError,
    IoStats, StdFileSystem, StoreFile, Ticket,
};

/// One record to append, borrowed from the caller.
#[derive(Debug, Clone, Copy)]
pub struct NewRecord<'a> {
    pub message_id: u64,
    pub tx_id: u64,
    /// The message's offset in its queues (the broker's queue offsets).
    pub queue_offset: u64,
    pub queue_ids: &'a [u64],
    pub message: &'a [u8],
}

/// One record read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PagedRecord {
    pub page: u64,
    /// Where the record starts in its page file.
    pub offset: u64,
    pub message_id: u64,
    pub tx_id: u64,
    /// The message's offset in its queues; a version 1 record's is its message id.
    pub queue_offset: u64,
    pub queue_ids: Vec<u64>,
    pub message: Vec<u8>,
}

/// What [`PageStore::read`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOut {
    pub records: Vec<PagedRecord>,
    /// Where the next read of this page starts.
    pub next_offset: u64,
    /// The page is finished (appends moved on) and `next_offset` is its end.
    pub page_done: bool,
}

/// Counters since the store was opened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageStats {
    /// `pwrite`s (one per page segment of a batch), syncs, records and bytes written.
    pub io: wal::IoStats,
    pub pages_created: u64,
}

/// What [`PageStore::progress`] reports.
pub type Progress = wal::Progress<Error>;
