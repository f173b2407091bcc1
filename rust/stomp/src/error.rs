//! The codec's one error type: who broke the protocol, and the message (h11's split).

/// Who broke the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// We misused the codec: sent a frame the protocol forbids here, a header the version
    /// cannot carry. A bug in the caller (Python's `LocalProtocolError`).
    Local,
    /// The peer broke the protocol: a malformed frame, a limit exceeded, a frame out of
    /// order. Answer with an ERROR frame and close (Python's `RemoteProtocolError`).
    Remote,
}

/// A broken protocol rule. `message` is one printable line (peer data in it is quoted by
/// [`crate::show`]), fit for an ERROR frame's `message` header; `error_headers` are the
/// headers such a frame should carry besides.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    pub error_headers: Vec<(String, String)>,
}

impl Error {
    pub(crate) fn remote(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Remote,
            message: message.into(),
            error_headers: Vec::new(),
        }
    }

    pub(crate) fn local(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Local,
            message: message.into(),
            error_headers: Vec::new(),
        }
    }
}

/// The crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
