//! What the data plane's tests share: a plane on 127.0.0.1 port 0, an event collector that
//! waits on the eventfd with a deadline, and a blocking STOMP client on a std socket.
#![allow(dead_code)] // each test binary uses a part
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use dataplane::{Command, Config, Conn, DataPlane, Event, ListenerSpec, Version};
use stomp::{Decoder, Frame, FrameLimits, Item, Role};

/// How long any awaited event may take (generous: the machine is shared).
pub const PATIENCE: Duration = Duration::from_secs(10);

/// A plane with `threads` I/O threads and one listener made by `spec`.
pub fn plane(
    config: Config,
    spec: impl FnOnce(&mut ListenerSpec),
) -> (DataPlane, SocketAddr, Events) {
    let plane = DataPlane::start(config).unwrap();
    let mut listener = ListenerSpec::new("127.0.0.1:0".parse().unwrap());
    spec(&mut listener);
    let listening = plane.listen(listener).unwrap();
    (plane, listening.local_addr, Events::default())
}

pub fn two_threads() -> Config {
    Config {
        threads: 2,
        ..Config::default()
    }
}

/// Events drained so far and not yet looked at, in arrival order.
#[derive(Default)]
pub struct Events {
    pub queue: VecDeque<Event>,
    pub drains: usize,
}

impl Events {
    /// Drains once, waiting at most `timeout` for events; whether any came.
    pub fn pull(&mut self, plane: &DataPlane, timeout: Duration) -> bool {
        if !plane.wait(timeout) {
            return false;
        }
        let mut batch = Vec::new();
        plane.drain(&mut batch);
        self.drains += 1;
        let any = !batch.is_empty();
        self.queue.extend(batch);
        any
    }

    /// The first event (in arrival order) that `pred` accepts, waiting for it.
    pub fn next(&mut self, plane: &DataPlane, what: &str, pred: impl Fn(&Event) -> bool) -> Event {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(at) = self.queue.iter().position(&pred) {
                return self.queue.remove(at).unwrap();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "no {what} within {PATIENCE:?}; got {:?}",
                self.queue
            );
            self.pull(plane, left);
        }
    }

    /// Asserts that nothing `pred` accepts arrives within `window` (a negative check: it
    /// can only miss a bug, never fail a correct plane).
    pub fn none_within(
        &mut self,
        plane: &DataPlane,
        window: Duration,
        pred: impl Fn(&Event) -> bool,
    ) {
        let deadline = Instant::now() + window;
        loop {
            assert!(
                !self.queue.iter().any(&pred),
                "unexpected: {:?}",
                self.queue
            );
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            self.pull(plane, left);
        }
    }

    pub fn opened(&mut self, plane: &DataPlane) -> Conn {
        match self.next(plane, "Opened", |e| matches!(e, Event::Opened { .. })) {
            Event::Opened { conn, .. } => conn,
            _ => unreachable!(),
        }
    }

    pub fn frame(&mut self, plane: &DataPlane, conn: &Conn) -> Frame {
        let id = conn.id();
        match self.next(
            plane,
            "a frame",
            |e| matches!(e, Event::Frame { conn, .. } if *conn == id),
        ) {
            Event::Frame { frame, .. } => frame,
            _ => unreachable!(),
        }
    }

    pub fn protocol_error(&mut self, plane: &DataPlane, conn: &Conn) -> stomp::Error {
        let id = conn.id();
        let wanted = |e: &Event| matches!(e, Event::ProtocolError { conn, .. } if *conn == id);
        match self.next(plane, "ProtocolError", wanted) {
            Event::ProtocolError { error, .. } => error,
            _ => unreachable!(),
        }
    }

    /// The bytes of an unfinished frame [`Event::InputEnded`] reports.
    pub fn input_ended(&mut self, plane: &DataPlane, conn: &Conn) -> usize {
        let id = conn.id();
        let wanted = |e: &Event| matches!(e, Event::InputEnded { conn, .. } if *conn == id);
        match self.next(plane, "InputEnded", wanted) {
            Event::InputEnded { unread, .. } => unread,
            _ => unreachable!(),
        }
    }

    pub fn closed(&mut self, plane: &DataPlane, conn: &Conn) -> dataplane::CloseCause {
        let id = conn.id();
        match self.next(
            plane,
            "Closed",
            |e| matches!(e, Event::Closed { conn, .. } if *conn == id),
        ) {
            Event::Closed { cause, .. } => cause,
            _ => unreachable!(),
        }
    }
}

