//! The one mapping from the Rust crates' errors to Python exceptions.
//!
//! Every variant is matched explicitly (no `_` arm), so adding a variant to `journal::Error`
//! `paging::Error` or `nodeid::Error` breaks this build until someone decides how Python should see it
//! (the polars `error.rs` approach). The exception classes live in
//! `python/artemis_py/exceptions.py` and are looked up when an error is raised, so Python
//! code and Rust agree on one hierarchy rooted in `ArtemisError`; I/O errors become the
//! built-in `OSError`, whose constructor picks the subclass (`FileNotFoundError`, ...) from
//! the errno.

use std::path::Path;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

const EXCEPTIONS: &str = "artemis_py.exceptions";

/// Instantiate `artemis_py.exceptions.<class>(message, **kwargs)`.
fn artemis_error<'py>(
    py: Python<'py>,
    class: &str,
    message: String,
    kwargs: &[(&str, Bound<'py, PyAny>)],
) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let cls = py.import(EXCEPTIONS)?.getattr(class)?;
        let kw = PyDict::new(py);
        for (key, value) in kwargs {
            kw.set_item(key, value)?;
        }
        Ok(PyErr::from_value(cls.call((message,), Some(&kw))?))
    };
    // If the exceptions module itself cannot be used, raising that problem is the most
    // useful thing left to do.
    build().unwrap_or_else(|e| e)
}

fn path_obj<'py>(py: Python<'py>, path: &Path) -> Bound<'py, PyAny> {
    // A str, decoded the way os.fsdecode would (OSError.filename is normally a str).
    match path.as_os_str().into_pyobject(py) {
        Ok(s) => s.into_any(),
        Err(never) => match never {},
    }
}

/// `OSError(errno, "<op>: <strerror>", filename)`; Python picks the subclass from errno.
fn os_error(py: Python<'_>, op: &str, path: &Path, source: &std::io::Error) -> PyErr {
    let errno = source.raw_os_error();
    let strerror = errno
        .and_then(|n| {
            py.import("os")
                .and_then(|os| os.call_method1("strerror", (n,)))
                .and_then(|s| s.extract::<String>())
                .ok()
        })
        // Without an errno (e.g. a short read) no subclass applies and errno stays None.
        .unwrap_or_else(|| source.to_string());
    PyOSError::new_err((
        errno,
        format!("{op}: {strerror}"),
        path_obj(py, path).unbind(),
    ))
}

fn io_error(py: Python<'_>, err: &wal::IoError) -> PyErr {
    os_error(py, err.op, &err.path, &err.source)
}

/// A corrupted-file exception naming the file and the offset of the bad bytes.
fn corrupted(py: Python<'_>, class: &str, message: String, c: &wal::Corruption) -> PyErr {
    let offset = match c.offset.into_pyobject(py) {
        Ok(offset) => offset.into_any(),
        Err(never) => match never {},
    };
    artemis_error(
        py,
        class,
        message,
        &[("file", path_obj(py, &c.path)), ("offset", offset)],
    )
}

/// A corrupted-file exception naming a file that is not one of ours (or not usable).
fn bad_file(py: Python<'_>, class: &str, message: String, path: &Path) -> PyErr {
    artemis_error(py, class, message, &[("file", path_obj(py, path))])
}

/// A store's "failed" exception, its cause the error that stopped the writer.
fn failed(py: Python<'_>, class: &str, message: String, cause: PyErr) -> PyErr {
    let exc = artemis_error(py, class, message, &[]);
    exc.set_cause(py, Some(cause));
    exc
}

/// Map a journal error to the Python exception the facade documents.
pub fn journal_error(py: Python<'_>, err: &journal::Error) -> PyErr {
    use journal::Error as E;
    let message = err.to_string();
    match err {
        E::Io(e) => io_error(py, e),
        E::Corrupted(c) => corrupted(py, "JournalCorruptedError", message, c),
        E::ForeignFile(wal::ForeignFile { path, .. }) | E::WrongFileSize { path, .. } => {
            bad_file(py, "JournalCorruptedError", message, path)
        }
        E::RecordNotFound { .. } => artemis_error(py, "RecordNotFoundError", message, &[]),
        E::DuplicateRecord { .. } => artemis_error(py, "DuplicateRecordError", message, &[]),
        E::Transaction { .. } => artemis_error(py, "TransactionError", message, &[]),
        E::RecordTooLarge { .. } => artemis_error(py, "RecordTooLargeError", message, &[]),
        E::Failed(cause) => failed(py, "JournalFailedError", message, journal_error(py, cause)),
        E::Closed => artemis_error(py, "JournalClosedError", message, &[]),
        E::InvalidConfig(_) => PyValueError::new_err(message),
        E::Replication(_) => artemis_error(py, "ReplicationError", message, &[]),
    }
}

/// Map a node-manager error.
pub fn nodeid_error(py: Python<'_>, err: &nodeid::Error) -> PyErr {
    use nodeid::Error as E;
    let message = err.to_string();
    match err {
        E::Io { op, path, source } => os_error(py, op, path, source),
        E::Locked { directory } => artemis_error(
            py,
            "DataDirectoryLockedError",
            message,
            &[("directory", path_obj(py, directory))],
        ),
        E::Corrupted { path, .. } => bad_file(py, "ServerLockCorruptedError", message, path),
    }
}

/// Map a page-store error.
pub fn paging_error(py: Python<'_>, err: &paging::Error) -> PyErr {
    use paging::Error as E;
    let message = err.to_string();
    match err {
        E::Io(e) => io_error(py, e),
        E::Corrupted(c) => corrupted(py, "PageFileCorruptedError", message, c),
        E::ForeignFile(wal::ForeignFile { path, .. }) | E::NotAStore { path, .. } => {
            bad_file(py, "PageFileCorruptedError", message, path)
        }
        E::RecordTooLarge { .. } => artemis_error(py, "RecordTooLargeError", message, &[]),
        E::BadPage { .. } | E::InvalidConfig(_) => PyValueError::new_err(message),
        E::Failed(cause) => failed(py, "PageStoreFailedError", message, paging_error(py, cause)),
        E::Closed { .. } => artemis_error(py, "PageStoreClosedError", message, &[]),
    }
}
