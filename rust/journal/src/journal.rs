//! The [`Journal`] handle and the state its threads share.
//!
//! Threads: callers submit (validate + enqueue, no I/O) and wait; batches are written by
//! whoever holds the writer role (the writer thread, or a waiting caller, see `writer`);
//! one housekeeper thread pre-allocates and reclaims files and starts automatic compactions
//! (see `housekeeper`); compaction runs on its own thread or on the caller of
//! [`Journal::compact`] (see `compact`).
//!
//! Locks: `writer` is the writer role and is held across the batch I/O. `state` guards
//! everything logical and physical (validation state, index, file tables, queue); it is
//! never held across I/O. `done` guards completion (waiters block on it) so waking waiters
//! does not contend with submitters. Order: `compaction`, then `writer`, then `state`, then
//! `done`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, TryLockError};
use std::thread::JoinHandle;
use std::time::Instant;

pub(crate) use wal::lock;
use wal::writer::{self as group, Due, Group, GroupCommit, Locked};
use wal::FileSystem;

use crate::config::Cfg;
use crate::files::{self, DataFile, FreeFile};
use crate::format::{self, FILE_HEADER_LEN};
use crate::index::{FileId, Index};
use crate::logical::Logical;
use crate::recovery::Recovered;
use crate::writer::{Role, WriterCore};
use crate::{
    housekeeper, recovery, CompactionReport, Error, JournalConfig, JournalStats, LoadReport, Op,
    Progress, Result, StdFileSystem, Ticket,
};

/// One submit waiting for the writer.
pub(crate) struct Submit {
    pub ticket: Ticket,
    pub ops: Vec<Op>,
    pub sync: bool,
    /// Written without waiting for company (implied by `sync`).
    pub flush: bool,
    /// Encoded size of the ops.
    pub bytes: usize,
}

pub(crate) struct State {
    pub logical: Logical,
    pub index: Index<()>,
    /// Files in use, by id.
    pub files: BTreeMap<FileId, DataFile>,
    /// Free files, by id (taken lowest first).
    pub pool: BTreeMap<FileId, FreeFile>,
    /// The file the writer appends to.
    pub current: FileId,
    pub queue: VecDeque<Submit>,
    pub queue_bytes: usize,
    /// Queued submits to write without waiting for company (sync or flush).
    pub queue_flushes: usize,
    /// When the oldest queued non-sync submit arrived (buffer-timeout).
    pub first_queued: Option<Instant>,
    pub compacting: bool,
    /// The housekeeper has work (pre-allocation, reclaim, compaction check).
    pub housekeeping: bool,
    /// While replication runs: its tap; reclaim and compaction pause (see `replication`).
    pub repl: Option<crate::replication::Tap>,
}

impl State {
    fn new(
        logical: Logical,
        index: Index<()>,
        files: BTreeMap<FileId, DataFile>,
        pool: BTreeMap<FileId, FreeFile>,
    ) -> State {
        State {
            logical,
            index,
            files,
            pool,
            current: 0,
            queue: VecDeque::new(),
            queue_bytes: 0,
            queue_flushes: 0,
            first_queued: None,
            compacting: false,
            housekeeping: true,
            repl: None,
        }
    }

    /// Whether a file before the current one could be reclaimed now. Of the normal
    /// (uncompacted) files only the oldest may go: replay follows one chain of batch
    /// sequences through them, and a gap left in the middle would read as lost batches.
    /// Compacted files are replayed one by one, so any of them may go. None while
    /// replication runs: the files listed to the backup stay as they are.
    pub(crate) fn reclaimable(&self) -> Option<FileId> {
        let oldest_normal = self.files.values().find(|f| !f.compacted).map(|f| f.id);
        self.files
            .values()
            .filter(|f| f.id != self.current && !f.busy && self.repl.is_none())
            .filter(|f| f.compacted || Some(f.id) == oldest_normal)
            .find(|f| {
                self.index
                    .files
                    .get(&f.id)
                    .is_some_and(|s| s.live == 0 && s.deps.is_empty())
            })
            .map(|f| f.id)
    }

