//! Reading pages: records of one page up to what the writer has written, a page's
//! per-queue counts, and an offline reading of a page file.
//!
//! Reads never go past a page's `written_end`, so a record whose write is queued or in
//! flight is never returned, and they stop at the first bad record: a half-written record
//! is never returned as a record.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use wal::StoreFile;

use crate::format::{self, HEADER_LEN, RECORD_HEADER_LEN};
use crate::store::{Inner, PageStore};
use crate::{Error, PagedRecord, ReadOut, Result};
use wal::io_err;

/// Bytes read beyond the byte budget, so a read usually ends on whole records.
const SLACK: u64 = 64 * 1024;

/// What a reader needs to know about a page, taken under the lock.
struct View {
    limit: u64,
    final_end: Option<u64>,
    handle: Option<Arc<dyn StoreFile>>,
    version: u32,
}

impl Inner {
    fn view(&self, page: u64) -> Result<View> {
        let st = self.state();
        let info = st.pages.get(&page).ok_or_else(|| Error::BadPage {
            path: self.dir.clone(),
            page,
            reason: "does not exist".into(),
        })?;
        Ok(View {
            limit: info.written_end,
            final_end: info.final_end,
            handle: info.handle.clone(),
            version: info.version,
        })
    }

    fn handle(&self, page: u64, view: &View) -> Result<Arc<dyn StoreFile>> {
        if let Some(h) = &view.handle {
            return Ok(Arc::clone(h));
        }
        let path = self.page_path(page);
        let h = self.fs.open(&path).map_err(io_err("open", &path))?;
        if let Some(info) = self.state().pages.get_mut(&page) {
            info.handle = Some(Arc::clone(&h));
        }
        Ok(h)
    }

    fn read_range(&self, f: &dyn StoreFile, page: u64, from: u64, len: u64) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len as usize];
        let mut done = 0;
        while done < buf.len() {
            match f.read_at(&mut buf[done..], from + done as u64) {
                Ok(0) => {
                    return Err(Error::Corrupted(wal::Corruption {
                        path: self.page_path(page),
                        offset: from + done as u64,
                        reason: "file shorter than what was written".into(),
                    }))
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err("read", &self.page_path(page))(e).into()),
            }
        }
        Ok(buf)
    }
}

