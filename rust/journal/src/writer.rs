//! The writer thread: natural group commit (Artemis's TimedBuffer idea).
//!
//! Theory of operation:
//! - Submits queue up while the writer is busy; when it comes back it takes everything
//!   queued (up to `buffer_size` bytes, and what fits in the current file) as one batch:
//!   one `pwrite` of a buffer built in place, then one `fdatasync` if any submit in it asked
//!   for sync (and `datasync` is on). The bigger the load, the bigger the batches.
//! - If only non-sync submits are queued, the writer waits up to `buffer_timeout` (or until
//!   `buffer_size` bytes) for company, then writes without `fdatasync`.
//! - Tickets complete in order, after their batch is durable (sync) or written (non-sync);
//!   waiters are woken with one `notify_all` per batch.
//! - Every batch header carries `durable_through`, the highest batch sequence known to be
//!   fdatasynced when it was written; recovery uses it to tell a torn tail from corruption.
//!   Before moving to the next file the writer syncs the current one, so a batch in a later
//!   file being durable implies every earlier batch is.
//! - After a batch the writer applies its ops to the physical index (locations, live counts,
//!   dependencies) and pokes the housekeeper when a file may have become reclaimable.
//! - On any I/O error the journal fails: the batch's waiters and everyone after get
//!   `Failed`, and nothing is written again until reopened, so it cannot corrupt itself.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use crate::files::{self, io_err, DataFile, FreeFile};
use crate::format::{BatchBuilder, FileHeader, Kind, RecordRef, FILE_HEADER_LEN, FLAG_DATA};
use crate::fs::JournalFile;
use crate::index::{FileId, Loc};
use crate::journal::{Inner, Submit};
use crate::{Result, Ticket};

/// How long the writer spins for the next submit before sleeping, after a sync batch
/// (a waiter that was just woken usually submits again within a few microseconds).
const SPIN: Duration = Duration::from_micros(40);

pub(crate) struct Writer {
    inner: Arc<Inner>,
    cur_id: FileId,
    cur_path: PathBuf,
    cur: Arc<dyn JournalFile>,
    offset: u64,
    /// The current file is still free on disk: its DATA header goes out with the next batch.
    needs_stamp: bool,
    next_seq: u64,
    durable_through: u64,
    /// Something was written to the current file since its last fdatasync.
    unsynced: bool,
    builder: BatchBuilder,
    batch: Vec<Submit>,
    locs: Vec<Loc>,
    last_taken: Ticket,
    spin: bool,
}

enum Next {
    Batch,
    Exit,
}

impl Writer {
    pub(crate) fn new(
        inner: Arc<Inner>,
        cur: DataFile,
        offset: u64,
        needs_stamp: bool,
        next_seq: u64,
        durable_through: u64,
    ) -> Writer {
        Writer {
            inner,
            cur_id: cur.id,
            cur_path: cur.path,
            cur: cur.handle,
            offset,
            needs_stamp,
            next_seq,
            durable_through,
            unsynced: false,
            builder: BatchBuilder::default(),
            batch: Vec::new(),
            locs: Vec::new(),
            last_taken: 0,
            spin: false,
        }
    }

