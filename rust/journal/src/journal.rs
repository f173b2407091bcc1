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
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, TryLockError};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::config::Cfg;
use crate::files::{self, DataFile, FreeFile};
use crate::format::{self, FILE_HEADER_LEN};
use crate::fs::FileSystem;
use crate::index::{FileId, Index};
use crate::logical::Logical;
use crate::writer::{self, Role, WriterCore};
use crate::{
    housekeeper, recovery, CompactionReport, Error, JournalConfig, JournalStats, LoadReport, Op,
    Progress, Result, StdFileSystem, Ticket,
};

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

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
    pub last_ticket: Ticket,
    pub writer_waiting: bool,
    pub closing: bool,
    pub failed: Option<Arc<Error>>,
    pub compacting: bool,
    /// The housekeeper has work (pre-allocation, reclaim, compaction check).
    pub housekeeping: bool,
}

impl State {
    /// Whether a file before the current one could be reclaimed now.
    pub(crate) fn reclaimable(&self) -> Option<FileId> {
        self.files
            .values()
            .filter(|f| f.id != self.current && !f.busy)
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
        cfg.pool_files < 0
            || self.pool.len() < cfg.pool_files as usize
            || self.files.len() + self.pool.len() < cfg.min_files
    }
}

#[derive(Default)]
pub(crate) struct Done {
    pub failed: Option<Arc<Error>>,
    /// The writer stopped (closed); unfinished tickets never complete.
    pub stopped: bool,
    /// Threads blocked on `done_cv` (completion skips the wake-up syscall when none are).
    pub sleepers: usize,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub batches: AtomicU64,
    pub syncs: AtomicU64,
    pub records: AtomicU64,
    pub bytes: AtomicU64,
    pub compactions: AtomicU64,
}

#[derive(Default)]
struct Threads {
    writer: Option<JoinHandle<()>>,
    housekeeper: Option<JoinHandle<()>>,
    compactor: Option<JoinHandle<()>>,
}

type Listener = Arc<dyn Fn() + Send + Sync>;

pub(crate) struct Inner {
    pub cfg: Cfg,
    pub fs: Arc<dyn FileSystem>,
    pub state: Mutex<State>,
    /// The writer role.
    pub writer: Mutex<WriterCore>,
    pub writer_cv: Condvar,
    pub housekeeper_cv: Condvar,
    /// Highest completed ticket (all below are complete too).
    pub completed: AtomicU64,
    pub done: Mutex<Done>,
    pub done_cv: Condvar,
    pub next_file_id: AtomicU64,
    pub counters: Counters,
    listener: Mutex<Option<Listener>>,
    /// Serializes compactions.
    pub compaction: Mutex<()>,
    pub abort_compaction: AtomicBool,
    /// A deferred submit would have woken the writer: [`Journal::wake_writer`] does it.
    /// Outside the state lock so that waking never waits for the writer (which holds that
    /// lock while it takes a batch and indexes one, and may be preempted meanwhile).
    pub wake_deferred: AtomicBool,
    threads: Mutex<Threads>,
    closed: Mutex<bool>,
}

