//! `artemis_py._native.Journal`: one journal, its writer thread and its completion eventfd.
//!
//! Blocking calls (`open`, `wait`, `append`, `compact`, `close`) convert their arguments to
//! owned data and then release the GIL for the whole call, so the Trio loop — which calls
//! them only through `trio.to_thread.run_sync` — and every other Python thread keep running.
//! `submit`, `progress`, `error`, `stats` and `fileno` never touch the disk and keep the GIL:
//! they are what the event loop itself calls; so are `replication_take`, `replication_gate`,
//! `replicated`, `replication_stop` and `replication_state`. `replication_start` blocks
//! (GIL released); `apply_replicated` does no I/O but releases the GIL while it decodes.
//!
//! Completion notification: the eventfd of `store.rs`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use journal::{Journal, JournalConfig};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::error::journal_error;
use crate::ops::ops_from_py;
use crate::replication::{PyReplicationStart, PyReplicationState};
use crate::report::{LoadData, PyCompactionReport, PyJournalStats, PyLoadReport};
use crate::store::{CompletionFd, PyGroupCommitStore};

/// One open journal.
#[pyclass(name = "Journal", module = "artemis_py._native", frozen, extends = PyGroupCommitStore)]
pub struct PyJournal {
    journal: Arc<Journal>,
    directory: PathBuf,
}

#[pymethods]
impl PyJournal {
    /// Open (create if missing) and recover the journal in `directory`; blocks, GIL released.
    /// Settings left as None take the Artemis defaults.
    #[staticmethod]
    #[pyo3(signature = (
        directory,
        *,
        file_prefix = None,
        file_extension = None,
        file_size = None,
        min_files = None,
        pool_files = None,
        buffer_size = None,
        buffer_timeout_ns = None,
        datasync = None,
        compact_min_files = None,
        compact_percentage = None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn open(
        py: Python<'_>,
        directory: PathBuf,
        file_prefix: Option<String>,
        file_extension: Option<String>,
        file_size: Option<u64>,
        min_files: Option<usize>,
        pool_files: Option<i64>,
        buffer_size: Option<usize>,
        buffer_timeout_ns: Option<u64>,
        datasync: Option<bool>,
        compact_min_files: Option<usize>,
        compact_percentage: Option<u32>,
    ) -> PyResult<(Py<PyJournal>, PyLoadReport)> {
        let defaults = JournalConfig::default();
        let config = JournalConfig {
            directory: directory.clone(),
            file_prefix: file_prefix.unwrap_or(defaults.file_prefix),
            file_extension: file_extension.unwrap_or(defaults.file_extension),
            file_size: file_size.unwrap_or(defaults.file_size),
            min_files: min_files.unwrap_or(defaults.min_files),
            pool_files: pool_files.unwrap_or(defaults.pool_files),
            buffer_size: buffer_size.unwrap_or(defaults.buffer_size),
            buffer_timeout: buffer_timeout_ns.map_or(defaults.buffer_timeout, Duration::from_nanos),
            datasync: datasync.unwrap_or(defaults.datasync),
            compact_min_files: compact_min_files.unwrap_or(defaults.compact_min_files),
            compact_percentage: compact_percentage.unwrap_or(defaults.compact_percentage),
        };
        let eventfd = CompletionFd::new(&directory).map_err(|e| journal_error(py, &e.into()))?;
        // The records are packed for Python here too, without the GIL (see `report`).
        let (journal, report) = py
            .detach(|| Journal::open(config).map(|(j, r)| (j, LoadData::from_report(r))))
            .map_err(|e| journal_error(py, &e))?;
        let journal = Arc::new(journal);
        let base = PyGroupCommitStore::new(&journal, eventfd);
        match PyLoadReport::new(py, report) {
            Ok(report) => {
                let this = PyJournal { journal, directory };
                Ok((Py::new(py, (this, base))?, report))
            }
            Err(e) => {
                // Do not leave a running writer behind an exception.
                let _ = py.detach(|| journal.close());
                Err(e)
            }
        }
    }

    /// The journal directory.
    #[getter]
    fn directory(&self) -> &PathBuf {
        &self.directory
    }

