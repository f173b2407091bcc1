//! The STOMP data plane (issue 29, step 2): Rust I/O threads that own client connections'
//! sockets and bytes, while every decision stays in Python.
//!
//! # Theory of operation
//!
//! [`DataPlane::start`] spawns N I/O threads (default: one per core), each a `mio` poll
//! loop (epoll, edge-triggered). [`DataPlane::listen`] binds a listener (port 0 allowed,
//! the bound address reported) and gives it to one thread, which accepts and spreads the
//! connections over all threads, round robin. A connection lives on one thread for good:
//! its socket, its codec (`stomp::Connection`, server role, the listener's frame limits),
//! its outgoing buffer and its deadlines. Nothing about it is shared but a small handle
//! ([`Conn`]: its id and an atomic count of outgoing bytes).
//!
//! **Events go to Python in batches.** A thread collects what one pass of its loop
//! produced ([`Event`]: opened, a frame, a protocol error, writable again, the TTL
//! expired, the input ended, closed and why) and appends it to the one queue; it pokes
//! the one eventfd ([`DataPlane::fileno`]) only when the queue was empty. Python waits
//! for the fd to be readable and calls [`DataPlane::drain`] once: one wake-up and one GIL
//! acquisition per batch, however many frames it holds. A connection's events are in
//! order (they all come from its thread). Frames own their headers and bodies: decoded
//! once, moved, never copied on the way. The queue is bounded
//! ([`Config::max_queued_events`]): at the limit the threads stop decoding and reading
//! (the bytes wait in the codecs and the sockets, and TCP's window stops the peers) until
//! Python drains it.
//!
//! **Commands come back in batches.** [`DataPlane::submit`] takes one loop pass's
//! [`Command`]s, puts each thread's share in its inbox under one lock and wakes it once
//! (a `mio::Waker`). A frame to send is encoded on the I/O thread by the connection's
//! codec (so a MESSAGE is encoded off Python's loop), with the negotiated version.
//!
//! **What stays Python's:** the version a CONNECT gets (the codec pauses after a CONNECT,
//! and frames pipelined behind it are decoded only after [`Command::AcceptConnect`]), what
//! every frame means, the ERROR frames' words, the heart-beat intervals
//! ([`Command::SetHeartbeat`]: the thread then writes EOLs when nothing was written for
//! `send_every` and reports [`Event::TtlExpired`] when nothing was read for
//! `expect_within`; Python answers with Artemis's AMQ229014 ERROR and closes), when to
//! stop reading ([`Command::PauseReading`]: the pipeline depth, paging's first burst) and
//! when to close ([`Command::Close`]: at once, or a lingering close after the outgoing
//! bytes, so that an ERROR frame is not lost to a reset when the peer sent bytes that
//! were never read).
//!
//! **What the threads enforce themselves**, from the listener's settings: the frame
//! limits (a [`Event::ProtocolError`]; nothing more is read), `connectionsAllowed` (one
//! more is accepted and closed at once: [`Event::Refused`]) and `handshake-timeout` (no
//! CONNECT in time: the listener's ERROR frame, then the close).
//!
//! **Not every connection is STOMP:** a listener may name hand-off prefixes (the cluster
//! links' magic, the HTTP methods of a WebSocket upgrade, as `transport/acceptor.py`
//! sniffs them). A connection whose first bytes start with one is handed to Python with
//! those bytes ([`Event::HandedOff`]: a socket, and a [`Lease`] that keeps it counted in
//! `connectionsAllowed`); one whose first bytes cannot start any is served as STOMP.
//!
//! **Back-pressure:** [`Conn::outgoing`] counts a connection's unwritten bytes (submitted
//! frames at an estimate until encoded), readable from Python's thread without a lock;
//! [`Conn::writable`] compares it with the high-water mark, and once it said no an
//! [`Event::Writable`] comes when the bytes drain to the low-water mark (see `Conn::writable`
//! for why that wake-up cannot be lost). Reading has its own: a paused connection's bytes
//! stay in the socket, so TCP's window stops the peer.
//!
//! **Faults stay with their connection:** every piece of work on a connection runs under
//! `catch_unwind`; a panic drops that connection only ([`CloseCause::Panic`]) and the
//! thread goes on. A read or write error closes the connection ([`CloseCause::Reset`]).
//! The peer closing its side does not: the frames it completed are reported, then
//! [`Event::InputEnded`] (with the bytes of a frame it left unfinished), and the socket
//! stays open until Python closes it, once what was read took effect (the node's contract:
//! a client that sees the close may count on its last ACKs).
//!
//! **Time:** each thread keeps a binary heap of deadlines (handshake, heart-beat, TTL,
//! close linger), cleaned lazily (`timers`): reads and writes only move a connection's
//! clock, and a deadline that comes early is re-armed at the true one. Idle connections
//! cost a heap pop and push per heart-beat interval and no wake-ups in between; a thread
//! with nothing due sleeps in `epoll_wait`.
//!
//! **Memory per idle connection** is kept small: reads go through the thread's one read
//! buffer, the outgoing buffer is freed when it empties after growing, and the codec
//! keeps only the capacity of what it last held (the `idle` example measures it).
//!
//! **TLS:** a listener with a [`TlsSpec`] (key material as DER, client auth, protocols,
//! cipher suites; [`tls`]) serves its connections over rustls: the socket sits behind a
//! small enum (`transport`) whose TLS variant has the same read/write/shutdown calls, the
//! handshake runs inside the first reads, within `handshake-timeout` (which then holds
//! again for the CONNECT), and a failed one closes the connection lingering with
//! [`CloseCause::Tls`] (the reason in the socket shell's words). [`DataPlane::set_tls`]
//! replaces a listener's material for new connections (`sslAutoReload`). A TLS
//! connection's hand-off cannot give Python the socket: it is relayed through a socket
//! pair ([`Event::Relayed`]).
//!
//! # A connection's life, as Python drives it
//!
//! 1. [`Event::Opened`] (keep the [`Conn`]), then [`Event::Frame`] with the CONNECT.
//! 2. Python authenticates and negotiates, then submits [`Command::AcceptConnect`],
//!    [`Command::Send`] of the CONNECTED and [`Command::SetHeartbeat`] together (or an
//!    ERROR and [`Command::Close`] with `flush`). The frames pipelined behind the CONNECT
//!    come next, decoded with the version accepted.
//! 3. Frames in, commands out. `Conn::writable` before delivering; [`Event::Writable`]
//!    to go on. [`Command::PauseReading`] when the pipeline is full.
//! 4. The end, whichever comes first: a [`Event::ProtocolError`] (answer with an ERROR,
//!    then close with `flush`), [`Event::TtlExpired`] (the AMQ229014 ERROR,
//!    [`Command::ReadRest`] for the last ACKs, then close), [`Event::InputEnded`] (settle
//!    what was read, then close), a DISCONNECT frame (its RECEIPT, then close), or the
//!    node stopping ([`Command::ReadRest`], settle, close). [`Event::Closed`] is the last
//!    event, and the only one after a reset or a panic.
//!
//! The Python binding is `artemis_py._native.DataPlane` (`rust/bindings/src/data_plane.rs`);
//! the Trio shell that serves a node's STOMP acceptors, plain TCP and TLS, through it (with
//! `ARTEMIS_PY_DATA_PLANE=1`) is `python/artemis_py/transport/plane.py`.

pub mod api;
pub mod config;
mod connection;
pub mod error;
mod notify;
pub mod plane;
mod timers;
pub mod tls;
mod transport;
mod worker;

pub use api::{CloseCause, Command, Conn, ConnId, Event, Lease, ListenerId};
pub use config::{Config, ListenerSpec};
pub use error::{Error, Result};
pub use plane::{DataPlane, Listening};
pub use stomp::{Frame, FrameLimits, Version};
pub use tls::{ClientAuth, TlsSpec};

/// I/O threads at most (a connection id has 8 bits for its thread).
pub const MAX_THREADS: usize = 256;
