//! The Python objects of the STOMP codec's binding: the package's classes, members and
//! exceptions (looked up once per process), a Rust frame made into the package's `Frame`,
//! and a Python `Frame` taken apart for encoding.
//!
//! A frame crosses the boundary as one `Frame` built without running its Python
//! `__init__`: the instance is allocated by `object.__new__` and its three slots are set
//! through the generic attribute setter (what `object.__setattr__` does), which costs less
//! than calling the class (`bench/codec.py` measures the options; [`FRAME_MODE`]).

use std::sync::atomic::{AtomicU8, Ordering};

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple, PyType};
use pyo3::{ffi, intern};
use stomp::{Command, Error, ErrorKind, Event, FrameLimits, Outgoing, Role, State};

/// The package's Python objects the codec hands out, looked up once.
pub(crate) struct Statics {
    pub(crate) frame_type: Py<PyType>,
    pub(crate) object_new: Py<PyAny>,
    pub(crate) commands: Vec<Py<PyAny>>,
    pub(crate) heartbeat: Py<PyAny>,
    pub(crate) closed: Py<PyAny>,
    pub(crate) need_data: Py<PyAny>,
    pub(crate) paused: Py<PyAny>,
    pub(crate) client: Py<PyAny>,
    pub(crate) server: Py<PyAny>,
    pub(crate) states: [Py<PyAny>; 4],
    pub(crate) local_error: Py<PyAny>,
    pub(crate) remote_error: Py<PyAny>,
    pub(crate) limits_type: Py<PyAny>,
    pub(crate) heartbeat_bytes: Py<PyBytes>,
}

static STATICS: PyOnceLock<Statics> = PyOnceLock::new();

/// How a frame crosses the boundary: 0 (the default) a `Frame` with its slots set directly,
/// 1 a call of the `Frame` class, 2 a `(command, headers, body)` tuple. Only
/// `bench/codec.py` changes it, to measure the three.
pub(crate) static FRAME_MODE: AtomicU8 = AtomicU8::new(0);

pub(crate) fn statics(py: Python<'_>) -> PyResult<&Statics> {
    STATICS.get_or_try_init(py, || {
        let frames = py.import("artemis_py.protocol.stomp.frames")?;
        let roles = py.import("artemis_py.protocol.stomp.roles")?;
        let errors = py.import("artemis_py.protocol.errors")?;
        let limits = py.import("artemis_py.protocol.stomp.limits")?;
        let command = frames.getattr("Command")?;
        let state = roles.getattr("ConnectionState")?;
        let role = roles.getattr("Role")?;
        let commands = Command::ALL
            .iter()
            .map(|c| command.getattr(c.as_str()).map(Bound::unbind))
            .collect::<PyResult<Vec<_>>>()?;
        let state_of = |s: State| state.getattr(s.as_str()).map(Bound::unbind);
        Ok::<_, PyErr>(Statics {
            frame_type: frames.getattr("Frame")?.cast_into::<PyType>()?.unbind(),
            object_new: py
                .import("builtins")?
                .getattr("object")?
                .getattr("__new__")?
                .unbind(),
            commands,
            heartbeat: frames.getattr("Heartbeat")?.call0()?.unbind(),
            closed: frames.getattr("ConnectionClosed")?.call0()?.unbind(),
            need_data: frames.getattr("NEED_DATA")?.unbind(),
            paused: frames.getattr("PAUSED")?.unbind(),
            client: role.getattr("CLIENT")?.unbind(),
            server: role.getattr("SERVER")?.unbind(),
            states: [
                state_of(State::Connecting)?,
                state_of(State::Connected)?,
                state_of(State::Closed)?,
                state_of(State::Error)?,
            ],
            local_error: errors.getattr("LocalProtocolError")?.unbind(),
            remote_error: errors.getattr("RemoteProtocolError")?.unbind(),
            limits_type: limits.getattr("FrameLimits")?.unbind(),
            heartbeat_bytes: PyBytes::new(py, b"\n").unbind(),
        })
    })
}

impl Statics {
    pub(crate) fn state(&self, py: Python<'_>, state: State) -> Py<PyAny> {
        let index = match state {
            State::Connecting => 0,
            State::Connected => 1,
            State::Closed => 2,
            State::Error => 3,
        };
        self.states[index].clone_ref(py)
    }

