//! Shared-store HA: the pair's activation state and the backup's lock, beside `server.lock`.
//!
//! # Theory of operation
//!
//! A primary and its backup run on one data directory (a shared volume). Three things decide
//! which of them serves clients (the same roles as Artemis's file-lock node manager, in
//! files of our own so `server.lock` keeps its format and old directories open unchanged):
//!
//! * **The live lock** is the `flock` on `server.lock` that every artemis-py node already
//!   takes ([`crate::NodeManager::try_open`]). Whoever holds it is live; the kernel (or the
//!   NFS lock manager) drops it when that process dies, even by `kill -9`.
//! * **The state** ([`STATE_FILE`], one byte) says what the last live node meant when it
//!   let go: [`ActivationState::Live`] — still live, or died — so a waiting backup that gets
//!   the live lock takes over; [`ActivationState::Paused`] — stopped on purpose (without
//!   failover-on-shutdown), so the backup stays passive; [`ActivationState::FailingBack`] —
//!   the primary is starting and wants its role back, so a waiting backup leaves the lock to
//!   it and a live backup that allows failback steps down. A missing file is
//!   [`ActivationState::NotStarted`]: no shared-store primary ever ran here.
//! * **The backup lock** ([`BACKUP_LOCK`], `flock`) keeps a second backup of the same pair
//!   waiting behind the first.
//!
//! The state is one byte written in place and fsynced, so a reader sees the old byte or
//! the new one, never a mix. It is read through a freshly opened descriptor every time:
//! NFS clients guarantee close-to-open consistency only, so a long-open descriptor could
//! keep showing a stale byte. The letters are Artemis's (`L`, `P`, `F`, `N`), readable with
//! `od -c`.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::{create_directory, fsync_dir, io_err, try_flock, Error, Result};

/// The activation state's file inside the data directory.
pub const STATE_FILE: &str = "server.state";
/// The file a waiting backup locks.
pub const BACKUP_LOCK: &str = "server.backup.lock";

/// What the last live node of the pair said about itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActivationState {
    /// No shared-store primary has started on this directory yet.
    NotStarted,
    /// A node is (or was, until it died) live: a backup that gets the live lock takes over.
    Live,
    /// The live node stopped on purpose: the backup does not take over.
    Paused,
    /// The primary is starting and asks for its role back.
    FailingBack,
}

impl ActivationState {
    fn byte(self) -> u8 {
        match self {
            ActivationState::NotStarted => b'N',
            ActivationState::Live => b'L',
            ActivationState::Paused => b'P',
            ActivationState::FailingBack => b'F',
        }
    }

    fn from_byte(byte: u8) -> Option<ActivationState> {
        match byte {
            b'N' => Some(ActivationState::NotStarted),
            b'L' => Some(ActivationState::Live),
            b'P' => Some(ActivationState::Paused),
            b'F' => Some(ActivationState::FailingBack),
            _ => None,
        }
    }

    /// The lowercase name the Python side and the logs use.
    pub fn name(self) -> &'static str {
        match self {
            ActivationState::NotStarted => "not-started",
            ActivationState::Live => "live",
            ActivationState::Paused => "paused",
            ActivationState::FailingBack => "failing-back",
        }
    }

    /// The state named by [`ActivationState::name`].
    pub fn from_name(name: &str) -> Option<ActivationState> {
        [
            ActivationState::NotStarted,
            ActivationState::Live,
            ActivationState::Paused,
            ActivationState::FailingBack,
        ]
        .into_iter()
        .find(|s| s.name() == name)
    }
}

/// Read the state through a new descriptor (see the module notes on NFS).
pub fn read_state(dir: &Path) -> Result<ActivationState> {
    let path = dir.join(STATE_FILE);
    let file = match File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(ActivationState::NotStarted),
        Err(e) => return Err(io_err("open", &path)(e)),
    };
    let mut bytes = Vec::with_capacity(2);
    file.take(2)
        .read_to_end(&mut bytes)
        .map_err(io_err("read", &path))?;
    match bytes.as_slice() {
        [] => Ok(ActivationState::NotStarted),
        [byte] => ActivationState::from_byte(*byte).ok_or_else(|| Error::Corrupted {
            path,
            reason: format!("unknown activation state byte {byte:#04x}"),
        }),
        _ => Err(Error::Corrupted {
            path,
            reason: "expected one byte, found more".to_string(),
        }),
    }
}

/// Write the state durably (one byte in place, fsynced; the directory too on creation).
pub fn write_state(dir: &Path, state: ActivationState) -> Result<()> {
    create_directory(dir)?;
    let path = dir.join(STATE_FILE);
    let created = !path.exists();
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io_err("open", &path))?;
    file.write_all_at(&[state.byte()], 0)
        .map_err(io_err("write", &path))?;
    file.set_len(1).map_err(io_err("truncate", &path))?;
    file.sync_all().map_err(io_err("fsync", &path))?;
    if created {
        fsync_dir(dir)?;
    }
    Ok(())
}

/// The backup's lock; dropping it releases the lock.
#[derive(Debug)]
pub struct BackupLock {
    // Kept open only to keep the flock.
    _file: File,
}

impl BackupLock {
    /// Take the backup lock of `dir`, or `Ok(None)` while another backup holds it.
    pub fn try_acquire(dir: &Path) -> Result<Option<BackupLock>> {
        create_directory(dir)?;
        let path = dir.join(BACKUP_LOCK);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err("open", &path))?;
        if try_flock(&file).map_err(io_err("flock", &path))? {
            Ok(Some(BackupLock { _file: file }))
        } else {
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_round_trips_through_its_byte_and_name() {
        for state in [
            ActivationState::NotStarted,
            ActivationState::Live,
            ActivationState::Paused,
            ActivationState::FailingBack,
        ] {
            assert_eq!(ActivationState::from_byte(state.byte()), Some(state));
            assert_eq!(ActivationState::from_name(state.name()), Some(state));
        }
        assert_eq!(ActivationState::from_byte(b'0'), None);
        assert_eq!(ActivationState::from_name("LIVE"), None);
    }
}
