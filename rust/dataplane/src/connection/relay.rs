//! A TLS connection handed to Python: its plaintext relayed through a socket pair.
//!
//! A plain connection whose first bytes are a WebSocket upgrade's or a cluster link's is
//! given to Python as its socket. A TLS session cannot be: its keys and sequence numbers
//! live in rustls, and Python's `ssl` cannot take them over. So the connection stays on
//! its I/O thread and Python gets one end of a Unix socket pair, with the plaintext read
//! so far; the thread pumps plaintext both ways between the pair's other end and the TLS
//! session. For Python that end is a socket like a handed-off one (the WebSocket and link
//! code read and write it as they would a TCP socket).
//!
//! Invariants: at most [`RELAY_LIMIT`] bytes of the client's plaintext wait for Python's
//! end (then the TLS socket is not read: TCP's window stops the client), and Python's
//! bytes are read only while the connection's outgoing buffer is below its high-water
//! mark (then they wait in the pair until the client took what was sent). The client's
//! end of stream shuts the pair's writing side; Python closing its end closes the TLS
//! session after the bytes (`close_notify`, a lingering close). The connection keeps its
//! place in `connectionsAllowed` until then, and reports [`CloseCause`] as any other.

use std::io::{ErrorKind as IoKind, Read, Write};
use std::net::Shutdown;
use std::sync::atomic::Ordering;

use mio::net::UnixStream;

use super::{Connection, Ctx, Step};
use crate::api::CloseCause;
use crate::timers::Timer;

/// Bytes of the client's plaintext waiting for Python's end at most.
const RELAY_LIMIT: usize = 256 * 1024;

/// The relay's state (see the module doc).
#[derive(Debug)]
pub(crate) struct Relay {
    /// The pair's end this thread reads and writes (registered with the poll).
    pub(crate) end: UnixStream,
    /// The client's plaintext not yet written to `end`.
    to_python: Vec<u8>,
    /// Python closed its end (its writing side, at least).
    python_done: bool,
    /// The client's input ended; `end`'s writing side is shut once `to_python` is empty.
    client_done: bool,
    /// Python's bytes were left unread for want of room in the outgoing buffer.
    held: bool,
}

impl Relay {
    pub(crate) fn new(end: UnixStream) -> Self {
        Self {
            end,
            to_python: Vec::new(),
            python_done: false,
            client_done: false,
            held: false,
        }
    }

    /// Writes what waits for Python's end until it would block.
    fn write_out(&mut self) -> std::io::Result<()> {
        while !self.to_python.is_empty() {
            match self.end.write(&self.to_python) {
                Ok(0) => return Err(IoKind::WriteZero.into()),
                Ok(n) => {
                    self.to_python.drain(..n);
                }
                Err(e) if e.kind() == IoKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == IoKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.client_done {
            let _ = self.end.shutdown(Shutdown::Write);
        }
        Ok(())
    }
}

impl Connection {
    /// The first bytes kept apart while they might start a hand-off prefix (Python's now).
    pub(crate) fn take_sniffed(&mut self) -> Vec<u8> {
        self.sniffed.take().unwrap_or_default()
    }

    /// The connection is Python's from now on: no timers, no STOMP; relay through `end`.
    pub(crate) fn start_relay(&mut self, end: UnixStream) {
        self.armed.clear(Timer::Handshake);
        self.armed.clear(Timer::Heartbeat);
        self.armed.clear(Timer::Ttl);
        self.send_every = None;
        self.expect_within = None;
        self.relay = Some(Box::new(Relay::new(end)));
    }

    /// Moves plaintext both ways until both sides would block, `budget` bytes were read
    /// (the thread comes back on its next pass), or the relay ends.
    pub(super) fn pump(&mut self, ctx: &mut Ctx, mut budget: usize) -> Step {
        let high_water = self.conn.0.high_water;
        let id = self.id();
        let Some(relay) = self.relay.as_mut() else {
            return Ok(());
        };
        let reset = |e: std::io::Error| CloseCause::Reset(e.to_string());
        // Python -> client.
        relay.held = false;
        while !relay.python_done && budget > 0 {
            if self.out.len() - self.written >= high_water {
                relay.held = true; // read on once flushed (`relay_flushed`)
                break;
            }
            let want = budget.min(ctx.scratch.len());
            match relay.end.read(&mut ctx.scratch[..want]) {
                Ok(0) => relay.python_done = true,
                Ok(n) => {
                    budget -= n;
                    self.out.extend_from_slice(&ctx.scratch[..n]);
                    self.conn.0.outgoing.fetch_add(n, Ordering::SeqCst);
                    if !self.queued_write {
                        self.queued_write = true;
                        ctx.dirty.push(id);
                    }
                }
                Err(e) if e.kind() == IoKind::WouldBlock => break,
                Err(e) if e.kind() == IoKind::Interrupted => {}
                Err(e) => return Err(reset(e).into()),
            }
        }
        // Client -> Python (not once Python closed: what the client still sends is dropped
        // by the lingering close below).
        if !relay.python_done {
            relay.write_out().map_err(reset)?;
        }
        while !relay.python_done
            && !relay.client_done
            && relay.to_python.len() < RELAY_LIMIT
            && budget > 0
        {
            let want = budget.min(ctx.scratch.len());
            match self.transport.read(&mut ctx.scratch[..want]) {
                Ok(0) => {
                    relay.client_done = true;
                    self.eof_seen = true;
                }
                Ok(n) => {
                    budget -= n;
                    self.last_read = ctx.now;
                    relay.to_python.extend_from_slice(&ctx.scratch[..n]);
                }
                Err(e) if e.kind() == IoKind::WouldBlock => break,
                Err(e) if e.kind() == IoKind::Interrupted => {}
                Err(e) => return Err(reset(e).into()),
            }
            relay.write_out().map_err(reset)?;
        }
        if relay.python_done && self.closing.is_none() {
            // Python is done: the rest of its bytes, close_notify, a lingering close.
            return self.close(ctx, true, CloseCause::Requested);
        }
        if budget == 0 {
            ctx.again.push(id);
        }
        Ok(())
    }

    /// The outgoing buffer was written: Python's bytes left unread are read now.
    pub(super) fn relay_flushed(&mut self, ctx: &mut Ctx) {
        let high_water = self.conn.0.high_water;
        if let Some(relay) = &self.relay {
            if relay.held && self.out.len() - self.written < high_water {
                ctx.again.push(self.id());
            }
        }
    }

    /// The pair's end, to deregister it.
    pub(crate) fn relay_end(&mut self) -> Option<&mut UnixStream> {
        self.relay.as_mut().map(|relay| &mut relay.end)
    }
}
