//! Replication (Artemis's shared-nothing HA): the primary streams every submit to a
//! backup, which submits the same ops to its own journal. This module is the journal's
//! half of it; the bindings' caller moves the bytes (files once, then frames) over TCP.
//!
//! Theory of operation:
//! - **Start** ([`Journal::replication_start`]), under the compaction lock (a running
//!   compaction finishes first) and holding the writer role: under the state lock the tap
//!   goes on and `through` is the last ticket issued, so every later submit is encoded into
//!   the tap as one frame, in ticket order. Then every queued submit up to `through` is
//!   written at once (`Role::Drain`, nothing after `through`), and the writer moves on to a
//!   fresh file if it wrote anything to the current one. So no submit after `through` lands
//!   in a file that existed at the start, and the files listed (every data file but the
//!   fresh current one) hold exactly the records through `through`.
//! - While the tap is on, nothing modifies a listed file: the writer only appends to newer
//!   files, and reclaim and compaction pause (`State::reclaimable`, `should_compact`, and a
//!   compaction asked for does nothing); pre-allocation goes on. The caller copies the files
//!   byte for byte; a journal opened on the copies recovers the state at `through`, and its
//!   own new files get ids above every copied one (recovery allocates above the highest id
//!   it saw), so they never clash. The directory holds nothing else recovery needs: the
//!   compaction control file exists only while a compaction runs, and none does.
//! - **Open transactions**: a journal opened on the copies rolls back every transaction
//!   neither prepared nor finished at `through` (as any recovery does), yet the primary may
//!   still commit it. So the first frame handed out re-adds the written ops of those
//!   transactions (read back from the files), with ticket `through`: applied right after
//!   the backup's open, it leaves each such transaction open again, as on the primary.
//! - **Take** ([`Journal::replication_take`]): the frames encoded since the last take (none
//!   until the start has finished, so the re-add frame comes first).
//! - **Gate** ([`Journal::replication_gate`], [`Journal::replicated`]): while on, tickets
//!   complete only once written *and* replicated (see `wal::completion`).
//! - **Backup** ([`Journal::apply_replicated`]): verifies every frame, then submits each
//!   frame's ops as the primary did (same sync and flush flags).
//!
//! Replication stream, all integers little endian:
//!
//! ```text
//! frame = magic u32 (0x4A525041, "APRJ") | length u32 (bytes after it, CRC included)
//!         | ticket u64 (the primary's) | flags u8 (bit 0 sync, bit 1 flush)
//!         | op_count u32 | record* | crc32c u32 (of ticket .. the last record)
//! ```
//!
//! Each op is one record in the data files' record encoding (`format`: len, kind,
//! `record_type`, id, tx id, payload, and its own CRC with seed 0).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use wal::{read_exact_at, StoreFile, Ticket};

use crate::files::io_err;
use crate::format::{self, decode_record, encode_record, Kind, RecordRef};
use crate::index::{FileId, Loc};
use crate::journal::{lock, Inner};
use crate::writer::{Role, WriterCore};
use crate::{Error, Journal, Op, Result};

/// A frame's first four bytes.
pub const FRAME_MAGIC: u32 = 0x4A52_5041;
/// The magic and the length field.
const FRAME_PREFIX: usize = 8;
/// Ticket, flags, op count and CRC: the smallest `length`.
const FRAME_FIXED: usize = 8 + 1 + 4 + 4;
const FLAG_SYNC: u8 = 1;
const FLAG_FLUSH: u8 = 2;
/// The seed of the records' own CRCs in a frame (they belong to no file).
const RECORD_SEED: u32 = 0;

/// What [`Journal::replication_start`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicationStart {
    /// Every data file holding records, in file-id order (absolute paths): copied byte for
    /// byte into the backup's journal directory once `through` is complete.
    pub files: Vec<PathBuf>,
    /// The ticket of the last submit before the tap started (0 if none).
    pub through: Ticket,
}

