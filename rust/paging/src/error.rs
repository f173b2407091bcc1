//! The crate's single error type.

use std::path::PathBuf;
use std::sync::Arc;

use wal::{Corruption, ForeignFile, IoError};

/// Everything that can go wrong in a page store.
#[derive(thiserror::Error, Debug)]
pub enum Error {
    /// An I/O operation failed; its `source` keeps the errno.
    #[error(transparent)]
    Io(#[from] IoError),
    /// Durable data failed validation.
    #[error("page file corrupted: {0}")]
    Corrupted(Corruption),
    /// A file named like a page file that is not one of ours (another format or version,
    /// or a header naming another page).
    #[error("not a page file of this format: {0}")]
    ForeignFile(ForeignFile),
    /// A directory that is not a page store (no address file, or an unreadable one).
    #[error("not a page store: {path}: {reason}", path = .path.display())]
    NotAStore { path: PathBuf, reason: String },
    #[error("record of {size} bytes is larger than the maximum of {max}")]
    RecordTooLarge { size: u64, max: u64 },
    /// A page that does not exist, or cannot be used for what was asked.
    #[error("page {page} of {path}: {reason}", path = .path.display())]
    BadPage {
        path: PathBuf,
        page: u64,
        reason: String,
    },
    /// The writer failed earlier; the store refuses writes until reopened.
    #[error("page store failed: {0}")]
    Failed(#[source] Arc<Error>),
    #[error("page store {path} closed", path = .path.display())]
    Closed { path: PathBuf },
    #[error("invalid page store configuration: {0}")]
    InvalidConfig(String),
}

/// `Result` with the page store's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
