//! Many clients at once over several threads: every connection's frames in order, and
//! the answers Python submits meanwhile reach the right clients in order.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod common;

use std::collections::HashMap;
use std::time::Instant;

use common::{connected, frame, plane, PATIENCE};
use dataplane::{Command, Config, Event};
use stomp::Command as Verb;

const CLIENTS: usize = 16;
const FRAMES: usize = 300;

#[test]
fn concurrent_clients_each_see_their_frames_and_receipts_in_order() {
    let config = Config {
        threads: 3,
        ..Config::default()
    };
    let (plane, addr, mut events) = plane(config, |_| {});
    let mut clients = Vec::new();
    let mut conns = HashMap::new();
    for _ in 0..CLIENTS {
        let (client, conn) = connected(&plane, addr, &mut events);
        conns.insert(conn.id(), conn);
        clients.push(client);
    }
    // Each client writes its frames in small pieces and reads the receipts.
    let threads: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(c, mut client)| {
            std::thread::spawn(move || {
                for n in 0..FRAMES {
                    let bytes = format!("SEND\ndestination:/q\nreceipt:{c}-{n}\n\n{n}\0");
                    client.send(bytes.as_bytes());
                }
                for n in 0..FRAMES {
                    let receipt = client.frame().unwrap();
                    assert_eq!(receipt.get("receipt-id"), Some(format!("{c}-{n}").as_str()));
                }
            })
        })
        .collect();
    // Python's part: every drained batch answered with one submit.
    let mut next: HashMap<_, usize> = conns.keys().map(|id| (*id, 0)).collect();
    let deadline = Instant::now() + PATIENCE;
    let mut batches = 0;
    while next.values().any(|n| *n < FRAMES) {
        assert!(Instant::now() < deadline, "{next:?}");
        events.pull(&plane, PATIENCE);
        let mut answers = Vec::new();
        for event in events.queue.drain(..) {
            let (conn, sent) = match event {
                Event::Frame { conn, frame } => (conn, frame),
                Event::InputEnded { .. } => continue, // a client that has all its receipts
                _ => panic!("unexpected {event:?}"),
            };
            let expected = next.get_mut(&conn).unwrap();
            assert_eq!(sent.body, expected.to_string().as_bytes(), "out of order");
            *expected += 1;
            let receipt = sent.get("receipt").unwrap();
            answers.push(Command::Send {
                conn: conns[&conn].clone(),
                frame: frame(Verb::Receipt, &[("receipt-id", receipt)], b""),
            });
        }
        batches += 1;
        plane.submit(answers);
    }
    for thread in threads {
        thread.join().unwrap();
    }
    println!(
        "{} frames from {CLIENTS} clients in {batches} batches",
        CLIENTS * FRAMES
    );
}

#[test]
fn a_frame_trickled_byte_by_byte_arrives_whole() {
    let (plane, addr, mut events) = plane(common::two_threads(), |_| {});
    let (mut client, conn) = connected(&plane, addr, &mut events);
    let bytes = b"SEND\ndestination:/q\ncontent-length:5\n\nab\0cd\0";
    for byte in bytes {
        client.send(&[*byte]);
    }
    let sent = events.frame(&plane, &conn);
    assert_eq!(sent.body, b"ab\0cd");
}

#[test]
fn frames_cut_at_random_places_arrive_whole_and_in_order() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    // Small reads and budgets, so frames straddle reads and passes of the loop too.
    let config = Config {
        threads: 2,
        read_chunk: 97,
        read_budget: 300,
        ..Config::default()
    };
    let (plane, addr, mut events) = plane(config, |_| {});
    let (mut client, conn) = connected(&plane, addr, &mut events);
    let mut rng = StdRng::seed_from_u64(29);
    let mut stream = Vec::new();
    let mut bodies = Vec::new();
    for n in 0..500 {
        let body: Vec<u8> = (0..rng.gen_range(0..200)).map(|_| rng.gen()).collect();
        let head = format!(
            "SEND\ndestination:/q\nn:{n}\ncontent-length:{}\n\n",
            body.len()
        );
        stream.extend_from_slice(head.as_bytes());
        stream.extend_from_slice(&body);
        stream.push(0);
        if rng.gen_bool(0.3) {
            stream.extend_from_slice(b"\r\n"); // heart-beat EOLs between frames
        }
        bodies.push(body);
    }
    // Two thirds in pieces of 1 to 64 bytes, the rest in one write: far more than one
    // pass's budget, with no new edge to come (the thread must come back on its own).
    let mut at = 0;
    while at < stream.len() * 2 / 3 {
        let piece = rng.gen_range(1..=64);
        client.send(&stream[at..at + piece]);
        at += piece;
    }
    client.send(&stream[at..]);
    for (n, body) in bodies.iter().enumerate() {
        let sent = events.frame(&plane, &conn);
        assert_eq!(sent.get("n"), Some(n.to_string().as_str()));
        assert_eq!(&sent.body, body);
    }
}
