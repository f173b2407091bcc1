//! Functions of the STOMP codec's binding beside `StompConnection`: the header decoder the
//! client's handshake uses, and the encoder and decoder alone, for round-trip tests and the
//! fuzz targets (the package encodes and decodes through `Connection`).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use stomp::{
    decode_headers, encode_frame, Decoder, Error, ErrorKind, FrameLimits, Item, Rules, Version,
};

use crate::stomp_objects::{statics, FrameParts, Statics, FRAME_MODE};

/// Sets [`FRAME_MODE`] (for `bench/codec.py`); returns the previous mode.
#[pyfunction]
pub fn stomp_frame_mode(mode: u8) -> PyResult<u8> {
    if mode > 2 {
        return Err(PyValueError::new_err("mode is 0, 1 or 2"));
    }
    Ok(FRAME_MODE.swap(mode, Ordering::Relaxed))
}

/// `decode_headers(block, rules)` of `artemis_py.protocol.stomp.headers`: a header block
/// decoded under `rules` ("1.0", "raw", "1.1", "1.2"), as `(name, value)` pairs.
#[pyfunction]
pub fn stomp_decode_headers<'py>(
    py: Python<'py>,
    block: &[u8],
    rules: &str,
) -> PyResult<Bound<'py, PyTuple>> {
    let rules = rules_of(rules)?;
    let statics = statics(py)?;
    let decoded = catch_unwind(|| decode_headers(block, rules))
        .unwrap_or_else(|_| Err(panicked(ErrorKind::Remote, "decode_headers")));
    match decoded {
        Ok(headers) => Statics::headers(py, &headers),
        Err(error) => Err(statics.error(py, &error)),
    }
}

/// The wire bytes of `frame` under `rules` ("1.0", "raw", "1.1", "1.2"), whatever the
/// connection state (round-trip tests; `Connection.send` is what the package uses).
#[pyfunction]
#[pyo3(signature = (frame, rules, body_length = None))]
pub fn stomp_encode_frame<'py>(
    py: Python<'py>,
    frame: &Bound<'py, PyAny>,
    rules: &str,
    body_length: Option<i64>,
) -> PyResult<Bound<'py, PyBytes>> {
    let rules = rules_of(rules)?;
    let statics = statics(py)?;
    let parts = FrameParts::of(py, frame)?;
    let command = match parts.command {
        Ok(command) => command,
        Err(text) => {
            let message = format!("unknown STOMP command {}", stomp::show::show_str(&text));
            return Err(statics.error(
                py,
                &Error {
                    kind: ErrorKind::Local,
                    message,
                    error_headers: Vec::new(),
                },
            ));
        }
    };
    let outgoing = parts.outgoing(command, body_length);
    let mut out = Vec::new();
    let result = catch_unwind(AssertUnwindSafe(|| {
        encode_frame(&mut out, &outgoing, rules)
    }))
    .unwrap_or_else(|_| Err(panicked(ErrorKind::Local, "encode_frame")));
    match result {
        Ok(()) => Ok(PyBytes::new(py, &out)),
        Err(error) => Err(statics.error(py, &error)),
    }
}

/// The first event of `data` decoded under `version` (None: not negotiated), every command
/// accepted, the default limits: `(Frame | Heartbeat | None, bytes left)` (round-trip tests).
#[pyfunction]
pub fn stomp_decode_frame<'py>(
    py: Python<'py>,
    data: &[u8],
    version: Option<&str>,
) -> PyResult<(Bound<'py, PyAny>, usize)> {
    let statics = statics(py)?;
    let version = match version {
        None => None,
        Some(text) => Some(
            Version::parse(text)
                .ok_or_else(|| PyValueError::new_err(format!("unknown version {text:?}")))?,
        ),
    };
    let mut decoder = Decoder::any(FrameLimits::default());
    decoder.feed(data);
    let item = catch_unwind(AssertUnwindSafe(|| decoder.next_item(version)))
        .unwrap_or_else(|_| Err(panicked(ErrorKind::Remote, "decoder")));
    let event = match item {
        Ok(Some(Item::Frame(frame))) => statics.frame(py, frame)?,
        Ok(Some(Item::Heartbeat)) => statics.heartbeat.bind(py).clone(),
        Ok(None) => py.None().into_bound(py),
        Err(error) => return Err(statics.error(py, &error)),
    };
    Ok((event, decoder.buffered()))
}

pub(crate) fn panicked(kind: ErrorKind, what: &str) -> Error {
    Error {
        kind,
        message: format!("internal error in the STOMP codec: {what}"),
        error_headers: Vec::new(),
    }
}

fn rules_of(rules: &str) -> PyResult<Rules> {
    Ok(match rules {
        "1.0" => Rules::V10,
        "raw" => Rules::Raw,
        "1.1" => Rules::V11,
        "1.2" => Rules::V12,
        _ => {
            return Err(PyValueError::new_err(format!(
                "unknown header rules {rules:?}"
            )))
        }
    })
}
