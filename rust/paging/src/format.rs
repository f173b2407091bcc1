//! The page file format: a header, then records.
//!
//! ```text
//! header (32 bytes): magic "AMQPYPGF" | version u32 | 0 u32 | page u64 | crc32c u32 | 0 u32
//! record:            len u32 | crc32c u32 | payload (len bytes)
//! payload:           message_id u64 | tx_id u64 | n u16 | n x queue_id u64 | message
//! ```
//! Little-endian throughout. The header's CRC covers its first 24 bytes. A record's CRC
//! covers the page number, the record's offset in the file and the payload, so bytes left
//! from another page or another place never validate.

/// Magic of a page file (the journal's is "AMQPYJNL").
pub const MAGIC: [u8; 8] = *b"AMQPYPGF";
pub const VERSION: u32 = 1;
pub const HEADER_LEN: u64 = 32;
/// `len` and `crc` in front of every payload.
pub const RECORD_HEADER_LEN: u64 = 8;
/// message_id, tx_id, n.
const PAYLOAD_FIXED: usize = 18;
/// The largest payload accepted: larger records are refused, smaller ones are never
/// refused for size (a record larger than a page goes alone into a fresh page).
pub const MAX_PAYLOAD: u64 = 1 << 30;

/// One record, borrowed from a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordView<'a> {
    pub message_id: u64,
    pub tx_id: u64,
    pub queue_ids: Vec<u64>,
    pub message: &'a [u8],
}

/// The header of page `page`.
pub fn header(page: u64) -> [u8; HEADER_LEN as usize] {
    let mut b = [0u8; HEADER_LEN as usize];
    b[0..8].copy_from_slice(&MAGIC);
    b[8..12].copy_from_slice(&VERSION.to_le_bytes());
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

/// Checks the header of what should be page `expected` (any page if `None`); returns its
/// page number.
pub fn check_header(b: &[u8], expected: Option<u64>) -> Result<u64, HeaderProblem> {
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
    let crc = u32::from_le_bytes(h[24..28].try_into().expect("4 bytes"));
    if crc32c::crc32c(&h[0..24]) != crc {
        return Err(HeaderProblem::Torn("header checksum mismatch".into()));
    }
    let version = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(HeaderProblem::Foreign(format!(
            "format version {version}, this build reads version {VERSION}"
        )));
    }
    let page = u64::from_le_bytes(h[16..24].try_into().expect("8 bytes"));
    if let Some(want) = expected {
        if page != want {
            return Err(HeaderProblem::Foreign(format!(
                "header says page {page}, the file name says {want}"
            )));
        }
    }
    Ok(page)
}

/// Bytes a record with this message and number of queues takes in a page.
pub fn record_len(queues: usize, message: usize) -> u64 {
    RECORD_HEADER_LEN + (PAYLOAD_FIXED + 8 * queues + message) as u64
}

