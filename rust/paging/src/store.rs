//! [`PageStore`]: the shared state, appending, waiting, deleting and closing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::JoinHandle;

use journal::{FileSystem, JournalFile, StdFileSystem};

use crate::error::io_err;
use crate::format::{self, HEADER_LEN, MAX_PAYLOAD};
use crate::{Error, NewRecord, PageStats, Progress, Result, Ticket};

/// Called on the writer thread after every batch completes, and once when it fails.
pub type Listener = Box<dyn Fn() + Send + Sync>;

/// What the store knows about one page.
pub(crate) struct PageInfo {
    /// Bytes of the file that are written (readable); 0 until the file exists.
    pub written_end: u64,
    /// Set once appends moved past this page: its final length.
    pub final_end: Option<u64>,
    /// Opened on the first read.
    pub handle: Option<Arc<dyn JournalFile>>,
    /// The page's format version (its header's): the layout of its records.
    pub version: u32,
}

/// Bytes for one page, queued for the writer; `start` 0 means the header is included and
/// the file is to be created.
pub(crate) struct Segment {
    pub page: u64,
    pub start: u64,
    pub buf: Vec<u8>,
}

pub(crate) struct State {
    /// The page appends go to and the offset of the next record in it.
    pub cur_page: u64,
    pub cur_offset: u64,
    /// Whether the current page's header is queued (or written) yet.
    pub cur_started: bool,
    pub pages: BTreeMap<u64, PageInfo>,
    pub segments: Vec<Segment>,
    pub pending_sync: bool,
    pub last_ticket: Ticket,
    pub completed: Ticket,
    pub failed: Option<Arc<Error>>,
    pub written: (u64, u64),
    pub closing: bool,
    pub closed: bool,
    pub writer_waiting: bool,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub writes: AtomicU64,
    pub syncs: AtomicU64,
    pub records: AtomicU64,
    pub bytes: AtomicU64,
    pub pages_created: AtomicU64,
}

pub(crate) struct Inner {
    pub fs: Arc<dyn FileSystem>,
    pub dir: PathBuf,
    pub page_size: u64,
    pub state: Mutex<State>,
    /// Wakes the writer.
    pub writer_cv: Condvar,
    /// Wakes blocking waiters.
    pub done_cv: Condvar,
    pub listener: OnceLock<Listener>,
    pub counters: Counters,
}

impl Inner {
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn page_path(&self, page: u64) -> PathBuf {
        self.dir.join(format::file_name(page))
    }

    fn notify(&self) {
        if let Some(listener) = self.listener.get() {
            listener();
        }
    }

    pub fn complete(&self, ticket: Ticket) {
        {
            let mut st = self.state();
            st.completed = st.completed.max(ticket);
            self.done_cv.notify_all();
        }
        self.notify();
    }

    pub fn fail(&self, err: Error) {
        {
            let mut st = self.state();
            if st.failed.is_none() {
                st.failed = Some(Arc::new(err));
            }
            self.done_cv.notify_all();
        }
        self.notify();
    }
}

