//! The byte stream under a connection, behind one small enum so that TLS slots in.
//!
//! Today a connection is plain TCP. The next step adds rustls as a second variant: a
//! `rustls::ServerConnection` beside the `TcpStream`, whose `read` decrypts what the
//! socket holds (and may need to write handshake records first) and whose `write` encrypts
//! into its buffer before flushing to the socket. The connection above only calls `read`,
//! `write`, `has_pending`, `shutdown_write` (TLS: a `close_notify` first) and `shutdown`,
//! and registers the socket with the poll, so nothing else changes when TLS arrives (a
//! TLS handshake failure will be one more [`crate::CloseCause`]). A hand-off gives the
//! plain socket to Python; a TLS listener's hand-off is a question for that step (the
//! TLS session cannot move to Python's `ssl`).

use std::io::{self, Read, Write};
use std::net::Shutdown;

use mio::net::TcpStream;

/// A connection's byte stream.
#[derive(Debug)]
pub(crate) enum Transport {
    Plain(TcpStream),
}

impl Transport {
    pub(crate) fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(stream) => stream.read(buf),
        }
    }

    pub(crate) fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(stream) => stream.write(buf),
        }
    }

    /// Bytes the transport itself still holds to write (TLS records); plain TCP none.
    pub(crate) fn has_pending(&self) -> bool {
        match self {
            Transport::Plain(_) => false,
        }
    }

    /// Ends our side (a FIN after the bytes written); reading goes on.
    pub(crate) fn shutdown_write(&mut self) {
        match self {
            Transport::Plain(stream) => {
                let _ = stream.shutdown(Shutdown::Write);
            }
        }
    }

    pub(crate) fn shutdown(&mut self) {
        match self {
            // ENOTCONN when the peer is gone already: nothing to do.
            Transport::Plain(stream) => {
                let _ = stream.shutdown(Shutdown::Both);
            }
        }
    }

    /// The socket's pending error (`SO_ERROR`), after the poll reported one.
    pub(crate) fn take_error(&mut self) -> Option<io::Error> {
        match self {
            Transport::Plain(stream) => stream.take_error().unwrap_or_else(Some),
        }
    }

    /// The socket, for the poll's registry.
    pub(crate) fn source(&mut self) -> &mut TcpStream {
        match self {
            Transport::Plain(stream) => stream,
        }
    }
}
