//! On-disk format: file names, the file header, batches, records and the compaction
//! control file. Pure encoding and decoding; no I/O.
//!
//! ```text
//! file   = header(64) batch* (zeros | stale bytes)*
//! header = magic "AMQPYJNL" | version u32 | flags u32 | file_id u64 | first_seq u64
//!          | durable_through u64 | data_end u64 | reserved[12] | crc32c u32 (of bytes 0..60)
//! batch  = magic u32 | body_len u32 | file_id u64 | seq u64 | durable_through u64
//!          | record_count u32 | crc32c u32 | record* | zero padding to a multiple of 8
//! record = len u32 | kind u8 | record_type u8 | 0u16 | id u64 | [tx_id u64] | payload | crc32c u32
//! ```
//!
//! All integers are little endian. A record's CRC is `crc32c(file_id) ++ record[..len-4]`;
//! a batch's CRC is `crc32c(file_id) ++ header[..36] ++ the record CRCs`, so every payload byte
//! is checksummed once and both checksums depend on the file id: bytes left over from an
//! earlier use of a file (which had another id) can never validate.
//!
//! Long: the journal's whole on-disk format is declared in this one module, every record
//! type with its codec, so a reader finds it in one place; about 250 of its lines are the
//! unit tests that round-trip each part.

use crate::Op;

/// Length of the file header; batches start here.
pub(crate) const FILE_HEADER_LEN: usize = 64;
pub(crate) const FILE_MAGIC: [u8; 8] = *b"AMQPYJNL";
pub(crate) const FORMAT_VERSION: u32 = 1;
/// The file is in use (holds batches); without it the file is a free (pooled) file.
pub(crate) const FLAG_DATA: u32 = 1;
/// The file was written by compaction; replayed before the normal files.
pub(crate) const FLAG_COMPACTED: u32 = 2;

pub(crate) const BATCH_HEADER_LEN: usize = 40;
pub(crate) const BATCH_MAGIC: u32 = 0x4254_4A41; // "AJTB"
pub(crate) const BATCH_ALIGN: usize = 8;

/// len + kind + `record_type` + reserved + id + crc.
pub(crate) const RECORD_FIXED_LEN: usize = 20;
pub(crate) const TX_FIELD_LEN: usize = 8;

const CONTROL_MAGIC: [u8; 8] = *b"AMQPYCMP";

/// Record kinds as stored on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub(crate) enum Kind {
    Add = 1,
    Update = 2,
    Delete = 3,
    AddTx = 4,
    UpdateTx = 5,
    DeleteTx = 6,
    Prepare = 7,
    Commit = 8,
    Rollback = 9,
}

impl Kind {
    pub(crate) fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            1 => Kind::Add,
            2 => Kind::Update,
            3 => Kind::Delete,
            4 => Kind::AddTx,
            5 => Kind::UpdateTx,
            6 => Kind::DeleteTx,
            7 => Kind::Prepare,
            8 => Kind::Commit,
            9 => Kind::Rollback,
            _ => return None,
        })
    }

    /// Whether the record carries a separate `tx_id` field after the id.
    pub(crate) fn has_tx_field(self) -> bool {
        matches!(self, Kind::AddTx | Kind::UpdateTx | Kind::DeleteTx)
    }

    /// Whether the record carries a payload (for Prepare: the xid).
    pub(crate) fn has_payload(self) -> bool {
        matches!(
            self,
            Kind::Add | Kind::Update | Kind::AddTx | Kind::UpdateTx | Kind::Prepare
        )
    }
}

/// One record, decoded or about to be encoded. For Prepare/Commit/Rollback, `id` is 0 and
/// `tx_id` is the transaction; for the non-transactional kinds `tx_id` is 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecordRef<'a> {
    pub kind: Kind,
    pub record_type: u8,
    pub id: u64,
    pub tx_id: u64,
    pub payload: &'a [u8],
}

