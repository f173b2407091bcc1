//! Frames in and out: the handshake, pipelining behind CONNECT, batching, protocol errors,
//! the peer going away.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod common;

use std::time::Duration;

use common::{connect_bytes, connected, frame, plane, two_threads, Client};
use dataplane::{CloseCause, Command, Event};
use stomp::{Command as Verb, ErrorKind};

#[test]
fn connect_is_reported_and_the_frames_behind_it_wait_for_the_version() {
    let (plane, addr, mut events) = plane(two_threads(), |_| {});
    let mut client = Client::connect(addr);
    // CONNECT and two SENDs in one write; `\c` is a ':' only under STOMP 1.1+ rules.
    let mut bytes = connect_bytes("1.0,1.2");
    bytes.extend_from_slice(b"SEND\ndestination:/q\nkey:a\\cb\n\none\0");
    bytes.extend_from_slice(b"SEND\ndestination:/q\n\ntwo\0");
    client.send(&bytes);
    let conn = events.opened(&plane);
    let connect = events.frame(&plane, &conn);
    assert_eq!(connect.command, Verb::Connect);
    assert_eq!(connect.get("accept-version"), Some("1.0,1.2"));
    // ReadRest comes back at once while the codec waits for the version; had the SENDs
    // been decoded, their events would be ahead of its RestRead (one thread, in order).
    plane.submit([Command::ReadRest { conn: conn.clone() }]);
    let id = conn.id();
    events.next(
        &plane,
        "RestRead",
        |e| matches!(e, Event::RestRead { conn } if *conn == id),
    );
    assert!(
        !events
            .queue
            .iter()
            .any(|e| matches!(e, Event::Frame { .. })),
        "frames decoded before the version was decided: {:?}",
        events.queue
    );
    common::accept(&plane, &conn);
    let connected = client.frame().unwrap();
    assert_eq!(connected.command, Verb::Connected);
    assert_eq!(connected.get("version"), Some("1.2"));
    let one = events.frame(&plane, &conn);
    assert_eq!((one.command, one.get("key")), (Verb::Send, Some("a:b")));
    assert_eq!(one.body, b"one");
    assert_eq!(events.frame(&plane, &conn).body, b"two");
}

#[test]
fn a_thousand_pipelined_frames_arrive_in_a_few_batches() {
    let (plane, addr, mut events) = plane(two_threads(), |_| {});
    let (mut client, conn) = connected(&plane, addr, &mut events);
    let mut bytes = Vec::new();
    for i in 0..1000 {
        bytes.extend_from_slice(format!("SEND\ndestination:/q\nn:{i}\n\nbody {i}\0").as_bytes());
    }
    let before = (plane.wakeups(), events.drains);
    client.send(&bytes);
    for i in 0..1000 {
        let frame = events.frame(&plane, &conn);
        assert_eq!(frame.get("n"), Some(i.to_string().as_str()));
        assert_eq!(frame.body, format!("body {i}").as_bytes());
    }
    let wakeups = plane.wakeups() - before.0;
    let drains = events.drains - before.1;
    println!(
        "1000 frames ({} bytes): {wakeups} eventfd wake-ups, {drains} drains",
        bytes.len()
    );
    assert!(wakeups <= 20, "{wakeups} wake-ups for 1000 frames");
    assert!(drains <= 20, "{drains} drains for 1000 frames");
}

#[test]
fn a_malformed_frame_is_reported_and_the_error_frame_goes_out_before_the_close() {
    let (plane, addr, mut events) = plane(two_threads(), |_| {});
    let (mut client, conn) = connected(&plane, addr, &mut events);
    client.send(b"BOGUS\n\n\0");
    let error = events.protocol_error(&plane, &conn);
    assert_eq!(error.kind, ErrorKind::Remote);
    assert!(
        error.message.contains("unknown command"),
        "{}",
        error.message
    );
    let message = error.message.clone();
    let length = message.len().to_string();
    plane.submit([
        Command::Send {
            conn: conn.clone(),
            frame: frame(
                Verb::Error,
                &[("message", &message), ("content-length", &length)],
                message.as_bytes(),
            ),
        },
        Command::Close {
            conn: conn.clone(),
            flush: true,
        },
    ]);
    let sent = client.frame().unwrap();
    assert_eq!(sent.command, Verb::Error);
    assert_eq!(sent.get("message"), Some(message.as_str()));
    client.expect_eof();
    assert_eq!(events.closed(&plane, &conn), CloseCause::Requested);
}

