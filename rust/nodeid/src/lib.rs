//! `server.lock`: the node's persistent identity and the data-directory lock.
//!
//! Artemis keeps a `server.lock` file in the journal directory; it holds the node ID (a UUID
//! the cluster uses to tell nodes apart) and is locked for as long as the broker runs, so two
//! brokers never write the same journal. This crate does the same for artemis-py.
//!
//! # Theory of operation
//!
//! * **Identity.** On the first start there is no `server.lock`: a fresh v4 UUID is written to a
//!   temporary file, fsynced, and published under the final name with `link(2)` — an atomic
//!   rename that never replaces an existing file — then the directory is fsynced. Two processes
//!   racing on a first start therefore cannot both publish: the loser gets `EEXIST` and reads
//!   the winner's ID. After that the file is only ever read, never rewritten, so the ID is stable.
//! * **Lock.** [`NodeManager`] opens `server.lock` and takes `flock(LOCK_EX | LOCK_NB)` on it,
//!   and keeps that file open for its whole life; dropping it closes the descriptor, which
//!   releases the lock (the kernel also releases it when a process dies, even by `kill -9`).
//!   Since the published file is never replaced, every process locks the same inode. `flock`
//!   locks belong to the open file description, so a second [`NodeManager::open`] of the same
//!   directory fails with [`Error::Locked`] even inside one process.
//! * **Corruption.** A `server.lock` with a wrong size, magic, version or checksum is reported
//!   as [`Error::Corrupted`] and left untouched: silently minting a new ID would make the
//!   cluster see a new node owning the old node's messages.
//! * **Shared store.** Two nodes of a shared-store HA pair use one directory: the `flock` on
//!   `server.lock` is "the right to be live", and [`shared_store`] adds the activation state
//!   and the backup's own lock beside it, in files of their own, so this file and its format
//!   stay as they are.
//!
//! # File format (32 bytes, little endian)
//!
//! | offset | size | field                                             |
//! |--------|------|---------------------------------------------------|
//! | 0      | 8    | magic `b"ARTPYNID"`                               |
//! | 8      | 2    | format version, currently 1                       |
//! | 10     | 2    | reserved, zero                                    |
//! | 12     | 16   | node UUID (RFC 4122 byte order)                   |
//! | 28     | 4    | CRC-32C of bytes 0..28                            |

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

pub use uuid::Uuid;

pub mod shared_store;

/// Name of the lock/identity file inside the data directory (as in Artemis).
pub const SERVER_LOCK: &str = "server.lock";

const MAGIC: &[u8; 8] = b"ARTPYNID";
const VERSION: u16 = 1;
const FILE_LEN: usize = 32;
const CRC_OFFSET: usize = 28;
const TMP_SUFFIX: &str = ".tmp";

/// Errors of this crate.
#[derive(thiserror::Error, Debug)]
pub enum Error {
    /// An operating-system call failed; `source` keeps the errno.
    #[error("{op} {path}: {source}", path = path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Another `NodeManager` (normally another broker process) holds the directory lock.
    #[error(
        "data directory {directory} is in use by another artemis-py process (server.lock is locked)",
        directory = directory.display()
    )]
    Locked { directory: PathBuf },
    /// `server.lock` exists but does not hold a valid node ID; it is never replaced silently.
    #[error("{path} is corrupted: {reason}; move it away only if this directory's node ID may change", path = path.display())]
    Corrupted { path: PathBuf, reason: String },
}

pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> Error + 'a {
    move |source| Error::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// Holds the data-directory lock and knows the node's ID. Dropping it releases the lock.
#[derive(Debug)]
pub struct NodeManager {
    directory: PathBuf,
    node_id: Uuid,
    // Kept open only to keep the flock; closing the descriptor releases it.
    _lock_file: File,
}

impl NodeManager {
    /// Lock `dir` (created if missing) and read its node ID, creating one on the first start.
    ///
    /// Fails with [`Error::Locked`] if another `NodeManager` — in this or another process —
    /// holds the directory, and with [`Error::Corrupted`] if `server.lock` is not valid.
    pub fn open(dir: &Path) -> Result<NodeManager> {
        Self::try_open(dir)?.ok_or_else(|| Error::Locked {
            directory: dir.to_path_buf(),
        })
    }

    /// As [`NodeManager::open`], but `Ok(None)` when another holder has the lock: what a
    /// shared-store backup polls while its primary is alive (no error built per poll).
    pub fn try_open(dir: &Path) -> Result<Option<NodeManager>> {
        create_directory(dir)?;
        let path = dir.join(SERVER_LOCK);
        // A few rounds cover the race where another process publishes the file between our
        // failed open and our link; a fourth failure would mean something keeps deleting it.
        for _ in 0..4 {
            match OpenOptions::new().read(true).write(true).open(&path) {
                Ok(file) => return Self::lock_and_read(dir, &path, file),
                Err(e) if e.kind() == io::ErrorKind::NotFound => publish_new_id(dir, &path)?,
                Err(e) => return Err(io_err("open", &path)(e)),
            }
        }
        Err(Error::Io {
            op: "open",
            path,
            source: io::Error::new(
                io::ErrorKind::NotFound,
                "server.lock disappears as soon as it is created",
            ),
        })
    }

