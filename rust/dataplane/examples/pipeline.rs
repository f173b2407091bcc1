//! Frames through the plane: clients pipelining SENDs with receipts, this process playing
//! Python (every drained batch answered with one submit of RECEIPTs). Prints the rate
//! and the CPU per frame of the I/O threads and of the "Python" thread (draining and
//! submitting only: what the plane costs the loop, without Python's own work).
//!
//! ```text
//! cargo run --release -p dataplane --example pipeline -- [clients=4] [seconds=3] [body=64]
//! ```
//!
//! The clients run in a child process (this program with `client` first), each a thread
//! that keeps up to 1,000 frames unanswered.
//!
//! Measured once on the 2-core development machine, busy with other work (2026-12-06,
//! release, 2 I/O threads, 2 clients, 64-byte bodies, 2 s): 1.13 million frames/s in
//! 21,183 batches (about 130 frames a batch); per frame 0.48 µs on the I/O threads (read,
//! decode, encode the RECEIPT, write) and 0.17 µs on the "Python" thread. Python's own
//! work on a batch (turning frames into objects, the session) comes on top.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a measuring tool: a failure is a panic

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command as Process, Stdio};
use std::time::{Duration, Instant};

use dataplane::{Command, Config, DataPlane, Event, ListenerSpec};
use stomp::{Command as Verb, Frame, Version};

const WINDOW: usize = 1000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("client") {
        let (clients, seconds, body) = (arg(&args, 2, 4), arg(&args, 3, 3), arg(&args, 4, 64));
        return client(&args[1], clients, seconds as u64, body);
    }
    let (clients, seconds, body) = (arg(&args, 0, 4), arg(&args, 1, 3), arg(&args, 2, 64));
    let plane = DataPlane::start(Config::default()).unwrap();
    let addr = plane
        .listen(ListenerSpec::new("127.0.0.1:0".parse().unwrap()))
        .unwrap()
        .local_addr;
    let mut child = Process::new(std::env::current_exe().unwrap())
        .args(["client", &addr.to_string()])
        .args([clients, seconds, body].map(|n| n.to_string()))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut conns = HashMap::new();
    let mut events = Vec::new();
    let (mut frames, mut batches) = (0u64, 0u64);
    let mut started = None;
    let cpu_before = thread_ticks();
    let deadline = Instant::now() + Duration::from_secs(seconds as u64 + 30);
    while Instant::now() < deadline {
        if !plane.wait(Duration::from_millis(500)) {
            if started.is_some() && conns.is_empty() {
                break;
            }
            continue;
        }
        plane.drain(&mut events);
        batches += 1;
        let mut answers = Vec::with_capacity(events.len());
        for event in events.drain(..) {
            match event {
                Event::Opened { conn, .. } => {
                    started.get_or_insert_with(Instant::now);
                    conns.insert(conn.id(), conn);
                }
                Event::Frame { conn, frame } => answer(&conns[&conn], &frame, &mut answers),
                Event::InputEnded { conn, .. } => {
                    let conn = conns.remove(&conn).unwrap();
                    answers.push(Command::Close { conn, flush: false });
                }
                _ => {}
            }
        }
        frames += answers.len() as u64;
        plane.submit(answers);
    }
    let wall = started.map_or(0.0, |s| s.elapsed().as_secs_f64());
    let cpu = thread_ticks();
    let per_frame = |name: &str| {
        let ticks =
            cpu.get(name).copied().unwrap_or(0) - cpu_before.get(name).copied().unwrap_or(0);
        ticks as f64 / ticks_per_second() / frames as f64 * 1e6
    };
    println!(
        "{frames} frames ({body}-byte bodies) from {clients} clients in {wall:.1} s: {:.0} frames/s, {batches} batches",
        frames as f64 / wall
    );
    println!(
        "CPU per frame: I/O threads {:.2} µs, the 'Python' thread {:.2} µs (drain + submit)",
        per_frame("dataplane"),
        per_frame("main")
    );
    let _ = child.wait();
}

fn arg(args: &[String], at: usize, default: usize) -> usize {
    args.get(at).map_or(default, |a| a.parse().unwrap())
}

fn answer(conn: &dataplane::Conn, frame: &Frame, answers: &mut Vec<Command>) {
    let frame = if frame.command == Verb::Connect {
        answers.push(Command::AcceptConnect {
            conn: conn.clone(),
            version: Version::V12,
        });
        let version = vec![("version".to_owned(), "1.2".to_owned())];
        Frame::new(Verb::Connected, version, Vec::new())
    } else {
        let receipt = frame.get("receipt").unwrap_or("").to_owned();
        Frame::new(
            Verb::Receipt,
            vec![("receipt-id".to_owned(), receipt)],
            Vec::new(),
        )
    };
    answers.push(Command::Send {
        conn: conn.clone(),
        frame,
    });
}

/// CPU ticks of this process's threads by kind: "dataplane" (the I/O threads) and "main".
fn thread_ticks() -> HashMap<String, u64> {
    let mut ticks = HashMap::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let Ok(stat) = std::fs::read_to_string(task.unwrap().path().join("stat")) else {
            continue;
        };
        let name = &stat[stat.find('(').unwrap() + 1..stat.rfind(')').unwrap()];
        let kind = if name.starts_with("dataplane") {
            "dataplane"
        } else {
            "main"
        };
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
            .split_whitespace()
            .collect();
        let used = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        *ticks.entry(kind.to_owned()).or_insert(0) += used;
    }
    ticks
}

fn ticks_per_second() -> f64 {
    // SAFETY: sysconf takes no pointers and only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// The child: `clients` threads, each pipelining SENDs (at most WINDOW unanswered) for
/// `seconds`, then waiting for its last receipts and leaving.
fn client(addr: &str, clients: usize, seconds: u64, body: usize) {
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let addr = addr.to_owned();
            std::thread::spawn(move || one_client(&addr, seconds, body))
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
}

fn one_client(addr: &str, seconds: u64, body: usize) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_nodelay(true).unwrap();
    stream
        .write_all(b"CONNECT\naccept-version:1.2\nhost:localhost\n\n\0")
        .unwrap();
    let mut reader = stream.try_clone().unwrap();
    let frame = {
        let mut f = b"SEND\ndestination:/q\nreceipt:r\n\n".to_vec();
        f.resize(f.len() + body, b'x');
        f.push(0);
        f
    };
    let end = Instant::now() + Duration::from_secs(seconds);
    // Answers so far: the CONNECTED, then one RECEIPT per SEND (each ends with a NUL).
    let (mut sent, mut nuls) = (0usize, 0usize);
    let mut buf = vec![0u8; 1 << 16];
    let mut batch = Vec::new();
    loop {
        let receipts = nuls.saturating_sub(1);
        let sending = Instant::now() < end;
        if sending && sent - receipts < WINDOW {
            let n = (WINDOW - (sent - receipts)).min(100);
            batch.clear();
            for _ in 0..n {
                batch.extend_from_slice(&frame);
            }
            stream.write_all(&batch).unwrap();
            sent += n;
        }
        if !sending && nuls > sent {
            return;
        }
        let n = reader.read(&mut buf).unwrap();
        assert!(n > 0, "closed");
        #[allow(clippy::naive_bytecount)] // a few per read: no crate for it
        let ended = buf[..n].iter().filter(|&&b| b == 0).count();
        nuls += ended;
    }
}