    pub(crate) fn role(&self, py: Python<'_>, role: Role) -> Py<PyAny> {
        match role {
            Role::Client => self.client.clone_ref(py),
            Role::Server => self.server.clone_ref(py),
        }
    }

    /// The Python exception of a codec error.
    pub(crate) fn error(&self, py: Python<'_>, error: &Error) -> PyErr {
        let class = match error.kind {
            ErrorKind::Local => &self.local_error,
            ErrorKind::Remote => &self.remote_error,
        };
        let build = || -> PyResult<PyErr> {
            let kwargs = PyDict::new(py);
            if !error.error_headers.is_empty() {
                kwargs.set_item(intern!(py, "error_headers"), error.error_headers.clone())?;
            }
            Ok(PyErr::from_value(
                class
                    .bind(py)
                    .call((error.message.as_str(),), Some(&kwargs))?,
            ))
        };
        build().unwrap_or_else(|e| e)
    }

    /// A `Frame` made without running its `__init__` (see the module doc).
    pub(crate) fn frame<'py>(
        &self,
        py: Python<'py>,
        frame: stomp::Frame,
    ) -> PyResult<Bound<'py, PyAny>> {
        let command = self.commands[frame.command as usize].bind(py);
        let headers = Self::headers(py, &frame.headers)?;
        let body = PyBytes::new(py, &frame.body);
        match FRAME_MODE.load(Ordering::Relaxed) {
            0 => {}
            1 => return self.frame_type.bind(py).call1((command, headers, body)),
            _ => {
                return Ok(
                    PyTuple::new(py, [command.as_any(), headers.as_any(), body.as_any()])?
                        .into_any(),
                )
            }
        }
        let instance = self
            .object_new
            .bind(py)
            .call1((self.frame_type.bind(py),))?;
        set_slot(&instance, intern!(py, "command"), command.as_any())?;
        set_slot(&instance, intern!(py, "headers"), headers.as_any())?;
        set_slot(&instance, intern!(py, "body"), body.as_any())?;
        Ok(instance)
    }

    pub(crate) fn headers<'py>(
        py: Python<'py>,
        headers: &[(String, String)],
    ) -> PyResult<Bound<'py, PyTuple>> {
        let pairs = headers
            .iter()
            .map(|(name, value)| PyTuple::new(py, [common_text(py, name), common_text(py, value)]))
            .collect::<PyResult<Vec<_>>>()?;
        PyTuple::new(py, pairs)
    }

    pub(crate) fn event<'py>(&self, py: Python<'py>, event: Event) -> PyResult<Bound<'py, PyAny>> {
        Ok(match event {
            Event::Frame(frame) => return self.frame(py, frame),
            Event::Heartbeat => self.heartbeat.bind(py).clone(),
            Event::ConnectionClosed => self.closed.bind(py).clone(),
            Event::NeedData => self.need_data.bind(py).clone(),
            Event::Paused => self.paused.bind(py).clone(),
        })
    }
}

/// Header text as a Python str: the names STOMP defines (and a few values that come on
/// every frame) as one interned str each, already hashed for the lookups the session makes;
/// any other text as a new str.
fn common_text<'py>(py: Python<'py>, text: &str) -> Bound<'py, PyString> {
    macro_rules! interned {
        ($($known:literal),* $(,)?) => {
            match text {
                $($known => intern!(py, $known).clone(),)*
                _ => PyString::new(py, text),
            }
        };
    }
    interned!(
        "destination",
        "destination-type",
        "subscription-type",
        "receipt",
        "content-length",
        "content-type",
        "persistent",
        "priority",
        "expires",
        "transaction",
        "id",
        "ack",
        "subscription",
        "selector",
        "message-id",
        "accept-version",
        "host",
        "login",
        "passcode",
        "heart-beat",
        "true",
        "false",
        "ANYCAST",
        "MULTICAST",
        "auto",
        "client",
        "client-individual",
    )
}

