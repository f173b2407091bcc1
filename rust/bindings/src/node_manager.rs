//! `artemis_py._native.NodeManager`: the data-directory lock and the node ID.

use std::path::PathBuf;
use std::sync::Mutex;

use nodeid::NodeManager;
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
