//! File system abstraction (skeleton).

use std::io;
use std::path::{Path, PathBuf};

/// An open data file.
pub trait JournalFile: Send + Sync {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    fn len(&self) -> io::Result<u64>;
    fn allocate(&self, len: u64) -> io::Result<()>;
    fn sync_data(&self) -> io::Result<()>;
}

/// Directory and file operations used by the journal.
pub trait FileSystem: Send + Sync {
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>>;
    fn open(&self, path: &Path, create: bool) -> io::Result<Box<dyn JournalFile>>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct StdFileSystem;

impl FileSystem for StdFileSystem {
    fn create_dir_all(&self, _path: &Path) -> io::Result<()> {
        unimplemented!()
    }
    fn list_dir(&self, _path: &Path) -> io::Result<Vec<PathBuf>> {
        unimplemented!()
    }
    fn open(&self, _path: &Path, _create: bool) -> io::Result<Box<dyn JournalFile>> {
        unimplemented!()
    }
    fn rename(&self, _from: &Path, _to: &Path) -> io::Result<()> {
        unimplemented!()
    }
    fn remove_file(&self, _path: &Path) -> io::Result<()> {
        unimplemented!()
    }
    fn sync_dir(&self, _path: &Path) -> io::Result<()> {
        unimplemented!()
    }
}
