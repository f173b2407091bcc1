//! Replication through the public API: the start's files copied to a backup plus the
//! tapped frames applied there give the primary's state; listed files stay untouched while
//! replication runs; the completion gate; corrupt and refused frames.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use journal::{Error, Journal, JournalConfig, LoadReport, Op};

fn add_tx(tx_id: u64, id: u64, payload: &[u8]) -> Op {
    Op::AddTx {
        tx_id,
        id,
        record_type: 3,
        payload: payload.to_vec(),
    }
}

fn copy_files(files: &[PathBuf], to: &Path) {
    for f in files {
        assert!(f.is_absolute(), "{}", f.display());
        std::fs::copy(f, to.join(f.file_name().unwrap())).unwrap();
    }
}

/// Writes the pre-start history: live, updated and deleted records, an open transaction,
/// a prepared one and a committed one; the last submits are left queued (not synced).
fn before_start(a: &Journal) {
    for id in 1..=30 {
        a.append(vec![add(id, &payload(id, 2500))], id % 3 == 0)
            .unwrap();
    }
    a.append(
        vec![update(2, b"u2"), update(3, b"u3"), del(4), del(5)],
        true,
    )
    .unwrap();
    a.append(
        vec![
            add_tx(100, 50, b"open tx add"),
            Op::UpdateTx {
                tx_id: 100,
                id: 6,
                record_type: 9,
                payload: b"open tx update".to_vec(),
            },
            Op::DeleteTx { tx_id: 100, id: 7 },
        ],
        true,
    )
    .unwrap();
    let prepare = Op::Prepare {
        tx_id: 101,
        xid: b"xid-101".to_vec(),
    };
    a.append(vec![add_tx(101, 51, b"prepared"), prepare], true)
        .unwrap();
    a.append(
        vec![add_tx(102, 52, b"committed"), Op::Commit { tx_id: 102 }],
        false,
    )
    .unwrap();
    // Queued, not yet written: the start must write them into the listed files.
    a.submit(vec![add(40, b"queued"), del(8)], false).unwrap();
    a.submit(vec![add_tx(100, 53, b"queued tx add")], false)
        .unwrap();
}

/// Post-start ops of every kind and every submit variant; returns the last ticket.
fn after_start(a: &Journal) -> u64 {
    for id in 200..260 {
        a.submit(vec![add(id, &payload(id, 2000))], id % 5 == 0)
            .unwrap();
    }
    a.submit(vec![update(1, b"u1"), del(2), del(3)], false)
        .unwrap();
    a.submit(
        vec![add_tx(100, 54, b"late"), Op::Commit { tx_id: 100 }],
        true,
    )
    .unwrap();
    a.submit_flushed(vec![add_tx(103, 60, b"rolled"), del(9)], false)
        .unwrap();
    a.submit_deferred(vec![Op::Rollback { tx_id: 103 }], true)
        .unwrap();
    a.wake_writer();
    a.submit_flushed(vec![Op::Commit { tx_id: 101 }], true)
        .unwrap();
    let prepare = Op::Prepare {
        tx_id: 104,
        xid: b"xid-104".to_vec(),
    };
    a.append(
        vec![
            add_tx(104, 61, b"p"),
            Op::DeleteTx { tx_id: 104, id: 10 },
            prepare,
        ],
        false,
    )
    .unwrap();
    a.submit(vec![del(20), add(20, b"again")], false).unwrap()
}

fn logical(r: &LoadReport) -> (Vec<journal::RecordInfo>, Vec<journal::PreparedTransaction>) {
    (r.records.clone(), r.prepared.clone())
}

