//! A TLS connection's handshake seen from the connection: its end (the CONNECT's
//! `handshake-timeout` starts again) and its failure (a lingering close with the reason).

use std::sync::atomic::Ordering;

use super::{Connection, Ctx, Step};
use crate::api::{CloseCause, Event};
use crate::timers::Timer;
use crate::transport::TlsFailure;

impl Connection {
    /// The TLS handshake is done: `handshake-timeout` starts again for the CONNECT (the
    /// socket shell gives the handshake and the CONNECT that long each), and what was sent
    /// during the handshake that rustls did not take yet is written now.
    pub(super) fn tls_established(&mut self, ctx: &mut Ctx) {
        if self.written < self.out.len() {
            self.queue(ctx);
        }
        if let Some(timeout) = self.slot.0.handshake_timeout {
            if !self.connect_seen {
                let (at, id) = (ctx.now + timeout, self.id());
                ctx.timers.arm(&mut self.armed, id, Timer::Handshake, at);
            }
        }
    }

    /// A read failed: a TLS handshake that failed closes lingering with its reason (the
    /// peer may have sent more: closing on it unread would reset), anything else at once.
    pub(super) fn read_failed(&mut self, ctx: &mut Ctx, error: &std::io::Error) -> Step {
        match TlsFailure::of(error) {
            Some(reason) => self.tls_failed(ctx, reason),
            None => Err(CloseCause::Reset(error.to_string()).into()),
        }
    }

    /// Closes a TLS connection whose handshake failed (or did not end in time): what rustls
    /// had to say (an alert) was written, nothing else will be; what still comes is
    /// dropped until the peer closes or the linger is over.
    ///
    /// The failure is reported now, as [`Event::Closed`]: the connection was never a
    /// client, and the socket shell logs a refused handshake at once, not when a client
    /// that keeps its socket open is finally cut off `close_linger` later. The lingering
    /// close goes on in silence (`close_reported`); the socket keeps its place in
    /// `connectionsAllowed` until it is really closed.
    pub(crate) fn tls_failed(&mut self, ctx: &mut Ctx, reason: String) -> Step {
        let id = self.id();
        ctx.events.push(Event::Closed {
            conn: id,
            cause: CloseCause::Tls(reason.clone()),
        });
        self.close_reported = true;
        // No CONNECT deadline (its ERROR frame), heart-beat or TTL for a connection gone.
        for timer in [Timer::Handshake, Timer::Heartbeat, Timer::Ttl] {
            self.armed.clear(timer);
        }
        self.transport.fail();
        let unwritten = self.out.len() - self.written;
        self.conn.0.outgoing.fetch_sub(unwritten, Ordering::SeqCst);
        self.written = 0;
        self.out = Vec::new();
        self.close(ctx, true, CloseCause::Tls(reason))
    }
}
