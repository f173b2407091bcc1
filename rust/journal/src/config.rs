//! Configuration: [`JournalConfig`] (Artemis `journal-*` settings) and its validated form.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::format::{self, BATCH_HEADER_LEN, FILE_HEADER_LEN};
use crate::index::FileId;
use crate::{Error, Result};

/// Journal configuration; names and defaults follow Artemis's `journal-*` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalConfig {
    pub directory: PathBuf,
    /// `activemq-data`: files are `{file_prefix}-{id}.{file_extension}`.
    pub file_prefix: String,
    pub file_extension: String,
    /// journal-file-size: rounded up to a multiple of 4096; at least 64 KiB.
    pub file_size: u64,
    /// journal-min-files: files (data + free) pre-allocated and kept.
    pub min_files: usize,
    /// journal-pool-files: reclaimed files kept for reuse (-1 = unbounded); beyond it they
    /// are deleted (but never below `min_files` files in total).
    pub pool_files: i64,
    /// journal-buffer-size: the most bytes a batch gathers (a single larger submit is
    /// written as a batch of its own).
    pub buffer_size: usize,
    /// journal-buffer-timeout: how long non-sync appends may wait for company.
    pub buffer_timeout: Duration,
    /// journal-datasync: false = never fdatasync (no durability across power loss).
    pub datasync: bool,
    /// journal-compact-min-files: 0 disables automatic compaction.
    pub compact_min_files: usize,
    /// journal-compact-percentage: compact when live data is below this share of the files.
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

pub(crate) const MIN_FILE_SIZE: u64 = 64 * 1024;
const MAX_FILE_SIZE: u64 = 1 << 31;

/// The validated configuration.
#[derive(Debug, Clone)]
pub(crate) struct Cfg {
    pub dir: PathBuf,
    pub prefix: String,
    pub ext: String,
    pub file_size: u64,
    pub min_files: usize,
    pub pool_files: i64,
    pub buffer_size: usize,
    pub buffer_timeout: Duration,
    pub datasync: bool,
    pub compact_min_files: usize,
    pub compact_percentage: u32,
    /// The largest batch body that fits in a file, hence the largest submit.
    pub max_body: usize,
}

impl Cfg {
    pub(crate) fn new(c: JournalConfig) -> Result<Cfg> {
        let bad = |m: String| Err(Error::InvalidConfig(m));
        let name_ok =
            |s: &str| !s.is_empty() && !s.contains(['/', '\\', '\0']) && s != "." && s != "..";
        if !name_ok(&c.file_prefix) {
            return bad(format!("invalid file prefix {:?}", c.file_prefix));
        }
        if !name_ok(&c.file_extension) || c.file_extension.contains('.') {
            return bad(format!("invalid file extension {:?}", c.file_extension));
        }
        let file_size = c.file_size.div_ceil(4096) * 4096;
        if !(MIN_FILE_SIZE..=MAX_FILE_SIZE).contains(&file_size) {
            return bad(format!(
                "file size {} must be between {MIN_FILE_SIZE} and {MAX_FILE_SIZE} bytes",
                c.file_size
            ));
        }
        if c.min_files == 0 {
            return bad("min files must be at least 1".into());
        }
        if c.pool_files < -1 {
            return bad(format!("pool files {} must be -1 or more", c.pool_files));
        }
        if c.buffer_size == 0 {
            return bad("buffer size must be positive".into());
        }
        if c.compact_percentage > 100 {
            return bad(format!(
                "compact percentage {} must be at most 100",
                c.compact_percentage
            ));
        }
        let max_body = file_size as usize - FILE_HEADER_LEN - BATCH_HEADER_LEN;
        Ok(Cfg {
            dir: c.directory,
            prefix: c.file_prefix,
            ext: c.file_extension,
            file_size,
            min_files: c.min_files,
            pool_files: c.pool_files,
            buffer_size: c.buffer_size.min(max_body),
            buffer_timeout: c.buffer_timeout,
            datasync: c.datasync,
            compact_min_files: c.compact_min_files,
            compact_percentage: c.compact_percentage,
            max_body,
        })
    }

    pub(crate) fn data_path(&self, id: FileId) -> PathBuf {
        self.dir
            .join(format::data_name(&self.prefix, &self.ext, id))
    }

    pub(crate) fn creating_path(&self, id: FileId) -> PathBuf {
        self.dir
            .join(format::creating_name(&self.prefix, &self.ext, id))
    }

    pub(crate) fn compacting_path(&self, id: FileId) -> PathBuf {
        self.dir
            .join(format::compacting_name(&self.prefix, &self.ext, id))
    }

    pub(crate) fn control_path(&self) -> PathBuf {
        self.dir.join(format::control_name(&self.prefix))
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation() {
        let ok = Cfg::new(JournalConfig::default()).unwrap();
        assert_eq!(ok.file_size, 10 << 20);
        assert_eq!(ok.buffer_size, 490 * 1024);
        let c = Cfg::new(JournalConfig {
            file_size: 65 * 1024,
            ..JournalConfig::default()
        })
        .unwrap();
        assert_eq!(c.file_size, 68 * 1024);
        assert_eq!(c.buffer_size, c.max_body);
        for bad in [
            JournalConfig {
                file_size: 1000,
                ..JournalConfig::default()
            },
            JournalConfig {
                file_prefix: "a/b".into(),
                ..JournalConfig::default()
            },
            JournalConfig {
                file_extension: String::new(),
                ..JournalConfig::default()
            },
            JournalConfig {
                min_files: 0,
                ..JournalConfig::default()
            },
            JournalConfig {
                pool_files: -2,
                ..JournalConfig::default()
            },
            JournalConfig {
                compact_percentage: 101,
                ..JournalConfig::default()
            },
        ] {
            assert!(matches!(Cfg::new(bad), Err(Error::InvalidConfig(_))));
        }
    }
}