impl PageStore {
    /// Written records of `page` from `offset` (a record boundary): at most `max_records`
    /// and about `max_bytes`, at least one if any is written. Blocks on file reads.
    pub fn read(
        &self,
        page: u64,
        offset: u64,
        max_records: usize,
        max_bytes: u64,
    ) -> Result<ReadOut> {
        let inner = &*self.inner;
        let view = inner.view(page)?;
        if offset < HEADER_LEN {
            return Err(Error::BadPage {
                path: inner.dir.clone(),
                page,
                reason: format!("offset {offset} is inside the page header"),
            });
        }
        let mut out = Vec::new();
        let mut pos = offset;
        let mut bytes = 0u64;
        let mut need = 0u64;
        let more = |out: &Vec<PagedRecord>, bytes: u64| {
            out.len() < max_records.max(1) && (out.is_empty() || bytes < max_bytes)
        };
        'outer: while pos < view.limit && more(&out, bytes) {
            let f = inner.handle(page, &view)?;
            let budget = max_bytes.saturating_sub(bytes) + SLACK;
            let len = (view.limit - pos).min(budget.max(need));
            let buf = inner.read_range(&*f, page, pos, len)?;
            let mut i = 0usize;
            while i < buf.len() && more(&out, bytes) {
                match format::decode(&buf[i..], page, pos + i as u64, view.version) {
                    Ok((r, n)) => {
                        out.push(paged(page, pos + i as u64, r));
                        i += n;
                        bytes += n as u64;
                    }
                    Err(why) => {
                        let at = pos + i as u64;
                        let whole = whole_len(&buf[i..]);
                        if let Some(total) = whole.filter(|&t| at + t <= view.limit) {
                            if ((buf.len() - i) as u64) < total {
                                // Cut by the end of this read, not by the written end.
                                pos = at;
                                need = total;
                                continue 'outer;
                            }
                        }
                        if out.is_empty() {
                            return Err(Error::Corrupted(wal::Corruption {
                                path: inner.page_path(page),
                                offset: at,
                                reason: why.into(),
                            }));
                        }
                        // Return what is good; the next read from here reports it.
                        return Ok(ReadOut {
                            records: out,
                            next_offset: at,
                            page_done: false,
                        });
                    }
                }
            }
            pos += i as u64;
            need = 0;
        }
        let page_done = view.final_end == Some(pos) && view.limit == pos;
        Ok(ReadOut {
            records: out,
            next_offset: pos,
            page_done,
        })
    }

    /// `{(queue_id, tx_id): records}` of the written part of `page`. Blocks on file reads.
    pub fn count(&self, page: u64) -> Result<HashMap<(u64, u64), u64>> {
        let inner = &*self.inner;
        let view = inner.view(page)?;
        let mut counts = HashMap::new();
        if view.limit <= HEADER_LEN {
            return Ok(counts);
        }
        let f = inner.handle(page, &view)?;
        let buf = inner.read_range(&*f, page, HEADER_LEN, view.limit - HEADER_LEN)?;
        let mut i = 0usize;
        while i < buf.len() {
            let at = HEADER_LEN + i as u64;
            let corrupted = |why: &str| {
                Error::Corrupted(wal::Corruption {
                    path: inner.page_path(page),
                    offset: at,
                    reason: why.into(),
                })
            };
            let (payload, n) =
                format::payload_of(&buf[i..], page, at, view.version).map_err(corrupted)?;
            format::for_each_queue(payload, view.version, |q, tx| {
                *counts.entry((q, tx)).or_insert(0) += 1;
            })
            .map_err(corrupted)?;
            i += n;
        }
        Ok(counts)
    }
}

/// The total length the record header at the start of `b` claims, if it has one.
fn whole_len(b: &[u8]) -> Option<u64> {
    let h: [u8; 4] = b.get(0..4)?.try_into().ok()?;
    let len = u64::from(u32::from_le_bytes(h));
    (len <= format::MAX_PAYLOAD).then_some(RECORD_HEADER_LEN + len)
}

/// Reads a page file offline without modifying it: its page number, its records, and the
/// first bad spot `(offset, why)` if the records end before the file does.
#[allow(clippy::type_complexity)] // one plain tuple, as the Python side returns it
pub fn read_page_file(path: &Path) -> Result<(u64, Vec<PagedRecord>, Option<(u64, String)>)> {
    let b = std::fs::read(path).map_err(io_err("read", path))?;
    let format::Header { page, version } = match format::check_header(&b, None) {
        Ok(h) => h,
        Err(format::HeaderProblem::Foreign(reason)) => {
            return Err(Error::ForeignFile(wal::ForeignFile {
                path: path.to_path_buf(),
                reason,
            }))
        }
        Err(format::HeaderProblem::Torn(reason)) => {
            return Err(Error::Corrupted(wal::Corruption {
                path: path.to_path_buf(),
                offset: 0,
                reason,
            }))
        }
    };
    let mut records = Vec::new();
    let mut off = HEADER_LEN as usize;
    while off < b.len() {
        match format::decode(&b[off..], page, off as u64, version) {
            Ok((r, n)) => {
                records.push(paged(page, off as u64, r));
                off += n;
            }
            Err(why) => return Ok((page, records, Some((off as u64, why.to_owned())))),
        }
    }
    Ok((page, records, None))
}

/// The record read at `offset` of `page`, owned.
fn paged(page: u64, offset: u64, r: format::RecordView<'_>) -> PagedRecord {
    PagedRecord {
        page,
        offset,
        message_id: r.message_id,
        tx_id: r.tx_id,
        queue_offset: r.queue_offset,
        queue_ids: r.queue_ids,
        message: r.message.to_vec(),
    }
}
