//! A message's journal record (and what a cluster bridge forwards), encoded in one pass:
//! the encoder behind `artemis_py.broker.message.encode_message`, which decides the fields
//! and documents the layout (decoding stays there: only recovery reads records).
//!
//! Layout, little-endian: version u8, flags u8, routing type u8, priority u8, timestamp
//! i64, expiration i64, address length u16, the address, property count u16, per property
//! key length u16, key, value length u32, value; then the tail (the body, or what stands
//! for it).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString, PyTuple};

const VERSION: u8 = 1;

/// The record of a message with these fields; `properties` a sequence of `(str, str)`,
/// `tail` the bytes that end it. A `UnicodeEncodeError` for text UTF-8 cannot carry (as
/// `str.encode`), a `ValueError` for an address or key past 65,535 bytes or a value past
/// 4 GiB.
#[pyfunction]
#[allow(clippy::too_many_arguments)] // the record's fields, as the Python caller has them
pub fn encode_message_record<'py>(
    py: Python<'py>,
    flags: u8,
    routing: u8,
    priority: u8,
    timestamp: i64,
    expiration: i64,
    address: &str,
    properties: &Bound<'py, PyAny>,
    tail: &[u8],
) -> PyResult<Bound<'py, PyBytes>> {
    // (room for typical properties: the body is most of it)
    let count = properties.len()?;
    let mut record = Vec::with_capacity(28 + address.len() + 64 * count + tail.len());
    record.extend_from_slice(&[VERSION, flags, routing, priority]);
    record.extend_from_slice(&timestamp.to_le_bytes());
    record.extend_from_slice(&expiration.to_le_bytes());
    record.extend_from_slice(&length::<u16>(address.len(), "address")?.to_le_bytes());
    record.extend_from_slice(address.as_bytes());
    record.extend_from_slice(&length::<u16>(count, "property count")?.to_le_bytes());
    for item in properties.try_iter()? {
        let item = item?;
        let pair = item.cast::<PyTuple>()?;
        let (key, value) = (pair.get_item(0)?, pair.get_item(1)?);
        let key = key.cast::<PyString>()?.to_str()?;
        let value = value.cast::<PyString>()?.to_str()?;
        record.extend_from_slice(&length::<u16>(key.len(), "property name")?.to_le_bytes());
        record.extend_from_slice(key.as_bytes());
        record.extend_from_slice(&length::<u32>(value.len(), "property value")?.to_le_bytes());
        record.extend_from_slice(value.as_bytes());
    }
    record.extend_from_slice(tail);
    Ok(PyBytes::new(py, &record))
}

/// `len` as the record's length field, or a `ValueError` naming `what`.
fn length<T: TryFrom<usize>>(len: usize, what: &str) -> PyResult<T> {
    T::try_from(len).map_err(|_| PyValueError::new_err(format!("{what} too long: {len}")))
}
