//! The commands of `DataPlane.submit()`: `(op, conn, ...)` tuples made into the plane's
//! Rust commands, a batch at a time, with the MESSAGE and RECEIPT frames of a connected
//! client encoded here, into the batch's bytes for their connection.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use dataplane::{Command, Conn, ConnId, Version};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use stomp::Rules;

use crate::data_plane::PyConn;
use crate::delivery_frames;
use crate::stomp_objects::{FrameParts, Statics};

/// The commands' op codes (the class constants of the same names).
pub(crate) const ACCEPT_CONNECT: u8 = 0;
pub(crate) const SEND: u8 = 1;
pub(crate) const SEND_HEAD: u8 = 2;
pub(crate) const SEND_BYTES: u8 = 3;
pub(crate) const SET_HEARTBEAT: u8 = 4;
pub(crate) const PAUSE_READING: u8 = 5;
pub(crate) const RESUME_READING: u8 = 6;
pub(crate) const READ_REST: u8 = 7;
pub(crate) const CLOSE: u8 = 8;
pub(crate) const SEND_MESSAGE: u8 = 9;
pub(crate) const SEND_RECEIPT: u8 = 10;

/// A duration in seconds from Python (None stays None); negative ones are refused.
pub(crate) fn seconds(value: Option<f64>, what: &str) -> PyResult<Option<Duration>> {
    value
        .map(|secs| {
            Duration::try_from_secs_f64(secs)
                .map_err(|_| PyValueError::new_err(format!("{what} must be >= 0, not {secs}")))
        })
        .transpose()
}

/// A Python `Frame` as an owned Rust frame; refused as the codec refuses it (an unknown
/// command, header text that UTF-8 cannot carry), with the package's `LocalProtocolError`.
pub(crate) fn frame_of(
    py: Python<'_>,
    statics: &Statics,
    frame: &Bound<'_, PyAny>,
) -> PyResult<stomp::Frame> {
    let parts = FrameParts::of(py, frame)?;
    let refuse = |message: String| {
        let error = stomp::Error {
            kind: stomp::ErrorKind::Local,
            message,
            error_headers: Vec::new(),
        };
        statics.error(py, &error)
    };
    let command = match parts.command {
        Ok(command) => command,
        Err(text) => return Err(refuse(format!("a server cannot send {text:?} frames"))),
    };
    if parts.unencodable {
        return Err(refuse(
            "frame headers are not encodable as UTF-8 (surrogates not allowed)".to_owned(),
        ));
    }
    let headers = parts
        .headers
        .iter()
        .map(|(name, value)| (name.as_ref().to_owned(), value.as_ref().to_owned()))
        .collect();
    let body = parts
        .body
        .as_ref()
        .map_or_else(Vec::new, |b| b.as_bytes().to_vec());
    Ok(stomp::Frame::new(command, headers, body))
}

/// A STOMP version named by its text ("1.2"); refused with a `ValueError` otherwise.
pub(crate) fn parse_version(text: &str) -> PyResult<Version> {
    Version::parse(text).ok_or_else(|| PyValueError::new_err(format!("no STOMP version {text:?}")))
}

/// The version a connection's `ACCEPT_CONNECT` gave, if it came.
fn version_of(handle: &PyConn) -> Option<Version> {
    match handle.version.load(Ordering::Relaxed) {
        1 => Some(Version::V10),
        2 => Some(Version::V11),
        3 => Some(Version::V12),
        _ => None,
    }
}

fn version_code(version: Version) -> u8 {
    match version {
        Version::V10 => 1,
        Version::V11 => 2,
        Version::V12 => 3,
    }
}

/// One `submit()`'s commands, in order, with each connection's latest: bytes for a
/// connection whose latest command is bytes join them, so a pass's deliveries to one
/// consumer go as one piece that its I/O thread takes in one step.
#[derive(Default)]
pub(crate) struct Batch {
    pub(crate) commands: Vec<Command>,
    latest: HashMap<ConnId, usize>,
}

impl Batch {
    fn push(&mut self, command: Command, id: ConnId) {
        self.latest.insert(id, self.commands.len());
        self.commands.push(command);
    }

    /// The bytes to append to for `conn`: its latest command's, or a new one's.
    fn bytes_for(&mut self, conn: &Conn) -> &mut Vec<u8> {
        let id = conn.id();
        let at = match self.latest.get(&id) {
            Some(&at) if matches!(self.commands[at], Command::SendBytes { .. }) => at,
            _ => {
                let conn = conn.clone();
                self.push(
                    Command::SendBytes {
                        conn,
                        bytes: Vec::new(),
                    },
                    id,
                );
                self.commands.len() - 1
            }
        };
        match &mut self.commands[at] {
            Command::SendBytes { bytes, .. } => bytes,
            _ => unreachable!("the command at `at` is bytes"),
        }
    }
}

