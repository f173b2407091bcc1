//! [`PageStore`]: the shared state, appending, waiting, deleting and closing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use wal::writer::{self as group, Group, Locked};
use wal::{io_err, lock, Counters as IoCounters, FileSystem, StdFileSystem, StoreFile};

use crate::format::{self, HEADER_LEN, MAX_PAYLOAD};
use crate::writer::Current;
use crate::{Error, NewRecord, PageStats, Progress, Result, Ticket};

/// Called on the writer thread after every batch completes, when it fails and at close.
pub type Listener = wal::Listener;

/// What the store knows about one page.
pub(crate) struct PageInfo {
    /// Bytes of the file that are written (readable); 0 until the file exists.
    pub written_end: u64,
    /// Set once appends moved past this page: its final length.
    pub final_end: Option<u64>,
    /// Opened on the first read.
    pub handle: Option<Arc<dyn StoreFile>>,
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
    pub written: (u64, u64),
}

#[derive(Default)]
pub(crate) struct Counters {
    pub io: IoCounters,
    pub pages_created: AtomicU64,
}

pub(crate) struct Inner {
    pub fs: Arc<dyn FileSystem>,
    pub dir: PathBuf,
    pub page_size: u64,
    /// The state (behind the state lock), the writer thread's wake-up, the completion.
    pub group: Group<State, Error>,
    /// The writer role: the page it appends to.
    pub writer: Mutex<Current>,
    pub counters: Counters,
}

impl Inner {
    pub fn state(&self) -> MutexGuard<'_, Locked<State>> {
        self.group.lock()
    }

    pub fn page_path(&self, page: u64) -> PathBuf {
        self.dir.join(format::file_name(page))
    }

    fn closed_error(&self) -> Error {
        Error::Closed {
            path: self.dir.clone(),
        }
    }

    /// Why a ticket that will never complete does not.
    fn stopped(&self, stopped: wal::Stopped<Error>) -> Error {
        match stopped {
            wal::Stopped::Failed(cause) => Error::Failed(cause),
            wal::Stopped::Closed => self.closed_error(),
        }
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
            group: Group::new(State {
                cur_page,
                cur_offset: HEADER_LEN,
                cur_started: false,
                pages,
                segments: Vec::new(),
                pending_sync: false,
                written: (cur_page, HEADER_LEN),
            }),
            writer: Mutex::new(Current::default()),
            counters: Counters::default(),
        });
        let for_thread = Arc::clone(&inner);
        let thread = std::thread::Builder::new()
            .name("page-writer".into())
            .spawn(move || group::run(&*for_thread))
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

    /// Sets the function called after every completed batch (and on failure and close).
    pub fn set_completion_listener(&self, listener: Listener) {
        self.inner.group.completion.set_listener(listener);
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
        let mut st = self.inner.state();
        self.check_open(&st)?;
        let positions = records
            .iter()
            .map(|r| queue_record(&mut st, self.inner.page_size, r))
            .collect();
        st.pending_sync |= sync;
        self.inner.counters.io.count_records(records.len() as u64);
        let ticket = st.writing.next_ticket();
        group::submitted(&self.inner.group, st, true, defer);
        Ok((ticket, positions))
    }

    /// Whether the writer thread is asleep waiting for work (for tests and diagnostics).
    pub fn writer_idle(&self) -> bool {
        self.inner.state().writing.waiting
    }

    /// Wakes the writer if a deferred append left it asleep. Lock-free.
    pub fn wake_writer(&self) {
        self.inner.group.signal.wake_deferred();
    }

    fn check_open(&self, st: &Locked<State>) -> Result<()> {
        if let Some(cause) = self.inner.group.completion.failure() {
            return Err(Error::Failed(cause));
        }
        if st.writing.closing {
            return Err(self.inner.closed_error());
        }
        Ok(())
    }

    /// Blocks until `ticket` is written (and synced if its batch asked for it).
    pub fn wait(&self, ticket: Ticket) -> Result<()> {
        let inner = &*self.inner;
        if ticket > inner.state().writing.last_ticket {
            // Never handed out: it cannot complete.
            return Err(inner
                .group
                .completion
                .failure()
                .map_or_else(|| inner.closed_error(), Error::Failed));
        }
        inner
            .group
            .completion
            .wait(ticket, || false)
            .map_err(|stopped| inner.stopped(stopped))
    }

    pub fn progress(&self) -> Progress {
        self.inner.group.completion.progress()
    }

    pub fn stats(&self) -> PageStats {
        let c = &self.inner.counters;
        PageStats {
            io: c.io.snapshot(),
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
        let inner = &*self.inner;
        group::close(&inner.group);
        let thread = lock(&self.thread).take();
        if let Some(t) = thread {
            let _ = t.join();
        }
        inner.group.completion.stop();
        match inner.group.completion.failure() {
            Some(cause) => Err(Error::Failed(cause)),
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

/// Gives `r` its position (on a fresh page if it does not fit in the current one) and
/// encodes it into the segment queued for its page.
fn queue_record(st: &mut State, page_size: u64, r: &NewRecord<'_>) -> (u64, u64) {
    let len = format::record_len(r.queue_ids.len(), r.message.len());
    if st.cur_offset > HEADER_LEN && st.cur_offset + len > page_size {
        roll(st);
    }
    let (page, offset) = (st.cur_page, st.cur_offset);
    let fields = format::Fields {
        message_id: r.message_id,
        tx_id: r.tx_id,
        queue_offset: r.queue_offset,
        queue_ids: r.queue_ids,
        message: r.message,
    };
    format::encode(segment_for(st, page, offset), page, offset, &fields);
    st.cur_offset += len;
    (page, offset)
}

/// The buffer of the queued segment that records at `(page, offset)` go to: a new one for a
/// page not started yet (its header first) or after a batch was taken.
fn segment_for(st: &mut State, page: u64, offset: u64) -> &mut Vec<u8> {
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
    let last = st.segments.len() - 1;
    &mut st.segments[last].buf
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
