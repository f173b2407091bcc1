//! One client connection on its I/O thread: its socket, its codec (server role), its
//! outgoing bytes and its clock.
//!
//! Every handler returns a [`Step`]: `Ok(())` keeps the connection, `Err(cause)` makes the
//! thread drop it and report [`Event::Closed`] with that cause (a requested close too).
//!
//! Reading is on while none of these holds: Python paused it, the codec paused after a
//! CONNECT until [`Command::AcceptConnect`], the input ended (end of stream, a protocol
//! error, DISCONNECT, a close under way). A socket is registered for readable and writable
//! edges once (mio is edge-triggered): a wake-up reads until the socket would block or the
//! read budget is spent (the thread then reads it again on its next pass), and whatever
//! turns reading back on schedules such a read too, because no new edge will come for
//! bytes that arrived meanwhile.
//!
//! On a listener with hand-off prefixes, the first bytes are kept apart until they tell
//! what the connection is: a STOMP client (they go to the codec) or Python's
//! ([`End::Handoff`]: the worker gives Python the socket and those bytes).
//!
//! On a TLS listener the transport is a rustls session (`transport`): the handshake runs
//! inside the first reads, within `handshake-timeout` (the CONNECT then gets the timeout
//! again, as the socket shell gives it); a failed handshake is reported at once as
//! [`Event::Closed`] with [`CloseCause::Tls`], then closes lingering in silence. A TLS
//! connection whose first bytes make it Python's cannot give Python its socket: it stays
//! here as a relay (`relay`).
//!
//! Memory of an idle connection: the codec (its parse buffer: a CONNECT's hundred bytes, or
//! up to 128 KiB; a large frame's is freed once decoded), the outgoing buffer (freed when
//! it empties, if it had grown past [`KEEP_OUT`]), the shared handle and two heap entries
//! for the heart-beat timers. Reads go through the thread's one read buffer.

use std::io::ErrorKind as IoKind;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use stomp::{Command as Verb, Outgoing, Role};

use crate::api::{CloseCause, Command, Conn, ConnId, Event, ListenerId};
use crate::config::Config;
use crate::timers::{Armed, Timer, Timers};
use crate::transport::Transport;

mod clock;
mod relay;
mod tls;

pub(crate) use relay::Relay;

/// An outgoing buffer with more capacity than this is freed when it empties.
const KEEP_OUT: usize = 16 * 1024;

/// How work on a connection ends it: closed for a cause, or handed to Python.
#[derive(Debug)]
pub(crate) enum End {
    Close(CloseCause),
    /// Its first bytes start with one of the listener's hand-off prefixes.
    Handoff,
}

impl From<CloseCause> for End {
    fn from(cause: CloseCause) -> Self {
        End::Close(cause)
    }
}

/// What a handler returns: keep the connection, or end it.
pub(crate) type Step = Result<(), End>;

/// What a connection's first bytes say it is.
enum Sniff {
    Stomp,
    Handoff,
    /// Still a proper prefix of a hand-off prefix: read more.
    Undecided,
}

/// A STOMP client unless `data` starts with one of `prefixes` (or may still: then
/// undecided), as `transport/acceptor.py` tells cluster links and HTTP requests apart.
fn sniff(data: &[u8], prefixes: &[Vec<u8>]) -> Sniff {
    if prefixes.iter().any(|p| data.starts_with(p)) {
        Sniff::Handoff
    } else if prefixes.iter().any(|p| p.starts_with(data)) {
        Sniff::Undecided
    } else {
        Sniff::Stomp
    }
}

/// What an I/O thread's handlers share: the pass's clock and events, the read buffer, the
/// deadlines, and the connections to read again or write at the end of the pass.
pub(crate) struct Ctx {
    pub(crate) config: Arc<Config>,
    pub(crate) now: Instant,
    pub(crate) events: Vec<Event>,
    pub(crate) scratch: Vec<u8>,
    pub(crate) timers: Timers,
    pub(crate) again: Vec<ConnId>,
    pub(crate) dirty: Vec<ConnId>,
    /// Events this pass may add before the queue holds `Config::max_queued_events`.
    pub(crate) event_room: usize,
    /// Connections that stopped reading for want of room, read again once Python drained.
    pub(crate) held_back: Vec<ConnId>,
}

