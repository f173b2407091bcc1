//! A [`FileSystem`] that injects faults, for tests (raft-engine failpoints, okaywal's
//! memory fs): fail the n-th operation of a kind with an errno, tear a write, or "crash"
//! (that operation and everything after it fails and has no effect, as if the process died).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::fs::{FileSystem, StdFileSystem, StoreFile};

/// The operations faults can be aimed at. Only mutating operations are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FsOp {
    Create,
    Write,
    Allocate,
    SyncData,
    Rename,
    Remove,
    SyncDir,
}

/// What happens to the targeted operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The operation fails with this OS error number (e.g. `libc::EIO`, `libc::ENOSPC`)
    /// without effect; later operations work normally.
    Error(i32),
    /// A write stores only its first `n` bytes, then fails with EIO.
    TornWrite(usize),
    /// The process dies: this and every later operation (reads included) fail with EIO and
    /// have no effect.
    Crash,
}

struct Rule {
    op: Option<FsOp>,
    path: Option<PathBuf>,
    countdown: u64,
    fault: Fault,
}

#[derive(Default)]
struct State {
    ops: u64,
    crashed: bool,
    rules: Vec<Rule>,
    log: Vec<(FsOp, PathBuf)>,
}

struct Shared {
    state: Mutex<State>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn dead() -> io::Error {
        io::Error::from_raw_os_error(libc::EIO)
    }

    /// Counts a mutating operation and returns the fault that applies to it, if any.
    fn check(&self, op: FsOp, path: &Path) -> io::Result<Option<Fault>> {
        let mut st = self.lock();
        if st.crashed {
            return Err(Self::dead());
        }
        st.ops += 1;
        st.log.push((op, path.to_path_buf()));
        let mut hit = None;
        for (i, r) in st.rules.iter_mut().enumerate() {
            if r.op.map_or(true, |o| o == op) && r.path.as_deref().map_or(true, |p| p == path) {
                if r.countdown == 0 {
                    hit = Some(i);
                    break;
                }
                r.countdown -= 1;
            }
        }
        let Some(i) = hit else { return Ok(None) };
        let fault = st.rules.remove(i).fault;
        match fault {
            Fault::Crash => {
                st.crashed = true;
                Err(Self::dead())
            }
            Fault::Error(errno) => Err(io::Error::from_raw_os_error(errno)),
            Fault::TornWrite(_) => Ok(Some(fault)),
        }
    }

    fn check_read(&self) -> io::Result<()> {
        if self.lock().crashed {
            return Err(Self::dead());
        }
        Ok(())
    }
}

/// Wraps another [`FileSystem`] (by default the real one) and injects faults.
pub struct FaultyFileSystem {
    inner: Arc<dyn FileSystem>,
    shared: Arc<Shared>,
}

impl FaultyFileSystem {
    pub fn new(inner: Arc<dyn FileSystem>) -> Arc<FaultyFileSystem> {
        Arc::new(FaultyFileSystem {
            inner,
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
            }),
        })
    }

    /// Over the real file system.
    pub fn std() -> Arc<FaultyFileSystem> {
        Self::new(Arc::new(StdFileSystem))
    }

    /// Injects `fault` into the `nth` (0 = the next) future operation of kind `op`, or of
    /// any kind if `op` is `None`.
    pub fn inject(&self, op: Option<FsOp>, nth: u64, fault: Fault) {
        self.shared.lock().rules.push(Rule {
            op,
            path: None,
            countdown: nth,
            fault,
        });
    }

    /// Like [`inject`](Self::inject), counting only operations on `path` (for renames:
    /// the source; for directory syncs: the directory).
    pub fn inject_at(&self, op: Option<FsOp>, path: &Path, nth: u64, fault: Fault) {
        self.shared.lock().rules.push(Rule {
            op,
            path: Some(path.to_path_buf()),
            countdown: nth,
            fault,
        });
    }

    /// Removes pending faults (a crash stays a crash).
    pub fn clear(&self) {
        self.shared.lock().rules.clear();
    }

    /// Mutating operations performed or attempted so far.
    pub fn op_count(&self) -> u64 {
        self.shared.lock().ops
    }

    pub fn crashed(&self) -> bool {
        self.shared.lock().crashed
    }

    /// The mutating operations seen so far, for debugging tests.
    pub fn log(&self) -> Vec<(FsOp, PathBuf)> {
        self.shared.lock().log.clone()
    }

    fn wrap(&self, f: Arc<dyn StoreFile>, path: &Path) -> Arc<dyn StoreFile> {
        Arc::new(FaultyFile {
            inner: f,
            shared: self.shared.clone(),
            path: path.to_path_buf(),
        })
    }
}

impl FileSystem for FaultyFileSystem {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.shared.check_read()?;
        self.inner.create_dir_all(dir)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.shared.check_read()?;
        self.inner.list(dir)
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn StoreFile>> {
        self.shared.check_read()?;
        let f = self.inner.open(path)?;
        Ok(self.wrap(f, path))
    }

    fn create(&self, path: &Path) -> io::Result<Arc<dyn StoreFile>> {
        self.shared.check(FsOp::Create, path)?;
        let f = self.inner.create(path)?;
        Ok(self.wrap(f, path))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.shared.check(FsOp::Rename, from)?;
        self.inner.rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.shared.check(FsOp::Remove, path)?;
        self.inner.remove_file(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.shared.check(FsOp::SyncDir, dir)?;
        self.inner.sync_dir(dir)
    }
}

struct FaultyFile {
    inner: Arc<dyn StoreFile>,
    shared: Arc<Shared>,
    path: PathBuf,
}

impl StoreFile for FaultyFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.shared.check_read()?;
        self.inner.read_at(buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if let Some(Fault::TornWrite(n)) = self.shared.check(FsOp::Write, &self.path)? {
            self.inner.write_all_at(&buf[..n.min(buf.len())], offset)?;
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        self.inner.write_all_at(buf, offset)
    }

    fn len(&self) -> io::Result<u64> {
        self.shared.check_read()?;
        self.inner.len()
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        self.shared.check(FsOp::Allocate, &self.path)?;
        self.inner.allocate(len)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.shared.check(FsOp::SyncData, &self.path)?;
        self.inner.sync_data()
    }
}
