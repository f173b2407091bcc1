//! Fuzz targets of the STOMP codec (`rust/stomp`), the inputs those of the Python targets
//! (`tests/fuzz/targets.py`, whose corpora `fuzz/corpus/stomp_server` and `stomp_client` are
//! shared): the first byte picks a drip-feed piece size (`% 17 + 1`), the rest is what the
//! peer sends.
//!
//! Each target decodes the stream in its role with small limits (so inputs of a few hundred
//! bytes reach every limit check), whole and drip-fed, one event at a time and in batches, and
//! asserts: no panic; the same events, states and error whatever the cut; every decoded frame
//! that the strict encoder accepts re-encodes to bytes that decode to the same frame.

use stomp::{
    encode_frame, negotiate_version, Command, Connection, Decoder, Error, ErrorKind, Event, Frame,
    FrameLimits, Item, Outgoing, Role, Rules, State, Stop, Version,
};

/// The Python targets' limits (the data plane's target reads with them too).
pub(crate) const LIMITS: FrameLimits = FrameLimits {
    max_command_length: 32,
    max_header_line_length: 200,
    max_header_count: 12,
    max_header_bytes: 600,
    max_body_size: 2000,
};

/// What of one conversation must not depend on the cut: the frames (with the version they
/// were read under), heart-beats, the end, whether it failed and whose fault that was, the
/// states after. Not the error's message: a frame breaking two limits at once names the one
/// its bytes reached first (a header line too long, or the headers too large while that
/// line still grows), as the Python codec did (`tests/oracle`; the differential tests hold
/// the messages to it for every cut).
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    events: Vec<(Option<Version>, Event)>,
    error: Option<ErrorKind>,
    states: (State, State, Option<Version>),
}

/// Answers a CONNECT the way the node does: the best common version and CONNECTED, or an
/// ERROR frame and the end when there is none.
fn accept(conn: &mut Connection, connect: Option<&Frame>) -> Result<(), Error> {
    let offered = connect.and_then(|frame| frame.get("accept-version"));
    let mut out = Vec::new();
    let Some(version) = negotiate_version(offered) else {
        let refusal = [("message", "no common STOMP version")];
        conn.send(&mut out, &Outgoing::new(Command::Error, &refusal, b""))?;
        return Err(Error {
            kind: ErrorKind::Remote,
            message: "no common STOMP version".to_owned(),
            error_headers: Vec::new(),
        });
    };
    conn.accept_connect(version.as_str())?;
    let headers = [("version", version.as_str())];
    conn.send(&mut out, &Outgoing::new(Command::Connected, &headers, b""))
}

fn connection(role: Role) -> Connection {
    let mut conn = Connection::new(role, LIMITS);
    if role == Role::Client {
        let connect = [("accept-version", "1.0,1.1,1.2"), ("host", "h")];
        conn.send(
            &mut Vec::new(),
            &Outgoing::new(Command::Connect, &connect, b""),
        )
        .expect("a CONNECT is sendable first");
    }
    conn
}

type Events = Vec<(Option<Version>, Event)>;

fn last_connect(events: &Events) -> Option<&Frame> {
    events.iter().rev().find_map(|(_, event)| match event {
        Event::Frame(frame) if frame.command.is_connect() => Some(frame),
        _ => None,
    })
}

/// The next events: one (with the version it was read under) or a batch (without).
fn step(conn: &mut Connection, batch: bool, events: &mut Events) -> Result<Stop, Error> {
    if batch {
        let mut got = Vec::new();
        let result = conn.next_events(&mut got);
        events.extend(got.into_iter().map(|event| (None, event)));
        return result;
    }
    loop {
        let version = conn.version(); // what the next frame is read under
        match conn.next_event()? {
            Event::NeedData => return Ok(Stop::NeedData),
            Event::Paused => return Ok(Stop::Paused),
            Event::ConnectionClosed => {
                events.push((version, Event::ConnectionClosed));
                return Ok(Stop::Closed);
            }
            event => events.push((version, event)),
        }
    }
}

fn talk<'a>(
    conn: &mut Connection,
    pieces: impl Iterator<Item = &'a [u8]>,
    batch: bool,
    events: &mut Events,
) -> Result<(), Error> {
    for piece in pieces.filter(|p| !p.is_empty()).chain([&b""[..]]) {
        conn.receive_data(piece)?;
        loop {
            match step(conn, batch, events)? {
                Stop::NeedData => break,
                Stop::Closed => return Ok(()),
                Stop::Paused => {
                    let connect = last_connect(events).cloned();
                    accept(conn, connect.as_ref())?;
                }
            }
        }
    }
    Ok(())
}

/// The conversation of `pieces` (the end of the stream follows them).
fn converse<'a>(role: Role, pieces: impl Iterator<Item = &'a [u8]>, batch: bool) -> Outcome {
    let mut conn = connection(role);
    let mut events = Vec::new();
    let error = talk(&mut conn, pieces, batch, &mut events)
        .err()
        .map(|e| e.kind);
    Outcome {
        events,
        error,
        states: (conn.our_state(), conn.their_state(), conn.version()),
    }
}

/// `frame` (read under `version`) encoded and decoded again: the same frame.
fn round_trip(version: Option<Version>, frame: &Frame) {
    let mut wire = Vec::new();
    let outgoing = Outgoing::new(frame.command, &frame.headers, &frame.body);
    if encode_frame(
        &mut wire,
        &outgoing,
        Rules::for_frame(frame.command, version),
    )
    .is_err()
    {
        return; // strict in what it sends: e.g. a body on a SUBSCRIBE
    }
    // Escaping may lengthen lines: the default limits; every command accepted.
    let mut decoder = Decoder::any(FrameLimits::default());
    decoder.feed(&wire);
    let again = decoder.next_item(version);
    assert_eq!(
        again,
        Ok(Some(Item::Frame(frame.clone()))),
        "round trip of {wire:?}"
    );
    assert_eq!(decoder.buffered(), 0, "bytes left after {wire:?}");
}

fn target(role: Role, data: &[u8]) {
    let Some((&first, stream)) = data.split_first() else {
        return;
    };
    let size = usize::from(first) % 17 + 1;
    let whole = converse(role, [stream].into_iter(), false);
    let drip = converse(role, stream.chunks(size), false);
    assert_eq!(whole, drip, "the cut changed the conversation");
    let batched = converse(role, stream.chunks(size), true);
    let unversioned: Vec<_> = whole
        .events
        .iter()
        .map(|(_, e)| (None, e.clone()))
        .collect();
    assert_eq!(batched.events, unversioned, "batches changed the events");
    assert_eq!(
        (&batched.error, batched.states),
        (&whole.error, whole.states)
    );
    for (version, event) in &whole.events {
        if let Event::Frame(frame) = event {
            round_trip(*version, frame);
        }
    }
}

/// What a client sends, decoded by a server.
pub fn stomp_server(data: &[u8]) {
    target(Role::Server, data);
}

/// What a server sends, decoded by a client (that sent its CONNECT first).
pub fn stomp_client(data: &[u8]) {
    target(Role::Client, data);
}
