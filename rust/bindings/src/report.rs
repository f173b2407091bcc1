//! Read-only result objects: what a load found, statistics, compaction reports.
//!
//! Built once with the GIL held after the blocking call returns; payloads become `bytes`.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::ops::op_to_py;

/// Prepared ops are handed back as instances of the facade's `Op` (a tuple subclass).
const OP_MODULE: &str = "artemis_py.storage.ops";

/// One update of a record.
#[pyclass(name = "Update", module = "artemis_py._native", frozen, get_all)]
pub struct PyUpdate {
    record_type: u8,
    payload: Py<PyBytes>,
}

#[pymethods]
impl PyUpdate {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Update(record_type={}, payload=<{} bytes>)",
            self.record_type,
            self.payload.bind(py).as_bytes().len()
        )
    }
}

/// One live record after a load: its add and its updates in append order.
#[pyclass(name = "Record", module = "artemis_py._native", frozen, get_all)]
pub struct PyRecord {
    id: u64,
    record_type: u8,
    payload: Py<PyBytes>,
    /// Updates, oldest first.
    updates: Py<PyTuple>,
}

#[pymethods]
impl PyRecord {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Record(id={}, record_type={}, payload=<{} bytes>, updates=<{}>)",
            self.id,
            self.record_type,
            self.payload.bind(py).as_bytes().len(),
            self.updates.bind(py).len()
        )
    }
}

/// A transaction that was prepared (two-phase commit) but neither committed nor rolled back.
#[pyclass(
    name = "PreparedTransaction",
    module = "artemis_py._native",
    frozen,
    get_all
)]
pub struct PyPreparedTransaction {
    tx_id: u64,
    xid: Py<PyBytes>,
    /// The transaction's ops (`artemis_py.storage.Op`), in append order.
    ops: Py<PyTuple>,
}

#[pymethods]
impl PyPreparedTransaction {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "PreparedTransaction(tx_id={}, xid=<{} bytes>, ops=<{}>)",
            self.tx_id,
            self.xid.bind(py).as_bytes().len(),
            self.ops.bind(py).len()
        )
    }
}

/// What opening a journal recovered.
#[pyclass(name = "LoadReport", module = "artemis_py._native", frozen, get_all)]
pub struct PyLoadReport {
    records: Py<PyTuple>,
    prepared: Py<PyTuple>,
    incomplete_transactions_rolled_back: usize,
    /// `(file, offset)` where a torn tail was cut off, or None.
    torn_tail: Option<(PathBuf, u64)>,
}

#[pymethods]
impl PyLoadReport {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "LoadReport(records=<{}>, prepared=<{}>, incomplete_transactions_rolled_back={}, torn_tail={:?})",
            self.records.bind(py).len(),
            self.prepared.bind(py).len(),
            self.incomplete_transactions_rolled_back,
            self.torn_tail
        )
    }
}

/// Building Python objects needs the GIL, and a recovered journal can hold gigabytes. So the
/// conversion offers the GIL to other threads (the Trio loop) after every ~16 KiB it copies:
/// a thread waiting for the GIL asks for it after the switch interval (5 ms), and a
/// release then hands it over, so the loop is never held up for longer than that.
struct GilBreaks<'py> {
    py: Python<'py>,
    since_break: usize,
}

impl<'py> GilBreaks<'py> {
    const EVERY: usize = 16 * 1024;

    fn new(py: Python<'py>) -> Self {
        GilBreaks { py, since_break: 0 }
    }

    /// Account for `bytes` copied (plus a little per object) and break when due.
    fn charge(&mut self, bytes: usize) {
        self.since_break += bytes + 64;
        if self.since_break >= Self::EVERY {
            self.since_break = 0;
            self.py.detach(|| ());
        }
    }

    fn bytes(&mut self, data: Vec<u8>) -> Py<PyBytes> {
        self.charge(data.len());
        // `data` is dropped here, so the Rust copy goes as the Python copy is made.
        PyBytes::new(self.py, &data).unbind()
    }
}

