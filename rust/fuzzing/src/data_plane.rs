//! Fuzz target of the data plane's batch handoff (`rust/dataplane`): the fuzzer's bytes go
//! through a real plane, as a client's over loopback TCP, and the conversation must be what
//! the STOMP codec alone makes of them.
//!
//! The input is the STOMP targets' (their corpus `fuzz/corpus/stomp_server` is shared): the
//! first byte picks the size of the pieces the client writes (`% 17 + 1`), the rest is what
//! it sends before closing its side. The plane is one per process (two I/O threads, reads of
//! a few bytes and a tiny event queue, so every input is cut into pieces, decoded across
//! them and held back for room), and the harness plays Python: it drains the events in
//! batches, answers the first CONNECT with the version the node would choose (and
//! CONNECTED), and each frame after it with a RECEIPT, all through `submit`.
//!
//! Asserted, for every input: the plane reports the frames the codec decodes from the whole
//! input at once (up to a DISCONNECT, after which the plane reads nothing), and then the
//! same end: the protocol error (its kind), no common version, or the end of the input with
//! the same count of unfinished bytes; no command is refused; and the client reads back
//! CONNECTED and every RECEIPT, in order, then the end of the stream.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use dataplane::{Command, Config, Conn, ConnId, DataPlane, Event, ListenerSpec};
use stomp::{
    negotiate_version, Command as Verb, Connection, Decoder, ErrorKind, Frame, FrameLimits, Item,
    Role,
};

use crate::stomp::LIMITS;

/// How long the plane may take to report anything (generous: the machine may be busy).
const PATIENCE: Duration = Duration::from_secs(20);

/// How a conversation ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// The client sent DISCONNECT: nothing after it is read.
    Disconnect,
    /// The CONNECT offered no version the node speaks.
    NoVersion,
    /// The client broke the protocol.
    Error(ErrorKind),
    /// The client closed its side, leaving `unread` bytes of an unfinished frame.
    Input { unread: usize },
}

#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    frames: Vec<Frame>,
    end: End,
}

/// What the codec alone makes of `stream`, read at once, answered as the harness answers.
fn expected(stream: &[u8]) -> Outcome {
    let mut codec = Connection::new(Role::Server, LIMITS);
    if !stream.is_empty() {
        // (empty data would be the end of the stream)
        codec
            .receive_data(stream)
            .expect("the stream has not ended");
    }
    let mut frames: Vec<Frame> = Vec::new();
    let end = loop {
        match codec.next_event() {
            Ok(stomp::Event::Frame(frame)) => {
                let disconnect = frame.command == Verb::Disconnect;
                frames.push(frame);
                if disconnect {
                    break End::Disconnect;
                }
            }
            Ok(stomp::Event::Paused) => {
                let offered = frames
                    .iter()
                    .rev()
                    .find(|f| f.command.is_connect())
                    .and_then(|f| f.get("accept-version"));
                let Some(version) = negotiate_version(offered) else {
                    break End::NoVersion;
                };
                codec
                    .accept_connect(version.as_str())
                    .expect("a negotiated version is accepted");
            }
            Ok(stomp::Event::NeedData) => {
                break End::Input {
                    unread: codec.buffered(),
                }
            }
            Ok(stomp::Event::Heartbeat) => {}
            Ok(stomp::Event::ConnectionClosed) => unreachable!("the end was never fed"),
            Err(error) => break End::Error(error.kind),
        }
    };
    Outcome { frames, end }
}

struct Harness {
    plane: DataPlane,
    addr: SocketAddr,
}

/// The process's plane; one conversation at a time (`cargo test` runs targets in parallel).
fn harness() -> &'static Mutex<Harness> {
    static HARNESS: OnceLock<Mutex<Harness>> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let plane = DataPlane::start(Config {
            threads: 2,
            read_chunk: 5,
            read_budget: 23,
            max_queued_events: 3,
            close_linger: Duration::from_secs(2),
            ..Config::default()
        })
        .expect("a plane starts");
        let mut spec = ListenerSpec::new(SocketAddr::from(([127, 0, 0, 1], 0)));
        spec.limits = LIMITS;
        let addr = plane.listen(spec).expect("listen").local_addr;
        Mutex::new(Harness { plane, addr })
    })
}

/// The next batch of events (waiting for one), or a panic after [`PATIENCE`].
fn drain(plane: &DataPlane, what: &str) -> Vec<Event> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "the plane reported nothing while {what}");
        if plane.wait(left) {
            let mut batch = Vec::new();
            plane.drain(&mut batch);
            if !batch.is_empty() {
                return batch;
            }
        }
    }
}

fn frame(command: Verb, headers: &[(&str, &str)]) -> Frame {
    let headers = headers
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Frame::new(command, headers, Vec::new())
}