/// `object.__setattr__(instance, name, value)`: sets a slot of a frozen dataclass.
fn set_slot(
    instance: &Bound<'_, PyAny>,
    name: &Bound<'_, PyString>,
    value: &Bound<'_, PyAny>,
) -> PyResult<()> {
    // SAFETY: the three pointers are live, owned references held by the Bound arguments for
    // the whole call (the GIL is held: a Bound proves it). PyObject_GenericSetAttr only reads
    // them and stores a new reference to `value` in the slot; it returns -1 with an
    // exception set on failure, which PyErr::fetch takes.
    let status =
        unsafe { ffi::PyObject_GenericSetAttr(instance.as_ptr(), name.as_ptr(), value.as_ptr()) };
    if status == 0 {
        Ok(())
    } else {
        Err(PyErr::fetch(instance.py()))
    }
}

/// Header text from Python: the str's UTF-8, or (for a str holding lone surrogates, which
/// UTF-8 cannot carry) a lossy copy that makes the frame fail as unencodable.
pub(crate) enum Text {
    Str(PyBackedStr),
    Lossy(String),
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        match self {
            Text::Str(text) => text,
            Text::Lossy(text) => text,
        }
    }
}

pub(crate) fn text(item: &Bound<'_, PyAny>, unencodable: &mut bool) -> PyResult<Text> {
    match item.extract::<PyBackedStr>() {
        Ok(text) => Ok(Text::Str(text)),
        Err(error) => {
            let Ok(string) = item.cast::<PyString>() else {
                return Err(error);
            };
            *unencodable = true;
            Ok(Text::Lossy(string.to_string_lossy().into_owned()))
        }
    }
}

/// A Python `Frame`'s parts, borrowed for encoding.
pub(crate) struct FrameParts<'py> {
    /// The command, or the text that names no STOMP command.
    pub(crate) command: Result<Command, String>,
    pub(crate) headers: Vec<(Text, Text)>,
    pub(crate) body: Option<Bound<'py, PyBytes>>,
    pub(crate) unencodable: bool,
}

impl<'py> FrameParts<'py> {
    /// The command first: a frame whose command is unknown is refused before its headers
    /// are looked at.
    pub(crate) fn of(py: Python<'py>, frame: &Bound<'py, PyAny>) -> PyResult<Self> {
        let mut unencodable = false;
        let command_text = text(&frame.getattr(intern!(py, "command"))?, &mut unencodable)?;
        let Some(command) = Command::parse(command_text.as_ref().as_bytes()) else {
            let command = Err(command_text.as_ref().to_owned());
            return Ok(Self {
                command,
                headers: Vec::new(),
                body: None,
                unencodable,
            });
        };
        let headers_obj = frame.getattr(intern!(py, "headers"))?;
        let headers_tuple = headers_obj
            .cast::<PyTuple>()
            .map_err(|_| PyTypeError::new_err("Frame.headers must be a tuple"))?;
        let mut headers = Vec::with_capacity(headers_tuple.len());
        for pair in headers_tuple.iter() {
            let (name, value) = (pair.get_item(0)?, pair.get_item(1)?);
            headers.push((
                text(&name, &mut unencodable)?,
                text(&value, &mut unencodable)?,
            ));
        }
        let body = frame
            .getattr(intern!(py, "body"))?
            .cast_into::<PyBytes>()
            .map_err(|_| PyTypeError::new_err("Frame.body must be bytes"))?;
        Ok(Self {
            command: Ok(command),
            headers,
            body: Some(body),
            unencodable,
        })
    }

    pub(crate) fn outgoing(
        &self,
        command: Command,
        body_length: Option<i64>,
    ) -> Outgoing<'_, Text, Text> {
        Outgoing {
            command,
            headers: &self.headers,
            body: self.body.as_ref().map_or(&[], |body| body.as_bytes()),
            body_length,
            unencodable: self.unencodable,
        }
    }
}

pub(crate) fn limits_of(limits: &Bound<'_, PyAny>) -> PyResult<FrameLimits> {
    let get = |name: &str| limits.getattr(name)?.extract::<usize>();
    Ok(FrameLimits {
        max_command_length: get("max_command_length")?,
        max_header_line_length: get("max_header_line_length")?,
        max_header_count: get("max_header_count")?,
        max_header_bytes: get("max_header_bytes")?,
        max_body_size: get("max_body_size")?,
    })
}
