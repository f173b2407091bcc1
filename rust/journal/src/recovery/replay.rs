//! Recovery phase 3: replay of the data files into an index, and where the chain of
//! batches ends.

use super::{apply_batch, corrupted, read_file, Found};
use crate::config::Cfg;
use crate::format::{parse_batch, scan_batches, Parsed, ScanHit, FILE_HEADER_LEN};
use crate::index::{Data, FileId, Index};
use crate::Result;

/// Where the chain of normal files ends.
#[derive(Clone, Copy)]
pub(super) struct ChainEnd {
    /// The file it ends in, as a position in the normal files.
    pub(super) file: usize,
    /// Where the next batch would have been.
    pub(super) offset: usize,
    /// Whether something written by this journal lies beyond, in that file or a later one.
    pub(super) ours_beyond: bool,
}

/// What replay rebuilt.
pub(super) struct Replayed {
    pub(super) ix: Index<Data>,
    /// The normal data files by file id, as positions in `found`.
    pub(super) normal: Vec<usize>,
    /// The sequence number of the last batch read.
    pub(super) last_seq: u64,
    /// None when there are no normal files.
    pub(super) end: Option<ChainEnd>,
}

/// Replays the data files into an index: compacted files first (each must be intact up to
/// its recorded end), then the chain of normal files by id. Errors if the chain's end is
/// corruption rather than a torn tail.
pub(super) fn replay(cfg: &Cfg, found: &[(FileId, Found)]) -> Result<Replayed> {
    let mut compacted: Vec<usize> = Vec::new();
    let mut normal: Vec<usize> = Vec::new();
    for (i, (_, f)) in found.iter().enumerate() {
        if f.header.is_data() && f.header.is_compacted() {
            compacted.push(i);
        } else if f.header.is_data() {
            normal.push(i);
        }
    }
    compacted.sort_by_key(|&i| found[i].1.header.file_id);
    normal.sort_by_key(|&i| found[i].1.header.file_id);
    let mut r = Replay {
        cfg,
        ix: Index::<Data>::default(),
        buf: Vec::new(),
        last_seq: 0,
    };
    for &i in compacted.iter().chain(&normal) {
        r.ix.add_file(found[i].1.header.file_id);
    }
    for &i in &compacted {
        r.compacted_file(&found[i].1)?;
    }
    let end = r.chain(found, &normal)?;
    if let Some(end) = end {
        r.check_nothing_durable_after(found, &normal, end)?;
    }
    Ok(Replayed {
        ix: r.ix,
        normal,
        last_seq: r.last_seq,
        end,
    })
}

/// Replay's state: the index being rebuilt and the last batch of the chain read.
struct Replay<'a> {
    cfg: &'a Cfg,
    ix: Index<Data>,
    /// One file's contents at a time.
    buf: Vec<u8>,
    /// The sequence number of the last batch read.
    last_seq: u64,
}

