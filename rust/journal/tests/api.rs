//! The public API: appends, validation, transactions, batching, files, close.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use journal::{Error, Journal, JournalConfig, Op, PreparedTransaction};

#[test]
fn append_update_delete_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::default();
    {
        let (j, rep) = open(dir.path());
        assert!(rep.records.is_empty() && rep.torn_tail.is_none());
        for i in 0..300u64 {
            let mut ops = vec![add(i, &payload(i, 200))];
            if i % 3 == 0 {
                ops.push(update(i, &payload(i + 1, 10)));
                ops.push(update(i, b"second"));
            }
            if i % 5 == 4 {
                ops.push(del(i - 2));
            }
            for op in &ops {
                model.apply(op);
            }
            j.append(ops, i % 10 == 0).unwrap();
        }
        assert_eq!(j.stats().live_records, model.records.len());
        j.close().unwrap();
    }
    let (j, rep) = open(dir.path());
    assert_eq!(rep.records, model.list());
    assert!(rep.prepared.is_empty());
    assert_eq!(rep.incomplete_transactions_rolled_back, 0);
    assert_eq!(j.stats().live_records, model.records.len());
}

#[test]
fn validation_is_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (j, _) = open(dir.path());
    j.append(vec![add(1, b"a")], true).unwrap();
    assert!(matches!(
        j.submit(vec![add(1, b"b")], true),
        Err(Error::DuplicateRecord { id: 1 })
    ));
    assert!(matches!(
        j.submit(vec![update(2, b"b")], true),
        Err(Error::RecordNotFound { id: 2 })
    ));
    assert!(matches!(
        j.submit(vec![del(2)], true),
        Err(Error::RecordNotFound { id: 2 })
    ));
    // The first two ops are valid, the third is not: nothing is applied.
    assert!(matches!(
        j.submit(vec![add(5, b"x"), del(1), del(1)], true),
        Err(Error::RecordNotFound { id: 1 })
    ));
    j.append(vec![add(5, b"x"), update(1, b"u")], true).unwrap();
    // Validation sees queued ops.
    let t = j.submit(vec![del(5)], false).unwrap();
    assert!(matches!(
        j.submit(vec![update(5, b"late")], false),
        Err(Error::RecordNotFound { id: 5 })
    ));
    j.wait(t).unwrap();
    let max = FILE_SIZE as usize - 104;
    let too_big = vec![Op::Add {
        id: 9,
        record_type: 0,
        payload: vec![0; max - 20 + 1],
    }];
    match j.submit(too_big, true) {
        Err(Error::RecordTooLarge { size, max: m }) => assert_eq!((size, m), (max + 1, max)),
        other => panic!("{other:?}"),
    }
    // The largest record fits in a file of its own.
    j.append(
        vec![Op::Add {
            id: 9,
            record_type: 0,
            payload: vec![9; max - 20],
        }],
        true,
    )
    .unwrap();
    assert!(matches!(
        j.submit(vec![Op::Commit { tx_id: 77 }], true),
        Err(Error::Transaction { tx_id: 77, .. })
    ));
    drop(j);
    let (_, rep) = open(dir.path());
    let ids: Vec<u64> = rep.records.iter().map(|r| r.id).collect();
    assert_eq!(ids, vec![1, 9]);
    assert_eq!(rep.records[0].updates.len(), 1);
    assert_eq!(rep.records[1].payload.len(), max - 20);
}

fn tx_add(tx_id: u64, id: u64) -> Op {
    Op::AddTx {
        tx_id,
        id,
        record_type: 3,
        payload: payload(id, 50),
    }
}

