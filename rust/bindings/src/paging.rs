//! `artemis_py._native.PageStore`: one address's page store, its writer thread and its
//! completion eventfd (the same shape as `Journal`: `append` never does I/O and keeps the
//! GIL; `wait`, `read`, `count`, `delete_page`, `delete`, `close` and `open` release it and
//! are called from worker threads; `progress` / `error` / `fileno` serve the facade's
//! eventfd waiters).

use std::path::PathBuf;
use std::sync::Arc;

use paging::{NewRecord, PageStore, PagedRecord};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use crate::error::paging_error;
use crate::store::{CompletionFd, PyGroupCommitStore};

/// `(page, offset, message_id, tx_id, queue_ids, message, queue_offset)`.
type RecordTuple<'py> = Bound<'py, PyTuple>;

fn record_tuple<'py>(py: Python<'py>, r: &PagedRecord) -> PyResult<RecordTuple<'py>> {
    let queues = PyTuple::new(py, &r.queue_ids)?;
    PyTuple::new(
        py,
        [
            r.page.into_pyobject(py)?.into_any(),
            r.offset.into_pyobject(py)?.into_any(),
            r.message_id.into_pyobject(py)?.into_any(),
            r.tx_id.into_pyobject(py)?.into_any(),
            queues.into_any(),
            PyBytes::new(py, &r.message).into_any(),
            r.queue_offset.into_pyobject(py)?.into_any(),
        ],
    )
}

fn record_list<'py>(py: Python<'py>, records: &[PagedRecord]) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for r in records {
        list.append(record_tuple(py, r)?)?;
    }
    Ok(list)
}

/// One record to append, as Python passes it:
/// `(message_id, tx_id, queue_ids, message, queue_offset)`.
struct Incoming {
    message_id: u64,
    tx_id: u64,
    queue_ids: Vec<u64>,
    message: PyBackedBytes,
    queue_offset: u64,
}

fn incoming(index: usize, obj: &Bound<'_, PyAny>) -> PyResult<Incoming> {
    let shape = || {
        PyTypeError::new_err(format!(
            "record {index}: expected (message_id, tx_id, queue_ids, message bytes, queue_offset)"
        ))
    };
    let (message_id, tx_id, queue_ids, message, queue_offset): (
        u64,
        u64,
        Vec<u64>,
        PyBackedBytes,
        u64,
    ) = obj.extract().map_err(|_| shape())?;
    Ok(Incoming {
        message_id,
        tx_id,
        queue_ids,
        message,
        queue_offset,
    })
}

#[pyclass(name = "PageStore", module = "artemis_py._native", frozen, extends = PyGroupCommitStore)]
pub struct PyPageStore {
    store: Arc<PageStore>,
    directory: PathBuf,
}

#[pymethods]
impl PyPageStore {
    /// Open (recover) the store in `directory`, or create it for `address` if it holds
    /// none; blocks, GIL released.
    #[staticmethod]
    #[pyo3(signature = (directory, *, page_size, address = None))]
    fn open(
        py: Python<'_>,
        directory: PathBuf,
        page_size: u64,
        address: Option<String>,
    ) -> PyResult<Py<PyPageStore>> {
        let eventfd = CompletionFd::new(&directory).map_err(|e| paging_error(py, &e.into()))?;
        let store = py
            .detach(|| PageStore::open(&directory, page_size, address.as_deref()))
            .map_err(|e| paging_error(py, &e))?;
        let store = Arc::new(store);
        let base = PyGroupCommitStore::new(&store, eventfd);
        Py::new(py, (PyPageStore { store, directory }, base))
    }

    #[getter]
    fn directory(&self) -> &PathBuf {
        &self.directory
    }

    #[getter]
    fn address(&self) -> &str {
        self.store.address()
    }

    #[getter]
    fn page_size(&self) -> u64 {
        self.store.page_size()
    }

    #[getter]
    fn torn(&self) -> Option<(u64, u64)> {
        self.store.torn()
    }

    #[getter]
    fn current_page(&self) -> u64 {
        self.store.current_page()
    }