impl PyLoadReport {
    /// Convert, consuming the report so each payload is freed once copied.
    pub fn from_report(py: Python<'_>, report: journal::LoadReport) -> PyResult<Self> {
        let mut gil = GilBreaks::new(py);
        let records = report
            .records
            .into_iter()
            .map(|r| {
                let updates = r
                    .updates
                    .into_iter()
                    .map(|u| {
                        let payload = gil.bytes(u.payload);
                        Py::new(
                            py,
                            PyUpdate {
                                record_type: u.record_type,
                                payload,
                            },
                        )
                    })
                    .collect::<PyResult<Vec<_>>>()?;
                let payload = gil.bytes(r.payload);
                Py::new(
                    py,
                    PyRecord {
                        id: r.id,
                        record_type: r.record_type,
                        payload,
                        updates: PyTuple::new(py, updates)?.unbind(),
                    },
                )
            })
            .collect::<PyResult<Vec<_>>>()?;
        let op_class = py.import(OP_MODULE)?.getattr("Op")?;
        let prepared = report
            .prepared
            .into_iter()
            .map(|p| {
                let ops = p
                    .ops
                    .iter()
                    .map(|op| {
                        gil.charge(crate::ops::payload_len(op));
                        op_class.call1((op_to_py(py, op)?,))
                    })
                    .collect::<PyResult<Vec<_>>>()?;
                Py::new(
                    py,
                    PyPreparedTransaction {
                        tx_id: p.tx_id,
                        xid: gil.bytes(p.xid),
                        ops: PyTuple::new(py, ops)?.unbind(),
                    },
                )
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyLoadReport {
            records: PyTuple::new(py, records)?.unbind(),
            prepared: PyTuple::new(py, prepared)?.unbind(),
            incomplete_transactions_rolled_back: report.incomplete_transactions_rolled_back,
            torn_tail: report.torn_tail,
        })
    }
}

/// Counters of one journal (`Journal.stats()`).
#[pyclass(name = "JournalStats", module = "artemis_py._native", frozen, get_all)]
pub struct PyJournalStats {
    data_files: usize,
    free_files: usize,
    live_records: usize,
    batches: u64,
    syncs: u64,
    records_written: u64,
    bytes_written: u64,
    compactions: u64,
}

#[pymethods]
impl PyJournalStats {
    fn __repr__(&self) -> String {
        format!(
            "JournalStats(data_files={}, free_files={}, live_records={}, batches={}, syncs={}, \
             records_written={}, bytes_written={}, compactions={})",
            self.data_files,
            self.free_files,
            self.live_records,
            self.batches,
            self.syncs,
            self.records_written,
            self.bytes_written,
            self.compactions
        )
    }
}

impl From<journal::JournalStats> for PyJournalStats {
    fn from(s: journal::JournalStats) -> Self {
        // Destructured so a new counter in the journal is a compile error here.
        let journal::JournalStats {
            data_files,
            free_files,
            live_records,
            batches,
            syncs,
            records_written,
            bytes_written,
            compactions,
        } = s;
        PyJournalStats {
            data_files,
            free_files,
            live_records,
            batches,
            syncs,
            records_written,
            bytes_written,
            compactions,
        }
    }
}

/// What one compaction did.
#[pyclass(
    name = "CompactionReport",
    module = "artemis_py._native",
    frozen,
    get_all
)]
pub struct PyCompactionReport {
    files_before: usize,
    files_after: usize,
    records_moved: usize,
}

#[pymethods]
impl PyCompactionReport {
    fn __repr__(&self) -> String {
        format!(
            "CompactionReport(files_before={}, files_after={}, records_moved={})",
            self.files_before, self.files_after, self.records_moved
        )
    }
}

impl From<journal::CompactionReport> for PyCompactionReport {
    fn from(r: journal::CompactionReport) -> Self {
        let journal::CompactionReport {
            files_before,
            files_after,
            records_moved,
        } = r;
        PyCompactionReport {
            files_before,
            files_after,
            records_moved,
        }
    }
}
