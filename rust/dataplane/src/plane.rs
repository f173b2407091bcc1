//! [`DataPlane`]: the I/O threads, their listeners, and the two batch calls Python makes
//! (`submit`, `drain`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use mio::{Poll, Waker};
use socket2::{Domain, Protocol, Socket, Type};

use crate::api::{Command, Event, ListenerId};
use crate::config::{Config, ListenerSpec};
use crate::connection::ListenerInfo;
use crate::error::{Error, Result};
use crate::notify::EventQueue;
use crate::worker::{Listener, Mailbox, PlaneShared, Worker, WAKER};

/// A listener once listening.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listening {
    pub id: ListenerId,
    /// The bound address (the port chosen, for port 0).
    pub local_addr: SocketAddr,
}

/// The data plane: N I/O threads serving STOMP connections (see the crate doc).
pub struct DataPlane {
    shared: Arc<PlaneShared>,
    /// The listeners by id, for [`DataPlane::set_tls`].
    listeners: Mutex<HashMap<u32, Arc<ListenerInfo>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    next_listener: AtomicU32,
}

impl DataPlane {
    /// Starts the I/O threads (no listener yet).
    pub fn start(mut config: Config) -> Result<Self> {
        let count = config.thread_count();
        // A read needs room for a byte, and a budget of nothing would read nothing forever.
        config.read_chunk = config.read_chunk.max(1);
        config.read_budget = config.read_budget.max(config.read_chunk);
        config.low_water = config.low_water.min(config.high_water);
        config.max_queued_events = config.max_queued_events.max(1);
        let limit = config.max_queued_events;
        let mut polls = Vec::with_capacity(count);
        let mut mailboxes = Vec::with_capacity(count);
        for _ in 0..count {
            let poll = Poll::new().map_err(Error::setup("epoll"))?;
            let waker = Waker::new(poll.registry(), WAKER).map_err(Error::setup("waker"))?;
            polls.push(poll);
            mailboxes.push(Mailbox::new(waker));
        }
        let shared = Arc::new(PlaneShared {
            config: Arc::new(config),
            events: EventQueue::new(limit)?,
            mailboxes,
            next_thread: AtomicUsize::new(0),
            stopped: AtomicBool::new(false),
        });
        let plane = DataPlane {
            shared: Arc::clone(&shared),
            listeners: Mutex::new(HashMap::new()),
            threads: Mutex::new(Vec::with_capacity(count)),
            next_listener: AtomicU32::new(0),
        };
        for (index, poll) in polls.into_iter().enumerate() {
            let worker = Worker::new(index, poll, Arc::clone(&shared));
            let handle = std::thread::Builder::new()
                .name(format!("dataplane-{index}"))
                .spawn(move || worker.run())
                .map_err(Error::setup("thread"))?;
            plane.lock_threads().push(handle);
        }
        Ok(plane)
    }

    fn lock_threads(&self) -> std::sync::MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.threads.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The number of I/O threads.
    pub fn threads(&self) -> usize {
        self.shared.mailboxes.len()
    }

    /// Binds `spec.addr` and starts accepting on it (on one of the threads; accepted
    /// connections are spread over all of them).
    pub fn listen(&self, spec: ListenerSpec) -> Result<Listening> {
        if self.shared.stopped.load(Ordering::Acquire) {
            return Err(Error::Stopped);
        }
        let addr = spec.addr;
        let tls = spec
            .tls
            .as_ref()
            .map(crate::tls::server_config)
            .transpose()?;
        let listen_error = |source| Error::Listen { addr, source };
        let socket = bind(addr, &spec).map_err(listen_error)?;
        let local_addr = socket.local_addr().map_err(listen_error)?;
        let id = ListenerId(self.next_listener.fetch_add(1, Ordering::Relaxed));
        let info = Arc::new(ListenerInfo {
            id,
            limits: spec.limits,
            allowed: spec.connections_allowed,
            open: AtomicUsize::new(0),
            handshake_timeout: spec.handshake_timeout.filter(|d| !d.is_zero()),
            handshake_error: spec.handshake_error,
            handoff: spec
                .handoff_prefixes
                .into_iter()
                .filter(|p| !p.is_empty())
                .collect(),
            tls: tls.map(Mutex::new),
        });
        self.lock_listeners().insert(id.0, Arc::clone(&info));
        let listener = Listener {
            socket: mio::net::TcpListener::from_std(socket),
            info,
        };
        let thread = id.0 as usize % self.threads();
        self.shared.mailboxes[thread].post(|inbox| inbox.listen.push(listener));
        Ok(Listening { id, local_addr })
    }