#[test]
fn an_oversized_frame_is_a_protocol_error_under_the_listeners_limits() {
    let (plane, addr, mut events) = plane(two_threads(), |spec| spec.limits.max_body_size = 100);
    let (mut client, conn) = connected(&plane, addr, &mut events);
    client.send(b"SEND\ndestination:/q\n\nsmall\0");
    assert_eq!(events.frame(&plane, &conn).body, b"small");
    let mut big = b"SEND\ndestination:/q\n\n".to_vec();
    big.extend_from_slice(&[b'x'; 200]);
    client.send(&big);
    let error = events.protocol_error(&plane, &conn);
    assert!(
        error.message.contains("larger than 100 bytes"),
        "{}",
        error.message
    );
    // Nothing more is read: frames after the error are not reported.
    client.send(b"\0SEND\ndestination:/q\n\nlater\0");
    events.none_within(&plane, Duration::from_millis(200), |e| {
        matches!(e, Event::Frame { .. })
    });
    plane.submit([Command::Close {
        conn: conn.clone(),
        flush: false,
    }]);
    assert_eq!(events.closed(&plane, &conn), CloseCause::Requested);
}

#[test]
fn a_peer_vanishing_mid_frame_ends_the_input_with_the_unfinished_bytes_counted() {
    let (plane, addr, mut events) = plane(two_threads(), |_| {});
    let (mut client, conn) = connected(&plane, addr, &mut events);
    client.send(b"SEND\ndestination:/q\n\ncomplete\0SEND\ndestination:/q\n\nhalf");
    drop(client);
    assert_eq!(events.frame(&plane, &conn).body, b"complete");
    let unread = b"SEND\ndestination:/q\n\nhalf".len();
    assert_eq!(events.input_ended(&plane, &conn), unread);
    plane.submit([Command::Close {
        conn: conn.clone(),
        flush: false,
    }]);
    assert_eq!(events.closed(&plane, &conn), CloseCause::Requested);
}

#[test]
fn a_half_closed_peer_gets_its_last_receipt_and_the_close_comes_from_python() {
    let (plane, addr, mut events) = plane(two_threads(), |_| {});
    let (mut client, conn) = connected(&plane, addr, &mut events);
    client.send(b"SEND\ndestination:/q\nreceipt:r1\n\nlast\0\n");
    client.stream.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(events.frame(&plane, &conn).body, b"last");
    assert_eq!(events.input_ended(&plane, &conn), 0);
    // Still open: Python answers what was read, then closes.
    plane.submit([
        Command::Send {
            conn: conn.clone(),
            frame: frame(Verb::Receipt, &[("receipt-id", "r1")], b""),
        },
        Command::Close {
            conn: conn.clone(),
            flush: true,
        },
    ]);
    assert_eq!(client.frame().unwrap().get("receipt-id"), Some("r1"));
    client.expect_eof();
    assert_eq!(events.closed(&plane, &conn), CloseCause::Requested);
}

#[test]
fn frames_after_disconnect_are_not_reported() {
    let (plane, addr, mut events) = plane(two_threads(), |_| {});
    let (mut client, conn) = connected(&plane, addr, &mut events);
    client.send(b"DISCONNECT\nreceipt:7\n\n\0SEND\ndestination:/q\n\nafter\0");
    let disconnect = events.frame(&plane, &conn);
    assert_eq!(disconnect.command, Verb::Disconnect);
    plane.submit([
        Command::Send {
            conn: conn.clone(),
            frame: frame(Verb::Receipt, &[("receipt-id", "7")], b""),
        },
        Command::Close {
            conn: conn.clone(),
            flush: true,
        },
    ]);
    assert_eq!(client.frame().unwrap().get("receipt-id"), Some("7"));
    client.expect_eof();
    assert_eq!(events.closed(&plane, &conn), CloseCause::Requested);
    assert!(
        !events
            .queue
            .iter()
            .any(|e| matches!(e, Event::Frame { .. } | Event::ProtocolError { .. })),
        "{:?}",
        events.queue
    );
}

