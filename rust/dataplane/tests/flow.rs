//! Back-pressure both ways: outgoing bytes against the water marks, and paused reading.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod common;

use std::io::Read;
use std::time::Duration;

use common::{connected, plane};
use dataplane::{CloseCause, Command, Config, DataPlane, Event};

#[test]
fn a_client_that_does_not_read_makes_the_connection_unwritable_until_it_reads() {
    let config = Config {
        threads: 2,
        high_water: 256 * 1024,
        low_water: 64 * 1024,
        ..Config::default()
    };
    let (plane, addr, mut events) = plane(config, |_| {});
    let (client, conn) = connected(&plane, addr, &mut events);
    assert!(conn.writable());
    // 8 MiB in 64 KiB pieces: far more than the socket buffers hold.
    let chunk = vec![b'x'; 64 * 1024];
    let total = 8 * 1024 * 1024;
    plane.submit((0..total / chunk.len()).map(|_| Command::SendBytes {
        conn: conn.clone(),
        bytes: chunk.clone(),
    }));
    assert!(
        !conn.writable(),
        "outgoing {} after submitting {total}",
        conn.outgoing()
    );
    // The socket fills and the rest stays buffered: still above the mark, and no
    // Writable while the client reads nothing.
    let id = conn.id();
    let writable = move |e: &Event| matches!(e, Event::Writable { conn } if *conn == id);
    events.none_within(&plane, Duration::from_millis(200), writable);
    assert!(conn.outgoing() >= 256 * 1024, "{}", conn.outgoing());
    // The client reads everything; Writable comes once the bytes drained to the low mark.
    let mut stream = client.stream.try_clone().unwrap();
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 256 * 1024];
        let mut read = 0;
        while read < total {
            let n = stream.read(&mut buf).unwrap();
            assert!(n > 0 && buf[..n].iter().all(|&b| b == b'x'));
            read += n;
        }
        read
    });
    events.next(&plane, "Writable", writable);
    assert!(conn.writable());
    assert_eq!(reader.join().unwrap(), total);
    let deadline = std::time::Instant::now() + common::PATIENCE;
    while conn.outgoing() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "{} bytes never written",
            conn.outgoing()
        );
        std::thread::yield_now();
    }
}

#[test]
fn paused_reading_leaves_frames_in_the_socket_until_resumed() {
    let (plane, addr, mut events) = plane(common::two_threads(), |_| {});
    let (mut client, conn) = connected(&plane, addr, &mut events);
    plane.submit([
        Command::PauseReading { conn: conn.clone() },
        Command::SendBytes {
            conn: conn.clone(),
            bytes: b"\n".to_vec(),
        },
    ]);
    client.heartbeats(1); // the pause was carried out before this EOL was written
    for i in 0..10 {
        client.send(format!("SEND\ndestination:/q\nn:{i}\n\n\0").as_bytes());
    }
    let id = conn.id();
    let frame = move |e: &Event| matches!(e, Event::Frame { conn, .. } if *conn == id);
    events.none_within(&plane, Duration::from_millis(200), frame);
    plane.submit([Command::ResumeReading { conn: conn.clone() }]);
    for i in 0..10 {
        assert_eq!(
            events.frame(&plane, &conn).get("n"),
            Some(i.to_string().as_str())
        );
    }
}

#[test]
fn read_rest_takes_what_the_socket_holds_even_while_paused() {
    let (plane, addr, mut events) = plane(common::two_threads(), |_| {});
    let (mut client, conn) = connected(&plane, addr, &mut events);
    plane.submit([
        Command::PauseReading { conn: conn.clone() },
        Command::SendBytes {
            conn: conn.clone(),
            bytes: b"\n".to_vec(),
        },
    ]);
    client.heartbeats(1);
    client.send(b"ACK\nid:1\n\n\0ACK\nid:2\n\n\0ACK\nid:");
    // Over loopback, a write is in the peer's receive queue when send() returns: the
    // node's socket holds these bytes now.
    plane.submit([Command::ReadRest { conn: conn.clone() }]);
    let id = conn.id();
    events.next(
        &plane,
        "RestRead",
        |e| matches!(e, Event::RestRead { conn } if *conn == id),
    );
    let acks: Vec<_> = events
        .queue
        .drain(..)
        .filter_map(|e| match e {
            Event::Frame { frame, .. } => frame.get("id").map(str::to_owned),
            _ => None,
        })
        .collect();
    assert_eq!(acks, ["1", "2"]);
    plane.submit([Command::Close {
        conn: conn.clone(),
        flush: true,
    }]);
    client.expect_eof();
    assert_eq!(events.closed(&plane, &conn), CloseCause::Requested);
}

#[test]
fn a_flushing_close_gives_up_on_a_client_that_never_reads() {
    let config = Config {
        threads: 1,
        close_linger: Duration::from_millis(200),
        ..Config::default()
    };
    let (plane, addr, mut events) = plane(config, |_| {});
    let (_client, conn) = connected(&plane, addr, &mut events);
    let chunk = vec![b'y'; 1 << 20];
    plane.submit((0..16).map(|_| Command::SendBytes {
        conn: conn.clone(),
        bytes: chunk.clone(),
    }));
    plane.submit([Command::Close {
        conn: conn.clone(),
        flush: true,
    }]);
    assert_eq!(events.closed(&plane, &conn), CloseCause::FlushTimeout);
}

