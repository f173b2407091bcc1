//! What the Python wrappers of a journal and of a page store do the same way: their base
//! class `GroupCommitStore`, which holds the completion eventfd the store's listener pokes
//! and answers the calls of the facade's waiters (`wake_writer`, `wait`, `progress`,
//! `error`, `fileno`), errors mapped to Python through `error.rs`.
//!
//! Completion notification: a Linux eventfd per store. The store's completion listener
//! (run on the writer thread after every batch completes or fails, and at close) adds 1 to
//! it, which makes it readable; the facade's leading waiter waits for readability, reads it
//! (resetting it to 0) and then looks at `progress()`. Because the store updates its
//! progress before calling the listener, a waiter that resets the eventfd and then reads
//! progress cannot miss a completion.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

use pyo3::prelude::*;
use wal::{IoError, Listener, Progress, Ticket};

/// A store as its Python wrapper sees it.
pub(crate) trait NativeStore: Send + Sync + 'static {
    type Error: Send + Sync;

    fn set_completion_listener(&self, listener: Listener);
    /// Wakes the writer after deferred submits; never blocks.
    fn wake_writer(&self);
    /// Blocks until `ticket` is complete (called with the GIL released).
    fn wait(&self, ticket: Ticket) -> Result<(), Self::Error>;
    fn progress(&self) -> Progress<Self::Error>;
    /// The store's error for a writer that failed with `cause`.
    fn failed(cause: Arc<Self::Error>) -> Self::Error;
    /// The one mapping to Python (`error.rs`).
    fn to_py(py: Python<'_>, err: &Self::Error) -> PyErr;
}

/// `NativeStore` for a store type whose methods have the trait's names, its error type and
/// its mapping to Python.
macro_rules! native_store {
    ($store:ty, $error:ident, $to_py:path) => {
        impl NativeStore for $store {
            type Error = $error::Error;

            fn set_completion_listener(&self, listener: Listener) {
                <$store>::set_completion_listener(self, listener);
            }

            fn wake_writer(&self) {
                <$store>::wake_writer(self);
            }

            fn wait(&self, ticket: Ticket) -> Result<(), $error::Error> {
                <$store>::wait(self, ticket)
            }

            fn progress(&self) -> Progress<$error::Error> {
                <$store>::progress(self)
            }

            fn failed(cause: Arc<$error::Error>) -> $error::Error {
                $error::Error::Failed(cause)
            }

            fn to_py(py: Python<'_>, err: &$error::Error) -> PyErr {
                $to_py(py, err)
            }
        }
    };
}

native_store!(journal::Journal, journal, crate::error::journal_error);
native_store!(paging::PageStore, paging, crate::error::paging_error);

/// What the base class calls, for any [`NativeStore`] (an object-safe face of it).
trait Waitable: Send + Sync {
    fn wake_writer(&self);
    fn wait_py(&self, py: Python<'_>, ticket: Ticket) -> PyResult<()>;
    fn progress_py(&self) -> (u64, bool);
    fn error_py(&self, py: Python<'_>) -> PyResult<()>;
}

impl<S: NativeStore> Waitable for S {
    fn wake_writer(&self) {
        NativeStore::wake_writer(self);
    }

    fn wait_py(&self, py: Python<'_>, ticket: Ticket) -> PyResult<()> {
        py.detach(|| self.wait(ticket))
            .map_err(|e| S::to_py(py, &e))
    }

    fn progress_py(&self) -> (u64, bool) {
        let p = self.progress();
        (p.completed, p.failed.is_some())
    }

    fn error_py(&self, py: Python<'_>) -> PyResult<()> {
        match self.progress().failed {
            Some(cause) => Err(S::to_py(py, &S::failed(cause))),
            None => Ok(()),
        }
    }
}

/// `artemis_py._native.GroupCommitStore`: the base class of `Journal` and `PageStore`.
#[pyclass(
    name = "GroupCommitStore",
    module = "artemis_py._native",
    frozen,
    subclass
)]
pub struct PyGroupCommitStore {
    store: Arc<dyn Waitable>,
    eventfd: CompletionFd,
}

impl PyGroupCommitStore {
    /// The base of the wrapper of `store`, whose completions now poke `eventfd`.
    pub(crate) fn new<S: NativeStore>(store: &Arc<S>, eventfd: CompletionFd) -> Self {
        store.set_completion_listener(eventfd.listener());
        let store: Arc<dyn Waitable> = store.clone();
        PyGroupCommitStore { store, eventfd }
    }
}

#[pymethods]
impl PyGroupCommitStore {
    /// Wake the writer if a deferred submit left it asleep with work due. Never blocks.
    fn wake_writer(&self) {
        self.store.wake_writer();
    }

    /// Block until `ticket` is complete (durable if synced, else written); GIL released.
    fn wait(&self, py: Python<'_>, ticket: Ticket) -> PyResult<()> {
        self.store.wait_py(py, ticket)
    }

    /// `(completed_ticket, failed)`: every ticket <= completed is done; if failed, tickets
    /// above it never will be.
    fn progress(&self) -> (u64, bool) {
        self.store.progress_py()
    }

    /// Raise the failure that stopped the writer (the store's failed error, its cause
    /// chained), if any.
    fn error(&self, py: Python<'_>) -> PyResult<()> {
        self.store.error_py(py)
    }

    /// The eventfd that becomes readable after batches complete (or the writer fails).
    fn fileno(&self) -> i32 {
        self.eventfd.fileno()
    }
}

/// The eventfd that becomes readable after batches complete (or the writer fails).
pub(crate) struct CompletionFd(Arc<OwnedFd>);

impl CompletionFd {
    /// A fresh eventfd for the store in `directory` (named by the error if it fails).
    pub(crate) fn new(directory: &Path) -> Result<CompletionFd, IoError> {
        // SAFETY: plain syscall; on success we own the returned descriptor.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(wal::io_err("eventfd", directory)(
                std::io::Error::last_os_error(),
            ));
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        Ok(CompletionFd(Arc::new(unsafe { OwnedFd::from_raw_fd(fd) })))
    }

    /// The store's completion listener: pokes the eventfd (shared with it, so the
    /// descriptor outlives every poke).
    pub(crate) fn listener(&self) -> Listener {
        let fd = Arc::clone(&self.0);
        Box::new(move || poke(&fd))
    }

    pub(crate) fn fileno(&self) -> i32 {
        self.0.as_raw_fd()
    }
}

fn poke(fd: &OwnedFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64 to a descriptor kept open by the Arc.
    // The only possible failure is EAGAIN when the counter is near u64::MAX, and then the
    // eventfd is readable anyway, which is all the waiter needs.
    unsafe {
        libc::write(
            fd.as_raw_fd(),
            std::ptr::addr_of!(one).cast::<libc::c_void>(),
            std::mem::size_of::<u64>(),
        );
    }
}
