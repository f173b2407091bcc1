//! Group commit through the public API: batching of concurrent and non-sync appends, the
//! buffer timeout, datasync off, progress and the completion listener, the caller that
//! writes its own batch, deferred and flushed submits.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use journal::{Journal, JournalConfig};

#[test]
fn concurrent_appenders_are_batched() {
    let dir = tempfile::tempdir().unwrap();
    let (j, _) = Journal::open(JournalConfig {
        file_size: 1 << 20,
        ..config(dir.path())
    })
    .unwrap();
    let j = Arc::new(j);
    let threads = 16u64;
    let per = 40u64;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let j = j.clone();
            std::thread::spawn(move || {
                for i in 0..per {
                    let id = t * 1000 + i;
                    j.append(vec![add(id, &payload(id, 1024))], true).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let s = j.stats();
    assert_eq!(s.io.records, threads * per);
    assert!(
        s.io.records > 2 * s.io.syncs,
        "expected batching, got {} records in {} syncs",
        s.io.records,
        s.io.syncs
    );
    drop(j);
    let (_, rep) = Journal::open(JournalConfig {
        file_size: 1 << 20,
        ..config(dir.path())
    })
    .unwrap();
    assert_eq!(rep.records.len() as u64, threads * per);
}

#[test]
fn non_sync_appends_wait_for_company() {
    let dir = tempfile::tempdir().unwrap();
    let (j, _) = Journal::open(JournalConfig {
        buffer_timeout: Duration::from_millis(100),
        ..config(dir.path())
    })
    .unwrap();
    let tickets: Vec<u64> = (0..50)
        .map(|i| j.submit(vec![add(i, b"x")], false).unwrap())
        .collect();
    j.wait(*tickets.last().unwrap()).unwrap();
    let s = j.stats();
    assert_eq!(s.io.records, 50);
    assert!(s.io.writes <= 3, "{s:?}");
    assert_eq!(s.io.syncs, 0);
    // A sync submit is written at once and makes the earlier ones durable too.
    let t = j.submit(vec![add(100, b"y")], false).unwrap();
    let started = std::time::Instant::now();
    j.append(vec![], true).unwrap();
    assert!(started.elapsed() < Duration::from_millis(90));
    assert!(j.progress().completed >= t);
    assert_eq!(j.stats().io.syncs, 1);
    // The buffer size cap flushes without waiting for the timeout.
    let (j2, _) = Journal::open(JournalConfig {
        directory: dir.path().join("b"),
        buffer_timeout: Duration::from_secs(30),
        buffer_size: 4096,
        ..config(dir.path())
    })
    .unwrap();
    let started = std::time::Instant::now();
    let ts: Vec<u64> = (0..10)
        .map(|i| j2.submit(vec![add(i, &[0; 1000])], false).unwrap())
        .collect();
    j2.wait(ts[2]).unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn datasync_false_never_syncs() {
    let dir = tempfile::tempdir().unwrap();
    let (j, _) = Journal::open(JournalConfig {
        datasync: false,
        ..config(dir.path())
    })
    .unwrap();
    for i in 0..200 {
        j.append(vec![add(i, &[1; 700])], true).unwrap();
    }
    j.close().unwrap();
    assert_eq!(j.stats().io.syncs, 0);
    let (_, rep) = open(dir.path());
    assert_eq!(rep.records.len(), 200);
}

#[test]
fn progress_and_completion_listener() {
    let dir = tempfile::tempdir().unwrap();
    let (j, _) = open(dir.path());
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    j.set_completion_listener(Box::new(move || {
        c.fetch_add(1, Ordering::SeqCst);
    }));
    let t1 = j.submit(vec![add(1, b"a")], true).unwrap();
    let t2 = j.submit(vec![add(2, b"b")], false).unwrap();
    assert!(t2 > t1);
    // A Python-style waiter: poll progress until the ticket is complete.
    assert!(wait_for(Duration::from_secs(10), || j.progress().completed >= t1));
    j.wait(t2).unwrap();
    let p = j.progress();
    assert!(p.completed >= t2 && p.failed.is_none());
    assert!(calls.load(Ordering::SeqCst) >= 1);
    // An empty submit is a barrier.
    j.append(vec![], true).unwrap();
}

/// A lone appender served by the writer thread (as through the Python facade: `submit`,
/// then wait for the completion listener, never `wait`), coming back at once and after
/// pauses (each submit wakes the sleeping writer): every ticket completes, one synced batch
/// each, and all of it is recovered.
#[test]
fn lone_appender_via_the_writer_thread() {
    let dir = tempfile::tempdir().unwrap();
    let (j, _) = open(dir.path());
    let signal = Arc::new((std::sync::Mutex::new(0u64), std::sync::Condvar::new()));
    let s = signal.clone();
    j.set_completion_listener(Box::new(move || {
        *s.0.lock().unwrap() += 1;
        s.1.notify_all();
    }));
    let before = j.stats();
    let mut id = 0;
    for pause_us in [0u64, 0, 0, 300, 2_000, 0, 0, 2_000, 0] {
        for _ in 0..20 {
            if pause_us > 0 {
                std::thread::sleep(Duration::from_micros(pause_us));
            }
            id += 1;
            let ticket = j.submit(vec![add(id, b"lone")], true).unwrap();
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            let mut pokes = signal.0.lock().unwrap();
            while j.progress().completed < ticket {
                assert!(
                    std::time::Instant::now() < deadline,
                    "ticket {ticket} never completed"
                );
                pokes = signal
                    .1
                    .wait_timeout(pokes, Duration::from_millis(100))
                    .unwrap()
                    .0;
            }
        }
    }
    let after = j.stats();
    assert_eq!(after.io.writes - before.io.writes, id);
    assert_eq!(after.io.syncs - before.io.syncs, id);
    j.close().unwrap();
    let (_j, rep) = open(dir.path());
    assert_eq!(rep.records.len() as u64, id);
}

#[test]
fn deferred_submits_share_the_batch_the_wake_up_starts() {
    let dir = tempfile::tempdir().unwrap();
    let (j, _) = open(dir.path());
    j.append(vec![add(1, b"settle")], true).unwrap();
    std::thread::sleep(Duration::from_millis(50)); // the writer goes back to sleep
    let before = j.stats().io.writes;
    let tickets: Vec<_> = (2..12u64)
        .map(|i| j.submit_deferred(vec![add(i, b"x")], true).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        j.progress().completed,
        tickets[0] - 1,
        "no write before the wake-up"
    );
    j.wake_writer();
    j.wait(*tickets.last().unwrap()).unwrap();
    assert_eq!(j.stats().io.writes, before + 1);
    j.wake_writer(); // nothing deferred: a no-op
    j.close().unwrap();
}

#[test]
fn flushed_submits_are_written_at_once_without_a_sync() {
    let dir = tempfile::tempdir().unwrap();
    let (j, _) = Journal::open(JournalConfig {
        buffer_timeout: Duration::from_secs(30),
        ..config(dir.path())
    })
    .unwrap();
    let started = std::time::Instant::now();
    let t = j.submit_flushed(vec![add(1, b"x")], false).unwrap();
    j.wait(t).unwrap(); // not after the 30 s buffer timeout
    assert!(started.elapsed() < Duration::from_secs(10));
    let stats = j.stats();
    assert_eq!((stats.io.writes, stats.io.syncs), (1, 0));
    // Deferred: written once woken, still without a sync; a later sync batch covers it.
    let t = j.submit_flushed(vec![add(2, b"y")], true).unwrap();
    j.wake_writer();
    j.wait(t).unwrap();
    assert_eq!(j.stats().io.syncs, 0);
    j.append(vec![add(3, b"z")], true).unwrap();
    assert_eq!(j.stats().io.syncs, 1);
    j.close().unwrap();
    let (_, rep) = open(dir.path());
    assert_eq!(rep.records.len(), 3);
}
