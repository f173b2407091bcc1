//! The byte stream under a connection: plain TCP, or TLS (rustls) over it.
//!
//! The connection above only calls `read`, `write`, `has_pending` / `flush_pending`,
//! `shutdown_write` and `shutdown`, and registers the socket with the poll, whichever the
//! variant. A TLS stream is a `rustls::ServerConnection` beside the `TcpStream`: `read`
//! hands out what rustls decrypted, and when it holds none reads the socket, lets rustls
//! process the records (the handshake's too) and writes what rustls has to say (handshake
//! records, alerts) before trying again; `write` gives plaintext to rustls, which encrypts
//! it into its own buffer, then writes that buffer to the socket. Records rustls could not
//! write yet are `has_pending`: the connection's flush writes them when the socket is
//! writable again, and a close waits for them. `shutdown_write` sends `close_notify`
//! before the FIN.
//!
//! A handshake that fails comes out of `read` as an [`io::Error`] holding a
//! [`TlsFailure`] (the reason in the socket shell's words, `tls::failure_reason`); the
//! stream is then [`TlsStream::failed`]: rustls's alert was written, and what still
//! comes is read raw and dropped (a lingering close, so the peer sees an end of stream,
//! not a reset).
//!
//! A TLS session cannot move to Python's `ssl`: a TLS connection whose first bytes make it
//! Python's (a WebSocket upgrade, a cluster link) stays here and relays its plaintext to
//! Python through a socket pair (`connection::relay`).

use std::io::{self, Read, Write};
use std::net::Shutdown;

use mio::net::TcpStream;
use rustls::ServerConnection;

use crate::tls::failure_reason;

/// Why a TLS handshake failed, in one line (inside the `io::Error` `read` returns).
#[derive(Debug)]
pub(crate) struct TlsFailure(pub(crate) String);

impl std::fmt::Display for TlsFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsFailure {}

impl TlsFailure {
    /// The reason, if `error` is a TLS failure.
    pub(crate) fn of(error: &io::Error) -> Option<String> {
        error
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<TlsFailure>())
            .map(|failure| failure.0.clone())
    }

    fn into_io(reason: String) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, TlsFailure(reason))
    }
}

/// A TLS session over its socket.
pub(crate) struct TlsStream {
    sock: TcpStream,
    tls: ServerConnection,
    /// A TLS record came and was processed: bytes that fail now were TLS (not plain text).
    records_seen: bool,
    /// The handshake failed: the socket is read raw, to drop what comes.
    failed: bool,
}

