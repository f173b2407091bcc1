//! MESSAGE and RECEIPT frames encoded from what the session decided, with no Python
//! `Frame` in between: a RECEIPT from its receipt id; a MESSAGE from the delivery's own
//! headers (subscription, message-id, ack...: the session's decisions) and the broker's
//! `Message`, whose standard headers, properties and body are read here.
//!
//! The frame is the one `sessions/stomp/subscription.py`'s `send_message` builds as a
//! `Frame` for the socket shell, header for header (tests compare the two): the delivery's
//! headers, then `persistent`, `priority` (when not the default), `expires` (when set),
//! `timestamp`, the properties the version can carry (`_carriable_in_10`/`_11`: the rest
//! are left out rather than refusing the frame), and `content-length`.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use stomp::{Command, Outgoing, Rules, Version};

use crate::data_plane_commands::parse_version;
use crate::stomp_objects::{text, Statics, Text};

/// The priority a MESSAGE does not name (`broker/message.py`'s `DEFAULT_PRIORITY`).
const DEFAULT_PRIORITY: i64 = 4;

/// A header's text: the session's or the message's, or made here.
enum Value {
    Text(Text),
    Owned(String),
    Static(&'static str),
}

impl AsRef<str> for Value {
    fn as_ref(&self) -> &str {
        match self {
            Value::Text(text) => text.as_ref(),
            Value::Owned(text) => text,
            Value::Static(text) => text,
        }
    }
}

/// Whether a property can go in a `version` MESSAGE (see the module doc).
fn carriable(version: Version, name: &str, value: &str) -> bool {
    match version {
        Version::V10 => {
            !name.contains([':', '\r', '\n', '\0']) && !value.contains(['\r', '\n', '\0'])
        }
        Version::V11 => !value.ends_with('\r') && !name.contains('\0') && !value.contains('\0'),
        Version::V12 => true,
    }
}

/// Appends the MESSAGE of `message` with the delivery's `headers` (a sequence of name,
/// value pairs) to `out`; on error `out` is as before.
pub(crate) fn encode_message(
    py: Python<'_>,
    statics: &Statics,
    out: &mut Vec<u8>,
    version: Version,
    headers: &Bound<'_, PyAny>,
    message: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let mut unencodable = false;
    let mut lines: Vec<(Value, Value)> = Vec::with_capacity(16);
    for pair in headers.try_iter()? {
        let pair = pair?;
        let pair = pair.cast::<PyTuple>()?;
        let name = text(&pair.get_item(0)?, &mut unencodable)?;
        let value = text(&pair.get_item(1)?, &mut unencodable)?;
        lines.push((Value::Text(name), Value::Text(value)));
    }
    if message.getattr(intern!(py, "durable"))?.is_truthy()? {
        lines.push((Value::Static("persistent"), Value::Static("true")));
    }
    let priority: i64 = message.getattr(intern!(py, "priority"))?.extract()?;
    if priority != DEFAULT_PRIORITY {
        lines.push((
            Value::Static("priority"),
            Value::Owned(priority.to_string()),
        ));
    }
    let expiration: i64 = message.getattr(intern!(py, "expiration"))?.extract()?;
    if expiration != 0 {
        lines.push((
            Value::Static("expires"),
            Value::Owned(expiration.to_string()),
        ));
    }
    let timestamp: i64 = message.getattr(intern!(py, "timestamp"))?.extract()?;
    lines.push((
        Value::Static("timestamp"),
        Value::Owned(timestamp.to_string()),
    ));
    for pair in message.getattr(intern!(py, "properties"))?.try_iter()? {
        let pair = pair?;
        let pair = pair.cast::<PyTuple>()?;
        let name = text(&pair.get_item(0)?, &mut unencodable)?;
        let value = text(&pair.get_item(1)?, &mut unencodable)?;
        if carriable(version, name.as_ref(), value.as_ref()) {
            lines.push((Value::Text(name), Value::Text(value)));
        }
    }
    let body = message.getattr(intern!(py, "body"))?;
    let body = body.cast::<PyBytes>()?.as_bytes();
    lines.push((
        Value::Static("content-length"),
        Value::Owned(body.len().to_string()),
    ));
    let frame = Outgoing {
        unencodable,
        ..Outgoing::new(Command::Message, &lines, body)
    };
    let rules = Rules::for_frame(Command::Message, Some(version));
    stomp::encode_frame(out, &frame, rules).map_err(|error| statics.error(py, &error))
}

/// Appends the RECEIPT for `receipt` (with `duplicate:true`: a send the node already had)
/// to `out`; on error `out` is as before.
pub(crate) fn encode_receipt(
    py: Python<'_>,
    statics: &Statics,
    out: &mut Vec<u8>,
    version: Version,
    receipt: &Bound<'_, PyAny>,
    duplicate: bool,
) -> PyResult<()> {
    let mut unencodable = false;
    let receipt = Value::Text(text(receipt, &mut unencodable)?);
    let mut lines = vec![(Value::Static("receipt-id"), receipt)];
    if duplicate {
        lines.push((Value::Static("duplicate"), Value::Static("true")));
    }
    let frame = Outgoing {
        unencodable,
        ..Outgoing::new(Command::Receipt, &lines, b"")
    };
    let rules = Rules::for_frame(Command::Receipt, Some(version));
    stomp::encode_frame(out, &frame, rules).map_err(|error| statics.error(py, &error))
}

/// The bytes `DataPlane.SEND_MESSAGE` writes for `(headers, message)` on a `version`
/// connection (tests compare them with the `Frame` of the socket shell's path).
#[pyfunction]
pub fn stomp_encode_message<'py>(
    py: Python<'py>,
    version: &str,
    headers: &Bound<'py, PyAny>,
    message: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut out = Vec::new();
    encode_message(
        py,
        crate::stomp_objects::statics(py)?,
        &mut out,
        parse_version(version)?,
        headers,
        message,
    )?;
    Ok(PyBytes::new(py, &out))
}

/// The bytes `DataPlane.SEND_RECEIPT` writes on a `version` connection (tests).
#[pyfunction]
#[pyo3(signature = (version, receipt, duplicate = false))]
pub fn stomp_encode_receipt<'py>(
    py: Python<'py>,
    version: &str,
    receipt: &Bound<'py, PyAny>,
    duplicate: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut out = Vec::new();
    encode_receipt(
        py,
        crate::stomp_objects::statics(py)?,
        &mut out,
        parse_version(version)?,
        receipt,
        duplicate,
    )?;
    Ok(PyBytes::new(py, &out))
}
