//! What `Journal.replication_start()` and `Journal.replication_state()` return (the
//! journal's replication: `journal::replication`, `docs/journal.md`).

use pyo3::prelude::*;

/// The files a backup copies before applying the stream, and the ticket they hold.
#[pyclass(
    name = "ReplicationStart",
    module = "artemis_py._native",
    frozen,
    get_all
)]
pub struct PyReplicationStart {
    /// Absolute paths of every data file holding records, in file-id order.
    files: Vec<String>,
    /// The ticket of the last submit before the tap started (0 if none).
    through: u64,
}

#[pymethods]
impl PyReplicationStart {
    fn __repr__(&self) -> String {
        format!(
            "ReplicationStart(files={:?}, through={})",
            self.files, self.through
        )
    }
}

impl From<journal::ReplicationStart> for PyReplicationStart {
    fn from(s: journal::ReplicationStart) -> Self {
        PyReplicationStart {
            files: s
                .files
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect(),
            through: s.through,
        }
    }
}

/// Replication as metrics see it.
#[pyclass(
    name = "ReplicationState",
    module = "artemis_py._native",
    frozen,
    get_all
)]
pub struct PyReplicationState {
    active: bool,
    gate: bool,
    through: u64,
    replicated_through: u64,
    pending_bytes: usize,
}

#[pymethods]
impl PyReplicationState {
    fn __repr__(&self) -> String {
        format!(
            "ReplicationState(active={}, gate={}, through={}, replicated_through={}, \
             pending_bytes={})",
            py_bool(self.active),
            py_bool(self.gate),
            self.through,
            self.replicated_through,
            self.pending_bytes
        )
    }
}

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

impl From<journal::ReplicationState> for PyReplicationState {
    fn from(s: journal::ReplicationState) -> Self {
        // Destructured so a new field in the journal is a compile error here.
        let journal::ReplicationState {
            active,
            gate,
            through,
            replicated_through,
            pending_bytes,
        } = s;
        PyReplicationState {
            active,
            gate,
            through,
            replicated_through,
            pending_bytes,
        }
    }
}