    /// Whether a reclaimed file goes to the pool (else it is deleted).
    pub(crate) fn keep_in_pool(&self, cfg: &Cfg) -> bool {
        usize::try_from(cfg.pool_files).map_or(true, |pool_files| {
            self.pool.len() < pool_files || self.files.len() + self.pool.len() < cfg.min_files
        })
    }

    /// Takes a data file into the file table and the index.
    pub(crate) fn add_data_file(&mut self, f: &DataFile) {
        self.files.insert(f.id, f.clone());
        self.index.add_file(f.id);
    }

    /// Queues a validated submit; returns whether the writer must be woken for it.
    fn enqueue(&mut self, submit: Submit, buffer_size: usize, will_wait: bool) -> bool {
        let (flush, bytes) = (submit.flush, submit.bytes);
        let was_empty = self.queue.is_empty();
        if was_empty && !flush {
            self.first_queued = Some(Instant::now());
        }
        self.queue.push_back(submit);
        self.queue_bytes += bytes;
        if flush {
            self.queue_flushes += 1;
        }
        // Wake the writer only when that changes what it waits for.
        if flush {
            !will_wait
        } else {
            was_empty || self.queue_bytes >= buffer_size
        }
    }
}

#[derive(Default)]
pub(crate) struct Counters {
    /// Batches are the `writes`.
    pub io: wal::Counters,
    pub compactions: AtomicU64,
}

#[derive(Default)]
struct Threads {
    writer: Option<JoinHandle<()>>,
    housekeeper: Option<JoinHandle<()>>,
    compactor: Option<JoinHandle<()>>,
}

pub(crate) struct Inner {
    pub cfg: Cfg,
    pub fs: Arc<dyn FileSystem>,
    /// The state (behind the state lock), the writer thread's wake-up, the completion.
    pub group: Group<State, Error>,
    /// The writer role.
    pub writer: Mutex<WriterCore>,
    pub housekeeper_cv: Condvar,
    pub next_file_id: AtomicU64,
    pub counters: Counters,
    /// Serializes compactions.
    pub compaction: Mutex<()>,
    pub abort_compaction: AtomicBool,
    threads: Mutex<Threads>,
    closed: Mutex<bool>,
}

impl GroupCommit<State, Error> for Inner {
    fn group(&self) -> &Group<State, Error> {
        &self.group
    }

    fn due(&self, st: &Locked<State>) -> Due {
        crate::writer::due(st, self, Role::Thread)
    }

    fn write_batch(&self) -> Result<()> {
        let mut w = lock(&self.writer);
        w.step(self, Role::Thread).map(drop)
    }

    fn finish(&self) -> Result<()> {
        let mut w = lock(&self.writer);
        if self.group.completion.has_failed() {
            return Ok(());
        }
        w.sync(self)
    }

    fn on_fail(&self) {
        self.housekeeper_cv.notify_all();
    }
}

