//! Journal operations as Python sees them: tagged tuples, the same shape in both directions.
//!
//! ```text
//! ("add", id, record_type, payload)          ("add_tx", tx_id, id, record_type, payload)
//! ("update", id, record_type, payload)       ("update_tx", tx_id, id, record_type, payload)
//! ("delete", id)                             ("delete_tx", tx_id, id)
//! ("prepare", tx_id, xid)  ("commit", tx_id)  ("rollback", tx_id)
//! ```
//! Tuples are cheap to build on the event loop and type precisely in `_native.pyi`; the
//! payloads are copied into owned `Vec`s here, before the GIL is released.

use journal::Op;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyString, PyTuple};

fn bytes_of(item: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let data: PyBackedBytes = item.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "payload must be bytes or bytearray, not {}",
            item.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })?;
    Ok(data.to_vec())
}

/// One tagged tuple being read, with the op's index for error messages.
struct Args<'a, 'py> {
    index: usize,
    tuple: &'a Bound<'py, PyTuple>,
}

impl Args<'_, '_> {
    /// Checks the tuple has as many items as the documented `shape` names.
    fn shaped(&self, shape: &str) -> PyResult<()> {
        let arity = 1 + shape.matches(',').count();
        if self.tuple.len() == arity {
            Ok(())
        } else {
            Err(PyValueError::new_err(format!(
                "op {}: expected {shape}, got a tuple of {} items",
                self.index,
                self.tuple.len()
            )))
        }
    }

    fn u64_at(&self, i: usize) -> PyResult<u64> {
        self.tuple.get_item(i)?.extract()
    }

    fn u8_at(&self, i: usize) -> PyResult<u8> {
        self.tuple.get_item(i)?.extract()
    }

    fn bytes_at(&self, i: usize) -> PyResult<Vec<u8>> {
        bytes_of(&self.tuple.get_item(i)?)
    }
}

/// Convert one tagged tuple into an owned [`Op`].
fn op_from_py(index: usize, obj: &Bound<'_, PyAny>) -> PyResult<Op> {
    let tuple = obj.cast::<PyTuple>().map_err(|_| {
        PyTypeError::new_err(format!(
            "op {index}: expected a tuple such as ('add', id, record_type, payload)"
        ))
    })?;
    let tag_obj = tuple
        .get_item(0)
        .map_err(|_| PyValueError::new_err(format!("op {index}: empty tuple")))?;
    let tag_str = tag_obj.cast::<PyString>().map_err(|_| {
        PyTypeError::new_err(format!(
            "op {index}: the first item must be the op name (a str)"
        ))
    })?;
    let args = Args { index, tuple };
    match tag_str.to_str()? {
        "add" | "update" | "delete" => record_op(tag_str.to_str()?, &args),
        "add_tx" | "update_tx" | "delete_tx" => tx_record_op(tag_str.to_str()?, &args),
        "prepare" => {
            args.shaped("('prepare', tx_id, xid)")?;
            Ok(Op::Prepare {
                tx_id: args.u64_at(1)?,
                xid: args.bytes_at(2)?,
            })
        }
        "commit" => {
            args.shaped("('commit', tx_id)")?;
            Ok(Op::Commit {
                tx_id: args.u64_at(1)?,
            })
        }
        "rollback" => {
            args.shaped("('rollback', tx_id)")?;
            Ok(Op::Rollback {
                tx_id: args.u64_at(1)?,
            })
        }
        other => Err(PyValueError::new_err(format!(
            "op {index}: unknown op '{other}'"
        ))),
    }
}

/// `add`, `update`, `delete`.
fn record_op(tag: &str, a: &Args<'_, '_>) -> PyResult<Op> {
    if tag == "delete" {
        a.shaped("('delete', id)")?;
        return Ok(Op::Delete { id: a.u64_at(1)? });
    }
    a.shaped(&format!("('{tag}', id, record_type, payload)"))?;
    let (id, record_type, payload) = (a.u64_at(1)?, a.u8_at(2)?, a.bytes_at(3)?);
    Ok(if tag == "add" {
        Op::Add {
            id,
            record_type,
            payload,
        }
    } else {
        Op::Update {
            id,
            record_type,
            payload,
        }
    })
}

/// `add_tx`, `update_tx`, `delete_tx`.
fn tx_record_op(tag: &str, a: &Args<'_, '_>) -> PyResult<Op> {
    if tag == "delete_tx" {
        a.shaped("('delete_tx', tx_id, id)")?;
        return Ok(Op::DeleteTx {
            tx_id: a.u64_at(1)?,
            id: a.u64_at(2)?,
        });
    }
    a.shaped(&format!("('{tag}', tx_id, id, record_type, payload)"))?;
    let (tx_id, id) = (a.u64_at(1)?, a.u64_at(2)?);
    let (record_type, payload) = (a.u8_at(3)?, a.bytes_at(4)?);
    Ok(if tag == "add_tx" {
        Op::AddTx {
            tx_id,
            id,
            record_type,
            payload,
        }
    } else {
        Op::UpdateTx {
            tx_id,
            id,
            record_type,
            payload,
        }
    })
}

/// Convert an iterable of tagged tuples.
pub fn ops_from_py(ops: &Bound<'_, PyAny>) -> PyResult<Vec<Op>> {
    let mut out = Vec::with_capacity(ops.len().unwrap_or(0));
    for (index, obj) in ops.try_iter()?.enumerate() {
        out.push(op_from_py(index, &obj?)?);
    }
    Ok(out)
}

/// Convert an [`Op`] back into its tagged tuple (prepared transactions after a load).
pub fn op_to_py<'py>(py: Python<'py>, op: &Op) -> PyResult<Bound<'py, PyTuple>> {
    let b = |data: &[u8]| PyBytes::new(py, data);
    match op {
        Op::Add {
            id,
            record_type,
            payload,
        } => ("add", id, record_type, b(payload)).into_pyobject(py),
        Op::Update {
            id,
            record_type,
            payload,
        } => ("update", id, record_type, b(payload)).into_pyobject(py),
        Op::Delete { id } => ("delete", id).into_pyobject(py),
        Op::AddTx {
            tx_id,
            id,
            record_type,
            payload,
        } => ("add_tx", tx_id, id, record_type, b(payload)).into_pyobject(py),
        Op::UpdateTx {
            tx_id,
            id,
            record_type,
            payload,
        } => ("update_tx", tx_id, id, record_type, b(payload)).into_pyobject(py),
        Op::DeleteTx { tx_id, id } => ("delete_tx", tx_id, id).into_pyobject(py),
        Op::Prepare { tx_id, xid } => ("prepare", tx_id, b(xid)).into_pyobject(py),
        Op::Commit { tx_id } => ("commit", tx_id).into_pyobject(py),
        Op::Rollback { tx_id } => ("rollback", tx_id).into_pyobject(py),
    }
}
