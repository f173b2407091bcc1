//! The page store's behaviour on a healthy disk: round trips, rollover, big records,
//! reopen, reads that never run ahead of the writer, counts, deletion, group commit.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod common;

use std::collections::HashMap;

use common::*;
use paging::format::HEADER_LEN;
use paging::{Error, PageStore};

#[test]
fn append_read_reopen_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let recs: Vec<_> = (1..=20).map(|i| record(i, 100 + i as usize)).collect();
    {
        let store = PageStore::open(&path, PAGE, Some("orders")).unwrap();
        assert_eq!(store.pages(), vec![1]);
        assert_eq!(store.end(), (1, HEADER_LEN));
        let t = append(&store, &recs, true);
        store.wait(t).unwrap();
        let got = read_all(&store);
        assert_eq!(ids(&got), (1..=20).collect::<Vec<_>>());
        assert_whole(&got, |i| 100 + i as usize);
        store.close().unwrap();
    }
    let store = PageStore::open(&path, PAGE, None).unwrap();
    assert_eq!(store.address(), "orders");
    assert_eq!(store.torn(), None);
    let got = read_all(&store);
    assert_eq!(ids(&got), (1..=20).collect::<Vec<_>>());
    assert_whole(&got, |i| 100 + i as usize);
    // Appends after a reopen go to a fresh page: positions are never handed out twice.
    let last = *store.pages().last().unwrap();
    assert!(got.iter().all(|r| r.page < last));
    assert_eq!(store.end(), (last, HEADER_LEN));
    // Another address for the same directory is refused.
    drop(store);
    let err = PageStore::open(&path, PAGE, Some("other")).err().unwrap();
    assert!(matches!(err, Error::NotAStore { .. }), "{err}");
}

#[test]
fn rollover_at_page_size_and_records_larger_than_a_page() {
    let dir = tempfile::tempdir().unwrap();
    let store = PageStore::open(dir.path(), PAGE, Some("a")).unwrap();
    // 1000-byte messages: a record is 1000 + 18 + 16 + 8 = 1042 bytes; 3 fit in 4096.
    let recs: Vec<_> = (1..=7).map(|i| record(i, 1000)).collect();
    let t = append(&store, &recs, false);
    store.wait(t).unwrap();
    let pages: Vec<u64> = read_all(&store).iter().map(|r| r.page).collect();
    assert_eq!(pages, vec![1, 1, 1, 2, 2, 2, 3]);
    for f in page_files(dir.path()) {
        assert!(std::fs::metadata(&f).unwrap().len() <= PAGE, "{f:?}");
    }
    // A record bigger than a page goes alone into a fresh page, and the next one moves on.
    let big = vec![record(8, 10_000), record(9, 10)];
    let t = append(&store, &big, true);
    store.wait(t).unwrap();
    let got = read_all(&store);
    let tail: Vec<(u64, u64)> = got[7..].iter().map(|r| (r.message_id, r.page)).collect();
    assert_eq!(tail, vec![(8, 4), (9, 5)]);
    assert_whole(&got, |i| match i {
        8 => 10_000,
        9 => 10,
        _ => 1000,
    });
    // Finished pages read as done; the current one does not.
    let r = store.read(1, HEADER_LEN, 100, 1 << 20).unwrap();
    assert!(r.page_done);
    assert_eq!(r.records.len(), 3);
    let r = store.read(5, HEADER_LEN, 100, 1 << 20).unwrap();
    assert!(!r.page_done);
    // A read returns at least one record even above max_bytes, and about max_bytes.
    let r = store.read(4, HEADER_LEN, 100, 1).unwrap();
    assert_eq!(r.records.len(), 1);
    let r = store.read(1, HEADER_LEN, 100, 1500).unwrap();
    assert_eq!(r.records.len(), 2);
    let r = store.read(1, HEADER_LEN, 1, 1 << 20).unwrap();
    assert_eq!(r.records.len(), 1);
    assert!(!r.page_done);
}

#[test]
fn too_large_a_record_is_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = PageStore::open(dir.path(), PAGE, Some("a")).unwrap();
    let huge = vec![0u8; (1 << 30) + 1];
    let q = [1u64];
    let recs = [
        paging::NewRecord {
            message_id: 1,
            tx_id: 0,
            queue_offset: 1,
            queue_ids: &q,
            message: b"ok",
        },
        paging::NewRecord {
            message_id: 2,
            tx_id: 0,
            queue_offset: 2,
            queue_ids: &q,
            message: &huge,
        },
    ];
    let err = store.append(&recs, true, false).err().unwrap();
    assert!(matches!(err, Error::RecordTooLarge { .. }), "{err}");
    assert_eq!(store.end(), (1, HEADER_LEN));
}

#[test]
fn counts_per_queue_and_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let store = PageStore::open(dir.path(), 1 << 20, Some("a")).unwrap();
    let recs: Vec<_> = (1..=30).map(|i| record(i, 10)).collect();
    let t = append(&store, &recs, true);
    store.wait(t).unwrap();
    let mut want: HashMap<(u64, u64), u64> = HashMap::new();
    for (_, tx, qs, _) in &recs {
        for q in qs {
            *want.entry((*q, *tx)).or_default() += 1;
        }
    }
    assert_eq!(store.count(1).unwrap(), want);
}

