//! `NodeManager` behaviour: ID creation and reuse, the directory lock (same process and child
//! process), corruption reporting.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

use nodeid::{Error, NodeManager, SERVER_LOCK};

const CHILD_DIR_ENV: &str = "NODEID_TEST_CHILD_DIR";

#[test]
fn first_open_creates_a_v4_id_and_reopen_reuses_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a").join("journal");
    let first = NodeManager::open(&dir).unwrap();
    let id = first.node_id();
    assert_eq!(id.get_version_num(), 4);
    assert_eq!(first.directory(), dir.as_path());
    let text = id.to_string();
    assert_eq!(text.len(), 36);
    assert_eq!(text, text.to_lowercase());
    assert_eq!(text.matches('-').count(), 4);
    assert_eq!(std::fs::metadata(dir.join(SERVER_LOCK)).unwrap().len(), 32);
    drop(first);

    let second = NodeManager::open(&dir).unwrap();
    assert_eq!(second.node_id(), id);
    // No temporary files are left behind.
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, vec![SERVER_LOCK.to_string()]);
}

#[test]
fn different_directories_get_different_ids() {
    let tmp = tempfile::tempdir().unwrap();
    let a = NodeManager::open(&tmp.path().join("a")).unwrap();
    let b = NodeManager::open(&tmp.path().join("b")).unwrap();
    assert_ne!(a.node_id(), b.node_id());
}

#[test]
fn second_open_in_the_same_process_is_locked_until_the_first_is_dropped() {
    let tmp = tempfile::tempdir().unwrap();
    let first = NodeManager::open(tmp.path()).unwrap();
    let err = NodeManager::open(tmp.path()).unwrap_err();
    match &err {
        Error::Locked { directory } => assert_eq!(directory, tmp.path()),
        other => panic!("expected Locked, got {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        format!(
            "data directory {} is in use by another artemis-py process (server.lock is locked)",
            tmp.path().display()
        )
    );
    let id = first.node_id();
    drop(first);
    assert_eq!(NodeManager::open(tmp.path()).unwrap().node_id(), id);
}

/// A child process (this test binary again, running only `child_holds_the_lock`) that has
/// opened a directory and holds its lock until released or killed.
struct LockHolder {
    child: Child,
    stdout: BufReader<ChildStdout>,
    node_id: String,
}

impl LockHolder {
    fn spawn(dir: &Path) -> LockHolder {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "child_holds_the_lock",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIR_ENV, dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut holder = LockHolder {
            child,
            stdout,
            node_id: String::new(),
        };
        let mut line = String::new();
        while holder.node_id.is_empty() {
            line.clear();
            let n = holder.stdout.read_line(&mut line).unwrap();
            assert_ne!(n, 0, "child exited before opening the directory");
            // libtest prints "test child_holds_the_lock ... " on the same line first.
            if let Some((_, id)) = line.trim().split_once("NODE_ID ") {
                holder.node_id = id.to_string();
            }
        }
        holder
    }

    /// Close the child's stdin so it drops its `NodeManager` and exits; true if it succeeded.
    fn release(mut self) -> bool {
        drop(self.child.stdin.take());
        let mut rest = String::new();
        self.stdout.read_to_string(&mut rest).unwrap();
        self.child.wait().unwrap().success()
    }
}

impl Drop for LockHolder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
#[ignore = "helper run as a child process by the lock tests"]
fn child_holds_the_lock() {
    let dir = std::env::var_os(CHILD_DIR_ENV).expect("run by spawn_lock_holder");
    let nm = NodeManager::open(Path::new(&dir)).unwrap();
    println!("NODE_ID {}", nm.node_id());
    std::io::stdout().flush().unwrap();
    // Hold the lock until the parent closes our stdin.
    let mut sink = String::new();
    let _ = std::io::stdin().read_line(&mut sink);
}