#[test]
fn transaction_outcomes() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (j, _) = open(dir.path());
        j.append(vec![add(1, b"one"), add(2, b"two"), add(3, b"three")], true)
            .unwrap();
        // Committed: add 10, update 1, delete 2.
        j.append(vec![tx_add(100, 10)], false).unwrap();
        j.append(
            vec![
                Op::UpdateTx {
                    tx_id: 100,
                    id: 1,
                    record_type: 4,
                    payload: b"tx-update".to_vec(),
                },
                Op::DeleteTx { tx_id: 100, id: 2 },
            ],
            false,
        )
        .unwrap();
        j.append(vec![Op::Commit { tx_id: 100 }], true).unwrap();
        // Rolled back.
        j.append(
            vec![tx_add(200, 20), Op::DeleteTx { tx_id: 200, id: 3 }],
            false,
        )
        .unwrap();
        j.append(vec![Op::Rollback { tx_id: 200 }], true).unwrap();
        // Prepared, not finished.
        j.append(
            vec![
                tx_add(300, 30),
                Op::DeleteTx { tx_id: 300, id: 3 },
                Op::Prepare {
                    tx_id: 300,
                    xid: b"xid-300".to_vec(),
                },
            ],
            true,
        )
        .unwrap();
        assert!(matches!(
            j.submit(vec![tx_add(300, 31)], true),
            Err(Error::Transaction { tx_id: 300, .. })
        ));
        // Incomplete.
        j.append(vec![tx_add(400, 40)], true).unwrap();
        j.close().unwrap();
    }
    let expect_prepared = vec![PreparedTransaction {
        tx_id: 300,
        xid: b"xid-300".to_vec(),
        ops: vec![tx_add(300, 30), Op::DeleteTx { tx_id: 300, id: 3 }],
    }];
    {
        let (j, rep) = open(dir.path());
        let ids: Vec<u64> = rep.records.iter().map(|r| r.id).collect();
        assert_eq!(ids, vec![1, 3, 10]);
        assert_eq!(rep.records[0].updates.len(), 1);
        assert_eq!(rep.records[0].updates[0].payload, b"tx-update");
        assert_eq!(rep.records[2].payload, payload(10, 50));
        assert_eq!(rep.prepared, expect_prepared);
        assert_eq!(rep.incomplete_transactions_rolled_back, 1);
        // The rolled-back transaction's id and record id are free again.
        j.append(vec![tx_add(400, 40), Op::Rollback { tx_id: 400 }], true)
            .unwrap();
        j.close().unwrap();
    }
    {
        let (j, rep) = open(dir.path());
        assert_eq!(rep.incomplete_transactions_rolled_back, 0);
        assert_eq!(rep.prepared, expect_prepared);
        j.append(vec![Op::Commit { tx_id: 300 }], true).unwrap();
    }
    let (_, rep) = open(dir.path());
    let ids: Vec<u64> = rep.records.iter().map(|r| r.id).collect();
    assert_eq!(ids, vec![1, 10, 30]);
    assert!(rep.prepared.is_empty());
}

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
fn foreign_and_wrong_size_files() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (j, _) = open(dir.path());
        j.append(vec![add(1, b"x")], true).unwrap();
    }
    // Files that do not match the name pattern are ignored and left alone.
    for name in [
        "notes.txt",
        "activemq-data-x.amq",
        "activemq-data-1.amq.bak",
        "other-1.amq",
    ] {
        std::fs::write(dir.path().join(name), b"not ours").unwrap();
    }
    let (j, rep) = open(dir.path());
    assert_eq!(rep.records.len(), 1);
    drop(j);
    assert_eq!(
        std::fs::read(dir.path().join("notes.txt")).unwrap(),
        b"not ours"
    );

    let foreign = dir.path().join("activemq-data-777.amq");
    std::fs::write(&foreign, vec![0xAB; FILE_SIZE as usize]).unwrap();
    match Journal::open(config(dir.path())) {
        Err(Error::ForeignFile(journal::ForeignFile { path, .. })) => assert_eq!(path, foreign),
        other => panic!("{:?}", other.map(|_| ())),
    }
    // Never overwritten.
    assert!(std::fs::read(&foreign).unwrap().iter().all(|&b| b == 0xAB));
    std::fs::write(&foreign, vec![0; 100]).unwrap();
    match Journal::open(config(dir.path())) {
        Err(Error::WrongFileSize {
            path,
            expected,
            actual,
        }) => assert_eq!((path, expected, actual), (foreign.clone(), FILE_SIZE, 100)),
        other => panic!("{:?}", other.map(|_| ())),
    }
    std::fs::remove_file(&foreign).unwrap();

    // One of ours, with another format version: foreign. A damaged header: corrupted.
    let (_, data) = normal_data_files(dir.path()).pop().unwrap();
    let original = std::fs::read(&data).unwrap();
    patch(&data, 8, &[9]);
    assert!(matches!(
        Journal::open(config(dir.path())),
        Err(Error::ForeignFile(journal::ForeignFile { .. }))
    ));
    std::fs::write(&data, &original).unwrap();
    flip_bit(&data, 17 * 8);
    match Journal::open(config(dir.path())) {
        Err(Error::Corrupted(journal::Corruption { path, offset, .. })) => {
            assert_eq!((path, offset), (data.clone(), 0));
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    std::fs::write(&data, &original).unwrap();
    let (_, rep) = open(dir.path());
    assert_eq!(rep.records.len(), 1);
}

#[test]
fn close_is_idempotent_and_final() {
    let dir = tempfile::tempdir().unwrap();
    let (j, _) = open(dir.path());
    let t = j.submit(vec![add(1, b"x")], false).unwrap();
    j.close().unwrap();
    j.close().unwrap();
    // Closing flushed the queued non-sync submit.
    j.wait(t).unwrap();
    assert!(matches!(
        j.submit(vec![add(2, b"y")], true),
        Err(Error::Closed)
    ));
    assert!(matches!(j.wait(t + 10), Err(Error::Closed)));
    assert!(matches!(j.compact(), Err(Error::Closed)));
    // Dropping without close flushes as well.
    let t = {
        let (j, _) = open(dir.path());
        j.submit(vec![add(2, b"y")], false).unwrap()
    };
    assert!(t > 0);
    let (_, rep) = open(dir.path());
    assert_eq!(rep.records.len(), 2);
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

#[test]
fn records_never_span_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::default();
    {
        let (j, _) = open(dir.path());
        for i in 0..40u64 {
            // Odd sizes so that batches end at awkward offsets.
            let op = add(i, &payload(i, 7_001 + (i as usize * 977) % 9_000));
            model.apply(&op);
            j.append(vec![op], i % 4 == 0).unwrap();
        }
        let s = j.stats();
        assert!(s.data_files >= 5, "{s:?}");
    }
    for (_, path) in normal_data_files(dir.path()) {
        for b in batches(&path) {
            assert!(b.end <= FILE_SIZE);
        }
    }
    let (_, rep) = open(dir.path());
    assert_eq!(rep.records, model.list());
}

#[test]
fn reclaimed_files_are_reused() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::default();
    let (j, _) = open(dir.path());
    let mut id = 0;
    let mut names = std::collections::BTreeSet::new();
    let mut inodes = std::collections::BTreeSet::new();
    for round in 0..6 {
        // Fill about three files, then delete everything.
        let first = id;
        for _ in 0..30 {
            let op = add(id, &payload(id, 5_000));
            model.apply(&op);
            j.append(vec![op], false).unwrap();
            id += 1;
        }
        let dels: Vec<Op> = (first..id).map(del).collect();
        for op in &dels {
            model.apply(op);
        }
        j.append(dels, true).unwrap();
        // Dead files are reclaimed in the background.
        assert!(
            wait_for(Duration::from_secs(10), || j.stats().data_files == 1),
            "round {round}: {:?}",
            j.stats()
        );
        for p in data_files(dir.path()) {
            // A file may be renamed under us (retired into the pool) between list and stat.
            if let Ok(m) = std::fs::metadata(&p) {
                inodes.insert(m.ino());
                names.insert(p);
            }
        }
    }
    // Every use of a file gets a new id (and name), but the same few files are recycled.
    assert!(
        names.len() > 2 * inodes.len(),
        "{} names, {} files",
        names.len(),
        inodes.len()
    );
    assert!(inodes.len() <= 6, "{inodes:?}");
    // Reused files hold stale batches of earlier uses; none of it comes back.
    drop(j);
    let (j, rep) = open(dir.path());
    assert!(rep.records.is_empty() && rep.torn_tail.is_none());
    let op = add(id, b"last");
    model.apply(&op);
    j.append(vec![op], true).unwrap();
    drop(j);
    let (_, rep) = open(dir.path());
    assert_eq!(rep.records, model.list());
}

#[test]
fn pool_limit_deletes_reclaimed_files() {
    let dir = tempfile::tempdir().unwrap();
    let (j, _) = Journal::open(JournalConfig {
        pool_files: 0,
        min_files: 2,
        ..config(dir.path())
    })
    .unwrap();
    for i in 0..60 {
        j.append(vec![add(i, &payload(i, 5_000))], false).unwrap();
    }
    let before = data_files(dir.path()).len();
    assert!(before >= 5);
    j.append((0..60).map(del).collect(), true).unwrap();
    assert!(wait_for(Duration::from_secs(10), || j.stats().data_files == 1));
    assert!(wait_for(Duration::from_secs(10), || data_files(dir.path())
        .len()
        <= 2));
    drop(j);
    let (_, rep) = open(dir.path());
    assert!(rep.records.is_empty());
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
