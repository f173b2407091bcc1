//! `artemis_py._native.NodeManager`: the data-directory lock and the node ID; and, for a
//! shared-store HA pair, `BackupLock` and the activation state (`nodeid::shared_store`).

use std::path::PathBuf;
use std::sync::Mutex;

use nodeid::shared_store::{self, ActivationState, BackupLock};
use nodeid::NodeManager;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::error::nodeid_error;

/// Holds `server.lock` in a journal directory until `close()` (or garbage collection).
#[pyclass(name = "NodeManager", module = "artemis_py._native", frozen)]
pub struct PyNodeManager {
    // None after close(); dropping the NodeManager releases the lock.
    inner: Mutex<Option<NodeManager>>,
    node_id: String,
    directory: PathBuf,
}

#[pymethods]
impl PyNodeManager {
    /// Lock `directory` (created if missing) and read or create its node ID; blocks
    /// (file I/O and fsync on first start), GIL released.
    #[staticmethod]
    fn open(py: Python<'_>, directory: PathBuf) -> PyResult<PyNodeManager> {
        let manager = py
            .detach(|| NodeManager::open(&directory))
            .map_err(|e| nodeid_error(py, &e))?;
        Ok(PyNodeManager {
            node_id: manager.node_id().to_string(),
            directory,
            inner: Mutex::new(Some(manager)),
        })
    }

    /// As `open`, but None while another holder has the lock (a shared-store backup polls
    /// this); blocks briefly, GIL released.
    #[staticmethod]
    fn try_open(py: Python<'_>, directory: PathBuf) -> PyResult<Option<PyNodeManager>> {
        let manager = py
            .detach(|| NodeManager::try_open(&directory))
            .map_err(|e| nodeid_error(py, &e))?;
        Ok(manager.map(|manager| PyNodeManager {
            node_id: manager.node_id().to_string(),
            directory,
            inner: Mutex::new(Some(manager)),
        }))
    }

    /// The node's UUID, lowercase and hyphenated.
    #[getter]
    fn node_id(&self) -> &str {
        &self.node_id
    }

    #[getter]
    fn directory(&self) -> &PathBuf {
        &self.directory
    }

    /// True until `close()`.
    #[getter]
    fn locked(&self) -> bool {
        self.inner.lock().is_ok_and(|g| g.is_some())
    }

    /// Release the lock; idempotent. Closing a descriptor does not block.
    fn close(&self) {
        let taken = match self.inner.lock() {
            Ok(mut guard) => guard.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        drop(taken);
    }

    #[allow(clippy::unnecessary_debug_formatting)] // the repr quotes the path, as Python's does
    fn __repr__(&self) -> String {
        format!(
            "NodeManager(directory={:?}, node_id={:?})",
            self.directory, self.node_id
        )
    }
}

/// A shared-store backup's lock on its data directory, held until `close()`.
#[pyclass(name = "BackupLock", module = "artemis_py._native", frozen)]
pub struct PyBackupLock {
    inner: Mutex<Option<BackupLock>>,
}

#[pymethods]
impl PyBackupLock {
    /// Take the backup lock, or None while another backup holds it; GIL released.
    #[staticmethod]
    fn try_acquire(py: Python<'_>, directory: PathBuf) -> PyResult<Option<PyBackupLock>> {
        let lock = py
            .detach(|| BackupLock::try_acquire(&directory))
            .map_err(|e| nodeid_error(py, &e))?;
        Ok(lock.map(|lock| PyBackupLock {
            inner: Mutex::new(Some(lock)),
        }))
    }

    /// Release the lock; idempotent.
    fn close(&self) {
        let taken = match self.inner.lock() {
            Ok(mut guard) => guard.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        drop(taken);
    }
}

/// The pair's activation state: "not-started", "live", "paused" or "failing-back"; reads
/// a file (GIL released).
#[pyfunction]
pub fn read_activation_state(py: Python<'_>, directory: PathBuf) -> PyResult<&'static str> {
    py.detach(|| shared_store::read_state(&directory))
        .map(ActivationState::name)
        .map_err(|e| nodeid_error(py, &e))
}

/// Write the activation state durably (fsync; GIL released).
#[pyfunction]
pub fn write_activation_state(py: Python<'_>, directory: PathBuf, state: &str) -> PyResult<()> {
    let state = ActivationState::from_name(state)
        .ok_or_else(|| PyValueError::new_err(format!("unknown activation state {state:?}")))?;
    py.detach(|| shared_store::write_state(&directory, state))
        .map_err(|e| nodeid_error(py, &e))
}

/// The node ID in `directory`'s `server.lock`, read without locking; None if there is none.
#[pyfunction]
pub fn read_node_id(py: Python<'_>, directory: PathBuf) -> PyResult<Option<String>> {
    py.detach(|| nodeid::read_node_id(&directory))
        .map(|id| id.map(|id| id.to_string()))
        .map_err(|e| nodeid_error(py, &e))
}
