//! One I/O thread: a mio poll loop over its listeners and connections.
//!
//! A pass of the loop: wait for readiness (or the earliest deadline; no wait at all when a
//! connection is owed a read), handle what is ready (accept, read and decode, write), take
//! the inbox (connections accepted by another thread, listeners, Python's commands) and
//! carry it out, read the connections owed a read, fire the deadlines that came, write
//! every connection with new outgoing bytes once, and publish the pass's events in one
//! batch. Everything about one connection happens inside [`Worker::with`], which catches a
//! panic and drops only that connection.

use std::any::Any;
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};

use crate::api::{CloseCause, Command, Conn, ConnId, Event, Lease};
use crate::config::Config;
use crate::connection::{Connection, Ctx, End, ListenerInfo, OpenSlot, Step};
use crate::notify::EventQueue;
use crate::timers::Timers;
use crate::transport::{TlsStream, Transport};

pub(crate) const WAKER: Token = Token(usize::MAX);
const LISTENER_BASE: usize = usize::MAX / 2;
/// A relayed TLS connection's socket pair end (`connection::relay`): this plus its slot.
const RELAY_BASE: usize = usize::MAX / 4;
/// How soon an accept that failed for want of descriptors (EMFILE) is tried again.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);
/// Connections accepted from one listener in one pass at most.
const ACCEPTS_PER_PASS: usize = 256;

/// A connection accepted by one thread for another.
pub(crate) struct Adopted {
    pub(crate) stream: TcpStream,
    pub(crate) peer: SocketAddr,
    pub(crate) slot: OpenSlot,
}

/// A listener handed to its thread.
pub(crate) struct Listener {
    pub(crate) socket: TcpListener,
    pub(crate) info: Arc<ListenerInfo>,
}

/// What other threads leave for an I/O thread.
#[derive(Default)]
pub(crate) struct Inbox {
    pub(crate) commands: Vec<Command>,
    pub(crate) adopted: Vec<Adopted>,
    pub(crate) listen: Vec<Listener>,
    pub(crate) unlisten: Vec<u32>,
    /// Python drained a full queue: read the connections held back.
    pub(crate) resume: bool,
    pub(crate) stop: bool,
}

impl Inbox {
    fn is_empty(&self) -> bool {
        self.commands.is_empty()
            && self.adopted.is_empty()
            && self.listen.is_empty()
            && self.unlisten.is_empty()
            && !self.resume
            && !self.stop
    }
}

/// An I/O thread as the other threads see it.
pub(crate) struct Mailbox {
    inbox: Mutex<Inbox>,
    waker: Waker,
}

impl Mailbox {
    pub(crate) fn new(waker: Waker) -> Self {
        Self {
            inbox: Mutex::new(Inbox::default()),
            waker,
        }
    }

    /// Adds to the inbox; wakes the thread if the inbox was empty (else a wake-up is
    /// pending already: the thread takes the whole inbox each time).
    pub(crate) fn post(&self, fill: impl FnOnce(&mut Inbox)) {
        let was_empty = {
            let mut inbox = self.inbox.lock().unwrap_or_else(PoisonError::into_inner);
            let was_empty = inbox.is_empty();
            fill(&mut inbox);
            was_empty
        };
        if was_empty {
            // Fails only if the eventfd cannot be written: the thread is gone then.
            let _ = self.waker.wake();
        }
    }