#[test]
fn a_child_process_holding_the_lock_excludes_us_until_it_exits() {
    let tmp = tempfile::tempdir().unwrap();
    let holder = LockHolder::spawn(tmp.path());
    assert!(matches!(
        NodeManager::open(tmp.path()),
        Err(Error::Locked { .. })
    ));
    let child_id = holder.node_id.clone();
    assert!(holder.release());
    let nm = NodeManager::open(tmp.path()).unwrap();
    assert_eq!(nm.node_id().to_string(), child_id);
}

#[test]
fn a_killed_child_releases_the_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let mut holder = LockHolder::spawn(tmp.path());
    assert!(matches!(
        NodeManager::open(tmp.path()),
        Err(Error::Locked { .. })
    ));
    let child_id = holder.node_id.clone();
    holder.child.kill().unwrap(); // SIGKILL: no destructor runs, the kernel drops the lock
    holder.child.wait().unwrap();
    assert_eq!(
        NodeManager::open(tmp.path()).unwrap().node_id().to_string(),
        child_id
    );
}

#[test]
fn we_exclude_a_child_process() {
    let tmp = tempfile::tempdir().unwrap();
    let nm = NodeManager::open(tmp.path()).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_holds_the_lock", "--ignored"])
        .env(CHILD_DIR_ENV, tmp.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("Locked"), "child output: {text}");
    drop(nm);
}

fn assert_corrupted(dir: &Path, contents: &[u8], reason_part: &str) {
    let path = dir.join(SERVER_LOCK);
    std::fs::write(&path, contents).unwrap();
    match NodeManager::open(dir) {
        Err(Error::Corrupted { path: p, reason }) => {
            assert_eq!(p, path);
            assert!(reason.contains(reason_part), "reason {reason:?}");
        }
        other => panic!("expected Corrupted, got {other:?}"),
    }
    // Never replaced: the bad bytes are still there.
    assert_eq!(std::fs::read(&path).unwrap(), contents);
}

#[test]
fn a_corrupt_server_lock_is_an_error_and_is_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let good = {
        drop(NodeManager::open(tmp.path()).unwrap());
        std::fs::read(tmp.path().join(SERVER_LOCK)).unwrap()
    };
    assert_corrupted(tmp.path(), b"", "expected 32 bytes, found 0");
    assert_corrupted(tmp.path(), &good[..20], "found 20");
    assert_corrupted(
        tmp.path(),
        &[good.as_slice(), b"x"].concat(),
        "more than 32",
    );
    let mut bad_magic = good.clone();
    bad_magic[0] = b'X';
    assert_corrupted(tmp.path(), &bad_magic, "bad magic");
    let mut bad_id = good.clone();
    bad_id[20] ^= 0xff;
    assert_corrupted(tmp.path(), &bad_id, "checksum mismatch");
    let mut future = good.clone();
    future[8] = 9;
    assert_corrupted(tmp.path(), &future, "version 9");
}

#[test]
fn stale_temporaries_from_a_crashed_first_start_are_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let stale = tmp.path().join("server.lock.12345-678.tmp");
    std::fs::write(&stale, b"half").unwrap();
    let _nm = NodeManager::open(tmp.path()).unwrap();
    assert!(!stale.exists());
}

#[test]
fn a_directory_path_that_is_a_file_is_an_io_error() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("plain");
    std::fs::write(&file, b"not a directory").unwrap();
    match NodeManager::open(&file) {
        Err(Error::Io { source, .. }) => assert!(source.raw_os_error().is_some()),
        other => panic!("expected Io, got {other:?}"),
    }
}

#[test]
fn concurrent_first_starts_agree_on_one_id() {
    // Threads race on a fresh directory; each opens, records the ID and drops, retrying
    // while another holds the lock. Every one must see the same ID.
    for _ in 0..20 {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let dir = dir.clone();
                std::thread::spawn(move || loop {
                    match NodeManager::open(&dir) {
                        Ok(nm) => return nm.node_id(),
                        Err(Error::Locked { .. }) => std::thread::yield_now(),
                        Err(e) => panic!("{e}"),
                    }
                })
            })
            .collect();
        let ids: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(ids.windows(2).all(|w| w[0] == w[1]), "{ids:?}");
    }
}

