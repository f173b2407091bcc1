//! A failing file system: errors surface, the journal stops writing, reopening shows what
//! was acknowledged; a crash at any step of a compaction recovers to before or after it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use journal::{
    root_errno, Error, Fault, FaultyFileSystem, FsOp, Journal, JournalConfig, Op,
    PreparedTransaction,
};

/// Waits until background I/O (pre-allocation, reclaim) has stopped.
fn settle(fs: &FaultyFileSystem) {
    let mut last = fs.op_count();
    loop {
        std::thread::sleep(Duration::from_millis(30));
        let now = fs.op_count();
        if now == last {
            return;
        }
        last = now;
    }
}

fn fail_one_op(op: FsOp, errno_in: i32) {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultyFileSystem::std();
    let (j, _) = open_fs(dir.path(), fs.clone());
    let mut acked = Model::default();
    for i in 0..5 {
        let op = add(i, &payload(i, 100));
        j.append(vec![op.clone()], true).unwrap();
        acked.apply(&op);
    }
    settle(&fs);
    fs.inject(Some(op), 0, Fault::Error(errno_in));
    let failing = add(5, b"fails");
    let err = j.append(vec![failing.clone()], true).unwrap_err();
    assert!(matches!(err, Error::Failed(_)), "{err:?}");
    assert_eq!(root_errno(&err), Some(errno_in));
    // Everything later fails too, and nothing more is written.
    let ops_after = fs.op_count();
    assert!(matches!(
        j.submit(vec![add(6, b"x")], true),
        Err(Error::Failed(_))
    ));
    assert!(matches!(j.submit(vec![], false), Err(Error::Failed(_))));
    assert!(matches!(j.compact(), Err(Error::Failed(_))));
    let p = j.progress();
    assert!(p.failed.is_some());
    assert!(matches!(j.close(), Err(Error::Failed(_))));
    drop(j);
    assert_eq!(
        fs.op_count(),
        ops_after,
        "{:?}",
        &fs.log()[ops_after as usize..]
    );
    let (_, rep) = open(dir.path());
    // Acknowledged data is all there. The failing batch may be there only if its write
    // happened (the fsync failed), since a failed fsync says nothing about the page cache.
    if op == FsOp::Write {
        assert_eq!(rep.records, acked.list());
    } else if rep.records != acked.list() {
        acked.apply(&failing);
        assert_eq!(rep.records, acked.list());
    }
}

#[test]
fn write_or_fsync_error_fails_the_journal() {
    for op in [FsOp::Write, FsOp::SyncData] {
        fail_one_op(op, libc::EIO);
    }
}

#[test]
fn enospc_while_preallocating_fails_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultyFileSystem::std();
    let (j, _) = open_fs(dir.path(), fs.clone());
    settle(&fs);
    fs.inject(Some(FsOp::Allocate), 0, Fault::Error(libc::ENOSPC));
    let mut acked = Model::default();
    let mut err = None;
    for i in 0..200 {
        let op = add(i, &payload(i, 6_000));
        match j.append(vec![op.clone()], true) {
            Ok(()) => acked.apply(&op),
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    let err = err.expect("running out of space must surface");
    assert_eq!(root_errno(&err), Some(libc::ENOSPC), "{err:?}");
    drop(j);
    let (_, rep) = open(dir.path());
    assert_eq!(rep.records, acked.list());
}

#[test]
fn torn_write_is_cut_on_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultyFileSystem::std();
    let (j, _) = open_fs(dir.path(), fs.clone());
    let mut acked = Model::default();
    for i in 0..3 {
        let op = add(i, &payload(i, 500));
        j.append(vec![op.clone()], true).unwrap();
        acked.apply(&op);
    }
    settle(&fs);
    fs.inject(Some(FsOp::Write), 0, Fault::TornWrite(300));
    assert!(j.append(vec![add(9, &[1; 2_000])], true).is_err());
    drop(j);
    let (_, rep) = open(dir.path());
    assert_eq!(rep.records, acked.list());
    assert!(rep.torn_tail.is_some());
}

fn xid(t: u64) -> Vec<u8> {
    format!("xid-{t}").into_bytes()
}