impl Inner {
    pub(crate) fn state(&self) -> MutexGuard<'_, Locked<State>> {
        self.group.lock()
    }

    pub(crate) fn new_file_id(&self) -> FileId {
        self.next_file_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Puts the journal in the failed state (first error wins) and wakes everyone.
    pub(crate) fn fail(&self, e: Error) -> Arc<Error> {
        group::fail(self, e)
    }

    /// Asks the housekeeper to look for work.
    pub(crate) fn poke_housekeeper(&self, st: &mut State) {
        if !st.housekeeping {
            st.housekeeping = true;
            self.housekeeper_cv.notify_one();
        }
    }

    pub(crate) fn spawn_compactor(self: &Arc<Self>) {
        let mut t = lock(&self.threads);
        if let Some(h) = t.compactor.take() {
            if !h.is_finished() {
                t.compactor = Some(h);
                return;
            }
            let _ = h.join();
        }
        let inner = self.clone();
        let spawned = std::thread::Builder::new()
            .name("journal-compactor".into())
            .spawn(move || {
                // Failures after the commit point fail the journal inside; others only
                // abandon this compaction (the next check may try again).
                let _ = crate::compact::compact(&inner);
            });
        if let Ok(h) = spawned {
            t.compactor = Some(h);
        }
    }

    /// While a caller waits: takes the writer role if it is free and writes a due batch
    /// (`true` if it wrote one); else makes sure the writer thread writes what is due.
    fn help_write(&self) -> bool {
        let role = match self.writer.try_lock() {
            Ok(w) => Some(w),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        };
        if let Some(mut w) = role {
            match w.step(self, Role::Helper) {
                Ok(wrote) => return wrote,
                Err(e) => {
                    drop(w);
                    self.fail(e);
                }
            }
        } else {
            // Someone else is writing: make sure what is due gets written after it.
            let mut st = self.state();
            if matches!(crate::writer::due(&st, self, Role::Helper), Due::Now) {
                self.group.signal.wake_if_waiting(&mut st.writing);
            }
        }
        false
    }

    fn spawn_threads(self: &Arc<Self>) -> Result<()> {
        let mut t = lock(&self.threads);
        let spawn_err = wal::io_err("spawn thread", &self.cfg.dir);
        let wr = self.clone();
        t.writer = Some(
            std::thread::Builder::new()
                .name("journal-writer".into())
                .spawn(move || group::run(&*wr))
                .map_err(spawn_err)?,
        );
        let spawn_err = wal::io_err("spawn thread", &self.cfg.dir);
        let hk = self.clone();
        t.housekeeper = Some(
            std::thread::Builder::new()
                .name("journal-housekeeper".into())
                .spawn(move || housekeeper::run(&hk))
                .map_err(spawn_err)?,
        );
        Ok(())
    }
}

/// Fills the pool up to the configured minimum (and one file to start in if recovery found
/// no append point); returns the next file id.
fn fill_pool(
    cfg: &Cfg,
    fs: &dyn FileSystem,
    st: &mut State,
    mut next_file_id: FileId,
    resuming: bool,
) -> Result<FileId> {
    while st.files.len() + st.pool.len() < cfg.min_files.max(1) || (!resuming && st.pool.is_empty())
    {
        let f = files::create_free_file(cfg, fs, next_file_id)?;
        next_file_id += 1;
        st.pool.insert(f.id, f);
    }
    Ok(next_file_id)
}

/// Where the writer starts: the recovered append point, or a fresh file from the pool
/// (re-stamped with `next_file_id` if replay would order it before a data file).
fn start_file(
    cfg: &Cfg,
    fs: &dyn FileSystem,
    st: &mut State,
    resume: Option<(FileId, u64)>,
    next_file_id: &mut FileId,
) -> Result<(DataFile, u64, bool)> {
    if let Some((id, off)) = resume {
        return Ok((st.files[&id].clone(), off, false));
    }
    let max_data = st.files.keys().next_back().copied().unwrap_or(0);
    let Some((_, mut free)) = st.pool.pop_first() else {
        return Err(Error::InvalidConfig(
            "no free journal file to start in".into(),
        ));
    };
    if free.id <= max_data {
        let h = fs
            .open(&free.path)
            .map_err(files::io_err("open", &free.path))?;
        free = files::stamp_free(cfg, fs, &*h, &free.path, *next_file_id)?;
        *next_file_id += 1;
    }
    let handle = fs
        .open(&free.path)
        .map_err(files::io_err("open", &free.path))?;
    let f = DataFile::from_free(free, handle);
    st.add_data_file(&f);
    Ok((f, FILE_HEADER_LEN as u64, true))
}

/// How a submit is to be written.
#[allow(clippy::struct_excessive_bools)] // four independent choices, each named at the call
struct How {
    /// Made durable (fdatasync) before its ticket completes.
    sync: bool,
    /// Written without waiting for company (implied by `sync`).
    flush: bool,
    /// The caller waits right away and writes a due batch itself if the writer role is
    /// free, so the writer thread need not be woken for a sync submit.
    will_wait: bool,
    /// The caller wakes the writer later ([`Journal::wake_writer`]).
    defer: bool,
}