/// A listener's settings and count of open connections, shared by its connections.
#[derive(Debug)]
pub(crate) struct ListenerInfo {
    pub(crate) id: ListenerId,
    pub(crate) limits: stomp::FrameLimits,
    pub(crate) allowed: i64,
    pub(crate) open: AtomicUsize,
    pub(crate) handshake_timeout: Option<Duration>,
    pub(crate) handshake_error: Option<String>,
    pub(crate) handoff: Vec<Vec<u8>>,
    /// A TLS listener's current config (`DataPlane::set_tls` replaces it: new connections
    /// get the new one, open ones keep theirs).
    pub(crate) tls: Option<Mutex<Arc<rustls::ServerConfig>>>,
}

impl ListenerInfo {
    /// A new connection's TLS session (None: a plain listener).
    pub(crate) fn tls_session(&self) -> Option<Result<rustls::ServerConnection, rustls::Error>> {
        let tls = self.tls.as_ref()?;
        let config = Arc::clone(&tls.lock().unwrap_or_else(PoisonError::into_inner));
        Some(rustls::ServerConnection::new(config))
    }
}

/// Counts one open connection of a listener until dropped (however the connection ends).
#[derive(Debug)]
pub(crate) struct OpenSlot(pub(crate) Arc<ListenerInfo>);

impl Drop for OpenSlot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One connection's state on its thread (see the module doc).
// The flags are independent conditions (paused by Python, by the codec, input ended, ...),
// each read on its own; folding them into an enum would only hide that.
#[allow(clippy::struct_excessive_bools)]
pub(crate) struct Connection {
    pub(crate) conn: Conn,
    pub(crate) transport: Transport,
    codec: stomp::Connection,
    slot: OpenSlot,
    out: Vec<u8>,
    written: usize,
    paused: bool,
    awaiting_accept: bool,
    input_done: bool,
    connect_seen: bool,
    /// Close with this cause once the outgoing bytes are written.
    closing: Option<CloseCause>,
    ttl_reported: bool,
    send_every: Option<Duration>,
    expect_within: Option<Duration>,
    last_read: Instant,
    last_write: Instant,
    pub(crate) armed: Armed,
    queued_write: bool,
    /// The first bytes, while they may still start a hand-off prefix (None: decided).
    sniffed: Option<Vec<u8>>,
    /// The peer's end of stream was read.
    eof_seen: bool,
    /// A flushing close wrote everything and waits for the peer's end ([`Connection::linger`]).
    lingering: bool,
    /// Held back for want of room in the event queue (in [`Ctx::held_back`]).
    backlogged: bool,
    /// [`Event::Closed`] was reported when the TLS handshake failed: the close lingers on
    /// in silence (commands ignored, no more events, its removal reports nothing).
    pub(crate) close_reported: bool,
    /// A TLS connection handed to Python: the socket pair's end that carries its
    /// plaintext (see `relay`).
    pub(crate) relay: Option<Box<Relay>>,
}

impl Connection {
    pub(crate) fn new(conn: Conn, transport: Transport, slot: OpenSlot, now: Instant) -> Self {
        let limits = slot.0.limits;
        let slot_handoff_empty = slot.0.handoff.is_empty();
        Self {
            conn,
            transport,
            codec: stomp::Connection::new(Role::Server, limits),
            slot,
            out: Vec::new(),
            written: 0,
            paused: false,
            awaiting_accept: false,
            input_done: false,
            connect_seen: false,
            closing: None,
            ttl_reported: false,
            send_every: None,
            expect_within: None,
            last_read: now,
            last_write: now,
            armed: Armed::default(),
            queued_write: false,
            sniffed: (!slot_handoff_empty).then(Vec::new),
            eof_seen: false,
            lingering: false,
            backlogged: false,
            close_reported: false,
            relay: None,
        }
    }

    pub(crate) fn id(&self) -> ConnId {
        self.conn.id()
    }

    /// Arms `handshake-timeout` (at accept time).
    pub(crate) fn start(&mut self, ctx: &mut Ctx) {
        if let Some(timeout) = self.slot.0.handshake_timeout {
            let (at, id) = (ctx.now + timeout, self.id());
            ctx.timers.arm(&mut self.armed, id, Timer::Handshake, at);
        }
    }

    /// Whether the connection reads now: not paused (by Python, by the codec after a
    /// CONNECT, or for want of room in the event queue) and its input not ended.
    fn reading(&self) -> bool {
        !(self.paused || self.awaiting_accept || self.backlogged || self.input_done)
    }

    // --- reading -------------------------------------------------------------------------

