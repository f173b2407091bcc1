//! Writing batches: natural group commit (Artemis's `TimedBuffer` idea).
//!
//! Theory of operation:
//! - Submits queue up while a batch is being written; the next batch takes everything
//!   queued (up to `buffer_size` bytes, and what fits in the current file): one `pwrite` of
//!   a buffer built in place, then one `fdatasync` if any submit in it asked for sync (and
//!   `datasync` is on). The bigger the load, the bigger the batches.
//! - If only non-sync submits are queued, they wait up to `buffer_timeout` (or until
//!   `buffer_size` bytes) for company, then are written without `fdatasync`; a *flushed*
//!   non-sync submit is written at once, like a sync one, but not synced.
//! - The writer state ([`WriterCore`]) sits behind a mutex: holding it is the writer role,
//!   so there is exactly one writer at any time. The dedicated writer thread takes it when
//!   work is due (plain `submit`, buffer timeouts, closing). A thread blocked in `wait` or
//!   `append` whose ticket needs a sync batch takes the role itself when it is free and
//!   writes the next batch (with everyone else's queued submits): a lone synchronous writer
//!   then pays no thread hand-off on top of `pwrite` + `fdatasync`.
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
use std::sync::Arc;
use std::time::Instant;

use wal::writer::{Due, Locked};
use wal::{StoreFile, Ticket};

use crate::files::{self, io_err, DataFile, FreeFile};
use crate::format::{
    batch_len, BatchBuilder, FileHeader, Kind, RecordRef, BATCH_HEADER_LEN, FILE_HEADER_LEN,
    FLAG_DATA,
};
use crate::index::{FileId, Loc};
use crate::journal::{Inner, State, Submit};
use crate::Result;

/// Everything the writer role owns.
pub(crate) struct WriterCore {
    cur_id: FileId,
    cur_path: PathBuf,
    cur: Arc<dyn StoreFile>,
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
}

/// Who is asking to write.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// The writer thread: also writes non-sync submits whose buffer timeout expired.
    Thread,
    /// A waiting caller: writes only what is due now (sync submits, a full buffer, closing).
    Helper,
    /// `replication_start`: writes every queued submit up to this ticket at once, and
    /// nothing after it (see `replication`).
    Drain(Ticket),
}

/// Whether `role` may write what is queued.
pub(crate) fn due(st: &Locked<State>, inner: &Inner, role: Role) -> Due {
    let cfg = &inner.cfg;
    if st.queue.is_empty() || inner.group.completion.has_failed() {
        return Due::Nothing;
    }
    if let Role::Drain(through) = role {
        return match st.queue.front() {
            Some(s) if s.ticket <= through => Due::Now,
            _ => Due::Nothing,
        };
    }
    if st.queue_flushes > 0 || st.queue_bytes >= cfg.buffer_size || st.writing.closing {
        return Due::Now;
    }
    if role == Role::Helper {
        return Due::Nothing;
    }
    let at = st.first_queued.unwrap_or_else(Instant::now) + cfg.buffer_timeout;
    if Instant::now() >= at {
        Due::Now
    } else {
        Due::At(at)
    }
}

impl WriterCore {
    pub(crate) fn new(
        cur: DataFile,
        offset: u64,
        needs_stamp: bool,
        next_seq: u64,
        durable_through: u64,
    ) -> WriterCore {
        WriterCore {
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
        }
    }

    /// Writes one batch if `role` may write what is queued; `Ok(true)` if it did.
    pub(crate) fn step(&mut self, inner: &Inner, role: Role) -> Result<bool> {
        if !self.take(inner, role)? {
            return Ok(false);
        }
        self.write_batch(inner)?;
        Ok(true)
    }

    /// Makes everything written durable (at close).
    pub(crate) fn sync(&mut self, inner: &Inner) -> Result<()> {
        if self.unsynced {
            files::sync_file(&inner.cfg, &*self.cur, &self.cur_path)?;
            self.unsynced = false;
        }
        Ok(())
    }

    /// Moves on to a fresh file unless nothing was written to the current one yet, so
    /// that what is written from now on lands in files that did not exist before.
    pub(crate) fn roll_if_used(&mut self, inner: &Inner) -> Result<()> {
        if self.needs_stamp {
            return Ok(());
        }
        self.rollover(inner)
    }

    /// Takes the next batch into `self.batch`.
    fn take(&mut self, inner: &Inner, role: Role) -> Result<bool> {
        let cfg = &inner.cfg;
        let mut st = inner.state();
        loop {
            if !matches!(due(&st, inner, role), Due::Now) {
                return Ok(false);
            }
            // Records never span files: move on if the first submit does not fit.
            let first = st.queue.front().map_or(0, |s| s.bytes);
            if self.offset + batch_len(first) as u64 > cfg.file_size {
                drop(st);
                self.rollover(inner)?;
                st = inner.state();
                continue;
            }
            break;
        }
        // Whole submits, up to the buffer size and what is left in the file.
        let room = (cfg.file_size - self.offset) as usize - BATCH_HEADER_LEN;
        let limit = cfg.buffer_size.min(room);
        let mut body = 0;
        while let Some(s) = st.queue.front() {
            if !self.batch.is_empty() && body + s.bytes > limit {
                break;
            }
            if matches!(role, Role::Drain(through) if s.ticket > through) {
                break;
            }
            let Some(s) = st.queue.pop_front() else { break };
            body += s.bytes;
            st.queue_bytes -= s.bytes;
            if s.flush {
                st.queue_flushes -= 1;
            }
            self.batch.push(s);
        }
        st.first_queued = if st.queue.is_empty() {
            None
        } else {
            Some(Instant::now())
        };
        Ok(true)
    }

    /// `fdatasync`s what was written to the current file since its last sync, if anything:
    /// every batch written so far is durable then.
    fn sync_durable(&mut self, inner: &Inner) -> Result<()> {
        if self.unsynced {
            inner.counters.io.sync(&*self.cur, &self.cur_path)?;
            self.durable_through = self.next_seq - 1;
            self.unsynced = false;
        }
        Ok(())
    }

    /// Switches to the next file: sync the current one, take a free file (or make one).
    fn rollover(&mut self, inner: &Inner) -> Result<()> {
        let cfg = &inner.cfg;
        if cfg.datasync {
            self.sync_durable(inner)?;
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
        let f = DataFile::from_free(free, handle);
        {
            let mut st = inner.state();
            st.add_data_file(&f);
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

    fn write_batch(&mut self, inner: &Inner) -> Result<()> {
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
        self.builder
            .begin(self.cur_id, self.needs_stamp.then_some(&header));
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
            self.builder
                .finish(self.cur_id, self.next_seq, self.durable_through);
            let at = if self.needs_stamp { 0 } else { self.offset };
            let io = &inner.counters.io;
            io.write(&*self.cur, &self.cur_path, &self.builder.buf, at)?;
            io.count_records(self.locs.len() as u64);
            self.offset += self.builder.batch_len() as u64;
            self.next_seq += 1;
            self.needs_stamp = false;
            self.unsynced = true;
        }
        if sync && cfg.datasync {
            self.sync_durable(inner)?;
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
            if kills && (st.reclaimable().is_some() || crate::housekeeper::should_compact(&st, cfg))
            {
                inner.poke_housekeeper(&mut st);
            }
        }
        inner.group.completion.complete(last_ticket);
        // Payloads are freed here, outside every lock.
        self.batch.clear();
        Ok(())
    }
}
