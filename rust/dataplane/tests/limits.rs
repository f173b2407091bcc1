//! What a listener enforces by itself: connectionsAllowed and handshake-timeout.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod common;

use std::time::{Duration, Instant};

use common::{connect_bytes, connected, plane, two_threads, Client};
use dataplane::{CloseCause, Command, Event};
use stomp::Command as Verb;

#[test]
fn one_connection_over_connections_allowed_is_accepted_and_closed() {
    let (plane, addr, mut events) = plane(two_threads(), |spec| spec.connections_allowed = 2);
    let (_first, first) = connected(&plane, addr, &mut events);
    let (_second, _) = connected(&plane, addr, &mut events);
    let third = Client::connect(addr);
    let refused = events.next(&plane, "Refused", |e| matches!(e, Event::Refused { .. }));
    let Event::Refused { peer, .. } = refused else {
        unreachable!()
    };
    assert_eq!(peer, third.stream.local_addr().unwrap());
    third.expect_eof();
    // Closing one makes room for the next.
    plane.submit([Command::Close {
        conn: first.clone(),
        flush: false,
    }]);
    assert_eq!(events.closed(&plane, &first), CloseCause::Requested);
    let (_fourth, _) = connected(&plane, addr, &mut events);
    assert!(!events
        .queue
        .iter()
        .any(|e| matches!(e, Event::Refused { .. })));
}

#[test]
fn no_connect_within_handshake_timeout_gets_the_listeners_error_and_the_close() {
    let message = "no CONNECT frame within 0.3 s (handshake-timeout)";
    let (plane, addr, mut events) = plane(two_threads(), |spec| {
        spec.handshake_timeout = Some(Duration::from_millis(300));
        spec.handshake_error = Some(message.to_owned());
    });
    // One client connects in time, one sends half a CONNECT and stalls (a slow loris).
    let (mut prompt, prompt_conn) = connected(&plane, addr, &mut events);
    let opened = Instant::now();
    let mut loris = Client::connect(addr);
    loris.send(b"CONNECT\naccept-version:1.2\n");
    let loris_conn = events.opened(&plane);
    let error = loris.frame().unwrap();
    let waited = opened.elapsed();
    assert_eq!(error.command, Verb::Error);
    assert_eq!(error.get("message"), Some(message));
    assert_eq!(error.body, message.as_bytes());
    loris.expect_eof();
    assert!(
        waited >= Duration::from_millis(290),
        "closed after {waited:?}"
    );
    assert_eq!(
        events.closed(&plane, &loris_conn),
        CloseCause::HandshakeTimeout
    );
    // The prompt one (whose deadline came first) is still served.
    plane.submit([Command::SendBytes {
        conn: prompt_conn.clone(),
        bytes: b"\n".to_vec(),
    }]);
    prompt.heartbeats(1);
    assert!(!events
        .queue
        .iter()
        .any(|e| matches!(e, Event::Closed { .. })));
}

#[test]
fn without_an_error_message_the_handshake_timeout_just_closes() {
    let (plane, addr, mut events) = plane(two_threads(), |spec| {
        spec.handshake_timeout = Some(Duration::from_millis(100));
    });
    let silent = Client::connect(addr);
    let conn = events.opened(&plane);
    silent.expect_eof();
    assert_eq!(events.closed(&plane, &conn), CloseCause::HandshakeTimeout);
}

#[test]
fn the_bound_address_is_reported_and_unlisten_stops_accepting() {
    let plane = dataplane::DataPlane::start(two_threads()).unwrap();
    let spec = dataplane::ListenerSpec::new("127.0.0.1:0".parse().unwrap());
    let listening = plane.listen(spec.clone()).unwrap();
    assert_ne!(listening.local_addr.port(), 0);
    let mut events = common::Events::default();
    let mut client = Client::connect(listening.local_addr);
    client.send(&connect_bytes("1.2"));
    let conn = events.opened(&plane);
    assert_eq!(events.frame(&plane, &conn).command, Verb::Connect);
    plane.unlisten(listening.id);
    // Wait until the listener is gone: connecting is refused (or never accepted).
    let deadline = Instant::now() + common::PATIENCE;
    while std::net::TcpStream::connect(listening.local_addr).is_ok() {
        assert!(Instant::now() < deadline, "still accepting");
        std::thread::sleep(Duration::from_millis(10));
    }
    // A listener on the same port again (SO_REUSEADDR is std's default on Unix).
    let second = plane
        .listen(dataplane::ListenerSpec::new(listening.local_addr))
        .unwrap();
    assert_eq!(second.local_addr, listening.local_addr);
    assert!(
        plane.listen(spec_on(listening.local_addr)).is_err(),
        "the port is taken"
    );
}

fn spec_on(addr: std::net::SocketAddr) -> dataplane::ListenerSpec {
    dataplane::ListenerSpec::new(addr)
}