    /// Reads until the socket would block or `budget` bytes are read (then the thread
    /// comes back on its next pass, unless `rest`: a last read), decoding as it goes.
    pub(crate) fn read(&mut self, ctx: &mut Ctx, mut budget: usize, rest: bool) -> Step {
        if self.lingering {
            return self.discard(ctx, budget);
        }
        if self.relay.is_some() {
            return self.pump(ctx, budget);
        }
        if self.backlogged {
            self.backlogged = false;
            self.decode(ctx); // what the codec kept while there was no room
        }
        loop {
            if self.input_done || self.awaiting_accept || (self.paused && !rest) {
                return Ok(());
            }
            if self.backlogged || ctx.events.len() >= ctx.event_room {
                self.hold_back(ctx);
                return Ok(());
            }
            if budget == 0 {
                if !rest {
                    ctx.again.push(self.id());
                }
                return Ok(());
            }
            let want = budget.min(ctx.scratch.len());
            let handshaking = self.transport.handshaking();
            let read = self.transport.read(&mut ctx.scratch[..want]);
            if handshaking && !self.transport.handshaking() {
                self.tls_established(ctx);
            }
            match read {
                Ok(0) => {
                    self.ended(ctx);
                    return Ok(());
                }
                Ok(n) => {
                    budget -= n;
                    self.last_read = ctx.now;
                    self.take_in(ctx, n)?;
                }
                Err(e) if e.kind() == IoKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == IoKind::Interrupted => {}
                Err(e) => return self.read_failed(ctx, &e),
            }
        }
    }

    /// Decodes the `n` bytes just read (after telling what the connection is, first).
    fn take_in(&mut self, ctx: &mut Ctx, n: usize) -> Step {
        let data = &ctx.scratch[..n];
        // Neither can fail: the stream has not ended, and a failed codec ignores bytes.
        if let Some(first) = &mut self.sniffed {
            first.extend_from_slice(data);
            match sniff(first, &self.slot.0.handoff) {
                Sniff::Undecided => return Ok(()),
                Sniff::Handoff => return Err(End::Handoff),
                Sniff::Stomp => {
                    let first = self.sniffed.take().unwrap_or_default();
                    let _ = self.codec.receive_data(&first);
                }
            }
        } else {
            let _ = self.codec.receive_data(data);
        }
        self.decode(ctx);
        Ok(())
    }

    /// The socket, the bytes read from it and the listener's count, for Python (a plain
    /// connection's: a TLS one is relayed instead, and None closes it).
    pub(crate) fn into_handoff(self) -> Option<(std::net::TcpStream, Vec<u8>, OpenSlot)> {
        match self.transport {
            Transport::Plain(stream) => {
                Some((stream.into(), self.sniffed.unwrap_or_default(), self.slot))
            }
            Transport::Tls(_) => None,
        }
    }

    /// Reports every complete frame buffered, up to a pause, an error or a DISCONNECT,
    /// or until the pass has no room left for events ([`Ctx::event_room`]: the rest waits
    /// in the codec, and the socket is not read, until Python has drained the queue).
    fn decode(&mut self, ctx: &mut Ctx) {
        let id = self.id();
        while !self.input_done {
            if ctx.events.len() >= ctx.event_room {
                self.hold_back(ctx);
                return;
            }
            match self.codec.next_event() {
                Ok(stomp::Event::Frame(frame)) => {
                    if frame.command.is_connect() {
                        self.connect_seen = true;
                        self.armed.clear(Timer::Handshake);
                    } else if frame.command == Verb::Disconnect {
                        // What follows is ignored, as transport/stomp.py does.
                        self.input_done = true;
                    }
                    ctx.events.push(Event::Frame { conn: id, frame });
                }
                // Heart-beats moved `last_read`; the end of the stream is `ended`'s.
                Ok(stomp::Event::Heartbeat) => {}
                Ok(stomp::Event::NeedData | stomp::Event::ConnectionClosed) => return,
                Ok(stomp::Event::Paused) => {
                    self.awaiting_accept = true;
                    return;
                }
                Err(error) => {
                    ctx.events.push(Event::ProtocolError { conn: id, error });
                    self.input_done = true;
                }
            }
        }
    }

    /// No room for more events: wait until Python drained the queue.
    fn hold_back(&mut self, ctx: &mut Ctx) {
        if !self.backlogged {
            self.backlogged = true;
            ctx.held_back.push(self.id());
        }
    }

