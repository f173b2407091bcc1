//! Read-only result objects: what a load found, statistics, compaction reports.
//!
//! A recovered journal can hold millions of records. Converting them all to Python objects
//! at open would hold the GIL for as long (and freeing them would block whoever drops the
//! report), so the load report keeps its records native: [`LoadData::from_report`] packs
//! them (with the GIL released, on the thread that opened the journal) into three flat
//! vectors, and `LoadReport.records` is a sequence that makes a `Record` only when one is
//! looked at. Dropping it frees three allocations, and a large arena is freed on a helper
//! thread so that whoever drops the last reference (usually the event loop) does not wait.
//! Prepared transactions are few; they are converted on first access and cached.

use std::ops::Range;
use std::path::PathBuf;

use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PySlice, PyTuple};

use crate::ops::op_to_py;

/// Prepared ops are handed back as instances of the facade's `Op` (a tuple subclass).
const OP_MODULE: &str = "artemis_py.storage.ops";

/// Arenas at least this large are freed on a helper thread (freeing 64 MiB takes ~5 ms).
const FREE_ON_THREAD: usize = 4 * 1024 * 1024;

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

struct FlatRecord {
    id: u64,
    record_type: u8,
    payload: Range<usize>,
    updates: Range<usize>,
}

struct FlatUpdate {
    record_type: u8,
    payload: Range<usize>,
}

/// The live records of a load, packed: every payload in one arena.
#[derive(Default)]
struct FlatRecords {
    records: Vec<FlatRecord>,
    updates: Vec<FlatUpdate>,
    arena: Vec<u8>,
}

impl FlatRecords {
    /// Packs `records`, freeing each one's buffers as it goes. No GIL needed.
    fn pack(records: Vec<journal::RecordInfo>) -> FlatRecords {
        let mut bytes = 0;
        let mut updates = 0;
        for r in &records {
            bytes += r.payload.len() + r.updates.iter().map(|u| u.payload.len()).sum::<usize>();
            updates += r.updates.len();
        }
        let mut flat = FlatRecords {
            records: Vec::with_capacity(records.len()),
            updates: Vec::with_capacity(updates),
            arena: Vec::with_capacity(bytes),
        };
        for r in records {
            let payload = flat.put(&r.payload);
            let first = flat.updates.len();
            for u in r.updates {
                let payload = flat.put(&u.payload);
                flat.updates.push(FlatUpdate {
                    record_type: u.record_type,
                    payload,
                });
            }
            flat.records.push(FlatRecord {
                id: r.id,
                record_type: r.record_type,
                payload,
                updates: first..flat.updates.len(),
            });
        }
        flat
    }

    fn put(&mut self, data: &[u8]) -> Range<usize> {
        let start = self.arena.len();
        self.arena.extend_from_slice(data);
        start..self.arena.len()
    }

    fn heap_bytes(&self) -> usize {
        self.arena.capacity()
            + self.records.capacity() * std::mem::size_of::<FlatRecord>()
            + self.updates.capacity() * std::mem::size_of::<FlatUpdate>()
    }

    /// A fresh `Record` for entry `i` (which must be in range).
    fn record(&self, py: Python<'_>, i: usize) -> PyResult<Py<PyRecord>> {
        let r = &self.records[i];
        let updates = self.updates[r.updates.clone()]
            .iter()
            .map(|u| {
                Py::new(
                    py,
                    PyUpdate {
                        record_type: u.record_type,
                        payload: PyBytes::new(py, &self.arena[u.payload.clone()]).unbind(),
                    },
                )
            })
            .collect::<PyResult<Vec<_>>>()?;
        Py::new(
            py,
            PyRecord {
                id: r.id,
                record_type: r.record_type,
                payload: PyBytes::new(py, &self.arena[r.payload.clone()]).unbind(),
                updates: PyTuple::new(py, updates)?.unbind(),
            },
        )
    }
}

/// The live records of a load, sorted by id: a read-only sequence of `Record`s, each made
/// when it is looked at (so two lookups give equal but distinct objects).
#[pyclass(name = "Records", module = "artemis_py._native", frozen, sequence)]
pub struct PyRecords {
    flat: FlatRecords,
}

impl Drop for PyRecords {
    fn drop(&mut self) {
        let flat = std::mem::take(&mut self.flat);
        if flat.heap_bytes() >= FREE_ON_THREAD {
            // If the thread cannot be started the closure, and `flat` with it, is dropped
            // right here: the same work, just not off this thread.
            let _ = std::thread::Builder::new()
                .name("journal-report-free".into())
                .spawn(move || drop(flat));
        }
    }
}

#[pymethods]
impl PyRecords {
    fn __len__(&self) -> usize {
        self.flat.records.len()
    }

    /// `records[i]` gives a `Record`; `records[a:b:c]` a tuple of them.
    fn __getitem__(&self, py: Python<'_>, index: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let len = self.flat.records.len();
        if let Ok(slice) = index.cast::<PySlice>() {
            let s = slice.indices(len as isize)?;
            let items = (0..s.slicelength)
                .map(|k| {
                    self.flat
                        .record(py, (s.start + k as isize * s.step) as usize)
                })
                .collect::<PyResult<Vec<_>>>()?;
            return Ok(PyTuple::new(py, items)?.into_any().unbind());
        }
        let i: isize = index.extract()?;
        let at = if i < 0 { i + len as isize } else { i };
        if at < 0 || at as usize >= len {
            return Err(PyIndexError::new_err("record index out of range"));
        }
        Ok(self.flat.record(py, at as usize)?.into_any())
    }

