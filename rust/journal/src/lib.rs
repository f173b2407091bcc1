//! Append-only journal with Apache ActiveMQ Artemis semantics (skeleton).

mod error;
mod fs;

pub use error::{Error, Result};
pub use fs::{FileSystem, JournalFile, StdFileSystem};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Journal configuration; field names follow Artemis's `journal-*` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalConfig {
    pub directory: PathBuf,
    pub file_prefix: String,
    pub file_extension: String,
    pub file_size: u64,
    pub min_files: usize,
    pub pool_files: i64,
    pub buffer_size: usize,
    pub buffer_timeout: Duration,
    pub datasync: bool,
    pub compact_min_files: usize,
    pub compact_percentage: u32,
}

impl Default for JournalConfig {
    fn default() -> Self {
        JournalConfig {
            directory: PathBuf::from("data/journal"),
            file_prefix: "activemq-data".to_string(),
            file_extension: "amq".to_string(),
            file_size: 10 * 1024 * 1024,
            min_files: 2,
            pool_files: -1,
            buffer_size: 490 * 1024,
            buffer_timeout: Duration::from_nanos(3_333_333),
            datasync: true,
            compact_min_files: 10,
            compact_percentage: 30,
        }
    }
}

/// One record to append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Add {
        id: u64,
        record_type: u8,
        payload: Vec<u8>,
    },
    Update {
        id: u64,
        record_type: u8,
        payload: Vec<u8>,
    },
    Delete {
        id: u64,
    },
    AddTx {
        tx_id: u64,
        id: u64,
        record_type: u8,
        payload: Vec<u8>,
    },
    UpdateTx {
        tx_id: u64,
        id: u64,
        record_type: u8,
        payload: Vec<u8>,
    },
    DeleteTx {
        tx_id: u64,
        id: u64,
    },
    Prepare {
        tx_id: u64,
        xid: Vec<u8>,
    },
    Commit {
        tx_id: u64,
    },
    Rollback {
        tx_id: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    pub record_type: u8,
    pub payload: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordInfo {
    pub id: u64,
    pub record_type: u8,
    pub payload: Vec<u8>,
    pub updates: Vec<Update>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedTransaction {
    pub tx_id: u64,
    pub xid: Vec<u8>,
    pub ops: Vec<Op>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadReport {
    pub records: Vec<RecordInfo>,
    pub prepared: Vec<PreparedTransaction>,
    pub incomplete_transactions_rolled_back: usize,
    pub torn_tail: Option<(PathBuf, u64)>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JournalStats {
    pub data_files: usize,
    pub free_files: usize,
    pub live_records: usize,
    pub batches: u64,
    pub syncs: u64,
    pub records_written: u64,
    pub bytes_written: u64,
    pub compactions: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionReport {
    pub files_before: usize,
    pub files_after: usize,
    pub records_moved: usize,
}

/// Completion sequence number of one submit.
pub type Ticket = u64;

#[derive(Debug, Clone, Default)]
pub struct Progress {
    pub completed: Ticket,
    pub failed: Option<Arc<Error>>,
}

pub struct Journal {
    _private: (),
}

impl Journal {
    pub fn open(config: JournalConfig) -> Result<(Journal, LoadReport)> {
        Self::open_with_fs(config, Arc::new(StdFileSystem))
    }
    pub fn open_with_fs(
        _config: JournalConfig,
        _fs: Arc<dyn FileSystem>,
    ) -> Result<(Journal, LoadReport)> {
        unimplemented!()
    }
    pub fn submit(&self, _ops: Vec<Op>, _sync: bool) -> Result<Ticket> {
        unimplemented!()
    }
    pub fn wait(&self, _ticket: Ticket) -> Result<()> {
        unimplemented!()
    }
    pub fn append(&self, ops: Vec<Op>, sync: bool) -> Result<()> {
        let t = self.submit(ops, sync)?;
        self.wait(t)
    }
    pub fn progress(&self) -> Progress {
        unimplemented!()
    }
    pub fn set_completion_listener(&self, _listener: Box<dyn Fn() + Send + Sync>) {
        unimplemented!()
    }
    pub fn compact(&self) -> Result<CompactionReport> {
        unimplemented!()
    }
    pub fn stats(&self) -> JournalStats {
        unimplemented!()
    }
    pub fn close(&self) -> Result<()> {
        unimplemented!()
    }
}
