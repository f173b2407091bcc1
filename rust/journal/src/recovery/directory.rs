//! Recovery phases 1 and 2: the directory's files (leftovers of a compaction, the data
//! files and their headers), and at the end the names that follow the headers.

use std::collections::{BTreeMap, HashSet};

use super::{corrupted, Found, FreshIds};
use crate::config::Cfg;
use crate::files::{self, io_err, DataFile, FreeFile};
use crate::format::{self, Control, FileHeader, HeaderError, Name, FILE_HEADER_LEN};
use crate::index::FileId;
use crate::{Error, Result};
use wal::{read_exact_at, FileSystem};

/// The journal directory as recovery finds and changes it.
pub(super) struct Directory<'a> {
    pub(super) cfg: &'a Cfg,
    pub(super) fs: &'a dyn FileSystem,
    /// The highest file id seen so far.
    pub(super) max_id: FileId,
    /// Whether a file was renamed or removed: the directory must be synced.
    pub(super) changed: bool,
}

/// The journal's files in the directory, by the ids in their names.
pub(super) struct Listing {
    pub(super) data_ids: Vec<FileId>,
    pub(super) compacting: Vec<FileId>,
    pub(super) has_control: bool,
}

impl Directory<'_> {
    fn note_id(&mut self, id: FileId) {
        self.max_id = self.max_id.max(id);
    }

    /// Creates the directory if missing and lists the journal's files in it; `*.tmp`
    /// files (half-created) are deleted.
    pub(super) fn list(&mut self) -> Result<Listing> {
        let (cfg, fs) = (self.cfg, self.fs);
        let dir = cfg.dir();
        fs.create_dir_all(dir)
            .map_err(io_err("create directory", dir))?;
        let names = fs.list(dir).map_err(io_err("list", dir))?;
        let mut listing = Listing {
            data_ids: Vec::new(),
            compacting: Vec::new(),
            has_control: false,
        };
        for name in &names {
            match format::parse_name(&cfg.prefix, &cfg.ext, name) {
                Some(Name::Data(id)) => listing.data_ids.push(id),
                Some(Name::Creating(id)) => {
                    let p = cfg.creating_path(id);
                    fs.remove_file(&p).map_err(io_err("remove", &p))?;
                    self.changed = true;
                    self.note_id(id);
                }
                Some(Name::Compacting(id)) => listing.compacting.push(id),
                Some(Name::Control) => listing.has_control = true,
                None => {}
            }
        }
        for &id in listing.data_ids.iter().chain(&listing.compacting) {
            self.note_id(id);
        }
        Ok(listing)
    }

    /// A valid control file means the compaction committed: its `*.cmp` outputs are
    /// renamed into place (joining `listing.data_ids`) and it is returned, for
    /// [`Self::retire_compaction_inputs`]. Other `*.cmp` files, and a torn control file,
    /// are deleted.
    pub(super) fn settle_compaction_outputs(
        &mut self,
        listing: &mut Listing,
    ) -> Result<Option<Control>> {
        let (cfg, fs) = (self.cfg, self.fs);
        let control = if listing.has_control {
            self.read_control()?
        } else {
            None
        };
        let outputs: HashSet<u64> = control
            .iter()
            .flat_map(|c| c.outputs.iter().copied())
            .collect();
        for &id in &listing.compacting {
            let p = cfg.compacting_path(id);
            if outputs.contains(&id) {
                let to = cfg.data_path(id);
                fs.rename(&p, &to).map_err(io_err("rename", &p))?;
                listing.data_ids.push(id);
            } else {
                fs.remove_file(&p).map_err(io_err("remove", &p))?;
            }
            self.changed = true;
        }
        if let Some(c) = &control {
            for &id in c.inputs.iter().chain(&c.outputs) {
                self.note_id(id);
            }
        }
        Ok(control)
    }

    /// The control file's contents; None (and the file deleted) if it is torn.
    fn read_control(&mut self) -> Result<Option<Control>> {
        let (cfg, fs) = (self.cfg, self.fs);
        let control_path = cfg.control_path();
        let f = fs
            .open(&control_path)
            .map_err(io_err("open", &control_path))?;
        let len = f.len().map_err(io_err("stat", &control_path))?;
        let mut b = vec![0u8; len.min(1 << 24) as usize];
        read_exact_at(&*f, &mut b, 0).map_err(io_err("read", &control_path))?;
        let c = Control::decode(&b);
        if c.is_none() {
            // Torn: the compaction never committed.
            fs.remove_file(&control_path)
                .map_err(io_err("remove", &control_path))?;
            self.changed = true;
        }
        Ok(c)
    }

    /// Opens the data files (by id in the name) and checks their size and header, and
    /// that no two share a file id.
    pub(super) fn open_data_files(
        &mut self,
        mut data_ids: Vec<FileId>,
    ) -> Result<Vec<(FileId, Found)>> {
        data_ids.sort_unstable();
        data_ids.dedup();
        let mut found: Vec<(FileId, Found)> = Vec::new(); // (id in the name, file)
        for &name_id in &data_ids {
            found.push((name_id, self.open_data_file(name_id)?));
        }
        let mut seen = HashSet::new();
        for (_, f) in &found {
            if !seen.insert(f.header.file_id) {
                return Err(corrupted(
                    &f.path,
                    0,
                    format!("file id {} is used by two files", f.header.file_id),
                ));
            }
        }
        Ok(found)
    }

    fn open_data_file(&mut self, name_id: FileId) -> Result<Found> {
        let cfg = self.cfg;
        let path = cfg.data_path(name_id);
        let handle = self.fs.open(&path).map_err(io_err("open", &path))?;
        let len = handle.len().map_err(io_err("stat", &path))?;
        if len != cfg.file_size {
            return Err(Error::WrongFileSize {
                path,
                expected: cfg.file_size,
                actual: len,
            });
        }
        let mut h = [0u8; FILE_HEADER_LEN];
        read_exact_at(&*handle, &mut h, 0).map_err(io_err("read", &path))?;
        let header = match FileHeader::decode(&h) {
            Ok(h) => h,
            Err(HeaderError::Foreign(reason)) => {
                return Err(Error::ForeignFile(wal::ForeignFile { path, reason }))
            }
            Err(HeaderError::Corrupt(reason)) => return Err(corrupted(&path, 0, reason)),
        };
        self.note_id(header.file_id);
        Ok(Found {
            header,
            path,
            handle,
        })
    }

    /// Rolls a committed compaction forward: its inputs are retired (re-stamped free),
    /// then the control file is deleted. A crash part-way repeats it on the next open.
    pub(super) fn retire_compaction_inputs(
        &mut self,
        c: &Control,
        found: &mut [(FileId, Found)],
        ids: &mut FreshIds,
    ) -> Result<()> {
        let (cfg, fs) = (self.cfg, self.fs);
        let inputs: HashSet<u64> = c.inputs.iter().copied().collect();
        for (_, f) in found.iter_mut() {
            if f.header.is_data() && inputs.contains(&f.header.file_id) {
                f.stamp_free(cfg, ids.fresh())?;
            }
        }
        files::sync_dir(cfg, fs)?;
        let control_path = cfg.control_path();
        fs.remove_file(&control_path)
            .map_err(io_err("remove", &control_path))?;
        self.changed = true;
        Ok(())
    }

    /// Names follow headers: renames each file whose name lags behind the id in its
    /// header, and sorts the files into data files and free ones. A rename never replaces
    /// another file: ids are never reused, so a name can only lag behind its own file's
    /// header.
    pub(super) fn name_files_after_headers(
        &mut self,
        found: Vec<(FileId, Found)>,
    ) -> Result<(BTreeMap<FileId, DataFile>, BTreeMap<FileId, FreeFile>)> {
        let names: HashSet<FileId> = found.iter().map(|(n, _)| *n).collect();
        for (name_id, f) in &found {
            let id = f.header.file_id;
            if *name_id != id && names.contains(&id) {
                return Err(corrupted(
                    &f.path,
                    0,
                    format!("holds file id {id}, but another file has that name"),
                ));
            }
        }
        let mut data_files = BTreeMap::new();
        let mut pool = BTreeMap::new();
        for (name_id, f) in found {
            let id = f.header.file_id;
            let mut path = f.path;
            if name_id != id {
                let to = self.cfg.data_path(id);
                self.fs
                    .rename(&path, &to)
                    .map_err(io_err("rename", &path))?;
                path = to;
                self.changed = true;
            }
            if f.header.is_data() {
                data_files.insert(
                    id,
                    DataFile {
                        id,
                        path,
                        handle: f.handle,
                        compacted: f.header.is_compacted(),
                        busy: false,
                    },
                );
            } else {
                pool.insert(id, FreeFile { id, path });
            }
        }
        Ok((data_files, pool))
    }
}
