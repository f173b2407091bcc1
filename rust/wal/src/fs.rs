//! The file system seen by the journal and the page stores, as a trait so tests can
//! inject faults (see [`crate::FaultyFileSystem`]) and the fuzzing crate can run in memory.
//! [`StdFileSystem`] is the real one.
//!
//! Every operation the stores' correctness depends on is here: positional reads and
//! writes, `fallocate`, `fdatasync`, renames, removals and directory `fsync`.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

/// An open file.
#[allow(clippy::len_without_is_empty)] // a file, not a collection
pub trait StoreFile: Send + Sync {
    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read (0 at the end).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Writes all of `buf` at `offset` (one `pwrite` unless the kernel writes short).
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Current length.
    fn len(&self) -> io::Result<u64>;
    /// Reserves disk space for `[0, len)` and extends the file to `len` (`posix_fallocate`),
    /// so later writes inside it cannot fail with ENOSPC.
    fn allocate(&self, len: u64) -> io::Result<()>;
    /// `fdatasync`.
    fn sync_data(&self) -> io::Result<()>;
}

/// Directory-level operations.
pub trait FileSystem: Send + Sync {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Names of the entries of `dir` (names that are not UTF-8 are skipped: they cannot be ours).
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Opens an existing file for reading and writing.
    fn open(&self, path: &Path) -> io::Result<Arc<dyn StoreFile>>;
    /// Creates a file (truncating an existing one) for reading and writing.
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StoreFile>>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// `fsync` of the directory, making creations, renames and removals in it durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// Reads exactly `buf.len()` bytes at `offset`; a short file is an `UnexpectedEof` error.
pub fn read_exact_at(f: &dyn StoreFile, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match f.read_at(buf, offset) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct StdFileSystem;

struct StdFile(File);

impl StoreFile for StdFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.0.read_at(buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_all_at(buf, offset)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::io::AsRawFd;
            let len = libc::off_t::try_from(len)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file too large"))?;
            // posix_fallocate returns the error number instead of setting errno.
            // SAFETY: plain syscall wrapper on a file descriptor we own.
            let rc = unsafe { libc::posix_fallocate(self.0.as_raw_fd(), 0, len) };
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
            Ok(())
        }
        #[cfg(not(target_os = "linux"))]
        {
            self.0.set_len(len)
        }
    }

    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
}

impl FileSystem for StdFileSystem {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn StoreFile>> {
        let f = OpenOptions::new().read(true).write(true).open(path)?;
        Ok(Arc::new(StdFile(f)))
    }

    fn create(&self, path: &Path) -> io::Result<Arc<dyn StoreFile>> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        Ok(Arc::new(StdFile(f)))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}
