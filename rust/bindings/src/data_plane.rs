//! `DataPlane`: the `dataplane` crate's I/O threads, as `artemis_py._native.DataPlane`.
//!
//! Python waits for [`PyDataPlane::fileno`] to be readable and calls `drain()` once per
//! wake-up; it answers with one `submit()` per loop pass. Both cross the boundary as plain
//! tuples, the cheapest Python objects to build and to unpack:
//!
//! * an event is `(kind, conn_id, ...)`, `kind` one of the class's event constants
//!   (`DataPlane.FRAME`, ...), `conn_id` the connection's int id (None for `REFUSED`);
//!   a frame is the package's `Frame`, made as the codec binding makes it
//!   (`stomp_objects`), a protocol error the package's `RemoteProtocolError`;
//! * a command is `(op, conn, ...)`, `op` one of the class's command constants, `conn`
//!   the `DataPlaneConn` its `OPENED` event handed out.
//!
//! `drain` takes the plane's event queue, and its iterator builds each event's Python
//! objects as the caller reaches it; `submit` builds
//! every Rust command first (a malformed one raises before any is handed over: a batch goes
//! whole or not at all), then hands them over. Neither blocks: the locks they take are the
//! I/O threads' short ones, and both keep the GIL (the I/O threads never want it, and
//! releasing it would let another Python thread take it and the loop wait to have it back).

use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use dataplane::{
    CloseCause, Command, Config, Conn, ConnId, Event, Lease, ListenerId, ListenerSpec, Version,
};
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use stomp::Rules;

use crate::stomp_objects::{limits_of, statics, FrameParts, Statics};

/// `artemis_py._native.DataPlaneConn`: one connection's handle, from its `OPENED` event.
#[pyclass(name = "DataPlaneConn", module = "artemis_py._native", frozen)]
pub struct PyConn {
    conn: Conn,
    /// The version its `ACCEPT_CONNECT` gave (0: none yet), so that `submit` can encode
    /// its MESSAGE and RECEIPT frames itself (see `encoded`).
    version: AtomicU8,
}

#[pymethods]
impl PyConn {
    /// The connection's id, as its events carry it.
    #[getter]
    fn id(&self) -> u64 {
        self.conn.id().0
    }

    /// Outgoing bytes not yet written (submitted frames at an estimate until encoded).
    #[getter]
    fn outgoing(&self) -> usize {
        self.conn.outgoing()
    }

    /// Below the high-water mark; when not, a `WRITABLE` event comes once it drains.
    fn writable(&self) -> bool {
        self.conn.writable()
    }

    fn __repr__(&self) -> String {
        format!("<DataPlaneConn {:#x}>", self.conn.id().0)
    }
}

/// `artemis_py._native.DataPlaneLease`: a handed-off connection's place in its listener's
/// `connectionsAllowed`, until `release()` (or until it is garbage).
#[pyclass(name = "DataPlaneLease", module = "artemis_py._native", frozen)]
pub struct PyLease {
    lease: Mutex<Option<Lease>>,
}

#[pymethods]
impl PyLease {
    /// Gives the place back (idempotent).
    fn release(&self) {
        let taken = self
            .lease
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        drop(taken);
    }
}

/// `artemis_py._native.DataPlane`: see the module doc.
#[pyclass(name = "DataPlane", module = "artemis_py._native", frozen)]
pub struct PyDataPlane {
    plane: dataplane::DataPlane,
}

/// `artemis_py._native.DataPlaneEvents`: what one `drain()` took, made into Python objects
/// one event at a time as the caller iterates. Each event's objects are then made just
/// before they are handled, while the CPU's caches still hold them: a batch of a thousand
/// frames made at once had left the cache by the time the loop reached its last ones.
#[pyclass(name = "DataPlaneEvents", module = "artemis_py._native")]
pub struct PyEvents {
    events: std::vec::IntoIter<Event>,
}

#[pymethods]
impl PyEvents {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next event's tuple. If it cannot be made into Python objects (out of memory, a
    /// handed-off socket Python refuses), it is dropped and the error raised; iterating
    /// again goes on with the events after it.
    fn __next__<'py>(
        mut slf: PyRefMut<'py, Self>,
        py: Python<'py>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let statics = statics(py)?;
        slf.events
            .next()
            .map(|event| event_tuple(py, statics, event))
            .transpose()
    }

    fn __len__(&self) -> usize {
        self.events.len()
    }
}