impl std::fmt::Debug for TlsStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsStream")
            .field("sock", &self.sock)
            .field("handshaking", &self.tls.is_handshaking())
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl TlsStream {
    pub(crate) fn new(sock: TcpStream, tls: ServerConnection) -> Self {
        Self {
            sock,
            tls,
            records_seen: false,
            failed: false,
        }
    }

    /// Writes what rustls holds until it holds nothing or the socket would block.
    fn flush_tls(&mut self) -> io::Result<()> {
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut self.sock) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Like `flush_tls`, but a socket that would block is no error (the records wait).
    fn flush_some(&mut self) -> io::Result<()> {
        match self.flush_tls() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
            other => other,
        }
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.failed {
            return self.sock.read(buf);
        }
        loop {
            match self.tls.reader().read(buf) {
                Ok(n) => return Ok(n), // 0: the peer's close_notify
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The socket ended without close_notify after the handshake: an end of
                // stream all the same (as the socket shell's ssl reads it).
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            let read = self.tls.read_tls(&mut self.sock)?; // WouldBlock: no more for now
            if read == 0 && self.tls.is_handshaking() {
                self.failed = true;
                let reason = "the client closed the connection in the TLS handshake".to_owned();
                return Err(TlsFailure::into_io(reason));
            }
            if let Err(error) = self.tls.process_new_packets() {
                let reason = failure_reason(&error, !self.records_seen);
                self.failed = true;
                let _ = self.flush_tls(); // the alert rustls queued, best effort
                return Err(TlsFailure::into_io(reason));
            }
            self.records_seen = true;
            // Handshake records to answer with (the next ones come with the next read).
            self.flush_some()?;
            if read == 0 {
                return Ok(0);
            }
        }
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // rustls's buffer first: what it holds bounds what it takes (no unbounded growth).
        self.flush_tls()?;
        let n = self.tls.writer().write(buf)?;
        self.flush_some()?;
        if n == 0 && !buf.is_empty() {
            // rustls holds as much plaintext as it takes before the handshake ends: the
            // rest waits (the connection writes again once the handshake is done).
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }
}

/// A connection's byte stream.
#[derive(Debug)]
pub(crate) enum Transport {
    Plain(TcpStream),
    /// Boxed: a plain connection should not pay for the session's size.
    Tls(Box<TlsStream>),
}

impl Transport {
    pub(crate) fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(stream) => stream.read(buf),
            Transport::Tls(tls) => tls.read(buf),
        }
    }

    pub(crate) fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(stream) => stream.write(buf),
            Transport::Tls(tls) => tls.write(buf),
        }
    }

    /// Bytes the transport itself still holds to write (TLS records); plain TCP none.
    pub(crate) fn has_pending(&self) -> bool {
        match self {
            Transport::Plain(_) => false,
            Transport::Tls(tls) => !tls.failed && tls.tls.wants_write(),
        }
    }

    /// Writes what the transport holds (see `has_pending`); `WouldBlock` when the socket
    /// takes no more.
    pub(crate) fn flush_pending(&mut self) -> io::Result<()> {
        match self {
            Transport::Plain(_) => Ok(()),
            Transport::Tls(tls) if tls.failed => Ok(()),
            Transport::Tls(tls) => tls.flush_tls(),
        }
    }

    /// Still in the TLS handshake (plain TCP: never).
    pub(crate) fn handshaking(&self) -> bool {
        match self {
            Transport::Plain(_) => false,
            Transport::Tls(tls) => !tls.failed && tls.tls.is_handshaking(),
        }
    }

    /// Whether this is a TLS stream.
    pub(crate) fn is_tls(&self) -> bool {
        matches!(self, Transport::Tls(_))
    }

    /// Ends our side (TLS: `close_notify` first, unless the handshake failed; then a FIN
    /// after the bytes written); reading goes on.
    pub(crate) fn shutdown_write(&mut self) {
        match self {
            Transport::Plain(stream) => {
                let _ = stream.shutdown(Shutdown::Write);
            }
            Transport::Tls(tls) => {
                if !tls.failed {
                    tls.tls.send_close_notify();
                    // A few bytes, after everything else was written: the socket takes
                    // them (if it does not, the FIN goes without them).
                    let _ = tls.flush_tls();
                }
                let _ = tls.sock.shutdown(Shutdown::Write);
            }
        }
    }

    /// Marks a TLS stream failed (what comes is read raw and dropped, no `close_notify`).
    pub(crate) fn fail(&mut self) {
        if let Transport::Tls(tls) = self {
            tls.failed = true;
        }
    }

    /// Closes both ways at once (TLS: a `close_notify` first, best effort).
    pub(crate) fn shutdown(&mut self) {
        if let Transport::Tls(tls) = self {
            if !tls.failed {
                tls.tls.send_close_notify();
                let _ = tls.flush_tls();
            }
        }
        // ENOTCONN when the peer is gone already: nothing to do.
        let _ = self.source().shutdown(Shutdown::Both);
    }

    /// The socket's pending error (`SO_ERROR`), after the poll reported one.
    pub(crate) fn take_error(&mut self) -> Option<io::Error> {
        self.source().take_error().unwrap_or_else(Some)
    }

    /// The socket, for the poll's registry.
    pub(crate) fn source(&mut self) -> &mut TcpStream {
        match self {
            Transport::Plain(stream) => stream,
            Transport::Tls(tls) => &mut tls.sock,
        }
    }
}
