//! `StompConnection`: the `stomp` crate's sans-IO connection, as
//! `artemis_py.protocol.stomp.Connection`.
//!
//! The events are the package's own Python objects (`Frame`, `Heartbeat`, `ConnectionClosed`,
//! the `NEED_DATA`/`PAUSED` sentinels, the `Command`, `Role` and `ConnectionState` members),
//! and the errors its `LocalProtocolError`/`RemoteProtocolError`, so callers cannot tell
//! this codec from the Python one it replaced. They are looked up once per process.
//! `stomp_objects` makes them.
//!
//! A panic inside the codec must not take the node down: every call into the crate is
//! wrapped in `catch_unwind`, and a panic becomes the protocol error of that one connection
//! (remote when receiving, local when sending), after which the connection refuses to be
//! used further.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use stomp::{Connection, Error, ErrorKind, Event, Role};

use crate::stomp_objects::{limits_of, statics, FrameParts};

/// One end of a STOMP connection, without I/O (`artemis_py.protocol.stomp.Connection`).
#[pyclass(name = "StompConnection", module = "artemis_py._native")]
pub struct PyStompConnection {
    inner: Connection,
    limits: Py<PyAny>,
    /// A panic inside the codec broke this connection: the message of the error it became.
    broken: Option<String>,
    /// `next_events()`: an error that came after events, raised by the next call.
    pending: Option<Error>,
    out: Vec<u8>,
}

impl PyStompConnection {
    /// Runs `f` on the codec; a panic becomes an error of `kind` (remote on the receiving
    /// side, which callers handle as the peer's failure) and breaks the connection.
    fn guarded<T>(
        &mut self,
        kind: ErrorKind,
        f: impl FnOnce(&mut Connection) -> Result<T, Error>,
    ) -> Result<T, Error> {
        if let Some(message) = &self.broken {
            return Err(Error {
                kind,
                message: message.clone(),
                error_headers: Vec::new(),
            });
        }
        match catch_unwind(AssertUnwindSafe(|| f(&mut self.inner))) {
            Ok(result) => result,
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(ToString::to_string)
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                let message = format!("internal error in the STOMP codec: {what}");
                self.broken = Some(message.clone());
                Err(Error {
                    kind,
                    message,
                    error_headers: Vec::new(),
                })
            }
        }
    }

    fn send_frame<'py>(
        &mut self,
        py: Python<'py>,
        frame: &Bound<'py, PyAny>,
        body_length: Option<i64>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let statics = statics(py)?;
        let parts = FrameParts::of(py, frame)?;
        let command = match parts.command {
            Ok(command) => command,
            Err(text) => {
                let (Ok(error) | Err(error)) =
                    self.guarded(ErrorKind::Local, |conn| Ok(conn.refuse_command(&text)));
                return Err(statics.error(py, &error));
            }
        };
        let outgoing = parts.outgoing(command, body_length);
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        let result = self.guarded(ErrorKind::Local, |conn| conn.send(&mut out, &outgoing));
        let data = result.map(|()| PyBytes::new(py, &out));
        self.out = out;
        data.map_err(|error| statics.error(py, &error))
    }
}

#[pymethods]
impl PyStompConnection {
    #[new]
    #[pyo3(signature = (our_role, limits = None))]
    fn new(
        py: Python<'_>,
        our_role: &Bound<'_, PyAny>,
        limits: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let statics = statics(py)?;
        let role = if our_role.is(statics.server.bind(py)) {
            Role::Server
        } else if our_role.is(statics.client.bind(py)) {
            Role::Client
        } else {
            return Err(PyTypeError::new_err(format!(
                "our_role must be a Role, not {our_role:?}"
            )));
        };
        let limits = match limits {
            Some(limits) => limits.clone(),
            None => statics.limits_type.bind(py).call0()?,
        };
        Ok(Self {
            inner: Connection::new(role, limits_of(&limits)?),
            limits: limits.unbind(),
            broken: None,
            pending: None,
            out: Vec::new(),
        })
    }