/// A MESSAGE or RECEIPT frame of a connection whose version is known, encoded here from
/// the Python frame in one pass: cheaper for the loop than copying its headers into an
/// owned Rust frame for the I/O thread to encode. Those frames change nothing in the
/// connection codec's state (only CONNECTED and ERROR do, and they still go through it),
/// so its bytes can be written as they are. False: the frame takes the codec's path.
fn encode_into(
    py: Python<'_>,
    statics: &Statics,
    handle: &PyConn,
    frame: &Bound<'_, PyAny>,
    batch: &mut Batch,
) -> PyResult<bool> {
    let Some(version) = version_of(handle) else {
        return Ok(false);
    };
    let parts = FrameParts::of(py, frame)?;
    let Ok(command @ (stomp::Command::Message | stomp::Command::Receipt)) = parts.command else {
        return Ok(false);
    };
    let body = parts.body.as_ref().map_or(&[][..], |b| b.as_bytes());
    let outgoing = stomp::Outgoing {
        unencodable: parts.unencodable,
        ..stomp::Outgoing::new(command, &parts.headers, body)
    };
    let bytes = batch.bytes_for(&handle.conn);
    let start = bytes.len();
    let rules = Rules::for_frame(command, Some(version));
    if let Err(error) = stomp::encode_frame(bytes, &outgoing, rules) {
        bytes.truncate(start);
        return Err(statics.error(py, &error));
    }
    Ok(true)
}

/// `(SEND_MESSAGE, conn, headers, message)` or `(SEND_RECEIPT, conn, receipt, duplicate)`:
/// the frame encoded into the batch's bytes for the connection (`delivery_frames`).
fn encode_delivery(
    py: Python<'_>,
    statics: &Statics,
    handle: &PyConn,
    op: u8,
    (first, second): (&Bound<'_, PyAny>, &Bound<'_, PyAny>),
    batch: &mut Batch,
) -> PyResult<()> {
    let version = version_of(handle).ok_or_else(|| {
        PyValueError::new_err("a MESSAGE or RECEIPT before the connection's CONNECT")
    })?;
    let bytes = batch.bytes_for(&handle.conn);
    if op == SEND_MESSAGE {
        delivery_frames::encode_message(py, statics, bytes, version, first, second)
    } else {
        let duplicate = second.is_truthy()?;
        delivery_frames::encode_receipt(py, statics, bytes, version, first, duplicate)
    }
}

/// Adds one command tuple to `batch`.
pub(crate) fn add_command(
    py: Python<'_>,
    statics: &Statics,
    item: &Bound<'_, PyAny>,
    batch: &mut Batch,
) -> PyResult<()> {
    let tuple = item
        .cast::<PyTuple>()
        .map_err(|_| PyTypeError::new_err("a command must be a tuple (op, conn, ...)"))?;
    let op: u8 = tuple.get_item(0)?.extract()?;
    let handle = tuple.get_item(1)?;
    let handle = handle
        .cast::<PyConn>()
        .map_err(|_| PyTypeError::new_err("a command's second item must be a DataPlaneConn"))?
        .get();
    let arg = |index: usize| tuple.get_item(index);
    let conn = handle.conn.clone();
    let command = match op {
        ACCEPT_CONNECT => {
            let text: String = arg(2)?.extract()?;
            let version = parse_version(&text)?;
            handle
                .version
                .store(version_code(version), Ordering::Relaxed);
            Command::AcceptConnect { conn, version }
        }
        SEND => {
            let frame = arg(2)?;
            if encode_into(py, statics, handle, &frame, batch)? {
                return Ok(());
            }
            Command::Send {
                conn,
                frame: frame_of(py, statics, &frame)?,
            }
        }
        SEND_HEAD => Command::SendHead {
            conn,
            frame: frame_of(py, statics, &arg(2)?)?,
            body_length: arg(3)?.extract()?,
        },
        SEND_MESSAGE | SEND_RECEIPT => {
            return encode_delivery(py, statics, handle, op, (&arg(2)?, &arg(3)?), batch);
        }
        SEND_BYTES => {
            let data = arg(2)?;
            let bytes = batch.bytes_for(&conn);
            match data.cast::<PyBytes>() {
                Ok(data) => bytes.extend_from_slice(data.as_bytes()),
                Err(_) => bytes.extend(data.extract::<Vec<u8>>()?),
            }
            return Ok(());
        }
        SET_HEARTBEAT => Command::SetHeartbeat {
            conn,
            send_every: seconds(arg(2)?.extract()?, "send_every")?,
            expect_within: seconds(arg(3)?.extract()?, "expect_within")?,
        },
        PAUSE_READING => Command::PauseReading { conn },
        RESUME_READING => Command::ResumeReading { conn },
        READ_REST => Command::ReadRest { conn },
        CLOSE => Command::Close {
            conn,
            flush: arg(2)?.extract()?,
        },
        other => {
            return Err(PyValueError::new_err(format!(
                "no data plane command {other}"
            )))
        }
    };
    let id = handle.conn.id();
    batch.push(command, id);
    Ok(())
}