    fn lock_listeners(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Arc<ListenerInfo>>> {
        self.listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Replaces a TLS listener's key material and settings (`sslAutoReload`): connections
    /// accepted from now on use them, open ones keep theirs. A spec that cannot be served is
    /// an error, and the listener keeps its current one.
    pub fn set_tls(&self, id: ListenerId, spec: &crate::TlsSpec) -> Result<()> {
        let info = self
            .lock_listeners()
            .get(&id.0)
            .cloned()
            .ok_or(Error::NoListener(id.0))?;
        let Some(current) = &info.tls else {
            return Err(Error::Tls(format!(
                "listener {} is not a TLS listener",
                id.0
            )));
        };
        let config = crate::tls::server_config(spec)?;
        *current.lock().unwrap_or_else(PoisonError::into_inner) = config;
        Ok(())
    }

    /// Stops accepting on a listener (its open connections go on).
    pub fn unlisten(&self, id: ListenerId) {
        self.lock_listeners().remove(&id.0);
        let thread = id.0 as usize % self.threads();
        self.shared.mailboxes[thread].post(|inbox| inbox.unlisten.push(id.0));
    }

    /// Hands commands to their connections' threads: one lock and at most one wake-up per
    /// thread. Each command's outgoing bytes count at once ([`crate::Conn::outgoing`]).
    /// Commands for a closed connection, or after [`DataPlane::shutdown`], are dropped.
    pub fn submit(&self, commands: impl IntoIterator<Item = Command>) {
        if self.shared.stopped.load(Ordering::Acquire) {
            return;
        }
        let threads = self.threads();
        let mut batches: Vec<Vec<Command>> = (0..threads).map(|_| Vec::new()).collect();
        for command in commands {
            let conn = command.conn();
            conn.0
                .outgoing
                .fetch_add(command.estimate(), Ordering::SeqCst);
            let thread = conn.id().thread();
            if let Some(batch) = batches.get_mut(thread) {
                batch.push(command);
            }
        }
        for (thread, mut batch) in batches.into_iter().enumerate() {
            if !batch.is_empty() {
                self.shared.mailboxes[thread].post(|inbox| inbox.commands.append(&mut batch));
            }
        }
    }

    /// Moves every event reported so far to the end of `out`, in order per connection,
    /// and resets the eventfd.
    pub fn drain(&self, out: &mut Vec<Event>) {
        if self.shared.events.drain(out) {
            // The threads held back reading at the limit: they may read on.
            for mailbox in &self.shared.mailboxes {
                mailbox.post(|inbox| inbox.resume = true);
            }
        }
    }

    /// The eventfd that becomes readable when events wait (Python: `trio.lowlevel.wait_readable`).
    pub fn fileno(&self) -> RawFd {
        self.shared.events.fileno()
    }

    /// Blocks until events wait or `timeout` passes; whether they wait (for Rust callers
    /// and tests; Python waits on [`DataPlane::fileno`] instead).
    pub fn wait(&self, timeout: Duration) -> bool {
        self.shared.events.wait(timeout)
    }

    /// How many times the eventfd was poked: batches that found the queue empty.
    pub fn wakeups(&self) -> u64 {
        self.shared.events.pokes()
    }

    /// Closes every connection (each reports [`crate::CloseCause::Shutdown`]) and the
    /// listeners, and joins the threads. Idempotent; also done on drop.
    pub fn shutdown(&self) {
        self.shared.stopped.store(true, Ordering::Release);
        for mailbox in &self.shared.mailboxes {
            mailbox.post(|inbox| inbox.stop = true);
        }
        for handle in self.lock_threads().drain(..) {
            let _ = handle.join();
        }
    }
}

impl Drop for DataPlane {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A listening socket on `addr`, as Trio's listeners are made: `SO_REUSEADDR`, an IPv6
/// socket for IPv6 only (so `::` and `0.0.0.0` can both be bound on one port), the
/// listener's buffer sizes (inherited by accepted sockets), and the accept backlog at the
/// system's cap (`somaxconn`) rather than std's 128, so a burst of clients is not dropped.
fn bind(addr: SocketAddr, spec: &ListenerSpec) -> std::io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    if let Some(size) = spec.tcp_send_buffer {
        socket.set_send_buffer_size(size)?;
    }
    if let Some(size) = spec.tcp_receive_buffer {
        socket.set_recv_buffer_size(size)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(4096)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}
