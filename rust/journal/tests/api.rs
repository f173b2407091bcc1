//! The public API: appends, validation, transactions, files, close (batching: `group_commit.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod common;

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

#[test]
fn a_dead_file_between_live_ones_does_not_break_the_chain() {
    // With fdatasync, a gap in the chain read as a durable batch lost (refusing to open);
    // without, as a torn tail, cutting every later file.
    for datasync in [true, false] {
        dead_file_between_live_ones(datasync);
    }
}

/// One long-lived record at the start, then files whose records all die, then live
/// records again: whatever is reclaimed, reopening finds every live record.
fn dead_file_between_live_ones(datasync: bool) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = || JournalConfig {
        datasync,
        ..config(dir.path())
    };
    let mut model = Model::default();
    {
        let (j, _) = Journal::open(cfg()).unwrap();
        let keep = add(0, &payload(0, 100));
        model.apply(&keep);
        j.append(vec![keep], true).unwrap();
        for id in 1..40 {
            let op = add(id, &payload(id, 5_000));
            model.apply(&op);
            j.append(vec![op], false).unwrap();
        }
        let dels: Vec<Op> = (1..30).map(del).collect();
        for op in &dels {
            model.apply(op);
        }
        j.append(dels, true).unwrap();
        for id in 40..60 {
            let op = add(id, &payload(id, 5_000));
            model.apply(&op);
            j.append(vec![op], true).unwrap();
        }
        // The housekeeper's chance to reclaim the dead files in the middle.
        std::thread::sleep(Duration::from_millis(300));
    }
    let (_, rep) = Journal::open(cfg()).unwrap();
    let ids = |rs: &[journal::RecordInfo]| rs.iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(ids(&rep.records), ids(&model.list()), "datasync {datasync}");
    assert!(rep.records == model.list());
    assert!(rep.torn_tail.is_none(), "{:?}", rep.torn_tail);
}
