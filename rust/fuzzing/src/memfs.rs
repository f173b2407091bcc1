//! An in-memory [`FileSystem`], so a fuzz iteration opens and recovers stores without disk
//! I/O, and the harness can damage the files between a close and the next open.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use journal::{FileSystem, StoreFile};

/// One file: its bytes.
#[derive(Default)]
pub struct MemFile(Mutex<Vec<u8>>);

impl MemFile {
    fn bytes(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl StoreFile for MemFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let data = self.bytes();
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(data.len());
        let n = buf.len().min(data.len() - start);
        buf[..n].copy_from_slice(&data[start..start + n]);
        Ok(n)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut data = self.bytes();
        let start = offset as usize;
        if data.len() < start + buf.len() {
            data.resize(start + buf.len(), 0);
        }
        data[start..start + buf.len()].copy_from_slice(buf);
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.bytes().len() as u64)
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        let mut data = self.bytes();
        if (data.len() as u64) < len {
            data.resize(len as usize, 0);
        }
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }
}

/// Files by path; directories are implied by the files' paths.
#[derive(Default)]
pub struct MemFs(Mutex<BTreeMap<PathBuf, Arc<MemFile>>>);

impl MemFs {
    fn files(&self) -> std::sync::MutexGuard<'_, BTreeMap<PathBuf, Arc<MemFile>>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Every file's path, in order.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.files().keys().cloned().collect()
    }

    /// Runs `f` on the bytes of the file at `path`.
    pub fn edit(&self, path: &Path, f: impl FnOnce(&mut Vec<u8>)) {
        if let Some(file) = self.files().get(path) {
            f(&mut file.bytes());
        }
    }

    /// Creates (or replaces) a file with these bytes.
    pub fn put(&self, path: &Path, bytes: Vec<u8>) {
        self.files()
            .insert(path.to_path_buf(), Arc::new(MemFile(Mutex::new(bytes))));
    }

    /// The length of the file at `path` (0 if there is none).
    pub fn size(&self, path: &Path) -> u64 {
        self.files().get(path).map_or(0, |f| f.bytes().len() as u64)
    }
}

fn not_found() -> io::Error {
    io::ErrorKind::NotFound.into()
}

impl FileSystem for MemFs {
    fn create_dir_all(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        Ok(self
            .files()
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
            .collect())
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn StoreFile>> {
        let file = self.files().get(path).cloned().ok_or_else(not_found)?;
        Ok(file)
    }

    fn create(&self, path: &Path) -> io::Result<Arc<dyn StoreFile>> {
        let file = Arc::new(MemFile::default());
        self.files().insert(path.to_path_buf(), Arc::clone(&file));
        Ok(file)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut files = self.files();
        let file = files.remove(from).ok_or_else(not_found)?;
        files.insert(to.to_path_buf(), file);
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.files().remove(path).map(|_| ()).ok_or_else(not_found)
    }

    fn sync_dir(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }
}
