//! What crosses between Python's thread and the I/O threads: connection handles, the
//! events the threads report and the commands they carry out.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use stomp::{Frame, Version};

/// A connection's id, unique in its plane: its I/O thread (low 8 bits), its slot in that
/// thread (next 24) and a sequence number (high 32) that tells reuses of a slot apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

impl ConnId {
    pub(crate) fn new(thread: usize, slot: usize, seq: u32) -> Self {
        ConnId((u64::from(seq) << 32) | ((slot as u64 & 0xFF_FFFF) << 8) | (thread as u64 & 0xFF))
    }

    /// The index of the I/O thread that serves the connection.
    pub fn thread(self) -> usize {
        (self.0 & 0xFF) as usize
    }

    pub(crate) fn slot(self) -> usize {
        ((self.0 >> 8) & 0xFF_FFFF) as usize
    }
}

/// A listener's id, as [`crate::DataPlane::listen`] returned it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ListenerId(pub u32);

/// What Python's thread and the connection's I/O thread share: the outgoing byte count,
/// read and written without a lock.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) id: ConnId,
    /// Bytes submitted (estimated until encoded) or buffered, and not yet written.
    pub(crate) outgoing: AtomicUsize,
    /// Someone found the connection unwritable: report [`Event::Writable`] once it drains.
    pub(crate) wants_writable: AtomicBool,
    pub(crate) high_water: usize,
    pub(crate) low_water: usize,
}

/// A handle on one connection: what commands address, cheap to clone. [`Event::Opened`]
/// hands it out; the binding keeps it with the connection's Python object.
#[derive(Debug, Clone)]
pub struct Conn(pub(crate) Arc<Shared>);

impl Conn {
    pub(crate) fn new(id: ConnId, high_water: usize, low_water: usize) -> Self {
        Conn(Arc::new(Shared {
            id,
            outgoing: AtomicUsize::new(0),
            wants_writable: AtomicBool::new(false),
            high_water,
            low_water,
        }))
    }

    pub fn id(&self) -> ConnId {
        self.0.id
    }

    /// Outgoing bytes not yet written: what the I/O thread buffers, plus an estimate of
    /// the frames submitted and not yet encoded.
    pub fn outgoing(&self) -> usize {
        self.0.outgoing.load(Ordering::SeqCst)
    }

    /// Whether the outgoing bytes are below the high-water mark. When they are not, an
    /// [`Event::Writable`] comes once they drop to the low-water mark (a writable answer
    /// may be followed by one too: harmless).
    ///
    /// Why no wake-up is lost: this stores `wants_writable` and then reads `outgoing`;
    /// the I/O thread lowers `outgoing` and then reads `wants_writable` (all `SeqCst`). In
    /// the one total order either this read sees the lowered count (and answers writable)
    /// or the thread's read sees the flag (and reports the event).
    pub fn writable(&self) -> bool {
        let shared = &self.0;
        if shared.outgoing.load(Ordering::SeqCst) < shared.high_water {
            return true;
        }
        shared.wants_writable.store(true, Ordering::SeqCst);
        shared.outgoing.load(Ordering::SeqCst) < shared.high_water
    }
}

/// A handed-off connection's place in its listener's `connectionsAllowed`: held by Python
/// while it serves the connection, dropped when that ends.
#[derive(Debug)]
pub struct Lease {
    /// Counted out of the listener when dropped.
    pub(crate) _slot: crate::connection::OpenSlot,
}

/// Why a connection closed; [`Event::Closed`] is its last event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseCause {
    /// A read or write failed (a reset, a broken pipe): the error's text.
    Reset(String),
    /// `handshake-timeout` passed without a CONNECT frame.
    HandshakeTimeout,
    /// [`Command::Close`] (after its bytes were written, if it asked for that).
    Requested,
    /// [`Command::Close`] with `flush`, but the bytes were not written within
    /// [`crate::Config::close_linger`] (a peer that does not read).
    FlushTimeout,
    /// The TLS handshake failed or did not end within `handshake-timeout`: why, in the
    /// socket shell's words (`tls_contexts.handshake_failure`). Reported when it failed;
    /// the socket's lingering close goes on after that, in silence (it counts towards
    /// `connectionsAllowed` until the socket is closed).
    Tls(String),
    /// Handling the connection panicked (the panic's message); only it was dropped.
    Panic(String),
    /// The plane stopped.
    Shutdown,
}

