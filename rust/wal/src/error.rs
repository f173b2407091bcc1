//! The error parts both stores have: an I/O failure naming its operation and file, bad bytes
//! at an offset of a file, and a file that is not one of ours. Each store's `Error` wraps
//! them in a variant of its own wording, so Python sees one exception class per store.

use std::io;
use std::path::{Path, PathBuf};

/// An I/O operation failed; `source` keeps the errno.
#[derive(thiserror::Error, Debug)]
#[error("{op} {path}: {source}", path = .path.display())]
pub struct IoError {
    pub op: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

/// Durable data that failed validation: which file, where, and why.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[error("{path} at offset {offset}: {reason}", path = .path.display())]
pub struct Corruption {
    pub path: PathBuf,
    pub offset: u64,
    pub reason: String,
}

/// A file named like one of ours that is not (another format, version or id).
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[error("{path}: {reason}", path = .path.display())]
pub struct ForeignFile {
    pub path: PathBuf,
    pub reason: String,
}

/// Wraps an `io::Error` with the operation and the path; `?` turns it into the store's
/// error: `file.sync_data().map_err(io_err("fdatasync", &path))?`.
pub fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> IoError + 'a {
    move |source| IoError {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// The OS error number at the root of `err`'s chain of sources (an I/O error that failed a
/// store, however it was wrapped), if there is one.
pub fn root_errno(err: &(dyn std::error::Error + 'static)) -> Option<i32> {
    let mut at = Some(err);
    while let Some(e) = at {
        if let Some(io) = e.downcast_ref::<io::Error>() {
            return io.raw_os_error();
        }
        at = e.source();
    }
    None
}