impl How {
    fn plain(sync: bool) -> How {
        How {
            sync,
            flush: sync,
            will_wait: false,
            defer: false,
        }
    }
}

/// The journal. `Send + Sync`; every method takes `&self`. Dropping it closes it.
pub struct Journal {
    pub(crate) inner: Arc<Inner>,
}

impl Journal {
    /// Creates the directory if missing, recovers, starts the writer thread.
    pub fn open(config: JournalConfig) -> Result<(Journal, LoadReport)> {
        Self::open_with_fs(config, Arc::new(StdFileSystem))
    }

    /// [`Journal::open`] over a given file system (tests inject faults this way).
    pub fn open_with_fs(
        config: JournalConfig,
        fs: Arc<dyn FileSystem>,
    ) -> Result<(Journal, LoadReport)> {
        let cfg = Cfg::new(config)?;
        let Recovered {
            index,
            logical,
            files,
            pool,
            resume,
            next_seq,
            durable_through,
            next_file_id,
            mut report,
            incomplete,
        } = recovery::recover(&cfg, &*fs)?;
        let mut st = State::new(logical, index, files, pool);
        let mut next_file_id = fill_pool(&cfg, &*fs, &mut st, next_file_id, resume.is_some())?;
        let (cur, offset, stamp) = start_file(&cfg, &*fs, &mut st, resume, &mut next_file_id)?;
        st.current = cur.id;
        let writer = WriterCore::new(cur, offset, stamp, next_seq, durable_through);
        let inner = Arc::new(Inner {
            cfg,
            fs,
            group: Group::new(st),
            writer: Mutex::new(writer),
            housekeeper_cv: Condvar::new(),
            next_file_id: AtomicU64::new(next_file_id),
            counters: Counters::default(),
            compaction: Mutex::new(()),
            abort_compaction: AtomicBool::new(false),
            threads: Mutex::new(Threads::default()),
            closed: Mutex::new(false),
        });
        let journal = Journal {
            inner: inner.clone(),
        };
        inner.spawn_threads()?;
        report.incomplete_transactions_rolled_back = journal.roll_back(&incomplete)?;
        Ok((journal, report))
    }

    /// Transactions neither prepared nor finished are rolled back, durably, so their
    /// records die and their ids can be reused; returns how many.
    fn roll_back(&self, incomplete: &[u64]) -> Result<usize> {
        for chunk in incomplete.chunks(1024) {
            let ops = chunk.iter().map(|&tx_id| Op::Rollback { tx_id }).collect();
            self.append(ops, true)?;
        }
        Ok(incomplete.len())
    }

    /// Validates `ops` against the in-memory state, applies them to it and queues them for
    /// the writer; never blocks on I/O. All ops of one submit go into one batch in one
    /// file. All or nothing: on error nothing is queued.
    pub fn submit(&self, ops: Vec<Op>, sync: bool) -> Result<Ticket> {
        self.submit_inner(ops, &How::plain(sync))
    }

    /// A non-sync [`submit`](Self::submit) written without waiting for company (as a sync
    /// one would be) but not fdatasynced: once its ticket completes the OS has it, so it
    /// survives a crash of the process, and the next synced batch makes it durable.
    /// `defer` as in [`submit_deferred`](Self::submit_deferred).
    pub fn submit_flushed(&self, ops: Vec<Op>, defer: bool) -> Result<Ticket> {
        self.submit_inner(
            ops,
            &How {
                flush: true,
                defer,
                ..How::plain(false)
            },
        )
    }

    /// [`submit`](Self::submit), but leaves the writer asleep: the caller promises to call
    /// [`wake_writer`](Self::wake_writer) soon (an event loop does it before it blocks), so
    /// the submits of one loop pass go into one batch and the writer is woken once for
    /// them instead of once for the first (which would then be written alone).
    pub fn submit_deferred(&self, ops: Vec<Op>, sync: bool) -> Result<Ticket> {
        self.submit_inner(
            ops,
            &How {
                defer: true,
                ..How::plain(sync)
            },
        )
    }