/// What an I/O thread reports. A connection's events come in the order they happened,
/// from [`Event::Opened`] to [`Event::Closed`]; events of different connections interleave.
#[derive(Debug)]
pub enum Event {
    /// A connection was accepted (and counts towards `connectionsAllowed` until closed).
    Opened {
        conn: Conn,
        listener: ListenerId,
        peer: SocketAddr,
    },
    /// A complete frame, decoded with the connection's negotiated version. After a CONNECT
    /// (or STOMP) frame, nothing more is decoded until [`Command::AcceptConnect`].
    Frame { conn: ConnId, frame: Frame },
    /// The peer broke the protocol (a malformed or oversized frame, a frame out of order).
    /// Nothing more is read; answer with an ERROR frame and [`Command::Close`].
    ProtocolError { conn: ConnId, error: stomp::Error },
    /// A command could not be carried out (a frame the codec refuses to send now, a
    /// version the CONNECT did not offer): the codec's local error.
    CommandFailed { conn: ConnId, error: stomp::Error },
    /// The outgoing bytes dropped to the low-water mark after [`Conn::writable`] said no.
    Writable { conn: ConnId },
    /// Nothing was read within the heart-beat TTL ([`Command::SetHeartbeat`]): answer
    /// with Artemis's AMQ229014 ERROR and close. Reported once.
    TtlExpired { conn: ConnId, silent_for: Duration },
    /// [`Command::ReadRest`] is done: the frames the socket held came before this.
    RestRead { conn: ConnId },
    /// The peer closed its side: every frame it completed was reported before this, and
    /// `unread` bytes of a frame it did not finish were dropped (0: it ended between
    /// frames). The connection stays open for writing until [`Command::Close`]: Python
    /// closes it once what was read took effect (the last ACKs durable, so a client that
    /// sees the close may count on them: `tests/integration/test_acks_on_close.py`), and a
    /// half-closed client still gets its last RECEIPTs.
    InputEnded { conn: ConnId, unread: usize },
    /// The connection is gone; commands for it are ignored from now on. (After a failed
    /// TLS handshake its socket may still linger, see [`CloseCause::Tls`].)
    Closed { conn: ConnId, cause: CloseCause },
    /// The connection's first bytes started with one of the listener's hand-off prefixes
    /// (a cluster link, an HTTP request): it is Python's from now on, as a non-blocking
    /// socket with the bytes read from it so far. It counts towards `connectionsAllowed`
    /// until `lease` is dropped. The connection's last event, like [`Event::Closed`].
    HandedOff {
        conn: ConnId,
        stream: std::net::TcpStream,
        initial: Vec<u8>,
        lease: Lease,
    },
    /// A TLS connection's first bytes started with one of the listener's hand-off prefixes:
    /// Python serves it through `stream`, one end of a Unix socket pair (non-blocking), whose
    /// other end the I/O thread relays to and from the TLS session (`initial`: the plaintext
    /// read so far). The connection keeps its place in `connectionsAllowed` and ends with
    /// [`Event::Closed`] once Python closed its end or the client left.
    Relayed {
        conn: ConnId,
        stream: std::os::unix::net::UnixStream,
        initial: Vec<u8>,
    },
    /// A connection over `connectionsAllowed` was accepted and closed at once.
    Refused {
        listener: ListenerId,
        peer: SocketAddr,
    },
}

impl Event {
    /// The connection the event is about (None for [`Event::Refused`]).
    pub fn conn(&self) -> Option<ConnId> {
        match self {
            Event::Opened { conn, .. } => Some(conn.id()),
            Event::Frame { conn, .. }
            | Event::ProtocolError { conn, .. }
            | Event::CommandFailed { conn, .. }
            | Event::Writable { conn }
            | Event::TtlExpired { conn, .. }
            | Event::RestRead { conn }
            | Event::InputEnded { conn, .. }
            | Event::HandedOff { conn, .. }
            | Event::Relayed { conn, .. }
            | Event::Closed { conn, .. } => Some(*conn),
            Event::Refused { .. } => None,
        }
    }
}