impl<'a> RecordRef<'a> {
    pub(crate) fn from_op(op: &'a Op) -> RecordRef<'a> {
        let (kind, record_type, id, tx_id, payload): (Kind, u8, u64, u64, &[u8]) = match op {
            Op::Add {
                id,
                record_type,
                payload,
            } => (Kind::Add, *record_type, *id, 0, payload),
            Op::Update {
                id,
                record_type,
                payload,
            } => (Kind::Update, *record_type, *id, 0, payload),
            Op::Delete { id } => (Kind::Delete, 0, *id, 0, &[]),
            Op::AddTx {
                tx_id,
                id,
                record_type,
                payload,
            } => (Kind::AddTx, *record_type, *id, *tx_id, payload),
            Op::UpdateTx {
                tx_id,
                id,
                record_type,
                payload,
            } => (Kind::UpdateTx, *record_type, *id, *tx_id, payload),
            Op::DeleteTx { tx_id, id } => (Kind::DeleteTx, 0, *id, *tx_id, &[]),
            Op::Prepare { tx_id, xid } => (Kind::Prepare, 0, 0, *tx_id, xid),
            Op::Commit { tx_id } => (Kind::Commit, 0, 0, *tx_id, &[]),
            Op::Rollback { tx_id } => (Kind::Rollback, 0, 0, *tx_id, &[]),
        };
        RecordRef {
            kind,
            record_type,
            id,
            tx_id,
            payload,
        }
    }

    pub(crate) fn encoded_len(&self) -> usize {
        record_len(self.kind, self.payload.len())
    }

    /// Converts back into an owned [`Op`].
    pub(crate) fn to_op(self) -> Op {
        let payload = self.payload.to_vec();
        let (id, tx_id, record_type) = (self.id, self.tx_id, self.record_type);
        match self.kind {
            Kind::Add => Op::Add {
                id,
                record_type,
                payload,
            },
            Kind::Update => Op::Update {
                id,
                record_type,
                payload,
            },
            Kind::Delete => Op::Delete { id },
            Kind::AddTx => Op::AddTx {
                tx_id,
                id,
                record_type,
                payload,
            },
            Kind::UpdateTx => Op::UpdateTx {
                tx_id,
                id,
                record_type,
                payload,
            },
            Kind::DeleteTx => Op::DeleteTx { tx_id, id },
            Kind::Prepare => Op::Prepare {
                tx_id,
                xid: payload,
            },
            Kind::Commit => Op::Commit { tx_id },
            Kind::Rollback => Op::Rollback { tx_id },
        }
    }
}

/// Encoded length of a record of `kind` with a payload of `payload_len` bytes.
pub(crate) fn record_len(kind: Kind, payload_len: usize) -> usize {
    RECORD_FIXED_LEN + if kind.has_tx_field() { TX_FIELD_LEN } else { 0 } + payload_len
}

/// Encoded length of an op (without building it).
pub(crate) fn op_len(op: &Op) -> usize {
    RecordRef::from_op(op).encoded_len()
}

pub(crate) fn align(n: usize) -> usize {
    (n + BATCH_ALIGN - 1) & !(BATCH_ALIGN - 1)
}

/// Size on disk of a batch whose records take `body_len` bytes.
pub(crate) fn batch_len(body_len: usize) -> usize {
    align(BATCH_HEADER_LEN + body_len)
}

/// The CRC seed that ties every checksum to one use of one file.
pub(crate) fn seed(file_id: u64) -> u32 {
    crc32c::crc32c(&file_id.to_le_bytes())
}

use wal::le::{u32_at as le_u32, u64_at as le_u64};

// ---------------------------------------------------------------------------------------
// File header

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileHeader {
    pub file_id: u64,
    pub flags: u32,
    /// DATA files: sequence number of the first batch written to this use of the file.
    pub first_seq: u64,
    /// DATA files: highest batch sequence known durable when the file was put into use.
    pub durable_through: u64,
    /// COMPACTED files: end of the last batch.
    pub data_end: u64,
}

/// Why a file header was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum HeaderError {
    /// Not written by this journal (or by an incompatible version).
    Foreign(String),
    /// Ours, but damaged.
    Corrupt(String),
}