impl Inner {
    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    pub(crate) fn new_file_id(&self) -> FileId {
        self.next_file_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn notify_listener(&self) {
        let l = lock(&self.listener).clone();
        if let Some(l) = l {
            l();
        }
    }

    /// Publishes completion of every ticket up to `ticket` and wakes the waiters.
    pub(crate) fn complete(&self, ticket: Ticket) {
        self.completed.store(ticket, Ordering::Release);
        let sleepers = lock(&self.done).sleepers;
        if sleepers > 0 {
            self.done_cv.notify_all();
        }
        self.notify_listener();
    }

    /// Puts the journal in the failed state (first error wins) and wakes everyone.
    pub(crate) fn fail(&self, e: Error) -> Arc<Error> {
        let cause = {
            let mut st = self.state();
            let cause = st.failed.get_or_insert_with(|| Arc::new(e)).clone();
            lock(&self.done).failed = Some(cause.clone());
            cause
        };
        self.writer_cv.notify_all();
        self.housekeeper_cv.notify_all();
        self.done_cv.notify_all();
        self.notify_listener();
        cause
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
}

/// The journal. `Send + Sync`; every method takes `&self`. Dropping it closes it.
pub struct Journal {
    inner: Arc<Inner>,
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
        let rec = recovery::recover(&cfg, &*fs)?;
        let mut st = State {
            logical: rec.logical,
            index: rec.index,
            files: rec.files,
            pool: rec.pool,
            current: 0,
            queue: VecDeque::new(),
            queue_bytes: 0,
            queue_flushes: 0,
            first_queued: None,
            last_ticket: 0,
            writer_waiting: false,
            closing: false,
            failed: None,
            compacting: false,
            housekeeping: true,
        };
        let mut next_file_id = rec.next_file_id;
        while st.files.len() + st.pool.len() < cfg.min_files.max(1)
            || (rec.resume.is_none() && st.pool.is_empty())
        {
            let f = files::create_free_file(&cfg, &*fs, next_file_id)?;
            next_file_id += 1;
            st.pool.insert(f.id, f);
        }
        // Where the writer starts: the recovered append point, or a fresh file.
        let (cur, offset, stamp) = match rec.resume {
            Some((id, off)) => (st.files[&id].clone(), off, false),
            None => {
                let max_data = st.files.keys().next_back().copied().unwrap_or(0);
                let (_, mut free) = st.pool.pop_first().expect("pool filled above");
                if free.id <= max_data {
                    let h = fs
                        .open(&free.path)
                        .map_err(files::io_err("open", &free.path))?;
                    free = files::stamp_free(&cfg, &*fs, &*h, &free.path, next_file_id)?;
                    next_file_id += 1;
                }
                let handle = fs
                    .open(&free.path)
                    .map_err(files::io_err("open", &free.path))?;
                let f = DataFile {
                    id: free.id,
                    path: free.path,
                    handle,
                    compacted: false,
                    busy: false,
                };
                st.files.insert(f.id, f.clone());
                st.index.add_file(f.id);
                (f, FILE_HEADER_LEN as u64, true)
            }
        };
        st.current = cur.id;
        let inner = Arc::new(Inner {
            cfg,
            fs,
            state: Mutex::new(st),
            writer: Mutex::new(WriterCore::new(
                cur,
                offset,
                stamp,
                rec.next_seq,
                rec.durable_through,
            )),
            writer_cv: Condvar::new(),
            housekeeper_cv: Condvar::new(),
            completed: AtomicU64::new(0),
            done: Mutex::new(Done::default()),
            done_cv: Condvar::new(),
            next_file_id: AtomicU64::new(next_file_id),
            counters: Counters::default(),
            listener: Mutex::new(None),
            compaction: Mutex::new(()),
            abort_compaction: AtomicBool::new(false),
            wake_deferred: AtomicBool::new(false),
            threads: Mutex::new(Threads::default()),
            closed: Mutex::new(false),
        });
        let journal = Journal {
            inner: inner.clone(),
        };
        {
            let mut t = lock(&inner.threads);
            let spawn_err = |e: std::io::Error| Error::Io {
                op: "spawn thread",
                path: inner.cfg.dir.clone(),
                source: e,
            };
            let wr = inner.clone();
            t.writer = Some(
                std::thread::Builder::new()
                    .name("journal-writer".into())
                    .spawn(move || writer::run(&wr))
                    .map_err(spawn_err)?,
            );
            let hk = inner.clone();
            t.housekeeper = Some(
                std::thread::Builder::new()
                    .name("journal-housekeeper".into())
                    .spawn(move || housekeeper::run(&hk))
                    .map_err(spawn_err)?,
            );
        }
        let mut report = rec.report;
        // Transactions neither prepared nor finished are rolled back, durably, so their
        // records die and their ids can be reused.
        for chunk in rec.incomplete.chunks(1024) {
            let ops = chunk.iter().map(|&tx_id| Op::Rollback { tx_id }).collect();
            journal.append(ops, true)?;
        }
        report.incomplete_transactions_rolled_back = rec.incomplete.len();
        Ok((journal, report))
    }

    /// Validates `ops` against the in-memory state, applies them to it and queues them for
    /// the writer; never blocks on I/O. All ops of one submit go into one batch in one
    /// file. All or nothing: on error nothing is queued.
    pub fn submit(&self, ops: Vec<Op>, sync: bool) -> Result<Ticket> {
        self.submit_inner(ops, sync, sync, false, false)
    }

    /// A non-sync [`submit`](Self::submit) written without waiting for company (as a sync
    /// one would be) but not fdatasynced: once its ticket completes the OS has it, so it
    /// survives a crash of the process, and the next synced batch makes it durable.
    /// `defer` as in [`submit_deferred`](Self::submit_deferred).
    pub fn submit_flushed(&self, ops: Vec<Op>, defer: bool) -> Result<Ticket> {
        self.submit_inner(ops, false, true, false, defer)
    }

    /// [`submit`](Self::submit), but leaves the writer asleep: the caller promises to call
    /// [`wake_writer`](Self::wake_writer) soon (an event loop does it before it blocks), so
    /// the submits of one loop pass go into one batch and the writer is woken once for
    /// them instead of once for the first (which would then be written alone).
    pub fn submit_deferred(&self, ops: Vec<Op>, sync: bool) -> Result<Ticket> {
        self.submit_inner(ops, sync, sync, false, true)
    }

    /// Wakes the writer if a deferred submit left it asleep with work due. Lock-free: the
    /// submit saw the writer waiting under the state lock, and `writer_cv.wait` releases
    /// that lock only once the writer waits, so the notification reaches it (or it is
    /// already awake, and finds the queued work when it looks under the lock).
    pub fn wake_writer(&self) {
        let inner = &*self.inner;
        if inner.wake_deferred.swap(false, Ordering::AcqRel) {
            inner.writer_cv.notify_one();
        }
    }

    /// `will_wait`: the caller waits right away and writes a due batch itself if the
    /// writer role is free, so the writer thread need not be woken for a sync submit.
    fn submit_inner(
        &self,
        ops: Vec<Op>,
        sync: bool,
        flush: bool,
        will_wait: bool,
        defer: bool,
    ) -> Result<Ticket> {
        let bytes: usize = ops.iter().map(format::op_len).sum();
        let max = self.inner.cfg.max_body;
        if bytes > max {
            return Err(Error::RecordTooLarge { size: bytes, max });
        }
        let inner = &*self.inner;
        let mut st = inner.state();
        if let Some(f) = &st.failed {
            return Err(Error::Failed(f.clone()));
        }
        if st.closing {
            return Err(Error::Closed);
        }
        st.logical.apply_all(&ops)?;
        st.last_ticket += 1;
        let ticket = st.last_ticket;
        let was_empty = st.queue.is_empty();
        if was_empty && !flush {
            st.first_queued = Some(Instant::now());
        }
        st.queue.push_back(Submit {
            ticket,
            ops,
            sync,
            flush,
            bytes,
        });
        st.queue_bytes += bytes;
        if flush {
            st.queue_flushes += 1;
        }
        // Wake the writer only when that changes what it waits for.
        let wake = if flush {
            !will_wait
        } else {
            was_empty || st.queue_bytes >= inner.cfg.buffer_size
        };
        if st.writer_waiting && wake && defer {
            inner.wake_deferred.store(true, Ordering::Release);
        } else if st.writer_waiting && wake {
            st.writer_waiting = false;
            // Notify after unlocking: the writer waits inside `writer_cv.wait` (it set
            // `writer_waiting` under this lock), so the wake-up cannot be lost, and woken
            // while we still held the lock it would block on it at once (two more futex
            // calls and a context switch per wake-up, seen in syscall traces).
            drop(st);
            inner.writer_cv.notify_one();
        }
        Ok(ticket)
    }

    /// Blocks until `ticket` is durable (sync) or written (non-sync), or fails with the
    /// error that stopped the writer.
    ///
    /// While it waits, the calling thread takes the writer role when it is free and a
    /// batch is due, and writes that batch itself (see `writer`).
    pub fn wait(&self, ticket: Ticket) -> Result<()> {
        let inner = &*self.inner;
        loop {
            if inner.completed.load(Ordering::Acquire) >= ticket {
                return Ok(());
            }
            let role = match inner.writer.try_lock() {
                Ok(w) => Some(w),
                Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
                Err(TryLockError::WouldBlock) => None,
            };
            if let Some(mut w) = role {
                match w.step(inner, Role::Helper) {
                    Ok(true) => continue,
                    Ok(false) => {}
                    Err(e) => {
                        drop(w);
                        inner.fail(e);
                    }
                }
            } else {
                // Someone else is writing: make sure what is due gets written after it.
                let mut st = inner.state();
                if st.writer_waiting
                    && matches!(writer::due(&st, &inner.cfg, Role::Helper), writer::Due::Now)
                {
                    st.writer_waiting = false;
                    inner.writer_cv.notify_one();
                }
            }
            let mut d = lock(&inner.done);
            if inner.completed.load(Ordering::Acquire) >= ticket {
                return Ok(());
            }
            if let Some(f) = &d.failed {
                return Err(Error::Failed(f.clone()));
            }
            if d.stopped {
                return Err(Error::Closed);
            }
            d.sleepers += 1;
            d = inner
                .done_cv
                .wait(d)
                .unwrap_or_else(PoisonError::into_inner);
            d.sleepers -= 1;
        }
    }

    /// [`submit`](Self::submit) + [`wait`](Self::wait).
    pub fn append(&self, ops: Vec<Op>, sync: bool) -> Result<()> {
        let t = self.submit_inner(ops, sync, sync, true, false)?;
        self.wait(t)
    }

    /// Highest completed ticket and the failure, if the writer failed.
    pub fn progress(&self) -> Progress {
        let d = lock(&self.inner.done);
        Progress {
            completed: self.inner.completed.load(Ordering::Acquire),
            failed: d.failed.clone(),
        }
    }

    /// Called by the writer thread after every batch completes or fails. Must be cheap and
    /// must not call back into the journal.
    pub fn set_completion_listener(&self, listener: Box<dyn Fn() + Send + Sync>) {
        *lock(&self.inner.listener) = Some(Arc::from(listener));
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
            batches: c.batches.load(Ordering::Relaxed),
            syncs: c.syncs.load(Ordering::Relaxed),
            records_written: c.records.load(Ordering::Relaxed),
            bytes_written: c.bytes.load(Ordering::Relaxed),
            compactions: c.compactions.load(Ordering::Relaxed),
        }
    }

    /// Flushes what is queued, stops the threads, syncs, releases the files. Idempotent;
    /// returns `Failed` if the journal had failed.
    pub fn close(&self) -> Result<()> {
        let inner = &*self.inner;
        let mut closed = lock(&inner.closed);
        if !*closed {
            {
                let mut st = inner.state();
                st.closing = true;
            }
            inner.abort_compaction.store(true, Ordering::Relaxed);
            inner.writer_cv.notify_all();
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
            lock(&inner.done).stopped = true;
            inner.done_cv.notify_all();
            inner.notify_listener();
            *closed = true;
        }
        match &inner.state().failed {
            Some(f) => Err(Error::Failed(f.clone())),
            None => Ok(()),
        }
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        let _ = self.close();
    }
}
