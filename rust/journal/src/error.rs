//! The crate's single error type.

use std::path::PathBuf;
use std::sync::Arc;

use wal::{Corruption, ForeignFile, IoError, Stopped};

/// Everything that can go wrong in the journal.
#[derive(thiserror::Error, Debug)]
pub enum Error {
    /// An I/O operation failed; its `source` keeps the errno.
    #[error(transparent)]
    Io(#[from] IoError),
    /// Durable data failed validation.
    #[error("journal corrupted: {0}")]
    Corrupted(Corruption),
    /// A file is named like a journal data file but is not one of ours.
    #[error("foreign file {0}")]
    ForeignFile(ForeignFile),
    /// A data file does not have the configured size.
    #[error("data file {path} has size {actual}, expected {expected}", path = .path.display())]
    WrongFileSize {
        path: PathBuf,
        expected: u64,
        actual: u64,
    },
    #[error("record {id} not found")]
    RecordNotFound { id: u64 },
    #[error("record {id} already exists")]
    DuplicateRecord { id: u64 },
    #[error("transaction {tx_id}: {reason}")]
    Transaction { tx_id: u64, reason: String },
    #[error("record of {size} bytes is larger than the maximum of {max}")]
    RecordTooLarge { size: usize, max: usize },
    /// The writer failed earlier; the journal refuses writes until reopened.
    #[error("journal failed: {0}")]
    Failed(#[source] Arc<Error>),
    #[error("journal closed")]
    Closed,
    #[error("invalid journal configuration: {0}")]
    InvalidConfig(String),
    /// Replication misuse (started twice) or a replication stream that cannot be applied
    /// (a corrupt or truncated frame, or ops the backup's state refuses).
    #[error("replication: {0}")]
    Replication(String),
}

impl From<Stopped<Error>> for Error {
    fn from(stopped: Stopped<Error>) -> Self {
        match stopped {
            Stopped::Failed(cause) => Error::Failed(cause),
            Stopped::Closed => Error::Closed,
        }
    }
}

/// `Result` with the journal's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