impl FileHeader {
    pub(crate) fn free(file_id: u64) -> FileHeader {
        FileHeader {
            file_id,
            flags: 0,
            first_seq: 0,
            durable_through: 0,
            data_end: 0,
        }
    }

    pub(crate) fn is_data(&self) -> bool {
        self.flags & FLAG_DATA != 0
    }

    pub(crate) fn is_compacted(&self) -> bool {
        self.flags & FLAG_COMPACTED != 0
    }

    pub(crate) fn encode(&self) -> [u8; FILE_HEADER_LEN] {
        let mut b = [0u8; FILE_HEADER_LEN];
        b[0..8].copy_from_slice(&FILE_MAGIC);
        b[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.flags.to_le_bytes());
        b[16..24].copy_from_slice(&self.file_id.to_le_bytes());
        b[24..32].copy_from_slice(&self.first_seq.to_le_bytes());
        b[32..40].copy_from_slice(&self.durable_through.to_le_bytes());
        b[40..48].copy_from_slice(&self.data_end.to_le_bytes());
        let crc = crc32c::crc32c(&b[0..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    pub(crate) fn decode(b: &[u8]) -> Result<FileHeader, HeaderError> {
        if b.len() < FILE_HEADER_LEN {
            return Err(HeaderError::Foreign("shorter than a file header".into()));
        }
        if b[0..8] != FILE_MAGIC {
            return Err(HeaderError::Foreign("bad magic".into()));
        }
        let version = le_u32(b, 8);
        if version != FORMAT_VERSION {
            return Err(HeaderError::Foreign(format!(
                "unsupported format version {version} (this build reads {FORMAT_VERSION})"
            )));
        }
        if crc32c::crc32c(&b[0..60]) != le_u32(b, 60) {
            return Err(HeaderError::Corrupt("file header checksum mismatch".into()));
        }
        let flags = le_u32(b, 12);
        if flags & !(FLAG_DATA | FLAG_COMPACTED) != 0 {
            return Err(HeaderError::Foreign(format!(
                "unknown header flags {flags:#x}"
            )));
        }
        Ok(FileHeader {
            file_id: le_u64(b, 16),
            flags,
            first_seq: le_u64(b, 24),
            durable_through: le_u64(b, 32),
            data_end: le_u64(b, 40),
        })
    }
}

// ---------------------------------------------------------------------------------------
// Records

/// Appends one record to `buf`; returns its CRC.
pub(crate) fn encode_record(buf: &mut Vec<u8>, seed: u32, r: &RecordRef<'_>) -> u32 {
    let start = buf.len();
    let len = r.encoded_len();
    buf.extend_from_slice(&(len as u32).to_le_bytes());
    buf.push(r.kind as u8);
    buf.push(r.record_type);
    buf.extend_from_slice(&[0, 0]);
    let first = match r.kind {
        Kind::Prepare | Kind::Commit | Kind::Rollback => r.tx_id,
        _ => r.id,
    };
    buf.extend_from_slice(&first.to_le_bytes());
    if r.kind.has_tx_field() {
        buf.extend_from_slice(&r.tx_id.to_le_bytes());
    }
    buf.extend_from_slice(r.payload);
    let crc = crc32c::crc32c_append(seed, &buf[start..]);
    buf.extend_from_slice(&crc.to_le_bytes());
    debug_assert_eq!(buf.len() - start, len);
    crc
}

/// Decodes the record at the start of `b` (which may extend past it) and checks its CRC.
/// Returns the record, its encoded length and its CRC.
pub(crate) fn decode_record(b: &[u8], seed: u32) -> Result<(RecordRef<'_>, usize, u32), String> {
    if b.len() < RECORD_FIXED_LEN {
        return Err("record header runs past the batch".into());
    }
    let len = le_u32(b, 0) as usize;
    if len < RECORD_FIXED_LEN || len > b.len() {
        return Err(format!("record length {len} out of range"));
    }
    let kind = Kind::from_u8(b[4]).ok_or_else(|| format!("unknown record kind {}", b[4]))?;
    let fixed = record_len(kind, 0);
    if len < fixed || (!kind.has_payload() && len != fixed) {
        return Err(format!("record length {len} invalid for {kind:?}"));
    }
    let crc = le_u32(b, len - 4);
    if crc32c::crc32c_append(seed, &b[..len - 4]) != crc {
        return Err("record checksum mismatch".into());
    }
    let record_type = b[5];
    let first = le_u64(b, 8);
    let (id, tx_id, payload_at) = if kind.has_tx_field() {
        (first, le_u64(b, 16), 24)
    } else if matches!(kind, Kind::Prepare | Kind::Commit | Kind::Rollback) {
        (0, first, 16)
    } else {
        (first, 0, 16)
    };
    Ok((
        RecordRef {
            kind,
            record_type,
            id,
            tx_id,
            payload: &b[payload_at..len - 4],
        },
        len,
        crc,
    ))
}

// ---------------------------------------------------------------------------------------
// Batches

/// Builds one batch in a reusable buffer: `begin`, `push` records, `finish`.
#[derive(Default)]
pub(crate) struct BatchBuilder {
    /// The bytes to write: optional file header, then the batch.
    pub buf: Vec<u8>,
    crcs: Vec<u8>,
    batch_start: usize,
    seed: u32,
    count: u32,
}

impl BatchBuilder {
    /// Starts a batch; `file_header` (when a file is put into use) is written in front of it.
    pub(crate) fn begin(&mut self, file_id: u64, file_header: Option<&FileHeader>) {
        self.buf.clear();
        self.crcs.clear();
        if let Some(h) = file_header {
            self.buf.extend_from_slice(&h.encode());
        }
        self.batch_start = self.buf.len();
        self.buf.resize(self.batch_start + BATCH_HEADER_LEN, 0);
        self.seed = seed(file_id);
        self.count = 0;
    }

    /// Offset of the next record relative to the start of the batch.
    pub(crate) fn next_offset(&self) -> usize {
        self.buf.len() - self.batch_start
    }

    pub(crate) fn push(&mut self, r: &RecordRef<'_>) {
        let crc = encode_record(&mut self.buf, self.seed, r);
        self.crcs.extend_from_slice(&crc.to_le_bytes());
        self.count += 1;
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Length of the batch (without a file header), once padded.
    pub(crate) fn batch_len(&self) -> usize {
        align(self.buf.len() - self.batch_start)
    }

    /// Fills in the header and padding; the result is `self.buf`.
    pub(crate) fn finish(&mut self, file_id: u64, seq: u64, durable_through: u64) {
        let body_len = (self.buf.len() - self.batch_start - BATCH_HEADER_LEN) as u32;
        let padded = self.batch_start + align(self.buf.len() - self.batch_start);
        self.buf.resize(padded, 0);
        let h = &mut self.buf[self.batch_start..self.batch_start + BATCH_HEADER_LEN];
        h[0..4].copy_from_slice(&BATCH_MAGIC.to_le_bytes());
        h[4..8].copy_from_slice(&body_len.to_le_bytes());
        h[8..16].copy_from_slice(&file_id.to_le_bytes());
        h[16..24].copy_from_slice(&seq.to_le_bytes());
        h[24..32].copy_from_slice(&durable_through.to_le_bytes());
        h[32..36].copy_from_slice(&self.count.to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c_append(self.seed, &h[0..36]), &self.crcs);
        h[36..40].copy_from_slice(&crc.to_le_bytes());
    }
}

/// A batch that passed validation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Batch<'a> {
    pub seq: u64,
    pub durable_through: u64,
    /// Padded length on disk.
    pub len: usize,
    /// Offset of the batch in its file.
    pub offset: usize,
    body: &'a [u8],
    seed: u32,
}

impl<'a> Batch<'a> {
    /// The records with their offsets in the file.
    pub(crate) fn records(&self) -> BatchRecords<'a> {
        BatchRecords {
            body: self.body,
            pos: 0,
            base: self.offset + BATCH_HEADER_LEN,
            seed: self.seed,
        }
    }
}

pub(crate) struct BatchRecords<'a> {
    body: &'a [u8],
    pos: usize,
    base: usize,
    seed: u32,
}

impl<'a> Iterator for BatchRecords<'a> {
    /// (offset in file, encoded length, record)
    type Item = (usize, usize, RecordRef<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.body.len() {
            return None;
        }
        // The batch was validated, so decoding cannot fail here.
        let (r, len, _) = decode_record(&self.body[self.pos..], self.seed).ok()?;
        let at = self.base + self.pos;
        self.pos += len;
        Some((at, len, r))
    }
}

/// What is found at an offset where a batch may start.
#[derive(Debug)]
pub(crate) enum Parsed<'a> {
    /// No room for a batch header before the end of the file.
    End,
    /// Not a batch of this file (zeros, or bytes from an earlier use of the file).
    NotOurs,
    /// Starts like a batch of this file but fails validation (torn or corrupt).
    Invalid(String),
    Valid(Batch<'a>),
}

/// Parses and fully validates the batch at `off` of a file whose contents are `data`.
pub(crate) fn parse_batch(data: &[u8], off: usize, file_id: u64) -> Parsed<'_> {
    if off + BATCH_HEADER_LEN > data.len() {
        return Parsed::End;
    }
    let h = &data[off..off + BATCH_HEADER_LEN];
    if le_u32(h, 0) != BATCH_MAGIC || le_u64(h, 8) != file_id {
        return Parsed::NotOurs;
    }
    let body_len = le_u32(h, 4) as usize;
    let body_start = off + BATCH_HEADER_LEN;
    if body_len > data.len() - body_start {
        return Parsed::Invalid(format!(
            "batch body of {body_len} bytes runs past the file end"
        ));
    }
    let seq = le_u64(h, 16);
    let durable_through = le_u64(h, 24);
    let count = le_u32(h, 32);
    let s = seed(file_id);
    let body = &data[body_start..body_start + body_len];
    let mut crc = crc32c::crc32c_append(s, &h[0..36]);
    let mut pos = 0;
    let mut n = 0u32;
    while pos < body.len() {
        match decode_record(&body[pos..], s) {
            Ok((_, len, rcrc)) => {
                crc = crc32c::crc32c_append(crc, &rcrc.to_le_bytes());
                pos += len;
                n += 1;
            }
            Err(e) => return Parsed::Invalid(format!("record {n}: {e}")),
        }
    }
    if n != count {
        return Parsed::Invalid(format!("batch holds {n} records, header says {count}"));
    }
    if crc != le_u32(h, 36) {
        return Parsed::Invalid("batch checksum mismatch".into());
    }
    if durable_through >= seq {
        return Parsed::Invalid(format!(
            "batch {seq} claims batch {durable_through} durable"
        ));
    }
    Parsed::Valid(Batch {
        seq,
        durable_through,
        len: batch_len(body_len),
        offset: off,
        body,
        seed: s,
    })
}

