//! Heart-beats written when nothing else was, and the TTL reported when nothing is read.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod common;

use std::time::{Duration, Instant};

use common::{connected, plane, two_threads};
use dataplane::{Command, Event};

fn ttl_expired(
    events: &mut common::Events,
    plane: &dataplane::DataPlane,
    conn: &dataplane::Conn,
) -> Duration {
    let id = conn.id();
    let wanted = |e: &Event| matches!(e, Event::TtlExpired { conn, .. } if *conn == id);
    match events.next(plane, "TtlExpired", wanted) {
        Event::TtlExpired { silent_for, .. } => silent_for,
        _ => unreachable!(),
    }
}

#[test]
fn heart_beats_go_out_at_the_interval_and_a_silent_client_expires_its_ttl() {
    let (plane, addr, mut events) = plane(two_threads(), |_| {});
    let (mut client, conn) = connected(&plane, addr, &mut events);
    let every = Duration::from_millis(60);
    let within = Duration::from_millis(400);
    let set = Instant::now();
    plane.submit([Command::SetHeartbeat {
        conn: conn.clone(),
        send_every: Some(every),
        expect_within: Some(within),
    }]);
    client.heartbeats(4);
    // Each beat is written an interval after the last write: three intervals from the
    // first to the fourth, less what the first beat's delivery may have been late by on a
    // busy machine (generous: a plane beating every pass fails by far).
    let beats = &client.heartbeats;
    let three = beats[3] - beats[0];
    assert!(three >= Duration::from_millis(150), "4 beats in {three:?}");
    let silent_for = ttl_expired(&mut events, &plane, &conn);
    assert!(silent_for >= within, "{silent_for:?}");
    assert!(set.elapsed() >= within);
    // Reported once: Python answers with the AMQ229014 ERROR and closes.
    plane.submit([Command::Close {
        conn: conn.clone(),
        flush: true,
    }]);
    client.beats_until_eof();
    assert_eq!(
        events.closed(&plane, &conn),
        dataplane::CloseCause::Requested
    );
    assert!(!events
        .queue
        .iter()
        .any(|e| matches!(e, Event::TtlExpired { .. })));
}

#[test]
fn a_client_sending_heart_beats_stays_alive_until_it_stops() {
    let (plane, addr, mut events) = plane(two_threads(), |_| {});
    let (mut client, conn) = connected(&plane, addr, &mut events);
    let within = Duration::from_millis(500);
    plane.submit([Command::SetHeartbeat {
        conn: conn.clone(),
        send_every: None,
        expect_within: Some(within),
    }]);
    let start = Instant::now();
    // Six EOLs 100 ms apart: longer than the TTL, without expiring it (a sleep would have
    // to overshoot by 400 ms for a gap to reach it).
    for _ in 0..6 {
        client.send(b"\n");
        std::thread::sleep(Duration::from_millis(100));
    }
    let silent_for = ttl_expired(&mut events, &plane, &conn);
    // The last EOL went at 500 ms: the TTL runs from there.
    assert!(start.elapsed() >= Duration::from_millis(500) + within);
    assert!(silent_for >= within);
}

#[test]
fn writes_postpone_heart_beats_and_no_heart_beat_means_none_written() {
    let (plane, addr, mut events) = plane(two_threads(), |_| {});
    let (mut client, conn) = connected(&plane, addr, &mut events);
    plane.submit([Command::SetHeartbeat {
        conn: conn.clone(),
        send_every: Some(Duration::from_millis(500)),
        expect_within: None,
    }]);
    // A frame written every 50 ms or so leaves no gap for a heart-beat.
    for i in 0..6 {
        let frame = common::frame(
            stomp::Command::Receipt,
            &[("receipt-id", &i.to_string())],
            b"",
        );
        plane.submit([Command::Send {
            conn: conn.clone(),
            frame,
        }]);
        assert_eq!(
            client.frame().unwrap().get("receipt-id"),
            Some(i.to_string().as_str())
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        client.heartbeats.is_empty(),
        "heart-beats between frames: {:?}",
        client.heartbeats
    );
    plane.submit([Command::SetHeartbeat {
        conn: conn.clone(),
        send_every: None,
        expect_within: None,
    }]);
    let frame = common::frame(stomp::Command::Receipt, &[("receipt-id", "last")], b"");
    // Turned off: the next thing after 300 ms is the frame, not a heart-beat.
    std::thread::sleep(Duration::from_millis(300));
    plane.submit([Command::Send {
        conn: conn.clone(),
        frame,
    }]);
    assert_eq!(client.frame().unwrap().get("receipt-id"), Some("last"));
    assert!(client.heartbeats.is_empty());
}