    /// The peer closed its side: reported; the connection waits for Python's close
    /// ([`Event::InputEnded`]).
    fn ended(&mut self, ctx: &mut Ctx) {
        self.input_done = true;
        self.eof_seen = true;
        let unread = self.codec.buffered() + self.sniffed.as_ref().map_or(0, Vec::len);
        ctx.events.push(Event::InputEnded {
            conn: self.id(),
            unread,
        });
    }

    // --- writing -------------------------------------------------------------------------

    fn queue(&mut self, ctx: &mut Ctx) {
        if !self.queued_write {
            self.queued_write = true;
            ctx.dirty.push(self.id());
        }
    }

    /// Writes what is buffered until done or the socket would block.
    pub(crate) fn flush(&mut self, ctx: &mut Ctx) -> Step {
        self.queued_write = false;
        let shared = &self.conn.0;
        loop {
            if self.written == self.out.len() {
                if !self.transport.has_pending() {
                    break;
                }
                // TLS records rustls could not write yet.
                match self.transport.flush_pending() {
                    Ok(()) => continue,
                    Err(e) if e.kind() == IoKind::WouldBlock => break,
                    Err(e) if e.kind() == IoKind::Interrupted => continue,
                    Err(e) => return Err(CloseCause::Reset(e.to_string()).into()),
                }
            }
            match self.transport.write(&self.out[self.written..]) {
                Ok(0) => {
                    let cause = CloseCause::Reset("the socket accepts no bytes".into());
                    return Err(cause.into());
                }
                Ok(n) => {
                    self.written += n;
                    self.last_write = ctx.now;
                    shared.outgoing.fetch_sub(n, Ordering::SeqCst);
                }
                Err(e) if e.kind() == IoKind::WouldBlock => break,
                Err(e) if e.kind() == IoKind::Interrupted => {}
                Err(e) => return Err(CloseCause::Reset(e.to_string()).into()),
            }
        }
        if self.written == self.out.len() {
            self.written = 0;
            if self.out.capacity() > KEEP_OUT {
                self.out = Vec::new();
            } else {
                self.out.clear();
            }
        }
        self.check_writable(ctx);
        if self.relay.is_some() {
            self.relay_flushed(ctx);
        }
        let drained = self.out.is_empty() && !self.transport.has_pending();
        if drained && self.closing.is_some() && !self.lingering {
            return self.linger(ctx);
        }
        Ok(())
    }

    /// A flushing close has written everything. Closing a socket whose peer sent bytes we
    /// did not read makes the kernel reset it, and a reset throws away what the kernel
    /// had not sent yet (the ERROR frame at the end, most likely). So the close is
    /// lingering, as web servers do it: our side is shut (the peer reads to the end, then
    /// sees it), what still comes in is read and dropped, and the socket closes when the
    /// peer closes too, or when the close linger is over.
    fn linger(&mut self, ctx: &mut Ctx) -> Step {
        if self.eof_seen {
            return Err(self.closing.take().unwrap_or(CloseCause::Requested).into());
        }
        self.transport.shutdown_write();
        self.lingering = true;
        ctx.again.push(self.id()); // its end may be in the socket already (no edge to come)
        Ok(())
    }

    /// How a socket error ends the connection: a reset, unless it came while the close
    /// lingered (everything was written: the close is what it was asked to be).
    pub(crate) fn broken(&mut self, error: &std::io::Error) -> End {
        if self.lingering {
            self.closing.take().unwrap_or(CloseCause::Requested).into()
        } else {
            CloseCause::Reset(error.to_string()).into()
        }
    }

    /// Reads and drops what the peer sends while the close lingers, until its end.
    fn discard(&mut self, ctx: &mut Ctx, mut budget: usize) -> Step {
        let closed = |this: &mut Self| -> Step {
            Err(this.closing.take().unwrap_or(CloseCause::Requested).into())
        };
        while budget > 0 {
            let want = budget.min(ctx.scratch.len());
            match self.transport.read(&mut ctx.scratch[..want]) {
                Ok(0) => return closed(self),
                Ok(n) => budget -= n,
                Err(e) if e.kind() == IoKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == IoKind::Interrupted => {}
                Err(_) => return closed(self), // reset: it is closed either way
            }
        }
        ctx.again.push(self.id());
        Ok(())
    }

    /// Reports [`Event::Writable`] when someone waits for it and the bytes drained.
    fn check_writable(&self, ctx: &mut Ctx) {
        if self.close_reported {
            return; // Closed was its last event
        }
        let shared = &self.conn.0;
        let outgoing = shared.outgoing.load(Ordering::SeqCst);
        if outgoing >= shared.high_water {
            shared.wants_writable.store(true, Ordering::SeqCst);
        } else if outgoing <= shared.low_water
            && shared.wants_writable.swap(false, Ordering::SeqCst)
        {
            ctx.events.push(Event::Writable { conn: self.id() });
        }
    }