impl Replay<'_> {
    /// Replays a compacted file, which must hold consecutive valid batches up to its end.
    fn compacted_file(&mut self, f: &Found) -> Result<()> {
        let id = f.header.file_id;
        let end = f.header.data_end as usize;
        if end < FILE_HEADER_LEN || end as u64 > self.cfg.file_size {
            return Err(corrupted(&f.path, 0, format!("bad data end {end}")));
        }
        read_file(f, &mut self.buf, self.cfg.file_size)?;
        let mut off = FILE_HEADER_LEN;
        let mut seq = f.header.first_seq;
        while off < end {
            match parse_batch(&self.buf[..end], off, id) {
                Parsed::Valid(b) if b.seq == seq => {
                    apply_batch(&mut self.ix, id, &b);
                    off += b.len;
                    seq += 1;
                }
                Parsed::Valid(b) => {
                    return Err(corrupted(
                        &f.path,
                        off as u64,
                        format!("batch {} where batch {seq} belongs", b.seq),
                    ))
                }
                Parsed::Invalid(reason) => return Err(corrupted(&f.path, off as u64, reason)),
                Parsed::NotOurs | Parsed::End => {
                    return Err(corrupted(&f.path, off as u64, "compacted data missing"))
                }
            }
        }
        Ok(())
    }

    /// Follows the chain of batches through the normal files (`normal`, positions in
    /// `found`); returns where it ends.
    fn chain(&mut self, found: &[(FileId, Found)], normal: &[usize]) -> Result<Option<ChainEnd>> {
        self.last_seq = normal
            .first()
            .map_or(0, |&i| found[i].1.header.first_seq.saturating_sub(1));
        let mut prev_end = FILE_HEADER_LEN;
        for (k, &i) in normal.iter().enumerate() {
            let f = &found[i].1;
            let p = self.last_seq;
            if k > 0 && f.header.first_seq != p + 1 {
                if f.header.first_seq <= p {
                    return Err(corrupted(
                        &f.path,
                        0,
                        format!(
                            "file starts at batch {} but batch {p} was read before it",
                            f.header.first_seq
                        ),
                    ));
                }
                // Batches at the end of the previous file are missing.
                return Ok(Some(ChainEnd {
                    file: k - 1,
                    offset: prev_end,
                    ours_beyond: true,
                }));
            }
            let (off, ours) = self.normal_file(f)?;
            prev_end = off;
            if ours {
                return Ok(Some(ChainEnd {
                    file: k,
                    offset: off,
                    ours_beyond: true,
                }));
            }
        }
        Ok(normal.len().checked_sub(1).map(|k| ChainEnd {
            file: k,
            offset: prev_end,
            ours_beyond: false,
        }))
    }

    /// Replays the batches of a normal file that continue the chain; returns the offset
    /// where the chain stops in it and whether something of ours lies beyond it there.
    /// A valid batch beyond it that says a batch after the chain was durable makes the
    /// stop corruption.
    fn normal_file(&mut self, f: &Found) -> Result<(usize, bool)> {
        let id = f.header.file_id;
        read_file(f, &mut self.buf, self.cfg.file_size)?;
        let mut off = FILE_HEADER_LEN;
        let mut ours = loop {
            match parse_batch(&self.buf, off, id) {
                Parsed::Valid(b) if b.seq == self.last_seq + 1 => {
                    apply_batch(&mut self.ix, id, &b);
                    self.last_seq = b.seq;
                    off += b.len;
                }
                Parsed::Valid(_) | Parsed::Invalid(_) => break true,
                Parsed::NotOurs | Parsed::End => break false,
            }
        };
        let p = self.last_seq;
        for hit in scan_batches(&self.buf, off + 1, id) {
            ours = true;
            if let ScanHit::Valid(b) = hit {
                if b.durable_through > p {
                    return Err(corrupted(
                        &f.path,
                        off as u64,
                        format!(
                            "batch {} is unreadable but batch {} at offset {} says it was durable",
                            p + 1,
                            b.seq,
                            b.offset
                        ),
                    ));
                }
            }
        }
        Ok((off, ours))
    }

    /// Nothing after the end may claim to depend on a batch beyond it: a later normal
    /// file whose header or one of whose batches says so makes the end corruption.
    fn check_nothing_durable_after(
        &mut self,
        found: &[(FileId, Found)],
        normal: &[usize],
        end: ChainEnd,
    ) -> Result<()> {
        let at = &found[normal[end.file]].1.path;
        let p = self.last_seq;
        for &i in &normal[end.file + 1..] {
            let f = &found[i].1;
            if let Some(d) = self.durable_claim(f)? {
                return Err(corrupted(
                    at,
                    end.offset as u64,
                    format!(
                        "batch {} is unreadable but {} says batch {d} was durable",
                        p + 1,
                        f.path.display()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A batch after the last one read that `f` says was durable, if any.
    fn durable_claim(&mut self, f: &Found) -> Result<Option<u64>> {
        let p = self.last_seq;
        if f.header.durable_through > p {
            return Ok(Some(f.header.durable_through));
        }
        read_file(f, &mut self.buf, self.cfg.file_size)?;
        Ok(
            scan_batches(&self.buf, FILE_HEADER_LEN, f.header.file_id).find_map(|h| match h {
                ScanHit::Valid(b) if b.durable_through > p => Some(b.durable_through),
                _ => None,
            }),
        )
    }
}