    /// Validate and queue `ops` as one batch; returns its ticket. Never does I/O.
    /// `flush`: a non-sync batch is written without waiting for company (not synced).
    /// `defer`: leave waking the writer to `wake_writer` (called soon, e.g. before the
    /// event loop blocks), so the submits of one loop pass share a batch.
    #[pyo3(signature = (ops, sync, flush = false, defer = false))]
    fn submit(
        &self,
        py: Python<'_>,
        ops: &Bound<'_, PyAny>,
        sync: bool,
        flush: bool,
        defer: bool,
    ) -> PyResult<u64> {
        let ops = ops_from_py(ops)?;
        let ticket = match (sync, flush, defer) {
            (false, true, _) => self.journal.submit_flushed(ops, defer),
            (_, _, true) => self.journal.submit_deferred(ops, sync),
            (_, _, false) => self.journal.submit(ops, sync),
        };
        ticket.map_err(|e| journal_error(py, &e))
    }

    /// `submit` + `wait`; blocks, GIL released for the wait.
    fn append(&self, py: Python<'_>, ops: &Bound<'_, PyAny>, sync: bool) -> PyResult<()> {
        let ops = ops_from_py(ops)?;
        py.detach(|| self.journal.append(ops, sync))
            .map_err(|e| journal_error(py, &e))
    }

    /// Rewrite live records out of old files; blocks, GIL released.
    fn compact(&self, py: Python<'_>) -> PyResult<PyCompactionReport> {
        py.detach(|| self.journal.compact())
            .map(PyCompactionReport::from)
            .map_err(|e| journal_error(py, &e))
    }

    fn stats(&self) -> PyJournalStats {
        self.journal.stats().into()
    }

    /// Start replication: every later submit is tapped as a frame; everything before is
    /// written into the files listed (absolute paths, file-id order), which stay untouched
    /// (reclaim and compaction pause) until `replication_stop`. Wait for `through`, then copy
    /// them byte for byte into the backup's journal directory. Blocks (a running compaction
    /// finishes first); GIL released. Raises `ReplicationError` if already started.
    fn replication_start(&self, py: Python<'_>) -> PyResult<PyReplicationStart> {
        py.detach(|| self.journal.replication_start())
            .map(PyReplicationStart::from)
            .map_err(|e| journal_error(py, &e))
    }

    /// The frames tapped since the last take, concatenated (b"" if none). Never blocks.
    fn replication_take<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.journal.replication_take())
    }

    /// While on, a ticket completes (progress, wait, the eventfd) only once written and
    /// replicated, or issued before the gate went on. Off releases every written ticket.
    fn replication_gate(&self, on: bool) {
        self.journal.replication_gate(on);
    }

    /// The backup has every ticket up to `ticket` durably (lower values are ignored).
    fn replicated(&self, ticket: u64) {
        self.journal.replicated(ticket);
    }

    /// Tap off (pending frames dropped), gate off, reclaim and compaction resume.
    /// Idempotent; `close` implies it.
    fn replication_stop(&self) {
        self.journal.replication_stop();
    }

    fn replication_state(&self) -> PyReplicationState {
        self.journal.replication_state().into()
    }

    /// Backup side: verify every frame (from the primary's `replication_take`), then submit
    /// each one's ops as the primary did, in order. Returns (the primary's ticket of the
    /// last frame, the local ticket of its submit), (0, 0) for b"". A corrupt or truncated
    /// frame raises `ReplicationError` before anything is applied; a frame this journal
    /// refuses raises it with the frames before that one applied. Never does I/O; GIL
    /// released.
    fn apply_replicated(&self, py: Python<'_>, frames: &[u8]) -> PyResult<(u64, u64)> {
        py.detach(|| self.journal.apply_replicated(frames))
            .map_err(|e| journal_error(py, &e))
    }

    /// Flush what is queued, stop the writer, fsync, release files; idempotent. GIL released.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.journal.close())
            .map_err(|e| journal_error(py, &e))
    }

    #[allow(clippy::unnecessary_debug_formatting)] // the repr quotes the path, as Python's does
    fn __repr__(&self) -> String {
        format!("Journal(directory={:?})", self.directory)
    }
}