#[test]
fn delete_page_removes_finished_pages_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = PageStore::open(dir.path(), PAGE, Some("a")).unwrap();
    let recs: Vec<_> = (1..=7).map(|i| record(i, 1000)).collect();
    let t = append(&store, &recs, true);
    store.wait(t).unwrap();
    assert_eq!(store.pages(), vec![1, 2, 3]);
    let err = store.delete_page(3).err().unwrap();
    assert!(matches!(err, Error::BadPage { .. }), "{err}");
    store.delete_page(1).unwrap();
    assert_eq!(store.pages(), vec![2, 3]);
    assert_eq!(page_files(dir.path()).len(), 2);
    assert!(store.delete_page(1).is_err());
    assert!(store.read(1, HEADER_LEN, 1, 1).is_err());
    drop(store);
    let store = PageStore::open(dir.path(), PAGE, None).unwrap();
    assert_eq!(ids(&read_all(&store)), vec![4, 5, 6, 7]);
    store.delete().unwrap();
    assert!(!dir.path().exists() || std::fs::read_dir(dir.path()).is_err());
}

#[test]
fn reads_never_run_ahead_of_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let store = PageStore::open(dir.path(), 1 << 20, Some("a")).unwrap();
    // Deferred: queued, the writer not woken, so nothing is written yet.
    let q = [1u64];
    let msg = message(1, 100);
    let rec = paging::NewRecord {
        message_id: 1,
        tx_id: 0,
        queue_offset: 1,
        queue_ids: &q,
        message: &msg,
    };
    let (t, pos) = store.append(&[rec], true, true).unwrap();
    assert_eq!(pos, vec![(1, HEADER_LEN)]);
    let r = store.read(1, HEADER_LEN, 10, 1 << 20).unwrap();
    assert!(r.records.is_empty());
    assert_eq!(r.next_offset, HEADER_LEN);
    assert_eq!(store.count(1).unwrap(), HashMap::new());
    store.wake_writer();
    store.wait(t).unwrap();
    assert_eq!(
        store
            .read(1, HEADER_LEN, 10, 1 << 20)
            .unwrap()
            .records
            .len(),
        1
    );
    assert_eq!(store.written(), store.end());
}

#[test]
fn appends_while_a_write_is_in_flight_share_one_fdatasync() {
    let dir = tempfile::tempdir().unwrap();
    let store = PageStore::open(dir.path(), 64 << 20, Some("a")).unwrap();
    // Deterministic half: with the writer asleep, 100 deferred appends are one batch: one
    // write and one sync.
    let t = append(&store, &[record(0, 10)], true);
    store.wait(t).unwrap();
    let start = std::time::Instant::now();
    while !store.writer_idle() {
        assert!(start.elapsed().as_secs() < 10, "the writer never went idle");
        std::thread::yield_now();
    }
    let s0 = store.stats();
    let mut last = 0;
    for i in 0..100 {
        let q = [1u64];
        let msg = message(i, 4096);
        let rec = paging::NewRecord {
            message_id: i,
            tx_id: 0,
            queue_offset: i,
            queue_ids: &q,
            message: &msg,
        };
        last = store.append(&[rec], true, true).unwrap().0;
    }
    store.wake_writer();
    store.wait(last).unwrap();
    let s = store.stats();
    assert_eq!(
        (
            s.io.writes - s0.io.writes,
            s.io.syncs - s0.io.syncs,
            s.io.records - s0.io.records
        ),
        (1, 1, 100)
    );
    // Concurrent synchronous appenders: whoever appends during a sync joins the next one.
    let threads = 8;
    let each = 100;
    std::thread::scope(|scope| {
        for t in 0..threads {
            let store = &store;
            scope.spawn(move || {
                for i in 0..each {
                    let tk = append(store, &[record(1000 * (t + 1) + i, 4096)], true);
                    store.wait(tk).unwrap();
                }
            });
        }
    });
    let s2 = store.stats();
    let syncs = s2.io.syncs - s.io.syncs;
    assert!(
        syncs < threads * each,
        "{syncs} fdatasyncs for {} appends",
        threads * each
    );
    assert_eq!(read_all(&store).len() as u64, 101 + threads * each);
}

#[test]
fn a_closed_store_refuses_appends_and_reads_still_work() {
    let dir = tempfile::tempdir().unwrap();
    let store = PageStore::open(dir.path(), PAGE, Some("a")).unwrap();
    append(&store, &[record(1, 10)], false);
    store.close().unwrap();
    store.close().unwrap();
    let q = [1u64];
    let rec = paging::NewRecord {
        message_id: 2,
        tx_id: 0,
        queue_offset: 2,
        queue_ids: &q,
        message: b"x",
    };
    assert!(matches!(
        store.append(&[rec], true, false),
        Err(Error::Closed { .. })
    ));
    // Close wrote and synced what was queued.
    assert_eq!(ids(&read_all(&store)), vec![1]);
}