    fn take(&self) -> Inbox {
        std::mem::take(&mut *self.inbox.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// What every thread of a plane shares.
pub(crate) struct PlaneShared {
    pub(crate) config: Arc<Config>,
    pub(crate) events: EventQueue,
    pub(crate) mailboxes: Vec<Mailbox>,
    /// Round robin over the threads for accepted connections.
    pub(crate) next_thread: std::sync::atomic::AtomicUsize,
    /// Set by `shutdown`: nothing more is taken.
    pub(crate) stopped: std::sync::atomic::AtomicBool,
}

/// One I/O thread's state (see the module doc).
pub(crate) struct Worker {
    index: usize,
    poll: Poll,
    plane: Arc<PlaneShared>,
    conns: Vec<Option<Connection>>,
    free: Vec<usize>,
    seq: u32,
    listeners: Vec<Option<Listener>>,
    accept_retry: Option<Instant>,
    ctx: Ctx,
}

impl Worker {
    pub(crate) fn new(index: usize, poll: Poll, plane: Arc<PlaneShared>) -> Self {
        let config = Arc::clone(&plane.config);
        let scratch = vec![0; config.read_chunk.max(1)];
        Self {
            index,
            poll,
            plane,
            conns: Vec::new(),
            free: Vec::new(),
            seq: 0,
            listeners: Vec::new(),
            accept_retry: None,
            ctx: Ctx {
                config,
                now: Instant::now(),
                events: Vec::new(),
                scratch,
                timers: Timers::default(),
                again: Vec::new(),
                dirty: Vec::new(),
                event_room: usize::MAX,
                held_back: Vec::new(),
            },
        }
    }

    /// The loop (see the module doc); returns when the plane stops.
    ///
    /// Work on one connection has its own `catch_unwind` ([`Worker::with`]); this one is
    /// for a bug in the thread's own work (accepting, the inbox): the pass is abandoned and
    /// the loop goes on, so the thread and its other connections live.
    pub(crate) fn run(mut self) {
        wal::run_as_batch_thread();
        let mut events = Events::with_capacity(1024);
        loop {
            match catch_unwind(AssertUnwindSafe(|| self.pass(&mut events))) {
                Ok(true) | Err(_) => {}
                Ok(false) => return,
            }
        }
    }

    /// One pass of the loop; false when the plane stops.
    fn pass(&mut self, events: &mut Events) -> bool {
        let timeout = self.timeout();
        if let Err(e) = self.poll.poll(events, timeout) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                // epoll_wait fails only on a programming error (EBADF, EINVAL): stop
                // serving rather than spin.
                self.stop();
                return false;
            }
        }
        self.ctx.now = Instant::now();
        let limit = self.ctx.config.max_queued_events;
        self.ctx.event_room = limit.saturating_sub(self.plane.events.len());
        let again = std::mem::take(&mut self.ctx.again);
        let mut woken = false;
        for event in &*events {
            match event.token() {
                WAKER => woken = true,
                Token(t) if t >= LISTENER_BASE => self.accept(t - LISTENER_BASE),
                Token(t) if t >= RELAY_BASE => self.relay_ready(t - RELAY_BASE, event),
                Token(slot) => self.ready(slot, event),
            }
        }
        if self.accept_retry.is_some_and(|at| at <= self.ctx.now) {
            self.accept_retry = None;
            for index in 0..self.listeners.len() {
                self.accept(index);
            }
        }
        if woken && self.inbox() {
            self.stop();
            return false;
        }
        let budget = self.ctx.config.read_budget;
        for id in again {
            self.with(id, |conn, ctx| conn.read(ctx, budget, false));
        }
        self.fire_timers();
        for id in std::mem::take(&mut self.ctx.dirty) {
            self.with(id, Connection::flush);
        }
        let room = self.plane.events.publish(&mut self.ctx.events);
        if room && !self.ctx.held_back.is_empty() {
            // The queue was drained since this pass measured its room, by a drain that
            // found it below the limit and so tells nobody to read on: read on now (a
            // drain that finds it full tells every thread: `Inbox::resume`).
            let held_back = std::mem::take(&mut self.ctx.held_back);
            self.ctx.again.extend(held_back);
        }
        true
    }

    fn timeout(&self) -> Option<Duration> {
        if !self.ctx.again.is_empty() {
            return Some(Duration::ZERO);
        }
        let next = match (self.ctx.timers.next(), self.accept_retry) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }?;
        // Rounded up: epoll counts milliseconds, and waking early costs a pass for nothing.
        let wait = next.saturating_duration_since(Instant::now());
        Some(wait + Duration::from_micros(999))
    }

    /// The id of the connection in `slot`, if one is there.
    fn conn_id(&self, slot: usize) -> Option<ConnId> {
        self.conns
            .get(slot)
            .and_then(|c| c.as_ref())
            .map(Connection::id)
    }

    fn ready(&mut self, slot: usize, event: &mio::event::Event) {
        let Some(id) = self.conn_id(slot) else {
            return;
        };
        let budget = self.ctx.config.read_budget;
        self.with(id, |conn, ctx| {
            if event.is_error() {
                if let Some(error) = conn.transport.take_error() {
                    return Err(conn.broken(&error));
                }
            }
            if event.is_readable() || event.is_read_closed() {
                conn.read(ctx, budget, false)?;
            }
            if event.is_writable() {
                conn.flush(ctx)?;
            }
            Ok(())
        });
    }