/// Valid batches of `file_id` anywhere in `data[from..]` (checks magic and id first, so
/// scanning a file is cheap). Used to tell a torn tail from corruption.
pub(crate) fn scan_batches(
    data: &[u8],
    from: usize,
    file_id: u64,
) -> impl Iterator<Item = ScanHit<'_>> {
    let id = file_id.to_le_bytes();
    let magic = BATCH_MAGIC.to_le_bytes();
    let start = align(from);
    (start..data.len().saturating_sub(BATCH_HEADER_LEN - 1))
        .step_by(BATCH_ALIGN)
        .filter(move |&p| data[p..p + 4] == magic && data[p + 8..p + 16] == id)
        .map(move |p| match parse_batch(data, p, file_id) {
            Parsed::Valid(b) => ScanHit::Valid(b),
            _ => ScanHit::Ours,
        })
}

pub(crate) enum ScanHit<'a> {
    /// Starts like a batch of this file but does not validate.
    Ours,
    Valid(Batch<'a>),
}

// ---------------------------------------------------------------------------------------
// Compaction control file

/// The compaction commit record: once durable, the outputs replace the inputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Control {
    pub inputs: Vec<u64>,
    pub outputs: Vec<u64>,
}

impl Control {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(24 + 8 * (self.inputs.len() + self.outputs.len()));
        b.extend_from_slice(&CONTROL_MAGIC);
        b.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        b.extend_from_slice(&(self.inputs.len() as u32).to_le_bytes());
        b.extend_from_slice(&(self.outputs.len() as u32).to_le_bytes());
        for id in self.inputs.iter().chain(&self.outputs) {
            b.extend_from_slice(&id.to_le_bytes());
        }
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// `None` if the bytes are not a complete, intact control record.
    pub(crate) fn decode(b: &[u8]) -> Option<Control> {
        if b.len() < 24 || b[0..8] != CONTROL_MAGIC || le_u32(b, 8) != FORMAT_VERSION {
            return None;
        }
        let ni = le_u32(b, 12) as usize;
        let no = le_u32(b, 16) as usize;
        let len = 20usize.checked_add(ni.checked_add(no)?.checked_mul(8)?)?;
        if b.len() < len + 4 || crc32c::crc32c(&b[..len]) != le_u32(b, len) {
            return None;
        }
        let ids: Vec<u64> = (0..ni + no).map(|i| le_u64(b, 20 + 8 * i)).collect();
        Some(Control {
            inputs: ids[..ni].to_vec(),
            outputs: ids[ni..].to_vec(),
        })
    }
}