    fn pages(&self) -> Vec<u64> {
        self.store.pages()
    }

    fn page_version(&self, page: u64) -> Option<u32> {
        self.store.page_version(page)
    }

    fn end(&self) -> (u64, u64) {
        self.store.end()
    }

    fn written(&self) -> (u64, u64) {
        self.store.written()
    }

    /// Queue `records` (`(message_id, tx_id, queue_ids, message, queue_offset)` each); returns
    /// `(ticket, positions)`. Never does I/O. `defer`: leave waking the writer to
    /// `wake_writer`.
    #[pyo3(signature = (records, sync, defer = false))]
    fn append(
        &self,
        py: Python<'_>,
        records: &Bound<'_, PyAny>,
        sync: bool,
        defer: bool,
    ) -> PyResult<(u64, Vec<(u64, u64)>)> {
        let mut owned = Vec::new();
        for (i, item) in records.try_iter()?.enumerate() {
            owned.push(incoming(i, &item?)?);
        }
        let refs: Vec<NewRecord<'_>> = owned
            .iter()
            .map(|r| NewRecord {
                message_id: r.message_id,
                tx_id: r.tx_id,
                queue_offset: r.queue_offset,
                queue_ids: &r.queue_ids,
                message: &r.message,
            })
            .collect();
        self.store
            .append(&refs, sync, defer)
            .map_err(|e| paging_error(py, &e))
    }

    /// `(records, next_offset, page_done)`; records are
    /// `(page, offset, message_id, tx_id, queue_ids, message, queue_offset)`. Blocks, GIL released.
    fn read<'py>(
        &self,
        py: Python<'py>,
        page: u64,
        offset: u64,
        max_records: usize,
        max_bytes: u64,
    ) -> PyResult<(Bound<'py, PyList>, u64, bool)> {
        let out = py
            .detach(|| self.store.read(page, offset, max_records, max_bytes))
            .map_err(|e| paging_error(py, &e))?;
        Ok((
            record_list(py, &out.records)?,
            out.next_offset,
            out.page_done,
        ))
    }

    /// `{(queue_id, tx_id): records}` of a page; blocks, GIL released.
    fn count<'py>(&self, py: Python<'py>, page: u64) -> PyResult<Bound<'py, PyDict>> {
        let counts = py
            .detach(|| self.store.count(page))
            .map_err(|e| paging_error(py, &e))?;
        let d = PyDict::new(py);
        for (key, n) in counts {
            d.set_item(key, n)?;
        }
        Ok(d)
    }

    fn delete_page(&self, py: Python<'_>, page: u64) -> PyResult<()> {
        py.detach(|| self.store.delete_page(page))
            .map_err(|e| paging_error(py, &e))
    }

    fn delete(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.store.delete())
            .map_err(|e| paging_error(py, &e))
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.store.close())
            .map_err(|e| paging_error(py, &e))
    }

    /// `{"writes", "syncs", "records", "bytes", "pages_created"}`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.store.stats();
        let d = PyDict::new(py);
        d.set_item("writes", s.io.writes)?;
        d.set_item("syncs", s.io.syncs)?;
        d.set_item("records", s.io.records)?;
        d.set_item("bytes", s.io.bytes)?;
        d.set_item("pages_created", s.pages_created)?;
        Ok(d)
    }

    #[allow(clippy::unnecessary_debug_formatting)] // the repr quotes the path, as Python's does
    fn __repr__(&self) -> String {
        format!(
            "PageStore(directory={:?}, address={:?})",
            self.directory,
            self.store.address()
        )
    }
}

/// Offline reading of one page file: `(page, records, bad)` with `bad` = `(offset, why)`.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn read_page_file(
    py: Python<'_>,
    path: PathBuf,
) -> PyResult<(u64, Bound<'_, PyList>, Option<(u64, String)>)> {
    let (page, records, bad) = py
        .detach(|| paging::read_page_file(&path))
        .map_err(|e| paging_error(py, &e))?;
    Ok((page, record_list(py, &records)?, bad))
}