/// One address's page store. Dropping it closes it.
pub struct PageStore {
    pub(crate) inner: Arc<Inner>,
    address: String,
    torn: Option<(u64, u64)>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl PageStore {
    /// Opens (recovers) the store in `dir`; if `dir` holds no store yet, creates one for
    /// `address` (required then). Pages are `page_size` bytes at most, except a record
    /// larger than that, which gets a page of its own.
    pub fn open(dir: &Path, page_size: u64, address: Option<&str>) -> Result<PageStore> {
        Self::open_with_fs(dir, page_size, address, Arc::new(StdFileSystem))
    }

    pub fn open_with_fs(
        dir: &Path,
        page_size: u64,
        address: Option<&str>,
        fs: Arc<dyn FileSystem>,
    ) -> Result<PageStore> {
        if !(1024..=1 << 40).contains(&page_size) {
            return Err(Error::InvalidConfig(format!(
                "page size {page_size} is outside 1 KiB..1 TiB"
            )));
        }
        let found = crate::recovery::recover(&*fs, dir, address)?;
        let cur_page = found.pages.keys().next_back().map_or(1, |p| p + 1);
        let mut pages = found.pages;
        pages.insert(
            cur_page,
            PageInfo {
                written_end: 0,
                final_end: None,
                handle: None,
                version: format::VERSION,
            },
        );
        let inner = Arc::new(Inner {
            fs,
            dir: dir.to_path_buf(),
            page_size,
            state: Mutex::new(State {
                cur_page,
                cur_offset: HEADER_LEN,
                cur_started: false,
                pages,
                segments: Vec::new(),
                pending_sync: false,
                last_ticket: 0,
                completed: 0,
                failed: None,
                written: (cur_page, HEADER_LEN),
                closing: false,
                closed: false,
                writer_waiting: false,
            }),
            writer_cv: Condvar::new(),
            done_cv: Condvar::new(),
            listener: OnceLock::new(),
            counters: Counters::default(),
        });
        let for_thread = Arc::clone(&inner);
        let thread = std::thread::Builder::new()
            .name("page-writer".into())
            .spawn(move || crate::writer::run(&for_thread))
            .map_err(io_err("spawn writer for", dir))?;
        Ok(PageStore {
            inner,
            address: found.address,
            torn: found.torn,
            thread: Mutex::new(Some(thread)),
        })
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    pub fn directory(&self) -> &Path {
        &self.inner.dir
    }

    pub fn page_size(&self) -> u64 {
        self.inner.page_size
    }

    /// What recovery cut off the last page, if anything: `(page, offset)`.
    pub fn torn(&self) -> Option<(u64, u64)> {
        self.torn
    }

    /// Sets the function called after every completed batch (and on failure); once.
    pub fn set_completion_listener(&self, listener: Listener) {
        let _ = self.inner.listener.set(listener);
    }

    /// Page numbers in the store, ascending, the current one included.
    pub fn pages(&self) -> Vec<u64> {
        self.inner.state().pages.keys().copied().collect()
    }

    pub fn current_page(&self) -> u64 {
        self.inner.state().cur_page
    }

    /// The format version of `page` (the layout of its records), if it exists.
    pub fn page_version(&self, page: u64) -> Option<u32> {
        self.inner.state().pages.get(&page).map(|p| p.version)
    }

    /// Where the next record would go.
    pub fn end(&self) -> (u64, u64) {
        let st = self.inner.state();
        (st.cur_page, st.cur_offset)
    }

    /// Up to where records are written (readable).
    pub fn written(&self) -> (u64, u64) {
        self.inner.state().written
    }

    /// Queues `records` (each at the position returned for it) and wakes the writer
    /// unless `defer` (then [`wake_writer`](Self::wake_writer) must follow soon). Never does
    /// I/O. All or none: a record too large refuses the whole call.
    pub fn append(
        &self,
        records: &[NewRecord<'_>],
        sync: bool,
        defer: bool,
    ) -> Result<(Ticket, Vec<(u64, u64)>)> {
        for r in records {
            let payload =
                format::record_len(r.queue_ids.len(), r.message.len()) - format::RECORD_HEADER_LEN;
            if payload > MAX_PAYLOAD || r.queue_ids.len() > usize::from(u16::MAX) {
                return Err(Error::RecordTooLarge {
                    size: payload,
                    max: MAX_PAYLOAD,
                });
            }
        }
        let page_size = self.inner.page_size;
        let mut st = self.inner.state();
        self.check_open(&st)?;
        let mut positions = Vec::with_capacity(records.len());
        for r in records {
            let len = format::record_len(r.queue_ids.len(), r.message.len());
            if st.cur_offset > HEADER_LEN && st.cur_offset + len > page_size {
                roll(&mut st);
            }
            let (page, offset) = (st.cur_page, st.cur_offset);
            if !st.cur_started {
                st.cur_started = true;
                st.segments.push(Segment {
                    page,
                    start: 0,
                    buf: format::header(page).to_vec(),
                });
            } else if st.segments.last().map_or(true, |s| s.page != page) {
                st.segments.push(Segment {
                    page,
                    start: offset,
                    buf: Vec::new(),
                });
            }
            let seg = st.segments.last_mut().expect("pushed above");
            let fields = format::Fields {
                message_id: r.message_id,
                tx_id: r.tx_id,
                queue_offset: r.queue_offset,
                queue_ids: r.queue_ids,
                message: r.message,
            };
            format::encode(&mut seg.buf, page, offset, &fields);
            st.cur_offset += len;
            positions.push((page, offset));
        }
        st.last_ticket += 1;
        st.pending_sync |= sync;
        let appended = records.len() as u64;
        self.inner
            .counters
            .records
            .fetch_add(appended, Ordering::Relaxed);
        let ticket = st.last_ticket;
        if !defer && st.writer_waiting {
            st.writer_waiting = false;
            self.inner.writer_cv.notify_one();
        }
        Ok((ticket, positions))
    }

    /// Whether the writer thread is asleep waiting for work (for tests and diagnostics).
    pub fn writer_idle(&self) -> bool {
        self.inner.state().writer_waiting
    }

    /// Wakes the writer if a deferred append left it asleep. Takes the lock briefly.
    pub fn wake_writer(&self) {
        let mut st = self.inner.state();
        if st.writer_waiting && st.last_ticket > st.completed {
            st.writer_waiting = false;
            self.inner.writer_cv.notify_one();
        }
    }

    fn check_open(&self, st: &State) -> Result<()> {
        if let Some(cause) = &st.failed {
            return Err(Error::Failed(Arc::clone(cause)));
        }
        if st.closing {
            return Err(Error::Closed {
                path: self.inner.dir.clone(),
            });
        }
        Ok(())
    }

    /// Blocks until `ticket` is written (and synced if its batch asked for it).
    pub fn wait(&self, ticket: Ticket) -> Result<()> {
        let mut st = self.inner.state();
        loop {
            if st.completed >= ticket {
                return Ok(());
            }
            if let Some(cause) = &st.failed {
                return Err(Error::Failed(Arc::clone(cause)));
            }
            if st.closed || ticket > st.last_ticket {
                return Err(Error::Closed {
                    path: self.inner.dir.clone(),
                });
            }
            st = self
                .inner
                .done_cv
                .wait(st)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    pub fn progress(&self) -> Progress {
        let st = self.inner.state();
        Progress {
            completed: st.completed,
            failed: st.failed.clone(),
        }
    }

    pub fn stats(&self) -> PageStats {
        let c = &self.inner.counters;
        PageStats {
            writes: c.writes.load(Ordering::Relaxed),
            syncs: c.syncs.load(Ordering::Relaxed),
            records: c.records.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            pages_created: c.pages_created.load(Ordering::Relaxed),
        }
    }

    /// Removes a finished page (not the current one, and only once it is fully written).
    pub fn delete_page(&self, page: u64) -> Result<()> {
        let inner = &self.inner;
        {
            let st = inner.state();
            let bad = |reason: &str| Error::BadPage {
                path: inner.dir.clone(),
                page,
                reason: reason.into(),
            };
            if page == st.cur_page {
                return Err(bad("is the current page"));
            }
            let info = st.pages.get(&page).ok_or_else(|| bad("does not exist"))?;
            if info.final_end != Some(info.written_end) {
                return Err(bad("is still being written"));
            }
        }
        let path = inner.page_path(page);
        inner
            .fs
            .remove_file(&path)
            .map_err(io_err("remove", &path))?;
        inner
            .fs
            .sync_dir(&inner.dir)
            .map_err(io_err("fsync directory", &inner.dir))?;
        inner.state().pages.remove(&page);
        Ok(())
    }

    /// Flushes (and syncs) what is queued and stops the writer; idempotent. Reads still
    /// work afterwards.
    pub fn close(&self) -> Result<()> {
        {
            let mut st = self.inner.state();
            st.closing = true;
            self.inner.writer_cv.notify_one();
        }
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(t) = thread {
            let _ = t.join();
        }
        let mut st = self.inner.state();
        st.closed = true;
        self.inner.done_cv.notify_all();
        match &st.failed {
            Some(cause) => Err(Error::Failed(Arc::clone(cause))),
            None => Ok(()),
        }
    }

    /// Closes the store and removes its files and its directory (the address is gone).
    pub fn delete(&self) -> Result<()> {
        let _ = self.close();
        let inner = &self.inner;
        let fs = &*inner.fs;
        for name in fs.list(&inner.dir).map_err(io_err("list", &inner.dir))? {
            let path = inner.dir.join(&name);
            fs.remove_file(&path).map_err(io_err("remove", &path))?;
        }
        // The FileSystem trait has no directory removal; an empty directory is all that is
        // left, and the parent's fsync below makes its removal durable.
        std::fs::remove_dir(&inner.dir).map_err(io_err("remove directory", &inner.dir))?;
        if let Some(parent) = inner.dir.parent() {
            fs.sync_dir(parent)
                .map_err(io_err("fsync directory", parent))?;
        }
        inner.state().pages.clear();
        Ok(())
    }
}

/// Finishes the current page; the next record goes to a fresh one.
fn roll(st: &mut State) {
    let end = st.cur_offset;
    if let Some(info) = st.pages.get_mut(&st.cur_page) {
        info.final_end = Some(end);
    }
    st.cur_page += 1;
    st.cur_offset = HEADER_LEN;
    st.cur_started = false;
    st.pages.insert(
        st.cur_page,
        PageInfo {
            written_end: 0,
            final_end: None,
            handle: None,
            version: format::VERSION,
        },
    );
}

impl Drop for PageStore {
    fn drop(&mut self) {
        let _ = self.close();
    }
}
