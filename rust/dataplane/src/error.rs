//! The crate's one error type: what can fail when starting a plane or adding a listener.
//! Connections never fail the plane: what happens to one is an [`crate::Event`].

use std::net::SocketAddr;

/// Why the plane or one of its listeners could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot set up the data plane ({what}): {source}")]
    Setup {
        what: &'static str,
        source: std::io::Error,
    },
    /// A listener's TLS settings cannot be served (the text names the setting).
    #[error("{0}")]
    Tls(String),
    #[error("no listener {0}")]
    NoListener(u32),
    #[error("the data plane is stopped")]
    Stopped,
}

impl Error {
    pub(crate) fn setup(what: &'static str) -> impl FnOnce(std::io::Error) -> Error {
        move |source| Error::Setup { what, source }
    }
}

/// The crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