/// Appends one record, to be written at `offset` of page `page`, to `buf`.
pub fn encode(
    buf: &mut Vec<u8>,
    page: u64,
    offset: u64,
    message_id: u64,
    tx_id: u64,
    queue_ids: &[u64],
    message: &[u8],
) {
    let start = buf.len();
    let payload_len = PAYLOAD_FIXED + 8 * queue_ids.len() + message.len();
    buf.reserve(8 + payload_len);
    buf.extend_from_slice(&(payload_len as u32).to_le_bytes());
    buf.extend_from_slice(&[0u8; 4]);
    buf.extend_from_slice(&message_id.to_le_bytes());
    buf.extend_from_slice(&tx_id.to_le_bytes());
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

/// Parses the record at the start of `b`, which sits at `offset` of page `page`; returns
/// it and its length. `b` may hold more after it.
pub fn decode(b: &[u8], page: u64, offset: u64) -> Result<(RecordView<'_>, usize), Bad> {
    let (payload, total) = payload_of(b, page, offset)?;
    let record = parse_payload(payload)?;
    Ok((record, total))
}

/// Checks the length and checksum of the record at the start of `b`; returns its payload
/// and its total length.
pub fn payload_of(b: &[u8], page: u64, offset: u64) -> Result<(&[u8], usize), Bad> {
    if b.len() < RECORD_HEADER_LEN as usize {
        return Err("short record header");
    }
    let len = u32::from_le_bytes(b[0..4].try_into().expect("4 bytes")) as usize;
    if len < PAYLOAD_FIXED || len as u64 > MAX_PAYLOAD {
        return Err("bad record length");
    }
    let total = RECORD_HEADER_LEN as usize + len;
    if b.len() < total {
        return Err("record cut short");
    }
    let crc = u32::from_le_bytes(b[4..8].try_into().expect("4 bytes"));
    let payload = &b[8..total];
    if record_crc(page, offset, payload) != crc {
        return Err("record checksum mismatch");
    }
    Ok((payload, total))
}

fn parse_payload(p: &[u8]) -> Result<RecordView<'_>, Bad> {
    let (message_id, tx_id, n) = fixed(p);
    let ids_end = PAYLOAD_FIXED + 8 * n;
    if p.len() < ids_end {
        return Err("queue ids run past the record");
    }
    let queue_ids = p[PAYLOAD_FIXED..ids_end]
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    Ok(RecordView {
        message_id,
        tx_id,
        queue_ids,
        message: &p[ids_end..],
    })
}

/// `(message_id, tx_id, n)` of a payload already checked by [`payload_of`].
pub fn fixed(p: &[u8]) -> (u64, u64, usize) {
    let message_id = u64::from_le_bytes(p[0..8].try_into().expect("8 bytes"));
    let tx_id = u64::from_le_bytes(p[8..16].try_into().expect("8 bytes"));
    let n = u16::from_le_bytes(p[16..18].try_into().expect("2 bytes")) as usize;
    (message_id, tx_id, n)
}

/// Calls `f(queue_id, tx_id)` for each queue of a payload checked by [`payload_of`].
pub fn for_each_queue(p: &[u8], mut f: impl FnMut(u64, u64)) -> Result<(), Bad> {
    let (_, tx_id, n) = fixed(p);
    if p.len() < PAYLOAD_FIXED + 8 * n {
        return Err("queue ids run past the record");
    }
    for c in p[PAYLOAD_FIXED..PAYLOAD_FIXED + 8 * n].chunks_exact(8) {
        f(u64::from_le_bytes(c.try_into().expect("8 bytes")), tx_id);
    }
    Ok(())
}

/// Walks the records of a whole page image `b` (header included) from the header on;
/// returns the offset where the valid records end and, if they end before `b` does, why.
pub fn scan(b: &[u8], page: u64) -> (u64, Option<Bad>) {
    let mut off = HEADER_LEN as usize;
    while off < b.len() {
        match decode(&b[off..], page, off as u64) {
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

    #[test]
    fn record_round_trip() {
        let mut b = Vec::new();
        encode(&mut b, 7, 32, 1, 2, &[3, 4], b"hello");
        assert_eq!(b.len() as u64, record_len(2, 5));
        let (r, n) = decode(&b, 7, 32).unwrap();
        assert_eq!(n, b.len());
        assert_eq!(
            r,
            RecordView {
                message_id: 1,
                tx_id: 2,
                queue_ids: vec![3, 4],
                message: b"hello"
            }
        );
        // Same bytes at another place or in another page do not validate.
        assert!(decode(&b, 8, 32).is_err());
        assert!(decode(&b, 7, 40).is_err());
    }

    #[test]
    fn header_round_trip_and_problems() {
        let h = header(12);
        assert_eq!(check_header(&h, Some(12)), Ok(12));
        assert!(matches!(
            check_header(&h, Some(13)),
            Err(HeaderProblem::Foreign(_))
        ));
        assert!(matches!(
            check_header(&h[..10], None),
            Err(HeaderProblem::Torn(_))
        ));
        let mut v = h;
        v[8] = 2;
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
