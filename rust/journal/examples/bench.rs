//! Throughput of sync appends against a raw `pwrite` + `fdatasync` group-commit loop
//! measured in the same run, on the same disk.
//!
//! `cargo run --release -p journal --example bench -- [dir] [seconds] [threads...]`
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use journal::{Journal, JournalConfig, Op};

const RECORD: usize = 1024;
const FILE_SIZE: u64 = 10 << 20;

/// The raw loop's shared buffer: (state, "work queued", "batch done").
struct RawState {
    buf: Vec<u8>,
    submitted: u64,
    done: u64,
    stop: bool,
}
type RawShared = Arc<(Mutex<RawState>, Condvar, Condvar)>;

/// The raw loop's flusher: writes what has accumulated with one pwrite and one fdatasync,
/// then wakes the writers.
fn raw_flusher(f: std::fs::File, s: RawShared) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut off = 0u64;
        let mut out = Vec::new();
        loop {
            let upto = {
                let mut g = s.0.lock().unwrap();
                while g.buf.is_empty() && !g.stop {
                    g = s.1.wait(g).unwrap();
                }
                if g.stop {
                    return;
                }
                std::mem::swap(&mut out, &mut g.buf);
                g.submitted
            };
            if off + out.len() as u64 > FILE_SIZE {
                off = 0;
            }
            f.write_all_at(&out, off).unwrap();
            f.sync_data().unwrap();
            off += out.len() as u64;
            out.clear();
            s.0.lock().unwrap().done = upto;
            s.2.notify_all();
        }
    })
}

/// Raw loop: writers append to a shared buffer and wait; one flusher writes what has
/// accumulated with one pwrite and one fdatasync, then wakes them.
fn raw(dir: &Path, threads: usize, secs: f64) -> f64 {
    let path = dir.join("raw.bin");
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    f.write_all_at(&vec![0u8; FILE_SIZE as usize], 0).unwrap();
    f.sync_all().unwrap();
    let s: RawShared = Arc::new((
        Mutex::new(RawState {
            buf: Vec::new(),
            submitted: 0,
            done: 0,
            stop: false,
        }),
        Condvar::new(),
        Condvar::new(),
    ));
    let flusher = raw_flusher(f, s.clone());
    let start = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let s = s.clone();
            std::thread::spawn(move || {
                let rec = vec![7u8; RECORD];
                let mut n = 0u64;
                while start.elapsed().as_secs_f64() < secs {
                    let mut g = s.0.lock().unwrap();
                    g.buf.extend_from_slice(&rec);
                    g.submitted += 1;
                    let me = g.submitted;
                    s.1.notify_one();
                    while g.done < me {
                        g = s.2.wait(g).unwrap();
                    }
                    n += 1;
                }
                n
            })
        })
        .collect();
    let total: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    let el = start.elapsed().as_secs_f64();
    s.0.lock().unwrap().stop = true;
    s.1.notify_all();
    flusher.join().unwrap();
    let _ = std::fs::remove_file(path);
    total as f64 / el
}

/// Raw single writer: pwrite + fdatasync per record.
fn raw_single(dir: &Path, secs: f64) -> f64 {
    let path = dir.join("raw1.bin");
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    f.write_all_at(&vec![0u8; FILE_SIZE as usize], 0).unwrap();
    f.sync_all().unwrap();
    let rec = vec![7u8; RECORD];
    let start = Instant::now();
    let mut n = 0u64;
    let mut off = 0;
    while start.elapsed().as_secs_f64() < secs {
        if off + RECORD as u64 > FILE_SIZE {
            off = 0;
        }
        f.write_all_at(&rec, off).unwrap();
        f.sync_data().unwrap();
        off += RECORD as u64;
        n += 1;
    }
    let el = start.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(path);
    n as f64 / el
}

fn journal(dir: &Path, threads: usize, secs: f64, ack: bool) -> (f64, journal::JournalStats) {
    let jdir: PathBuf = dir.join(format!("journal-{threads}"));
    let _ = std::fs::remove_dir_all(&jdir);
    let fs = journal::FaultyFileSystem::std();
    let (j, _) = Journal::open_with_fs(
        JournalConfig {
            directory: jdir.clone(),
            file_size: FILE_SIZE,
            ..JournalConfig::default()
        },
        fs.clone(),
    )
    .unwrap();
    let j = Arc::new(j);
    let start = Instant::now();
    let workers: Vec<_> = (0..threads as u64)
        .map(|t| {
            let j = j.clone();
            std::thread::spawn(move || {
                let mut n = 0u64;
                let mut id = t << 40;
                while start.elapsed().as_secs_f64() < secs {
                    // With `ack`, delete what we added two rounds ago, like a broker acking.
                    let mut ops = vec![Op::Add {
                        id,
                        record_type: 1,
                        payload: vec![7u8; RECORD],
                    }];
                    if ack && n >= 2 && n % 2 == 0 {
                        ops.push(Op::Delete { id: id - 2 });
                        ops.push(Op::Delete { id: id - 1 });
                    }
                    j.append(ops, true).unwrap();
                    id += 1;
                    n += 1;
                }
                n
            })
        })
        .collect();
    let total: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    let el = start.elapsed().as_secs_f64();
    let stats = j.stats();
    j.close().unwrap();
    let log = fs.log();
    let count = |op| log.iter().filter(|(o, _)| *o == op).count();
    eprintln!(
        "  files created {}, renamed {}, removed {}; {:?}",
        count(journal::FsOp::Create),
        count(journal::FsOp::Rename),
        count(journal::FsOp::Remove),
        stats
    );
    let _ = std::fs::remove_dir_all(&jdir);
    (total as f64 / el, stats)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = PathBuf::from(
        args.first()
            .cloned()
            .unwrap_or_else(|| "/tmp/journal-bench".into()),
    );
    let secs: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let threads: Vec<usize> = if args.len() > 2 {
        args[2..].iter().map(|s| s.parse().unwrap()).collect()
    } else {
        vec![1, 64]
    };
    // BENCH_ACK=1: also delete older records, like a broker acknowledging messages.
    let ack = std::env::var_os("BENCH_ACK").is_some();
    std::fs::create_dir_all(&dir).unwrap();
    for &t in &threads {
        let base = if t == 1 {
            raw_single(&dir, secs)
        } else {
            raw(&dir, t, secs)
        };
        std::thread::sleep(Duration::from_millis(200));
        let (ours, stats) = journal(&dir, t, secs, ack);
        println!(
            "threads {t:3}: raw {base:9.0}/s  journal {ours:9.0}/s  ratio {:.3}  (records/sync {:.1})",
            ours / base,
            stats.io.records as f64 / stats.io.syncs.max(1) as f64
        );
    }
}