/// What [`Journal::replication_state`] returns (for metrics).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicationState {
    /// The tap is on (between start and stop).
    pub active: bool,
    /// The completion gate is on.
    pub gate: bool,
    /// `through` of the running replication (0 when not active).
    pub through: Ticket,
    /// Highest ticket the backup reported durable.
    pub replicated_through: Ticket,
    /// Bytes of frames waiting for the next take.
    pub pending_bytes: usize,
}

/// One decoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub ticket: Ticket,
    pub sync: bool,
    pub flush: bool,
    pub ops: Vec<Op>,
}

/// The tap: frames encoded since the last take (in `State::repl`).
#[derive(Debug, Default)]
pub(crate) struct Tap {
    buf: Vec<u8>,
    /// The start has finished: takes may hand out frames.
    ready: bool,
    through: Ticket,
}

impl Tap {
    /// Encodes one submit (`body`: the encoded size of its ops, already computed).
    pub(crate) fn push(
        &mut self,
        ticket: Ticket,
        sync: bool,
        flush: bool,
        ops: &[Op],
        body: usize,
    ) {
        encode_frame(&mut self.buf, ticket, sync, flush, ops, body);
    }
}

/// Appends one frame; `body` is the encoded size of `ops` (`format::op_len` summed).
pub fn encode_frame(
    buf: &mut Vec<u8>,
    ticket: Ticket,
    sync: bool,
    flush: bool,
    ops: &[Op],
    body: usize,
) {
    let len = FRAME_FIXED + body;
    buf.reserve(FRAME_PREFIX + len);
    buf.extend_from_slice(&FRAME_MAGIC.to_le_bytes());
    buf.extend_from_slice(&(len as u32).to_le_bytes());
    let start = buf.len();
    buf.extend_from_slice(&ticket.to_le_bytes());
    buf.push((u8::from(sync) * FLAG_SYNC) | (u8::from(flush) * FLAG_FLUSH));
    buf.extend_from_slice(&(ops.len() as u32).to_le_bytes());
    for op in ops {
        encode_record(buf, RECORD_SEED, &RecordRef::from_op(op));
    }
    let crc = crc32c::crc32c(&buf[start..]);
    buf.extend_from_slice(&crc.to_le_bytes());
}

/// Decodes a concatenation of whole frames, verifying each; the error names the frame,
/// its offset and what is wrong.
pub fn decode_frames(b: &[u8]) -> Result<Vec<Frame>> {
    let mut frames = Vec::new();
    let mut at = 0;
    while at < b.len() {
        let (frame, len) = decode_frame(&b[at..]).map_err(|reason| {
            Error::Replication(format!(
                "corrupt frame {} at offset {at} of {}: {reason}",
                frames.len(),
                b.len()
            ))
        })?;
        frames.push(frame);
        at += len;
    }
    Ok(frames)
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    wal::le::u32_at(b, at)
}