/// What Python asks of a connection's I/O thread ([`crate::DataPlane::submit`]).
#[derive(Debug)]
pub enum Command {
    /// Fix the version the CONNECT negotiated (Python chose it) and go on decoding.
    AcceptConnect {
        conn: Conn,
        version: Version,
    },
    /// Encode a frame with the connection's codec (its version, its state checks) and
    /// write it. A refusal is an [`Event::CommandFailed`].
    Send {
        conn: Conn,
        frame: Frame,
    },
    /// Encode only a frame's head (command, headers, blank line): its body, of
    /// `body_length` bytes (its `content-length`), and the closing NUL follow as
    /// [`Command::SendBytes`] (a large message's body streamed from its file, in pieces
    /// paced by [`Conn::writable`]). `frame.body` must be empty.
    SendHead {
        conn: Conn,
        frame: Frame,
        body_length: u64,
    },
    /// Write bytes encoded already.
    SendBytes {
        conn: Conn,
        bytes: Vec<u8>,
    },
    /// Write a heart-beat (an EOL) whenever nothing was written for `send_every`, and
    /// report [`Event::TtlExpired`] when nothing was read for `expect_within`. None turns
    /// either off; a new command replaces the old settings.
    SetHeartbeat {
        conn: Conn,
        send_every: Option<Duration>,
        expect_within: Option<Duration>,
    },
    /// Stop reading: no more frames; what the peer sends stays in the socket (TCP's
    /// window then stops it). The TTL does not run while reading is paused.
    PauseReading {
        conn: Conn,
    },
    ResumeReading {
        conn: Conn,
    },
    /// Read what the socket holds now, without waiting, at most
    /// [`crate::Config::last_read_limit`] bytes, even while paused; report its complete
    /// frames, then [`Event::RestRead`] (a closing connection's last ACKs).
    ReadRest {
        conn: Conn,
    },
    /// Close at once, or (`flush`) once the outgoing bytes are written and the peer has
    /// closed its side after reading them (a lingering close: our side is shut and what
    /// still comes in is dropped, so no reset throws the last bytes away), all within
    /// [`crate::Config::close_linger`]. No frame is reported after it.
    Close {
        conn: Conn,
        flush: bool,
    },
    /// Test hook: panics on the connection's I/O thread (containment is tested with it).
    #[doc(hidden)]
    InjectPanic {
        conn: Conn,
    },
}

impl Command {
    pub(crate) fn conn(&self) -> &Conn {
        match self {
            Command::AcceptConnect { conn, .. }
            | Command::Send { conn, .. }
            | Command::SendHead { conn, .. }
            | Command::SendBytes { conn, .. }
            | Command::SetHeartbeat { conn, .. }
            | Command::PauseReading { conn }
            | Command::ResumeReading { conn }
            | Command::ReadRest { conn }
            | Command::Close { conn, .. }
            | Command::InjectPanic { conn } => conn,
        }
    }

    /// The outgoing bytes the command adds before it is carried out: exact for bytes, an
    /// upper-bound-ish estimate for a frame (escaping may add a little); the I/O thread
    /// replaces it with the encoded length.
    pub(crate) fn estimate(&self) -> usize {
        match self {
            Command::Send { frame, .. } | Command::SendHead { frame, .. } => {
                let headers: usize = frame
                    .headers
                    .iter()
                    .map(|(n, v)| n.len() + v.len() + 2)
                    .sum();
                frame.command.as_str().len() + headers + frame.body.len() + 3
            }
            Command::SendBytes { bytes, .. } => bytes.len(),
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_carries_its_thread_and_slot() {
        let id = ConnId::new(5, 0xAB_CDEF, 0xFFFF_FFFF);
        assert_eq!((id.thread(), id.slot()), (5, 0xAB_CDEF));
        assert_ne!(
            id,
            ConnId::new(5, 0xAB_CDEF, 1),
            "a reused slot gets another id"
        );
    }

    #[test]
    fn writable_below_the_high_water_mark_and_the_flag_set_at_it() {
        let conn = Conn::new(ConnId(1), 100, 10);
        assert!(conn.writable());
        conn.0.outgoing.store(100, Ordering::SeqCst);
        assert!(!conn.writable());
        assert!(conn.0.wants_writable.load(Ordering::SeqCst));
    }
}