// ---------------------------------------------------------------------------------------
// File names

/// What a directory entry is to a journal with a given prefix and extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Name {
    /// `{prefix}-{id}.{ext}`: a data or free file.
    Data(u64),
    /// `{prefix}-{id}.{ext}.tmp`: a file being created (deleted on open).
    Creating(u64),
    /// `{prefix}-{id}.{ext}.cmp`: a compaction output not yet committed.
    Compacting(u64),
    /// `{prefix}-compaction.ctl`: the compaction commit record.
    Control,
}

pub(crate) fn data_name(prefix: &str, ext: &str, id: u64) -> String {
    format!("{prefix}-{id}.{ext}")
}

pub(crate) fn creating_name(prefix: &str, ext: &str, id: u64) -> String {
    format!("{prefix}-{id}.{ext}.tmp")
}

pub(crate) fn compacting_name(prefix: &str, ext: &str, id: u64) -> String {
    format!("{prefix}-{id}.{ext}.cmp")
}

pub(crate) fn control_name(prefix: &str) -> String {
    format!("{prefix}-compaction.ctl")
}

pub(crate) fn parse_name(prefix: &str, ext: &str, name: &str) -> Option<Name> {
    if name == control_name(prefix) {
        return Some(Name::Control);
    }
    let rest = name.strip_prefix(prefix)?.strip_prefix('-')?;
    let digits_end = rest.find(|c: char| !c.is_ascii_digit())?;
    if digits_end == 0 || digits_end > 19 {
        return None;
    }
    let id: u64 = rest[..digits_end].parse().ok()?;
    let tail = rest[digits_end..].strip_prefix('.')?.strip_prefix(ext)?;
    match tail {
        "" => Some(Name::Data(id)),
        ".tmp" => Some(Name::Creating(id)),
        ".cmp" => Some(Name::Compacting(id)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_ops() -> Vec<Op> {
        vec![
            Op::Add {
                id: 1,
                record_type: 7,
                payload: b"hello".to_vec(),
            },
            Op::Update {
                id: u64::MAX,
                record_type: 255,
                payload: vec![],
            },
            Op::Delete { id: 3 },
            Op::AddTx {
                tx_id: 9,
                id: 4,
                record_type: 1,
                payload: vec![0; 1000],
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
                xid: b"xid-bytes".to_vec(),
            },
            Op::Commit { tx_id: 9 },
            Op::Rollback { tx_id: 10 },
        ]
    }

    #[test]
    fn record_round_trip() {
        for op in all_ops() {
            let r = RecordRef::from_op(&op);
            let mut buf = vec![0xAA; 3];
            let crc = encode_record(&mut buf, seed(42), &r);
            assert_eq!(buf.len() - 3, op_len(&op));
            let (d, len, dcrc) = decode_record(&buf[3..], seed(42)).unwrap();
            assert_eq!(len, op_len(&op));
            assert_eq!(crc, dcrc);
            assert_eq!(d, r);
            assert_eq!(d.to_op(), op);
            // Another file id never validates.
            assert!(decode_record(&buf[3..], seed(43)).is_err());
        }
    }

    #[test]
    fn record_rejects_every_single_bit_flip() {
        let op = Op::AddTx {
            tx_id: 1,
            id: 2,
            record_type: 3,
            payload: b"payload".to_vec(),
        };
        let mut buf = Vec::new();
        encode_record(&mut buf, seed(1), &RecordRef::from_op(&op));
        for bit in 0..buf.len() * 8 {
            let mut b = buf.clone();
            b[bit / 8] ^= 1 << (bit % 8);
            assert!(decode_record(&b, seed(1)).is_err(), "bit {bit}");
        }
    }

    fn build(file_id: u64, seq: u64, dt: u64, header: Option<&FileHeader>) -> Vec<u8> {
        let mut b = BatchBuilder::default();
        b.begin(file_id, header);
        for op in all_ops() {
            b.push(&RecordRef::from_op(&op));
        }
        b.finish(file_id, seq, dt);
        b.buf.clone()
    }

    #[test]
    fn batch_round_trip() {
        let mut data = vec![0u8; FILE_HEADER_LEN];
        data.extend(build(5, 11, 10, None));
        let total = data.len();
        data.extend(vec![0u8; 100]);
        match parse_batch(&data, FILE_HEADER_LEN, 5) {
            Parsed::Valid(b) => {
                assert_eq!((b.seq, b.durable_through), (11, 10));
                assert_eq!(b.offset + b.len, total);
                let ops: Vec<Op> = b.records().map(|(_, _, r)| r.to_op()).collect();
                assert_eq!(ops, all_ops());
                let mut at = b.offset + BATCH_HEADER_LEN;
                for (off, len, _) in b.records() {
                    assert_eq!(off, at);
                    assert!(decode_record(&data[off..off + len], seed(5)).is_ok());
                    at += len;
                }
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse_batch(&data, FILE_HEADER_LEN, 6),
            Parsed::NotOurs
        ));
        assert!(matches!(parse_batch(&data, total, 5), Parsed::NotOurs));
        assert!(matches!(parse_batch(&data, data.len() - 8, 5), Parsed::End));
    }

    #[test]
    fn batch_with_file_header() {
        let h = FileHeader {
            file_id: 5,
            flags: FLAG_DATA,
            first_seq: 3,
            durable_through: 2,
            data_end: 0,
        };
        let data = build(5, 3, 2, Some(&h));
        assert_eq!(FileHeader::decode(&data).unwrap(), h);
        assert!(matches!(
            parse_batch(&data, FILE_HEADER_LEN, 5),
            Parsed::Valid(_)
        ));
    }

    #[test]
    fn batch_truncation_and_bit_flips_are_detected() {
        let batch = build(5, 2, 1, None);
        for cut in 0..batch.len() {
            let mut data = batch.clone();
            for b in &mut data[cut..] {
                *b = 0;
            }
            // A cut inside the padding leaves a valid batch.
            let body_end = BATCH_HEADER_LEN + le_u32(&batch, 4) as usize;
            let valid = matches!(parse_batch(&data, 0, 5), Parsed::Valid(_));
            assert_eq!(valid, cut >= body_end, "cut at {cut}");
        }
        let body_end = BATCH_HEADER_LEN + le_u32(&batch, 4) as usize;
        for bit in 0..body_end * 8 {
            let mut data = batch.clone();
            data[bit / 8] ^= 1 << (bit % 8);
            assert!(
                !matches!(parse_batch(&data, 0, 5), Parsed::Valid(_)),
                "bit {bit}"
            );
        }
    }

    #[test]
    fn scan_finds_batches() {
        let mut data = vec![0u8; 64];
        let first = build(5, 2, 1, None);
        data.extend(&first);
        data.extend(vec![0u8; 24]);
        let at = data.len();
        data.extend(build(5, 3, 2, None));
        data.extend(build(6, 3, 2, None));
        let hits: Vec<usize> = scan_batches(&data, 65, 5)
            .map(|h| match h {
                ScanHit::Valid(b) => b.offset,
                ScanHit::Ours => panic!("invalid batch found"),
            })
            .collect();
        assert_eq!(hits, vec![at]);
    }

    #[test]
    fn header_round_trip_and_errors() {
        let h = FileHeader {
            file_id: 77,
            flags: FLAG_DATA | FLAG_COMPACTED,
            first_seq: 1,
            durable_through: 0,
            data_end: 4096,
        };
        let b = h.encode();
        assert_eq!(FileHeader::decode(&b).unwrap(), h);
        assert!(matches!(
            FileHeader::decode(&[0u8; 64]),
            Err(HeaderError::Foreign(_))
        ));
        let mut v = b;
        v[8] = 2;
        assert!(matches!(
            FileHeader::decode(&v),
            Err(HeaderError::Foreign(_))
        ));
        let mut c = b;
        c[20] ^= 1;
        assert!(matches!(
            FileHeader::decode(&c),
            Err(HeaderError::Corrupt(_))
        ));
    }

    #[test]
    fn control_round_trip() {
        let c = Control {
            inputs: vec![1, 2, 3],
            outputs: vec![10],
        };
        let b = c.encode();
        assert_eq!(Control::decode(&b), Some(c));
        for cut in 0..b.len() {
            assert_eq!(Control::decode(&b[..cut]), None);
        }
        let mut f = b.clone();
        f[21] ^= 4;
        assert_eq!(Control::decode(&f), None);
    }

    #[test]
    fn names() {
        let p = "activemq-data";
        assert_eq!(data_name(p, "amq", 12), "activemq-data-12.amq");
        assert_eq!(
            parse_name(p, "amq", "activemq-data-12.amq"),
            Some(Name::Data(12))
        );
        assert_eq!(
            parse_name(p, "amq", "activemq-data-12.amq.tmp"),
            Some(Name::Creating(12))
        );
        assert_eq!(
            parse_name(p, "amq", "activemq-data-3.amq.cmp"),
            Some(Name::Compacting(3))
        );
        assert_eq!(
            parse_name(p, "amq", "activemq-data-compaction.ctl"),
            Some(Name::Control)
        );
        for other in [
            "activemq-data-.amq",
            "activemq-data-1.amqx",
            "activemq-data-1.bin",
            "activemq-bindings-1.amq",
            "activemq-data-1x.amq",
            "README",
            "activemq-data-99999999999999999999.amq",
        ] {
            assert_eq!(parse_name(p, "amq", other), None, "{other}");
        }
    }
}
