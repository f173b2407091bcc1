//! Writing batches: the page store's side of the shared group-commit writer
//! ([`wal::writer`]).
//!
//! Theory of operation:
//! - Appends queue encoded records in per-page segments while a batch is being written;
//!   the writer takes everything queued at once. Each segment is one `pwrite`; the batch
//!   gets one `fdatasync` of the page last written if any append in it asked for sync.
//! - A segment starting at offset 0 carries the header of a page not created yet: the
//!   writer first fdatasyncs the page it was writing (so every page but the last is
//!   complete on disk), then creates the file and fsyncs the directory.
//! - After each `pwrite` the page's `written_end` moves, so readers see the records at
//!   once; the batch's tickets complete after its sync. Tickets complete in order.
//! - On the first I/O error the store fails: nothing is written again, and the error
//!   (naming the file) is what every later append and wait gets.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use wal::writer::{Due, Group, GroupCommit, Locked};
use wal::{io_err, lock, StoreFile};

use crate::store::{Inner, Segment, State};
use crate::{Error, Result};

/// The file the writer is appending to (the writer role's state).
#[derive(Default)]
pub(crate) struct Current {
    page: u64,
    path: PathBuf,
    file: Option<Arc<dyn StoreFile>>,
    unsynced: bool,
}

impl GroupCommit<State, Error> for Inner {
    fn group(&self) -> &Group<State, Error> {
        &self.group
    }

    fn due(&self, st: &Locked<State>) -> Due {
        if !self.group.completion.has_failed()
            && st.writing.last_ticket > self.group.completion.completed()
        {
            Due::Now
        } else {
            Due::Nothing
        }
    }

    fn write_batch(&self) -> Result<()> {
        let (segments, sync, ticket) = {
            let mut st = self.state();
            let sync = std::mem::take(&mut st.pending_sync);
            (
                std::mem::take(&mut st.segments),
                sync,
                st.writing.last_ticket,
            )
        };
        let mut cur = lock(&self.writer);
        for seg in segments {
            self.write_segment(&mut cur, &seg)?;
        }
        if sync {
            self.sync_current(&mut cur)?;
        }
        self.group.completion.complete(ticket);
        Ok(())
    }

    fn finish(&self) -> Result<()> {
        self.sync_current(&mut lock(&self.writer))
    }
}

impl Inner {
    fn sync_current(&self, cur: &mut Current) -> Result<()> {
        if let (true, Some(f)) = (cur.unsynced, &cur.file) {
            self.counters.io.sync(&**f, &cur.path)?;
            cur.unsynced = false;
        }
        Ok(())
    }

    /// Moves to `page`, a new one: everything before it must be on disk first (only the
    /// last page may be torn), and its creation durable before records count as written.
    fn start_page(&self, cur: &mut Current, page: u64) -> Result<Arc<dyn StoreFile>> {
        self.sync_current(cur)?;
        let path = self.page_path(page);
        let file = self.fs.create(&path).map_err(io_err("create", &path))?;
        self.fs
            .sync_dir(&self.dir)
            .map_err(io_err("fsync directory", &self.dir))?;
        self.counters.pages_created.fetch_add(1, Ordering::Relaxed);
        *cur = Current {
            page,
            path,
            file: Some(Arc::clone(&file)),
            unsynced: false,
        };
        Ok(file)
    }

    fn write_segment(&self, cur: &mut Current, seg: &Segment) -> Result<()> {
        let file = match &cur.file {
            Some(f) if seg.page == cur.page => Arc::clone(f),
            _ => self.start_page(cur, seg.page)?,
        };
        self.counters
            .io
            .write(&*file, &cur.path, &seg.buf, seg.start)?;
        cur.unsynced = true;
        let end = seg.start + seg.buf.len() as u64;
        let mut st = self.state();
        if let Some(info) = st.pages.get_mut(&seg.page) {
            info.written_end = end;
        }
        st.written = (seg.page, end);
        Ok(())
    }
}
