//! Helpers shared by the integration tests.
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

/// The expected live set: id -> (record_type, payload, updates).
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

pub fn data_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "amq"))
        .collect();
    v.sort();
    v
}

pub fn payload(id: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (id as usize * 31 + i) as u8).collect()
}