    fn __iter__(slf: Py<Self>) -> PyRecordsIter {
        PyRecordsIter {
            records: slf,
            next: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    fn __repr__(&self) -> String {
        format!("Records(<{}>)", self.flat.records.len())
    }
}

/// Iterator over `Records`.
#[pyclass(name = "RecordsIterator", module = "artemis_py._native", frozen)]
pub struct PyRecordsIter {
    records: Py<PyRecords>,
    next: std::sync::atomic::AtomicUsize,
}

#[pymethods]
impl PyRecordsIter {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyRecord>>> {
        use std::sync::atomic::Ordering;
        let flat = &self.records.get().flat;
        let i = self.next.load(Ordering::Relaxed);
        if i >= flat.records.len() {
            return Ok(None);
        }
        self.next.store(i + 1, Ordering::Relaxed);
        flat.record(py, i).map(Some)
    }
}

/// What `Journal::open` recovered, in native form: built with the GIL released.
pub struct LoadData {
    records: FlatRecords,
    prepared: Vec<journal::PreparedTransaction>,
    incomplete_transactions_rolled_back: usize,
    torn_tail: Option<(PathBuf, u64)>,
}

impl LoadData {
    /// Packs the report's records (no GIL needed; run it where the load ran).
    pub fn from_report(report: journal::LoadReport) -> LoadData {
        LoadData {
            records: FlatRecords::pack(report.records),
            prepared: report.prepared,
            incomplete_transactions_rolled_back: report.incomplete_transactions_rolled_back,
            torn_tail: report.torn_tail,
        }
    }
}

/// What opening a journal recovered.
#[pyclass(name = "LoadReport", module = "artemis_py._native", frozen)]
pub struct PyLoadReport {
    records: Py<PyRecords>,
    prepared_data: Vec<journal::PreparedTransaction>,
    prepared: PyOnceLock<Py<PyTuple>>,
    incomplete_transactions_rolled_back: usize,
    torn_tail: Option<(PathBuf, u64)>,
}

impl PyLoadReport {
    /// Wraps `data`; cheap (no per-record work), so it can run with the GIL held.
    pub fn new(py: Python<'_>, data: LoadData) -> PyResult<Self> {
        Ok(PyLoadReport {
            records: Py::new(py, PyRecords { flat: data.records })?,
            prepared_data: data.prepared,
            prepared: PyOnceLock::new(),
            incomplete_transactions_rolled_back: data.incomplete_transactions_rolled_back,
            torn_tail: data.torn_tail,
        })
    }
}

#[pymethods]
impl PyLoadReport {
    /// Live records, sorted by id (a `Records` sequence).
    #[getter]
    fn records(&self, py: Python<'_>) -> Py<PyRecords> {
        self.records.clone_ref(py)
    }

    /// Prepared transactions (converted on first access).
    #[getter]
    fn prepared(&self, py: Python<'_>) -> PyResult<Py<PyTuple>> {
        self.prepared
            .get_or_try_init(py, || {
                let op_class = py.import(OP_MODULE)?.getattr("Op")?;
                let prepared = self
                    .prepared_data
                    .iter()
                    .map(|p| {
                        let ops = p
                            .ops
                            .iter()
                            .map(|op| op_class.call1((op_to_py(py, op)?,)))
                            .collect::<PyResult<Vec<_>>>()?;
                        Py::new(
                            py,
                            PyPreparedTransaction {
                                tx_id: p.tx_id,
                                xid: PyBytes::new(py, &p.xid).unbind(),
                                ops: PyTuple::new(py, ops)?.unbind(),
                            },
                        )
                    })
                    .collect::<PyResult<Vec<_>>>()?;
                PyResult::Ok(PyTuple::new(py, prepared)?.unbind())
            })
            .map(|t| t.clone_ref(py))
    }

    #[getter]
    fn incomplete_transactions_rolled_back(&self) -> usize {
        self.incomplete_transactions_rolled_back
    }

    /// `(file, offset)` where a torn tail was cut off, or None.
    #[getter]
    fn torn_tail(&self) -> Option<(PathBuf, u64)> {
        self.torn_tail.clone()
    }

    fn __repr__(&self) -> String {
        format!(
            "LoadReport(records=<{}>, prepared=<{}>, incomplete_transactions_rolled_back={}, torn_tail={:?})",
            self.records.get().flat.records.len(),
            self.prepared_data.len(),
            self.incomplete_transactions_rolled_back,
            self.torn_tail
        )
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
            io:
                journal::IoStats {
                    writes,
                    syncs,
                    records,
                    bytes,
                },
            compactions,
        } = s;
        PyJournalStats {
            data_files,
            free_files,
            live_records,
            batches: writes,
            syncs,
            records_written: records,
            bytes_written: bytes,
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
