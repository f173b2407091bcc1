//! Connections that are not STOMP (a cluster link, an HTTP request) go to Python whole.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use common::{connected, plane, two_threads, Client};
use dataplane::{CloseCause, Event, Lease};

const MAGIC: &[u8] = b"ARTPYC\r\n";

fn handoff_spec(spec: &mut dataplane::ListenerSpec) {
    spec.handoff_prefixes = vec![MAGIC.to_vec(), b"GET ".to_vec(), b"POST ".to_vec()];
}

fn handed_off(
    events: &mut common::Events,
    plane: &dataplane::DataPlane,
) -> (std::net::TcpStream, Vec<u8>, Lease) {
    match events.next(plane, "HandedOff", |e| matches!(e, Event::HandedOff { .. })) {
        Event::HandedOff {
            stream,
            initial,
            lease,
            ..
        } => (stream, initial, lease),
        _ => unreachable!(),
    }
}

#[test]
fn a_cluster_link_is_handed_over_with_its_first_bytes_and_its_socket_works() {
    let (plane, addr, mut events) = plane(two_threads(), handoff_spec);
    let mut link = Client::connect(addr);
    // The magic in two pieces: undecided after the first.
    link.send(&MAGIC[..3]);
    let conn = events.opened(&plane);
    events.none_within(&plane, Duration::from_millis(100), |e| {
        matches!(e, Event::HandedOff { .. } | Event::Frame { .. })
    });
    link.send(&MAGIC[3..]);
    link.send(b"hello");
    let (mut stream, initial, _lease) = handed_off(&mut events, &plane);
    assert!(initial.starts_with(MAGIC), "{initial:?}");
    // What came after the magic is either in `initial` or still in the socket.
    let mut rest = initial[MAGIC.len()..].to_vec();
    stream.set_nonblocking(false).unwrap();
    stream.set_read_timeout(Some(common::PATIENCE)).unwrap();
    while rest.len() < 5 {
        let mut buf = [0u8; 16];
        let n = stream.read(&mut buf).unwrap();
        rest.extend_from_slice(&buf[..n]);
    }
    assert_eq!(rest, b"hello");
    stream.write_all(b"welcome").unwrap();
    let mut answer = [0u8; 7];
    link.stream.read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"welcome");
    // Its last event: nothing else comes for it.
    let id = conn.id();
    events.none_within(&plane, Duration::from_millis(100), move |e| {
        e.conn() == Some(id)
    });
}

#[test]
fn a_stomp_client_on_a_sniffing_listener_is_served_as_usual() {
    let (plane, addr, mut events) = plane(two_threads(), handoff_spec);
    let (mut client, conn) = connected(&plane, addr, &mut events);
    client.send(b"SEND\ndestination:/q\n\nx\0");
    assert_eq!(events.frame(&plane, &conn).body, b"x");
}

#[test]
fn a_handed_off_connection_counts_towards_connections_allowed_until_its_lease_is_dropped() {
    let (plane, addr, mut events) = plane(two_threads(), |spec| {
        handoff_spec(spec);
        spec.connections_allowed = 1;
    });
    let mut http = Client::connect(addr);
    http.send(b"GET /stomp HTTP/1.1\r\n");
    events.opened(&plane);
    let (stream, initial, lease) = handed_off(&mut events, &plane);
    assert!(initial.starts_with(b"GET "));
    let refused = Client::connect(addr);
    events.next(&plane, "Refused", |e| matches!(e, Event::Refused { .. }));
    refused.expect_eof();
    drop(lease);
    drop(stream);
    let (_client, conn) = connected(&plane, addr, &mut events);
    plane.submit([dataplane::Command::Close {
        conn: conn.clone(),
        flush: false,
    }]);
    assert_eq!(events.closed(&plane, &conn), CloseCause::Requested);
}