#[test]
fn start_copy_and_apply_give_the_primary_state() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, _) = open(da.path());
    before_start(&a);
    let start = a.replication_start().unwrap();
    assert!(start.through > 0);
    assert!(start.files.len() > 1, "{:?}", start.files);
    a.wait(start.through).unwrap();
    copy_files(&start.files, db.path());
    let (b, opened) = open(db.path());
    // The copies hold tx 100 open: the backup's open rolls it back, the first frame
    // re-opens it.
    assert_eq!(opened.incomplete_transactions_rolled_back, 1);
    let last = after_start(&a);
    a.wait(last).unwrap();
    let frames = a.replication_take();
    assert!(!frames.is_empty());
    assert!(a.replication_take().is_empty());
    let (primary, local) = b.apply_replicated(&frames).unwrap();
    assert_eq!(primary, last);
    b.wait(local).unwrap();
    assert_eq!(b.apply_replicated(&[]).unwrap(), (0, 0));
    a.close().unwrap();
    b.close().unwrap();
    let (_, ra) = open(da.path());
    let (_, rb) = open(db.path());
    assert_eq!(ra.incomplete_transactions_rolled_back, 0);
    assert_eq!(rb.incomplete_transactions_rolled_back, 0);
    assert_eq!(ra.prepared.len(), 1);
    assert!(ra.records.iter().any(|r| r.id == 53), "tx 100 committed");
    assert!(ra.records.iter().all(|r| r.id != 60), "tx 103 rolled back");
    assert_eq!(logical(&ra), logical(&rb));
}

#[test]
fn backup_files_never_clash_with_copied_ones() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, _) = open(da.path());
    before_start(&a);
    let start = a.replication_start().unwrap();
    copy_files(&start.files, db.path());
    let copied: Vec<u64> = start.files.iter().map(|f| header(f).id).collect();
    let (b, _) = open(db.path());
    for id in 1000..1100 {
        b.submit(vec![add(id, &payload(id, 3000))], false).unwrap();
    }
    b.append(vec![], true).unwrap();
    b.close().unwrap();
    for f in data_files(db.path()) {
        let h = header(&f);
        let name = f.file_name().unwrap().to_owned();
        let was_copied = start.files.iter().any(|c| c.file_name().unwrap() == name);
        if !was_copied {
            assert!(!copied.contains(&h.id), "{} reuses an id", f.display());
        }
    }
    let (_, rb) = open(db.path());
    assert!(rb.records.iter().any(|r| r.id == 1099));
}

fn contents(files: &[PathBuf]) -> Vec<Vec<u8>> {
    files.iter().map(|f| std::fs::read(f).unwrap()).collect()
}

#[test]
fn listed_files_stay_untouched_until_stop() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = JournalConfig {
        compact_min_files: 2,
        compact_percentage: 90,
        pool_files: 1,
        ..config(dir.path())
    };
    let (a, _) = Journal::open(cfg).unwrap();
    for id in 1..=60 {
        a.append(vec![add(id, &payload(id, 2000))], false).unwrap();
    }
    let start = a.replication_start().unwrap();
    assert!(a.replication_start().is_err(), "started twice");
    let before = contents(&start.files);
    // Everything listed dies; files roll over; compaction is asked for.
    for id in 1..=60 {
        a.append(vec![del(id)], id % 10 == 0).unwrap();
    }
    for id in 100..160 {
        a.append(vec![add(id, &payload(id, 2000))], false).unwrap();
    }
    assert_eq!(a.compact().unwrap(), journal::CompactionReport::default());
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(contents(&start.files), before);
    assert_eq!(a.stats().compactions, 0);
    a.replication_stop();
    a.replication_stop();
    let changed = wait_for(Duration::from_secs(10), || {
        start
            .files
            .iter()
            .zip(&before)
            .any(|(f, b)| std::fs::read(f).ok().as_ref() != Some(b))
    });
    assert!(changed, "reclaim resumes after stop");
}

