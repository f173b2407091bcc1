//! Data and free files: creation (pre-allocation), retirement into the pool, re-stamping.
//!
//! A file's identity is the id in its header, not its name: every use of a file gets a
//! fresh id (stamped durably when the file enters the pool), and all checksums depend on
//! it, so bytes from an earlier use never validate. Names follow the header
//! (`{prefix}-{id}.{ext}`) but renames are not made durable on their own; recovery fixes
//! names that lag behind their header.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::Cfg;
use crate::format::{FileHeader, FILE_HEADER_LEN};
use crate::index::FileId;
use crate::Result;
use wal::{FileSystem, StoreFile};

pub(crate) use wal::io_err;

/// A file in use (holding batches), kept open.
#[derive(Clone)]
pub(crate) struct DataFile {
    pub id: FileId,
    pub path: PathBuf,
    pub handle: Arc<dyn StoreFile>,
    pub compacted: bool,
    /// Taking part in a running compaction: not to be reclaimed meanwhile.
    pub busy: bool,
}

impl DataFile {
    /// A free file taken into use by the writer (neither compacted nor busy).
    pub(crate) fn from_free(free: FreeFile, handle: Arc<dyn StoreFile>) -> DataFile {
        DataFile {
            id: free.id,
            path: free.path,
            handle,
            compacted: false,
            busy: false,
        }
    }
}

/// A pre-allocated file in the pool, its header stamped with a fresh id.
#[derive(Clone, Debug)]
pub(crate) struct FreeFile {
    pub id: FileId,
    pub path: PathBuf,
}

pub(crate) fn sync_dir(cfg: &Cfg, fs: &dyn FileSystem) -> Result<()> {
    if cfg.datasync {
        fs.sync_dir(cfg.dir())
            .map_err(io_err("fsync directory", cfg.dir()))?;
    }
    Ok(())
}

pub(crate) fn sync_file(cfg: &Cfg, f: &dyn StoreFile, path: &Path) -> Result<()> {
    if cfg.datasync {
        f.sync_data().map_err(io_err("fdatasync", path))?;
    }
    Ok(())
}

/// Writes zeros over `[from, to)` of `f`.
pub(crate) fn zero_fill(f: &dyn StoreFile, path: &Path, from: u64, to: u64) -> Result<()> {
    const CHUNK: u64 = 1 << 20;
    let zeros = vec![0u8; CHUNK.min(to.saturating_sub(from)) as usize];
    let mut at = from;
    while at < to {
        let n = CHUNK.min(to - at) as usize;
        f.write_all_at(&zeros[..n], at)
            .map_err(io_err("write", path))?;
        at += n as u64;
    }
    Ok(())
}

/// Creates, pre-allocates and stamps a new free file. It is built under a temporary name
/// and renamed (durably) only once complete, so a crash never leaves a half-made file
/// under a data file name.
pub(crate) fn create_free_file(cfg: &Cfg, fs: &dyn FileSystem, id: FileId) -> Result<FreeFile> {
    let tmp = cfg.creating_path(id);
    let path = cfg.data_path(id);
    let made = (|| {
        let f = fs.create(&tmp).map_err(io_err("create", &tmp))?;
        // fallocate guarantees the space: later writes into the file cannot hit ENOSPC.
        f.allocate(cfg.file_size)
            .map_err(io_err("allocate", &tmp))?;
        // Zero-fill too: writes into unwritten extents would make every fdatasync commit
        // file system metadata (extent conversion); written blocks make it a pure data sync.
        zero_fill(&*f, &tmp, FILE_HEADER_LEN as u64, cfg.file_size)?;
        f.write_all_at(&FileHeader::free(id).encode(), 0)
            .map_err(io_err("write", &tmp))?;
        sync_file(cfg, &*f, &tmp)?;
        fs.rename(&tmp, &path).map_err(io_err("rename", &tmp))?;
        sync_dir(cfg, fs)
    })();
    if let Err(e) = made {
        let _ = fs.remove_file(&tmp);
        return Err(e);
    }
    Ok(FreeFile { id, path })
}

/// Stamps `handle` (a file at `path`) as a free file with id `new_id` and renames it to
/// match. Once this returns, nothing the file held before can be replayed.
pub(crate) fn stamp_free(
    cfg: &Cfg,
    fs: &dyn FileSystem,
    handle: &dyn StoreFile,
    path: &Path,
    new_id: FileId,
) -> Result<FreeFile> {
    handle
        .write_all_at(&FileHeader::free(new_id).encode(), 0)
        .map_err(io_err("write", path))?;
    sync_file(cfg, handle, path)?;
    let new_path = cfg.data_path(new_id);
    fs.rename(path, &new_path).map_err(io_err("rename", path))?;
    Ok(FreeFile {
        id: new_id,
        path: new_path,
    })
}

/// Takes a data file out of use: into the pool (`Some(new id)`) or deleted (`None`).
/// Either way the change is durable when this returns.
pub(crate) fn retire(
    cfg: &Cfg,
    fs: &dyn FileSystem,
    file: &DataFile,
    keep_as: Option<FileId>,
) -> Result<Option<FreeFile>> {
    if let Some(id) = keep_as {
        stamp_free(cfg, fs, &*file.handle, &file.path, id).map(Some)
    } else {
        fs.remove_file(&file.path)
            .map_err(io_err("remove", &file.path))?;
        sync_dir(cfg, fs)?;
        Ok(None)
    }
}