#[test]
fn a_frame_the_codec_refuses_to_send_is_reported() {
    let (plane, addr, mut events) = plane(two_threads(), |_| {});
    let mut client = Client::connect(addr);
    client.send(&connect_bytes("1.2"));
    let conn = events.opened(&plane);
    events.frame(&plane, &conn);
    plane.submit([
        // Before CONNECTED: refused by the codec, nothing written.
        Command::Send {
            conn: conn.clone(),
            frame: frame(Verb::Message, &[("destination", "/q")], b"x"),
        },
        Command::AcceptConnect {
            conn: conn.clone(),
            version: stomp::Version::V11,
        },
    ]);
    let id = conn.id();
    for _ in 0..2 {
        match events.next(
            &plane,
            "CommandFailed",
            |e| matches!(e, Event::CommandFailed { conn, .. } if *conn == id),
        ) {
            Event::CommandFailed { error, .. } => assert_eq!(error.kind, ErrorKind::Local),
            _ => unreachable!(),
        }
    }
    assert_eq!(
        conn.outgoing(),
        0,
        "a refused frame's estimate is taken back"
    );
}

#[test]
fn a_connected_frame_alone_decides_the_version_and_1_0_frames_are_not_unescaped() {
    let (plane, addr, mut events) = plane(two_threads(), |_| {});
    let mut client = Client::connect(addr);
    let mut bytes = connect_bytes("1.0");
    bytes.extend_from_slice(b"SEND\ndestination:/q\nkey:a\\cb\n\n\0");
    client.send(&bytes);
    let conn = events.opened(&plane);
    assert_eq!(events.frame(&plane, &conn).command, Verb::Connect);
    // No AcceptConnect: the CONNECTED names the version, as the codec allows.
    plane.submit([Command::Send {
        conn: conn.clone(),
        frame: frame(Verb::Connected, &[("version", "1.0")], b""),
    }]);
    assert_eq!(client.frame().unwrap().get("version"), Some("1.0"));
    assert_eq!(events.frame(&plane, &conn).get("key"), Some("a\\cb"));
}

#[test]
fn a_frame_head_then_its_body_in_pieces_makes_one_message() {
    let (plane, addr, mut events) = plane(two_threads(), |_| {});
    let (mut client, conn) = connected(&plane, addr, &mut events);
    let body = b"0123456789\0abcdef".to_vec();
    let length = body.len().to_string();
    let head = frame(
        Verb::Message,
        &[("destination", "/q"), ("content-length", &length)],
        b"",
    );
    plane.submit([
        Command::SendHead {
            conn: conn.clone(),
            frame: head,
            body_length: body.len() as u64,
        },
        Command::SendBytes {
            conn: conn.clone(),
            bytes: body[..5].to_vec(),
        },
        Command::SendBytes {
            conn: conn.clone(),
            bytes: body[5..].to_vec(),
        },
        Command::SendBytes {
            conn: conn.clone(),
            bytes: vec![0],
        },
    ]);
    let message = client.frame().unwrap();
    assert_eq!(message.command, Verb::Message);
    assert_eq!(message.body, body);
    // A head whose length disagrees with its content-length is refused.
    let wrong = frame(Verb::Message, &[("content-length", "3")], b"");
    plane.submit([Command::SendHead {
        conn: conn.clone(),
        frame: wrong,
        body_length: 4,
    }]);
    let id = conn.id();
    let failed = |e: &Event| matches!(e, Event::CommandFailed { conn, .. } if *conn == id);
    events.next(&plane, "CommandFailed", failed);
}
