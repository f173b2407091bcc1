//! Opening a store: creating it, or checking its pages and cutting the last one's torn
//! tail.
//!
//! Every page but the last was fdatasynced before the writer moved on, so it must parse
//! completely: anything else is corruption (file and offset). The last page may end in a
//! torn record (a crash mid-write) or, if the crash came right after its creation, may not
//! even have a whole header: the tail is cut, by writing the good prefix to a temporary
//! file, syncing it and renaming it over the page (atomic: a crash during the cut leaves
//! either the old page or the cut one). A temporary file left by such a crash is removed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use wal::FileSystem;

use crate::format::{self, HeaderProblem, HEADER_LEN};
use crate::store::PageInfo;
use crate::{Error, Result};
use wal::io_err;

pub(crate) const ADDRESS_FILE: &str = "address.txt";
const TMP_SUFFIX: &str = ".tmp";

pub(crate) struct Found {
    pub address: String,
    pub pages: BTreeMap<u64, PageInfo>,
    pub torn: Option<(u64, u64)>,
}

pub(crate) fn recover(fs: &dyn FileSystem, dir: &Path, address: Option<&str>) -> Result<Found> {
    let not_store = |reason: String| Error::NotAStore {
        path: dir.to_path_buf(),
        reason,
    };
    let names = match fs.list(dir) {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && address.is_some() => {
            fs.create_dir_all(dir)
                .map_err(io_err("create directory", dir))?;
            if let Some(parent) = dir.parent() {
                fs.sync_dir(parent)
                    .map_err(io_err("fsync directory", parent))?;
            }
            Vec::new()
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(not_store("the directory does not exist".into()))
        }
        Err(e) => return Err(io_err("list", dir)(e).into()),
    };
    for name in names.iter().filter(|n| n.ends_with(TMP_SUFFIX)) {
        let path = dir.join(name);
        fs.remove_file(&path).map_err(io_err("remove", &path))?;
    }
    let mut numbers: Vec<u64> = names
        .iter()
        .filter_map(|n| format::parse_file_name(n))
        .collect();
    numbers.sort_unstable();
    let stored = if names.iter().any(|n| n == ADDRESS_FILE) {
        Some(read_address(fs, &dir.join(ADDRESS_FILE))?)
    } else {
        None
    };
    let address = match (stored, address) {
        (Some(stored), Some(wanted)) if stored != wanted => {
            return Err(not_store(format!(
                "it holds address {stored:?}, not {wanted:?}"
            )))
        }
        (Some(stored), _) => stored,
        (None, _) if !numbers.is_empty() => {
            return Err(not_store(format!("page files but no {ADDRESS_FILE}")))
        }
        (None, Some(wanted)) => {
            write_address(fs, dir, wanted)?;
            wanted.to_owned()
        }
        (None, None) => return Err(not_store(format!("no {ADDRESS_FILE}"))),
    };
    let mut pages = BTreeMap::new();
    let mut torn = None;
    let last = numbers.last().copied();
    for page in numbers {
        let path = dir.join(format::file_name(page));
        let (end, version) = if Some(page) == last {
            let (end, cut, version) = check_last(fs, dir, &path, page)?;
            torn = cut.then_some((page, end));
            (end, version)
        } else {
            check_page(fs, &path, page)?
        };
        pages.insert(
            page,
            PageInfo {
                written_end: end,
                final_end: Some(end),
                handle: None,
                version,
            },
        );
    }
    Ok(Found {
        address,
        pages,
        torn,
    })
}

fn read_all(fs: &dyn FileSystem, path: &Path) -> Result<Vec<u8>> {
    let f = fs.open(path).map_err(io_err("open", path))?;
    let len = f.len().map_err(io_err("stat", path))?;
    let mut buf = vec![0u8; len as usize];
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_err("read", path)(e).into()),
        }
    }
    buf.truncate(done);
    Ok(buf)
}

fn read_address(fs: &dyn FileSystem, path: &Path) -> Result<String> {
    let bytes = read_all(fs, path)?;
    String::from_utf8(bytes).map_err(|_| Error::NotAStore {
        path: path.to_path_buf(),
        reason: "the address name is not UTF-8".into(),
    })
}

/// Writes `address.txt` durably: temporary file, sync, rename, directory syncs.
fn write_address(fs: &dyn FileSystem, dir: &Path, address: &str) -> Result<()> {
    let path = dir.join(ADDRESS_FILE);
    replace(fs, dir, &path, address.as_bytes())?;
    if let Some(parent) = dir.parent() {
        fs.sync_dir(parent)
            .map_err(io_err("fsync directory", parent))?;
    }
    Ok(())
}

/// Replaces `path` with `bytes` atomically and durably.
fn replace(fs: &dyn FileSystem, dir: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(TMP_SUFFIX);
    let tmp = PathBuf::from(tmp);
    let f = fs.create(&tmp).map_err(io_err("create", &tmp))?;
    f.write_all_at(bytes, 0).map_err(io_err("write", &tmp))?;
    f.sync_data().map_err(io_err("fdatasync", &tmp))?;
    drop(f);
    fs.rename(&tmp, path).map_err(io_err("rename", &tmp))?;
    fs.sync_dir(dir).map_err(io_err("fsync directory", dir))?;
    Ok(())
}

fn foreign(path: &Path, reason: String) -> Error {
    Error::ForeignFile(wal::ForeignFile {
        path: path.to_path_buf(),
        reason,
    })
}

/// A page that is not the last: must be whole. Returns its length and format version.
fn check_page(fs: &dyn FileSystem, path: &Path, page: u64) -> Result<(u64, u32)> {
    let b = read_all(fs, path)?;
    let version = match format::check_header(&b, Some(page)) {
        Ok(h) => h.version,
        Err(HeaderProblem::Foreign(reason)) => return Err(foreign(path, reason)),
        Err(HeaderProblem::Torn(reason)) => {
            return Err(Error::Corrupted(wal::Corruption {
                path: path.to_path_buf(),
                offset: 0,
                reason,
            }))
        }
    };
    match format::scan(&b, page, version) {
        (end, None) => Ok((end, version)),
        (offset, Some(why)) => Err(Error::Corrupted(wal::Corruption {
            path: path.to_path_buf(),
            offset,
            reason: why.into(),
        })),
    }
}

/// The last page: a torn header or tail is cut. Returns its (new) length, whether
/// something was cut and its format version.
fn check_last(fs: &dyn FileSystem, dir: &Path, path: &Path, page: u64) -> Result<(u64, bool, u32)> {
    let b = read_all(fs, path)?;
    let version = match format::check_header(&b, Some(page)) {
        Ok(h) => h.version,
        Err(HeaderProblem::Foreign(reason)) => return Err(foreign(path, reason)),
        Err(HeaderProblem::Torn(_)) => {
            // Created, then the crash: no record in it was ever synced.
            replace(fs, dir, path, &format::header(page))?;
            return Ok((HEADER_LEN, true, format::VERSION));
        }
    };
    match format::scan(&b, page, version) {
        (end, None) => Ok((end, false, version)),
        (end, Some(_)) => {
            replace(fs, dir, path, &b[..end as usize])?;
            Ok((end, true, version))
        }
    }
}