    /// The negotiated STOMP version ("1.0", "1.1", "1.2"), None until negotiated.
    #[getter]
    fn version(&self) -> Option<&'static str> {
        self.inner.version().map(stomp::Version::as_str)
    }

    /// State of what we send.
    #[getter]
    fn our_state(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(statics(py)?.state(py, self.inner.our_state()))
    }

    /// State of what the peer sends.
    #[getter]
    fn their_state(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(statics(py)?.state(py, self.inner.their_state()))
    }

    #[getter]
    fn our_role(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(statics(py)?.role(py, self.inner.our_role()))
    }

    #[getter]
    fn their_role(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(statics(py)?.role(py, self.inner.our_role().peer()))
    }

    #[getter]
    fn limits(&self, py: Python<'_>) -> Py<PyAny> {
        self.limits.clone_ref(py)
    }

    fn __repr__(&self) -> String {
        format!(
            "<stomp.Connection {} version={} our_state={} their_state={}>",
            self.inner.our_role().as_str(),
            self.inner.version().map_or("None", stomp::Version::as_str),
            self.inner.our_state().as_str(),
            self.inner.their_state().as_str(),
        )
    }

    /// Feed bytes from the peer; ``b""`` means the peer closed its side.
    fn receive_data(&mut self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let result = if let Ok(bytes) = data.cast::<PyBytes>() {
            let bytes = bytes.as_bytes();
            self.guarded(ErrorKind::Remote, |conn| conn.receive_data(bytes))
        } else {
            let copy = py
                .import(intern!(py, "builtins"))?
                .getattr(intern!(py, "bytes"))?
                .call1((data,))?;
            let bytes = copy.cast::<PyBytes>()?.as_bytes();
            self.guarded(ErrorKind::Remote, |conn| conn.receive_data(bytes))
        };
        result.map_err(|error| statics(py).map_or_else(|e| e, |s| s.error(py, &error)))
    }

    /// The next event: a ``Frame``, ``Heartbeat``, ``ConnectionClosed``, or ``NEED_DATA`` /
    /// ``PAUSED``. Raises ``RemoteProtocolError``.
    fn next_event<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let statics = statics(py)?;
        if let Some(error) = self.pending.take() {
            return Err(statics.error(py, &error));
        }
        match self.guarded(ErrorKind::Remote, Connection::next_event) {
            Ok(event) => statics.event(py, event),
            Err(error) => Err(statics.error(py, &error)),
        }
    }

    /// Every complete event at once, in order, as a list: up to ``NEED_DATA`` or ``PAUSED``
    /// (not included; ``next_event()`` then says which) or up to and including
    /// ``ConnectionClosed``. An error after some events is raised by the next call (the
    /// events before it are returned first; ``their_state`` is already ``ERROR``).
    fn next_events<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let statics = statics(py)?;
        if let Some(error) = self.pending.take() {
            return Err(statics.error(py, &error));
        }
        // Each event crosses as soon as it is decoded (no Vec of frames in between).
        let list = PyList::empty(py);
        loop {
            match self.guarded(ErrorKind::Remote, Connection::next_event) {
                Ok(Event::NeedData | Event::Paused) => break,
                Ok(Event::ConnectionClosed) => {
                    list.append(statics.closed.bind(py))?;
                    break;
                }
                Ok(event) => list.append(statics.event(py, event)?)?,
                Err(error) if list.is_empty() => return Err(statics.error(py, &error)),
                Err(error) => {
                    self.pending = Some(error);
                    break;
                }
            }
        }
        Ok(list)
    }

    /// Server side: fix the version after a CONNECT. Ends ``PAUSED``.
    fn accept_connect(&mut self, py: Python<'_>, version: &str) -> PyResult<()> {
        self.guarded(ErrorKind::Local, |conn| conn.accept_connect(version))
            .map_err(|error| statics(py).map_or_else(|e| e, |s| s.error(py, &error)))
    }

    /// The bytes to write for ``frame``. Raises ``LocalProtocolError``.
    ///
    /// ``body_length``: the caller sends the body (that long) and the closing NUL itself
    /// after the returned bytes (a MESSAGE whose body is streamed from a file).
    #[pyo3(signature = (frame, body_length = None))]
    fn send<'py>(
        &mut self,
        py: Python<'py>,
        frame: &Bound<'py, PyAny>,
        body_length: Option<i64>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.send_frame(py, frame, body_length)
    }

    /// The bytes of one heart-beat (an EOL), once connected with STOMP 1.1 or 1.2.
    fn send_heartbeat<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let statics = statics(py)?;
        match self.guarded(ErrorKind::Local, |conn| conn.send_heartbeat().map(|_| ())) {
            Ok(()) => Ok(statics.heartbeat_bytes.bind(py).clone()),
            Err(error) => Err(statics.error(py, &error)),
        }
    }
}
