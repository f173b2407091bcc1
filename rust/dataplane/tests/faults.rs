//! Faults stay with their connection; stopping closes everything; many idle connections.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod common;

use std::time::Duration;

use common::{connected, plane, Client};
use dataplane::{CloseCause, Command, Config, DataPlane, Event};

#[test]
fn a_panic_on_one_connection_closes_only_that_connection() {
    // One thread: both connections on it, so the thread itself must survive.
    let (plane, addr, mut events) = plane(
        Config {
            threads: 1,
            ..Config::default()
        },
        |_| {},
    );
    let (victim, victim_conn) = connected(&plane, addr, &mut events);
    let (mut other, other_conn) = connected(&plane, addr, &mut events);
    plane.submit([Command::InjectPanic {
        conn: victim_conn.clone(),
    }]);
    match events.closed(&plane, &victim_conn) {
        CloseCause::Panic(message) => assert!(message.contains("injected"), "{message}"),
        cause => panic!("closed for {cause:?}"),
    }
    victim.expect_eof();
    // The other connection, on the same thread, goes on both ways.
    other.send(b"SEND\ndestination:/q\n\nstill here\0");
    assert_eq!(events.frame(&plane, &other_conn).body, b"still here");
    plane.submit([Command::SendBytes {
        conn: other_conn.clone(),
        bytes: b"\n".to_vec(),
    }]);
    other.heartbeats(1);
    // And the thread still accepts.
    let (_third, _) = connected(&plane, addr, &mut events);
    // Commands for the dropped connection are ignored.
    plane.submit([Command::SendBytes {
        conn: victim_conn.clone(),
        bytes: b"x".to_vec(),
    }]);
}

#[test]
fn stopping_the_plane_closes_every_connection_and_says_so() {
    let (plane, addr, mut events) = plane(common::two_threads(), |_| {});
    let (one, one_conn) = connected(&plane, addr, &mut events);
    let (two, two_conn) = connected(&plane, addr, &mut events);
    plane.shutdown();
    assert_eq!(events.closed(&plane, &one_conn), CloseCause::Shutdown);
    assert_eq!(events.closed(&plane, &two_conn), CloseCause::Shutdown);
    one.expect_eof();
    two.expect_eof();
    plane.shutdown(); // idempotent
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "still listening"
    );
}

#[test]
fn a_thousand_idle_connections_with_heart_beats_on_one_plane() {
    let (plane, addr, mut events) = plane(common::two_threads(), |_| {});
    let mut clients = Vec::new();
    let mut conns = Vec::new();
    for _ in 0..1000 {
        let mut client = Client::connect(addr);
        client.send(&common::connect_bytes("1.2"));
        clients.push(client);
    }
    let mut opened = std::collections::HashMap::new();
    while conns.len() < 1000 {
        let event = events.next(&plane, "Opened or CONNECT", |e| {
            matches!(e, Event::Opened { .. } | Event::Frame { .. })
        });
        match event {
            Event::Opened { conn, .. } => {
                opened.insert(conn.id(), conn);
            }
            Event::Frame { conn, .. } => conns.push(opened[&conn].clone()),
            _ => unreachable!(),
        }
    }
    let wakeups = plane.wakeups();
    plane.submit(conns.iter().flat_map(|conn| {
        let connected = common::frame(stomp::Command::Connected, &[("version", "1.2")], b"");
        [
            Command::AcceptConnect {
                conn: conn.clone(),
                version: stomp::Version::V12,
            },
            Command::Send {
                conn: conn.clone(),
                frame: connected,
            },
            Command::SetHeartbeat {
                conn: conn.clone(),
                send_every: Some(Duration::from_secs(10)),
                expect_within: Some(Duration::from_secs(20)),
            },
        ]
    }));
    for client in &mut clients {
        assert_eq!(client.frame().unwrap().command, stomp::Command::Connected);
    }
    // Idle: no events (no wake-ups of Python) while nothing happens.
    events.none_within(&plane, Duration::from_millis(300), |_| true);
    assert_eq!(
        plane.wakeups(),
        wakeups,
        "Python woken while the connections idled"
    );
    drop(clients);
    for conn in &conns {
        assert_eq!(events.input_ended(&plane, conn), 0);
    }
    plane.submit(conns.iter().map(|conn| Command::Close {
        conn: conn.clone(),
        flush: true,
    }));
    for conn in &conns {
        assert_eq!(events.closed(&plane, conn), CloseCause::Requested);
    }
}

#[test]
fn a_plane_starts_one_thread_per_core_by_default() {
    let plane = DataPlane::start(Config::default()).unwrap();
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    assert_eq!(plane.threads(), cores.min(dataplane::MAX_THREADS));
}

#[test]
fn a_reset_connection_closes_with_the_error() {
    let (plane, addr, mut events) = plane(common::two_threads(), |_| {});
    let (client, conn) = connected(&plane, addr, &mut events);
    // Unread bytes in the client's socket when it closes make its kernel send a RST.
    plane.submit([Command::SendBytes {
        conn: conn.clone(),
        bytes: b"\n\n\n".to_vec(),
    }]);
    let mut probe = [0u8; 1];
    client.stream.peek(&mut probe).unwrap();
    drop(client);
    match events.closed(&plane, &conn) {
        CloseCause::Reset(error) => assert!(error.contains("reset"), "{error}"),
        cause => panic!("closed for {cause:?}"),
    }
}

#[test]
fn commands_for_a_closed_connection_never_reach_the_one_reusing_its_slot() {
    let (plane, addr, mut events) = plane(
        Config {
            threads: 1,
            ..Config::default()
        },
        |_| {},
    );
    let (_old_client, old) = connected(&plane, addr, &mut events);
    plane.submit([Command::Close {
        conn: old.clone(),
        flush: false,
    }]);
    events.closed(&plane, &old);
    let (mut new_client, new) = connected(&plane, addr, &mut events);
    assert_eq!(new.id().thread(), old.id().thread());
    assert_ne!(new.id(), old.id());
    plane.submit([
        Command::SendBytes {
            conn: old.clone(),
            bytes: b"MESSAGE for the old one\n\n\0".to_vec(),
        },
        Command::SendBytes {
            conn: new.clone(),
            bytes: b"\n".to_vec(),
        },
    ]);
    new_client.heartbeats(1); // fails on anything but an EOL first
}

#[test]
fn the_plane_and_what_crosses_it_can_move_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<DataPlane>();
    send_sync::<dataplane::Conn>();
    send::<Event>();
    send::<Command>();
}

#[test]
fn after_shutdown_nothing_is_taken() {
    let (plane, addr, mut events) = plane(common::two_threads(), |_| {});
    let (_client, conn) = connected(&plane, addr, &mut events);
    plane.shutdown();
    assert_eq!(events.closed(&plane, &conn), CloseCause::Shutdown);
    plane.submit([Command::SendBytes {
        conn: conn.clone(),
        bytes: vec![b'x'; 10],
    }]);
    assert_eq!(conn.outgoing(), 0);
    let spec = dataplane::ListenerSpec::new("127.0.0.1:0".parse().unwrap());
    assert!(matches!(plane.listen(spec), Err(dataplane::Error::Stopped)));
}