    /// Wakes the writer if a deferred submit left it asleep with work due. Lock-free
    /// (see [`wal::writer::Signal::wake_deferred`]).
    pub fn wake_writer(&self) {
        self.inner.group.signal.wake_deferred();
    }

    fn submit_inner(&self, ops: Vec<Op>, how: &How) -> Result<Ticket> {
        let bytes: usize = ops.iter().map(format::op_len).sum();
        let max = self.inner.cfg.max_body;
        if bytes > max {
            return Err(Error::RecordTooLarge { size: bytes, max });
        }
        let inner = &*self.inner;
        let mut st = inner.state();
        if let Some(f) = inner.group.completion.failure() {
            return Err(Error::Failed(f));
        }
        if st.writing.closing {
            return Err(Error::Closed);
        }
        st.logical.apply_all(&ops)?;
        let ticket = st.writing.next_ticket();
        if let Some(tap) = &mut st.repl {
            tap.push(ticket, how.sync, how.flush, &ops, bytes);
        }
        let submit = Submit {
            ticket,
            ops,
            sync: how.sync,
            flush: how.flush,
            bytes,
        };
        let wake = st.enqueue(submit, inner.cfg.buffer_size, how.will_wait);
        group::submitted(&inner.group, st, wake, how.defer);
        Ok(ticket)
    }

    /// Blocks until `ticket` is durable (sync) or written (non-sync), or fails with the
    /// error that stopped the writer.
    ///
    /// While it waits, the calling thread takes the writer role when it is free and a
    /// batch is due, and writes that batch itself (see `writer`).
    pub fn wait(&self, ticket: Ticket) -> Result<()> {
        let inner = &*self.inner;
        Ok(inner.group.completion.wait(ticket, || inner.help_write())?)
    }

    /// [`submit`](Self::submit) + [`wait`](Self::wait).
    pub fn append(&self, ops: Vec<Op>, sync: bool) -> Result<()> {
        let t = self.submit_inner(
            ops,
            &How {
                will_wait: true,
                ..How::plain(sync)
            },
        )?;
        self.wait(t)
    }

    /// Highest completed ticket and the failure, if the writer failed.
    pub fn progress(&self) -> Progress {
        self.inner.group.completion.progress()
    }

    /// Called by the writer thread after every batch completes or fails. Must be cheap and
    /// must not call back into the journal.
    pub fn set_completion_listener(&self, listener: Box<dyn Fn() + Send + Sync>) {
        self.inner.group.completion.set_listener(listener);
    }

    /// Rewrites the live records of all files before the current one into new files;
    /// appends continue meanwhile.
    pub fn compact(&self) -> Result<CompactionReport> {
        crate::compact::compact(&self.inner)
    }

    pub fn stats(&self) -> JournalStats {
        let c = &self.inner.counters;
        let st = self.inner.state();
        JournalStats {
            data_files: st.files.len(),
            free_files: st.pool.len(),
            live_records: st.index.records.len(),
            io: c.io.snapshot(),
            compactions: c.compactions.load(Ordering::Relaxed),
        }
    }

    /// Flushes what is queued, stops the threads, syncs, releases the files. Idempotent;
    /// returns `Failed` if the journal had failed.
    pub fn close(&self) -> Result<()> {
        let inner = &*self.inner;
        let mut closed = lock(&inner.closed);
        if !*closed {
            self.replication_stop();
            group::close(&inner.group);
            inner.abort_compaction.store(true, Ordering::Relaxed);
            inner.housekeeper_cv.notify_all();
            let handles = {
                let mut t = lock(&inner.threads);
                [t.writer.take(), t.housekeeper.take(), t.compactor.take()]
            };
            for h in handles.into_iter().flatten() {
                let _ = h.join();
            }
            // A manual compaction in progress finishes (or aborts) before we go on.
            let _c = lock(&inner.compaction);
            {
                let mut st = inner.state();
                st.files.clear();
                st.pool.clear();
            }
            inner.group.completion.stop();
            *closed = true;
        }
        match inner.group.completion.failure() {
            Some(f) => Err(Error::Failed(f)),
            None => Ok(()),
        }
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        let _ = self.close();
    }
}