    pub(crate) fn run(mut self) {
        loop {
            let step = self.next_batch().and_then(|n| match n {
                Next::Batch => self.write_batch().map(|_| true),
                Next::Exit => Ok(false),
            });
            match step {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    self.inner.fail(e);
                    return;
                }
            }
        }
        // Closing (or failed elsewhere): make what was written durable.
        if self.inner.state().failed.is_none() && self.unsynced {
            if let Err(e) = files::sync_file(&self.inner.cfg, &*self.cur, &self.cur_path) {
                self.inner.fail(e);
            }
        }
    }

    /// Waits for work and takes the next batch into `self.batch`.
    fn next_batch(&mut self) -> Result<Next> {
        let inner = self.inner.clone();
        let cfg = &inner.cfg;
        let mut st = inner.state();
        loop {
            if st.failed.is_some() {
                return Ok(Next::Exit);
            }
            if let Some(first) = st.queue.front() {
                if st.queue_syncs > 0 || st.queue_bytes >= cfg.buffer_size || st.closing {
                    // Write now.
                } else {
                    let deadline =
                        st.first_queued.unwrap_or_else(Instant::now) + cfg.buffer_timeout;
                    let now = Instant::now();
                    if now < deadline {
                        st.writer_waiting = true;
                        st = inner
                            .writer_cv
                            .wait_timeout(st, deadline - now)
                            .unwrap_or_else(PoisonError::into_inner)
                            .0;
                        st.writer_waiting = false;
                        continue;
                    }
                }
                // Records never span files: move on if the first submit does not fit.
                let need = crate::format::batch_len(first.bytes) as u64;
                if self.offset + need > cfg.file_size {
                    drop(st);
                    self.rollover()?;
                    st = inner.state();
                    continue;
                }
                break;
            }
            if st.closing {
                return Ok(Next::Exit);
            }
            if self.spin {
                self.spin = false;
                drop(st);
                let start = Instant::now();
                while inner.submitted.load(Ordering::Acquire) == self.last_taken
                    && start.elapsed() < SPIN
                {
                    std::hint::spin_loop();
                }
                st = inner.state();
                continue;
            }
            st.writer_waiting = true;
            st = inner
                .writer_cv
                .wait(st)
                .unwrap_or_else(PoisonError::into_inner);
            st.writer_waiting = false;
        }
        // Take whole submits up to the buffer size and what is left in the file.
        let room = (cfg.file_size - self.offset) as usize - crate::format::BATCH_HEADER_LEN;
        let limit = cfg.buffer_size.min(room);
        let mut body = 0;
        while let Some(s) = st.queue.front() {
            if !self.batch.is_empty()
                && (body + s.bytes > limit
                    || crate::format::batch_len(body + s.bytes) as u64
                        > cfg.file_size - self.offset)
            {
                break;
            }
            let s = st.queue.pop_front().expect("front exists");
            body += s.bytes;
            st.queue_bytes -= s.bytes;
            if s.sync {
                st.queue_syncs -= 1;
            }
            self.batch.push(s);
        }
        st.first_queued = if st.queue.is_empty() {
            None
        } else {
            Some(Instant::now())
        };
        self.last_taken = self.batch.last().map_or(self.last_taken, |s| s.ticket);
        Ok(Next::Batch)
    }

    /// Switches to the next file: sync the current one, take a free file (or make one).
    fn rollover(&mut self) -> Result<()> {
        let inner = self.inner.clone();
        let cfg = &inner.cfg;
        if self.unsynced && cfg.datasync {
            self.cur
                .sync_data()
                .map_err(io_err("fdatasync", &self.cur_path))?;
            inner.counters.syncs.fetch_add(1, Ordering::Relaxed);
            self.durable_through = self.next_seq - 1;
        }
        self.unsynced = false;
        let popped = inner.state().pool.pop_first().map(|(_, f)| f);
        let mut free: FreeFile = match popped {
            Some(f) => f,
            None => files::create_free_file(cfg, &*inner.fs, inner.new_file_id())?,
        };
        let handle = inner
            .fs
            .open(&free.path)
            .map_err(io_err("open", &free.path))?;
        // Replay orders files by id, so the next file must have a higher id than this one.
        if free.id <= self.cur_id {
            free = files::stamp_free(cfg, &*inner.fs, &*handle, &free.path, inner.new_file_id())?;
        }
        let f = DataFile {
            id: free.id,
            path: free.path,
            handle,
            compacted: false,
            busy: false,
        };
        {
            let mut st = inner.state();
            st.files.insert(f.id, f.clone());
            st.index.add_file(f.id);
            st.current = f.id;
            inner.poke_housekeeper(&mut st);
        }
        self.cur_id = f.id;
        self.cur_path = f.path;
        self.cur = f.handle;
        self.offset = FILE_HEADER_LEN as u64;
        self.needs_stamp = true;
        Ok(())
    }

    fn write_batch(&mut self) -> Result<()> {
        let inner = self.inner.clone();
        let cfg = &inner.cfg;
        let sync = self.batch.iter().any(|s| s.sync);
        let last_ticket = self.batch.last().map_or(0, |s| s.ticket);
        let header = FileHeader {
            file_id: self.cur_id,
            flags: FLAG_DATA,
            first_seq: self.next_seq,
            durable_through: self.durable_through,
            data_end: 0,
        };
        let stamp = self.needs_stamp.then_some(&header);
        self.builder.begin(self.cur_id, stamp);
        self.locs.clear();
        let mut kills = false;
        for s in &self.batch {
            for op in &s.ops {
                let r = RecordRef::from_op(op);
                kills |= matches!(r.kind, Kind::Delete | Kind::Commit | Kind::Rollback);
                self.locs.push(Loc {
                    file: self.cur_id,
                    offset: (self.offset + self.builder.next_offset() as u64) as u32,
                    len: r.encoded_len() as u32,
                });
                self.builder.push(&r);
            }
        }
        if !self.builder.is_empty() {
            let seq = self.next_seq;
            self.builder.finish(self.cur_id, seq, self.durable_through);
            let at = if self.needs_stamp { 0 } else { self.offset };
            self.cur
                .write_all_at(&self.builder.buf, at)
                .map_err(io_err("write", &self.cur_path))?;
            self.offset += self.builder.batch_len() as u64;
            self.next_seq += 1;
            self.needs_stamp = false;
            self.unsynced = true;
            inner.counters.batches.fetch_add(1, Ordering::Relaxed);
            inner
                .counters
                .records
                .fetch_add(self.locs.len() as u64, Ordering::Relaxed);
            inner
                .counters
                .bytes
                .fetch_add(self.builder.buf.len() as u64, Ordering::Relaxed);
        }
        if sync && self.unsynced && cfg.datasync {
            self.cur
                .sync_data()
                .map_err(io_err("fdatasync", &self.cur_path))?;
            inner.counters.syncs.fetch_add(1, Ordering::Relaxed);
            self.durable_through = self.next_seq - 1;
            self.unsynced = false;
        }
        {
            let mut st = inner.state();
            let mut locs = self.locs.iter();
            for s in &self.batch {
                for op in &s.ops {
                    if let Some(&loc) = locs.next() {
                        st.index.apply(&RecordRef::from_op(op), loc);
                    }
                }
            }
            if kills && st.reclaimable().is_some() {
                inner.poke_housekeeper(&mut st);
            }
        }
        inner.complete(last_ticket);
        self.spin = sync;
        // Payloads are freed here, outside every lock.
        self.batch.clear();
        Ok(())
    }
}