/// The frame at the start of `b` and its length.
fn decode_frame(b: &[u8]) -> std::result::Result<(Frame, usize), String> {
    if b.len() < FRAME_PREFIX {
        return Err(format!(
            "truncated: {} bytes, a frame header takes 8",
            b.len()
        ));
    }
    let magic = le_u32(b, 0);
    if magic != FRAME_MAGIC {
        return Err(format!(
            "bad magic {magic:#010x}, expected {FRAME_MAGIC:#010x}"
        ));
    }
    let len = le_u32(b, 4) as usize;
    if len < FRAME_FIXED {
        return Err(format!(
            "length {len} is below the minimum of {FRAME_FIXED}"
        ));
    }
    if len > b.len() - FRAME_PREFIX {
        let left = b.len() - FRAME_PREFIX;
        return Err(format!("truncated: length {len}, only {left} bytes follow"));
    }
    let body = &b[FRAME_PREFIX..FRAME_PREFIX + len];
    let expected = le_u32(body, len - 4);
    let got = crc32c::crc32c(&body[..len - 4]);
    if expected != got {
        return Err(format!(
            "checksum mismatch: expected {expected:#010x}, got {got:#010x}"
        ));
    }
    let ticket = wal::le::u64_at(body, 0);
    let flags = body[8];
    if flags & !(FLAG_SYNC | FLAG_FLUSH) != 0 {
        return Err(format!("unknown flags {flags:#04x}"));
    }
    let count = le_u32(body, 9) as usize;
    let mut ops = Vec::with_capacity(count.min(len / format::RECORD_FIXED_LEN));
    let records = &body[13..len - 4];
    let mut pos = 0;
    while pos < records.len() {
        let n = ops.len();
        let rest = &records[pos..];
        if rest.len() > 4 && Kind::from_u8(rest[4]).is_none() {
            return Err(format!("op {n}: unknown op tag {}", rest[4]));
        }
        let (r, rlen, _) = decode_record(rest, RECORD_SEED).map_err(|e| format!("op {n}: {e}"))?;
        ops.push(r.to_op());
        pos += rlen;
    }
    if ops.len() != count {
        return Err(format!("holds {} ops, header says {count}", ops.len()));
    }
    let frame = Frame {
        ticket,
        sync: flags & FLAG_SYNC != 0,
        flush: flags & FLAG_FLUSH != 0,
        ops,
    };
    Ok((frame, FRAME_PREFIX + len))
}

impl Journal {
    /// Starts replication: turns the tap on, writes everything submitted so far, moves the
    /// writer to a fresh file and pauses reclaim and compaction (see the module docs).
    /// Blocks while a compaction runs and while it writes. Fails if already started.
    pub fn replication_start(&self) -> Result<ReplicationStart> {
        let inner = &*self.inner;
        let _serial = lock(&inner.compaction);
        let mut w = lock(&inner.writer);
        let through = {
            let mut st = inner.state();
            if let Some(f) = inner.group.completion.failure() {
                return Err(Error::Failed(f));
            }
            if st.writing.closing {
                return Err(Error::Closed);
            }
            if st.repl.is_some() {
                return Err(Error::Replication("replication already started".into()));
            }
            let through = st.writing.last_ticket;
            st.repl = Some(Tap {
                through,
                ..Tap::default()
            });
            through
        };
        let started = start(inner, &mut w, through);
        if started.is_err() {
            inner.state().repl = None;
        }
        started
    }

    /// The frames encoded since the last take, concatenated (empty if none). Never blocks
    /// on I/O.
    pub fn replication_take(&self) -> Vec<u8> {
        match &mut self.inner.state().repl {
            Some(tap) if tap.ready => std::mem::take(&mut tap.buf),
            _ => Vec::new(),
        }
    }

    /// Switches the completion gate on or off (on while on keeps the first `from`).
    pub fn replication_gate(&self, on: bool) {
        let inner = &*self.inner;
        let st = inner.state();
        let completion = &inner.group.completion;
        if on && completion.gate().0 {
            return;
        }
        completion.set_gate(on.then_some(st.writing.last_ticket));
    }

    /// The backup has everything through `ticket` durably.
    pub fn replicated(&self, ticket: Ticket) {
        self.inner.group.completion.replicated(ticket);
    }

    /// Tap off (pending frames dropped), gate off, reclaim and compaction resume.
    /// Idempotent.
    pub fn replication_stop(&self) {
        let inner = &*self.inner;
        let mut st = inner.state();
        let was = st.repl.take().is_some();
        inner.group.completion.set_gate(None);
        if was {
            inner.poke_housekeeper(&mut st);
        }
    }

    pub fn replication_state(&self) -> ReplicationState {
        let inner = &*self.inner;
        let st = inner.state();
        let (gate, replicated_through) = inner.group.completion.gate();
        let tap = st.repl.as_ref();
        ReplicationState {
            active: tap.is_some(),
            gate,
            through: tap.map_or(0, |t| t.through),
            replicated_through,
            pending_bytes: tap.map_or(0, |t| t.buf.len()),
        }
    }