    /// Makes room at the front of the outgoing buffer once half of it is written.
    fn compact(&mut self) {
        if self.written > 0 && self.written * 2 >= self.out.len() {
            self.out.drain(..self.written);
            self.written = 0;
        }
    }

    /// Encodes `frame` (or takes `bytes`) into the outgoing buffer, replacing the
    /// estimate `submit` counted with the real length.
    fn send(&mut self, ctx: &mut Ctx, command: &Command) {
        let estimate = command.estimate();
        let shared = Arc::clone(&self.conn.0);
        if self.closing.is_none() {
            self.compact();
            let before = self.out.len();
            match command {
                Command::Send { frame, .. } | Command::SendHead { frame, .. } => {
                    let mut outgoing = Outgoing::new(frame.command, &frame.headers, &frame.body);
                    if let Command::SendHead { body_length, .. } = command {
                        outgoing.body_length = Some(i64::try_from(*body_length).unwrap_or(-1));
                    }
                    if let Err(error) = self.codec.send(&mut self.out, &outgoing) {
                        let conn = self.id();
                        ctx.events.push(Event::CommandFailed { conn, error });
                    }
                }
                Command::SendBytes { bytes, .. } => self.out.extend_from_slice(bytes),
                _ => {}
            }
            shared
                .outgoing
                .fetch_add(self.out.len() - before, Ordering::SeqCst);
            self.queue(ctx);
            // A CONNECTED sent without AcceptConnect decides the version itself.
            self.version_decided(ctx);
        }
        shared.outgoing.fetch_sub(estimate, Ordering::SeqCst);
    }

    /// Once the version is decided, decodes the frames pipelined behind the CONNECT and
    /// reads on.
    fn version_decided(&mut self, ctx: &mut Ctx) {
        if self.awaiting_accept && self.codec.version().is_some() {
            self.awaiting_accept = false;
            self.decode(ctx);
            ctx.again.push(self.id());
        }
    }

    // --- commands ------------------------------------------------------------------------

    /// Carries out one of Python's commands.
    pub(crate) fn command(&mut self, ctx: &mut Ctx, command: &Command) -> Step {
        if self.relay.is_some() || self.close_reported {
            // Python's now (relayed), or reported closed: sent before Python knew, it came late.
            return Ok(());
        }
        match command {
            Command::AcceptConnect { version, .. } => {
                if let Err(error) = self.codec.accept_connect(version.as_str()) {
                    let conn = self.id();
                    ctx.events.push(Event::CommandFailed { conn, error });
                } else {
                    self.version_decided(ctx);
                }
            }
            Command::Send { .. } | Command::SendHead { .. } | Command::SendBytes { .. } => {
                self.send(ctx, command);
            }
            Command::SetHeartbeat {
                send_every,
                expect_within,
                ..
            } => self.set_heartbeat(ctx, *send_every, *expect_within),
            Command::PauseReading { .. } => self.paused = true,
            Command::ResumeReading { .. } => {
                if self.paused {
                    self.paused = false;
                    self.last_read = ctx.now; // the TTL starts again
                    ctx.again.push(self.id());
                }
            }
            Command::ReadRest { .. } => {
                // The last frames of a closing connection: not held back for room.
                let room = std::mem::replace(&mut ctx.event_room, usize::MAX);
                let result = self.read(ctx, ctx.config.last_read_limit, true);
                ctx.event_room = room;
                ctx.events.push(Event::RestRead { conn: self.id() });
                return result;
            }
            Command::Close { flush, .. } => return self.close(ctx, *flush, CloseCause::Requested),
            Command::InjectPanic { .. } => panic!("injected panic (the test hook)"),
        }
        Ok(())
    }

    /// Closes at once, or (`flush`) once the outgoing bytes are written and the peer has
    /// seen the end of them: see [`Connection::flush`].
    fn close(&mut self, ctx: &mut Ctx, flush: bool, cause: CloseCause) -> Step {
        self.input_done = true;
        if !flush {
            return Err(cause.into());
        }
        self.closing = Some(cause);
        let (at, id) = (ctx.now + ctx.config.close_linger, self.id());
        ctx.timers.arm(&mut self.armed, id, Timer::Linger, at);
        self.queue(ctx);
        Ok(())
    }
}
