//! A connection's clock: its heart-beats, its TTL, its handshake deadline and the linger
//! of a flushing close (each a deadline on the thread's heap, see `timers`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use stomp::{Command as Verb, Outgoing};

use super::{Connection, Ctx, Step};
use crate::api::{CloseCause, Event};
use crate::timers::Timer;

impl Connection {
    pub(super) fn set_heartbeat(
        &mut self,
        ctx: &mut Ctx,
        send_every: Option<Duration>,
        expect_within: Option<Duration>,
    ) {
        let id = self.id();
        self.send_every = send_every.filter(|d| !d.is_zero());
        self.expect_within = expect_within.filter(|d| !d.is_zero());
        self.ttl_reported = false;
        if let Some(every) = self.send_every {
            let at = self.last_write + every;
            ctx.timers.arm(&mut self.armed, id, Timer::Heartbeat, at);
        }
        if let Some(within) = self.expect_within {
            let at = self.last_read + within;
            ctx.timers.arm(&mut self.armed, id, Timer::Ttl, at);
        }
    }

    // --- time ----------------------------------------------------------------------------

    /// A deadline of this connection came (`armed` cleared for it already).
    pub(crate) fn timer(&mut self, ctx: &mut Ctx, timer: Timer) -> Step {
        let id = self.id();
        let now = ctx.now;
        match timer {
            Timer::Handshake => {
                if self.transport.handshaking() {
                    let reason = "no TLS handshake within the acceptor's handshake-timeout";
                    return self.tls_failed(ctx, reason.to_owned());
                }
                if !self.connect_seen {
                    self.handshake_expired(ctx);
                    return self.close(ctx, true, CloseCause::HandshakeTimeout);
                }
            }
            Timer::Heartbeat => {
                let Some(every) = self.send_every else {
                    return Ok(());
                };
                let due = self.last_write + every;
                let mut next = due;
                if now >= due {
                    if self.out.is_empty() && self.closing.is_none() {
                        if let Ok(eol) = self.codec.send_heartbeat() {
                            self.out.extend_from_slice(eol);
                            self.conn.0.outgoing.fetch_add(eol.len(), Ordering::SeqCst);
                            self.queue(ctx);
                        }
                    }
                    next = now + every;
                }
                ctx.timers.arm(&mut self.armed, id, Timer::Heartbeat, next);
            }
            Timer::Ttl => {
                let Some(within) = self.expect_within else {
                    return Ok(());
                };
                if self.input_done {
                    // Nothing more will be read: the connection is ending anyway.
                } else if !self.reading() {
                    // Paused (by Python, by the codec, or held back while Python is busy):
                    // the TTL does not run.
                    ctx.timers
                        .arm(&mut self.armed, id, Timer::Ttl, now + within);
                } else if now.duration_since(self.last_read) >= within {
                    if !self.ttl_reported && self.closing.is_none() {
                        self.ttl_reported = true;
                        let silent_for = now.duration_since(self.last_read);
                        ctx.events.push(Event::TtlExpired {
                            conn: id,
                            silent_for,
                        });
                    }
                } else {
                    ctx.timers
                        .arm(&mut self.armed, id, Timer::Ttl, self.last_read + within);
                }
            }
            Timer::Linger => {
                if self.lingering {
                    // Everything was written; the peer just did not close its side.
                    let cause = self.closing.take().unwrap_or(CloseCause::Requested);
                    return Err(cause.into());
                }
                if self.closing.is_some() {
                    return Err(CloseCause::FlushTimeout.into());
                }
            }
        }
        Ok(())
    }

    /// Writes the listener's handshake ERROR frame (if it has one), as
    /// `transport/stomp.py` answers a CONNECT that does not come in time.
    fn handshake_expired(&mut self, ctx: &mut Ctx) {
        let Some(message) = self.slot.0.handshake_error.as_deref() else {
            return;
        };
        let length = message.len().to_string();
        let headers = [
            ("message", message),
            ("content-type", "text/plain"),
            ("content-length", length.as_str()),
        ];
        let frame = Outgoing::new(Verb::Error, &headers, message.as_bytes());
        let before = self.out.len();
        if self.codec.send(&mut self.out, &frame).is_ok() {
            let added = self.out.len() - before;
            self.conn.0.outgoing.fetch_add(added, Ordering::SeqCst);
            self.queue(ctx);
        }
    }
}
