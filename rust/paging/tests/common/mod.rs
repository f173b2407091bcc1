//! Helpers shared by the page store's integration tests.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test
#![allow(dead_code)]

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use paging::{FileSystem, NewRecord, PageStore, PagedRecord, StoreFile};

pub const PAGE: u64 = 4096;

pub fn message(id: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (id.wrapping_mul(131) as usize).wrapping_add(i) as u8)
        .collect()
}

/// `(message_id, tx_id, queue_ids, message)` of test record `id`.
pub fn record(id: u64, len: usize) -> (u64, u64, Vec<u64>, Vec<u8>) {
    (id, id % 3, vec![1, 100 + id % 2], message(id, len))
}

/// The queue offset test record `id` is appended with (not its message id, so a layout
/// mix-up shows).
pub fn queue_offset(id: u64) -> u64 {
    id * 10 + 7
}

pub fn append(store: &PageStore, recs: &[(u64, u64, Vec<u64>, Vec<u8>)], sync: bool) -> u64 {
    let new_records: Vec<NewRecord<'_>> = recs
        .iter()
        .map(|(message_id, tx_id, queue_ids, body)| NewRecord {
            message_id: *message_id,
            tx_id: *tx_id,
            queue_offset: queue_offset(*message_id),
            queue_ids,
            message: body,
        })
        .collect();
    store.append(&new_records, sync, false).expect("append").0
}

/// Every record of the store, page by page.
pub fn read_all(store: &PageStore) -> Vec<PagedRecord> {
    let mut out = Vec::new();
    for page in store.pages() {
        let mut offset = paging::format::HEADER_LEN;
        loop {
            let r = store.read(page, offset, 7, 10_000).expect("read");
            if r.records.is_empty() {
                break;
            }
            offset = r.next_offset;
            out.extend(r.records);
        }
    }
    out
}

pub fn ids(records: &[PagedRecord]) -> Vec<u64> {
    records.iter().map(|r| r.message_id).collect()
}

/// Checks each record read back is exactly test record `message_id`.
pub fn assert_whole(records: &[PagedRecord], len_of: impl Fn(u64) -> usize) {
    for r in records {
        let (m, t, q, b) = record(r.message_id, len_of(r.message_id));
        assert_eq!(
            (r.message_id, r.tx_id, &r.queue_ids, &r.message),
            (m, t, &q, &b)
        );
        assert_eq!(r.queue_offset, queue_offset(m));
    }
}

pub fn page_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "page"))
        .collect();
    v.sort();
    v
}

/// A file system that remembers how much of each file was fdatasynced, so a test can
/// "lose the page cache": [`LossyFs::lose_unsynced`] cuts every file back to its synced
/// length plus `keep` of its unsynced bytes (a torn write when `keep` is not a record
/// boundary).
pub struct LossyFs {
    inner: Arc<dyn FileSystem>,
    synced: Arc<Mutex<HashMap<PathBuf, u64>>>,
}

impl LossyFs {
    pub fn new(inner: Arc<dyn FileSystem>) -> Arc<LossyFs> {
        Arc::new(LossyFs {
            inner,
            synced: Arc::default(),
        })
    }

    pub fn lose_unsynced(&self, keep: u64) {
        for (path, synced) in self.synced.lock().unwrap().iter() {
            let Ok(f) = std::fs::OpenOptions::new().write(true).open(path) else {
                continue;
            };
            let len = f.metadata().unwrap().len();
            f.set_len(len.min(synced + keep)).unwrap();
        }
    }
}

struct LossyFile {
    inner: Arc<dyn StoreFile>,
    path: PathBuf,
    synced: Arc<Mutex<HashMap<PathBuf, u64>>>,
}

impl StoreFile for LossyFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.inner.read_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.inner.write_all_at(buf, offset)
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn allocate(&self, len: u64) -> io::Result<()> {
        self.inner.allocate(len)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.inner.sync_data()?;
        let len = self.inner.len()?;
        self.synced.lock().unwrap().insert(self.path.clone(), len);
        Ok(())
    }
}

impl FileSystem for LossyFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn open(&self, path: &Path) -> io::Result<Arc<dyn StoreFile>> {
        let f = self.inner.open(path)?;
        Ok(Arc::new(LossyFile {
            inner: f,
            path: path.to_path_buf(),
            synced: Arc::clone(&self.synced),
        }))
    }
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StoreFile>> {
        let f = self.inner.create(path)?;
        self.synced.lock().unwrap().insert(path.to_path_buf(), 0);
        Ok(Arc::new(LossyFile {
            inner: f,
            path: path.to_path_buf(),
            synced: Arc::clone(&self.synced),
        }))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)
    }
}
