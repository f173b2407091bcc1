//! `artemis_py._native`: the Python face of the Rust storage crates, the STOMP codec and
//! the data plane (`DataPlane`, `data_plane.rs`: serving a node's plain-TCP STOMP clients
//! when `ARTEMIS_PY_DATA_PLANE=1`, `python/artemis_py/transport/plane.py`).
//!
//! The only crate that depends on pyo3 (the tokenizers layout): `journal`, `paging` and `nodeid` stay
//! pure Rust. Python reaches this module through the async facade `artemis_py.storage`.

// pyo3 extracts #[pyfunction]/#[pymethods] arguments as owned values (a `PathBuf` from a
// str): passing them by value is how pyo3 works, not a needless copy.
#![allow(clippy::needless_pass_by_value)]

mod data_plane;
mod data_plane_commands;
mod delivery_frames;
mod error;
mod journal;
mod message_record;
mod node_manager;
mod ops;
mod paging;
mod replication;
mod report;
mod stomp_connection;
mod stomp_functions;
mod stomp_objects;
mod store;

use pyo3::prelude::*;

/// The extension's own allocations (frames decoded on the I/O threads and freed on the
/// event loop's, journal buffers) go through mimalloc: glibc's malloc made the loop wait
/// on arena locks the I/O threads held (`__lll_lock_wait_private` in profiles).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<store::PyGroupCommitStore>()?;
    m.add_class::<journal::PyJournal>()?;
    m.add_class::<node_manager::PyNodeManager>()?;
    m.add_class::<node_manager::PyBackupLock>()?;
    m.add_function(wrap_pyfunction!(node_manager::read_activation_state, m)?)?;
    m.add_function(wrap_pyfunction!(node_manager::read_node_id, m)?)?;
    m.add_function(wrap_pyfunction!(node_manager::write_activation_state, m)?)?;
    m.add_class::<paging::PyPageStore>()?;
    m.add_function(wrap_pyfunction!(paging::read_page_file, m)?)?;
    m.add_class::<report::PyLoadReport>()?;
    m.add_class::<report::PyRecord>()?;
    m.add_class::<report::PyRecords>()?;
    m.add_class::<report::PyUpdate>()?;
    m.add_class::<report::PyPreparedTransaction>()?;
    m.add_class::<report::PyJournalStats>()?;
    m.add_class::<report::PyCompactionReport>()?;
    m.add_class::<replication::PyReplicationStart>()?;
    m.add_class::<replication::PyReplicationState>()?;
    m.add_class::<stomp_connection::PyStompConnection>()?;
    m.add_class::<data_plane::PyDataPlane>()?;
    m.add_class::<data_plane::PyConn>()?;
    m.add_class::<data_plane::PyLease>()?;
    m.add_class::<data_plane::PyEvents>()?;
    m.add_function(wrap_pyfunction!(message_record::encode_message_record, m)?)?;
    m.add_function(wrap_pyfunction!(stomp_functions::stomp_decode_headers, m)?)?;
    m.add_function(wrap_pyfunction!(stomp_functions::stomp_frame_mode, m)?)?;
    m.add_function(wrap_pyfunction!(stomp_functions::stomp_encode_frame, m)?)?;
    m.add_function(wrap_pyfunction!(stomp_functions::stomp_decode_frame, m)?)?;
    m.add_function(wrap_pyfunction!(delivery_frames::stomp_encode_message, m)?)?;
    m.add_function(wrap_pyfunction!(delivery_frames::stomp_encode_receipt, m)?)?;
    Ok(())
}