    /// Backup side: verifies every frame in `frames` (whole frames from
    /// [`replication_take`](Self::replication_take)), then submits each one's ops as the
    /// primary did (same sync and flush flags, not deferred), in order. Returns the
    /// primary's ticket of the last frame and the local ticket of its submit (`(0, 0)` for
    /// no frames).
    ///
    /// A corrupt or truncated frame anywhere fails the call before anything is applied. A
    /// frame the local journal refuses (say, an update of a record it does not have) fails
    /// it with the frames before that one applied and nothing of that one.
    pub fn apply_replicated(&self, frames: &[u8]) -> Result<(Ticket, Ticket)> {
        let mut last = (0, 0);
        for (n, f) in decode_frames(frames)?.into_iter().enumerate() {
            let local = if f.sync {
                self.submit(f.ops, true)
            } else if f.flush {
                self.submit_flushed(f.ops, false)
            } else {
                self.submit(f.ops, false)
            };
            last = (f.ticket, local.map_err(|e| refused(e, n, f.ticket))?);
        }
        Ok(last)
    }
}

/// A frame the backup's journal refused: its validation errors name the frame.
fn refused(e: Error, n: usize, ticket: Ticket) -> Error {
    match e {
        Error::RecordNotFound { .. }
        | Error::DuplicateRecord { .. }
        | Error::Transaction { .. }
        | Error::RecordTooLarge { .. } => Error::Replication(format!(
            "frame {n} (primary ticket {ticket}) refused by this journal: {e}"
        )),
        e => e,
    }
}

/// The part of the start that holds the writer role (see the module docs).
fn start(inner: &Inner, w: &mut WriterCore, through: Ticket) -> Result<ReplicationStart> {
    let written = (|| {
        while w.step(inner, Role::Drain(through))? {}
        w.roll_if_used(inner)
    })();
    if let Err(e) = written {
        return Err(Error::Failed(inner.fail(e)));
    }
    if let Some(f) = inner.group.completion.failure() {
        return Err(Error::Failed(f));
    }
    let reopen = open_transactions(inner)?;
    let files = {
        let st = inner.state();
        st.files
            .values()
            .filter(|f| f.id != st.current)
            .map(|f| f.path.clone())
            .collect::<Vec<_>>()
    };
    let files = files.iter().map(|p| absolute(p)).collect::<Result<_>>()?;
    let mut st = inner.state();
    let Some(tap) = st.repl.as_mut() else {
        return Err(Error::Closed);
    };
    if !reopen.is_empty() {
        let body = reopen.iter().map(format::op_len).sum();
        let mut first = Vec::new();
        encode_frame(&mut first, through, true, true, &reopen, body);
        first.append(&mut tap.buf);
        tap.buf = first;
    }
    tap.ready = true;
    Ok(ReplicationStart { files, through })
}

fn absolute(p: &Path) -> Result<PathBuf> {
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    let cwd = std::env::current_dir().map_err(io_err("current directory", p))?;
    Ok(cwd.join(p))
}