/// Plays Python for one connection until its conversation ends: the outcome, and the
/// frames sent to the client. What one batch of events asks for goes in one submit.
fn serve(plane: &DataPlane) -> (Conn, Outcome, Vec<Frame>) {
    let mut conn: Option<Conn> = None;
    let (mut frames, mut sent) = (Vec::new(), Vec::new());
    let mut accepted = false;
    loop {
        let mut commands = Vec::new();
        let mut end = None;
        for event in drain(plane, "the client talked") {
            end = match event {
                Event::Opened { conn: opened, .. } => {
                    assert!(conn.is_none(), "two connections at once");
                    conn = Some(opened);
                    None
                }
                Event::Frame { frame: got, .. } => {
                    let this = conn.as_ref().expect("Opened comes first");
                    let end = answer(this, &got, &mut accepted, &mut sent, &mut commands);
                    frames.push(got);
                    end
                }
                Event::ProtocolError { error, .. } => Some(End::Error(error.kind)),
                Event::InputEnded { unread, .. } => Some(End::Input { unread }),
                Event::Writable { .. } => None,
                other => panic!("unexpected while reading: {other:?}"),
            };
            if end.is_some() {
                break; // (the batch holds nothing more of this connection)
            }
        }
        plane.submit(commands);
        if let Some(end) = end {
            let conn = conn.expect("Opened comes first");
            return (conn, Outcome { frames, end }, sent);
        }
    }
}

/// Answers one frame as the node would (the codec's part of it): the first CONNECT gets
/// the version and CONNECTED, every later frame a RECEIPT. Some end if the frame ends it.
fn answer(
    conn: &Conn,
    got: &Frame,
    accepted: &mut bool,
    sent: &mut Vec<Frame>,
    commands: &mut Vec<Command>,
) -> Option<End> {
    let reply = if got.command.is_connect() && !*accepted {
        let Some(version) = negotiate_version(got.get("accept-version")) else {
            return Some(End::NoVersion);
        };
        *accepted = true;
        commands.push(Command::AcceptConnect {
            conn: conn.clone(),
            version,
        });
        Some(frame(Verb::Connected, &[("version", version.as_str())]))
    } else if *accepted {
        Some(frame(
            Verb::Receipt,
            &[("receipt-id", &sent.len().to_string())],
        ))
    } else {
        None // (before the CONNECT nothing may be sent: the node refuses it)
    };
    if let Some(reply) = reply {
        sent.push(reply.clone());
        commands.push(Command::Send {
            conn: conn.clone(),
            frame: reply,
        });
    }
    (got.command == Verb::Disconnect).then_some(End::Disconnect)
}

/// Closes `conn` (flushing) and waits for its Closed, failing on any other event.
fn close(plane: &DataPlane, conn: &Conn) {
    plane.submit([Command::Close {
        conn: conn.clone(),
        flush: true,
    }]);
    let id: ConnId = conn.id();
    loop {
        for event in drain(plane, "the connection closed") {
            match event {
                Event::Closed { conn, .. } if conn == id => return,
                Event::CommandFailed { error, .. } => panic!("a command was refused: {error}"),
                // Anything read before the close took effect (the input's end, frames
                // after it) is dropped, as Python does once it closes.
                Event::Frame { .. }
                | Event::ProtocolError { .. }
                | Event::InputEnded { .. }
                | Event::Writable { .. } => {}
                other => panic!("unexpected while closing: {other:?}"),
            }
        }
    }
}

/// Every frame the client reads until the server's end of the stream.
fn read_back(mut client: TcpStream) -> Vec<Frame> {
    client
        .set_read_timeout(Some(PATIENCE))
        .expect("a read timeout");
    let mut bytes = Vec::new();
    // The plane resets the connection if the client is still writing when the linger
    // passes (a lingering close): what came before the reset was read already.
    let _ = client.read_to_end(&mut bytes);
    let mut decoder = Decoder::any(FrameLimits::default());
    decoder.feed(&bytes);
    let mut frames = Vec::new();
    while let Ok(Some(item)) = decoder.next_item(None) {
        if let Item::Frame(frame) = item {
            frames.push(frame);
        }
    }
    assert_eq!(
        decoder.buffered(),
        0,
        "a torn frame at the end of {bytes:?}"
    );
    frames
}

/// Fuzz target: see the module's documentation.
pub fn data_plane(data: &[u8]) {
    let Some((&first, stream)) = data.split_first() else {
        return;
    };
    let want = expected(stream);
    let harness = harness().lock().unwrap_or_else(PoisonError::into_inner);
    let plane = &harness.plane;
    let client = TcpStream::connect(harness.addr).expect("connect");
    client.set_nodelay(true).expect("nodelay");
    // Written whole before the plane is served: inputs are small (libFuzzer's default
    // 4 KiB at most), so the sockets' buffers take them even if the plane stops reading.
    let size = usize::from(first) % 17 + 1;
    let mut writer = &client;
    for piece in stream.chunks(size) {
        if writer.write_all(piece).is_err() {
            break; // the plane stopped reading and closed
        }
    }
    let _ = client.shutdown(Shutdown::Write);
    let (conn, outcome, sent) = serve(plane);
    close(plane, &conn);
    let received = read_back(client);
    assert_eq!(outcome, want, "the plane's conversation is not the codec's");
    assert_eq!(
        received, sent,
        "the client did not read what was sent, in order"
    );
}