#[test]
fn connections_are_spread_over_the_threads() {
    let (plane, addr, mut events) = plane(
        Config {
            threads: 3,
            ..Config::default()
        },
        |_| {},
    );
    let mut clients = Vec::new();
    let mut threads = std::collections::BTreeSet::new();
    for _ in 0..6 {
        let (client, conn) = connected(&plane, addr, &mut events);
        threads.insert(conn.id().thread());
        clients.push(client);
    }
    assert_eq!(threads.len(), 3, "{threads:?}");
}

#[test]
fn a_flushing_close_delivers_everything_to_a_client_that_is_still_sending() {
    let (plane, addr, mut events) = plane(common::two_threads(), |_| {});
    let (mut client, conn) = connected(&plane, addr, &mut events);
    // A malformed frame and more bytes behind it that the node will never read.
    let mut garbage = b"BOGUS\n\n\0".to_vec();
    garbage.resize(garbage.len() + 64 * 1024, b'z');
    client.send(&garbage);
    events.protocol_error(&plane, &conn);
    // Much more than the socket buffers hold, then the ERROR, then the close.
    let total = 8 << 20;
    let error = common::frame(stomp::Command::Error, &[("message", "bye")], b"");
    plane.submit(
        (0..total / 65536)
            .map(|_| Command::SendBytes {
                conn: conn.clone(),
                bytes: vec![b'\n'; 65536],
            })
            .chain([
                Command::Send {
                    conn: conn.clone(),
                    frame: error,
                },
                Command::Close {
                    conn: conn.clone(),
                    flush: true,
                },
            ]),
    );
    // The client reads it all, slowly at first: the node has handed the last bytes to
    // its kernel before they are all sent, with the client's bytes unread.
    std::thread::sleep(Duration::from_millis(200));
    let mut received = 0;
    let mut buf = vec![0u8; 65536];
    let mut tail = Vec::new();
    loop {
        let n = client
            .stream
            .read(&mut buf)
            .expect("everything, then the end (no reset)");
        if n == 0 {
            break;
        }
        received += n;
        tail.extend_from_slice(&buf[..n]);
        let keep = tail.len().saturating_sub(64);
        tail.drain(..keep);
    }
    assert!(received > total, "{received}");
    assert!(tail.ends_with(b"ERROR\nmessage:bye\n\n\0"), "{tail:?}");
    drop(client);
    assert_eq!(events.closed(&plane, &conn), CloseCause::Requested);
}

/// `count` SEND frames numbered by their `n` header, as one client's bytes.
fn numbered_sends(count: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    for n in 0..count {
        bytes.extend_from_slice(format!("SEND\ndestination:/q\nn:{n}\n\n\0").as_bytes());
    }
    bytes
}

/// Drains until `count` numbered frames came, in order, sleeping `pace` before each drain
/// (a slow Python); the largest batch drained.
fn drain_numbered(plane: &DataPlane, count: usize, pace: Duration) -> usize {
    let mut next = 0;
    let mut largest = 0;
    let mut batch = Vec::new();
    let deadline = std::time::Instant::now() + common::PATIENCE;
    while next < count {
        assert!(
            std::time::Instant::now() < deadline,
            "stalled at frame {next}"
        );
        std::thread::sleep(pace);
        if !plane.wait(common::PATIENCE) {
            continue;
        }
        plane.drain(&mut batch);
        largest = largest.max(batch.len());
        for event in batch.drain(..) {
            let Event::Frame { frame, .. } = event else {
                panic!("unexpected {event:?}");
            };
            assert_eq!(frame.get("n"), Some(next.to_string().as_str()));
            next += 1;
        }
    }
    largest
}

#[test]
fn a_python_that_does_not_drain_stops_the_reading_at_the_queue_limit() {
    let config = Config {
        threads: 1,
        max_queued_events: 50,
        ..Config::default()
    };
    let (plane, addr, mut events) = plane(config, |_| {});
    let (mut client, _conn) = connected(&plane, addr, &mut events);
    client.send(&numbered_sends(2000));
    // Python is slow: the queue fills up to the limit meanwhile, and no further.
    let largest = drain_numbered(&plane, 2000, Duration::from_millis(2));
    assert!(
        largest <= 50,
        "a batch of {largest} events with a limit of 50"
    );
    assert!(
        largest >= 25,
        "batches of {largest} at most: the limit is not what stops it"
    );
}

/// A pass that finds too little room holds a connection back; if Python drains meanwhile,
/// its drain finds the queue below the limit and tells no thread to read on, so the pass
/// itself must (before, the connection stalled for good: found by the `data_plane` fuzz
/// target). Python drains as fast as it can here, so that race comes up again and again.
#[test]
fn a_connection_held_back_reads_on_when_python_drained_meanwhile() {
    let config = Config {
        threads: 1,
        max_queued_events: 3,
        read_chunk: 5,
        read_budget: 23,
        ..Config::default()
    };
    let (plane, addr, mut events) = plane(config, |_| {});
    let (mut client, _conn) = connected(&plane, addr, &mut events);
    client.send(&numbered_sends(2000));
    drain_numbered(&plane, 2000, Duration::ZERO);
}
