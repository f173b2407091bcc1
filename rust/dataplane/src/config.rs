//! What a plane and each of its listeners are configured with.

use std::net::SocketAddr;
use std::time::Duration;

use stomp::FrameLimits;

/// The plane's own settings (every connection alike).
#[derive(Debug, Clone)]
pub struct Config {
    /// I/O threads; 0: one per available core.
    pub threads: usize,
    /// Outgoing bytes of one connection at or above which it is not writable
    /// ([`crate::Conn::writable`]); consumers stop taking messages for it. `transport/stomp.py`'s
    /// `HIGH_WATER`.
    pub high_water: usize,
    /// Outgoing bytes at or below which an unwritable connection is writable again
    /// ([`crate::Event::Writable`]).
    pub low_water: usize,
    /// Bytes asked of the socket by one read (into the thread's one read buffer).
    pub read_chunk: usize,
    /// Bytes read from one connection per wake-up at most, so one fast sender cannot
    /// starve the others of its thread; the rest is read on the next pass of the loop.
    pub read_budget: usize,
    /// How long a [`crate::Command::Close`] with `flush` waits for the outgoing bytes to be
    /// written and the peer to close its side before the connection is closed anyway
    /// (`transport/stomp.py` waits 5 s for the bytes).
    pub close_linger: Duration,
    /// Bytes [`crate::Command::ReadRest`] reads at most (`LAST_READ_LIMIT`).
    pub last_read_limit: usize,
    /// Events queued for Python at which the I/O threads stop decoding and reading (the
    /// rest waits in the codecs and the sockets, TCP's window stops the peers) until
    /// Python drains: a busy or paused loop cannot make the queue grow without bound. Each
    /// thread may pass it by one pass's events at most.
    pub max_queued_events: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            threads: 0,
            high_water: 1 << 20,
            low_water: 1 << 18,
            read_chunk: 1 << 16,
            read_budget: 1 << 18,
            close_linger: Duration::from_secs(5),
            last_read_limit: 1 << 20,
            max_queued_events: 1 << 16,
        }
    }
}

impl Config {
    /// The number of I/O threads to start.
    pub fn thread_count(&self) -> usize {
        if self.threads > 0 {
            return self.threads.min(crate::MAX_THREADS);
        }
        std::thread::available_parallelism()
            .map_or(1, std::num::NonZeroUsize::get)
            .min(crate::MAX_THREADS)
    }
}

/// One listening socket: an acceptor's host and port with its STOMP parameters.
#[derive(Debug, Clone)]
pub struct ListenerSpec {
    /// Port 0: any free port ([`crate::Listening::local_addr`] says which).
    pub addr: SocketAddr,
    /// The acceptor's `stompMax*` limits, enforced by each connection's decoder.
    pub limits: FrameLimits,
    /// `connectionsAllowed`: connections open at once; -1 unlimited. One more is accepted
    /// and closed at once ([`crate::Event::Refused`]).
    pub connections_allowed: i64,
    /// `handshake-timeout`: the CONNECT frame must have arrived within it (None: no limit).
    pub handshake_timeout: Option<Duration>,
    /// The `message` of the ERROR frame written when `handshake_timeout` passes (Python
    /// chooses the words); None closes without one.
    pub handshake_error: Option<String>,
    /// `tcpSendBufferSize` / `tcpReceiveBufferSize` (`SO_SNDBUF`/`SO_RCVBUF`), set on the
    /// listening socket so accepted connections inherit them; None: the system's.
    pub tcp_send_buffer: Option<usize>,
    pub tcp_receive_buffer: Option<usize>,
    /// First bytes that make a connection Python's ([`crate::Event::HandedOff`]): the
    /// cluster links' magic, the HTTP methods of a WebSocket upgrade. A connection is
    /// served as STOMP as soon as its first bytes cannot start any of them; until then (a
    /// few bytes) nothing is decoded. Empty: every connection is STOMP.
    pub handoff_prefixes: Vec<Vec<u8>>,
    /// TLS (`sslEnabled=true`): the listener's key material and settings; None: plain TCP.
    /// A connection with a hand-off prefix is relayed to Python ([`crate::Event::Relayed`]).
    pub tls: Option<crate::TlsSpec>,
}

impl ListenerSpec {
    /// A listener on `addr` with the default limits and no other bound.
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            limits: FrameLimits::default(),
            connections_allowed: -1,
            handshake_timeout: None,
            handshake_error: None,
            tcp_send_buffer: None,
            tcp_receive_buffer: None,
            handoff_prefixes: Vec::new(),
            tls: None,
        }
    }
}
