//! [`DataPlane`]: the I/O threads, their listeners, and the two batch calls Python makes
//! (`submit`, `drain`).

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use mio::{Poll, Waker};

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
        let listen_error = |source| Error::Listen { addr, source };
        let socket = std::net::TcpListener::bind(addr).map_err(listen_error)?;
        set_buffer(&socket, libc::SO_SNDBUF, spec.tcp_send_buffer).map_err(listen_error)?;
        set_buffer(&socket, libc::SO_RCVBUF, spec.tcp_receive_buffer).map_err(listen_error)?;
        raise_backlog(&socket).map_err(listen_error)?;
        socket.set_nonblocking(true).map_err(listen_error)?;
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
        });
        let listener = Listener {
            socket: mio::net::TcpListener::from_std(socket),
            info,
        };
        let thread = id.0 as usize % self.threads();
        self.shared.mailboxes[thread].post(|inbox| inbox.listen.push(listener));
        Ok(Listening { id, local_addr })
    }

    /// Stops accepting on a listener (its open connections go on).
    pub fn unlisten(&self, id: ListenerId) {
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

/// Sets a socket buffer size option (None: leave the system's).
fn set_buffer(
    socket: &std::net::TcpListener,
    option: libc::c_int,
    size: Option<usize>,
) -> std::io::Result<()> {
    let Some(size) = size else {
        return Ok(());
    };
    let value = libc::c_int::try_from(size).unwrap_or(libc::c_int::MAX);
    // SAFETY: the descriptor is the live socket `socket` borrows; the option value points
    // to an initialised c_int that outlives the call, and the length passed is its size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            option,
            std::ptr::addr_of!(value).cast::<libc::c_void>(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Raises the accept backlog from std's 128 to the system's cap (`somaxconn`), as Trio's
/// listeners have it: a burst of clients connecting at once is not dropped.
fn raise_backlog(socket: &std::net::TcpListener) -> std::io::Result<()> {
    // SAFETY: listen() on the live descriptor `socket` borrows, no pointers; Linux allows
    // calling it again on a listening socket to change the backlog.
    let rc = unsafe { libc::listen(socket.as_raw_fd(), 4096) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
