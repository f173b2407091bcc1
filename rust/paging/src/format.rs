//! The page file format: a header, then records.
//!
//! ```text
//! header (32 bytes): magic "AMQPYPGF" | version u32 | 0 u32 | page u64 | crc32c u32 | 0 u32
//! record:            len u32 | crc32c u32 | payload (len bytes)
//! payload v2:        message_id u64 | tx_id u64 | queue_offset u64 | n u16 | n x queue_id u64
//!                    | message
//! payload v1:        message_id u64 | tx_id u64 | n u16 | n x queue_id u64 | message
//! ```
//! Little-endian throughout. The header's CRC covers its first 24 bytes. A record's CRC
//! covers the page number, the record's offset in the file and the payload, so bytes left
//! from another page or another place never validate.
//!
//! A page's header version decides the layout of all its records. This build writes
//! version 2 (records carry the message's queue offset) and reads both; a version 1
//! record's queue offset is its message id (as an old 8-byte `ADD_REF`'s is).

use wal::le;

/// Magic of a page file (the journal's is "AMQPYJNL").
pub const MAGIC: [u8; 8] = *b"AMQPYPGF";
/// The version this build writes.
pub const VERSION: u32 = 2;
/// The oldest version this build reads.
pub const OLDEST_VERSION: u32 = 1;
pub const HEADER_LEN: u64 = 32;
/// `len` and `crc` in front of every payload.
pub const RECORD_HEADER_LEN: u64 = 8;
/// `message_id`, `tx_id`, `queue_offset`, n.
const PAYLOAD_FIXED: usize = 26;
/// `message_id`, `tx_id`, n (version 1).
const PAYLOAD_FIXED_V1: usize = 18;
/// The largest payload accepted: larger records are refused, smaller ones are never
/// refused for size (a record larger than a page goes alone into a fresh page).
pub const MAX_PAYLOAD: u64 = 1 << 30;

/// One record, borrowed from a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordView<'a> {
    pub message_id: u64,
    pub tx_id: u64,
    pub queue_offset: u64,
    pub queue_ids: Vec<u64>,
    pub message: &'a [u8],
}

/// The header of page `page`, in the version this build writes.
pub fn header(page: u64) -> [u8; HEADER_LEN as usize] {
    header_of_version(page, VERSION)
}

/// The header of page `page` in format `version` (older versions: for tests and tools
/// that make files as an older build wrote them).
pub fn header_of_version(page: u64, version: u32) -> [u8; HEADER_LEN as usize] {
    let mut b = [0u8; HEADER_LEN as usize];
    b[0..8].copy_from_slice(&MAGIC);
    b[8..12].copy_from_slice(&version.to_le_bytes());
    b[16..24].copy_from_slice(&page.to_le_bytes());
    let crc = crc32c::crc32c(&b[0..24]);
    b[24..28].copy_from_slice(&crc.to_le_bytes());
    b
}

/// What is wrong with a header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderProblem {
    /// Shorter than a header, all zeros, or failing its checksum: a creation cut short.
    Torn(String),
    /// Another format, version or page: never ours to repair.
    Foreign(String),
}

/// What a valid header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub page: u64,
    /// Decides the layout of the page's records.
    pub version: u32,
}

/// Checks the header of what should be page `expected` (any page if `None`).
pub fn check_header(b: &[u8], expected: Option<u64>) -> Result<Header, HeaderProblem> {
    let n = HEADER_LEN as usize;
    if b.len() < n {
        return Err(HeaderProblem::Torn(format!(
            "{} bytes, shorter than a page header",
            b.len()
        )));
    }
    let h = &b[..n];
    if h.iter().all(|&x| x == 0) {
        return Err(HeaderProblem::Torn("header is all zeros".into()));
    }
    if h[0..8] != MAGIC {
        return Err(HeaderProblem::Foreign(format!(
            "magic {:?}, expected {:?}",
            String::from_utf8_lossy(&h[0..8]),
            String::from_utf8_lossy(&MAGIC)
        )));
    }
    let crc = le::u32_at(h, 24);
    if crc32c::crc32c(&h[0..24]) != crc {
        return Err(HeaderProblem::Torn("header checksum mismatch".into()));
    }
    let version = le::u32_at(h, 8);
    if !(OLDEST_VERSION..=VERSION).contains(&version) {
        return Err(HeaderProblem::Foreign(format!(
            "format version {version}, this build reads versions {OLDEST_VERSION} to {VERSION}"
        )));
    }
    let page = le::u64_at(h, 16);
    if let Some(want) = expected {
        if page != want {
            return Err(HeaderProblem::Foreign(format!(
                "header says page {page}, the file name says {want}"
            )));
        }
    }
    Ok(Header { page, version })
}