// -- shared store ---------------------------------------------------------------------------

use nodeid::shared_store::{
    read_state, write_state, ActivationState, BackupLock, BACKUP_LOCK, STATE_FILE,
};

#[test]
fn try_open_gives_none_while_another_holds_the_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let first = NodeManager::try_open(tmp.path()).unwrap().unwrap();
    assert!(NodeManager::try_open(tmp.path()).unwrap().is_none());
    let id = first.node_id();
    drop(first);
    assert_eq!(
        NodeManager::try_open(tmp.path())
            .unwrap()
            .unwrap()
            .node_id(),
        id
    );
}

#[test]
fn try_open_gives_none_while_a_child_process_holds_the_lock_and_some_once_it_is_killed() {
    let tmp = tempfile::tempdir().unwrap();
    let mut holder = LockHolder::spawn(tmp.path());
    assert!(NodeManager::try_open(tmp.path()).unwrap().is_none());
    holder.child.kill().unwrap();
    holder.child.wait().unwrap();
    let nm = NodeManager::try_open(tmp.path()).unwrap().unwrap();
    assert_eq!(nm.node_id().to_string(), holder.node_id);
}

#[test]
fn the_state_is_not_started_until_written_and_then_reads_back() {
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(read_state(tmp.path()).unwrap(), ActivationState::NotStarted);
    for state in [
        ActivationState::FailingBack,
        ActivationState::Live,
        ActivationState::Paused,
        ActivationState::Live,
    ] {
        write_state(tmp.path(), state).unwrap();
        assert_eq!(read_state(tmp.path()).unwrap(), state);
    }
    assert_eq!(std::fs::read(tmp.path().join(STATE_FILE)).unwrap(), b"L");
}

#[test]
fn the_state_file_leaves_server_lock_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let id = NodeManager::open(tmp.path()).unwrap().node_id();
    write_state(tmp.path(), ActivationState::Paused).unwrap();
    assert_eq!(
        std::fs::metadata(tmp.path().join(SERVER_LOCK))
            .unwrap()
            .len(),
        32
    );
    assert_eq!(NodeManager::open(tmp.path()).unwrap().node_id(), id);
}

#[test]
fn a_bad_state_file_is_reported_as_corrupted() {
    let tmp = tempfile::tempdir().unwrap();
    for (contents, part) in [(&b"X"[..], "unknown activation state"), (b"LL", "one byte")] {
        std::fs::write(tmp.path().join(STATE_FILE), contents).unwrap();
        match read_state(tmp.path()) {
            Err(Error::Corrupted { reason, .. }) => assert!(reason.contains(part), "{reason}"),
            other => panic!("expected Corrupted, got {other:?}"),
        }
    }
    std::fs::write(tmp.path().join(STATE_FILE), b"").unwrap();
    assert_eq!(read_state(tmp.path()).unwrap(), ActivationState::NotStarted);
}

#[test]
fn one_backup_lock_at_a_time() {
    let tmp = tempfile::tempdir().unwrap();
    let first = BackupLock::try_acquire(tmp.path()).unwrap().unwrap();
    assert!(BackupLock::try_acquire(tmp.path()).unwrap().is_none());
    // The backup lock is not the live lock.
    assert!(NodeManager::try_open(tmp.path()).unwrap().is_some());
    drop(first);
    assert!(BackupLock::try_acquire(tmp.path()).unwrap().is_some());
    assert!(tmp.path().join(BACKUP_LOCK).exists());
}

#[test]
fn read_node_id_reads_without_locking() {
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(nodeid::read_node_id(tmp.path()).unwrap(), None);
    let nm = NodeManager::open(tmp.path()).unwrap();
    assert_eq!(
        nodeid::read_node_id(tmp.path()).unwrap(),
        Some(nm.node_id())
    );
}