    fn lock_and_read(dir: &Path, path: &Path, mut file: File) -> Result<Option<NodeManager>> {
        if !try_flock(&file).map_err(io_err("flock", path))? {
            return Ok(None);
        }
        let mut bytes = Vec::with_capacity(FILE_LEN + 1);
        // Read one byte more than the format so an over-long file is detected.
        (&mut file)
            .take(FILE_LEN as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(io_err("read", path))?;
        let node_id = decode(&bytes).map_err(|reason| Error::Corrupted {
            path: path.to_path_buf(),
            reason,
        })?;
        remove_stale_temporaries(dir);
        Ok(Some(NodeManager {
            directory: dir.to_path_buf(),
            node_id,
            _lock_file: file,
        }))
    }

    /// The node's ID; `to_string()` gives the canonical lowercase hyphenated form.
    pub fn node_id(&self) -> Uuid {
        self.node_id
    }

    /// The data directory this manager locks.
    pub fn directory(&self) -> &Path {
        &self.directory
    }
}

/// `flock(LOCK_EX | LOCK_NB)`: `Ok(false)` when another open file description holds it.
pub(crate) fn try_flock(file: &File) -> io::Result<bool> {
    // SAFETY: flock on a descriptor we own; no memory is passed.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// The node ID in `dir`'s `server.lock` without locking it (`Ok(None)` if there is none
/// yet): a waiting shared-store backup names the node it backs up. The file is never
/// rewritten once published, so reading it unlocked is safe.
pub fn read_node_id(dir: &Path) -> Result<Option<Uuid>> {
    let path = dir.join(SERVER_LOCK);
    let file = match File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("open", &path)(e)),
    };
    let mut bytes = Vec::with_capacity(FILE_LEN + 1);
    file.take(FILE_LEN as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(io_err("read", &path))?;
    decode(&bytes)
        .map(Some)
        .map_err(|reason| Error::Corrupted { path, reason })
}

pub(crate) fn create_directory(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(dir).map_err(io_err("create directory", dir))?;
    // Make the new directory entry durable before a node ID is published inside it.
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        fsync_dir(parent)?;
    }
    Ok(())
}

pub(crate) fn fsync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("fsync directory", dir))
}

/// Write a fresh ID to a temporary file and link it into place unless someone else was first.
fn publish_new_id(dir: &Path, path: &Path) -> Result<()> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = dir.join(format!(
        "{SERVER_LOCK}.{}-{nanos}{TMP_SUFFIX}",
        std::process::id()
    ));
    let result = write_new_id(&tmp).and_then(|()| match std::fs::hard_link(&tmp, path) {
        Ok(()) => fsync_dir(dir),
        // EEXIST: another process published first; the caller opens and reads theirs.
        // ENOENT: that process, once it held the lock, removed our temporary as stale;
        // server.lock exists then too, so the caller's next round reads it as well.
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::AlreadyExists | io::ErrorKind::NotFound
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(io_err("link", path)(e)),
    });
    // Best effort: a leftover temporary is harmless and removed by the next open.
    let _ = std::fs::remove_file(&tmp);
    result
}

fn write_new_id(tmp: &Path) -> Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)
        .map_err(io_err("create", tmp))?;
    file.write_all(&encode(Uuid::new_v4()))
        .map_err(io_err("write", tmp))?;
    file.sync_all().map_err(io_err("fsync", tmp))
}

/// Remove temporaries left by a process that crashed while creating the node ID.
fn remove_stale_temporaries(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = format!("{SERVER_LOCK}.");
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with(&prefix) && name.ends_with(TMP_SUFFIX) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn encode(id: Uuid) -> [u8; FILE_LEN] {
    let mut out = [0u8; FILE_LEN];
    out[0..8].copy_from_slice(MAGIC);
    out[8..10].copy_from_slice(&VERSION.to_le_bytes());
    out[12..28].copy_from_slice(id.as_bytes());
    let crc = crc32c(&out[..CRC_OFFSET]);
    out[CRC_OFFSET..].copy_from_slice(&crc.to_le_bytes());
    out
}

fn decode(bytes: &[u8]) -> std::result::Result<Uuid, String> {
    if bytes.len() != FILE_LEN {
        return Err(format!(
            "expected {FILE_LEN} bytes, found {}{}",
            if bytes.len() > FILE_LEN {
                "more than "
            } else {
                ""
            },
            bytes.len().min(FILE_LEN)
        ));
    }
    if &bytes[0..8] != MAGIC {
        return Err("not an artemis-py server.lock (bad magic)".to_string());
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    if version != VERSION {
        return Err(format!(
            "unsupported format version {version} (this build reads {VERSION})"
        ));
    }
    let stored = u32::from_le_bytes([bytes[28], bytes[29], bytes[30], bytes[31]]);
    let actual = crc32c(&bytes[..CRC_OFFSET]);
    if stored != actual {
        return Err(format!(
            "checksum mismatch (stored {stored:#010x}, computed {actual:#010x})"
        ));
    }
    let mut id = [0u8; 16];
    id.copy_from_slice(&bytes[12..28]);
    Ok(Uuid::from_bytes(id))
}

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), bitwise: the file is 28 bytes.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        // The catalogued check value of CRC-32C for "123456789".
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn encode_decode_round_trip() {
        let id = Uuid::new_v4();
        assert_eq!(decode(&encode(id)), Ok(id));
    }

    #[test]
    fn decode_rejects_every_single_bit_flip() {
        let good = encode(Uuid::new_v4());
        for bit in 0..FILE_LEN * 8 {
            let mut bad = good;
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(decode(&bad).is_err(), "bit {bit} flip accepted");
        }
    }

    #[test]
    fn decode_rejects_wrong_lengths() {
        let good = encode(Uuid::new_v4());
        for len in 0..FILE_LEN {
            assert!(decode(&good[..len]).is_err());
        }
        let mut long = good.to_vec();
        long.push(0);
        assert!(decode(&long).unwrap_err().contains("more than 32"));
    }
}