/// Bytes a record with this message and number of queues takes in a page (as this build
/// writes it).
pub fn record_len(queues: usize, message: usize) -> u64 {
    RECORD_HEADER_LEN + (PAYLOAD_FIXED + 8 * queues + message) as u64
}

/// The fields of one record to encode.
#[derive(Debug, Clone, Copy)]
pub struct Fields<'a> {
    pub message_id: u64,
    pub tx_id: u64,
    pub queue_offset: u64,
    pub queue_ids: &'a [u64],
    pub message: &'a [u8],
}

/// Appends one record, to be written at `offset` of page `page`, to `buf` (version 2).
pub fn encode(buf: &mut Vec<u8>, page: u64, offset: u64, r: &Fields<'_>) {
    encode_version(buf, page, offset, r, VERSION);
}

/// [`encode`] in format `version` (1 leaves the queue offset out: for tests and tools
/// that make files as an older build wrote them).
pub fn encode_version(buf: &mut Vec<u8>, page: u64, offset: u64, r: &Fields<'_>, version: u32) {
    let Fields {
        message_id,
        tx_id,
        queue_offset,
        queue_ids,
        message,
    } = *r;
    let start = buf.len();
    let payload_len = fixed_len(version) + 8 * queue_ids.len() + message.len();
    buf.reserve(8 + payload_len);
    buf.extend_from_slice(&(payload_len as u32).to_le_bytes());
    buf.extend_from_slice(&[0u8; 4]);
    buf.extend_from_slice(&message_id.to_le_bytes());
    buf.extend_from_slice(&tx_id.to_le_bytes());
    if version >= 2 {
        buf.extend_from_slice(&queue_offset.to_le_bytes());
    }
    buf.extend_from_slice(&(queue_ids.len() as u16).to_le_bytes());
    for q in queue_ids {
        buf.extend_from_slice(&q.to_le_bytes());
    }
    buf.extend_from_slice(message);
    let crc = record_crc(page, offset, &buf[start + 8..]);
    buf[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

fn record_crc(page: u64, offset: u64, payload: &[u8]) -> u32 {
    let mut seed = [0u8; 16];
    seed[0..8].copy_from_slice(&page.to_le_bytes());
    seed[8..16].copy_from_slice(&offset.to_le_bytes());
    crc32c::crc32c_append(crc32c::crc32c(&seed), payload)
}

/// Why the bytes at some offset are not a record.
pub type Bad = &'static str;

/// Bytes before a payload's queue ids in format `version`.
fn fixed_len(version: u32) -> usize {
    if version >= 2 {
        PAYLOAD_FIXED
    } else {
        PAYLOAD_FIXED_V1
    }
}

/// Parses the record at the start of `b`, which sits at `offset` of page `page` (whose
/// header says `version`); returns it and its length. `b` may hold more after it.
pub fn decode(
    b: &[u8],
    page: u64,
    offset: u64,
    version: u32,
) -> Result<(RecordView<'_>, usize), Bad> {
    let (payload, total) = payload_of(b, page, offset, version)?;
    let record = parse_payload(payload, version)?;
    Ok((record, total))
}

/// Checks the length and checksum of the record at the start of `b`; returns its payload
/// and its total length.
pub fn payload_of(b: &[u8], page: u64, offset: u64, version: u32) -> Result<(&[u8], usize), Bad> {
    if b.len() < RECORD_HEADER_LEN as usize {
        return Err("short record header");
    }
    let len = le::u32_at(b, 0) as usize;
    if len < fixed_len(version) || len as u64 > MAX_PAYLOAD {
        return Err("bad record length");
    }
    let total = RECORD_HEADER_LEN as usize + len;
    if b.len() < total {
        return Err("record cut short");
    }
    let crc = le::u32_at(b, 4);
    let payload = &b[8..total];
    if record_crc(page, offset, payload) != crc {
        return Err("record checksum mismatch");
    }
    Ok((payload, total))
}

fn parse_payload(p: &[u8], version: u32) -> Result<RecordView<'_>, Bad> {
    let (f, n) = fixed(p, version);
    let start = fixed_len(version);
    let ids_end = start + 8 * n;
    if p.len() < ids_end {
        return Err("queue ids run past the record");
    }
    let queue_ids = p[start..ids_end]
        .chunks_exact(8)
        .map(|c| le::u64_at(c, 0))
        .collect();
    Ok(RecordView {
        message_id: f.message_id,
        tx_id: f.tx_id,
        queue_offset: f.queue_offset,
        queue_ids,
        message: &p[ids_end..],
    })
}

/// The fixed fields of a payload already checked by [`payload_of`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fixed {
    pub message_id: u64,
    pub tx_id: u64,
    pub queue_offset: u64,
}