/// A journal spread over several files with live, updated, deleted and transactional
/// content, including a prepared transaction whose records sit in the oldest file.
fn build_compactable(dir: &Path) -> (Model, Vec<PreparedTransaction>) {
    let (j, _) = Journal::open(config(dir)).unwrap();
    let mut model = Model::default();
    let tx_ops = vec![
        Op::AddTx {
            tx_id: 500,
            id: 5_000,
            record_type: 9,
            payload: b"prepared-add".to_vec(),
        },
        Op::UpdateTx {
            tx_id: 500,
            id: 0,
            record_type: 8,
            payload: b"prepared-update".to_vec(),
        },
    ];
    let mut ops = vec![add(0, b"first")];
    model.apply(&ops[0]);
    ops.extend(tx_ops.clone());
    ops.push(Op::Prepare {
        tx_id: 500,
        xid: xid(500),
    });
    j.append(ops, true).unwrap();
    for i in 1..150u64 {
        let mut ops = vec![add(i, &payload(i, 2_000))];
        if i % 10 == 3 && model.records.contains_key(&(i - 3)) {
            ops.push(update(i - 3, b"updated"));
        }
        if i % 4 != 0 && i > 2 && model.records.contains_key(&(i - 1)) {
            ops.push(del(i - 1));
        }
        for op in &ops {
            model.apply(op);
        }
        j.append(ops, i % 8 == 0).unwrap();
    }
    // A committed transaction too.
    let tx = vec![
        Op::AddTx {
            tx_id: 600,
            id: 6_000,
            record_type: 1,
            payload: b"committed".to_vec(),
        },
        Op::DeleteTx { tx_id: 600, id: 7 },
        Op::Commit { tx_id: 600 },
    ];
    model.apply(&add(6_000, b"committed"));
    model.records.get_mut(&6_000).unwrap().record_type = 1;
    model.apply(&del(7));
    j.append(tx, true).unwrap();
    assert!(j.stats().data_files >= 4, "{:?}", j.stats());
    j.close().unwrap();
    let prepared = vec![PreparedTransaction {
        tx_id: 500,
        xid: xid(500),
        ops: tx_ops,
    }];
    (model, prepared)
}

fn copy_dir(from: &Path, to: &Path) {
    if to.exists() {
        std::fs::remove_dir_all(to).unwrap();
    }
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| {
            let ext = std::path::Path::new(n).extension();
            ["cmp", "tmp", "ctl"]
                .iter()
                .any(|e| ext == Some(std::ffi::OsStr::new(e)))
        })
        .collect()
}

#[test]
fn crash_at_every_step_of_a_compaction() {
    let base = tempfile::tempdir().unwrap();
    let pristine = base.path().join("pristine");
    let dir = base.path().join("j");
    let (model, prepared) = build_compactable(&pristine);
    let mut crashed_after_commit = 0;
    let mut step = 0u64;
    loop {
        copy_dir(&pristine, &dir);
        let fs = FaultyFileSystem::std();
        let (j, rep) = open_fs(&dir, fs.clone());
        assert_eq!(rep.records, model.list());
        // Open transaction whose records sit in the current file.
        j.append(
            vec![Op::AddTx {
                tx_id: 900,
                id: 9_000,
                record_type: 0,
                payload: b"open".to_vec(),
            }],
            true,
        )
        .unwrap();
        settle(&fs);
        let before = fs.op_count();
        fs.inject(None, step, Fault::Crash);
        let result = j.compact();
        let completed = !fs.crashed();
        if completed {
            let r = result.unwrap();
            assert!(
                r.files_before >= 3 && r.files_after < r.files_before,
                "{r:?}"
            );
        } else {
            assert!(result.is_err() || fs.op_count() > before);
            if dir.join("activemq-data-compaction.ctl").exists() {
                crashed_after_commit += 1;
            }
        }
        drop(j);
        // Reopen: the state is the same whether the compaction happened or not.
        let (j, rep) = open(&dir);
        assert_eq!(rep.records, model.list(), "crash at step {step}");
        assert_eq!(rep.prepared, prepared, "crash at step {step}");
        assert_eq!(
            rep.incomplete_transactions_rolled_back, 1,
            "crash at step {step}"
        );
        assert!(
            leftovers(&dir).is_empty(),
            "step {step}: {:?}",
            leftovers(&dir)
        );
        // And the journal goes on normally: compact again, append, reopen.
        j.compact().unwrap();
        j.append(vec![add(77_777, b"later")], true).unwrap();
        drop(j);
        let (_, rep) = open(&dir);
        let mut m = model.clone();
        m.apply(&add(77_777, b"later"));
        assert_eq!(rep.records, m.list(), "crash at step {step}");
        assert_eq!(rep.prepared, prepared);
        if completed {
            break;
        }
        step += 1;
        assert!(step < 500, "compaction never completes");
    }
    assert!(step > 10, "only {step} steps");
    assert!(
        crashed_after_commit > 0,
        "no crash hit the roll-forward window"
    );
}

#[test]
fn compaction_fails_cleanly_before_its_commit_point() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("j");
    let (model, prepared) = build_compactable(&dir);
    let fs = FaultyFileSystem::std();
    let (j, _) = open_fs(&dir, fs.clone());
    settle(&fs);
    // Running out of space for the compacted file: the compaction is abandoned, the
    // journal carries on.
    fs.inject(Some(FsOp::Allocate), 0, Fault::Error(libc::ENOSPC));
    let err = j.compact().unwrap_err();
    assert_eq!(root_errno(&err), Some(libc::ENOSPC), "{err:?}");
    assert!(j.progress().failed.is_none());
    assert!(leftovers(&dir).is_empty());
    j.append(vec![add(1_000, b"still fine")], true).unwrap();
    let r = j.compact().unwrap();
    assert!(r.files_after < r.files_before);
    drop(j);
    let (_, rep) = Journal::open(JournalConfig { ..config(&dir) }).unwrap();
    let mut m = model;
    m.apply(&add(1_000, b"still fine"));
    assert_eq!(rep.records, m.list());
    assert_eq!(rep.prepared, prepared);
}
