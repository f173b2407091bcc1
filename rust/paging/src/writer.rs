//! The writer thread: natural group commit.
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
use std::sync::{Arc, PoisonError};

use journal::JournalFile;

use crate::error::io_err;
use crate::store::{Inner, Segment};
use crate::Result;

/// The file the writer is appending to.
struct Current {
    page: u64,
    path: PathBuf,
    file: Option<Arc<dyn JournalFile>>,
    unsynced: bool,
}

pub(crate) fn run(inner: &Arc<Inner>) {
    let mut cur = Current {
        page: 0,
        path: PathBuf::new(),
        file: None,
        unsynced: false,
    };
    loop {
        let (segments, sync, ticket) = {
            let mut st = inner.state();
            loop {
                if st.failed.is_some() {
                    return;
                }
                if st.last_ticket > st.completed {
                    break;
                }
                if st.closing {
                    drop(st);
                    if let Err(e) = sync_current(inner, &mut cur) {
                        inner.fail(e);
                    }
                    return;
                }
                st.writer_waiting = true;
                st = inner
                    .writer_cv
                    .wait(st)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            st.writer_waiting = false;
            let sync = std::mem::take(&mut st.pending_sync);
            (std::mem::take(&mut st.segments), sync, st.last_ticket)
        };
        match write_batch(inner, &mut cur, segments, sync) {
            Ok(()) => inner.complete(ticket),
            Err(e) => {
                inner.fail(e);
                return;
            }
        }
    }
}

fn sync_current(inner: &Inner, cur: &mut Current) -> Result<()> {
    if let (true, Some(f)) = (cur.unsynced, &cur.file) {
        f.sync_data().map_err(io_err("fdatasync", &cur.path))?;
        inner.counters.syncs.fetch_add(1, Ordering::Relaxed);
        cur.unsynced = false;
    }
    Ok(())
}

fn write_batch(inner: &Inner, cur: &mut Current, segments: Vec<Segment>, sync: bool) -> Result<()> {
    let c = &inner.counters;
    for seg in segments {
        if seg.page != cur.page {
            // A new page: everything before it must be on disk first (only the last page
            // may be torn), and its creation durable before records count as written.
            sync_current(inner, cur)?;
            let path = inner.page_path(seg.page);
            let file = inner.fs.create(&path).map_err(io_err("create", &path))?;
            inner
                .fs
                .sync_dir(&inner.dir)
                .map_err(io_err("fsync directory", &inner.dir))?;
            c.pages_created.fetch_add(1, Ordering::Relaxed);
            *cur = Current {
                page: seg.page,
                path,
                file: Some(file),
                unsynced: false,
            };
        }
        let file = cur.file.as_ref().expect("created above");
        file.write_all_at(&seg.buf, seg.start)
            .map_err(io_err("write", &cur.path))?;
        cur.unsynced = true;
        c.writes.fetch_add(1, Ordering::Relaxed);
        c.bytes.fetch_add(seg.buf.len() as u64, Ordering::Relaxed);
        let end = seg.start + seg.buf.len() as u64;
        let mut st = inner.state();
        if let Some(info) = st.pages.get_mut(&seg.page) {
            info.written_end = end;
        }
        st.written = (seg.page, end);
    }
    if sync {
        sync_current(inner, cur)?;
    }
    Ok(())
}