/// The fixed fields and the number of queues of a payload already checked by
/// [`payload_of`]; a version 1 payload's queue offset is its message id.
pub fn fixed(p: &[u8], version: u32) -> (Fixed, usize) {
    let u64_at = |at: usize| le::u64_at(p, at);
    let message_id = u64_at(0);
    let tx_id = u64_at(8);
    let (queue_offset, n_at) = if version >= 2 {
        (u64_at(16), 24)
    } else {
        (message_id, 16)
    };
    let n = le::u16_at(p, n_at) as usize;
    (
        Fixed {
            message_id,
            tx_id,
            queue_offset,
        },
        n,
    )
}

/// Calls `f(queue_id, tx_id)` for each queue of a payload checked by [`payload_of`].
pub fn for_each_queue(p: &[u8], version: u32, mut f: impl FnMut(u64, u64)) -> Result<(), Bad> {
    let (Fixed { tx_id, .. }, n) = fixed(p, version);
    let start = fixed_len(version);
    if p.len() < start + 8 * n {
        return Err("queue ids run past the record");
    }
    for c in p[start..start + 8 * n].chunks_exact(8) {
        f(le::u64_at(c, 0), tx_id);
    }
    Ok(())
}

/// Walks the records of a whole page image `b` (header included, saying `version`) from
/// the header on; returns the offset where the valid records end and, if they end before
/// `b` does, why.
pub fn scan(b: &[u8], page: u64, version: u32) -> (u64, Option<Bad>) {
    let mut off = HEADER_LEN as usize;
    while off < b.len() {
        match decode(&b[off..], page, off as u64, version) {
            Ok((_, n)) => off += n,
            Err(why) => return (off as u64, Some(why)),
        }
    }
    (off as u64, None)
}

/// `%09d.page`.
pub fn file_name(page: u64) -> String {
    format!("{page:09}.page")
}

/// The page number in a page file's name, if it is one.
pub fn parse_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".page")?;
    if digits.len() < 9 || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIELDS: Fields<'static> = Fields {
        message_id: 1,
        tx_id: 2,
        queue_offset: 9,
        queue_ids: &[3, 4],
        message: b"hello",
    };

    #[test]
    fn record_round_trip() {
        let mut b = Vec::new();
        encode(&mut b, 7, 32, &FIELDS);
        assert_eq!(b.len() as u64, record_len(2, 5));
        let (r, n) = decode(&b, 7, 32, VERSION).unwrap();
        assert_eq!(n, b.len());
        assert_eq!(
            r,
            RecordView {
                message_id: 1,
                tx_id: 2,
                queue_offset: 9,
                queue_ids: vec![3, 4],
                message: b"hello"
            }
        );
        // Same bytes at another place or in another page do not validate.
        assert!(decode(&b, 8, 32, VERSION).is_err());
        assert!(decode(&b, 7, 40, VERSION).is_err());
    }

    #[test]
    fn version_1_records_read_with_the_message_id_as_offset() {
        let mut b = Vec::new();
        encode_version(&mut b, 7, 32, &FIELDS, 1);
        assert_eq!(b.len() as u64, record_len(2, 5) - 8);
        let (r, n) = decode(&b, 7, 32, 1).unwrap();
        assert_eq!(n, b.len());
        assert_eq!((r.message_id, r.tx_id, r.queue_offset), (1, 2, 1));
        assert_eq!((r.queue_ids, r.message), (vec![3, 4], &b"hello"[..]));
        let (payload, _) = payload_of(&b, 7, 32, 1).unwrap();
        let mut seen = Vec::new();
        for_each_queue(payload, 1, |q, tx| seen.push((q, tx))).unwrap();
        assert_eq!(seen, [(3, 2), (4, 2)]);
    }

    #[test]
    fn header_round_trip_and_problems() {
        let h = header(12);
        assert_eq!(
            check_header(&h, Some(12)),
            Ok(Header {
                page: 12,
                version: 2
            })
        );
        let old = header_of_version(12, 1);
        assert_eq!(check_header(&old, None).map(|h| h.version), Ok(1));
        for bad in [0, 3] {
            assert!(matches!(
                check_header(&header_of_version(12, bad), None),
                Err(HeaderProblem::Foreign(_))
            ));
        }
        assert!(matches!(
            check_header(&h, Some(13)),
            Err(HeaderProblem::Foreign(_))
        ));
        assert!(matches!(
            check_header(&h[..10], None),
            Err(HeaderProblem::Torn(_))
        ));
        let mut v = h;
        v[8] = 3; // without fixing the checksum
        assert!(matches!(
            check_header(&v, None),
            Err(HeaderProblem::Torn(_))
        ));
    }

    #[test]
    fn file_names() {
        assert_eq!(file_name(1), "000000001.page");
        assert_eq!(parse_file_name("000000001.page"), Some(1));
        assert_eq!(parse_file_name("1234567890.page"), Some(1_234_567_890));
        assert_eq!(parse_file_name("1.page"), None);
        assert_eq!(parse_file_name("000000001.page.tmp"), None);
    }
}
