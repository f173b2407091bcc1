//! A failing disk: EIO and ENOSPC on write and on fdatasync fail the store (every later
//! append and wait says so, naming the file) without losing what was synced; a crash that
//! loses unsynced data brings back only whole records, and every synced one.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod common;

use std::sync::Arc;

use common::*;
use paging::{root_errno, Error, Fault, FaultyFileSystem, FsOp, PageStore};

fn fail_one(op: FsOp, code: i32) {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultyFileSystem::std();
    let store = PageStore::open_with_fs(dir.path(), PAGE, Some("a"), fs.clone()).unwrap();
    // 5 synced records over two pages.
    for i in 1..=5 {
        let t = append(&store, &[record(i, 1000)], true);
        store.wait(t).unwrap();
    }
    fs.inject(Some(op), 0, Fault::Error(code));
    let t = append(&store, &[record(6, 1000)], true);
    let err = store.wait(t).unwrap_err();
    assert!(matches!(err, Error::Failed(_)), "{err:?}");
    assert_eq!(root_errno(&err), Some(code));
    assert!(err.to_string().contains("000000002.page"), "{err}");
    // Every later append and wait fails the same way, and nothing more is written.
    let ops = fs.op_count();
    let again = store.append(&[], true, false).unwrap_err();
    assert_eq!(root_errno(&again), Some(code));
    assert!(matches!(store.wait(t), Err(Error::Failed(_))));
    assert!(matches!(store.close(), Err(Error::Failed(_))));
    assert_eq!(fs.op_count(), ops, "{:?}", &fs.log()[ops as usize..]);
    // Reads never show a record whose write failed or whose sync is unknown as written.
    let seen = ids(&read_all(&store));
    if op == FsOp::Write {
        assert_eq!(seen, vec![1, 2, 3, 4, 5]);
    }
    drop(store);
    let store = PageStore::open(dir.path(), PAGE, None).unwrap();
    let got = read_all(&store);
    assert_whole(&got, |_| 1000);
    // What was synced is all there; the failing record only if its write happened (a
    // failed fdatasync says nothing about the page cache).
    let want: Vec<u64> = (1..=5).collect();
    let got_ids = ids(&got);
    if op == FsOp::Write {
        assert_eq!(got_ids, want);
    } else {
        assert!(
            got_ids == want || got_ids == [want, vec![6]].concat(),
            "{got_ids:?}"
        );
    }
}

#[test]
fn eio_or_enospc_on_write_or_fdatasync_fails_the_store() {
    for op in [FsOp::Write, FsOp::SyncData] {
        for code in [libc::EIO, libc::ENOSPC] {
            fail_one(op, code);
        }
    }
}

#[test]
fn a_failure_creating_the_next_page_fails_the_store() {
    for op in [FsOp::Create, FsOp::SyncDir] {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultyFileSystem::std();
        let store = PageStore::open_with_fs(dir.path(), PAGE, Some("a"), fs.clone()).unwrap();
        let t = append(&store, &[record(1, 1000)], true);
        store.wait(t).unwrap();
        fs.inject(Some(op), 0, Fault::Error(libc::ENOSPC));
        // Four records: the fourth needs page 2.
        let t = append(
            &store,
            &(2..=4).map(|i| record(i, 1000)).collect::<Vec<_>>(),
            true,
        );
        let err = store.wait(t).unwrap_err();
        assert_eq!(root_errno(&err), Some(libc::ENOSPC), "{op:?}");
        drop(store);
        let store = PageStore::open(dir.path(), PAGE, None).unwrap();
        let got = ids(&read_all(&store));
        // Page 1 was synced before page 2 was created.
        assert_eq!(got, vec![1, 2, 3], "{op:?}");
    }
}

#[test]
fn a_torn_write_is_never_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultyFileSystem::std();
    let store = PageStore::open_with_fs(dir.path(), 1 << 20, Some("a"), fs.clone()).unwrap();
    let t = append(&store, &[record(1, 500)], true);
    store.wait(t).unwrap();
    fs.inject(Some(FsOp::Write), 0, Fault::TornWrite(700));
    let recs: Vec<_> = (2..=4).map(|i| record(i, 500)).collect();
    let t = append(&store, &recs, true);
    assert!(store.wait(t).is_err());
    assert_eq!(ids(&read_all(&store)), vec![1]);
    drop(store);
    let store = PageStore::open(dir.path(), 1 << 20, None).unwrap();
    let got = read_all(&store);
    // 700 bytes of the batch landed: record 2 whole (534 bytes), record 3 torn.
    assert_eq!(ids(&got), vec![1, 2]);
    assert_whole(&got, |_| 500);
    assert!(store.torn().is_some());
}

/// A crash after records were written but before their fdatasync, losing any part of the
/// unsynced bytes: only whole records come back, in order, and every synced one does.
#[test]
fn crash_between_write_and_sync_brings_back_only_whole_records() {
    let len = 300;
    let rec_len = paging::format::record_len(2, len);
    for keep in (0..3 * rec_len).step_by(37) {
        let dir = tempfile::tempdir().unwrap();
        let faulty = FaultyFileSystem::std();
        let lossy = LossyFs::new(faulty.clone());
        let store = PageStore::open_with_fs(dir.path(), PAGE, Some("a"), lossy.clone()).unwrap();
        let mut synced = 0;
        for i in 1..=20 {
            let t = append(&store, &[record(i, len)], true);
            store.wait(t).unwrap();
            synced = i;
        }
        // The next fdatasync is the crash: the writes before it happened, the sync did not.
        faulty.inject(Some(FsOp::SyncData), 0, Fault::Crash);
        let recs: Vec<_> = (21..=25).map(|i| record(i, len)).collect();
        let t = append(&store, &recs, true);
        assert!(store.wait(t).is_err());
        drop(store);
        lossy.lose_unsynced(keep);
        let store =
            PageStore::open_with_fs(dir.path(), PAGE, None, Arc::new(paging::StdFileSystem))
                .unwrap();
        let got = read_all(&store);
        assert_whole(&got, |_| len);
        let got_ids = ids(&got);
        let n = got_ids.len() as u64;
        assert!(n >= synced, "keep {keep}: lost synced records: {got_ids:?}");
        assert_eq!(got_ids, (1..=n).collect::<Vec<_>>(), "keep {keep}");
    }
}
