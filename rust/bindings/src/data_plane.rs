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
//! objects as the caller reaches it; `submit` builds every Rust command first
//! (`data_plane_commands`: a malformed one raises before any is handed over, so a batch
//! goes whole or not at all), then hands them over. Neither blocks: the locks they take are the
//! I/O threads' short ones, and both keep the GIL (the I/O threads never want it, and
//! releasing it would let another Python thread take it and the loop wait to have it back).

use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
use std::sync::atomic::AtomicU8;
use std::sync::Mutex;

use dataplane::{
    ClientAuth, CloseCause, Config, Conn, Event, Lease, ListenerId, ListenerSpec, TlsSpec,
};
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use crate::data_plane_commands::{
    add_command, seconds, Batch, ACCEPT_CONNECT, CLOSE, PAUSE_READING, READ_REST, RESUME_READING,
    SEND, SEND_BYTES, SEND_HEAD, SEND_MESSAGE, SEND_RECEIPT, SET_HEARTBEAT,
};
use crate::stomp_objects::{limits_of, statics, Statics};

/// `artemis_py._native.DataPlaneConn`: one connection's handle, from its `OPENED` event.
#[pyclass(name = "DataPlaneConn", module = "artemis_py._native", frozen)]
pub struct PyConn {
    pub(crate) conn: Conn,
    /// The version its `ACCEPT_CONNECT` gave (0: none yet), so that `submit` can encode
    /// its MESSAGE and RECEIPT frames itself (see `data_plane_commands::encode_into`).
    pub(crate) version: AtomicU8,
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

fn plane_error(error: &dataplane::Error) -> PyErr {
    match error {
        dataplane::Error::Listen { source, .. } | dataplane::Error::Setup { source, .. } => {
            PyOSError::new_err((source.raw_os_error(), error.to_string()))
        }
        dataplane::Error::Tls(_) | dataplane::Error::NoListener(_) => {
            PyValueError::new_err(error.to_string())
        }
        dataplane::Error::Stopped => PyRuntimeError::new_err(error.to_string()),
    }
}

fn address(py: Python<'_>, addr: SocketAddr) -> PyResult<Bound<'_, PyTuple>> {
    (addr.ip().to_string(), addr.port()).into_pyobject(py)
}

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

/// Why a connection closed, as `(cause, detail)`: the cause a short str, the detail the
/// error's or panic's text (None for the others).
fn cause_of(cause: CloseCause) -> (&'static str, Option<String>) {
    match cause {
        CloseCause::Reset(text) => ("reset", Some(text)),
        CloseCause::HandshakeTimeout => ("handshake-timeout", None),
        CloseCause::Requested => ("requested", None),
        CloseCause::FlushTimeout => ("flush-timeout", None),
        CloseCause::Tls(text) => ("tls", Some(text)),
        CloseCause::Panic(text) => ("panic", Some(text)),
        CloseCause::Shutdown => ("shutdown", None),
    }
}

/// A handed-off stream as a `socket.socket`, which owns the descriptor from then on (if
/// making it fails, the descriptor is closed here).
fn socket_of(py: Python<'_>, stream: impl Into<OwnedFd>) -> PyResult<Bound<'_, PyAny>> {
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

/// A TLS listener's settings from Python: `(cert_chain, key, client_auth, trust_anchors,
/// protocols, cipher_suites)`: the chain's and the anchors' certificates and the PKCS8 key
/// as DER bytes, `client_auth` one of `"none"`, `"want"`, `"need"`, the protocols' Java
/// names, the suites' IANA names.
type TlsArgs = (
    Vec<Vec<u8>>,
    Vec<u8>,
    String,
    Vec<Vec<u8>>,
    Vec<String>,
    Vec<String>,
);

fn tls_spec(args: TlsArgs) -> PyResult<TlsSpec> {
    let (cert_chain, key, client_auth, trust_anchors, protocols, cipher_suites) = args;
    let client_auth = match client_auth.as_str() {
        "none" => ClientAuth::None,
        "want" => ClientAuth::Want,
        "need" => ClientAuth::Need,
        other => {
            return Err(PyValueError::new_err(format!(
                "client_auth must be 'none', 'want' or 'need', not {other:?}"
            )))
        }
    };
    Ok(TlsSpec {
        cert_chain,
        key,
        client_auth,
        trust_anchors,
        protocols,
        cipher_suites,
    })
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
        // Python serves it as a handed-off connection; the plane keeps its place in
        // connectionsAllowed itself (the lease holds none).
        Event::Relayed {
            conn,
            stream,
            initial,
        } => {
            let lease = PyLease {
                lease: Mutex::new(None),
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
    const SEND_MESSAGE: u8 = SEND_MESSAGE;
    #[classattr]
    const SEND_RECEIPT: u8 = SEND_RECEIPT;
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
        handoff_prefixes = Vec::new(), tls = None,
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
        tls: Option<TlsArgs>,
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
            tls: tls.map(tls_spec).transpose()?,
            ..ListenerSpec::new(addr)
        };
        let listening = py
            .detach(|| self.plane.listen(spec))
            .map_err(|e| plane_error(&e))?;
        Ok((listening.id.0, address(py, listening.local_addr)?))
    }

    /// Replaces a TLS listener's key material and settings (`tls` as `listen` takes it):
    /// new connections use them, open ones keep theirs. `ValueError` if they cannot be served.
    fn set_tls(&self, py: Python<'_>, listener_id: u32, tls: TlsArgs) -> PyResult<()> {
        let spec = tls_spec(tls)?;
        py.detach(|| self.plane.set_tls(ListenerId(listener_id), &spec))
            .map_err(|e| plane_error(&e))
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