/// The written ops of every transaction neither prepared nor finished, read back from the
/// files (transactions by id, each one's ops in order).
fn open_transactions(inner: &Inner) -> Result<Vec<Op>> {
    type Source = (Arc<dyn StoreFile>, PathBuf);
    let (mut txs, files) = {
        let st = inner.state();
        let txs: Vec<(u64, Vec<Loc>)> = st
            .index
            .txs
            .iter()
            .filter(|(_, t)| t.prepare.is_none() && !t.ops.is_empty())
            .map(|(&id, t)| (id, t.ops.iter().map(|o| o.loc).collect()))
            .collect();
        let files: HashMap<FileId, Source> = st
            .files
            .values()
            .map(|f| (f.id, (f.handle.clone(), f.path.clone())))
            .collect();
        (txs, files)
    };
    txs.sort_unstable_by_key(|t| t.0);
    let mut ops = Vec::new();
    let mut buf = Vec::new();
    for loc in txs.iter().flat_map(|t| &t.1) {
        let Some((handle, path)) = files.get(&loc.file) else {
            return Err(Error::Replication(format!(
                "file {} of an open transaction is gone",
                loc.file
            )));
        };
        buf.resize(loc.len as usize, 0);
        read_exact_at(&**handle, &mut buf, u64::from(loc.offset)).map_err(io_err("read", path))?;
        let (r, _, _) = decode_record(&buf, format::seed(loc.file)).map_err(|reason| {
            Error::Corrupted(wal::Corruption {
                path: path.clone(),
                offset: u64::from(loc.offset),
                reason,
            })
        })?;
        ops.push(r.to_op());
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops() -> Vec<Op> {
        vec![
            Op::Add {
                id: 1,
                record_type: 7,
                payload: b"hello".to_vec(),
            },
            Op::Update {
                id: 1,
                record_type: 8,
                payload: vec![],
            },
            Op::Delete { id: 3 },
            Op::AddTx {
                tx_id: 9,
                id: 4,
                record_type: 1,
                payload: vec![5; 300],
            },
            Op::UpdateTx {
                tx_id: 9,
                id: 4,
                record_type: 2,
                payload: b"x".to_vec(),
            },
            Op::DeleteTx { tx_id: 9, id: 5 },
            Op::Prepare {
                tx_id: 9,
                xid: b"xid".to_vec(),
            },
            Op::Commit { tx_id: 9 },
            Op::Rollback { tx_id: 10 },
        ]
    }

    fn frame(ticket: Ticket, sync: bool, flush: bool, ops: &[Op]) -> Vec<u8> {
        let mut b = Vec::new();
        let body = ops.iter().map(format::op_len).sum();
        encode_frame(&mut b, ticket, sync, flush, ops, body);
        b
    }

    #[test]
    fn frames_round_trip() {
        let mut b = frame(7, true, true, &ops());
        b.extend(frame(8, false, true, &[]));
        b.extend(frame(u64::MAX, false, false, &ops()[..1]));
        let got = decode_frames(&b).unwrap();
        let want = vec![
            Frame {
                ticket: 7,
                sync: true,
                flush: true,
                ops: ops(),
            },
            Frame {
                ticket: 8,
                sync: false,
                flush: true,
                ops: vec![],
            },
            Frame {
                ticket: u64::MAX,
                sync: false,
                flush: false,
                ops: ops()[..1].to_vec(),
            },
        ];
        assert_eq!(got, want);
        assert_eq!(decode_frames(&[]).unwrap(), vec![]);
    }

    fn error(b: &[u8]) -> String {
        match decode_frames(b) {
            Err(Error::Replication(m)) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_flipped_byte_and_every_cut_is_refused() {
        let b = frame(3, true, false, &ops());
        for i in 0..b.len() {
            let mut c = b.clone();
            c[i] ^= 0x40;
            assert!(decode_frames(&c).is_err(), "byte {i}");
        }
        for cut in 1..b.len() {
            assert!(error(&b[..cut]).contains("truncated"), "cut {cut}");
        }
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let b = frame(3, false, false, &ops());
        let mut c = b.clone();
        c[0] ^= 1;
        assert!(error(&c).contains("bad magic"));
        let mut c = b.clone();
        c[20] ^= 1;
        let m = error(&c);
        assert!(m.contains("checksum mismatch: expected 0x"), "{m}");
        assert!(m.contains("frame 0 at offset 0"), "{m}");
        let mut two = b.clone();
        two.extend(&c);
        assert!(error(&two).contains(&format!("frame 1 at offset {}", b.len())));
        // An unknown op tag with a valid frame checksum (a primary from the future).
        let mut c = b.clone();
        c[FRAME_PREFIX + 13 + 4] = 99;
        let end = c.len() - 4;
        let crc = crc32c::crc32c(&c[FRAME_PREFIX..end]);
        c[end..].copy_from_slice(&crc.to_le_bytes());
        assert!(error(&c).contains("op 0: unknown op tag 99"));
    }
}
