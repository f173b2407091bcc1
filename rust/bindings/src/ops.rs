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
    let tag = tag_str.to_str()?;
    // Check the tuple has as many items as the documented shape names.
    let shaped = |shape: &str| -> PyResult<()> {
        let arity = 1 + shape.matches(',').count();
        if tuple.len() == arity {
            Ok(())
        } else {
            Err(PyValueError::new_err(format!(
                "op {index}: expected {shape}, got a tuple of {} items",
                tuple.len()
            )))
        }
    };
    let item = |i: usize| tuple.get_item(i);
    let u64_at = |i: usize| -> PyResult<u64> { item(i)?.extract() };
    let u8_at = |i: usize| -> PyResult<u8> { item(i)?.extract() };
    let bytes_at = |i: usize| -> PyResult<Vec<u8>> { bytes_of(&item(i)?) };
    let op = match tag {
        "add" => {
            shaped("('add', id, record_type, payload)")?;
            Op::Add {
                id: u64_at(1)?,
                record_type: u8_at(2)?,
                payload: bytes_at(3)?,
            }
        }
        "update" => {
            shaped("('update', id, record_type, payload)")?;
            Op::Update {
                id: u64_at(1)?,
                record_type: u8_at(2)?,
                payload: bytes_at(3)?,
            }
        }
        "delete" => {
            shaped("('delete', id)")?;
            Op::Delete { id: u64_at(1)? }
        }
        "add_tx" => {
            shaped("('add_tx', tx_id, id, record_type, payload)")?;
            Op::AddTx {
                tx_id: u64_at(1)?,
                id: u64_at(2)?,
                record_type: u8_at(3)?,
                payload: bytes_at(4)?,
            }
        }
        "update_tx" => {
            shaped("('update_tx', tx_id, id, record_type, payload)")?;
            Op::UpdateTx {
                tx_id: u64_at(1)?,
                id: u64_at(2)?,
                record_type: u8_at(3)?,
                payload: bytes_at(4)?,
            }
        }
        "delete_tx" => {
            shaped("('delete_tx', tx_id, id)")?;
            Op::DeleteTx {
                tx_id: u64_at(1)?,
                id: u64_at(2)?,
            }
        }
        "prepare" => {
            shaped("('prepare', tx_id, xid)")?;
            Op::Prepare {
                tx_id: u64_at(1)?,
                xid: bytes_at(2)?,
            }
        }
        "commit" => {
            shaped("('commit', tx_id)")?;
            Op::Commit { tx_id: u64_at(1)? }
        }
        "rollback" => {
            shaped("('rollback', tx_id)")?;
            Op::Rollback { tx_id: u64_at(1)? }
        }
        other => {
            return Err(PyValueError::new_err(format!(
                "op {index}: unknown op '{other}'"
            )))
        }
    };
    Ok(op)
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