    /// Python's end of a relayed TLS connection is ready: pump.
    fn relay_ready(&mut self, slot: usize, event: &mio::event::Event) {
        let Some(id) = self.conn_id(slot) else {
            return;
        };
        let budget = self.ctx.config.read_budget;
        let error = event.is_error();
        self.with(id, |conn, ctx| {
            if error {
                let cause = CloseCause::Reset("the relay's socket pair failed".into());
                return Err(cause.into());
            }
            conn.read(ctx, budget, false)
        });
    }

    /// Runs `work` on connection `id` (if it is still open), panics contained: a panic, or
    /// a close the work asks for, drops the connection and reports why.
    fn with(&mut self, id: ConnId, work: impl FnOnce(&mut Connection, &mut Ctx) -> Step) {
        let slot = id.slot();
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return;
        };
        if conn.id() != id {
            return; // an older connection's leftover
        }
        let ctx = &mut self.ctx;
        // AssertUnwindSafe: after a panic the connection is dropped, so no broken invariant
        // of it is seen again; the context's state stays valid at every step (events and
        // lists only grow, the read buffer is scratch).
        let outcome = catch_unwind(AssertUnwindSafe(|| work(conn, ctx)));
        let end = match outcome {
            Ok(Ok(())) => return,
            Ok(Err(end)) => end,
            Err(payload) => End::Close(CloseCause::Panic(panic_message(payload.as_ref()))),
        };
        if matches!(end, End::Handoff) && conn.transport.is_tls() {
            self.relay(slot);
            return;
        }
        self.remove(slot, end);
    }

    /// A TLS connection's first bytes make it Python's: it stays here and relays its
    /// plaintext to Python through a socket pair (`connection::relay`).
    fn relay(&mut self, slot: usize) {
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return;
        };
        let id = conn.id();
        let pair = mio::net::UnixStream::pair().and_then(|(mut mine, theirs)| {
            let interest = Interest::READABLE | Interest::WRITABLE;
            self.poll
                .registry()
                .register(&mut mine, Token(RELAY_BASE + slot), interest)?;
            Ok((mine, theirs))
        });
        let (mine, theirs) = match pair {
            Ok(pair) => pair,
            Err(e) => {
                let cause = CloseCause::Reset(format!("no socket pair to relay with: {e}"));
                self.remove(slot, End::Close(cause));
                return;
            }
        };
        let initial = conn.take_sniffed();
        conn.start_relay(mine);
        self.ctx.again.push(id); // what rustls and the socket hold already: no edge comes
        self.ctx.events.push(Event::Relayed {
            conn: id,
            stream: theirs.into(),
            initial,
        });
    }

    fn remove(&mut self, slot: usize, end: End) {
        let Some(mut conn) = self.conns.get_mut(slot).and_then(Option::take) else {
            return;
        };
        let _ = self.poll.registry().deregister(conn.transport.source());
        if let Some(end) = conn.relay_end() {
            let _ = self.poll.registry().deregister(end);
        }
        self.free.push(slot);
        let id = conn.id();
        let event = match end {
            End::Close(_) if conn.close_reported => {
                // Its Closed came when its TLS handshake failed: the lingering close ends.
                conn.transport.shutdown();
                return;
            }
            End::Close(cause) => {
                conn.transport.shutdown();
                drop(conn); // closes the socket; its OpenSlot counts it out of connectionsAllowed
                Event::Closed { conn: id, cause }
            }
            End::Handoff => {
                if let Some((stream, initial, slot)) = conn.into_handoff() {
                    Event::HandedOff {
                        conn: id,
                        stream,
                        initial,
                        lease: Lease { _slot: slot },
                    }
                } else {
                    // A TLS connection is relayed, never handed over (`Worker::with`).
                    let cause = CloseCause::Reset("a TLS connection cannot be handed over".into());
                    Event::Closed { conn: id, cause }
                }
            }
        };
        self.ctx.events.push(event);
    }

    fn fire_timers(&mut self) {
        let now = self.ctx.now;
        while let Some((at, id, timer)) = self.ctx.timers.pop_due(now) {
            let current = match self.conns.get_mut(id.slot()) {
                Some(Some(conn)) if conn.id() == id && conn.armed.get(timer) == Some(at) => {
                    conn.armed.clear(timer);
                    true
                }
                _ => false,
            };
            if current {
                self.with(id, |conn, ctx| conn.timer(ctx, timer));
            }
        }
    }

    /// Takes the inbox and carries it out; whether the plane stops.
    fn inbox(&mut self) -> bool {
        let inbox = self.plane.mailboxes[self.index].take();
        if inbox.resume {
            let held_back = std::mem::take(&mut self.ctx.held_back);
            self.ctx.again.extend(held_back);
        }
        for listener in inbox.listen {
            self.add_listener(listener);
        }
        for id in inbox.unlisten {
            self.remove_listener(id);
        }
        for adopted in inbox.adopted {
            self.adopt(adopted);
        }
        for command in inbox.commands {
            let id = command.conn().id();
            self.with(id, |conn, ctx| conn.command(ctx, &command));
        }
        inbox.stop
    }

    fn add_listener(&mut self, mut listener: Listener) {
        let index = self.listeners.len();
        let token = Token(LISTENER_BASE + index);
        if self
            .poll
            .registry()
            .register(&mut listener.socket, token, Interest::READABLE)
            .is_ok()
        {
            self.listeners.push(Some(listener));
            self.accept(index); // connections that came before it was registered
        }
    }

    fn remove_listener(&mut self, id: u32) {
        for entry in &mut self.listeners {
            if entry.as_ref().is_some_and(|l| l.info.id.0 == id) {
                if let Some(mut listener) = entry.take() {
                    let _ = self.poll.registry().deregister(&mut listener.socket);
                }
            }
        }
    }

    /// Accepts every connection waiting on listener `index` and hands each to a thread.
    fn accept(&mut self, index: usize) {
        for _ in 0..ACCEPTS_PER_PASS {
            let Some(Some(listener)) = self.listeners.get(index) else {
                return;
            };
            let info = Arc::clone(&listener.info);
            let (stream, peer) = match listener.socket.accept() {
                Ok(accepted) => accepted,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    // Out of descriptors or memory, or an aborted handshake: the backlog
                    // keeps the rest; try again soon (edge-triggered: no new edge comes).
                    self.accept_retry = Some(self.ctx.now + ACCEPT_RETRY);
                    return;
                }
            };
            let open = info.open.load(Ordering::Acquire);
            if info.allowed >= 0 && open as i64 >= info.allowed {
                drop(stream); // accepted and closed at once, as Artemis does
                let listener = info.id;
                self.ctx.events.push(Event::Refused { listener, peer });
                continue;
            }
            info.open.fetch_add(1, Ordering::AcqRel);
            let _ = stream.set_nodelay(true);
            let adopted = Adopted {
                stream,
                peer,
                slot: OpenSlot(info),
            };
            let threads = self.plane.mailboxes.len();
            let target = self.plane.next_thread.fetch_add(1, Ordering::Relaxed) % threads;
            if target == self.index {
                self.adopt(adopted);
            } else {
                self.plane.mailboxes[target].post(|inbox| inbox.adopted.push(adopted));
            }
        }
        // A storm of connections: the thread's connections get their turn first, and the
        // rest is accepted on the next pass (no new edge would come for it).
        self.accept_retry = Some(self.ctx.now);
    }

    /// Takes a new connection into this thread and reports it opened.
    fn adopt(&mut self, adopted: Adopted) {
        let Adopted { stream, peer, slot } = adopted;
        let index = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        self.seq = self.seq.wrapping_add(1);
        let id = ConnId::new(self.index, index, self.seq);
        let config = &self.ctx.config;
        let conn = Conn::new(id, config.high_water, config.low_water);
        let listener = slot.0.id;
        let mut transport = match slot.0.tls_session() {
            None => Transport::Plain(stream),
            Some(Ok(session)) => Transport::Tls(Box::new(TlsStream::new(stream, session))),
            Some(Err(_)) => {
                // rustls refuses only a config it was given wrong: not this connection's fault.
                self.ctx.events.push(Event::Refused { listener, peer });
                return;
            }
        };
        let interest = Interest::READABLE | Interest::WRITABLE;
        if self
            .poll
            .registry()
            .register(transport.source(), Token(index), interest)
            .is_err()
        {
            self.free.push(index);
            self.ctx.events.push(Event::Refused { listener, peer });
            return;
        }
        let mut connection = Connection::new(conn.clone(), transport, slot, self.ctx.now);
        connection.start(&mut self.ctx);
        self.conns[index] = Some(connection);
        self.ctx.events.push(Event::Opened {
            conn,
            listener,
            peer,
        });
    }

    /// The plane stops: every connection closes and says so.
    fn stop(&mut self) {
        for slot in 0..self.conns.len() {
            self.remove(slot, End::Close(CloseCause::Shutdown));
        }
        self.listeners.clear();
        let _ = self.plane.events.publish(&mut self.ctx.events);
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
    }
}