pub fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect()
}

pub fn frame(command: stomp::Command, pairs: &[(&str, &str)], body: &[u8]) -> Frame {
    Frame::new(command, headers(pairs), body.to_vec())
}

/// A blocking STOMP client on a std socket, decoding what the server sends.
pub struct Client {
    pub stream: TcpStream,
    decoder: Decoder,
    pub heartbeats: Vec<Instant>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        stream.set_nodelay(true).unwrap();
        Self {
            stream,
            decoder: Decoder::new(FrameLimits::default(), Role::Server),
            heartbeats: Vec::new(),
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// The next frame (heart-beats noted on the way), or None at the end of the stream.
    pub fn frame(&mut self) -> Option<Frame> {
        let mut buf = [0u8; 4096];
        loop {
            match self.decoder.next_item(Some(stomp::Version::V12)).unwrap() {
                Some(Item::Frame(frame)) => return Some(frame),
                Some(Item::Heartbeat) => {
                    self.heartbeats.push(Instant::now());
                    continue;
                }
                None => {}
            }
            let n = self.stream.read(&mut buf).unwrap();
            if n == 0 {
                return None;
            }
            self.decoder.feed(&buf[..n]);
        }
    }

    /// Expects the server to have closed: the end of the stream (or a reset), no bytes;
    /// then closes, as a client does when it sees the end.
    pub fn expect_eof(mut self) {
        let mut buf = [0u8; 4096];
        match self.stream.read(&mut buf) {
            Ok(0) => {}
            Ok(n) => panic!(
                "expected the end, got {:?}",
                String::from_utf8_lossy(&buf[..n])
            ),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!("expected the end, got {e}"),
        }
    }

    /// Reads heart-beats until the server closes (nothing else may come), then closes.
    pub fn beats_until_eof(mut self) {
        let mut buf = [0u8; 256];
        loop {
            let n = self.stream.read(&mut buf).unwrap();
            if n == 0 {
                return;
            }
            assert!(buf[..n].iter().all(|&b| b == b'\n'), "{:?}", &buf[..n]);
        }
    }

    /// Waits for `count` heart-beat EOLs (nothing else may come).
    pub fn heartbeats(&mut self, count: usize) {
        let mut buf = [0u8; 1];
        while self.heartbeats.len() < count {
            let n = self.stream.read(&mut buf).unwrap();
            assert_eq!(n, 1, "the end of the stream instead of a heart-beat");
            assert_eq!(buf[0], b'\n', "a heart-beat is an EOL");
            self.heartbeats.push(Instant::now());
        }
    }
}

/// A CONNECT frame's bytes offering `versions`.
pub fn connect_bytes(versions: &str) -> Vec<u8> {
    format!("CONNECT\naccept-version:{versions}\nhost:localhost\n\n\0").into_bytes()
}

/// Connects a client and completes the STOMP 1.2 handshake as Python would: the CONNECT
/// reported, accepted, CONNECTED sent and read.
pub fn connected(plane: &DataPlane, addr: SocketAddr, events: &mut Events) -> (Client, Conn) {
    let mut client = Client::connect(addr);
    client.send(&connect_bytes("1.1,1.2"));
    let conn = events.opened(plane);
    let connect = events.frame(plane, &conn);
    assert_eq!(connect.command, stomp::Command::Connect);
    accept(plane, &conn);
    let connected = client.frame().unwrap();
    assert_eq!(connected.command, stomp::Command::Connected);
    (client, conn)
}

pub fn accept(plane: &DataPlane, conn: &Conn) {
    plane.submit([
        Command::AcceptConnect {
            conn: conn.clone(),
            version: Version::V12,
        },
        Command::Send {
            conn: conn.clone(),
            frame: frame(stomp::Command::Connected, &[("version", "1.2")], b""),
        },
    ]);
}
