//! Many idle STOMP connections with 10 s heart-beats on one plane: the plane's RSS per
//! connection and its CPU while they idle (issue 29's "many connections" measure, for the
//! data plane's share: no Python session behind the connections).
//!
//! ```text
//! cargo run --release -p dataplane --example idle -- [connections=10000] [idle seconds=30]
//! ```
//!
//! The clients run in a child process (this program with `client` as its first argument),
//! so the figures are the plane's alone and each process stays within its descriptor
//! limit. This process plays Python's part: it answers each CONNECT (CONNECTED with
//! `heart-beat:10000,10000`) and sets the connection's heart-beats (a beat every 10 s, a
//! TTL of 20 s); the clients send an EOL on every connection every 5 s (twice as often as
//! they need to).
//!
//! Measured on the 2-core development machine (2026-12-06, release build, 2 I/O threads):
//! 10,000 connections, 1.09 KiB of RSS each, 1.8 to 2.1% of a core over a 30 s idle window
//! (two runs).
//! Apache Artemis 2.56 takes 10.7 KiB and 13% for the same (issue 29); today's Trio shell
//! 26.7 KiB and 45%. The plane's share only: the Python session behind each connection
//! adds to it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a measuring tool: a failure is a panic

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command as Process, Stdio};
use std::time::{Duration, Instant};

use dataplane::{Command, Config, DataPlane, Event, ListenerSpec};
use stomp::{Command as Verb, Frame, Version};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("client") {
        client(&args[1], args[2].parse().unwrap(), args[3].parse().unwrap());
        return;
    }
    let count: usize = args.first().map_or(10_000, |a| a.parse().unwrap());
    let idle: u64 = args.get(1).map_or(30, |a| a.parse().unwrap());
    serve(count, idle);
}

fn serve(count: usize, idle: u64) {
    let plane = DataPlane::start(Config::default()).unwrap();
    let listening = plane
        .listen(ListenerSpec::new("127.0.0.1:0".parse().unwrap()))
        .unwrap();
    let before = rss_kib();
    let mut child = Process::new(std::env::current_exe().unwrap())
        .args([
            "client",
            &listening.local_addr.to_string(),
            &count.to_string(),
        ])
        .arg((idle + 10).to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    answer_connects(&plane, count);
    // The clients say when they have read every CONNECTED.
    let mut ready = [0u8; 1];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut ready)
        .unwrap();
    let setup = started.elapsed();
    let connected_kib = rss_kib();
    let cpu_before = cpu_ticks();
    let idle_start = Instant::now();
    std::thread::sleep(Duration::from_secs(idle));
    let cpu = cpu_ticks() - cpu_before;
    let wall = idle_start.elapsed().as_secs_f64();
    let after_kib = rss_kib();
    let mut events = Vec::new();
    plane.drain(&mut events);
    let unexpected = events
        .iter()
        .filter(|e| !matches!(e, Event::Closed { .. }))
        .count();
    let ticks = ticks_per_second();
    println!(
        "connections: {count} on {} I/O threads (set up in {setup:.1?})",
        plane.threads()
    );
    println!(
        "RSS: {before} KiB before, {connected_kib} KiB connected, {after_kib} KiB after {idle} s idle"
    );
    println!(
        "RSS per connection: {:.2} KiB connected, {:.2} KiB after the idle window",
        (connected_kib - before) as f64 / count as f64,
        (after_kib - before) as f64 / count as f64
    );
    println!(
        "CPU while idle: {:.2}% of a core ({} ticks in {wall:.1} s); events meanwhile: {unexpected}",
        cpu as f64 / ticks / wall * 100.0,
        cpu
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// Plays Python until `count` CONNECTs are answered.
fn answer_connects(plane: &DataPlane, count: usize) {
    let started = Instant::now();
    let mut conns = HashMap::new();
    let mut connected = 0;
    let mut events = Vec::new();
    while connected < count {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "{connected} connected"
        );
        if !plane.wait(Duration::from_secs(1)) {
            continue;
        }
        plane.drain(&mut events);
        let mut commands = Vec::new();
        for event in events.drain(..) {
            match event {
                Event::Opened { conn, .. } => {
                    conns.insert(conn.id(), conn);
                }
                Event::Frame { conn, frame } if frame.command == Verb::Connect => {
                    connected += 1;
                    accept(&conns[&conn], &mut commands);
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        plane.submit(commands);
    }
}

/// Python's answer to a CONNECT: the version, CONNECTED, the heart-beats.
fn accept(conn: &dataplane::Conn, commands: &mut Vec<Command>) {
    let headers = vec![
        ("version".to_owned(), "1.2".to_owned()),
        ("heart-beat".to_owned(), "10000,10000".to_owned()),
    ];
    commands.push(Command::AcceptConnect {
        conn: conn.clone(),
        version: Version::V12,
    });
    commands.push(Command::Send {
        conn: conn.clone(),
        frame: Frame::new(Verb::Connected, headers, Vec::new()),
    });
    commands.push(Command::SetHeartbeat {
        conn: conn.clone(),
        send_every: Some(Duration::from_secs(10)),
        expect_within: Some(Duration::from_secs(20)),
    });
}

/// The child: `count` connections, each CONNECTs, reads its CONNECTED, then beats every 5 s.
fn client(addr: &str, count: usize, seconds: u64) {
    let mut streams = Vec::with_capacity(count);
    for _ in 0..count {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .write_all(b"CONNECT\naccept-version:1.2\nheart-beat:10000,10000\nhost:localhost\n\n\0")
            .unwrap();
        streams.push(stream);
    }
    let mut buf = [0u8; 256];
    for stream in &mut streams {
        let mut got = Vec::new();
        while !got.contains(&0) {
            let n = stream.read(&mut buf).unwrap();
            assert!(n > 0, "closed before CONNECTED");
            got.extend_from_slice(&buf[..n]);
        }
        assert!(got.starts_with(b"CONNECTED\n"));
    }
    std::io::stdout().write_all(b"r").unwrap();
    std::io::stdout().flush().unwrap();
    let end = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < end {
        std::thread::sleep(Duration::from_secs(5));
        for stream in &mut streams {
            let _ = stream.write_all(b"\n");
        }
    }
}

fn rss_kib() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// utime + stime of this process, in clock ticks.
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 of stat(5), counted from the state (field 3) here.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
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