fn seconds(value: Option<f64>, what: &str) -> PyResult<Option<Duration>> {
    value
        .map(|secs| {
            Duration::try_from_secs_f64(secs)
                .map_err(|_| PyValueError::new_err(format!("{what} must be >= 0, not {secs}")))
        })
        .transpose()
}

fn plane_error(error: &dataplane::Error) -> PyErr {
    match error {
        dataplane::Error::Listen { source, .. } | dataplane::Error::Setup { source, .. } => {
            PyOSError::new_err((source.raw_os_error(), error.to_string()))
        }
        dataplane::Error::Stopped => PyRuntimeError::new_err(error.to_string()),
    }
}

fn address(py: Python<'_>, addr: SocketAddr) -> PyResult<Bound<'_, PyTuple>> {
    (addr.ip().to_string(), addr.port()).into_pyobject(py)
}

/// The commands' op codes (the class constants of the same names).
const ACCEPT_CONNECT: u8 = 0;
const SEND: u8 = 1;
const SEND_HEAD: u8 = 2;
const SEND_BYTES: u8 = 3;
const SET_HEARTBEAT: u8 = 4;
const PAUSE_READING: u8 = 5;
const RESUME_READING: u8 = 6;
const READ_REST: u8 = 7;
const CLOSE: u8 = 8;

/// The events' kinds (the class constants of the same names).
const OPENED: u8 = 0;
const FRAME: u8 = 1;
const PROTOCOL_ERROR: u8 = 2;
const COMMAND_FAILED: u8 = 3;
const WRITABLE: u8 = 4;
const TTL_EXPIRED: u8 = 5;
const REST_READ: u8 = 6;
const INPUT_ENDED: u8 = 7;
const CLOSED: u8 = 8;
const HANDED_OFF: u8 = 9;
const REFUSED: u8 = 10;

/// A Python `Frame` as an owned Rust frame; refused as the codec refuses it (an unknown
/// command, header text that UTF-8 cannot carry), with the package's `LocalProtocolError`.
fn frame_of(py: Python<'_>, statics: &Statics, frame: &Bound<'_, PyAny>) -> PyResult<stomp::Frame> {
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
struct Batch {
    commands: Vec<Command>,
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
    let version = match handle.version.load(Ordering::Relaxed) {
        1 => Version::V10,
        2 => Version::V11,
        3 => Version::V12,
        _ => return Ok(false),
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

/// Adds one command tuple to `batch`.
fn add_command(
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
            let version = Version::parse(&text)
                .ok_or_else(|| PyValueError::new_err(format!("no STOMP version {text:?}")))?;
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

/// Why a connection closed, as `(cause, detail)`: the cause a short str, the detail the
/// error's or panic's text (None for the others).
fn cause_of(cause: CloseCause) -> (&'static str, Option<String>) {
    match cause {
        CloseCause::Reset(text) => ("reset", Some(text)),
        CloseCause::HandshakeTimeout => ("handshake-timeout", None),
        CloseCause::Requested => ("requested", None),
        CloseCause::FlushTimeout => ("flush-timeout", None),
        CloseCause::Panic(text) => ("panic", Some(text)),
        CloseCause::Shutdown => ("shutdown", None),
    }
}

/// A handed-off stream as a `socket.socket`, which owns the descriptor from then on (if
/// making it fails, the descriptor is closed here).
fn socket_of(py: Python<'_>, stream: std::net::TcpStream) -> PyResult<Bound<'_, PyAny>> {
    let fd: OwnedFd = stream.into();
    let kwargs = PyDict::new(py);
    kwargs.set_item(intern!(py, "fileno"), fd.as_raw_fd())?;
    let socket = py
        .import(intern!(py, "socket"))?
        .getattr(intern!(py, "socket"))?
        .call((), Some(&kwargs))?;
    // The Python socket closes the descriptor now: give up ours without closing it.
    let _ = fd.into_raw_fd();
    Ok(socket)
}

/// One event as its tuple (see the module doc).
fn event_tuple<'py>(
    py: Python<'py>,
    statics: &Statics,
    event: Event,
) -> PyResult<Bound<'py, PyAny>> {
    let any = |t: Bound<'py, PyTuple>| t.into_any();
    Ok(match event {
        Event::Frame { conn, frame } => {
            any((FRAME, conn.0, statics.frame(py, frame)?).into_pyobject(py)?)
        }
        Event::Opened {
            conn,
            listener,
            peer,
        } => {
            let id = conn.id().0;
            let handle = Bound::new(
                py,
                PyConn {
                    conn,
                    version: AtomicU8::new(0),
                },
            )?;
            any((OPENED, id, handle, listener.0, address(py, peer)?).into_pyobject(py)?)
        }
        Event::ProtocolError { conn, error } | Event::CommandFailed { conn, error } => {
            let kind = if error.kind == stomp::ErrorKind::Remote {
                PROTOCOL_ERROR
            } else {
                COMMAND_FAILED
            };
            let exception = statics.error(py, &error).into_value(py);
            any((kind, conn.0, exception).into_pyobject(py)?)
        }
        Event::Writable { conn } => any((WRITABLE, conn.0).into_pyobject(py)?),
        Event::TtlExpired { conn, silent_for } => {
            any((TTL_EXPIRED, conn.0, silent_for.as_secs_f64()).into_pyobject(py)?)
        }
        Event::RestRead { conn } => any((REST_READ, conn.0).into_pyobject(py)?),
        Event::InputEnded { conn, unread } => any((INPUT_ENDED, conn.0, unread).into_pyobject(py)?),
        Event::Closed { conn, cause } => {
            let (cause, detail) = cause_of(cause);
            any((CLOSED, conn.0, cause, detail).into_pyobject(py)?)
        }
        Event::HandedOff {
            conn,
            stream,
            initial,
            lease,
        } => {
            let lease = PyLease {
                lease: Mutex::new(Some(lease)),
            };
            let socket = socket_of(py, stream)?;
            let initial = PyBytes::new(py, &initial);
            any((HANDED_OFF, conn.0, socket, initial, Bound::new(py, lease)?).into_pyobject(py)?)
        }
        Event::Refused { listener, peer } => {
            any((REFUSED, None::<u64>, listener.0, address(py, peer)?).into_pyobject(py)?)
        }
    })
}

#[pymethods]
impl PyDataPlane {
    #[classattr]
    const ACCEPT_CONNECT: u8 = ACCEPT_CONNECT;
    #[classattr]
    const SEND: u8 = SEND;
    #[classattr]
    const SEND_HEAD: u8 = SEND_HEAD;
    #[classattr]
    const SEND_BYTES: u8 = SEND_BYTES;
    #[classattr]
    const SET_HEARTBEAT: u8 = SET_HEARTBEAT;
    #[classattr]
    const PAUSE_READING: u8 = PAUSE_READING;
    #[classattr]
    const RESUME_READING: u8 = RESUME_READING;
    #[classattr]
    const READ_REST: u8 = READ_REST;
    #[classattr]
    const CLOSE: u8 = CLOSE;
    #[classattr]
    const OPENED: u8 = OPENED;
    #[classattr]
    const FRAME: u8 = FRAME;
    #[classattr]
    const PROTOCOL_ERROR: u8 = PROTOCOL_ERROR;
    #[classattr]
    const COMMAND_FAILED: u8 = COMMAND_FAILED;
    #[classattr]
    const WRITABLE: u8 = WRITABLE;
    #[classattr]
    const TTL_EXPIRED: u8 = TTL_EXPIRED;
    #[classattr]
    const REST_READ: u8 = REST_READ;
    #[classattr]
    const INPUT_ENDED: u8 = INPUT_ENDED;
    #[classattr]
    const CLOSED: u8 = CLOSED;
    #[classattr]
    const HANDED_OFF: u8 = HANDED_OFF;
    #[classattr]
    const REFUSED: u8 = REFUSED;

    /// Starts the I/O threads (`threads=0`: one per core).
    #[new]
    #[pyo3(signature = (
        threads = 0, *, high_water = None, low_water = None, close_linger = None,
        max_queued_events = None,
    ))]
    fn new(
        py: Python<'_>,
        threads: usize,
        high_water: Option<usize>,
        low_water: Option<usize>,
        close_linger: Option<f64>,
        max_queued_events: Option<usize>,
    ) -> PyResult<Self> {
        let defaults = Config::default();
        let config = Config {
            threads,
            high_water: high_water.unwrap_or(defaults.high_water),
            low_water: low_water.unwrap_or(defaults.low_water),
            close_linger: seconds(close_linger, "close_linger")?.unwrap_or(defaults.close_linger),
            max_queued_events: max_queued_events.unwrap_or(defaults.max_queued_events),
            ..defaults
        };
        let plane = py
            .detach(|| dataplane::DataPlane::start(config))
            .map_err(|e| plane_error(&e))?;
        Ok(Self { plane })
    }

    /// The number of I/O threads.
    #[getter]
    fn threads(&self) -> usize {
        self.plane.threads()
    }

    /// Binds `host:port` (0: any free port) and accepts on it: `(listener_id, (host, port))`.
    #[pyo3(signature = (
        host, port, limits = None, *, connections_allowed = -1, handshake_timeout = None,
        handshake_error = None, tcp_send_buffer = None, tcp_receive_buffer = None,
        handoff_prefixes = Vec::new(),
    ))]
    #[allow(clippy::too_many_arguments)]
    fn listen<'py>(
        &self,
        py: Python<'py>,
        host: &str,
        port: u16,
        limits: Option<&Bound<'py, PyAny>>,
        connections_allowed: i64,
        handshake_timeout: Option<f64>,
        handshake_error: Option<String>,
        tcp_send_buffer: Option<usize>,
        tcp_receive_buffer: Option<usize>,
        handoff_prefixes: Vec<Vec<u8>>,
    ) -> PyResult<(u32, Bound<'py, PyTuple>)> {
        let addr = (host, port)
            .to_socket_addrs()
            .map_err(|e| {
                PyOSError::new_err((e.raw_os_error(), format!("cannot resolve {host}: {e}")))
            })?
            .next()
            .ok_or_else(|| PyOSError::new_err(format!("{host} has no address")))?;
        let spec = ListenerSpec {
            limits: match limits {
                Some(limits) => limits_of(limits)?,
                None => stomp::FrameLimits::default(),
            },
            connections_allowed,
            handshake_timeout: seconds(handshake_timeout, "handshake_timeout")?,
            handshake_error,
            tcp_send_buffer,
            tcp_receive_buffer,
            handoff_prefixes,
            ..ListenerSpec::new(addr)
        };
        let listening = self.plane.listen(spec).map_err(|e| plane_error(&e))?;
        Ok((listening.id.0, address(py, listening.local_addr)?))
    }

    /// Stops accepting on a listener; its connections go on.
    fn unlisten(&self, listener_id: u32) {
        self.plane.unlisten(ListenerId(listener_id));
    }

    /// The eventfd that is readable while events wait.
    fn fileno(&self) -> i32 {
        self.plane.fileno()
    }

    /// Every event reported so far, in order per connection, as an iterator of tuples
    /// (`DataPlaneEvents`); resets the eventfd. The caller iterates it to the end at once:
    /// the eventfd does not say that events wait in it.
    fn drain(&self) -> PyEvents {
        let mut events = Vec::new();
        // With the GIL held: the queue's lock is held only for a swap by threads that never
        // want the GIL, while releasing it lets another Python thread take it and the loop
        // wait a switch interval to have it back.
        self.plane.drain(&mut events);
        PyEvents {
            events: events.into_iter(),
        }
    }

    /// Hands a batch of `(op, conn, ...)` commands to the I/O threads (all or none: a
    /// malformed command raises before any is handed over).
    fn submit(&self, py: Python<'_>, commands: &Bound<'_, PyAny>) -> PyResult<()> {
        let statics = statics(py)?;
        let mut batch = Batch::default();
        for item in commands.try_iter()? {
            add_command(py, statics, &item?, &mut batch)?;
        }
        // With the GIL held, as in drain: the inboxes' locks are short and GIL-free.
        self.plane.submit(batch.commands);
        Ok(())
    }

    /// How many times the eventfd was poked (batches that found the queue empty).
    #[getter]
    fn wakeups(&self) -> u64 {
        self.plane.wakeups()
    }

    /// Closes every connection (each reports `CLOSED` with cause "shutdown", for the next
    /// `drain()`) and the listeners, and joins the threads. Idempotent.
    fn shutdown(&self, py: Python<'_>) {
        py.detach(|| self.plane.shutdown());
    }
}