#[test]
fn the_gate_holds_completion_until_replicated() {
    let dir = tempfile::tempdir().unwrap();
    let (j, _) = open(dir.path());
    let j = Arc::new(j);
    let pokes = Arc::new(AtomicUsize::new(0));
    let p = pokes.clone();
    j.set_completion_listener(Box::new(move || {
        p.fetch_add(1, Ordering::SeqCst);
    }));
    let t0 = j.submit(vec![add(1, b"a")], false).unwrap();
    j.replication_gate(true);
    // Issued before the gate went on: not held back.
    j.wait(t0).unwrap();
    let t1 = j.submit(vec![add(2, b"b")], true).unwrap();
    assert!(wait_for(Duration::from_secs(5), || j.stats().io.records >= 2));
    assert_eq!(j.progress().completed, t0);
    let waiter = {
        let j = j.clone();
        std::thread::spawn(move || j.wait(t1))
    };
    std::thread::sleep(Duration::from_millis(50));
    assert!(!waiter.is_finished(), "wait passed an unreplicated ticket");
    let n = pokes.load(Ordering::SeqCst);
    j.replicated(t1);
    waiter.join().unwrap().unwrap();
    assert_eq!(j.progress().completed, t1);
    assert!(pokes.load(Ordering::SeqCst) > n, "listener fired");
    j.replicated(t0); // lower: ignored
    let t2 = j.submit(vec![add(3, b"c")], true).unwrap();
    let t3 = j.submit(vec![add(4, b"d")], true).unwrap();
    assert!(wait_for(Duration::from_secs(5), || j.stats().io.records >= 4));
    j.replicated(t2);
    assert_eq!(j.progress().completed, t2);
    let s = j.replication_state();
    assert!(s.gate && !s.active);
    assert_eq!(s.replicated_through, t2);
    let n = pokes.load(Ordering::SeqCst);
    j.replication_gate(false);
    assert_eq!(j.progress().completed, t3);
    assert!(pokes.load(Ordering::SeqCst) > n, "listener fired");
    j.wait(t3).unwrap();
}

#[test]
fn stop_releases_the_gate_and_close_implies_stop() {
    let dir = tempfile::tempdir().unwrap();
    let (j, _) = open(dir.path());
    j.replication_start().unwrap();
    j.replication_gate(true);
    let t = j.submit(vec![add(1, b"a")], true).unwrap();
    assert!(wait_for(Duration::from_secs(5), || j.stats().io.records >= 1));
    assert!(j.progress().completed < t);
    assert!(j.replication_state().pending_bytes > 0);
    j.replication_stop();
    j.wait(t).unwrap();
    let s = j.replication_state();
    assert!(!s.active && !s.gate && s.pending_bytes == 0);
    assert!(j.replication_take().is_empty());
    j.replication_start().unwrap();
    j.close().unwrap();
    assert!(!j.replication_state().active);
}

#[test]
fn a_corrupt_frame_is_refused_and_nothing_of_it_applied() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, _) = open(da.path());
    let start = a.replication_start().unwrap();
    assert_eq!((start.files.len(), start.through), (0, 0));
    a.submit(vec![add(1, b"one")], false).unwrap();
    a.submit(vec![add(2, b"two"), add(3, b"three")], true)
        .unwrap();
    let frames = a.replication_take();
    let (b, _) = open(db.path());
    let second = frames.len() - 20;
    for at in [0, 5, 9, second] {
        let mut bad = frames.clone();
        bad[at] ^= 0x10;
        match b.apply_replicated(&bad) {
            Err(Error::Replication(m)) => assert!(m.contains("corrupt frame"), "{m}"),
            other => panic!("byte {at}: {other:?}"),
        }
        assert_eq!(b.stats().live_records, 0, "byte {at}");
    }
    let mut torn = frames.clone();
    torn.pop();
    assert!(
        matches!(b.apply_replicated(&torn), Err(Error::Replication(m)) if m.contains("truncated"))
    );
    let (_, local) = b.apply_replicated(&frames).unwrap();
    b.wait(local).unwrap();
    assert_eq!(b.stats().live_records, 3);
}

#[test]
fn a_frame_the_backup_refuses_names_itself() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, _) = open(da.path());
    a.append(vec![add(1, b"before")], true).unwrap();
    a.replication_start().unwrap();
    a.submit(vec![add(2, b"fine")], false).unwrap();
    let t = a.submit(vec![update(1, b"x")], false).unwrap();
    // The backup never got the copies: record 1 is unknown there.
    let (b, _) = open(db.path());
    match b.apply_replicated(&a.replication_take()) {
        Err(Error::Replication(m)) => {
            assert!(m.contains(&format!("primary ticket {t}")), "{m}");
            assert!(m.contains("record 1 not found"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    let applied = wait_for(Duration::from_secs(5), || b.stats().live_records == 1);
    assert!(applied, "the frame before it was applied");
}
