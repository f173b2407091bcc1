//! Helpers shared by the integration tests.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use journal::{FileSystem, Journal, JournalConfig, LoadReport, Op, RecordInfo, Update};

pub const FILE_SIZE: u64 = 64 * 1024;

pub fn config(dir: &Path) -> JournalConfig {
    JournalConfig {
        directory: dir.to_path_buf(),
        file_size: FILE_SIZE,
        min_files: 2,
        buffer_timeout: Duration::from_micros(200),
        compact_min_files: 0,
        ..JournalConfig::default()
    }
}

pub fn open(dir: &Path) -> (Journal, LoadReport) {
    Journal::open(config(dir)).expect("open")
}

pub fn open_fs(dir: &Path, fs: Arc<dyn FileSystem>) -> (Journal, LoadReport) {
    Journal::open_with_fs(config(dir), fs).expect("open")
}

pub fn add(id: u64, payload: &[u8]) -> Op {
    Op::Add {
        id,
        record_type: (id % 7) as u8,
        payload: payload.to_vec(),
    }
}

pub fn update(id: u64, payload: &[u8]) -> Op {
    Op::Update {
        id,
        record_type: 100,
        payload: payload.to_vec(),
    }
}

pub fn del(id: u64) -> Op {
    Op::Delete { id }
}

/// The expected live set: id -> (`record_type`, payload, updates).
#[derive(Default, Clone, Debug, PartialEq, Eq)]
pub struct Model {
    pub records: BTreeMap<u64, RecordInfo>,
}

impl Model {
    pub fn apply(&mut self, op: &Op) {
        match op {
            Op::Add {
                id,
                record_type,
                payload,
            } => {
                self.records.insert(
                    *id,
                    RecordInfo {
                        id: *id,
                        record_type: *record_type,
                        payload: payload.clone(),
                        updates: vec![],
                    },
                );
            }
            Op::Update {
                id,
                record_type,
                payload,
            } => self.records.get_mut(id).unwrap().updates.push(Update {
                record_type: *record_type,
                payload: payload.clone(),
            }),
            Op::Delete { id } => {
                self.records.remove(id);
            }
            other => panic!("model does not do {other:?}"),
        }
    }

    pub fn list(&self) -> Vec<RecordInfo> {
        self.records.values().cloned().collect()
    }
}

/// Files named like data files (`activemq-data-<n>.amq`).
pub fn data_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            name.strip_prefix("activemq-data-")
                .and_then(|r| r.strip_suffix(".amq"))
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    v.sort();
    v
}

pub fn payload(id: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (id.wrapping_mul(31) as usize).wrapping_add(i) as u8)
        .collect()
}

/// A test-side reading of the on-disk layout (independent of the crate's own parser).
#[derive(Debug, Clone, Copy)]
pub struct Header {
    pub id: u64,
    pub flags: u32,
    pub first_seq: u64,
}

pub fn header(path: &Path) -> Header {
    try_header(path).unwrap()
}

/// `None` if the file vanished (renamed by the journal) or is too short.
pub fn try_header(path: &Path) -> Option<Header> {
    let b = std::fs::read(path).ok()?;
    if b.len() < 64 {
        return None;
    }
    Some(Header {
        id: u64::from_le_bytes(b[16..24].try_into().unwrap()),
        flags: u32::from_le_bytes(b[12..16].try_into().unwrap()),
        first_seq: u64::from_le_bytes(b[24..32].try_into().unwrap()),
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchAt {
    pub offset: u64,
    /// End of the header and records (padding follows).
    pub body_end: u64,
    /// End including padding.
    pub end: u64,
    pub seq: u64,
}

/// The batches of a data file, walking from the header while batch headers carry the
/// file's id (no checksum verification).
pub fn batches(path: &Path) -> Vec<BatchAt> {
    let b = std::fs::read(path).unwrap();
    let id = u64::from_le_bytes(b[16..24].try_into().unwrap());
    let mut out = Vec::new();
    let mut off = 64usize;
    while off + 40 <= b.len() {
        let magic = u32::from_le_bytes(b[off..off + 4].try_into().unwrap());
        let fid = u64::from_le_bytes(b[off + 8..off + 16].try_into().unwrap());
        if magic != 0x4254_4A41 || fid != id {
            break;
        }
        let body = u32::from_le_bytes(b[off + 4..off + 8].try_into().unwrap()) as usize;
        let seq = u64::from_le_bytes(b[off + 16..off + 24].try_into().unwrap());
        let body_end = off + 40 + body;
        let end = (body_end + 7) & !7;
        out.push(BatchAt {
            offset: off as u64,
            body_end: body_end as u64,
            end: end as u64,
            seq,
        });
        off = end;
    }
    out
}

/// Data files in use (DATA flag), normal ones, by header id.
pub fn normal_data_files(dir: &Path) -> Vec<(Header, PathBuf)> {
    let mut v: Vec<(Header, PathBuf)> = data_files(dir)
        .into_iter()
        .map(|p| (header(&p), p))
        .filter(|(h, _)| h.flags == 1)
        .collect();
    v.sort_by_key(|(h, _)| h.id);
    v
}

pub fn patch(path: &Path, offset: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, offset).unwrap();
}

pub fn flip_bit(path: &Path, bit: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, bit / 8).unwrap();
    b[0] ^= 1 << (bit % 8);
    f.write_all_at(&b, bit / 8).unwrap();
}

/// Polls `f` until it holds or `timeout` passes.
pub fn wait_for(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < timeout {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    f()
}
