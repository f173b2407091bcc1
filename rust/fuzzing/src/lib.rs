//! Fuzz targets of the storage readers that recovery uses, of the STOMP codec and of the
//! data plane that serves it: each takes the fuzzer's bytes and panics only when the reader
//! breaks its contract (docs/fuzzing.md).
//!
//! - [`journal_recovery`]: a journal written through the public API (operations chosen by
//!   the input) on an in-memory file system ([`memfs`]), closed, damaged (bytes flipped,
//!   files cut short, as the rest of the input says), and opened again. Recovery returns
//!   the records or an error that names the damage (`Corrupted` with file and offset,
//!   `ForeignFile`, `WrongFileSize`), never panics; undamaged files always open; and a
//!   journal that opened after damage opens again (what recovery repaired stays repaired).
//! - [`page_store_recovery`]: the same for a paging store (page files of an address).
//! - [`page_file`]: the input as a page file read by `read_page_file` (what `artemis-py
//!   data` prints): records with offsets inside the file, or a header error at offset 0.
//! - [`stomp_server`], [`stomp_client`]: the STOMP codec decoding what a client (a server)
//!   sends: no panic, the same conversation however the input is cut and whether events are
//!   taken one by one or in batches, and decode -> encode -> decode gives the same frame.
//! - [`data_plane`]: the same input sent by a client over loopback to a data plane
//!   (`rust/dataplane`), whose events and commands a harness handles in batches as Python
//!   does: the frames and the end the codec alone finds, and every reply read back in order.
//!
//! The fuzz crate (`fuzz/`, built by cargo-fuzz, outside the workspace) calls these; the
//! tests of this crate replay the committed corpus and regressions through them, so
//! `cargo test` keeps every crash found fixed.

// A fuzz harness: a panic is how it reports a finding (and replaying targets in `cargo test`
// is test code), so unwrap/expect stay allowed here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod data_plane;
pub mod memfs;
mod stomp;

pub use crate::data_plane::data_plane;
pub use crate::stomp::{stomp_client, stomp_server};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use journal::{Journal, JournalConfig, Op};
use paging::{NewRecord, PageStore};

use memfs::MemFs;

/// Reads the fuzzer's bytes as small numbers; past the end everything is 0.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let n = n.min(self.0.len());
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head.to_vec()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Damages the files in `dir` as the rest of `input` says (4 bytes each: which file, where,
/// and a byte to XOR there; 0 cuts the file short there instead). Returns whether anything
/// changed.
fn damage(fs: &MemFs, dir: &Path, input: &mut Input<'_>, unit: u64) -> bool {
    let paths: Vec<PathBuf> = fs
        .paths()
        .into_iter()
        .filter(|p| p.parent() == Some(dir))
        .collect();
    let mut changed = false;
    while !input.is_empty() && !paths.is_empty() {
        let path = &paths[usize::from(input.byte()) % paths.len()];
        let at = (u64::from(input.u16()) * unit) as usize;
        let xor = input.byte();
        fs.edit(path, |bytes| {
            if at < bytes.len() {
                if xor == 0 {
                    bytes.truncate(at);
                } else {
                    bytes[at] ^= xor;
                }
                changed = true;
            }
        });
    }
    changed
}

// --- journal ---------------------------------------------------------------------------------

const JOURNAL_DIR: &str = "/journal";
const JOURNAL_FILE_SIZE: u64 = 64 * 1024; // the smallest the journal allows

fn journal_config() -> JournalConfig {
    JournalConfig {
        directory: PathBuf::from(JOURNAL_DIR),
        file_size: JOURNAL_FILE_SIZE,
        min_files: 2,
        buffer_timeout: Duration::ZERO,
        datasync: false,
        compact_min_files: 0,
        ..JournalConfig::default()
    }
}

fn journal_op(input: &mut Input<'_>) -> Op {
    let kind = input.byte();
    let id = u64::from(input.byte() % 8); // few ids: updates and deletes find their records
    let tx_id = 100 + u64::from(input.byte() % 4);
    let len = usize::from(input.byte() % 64);
    let record_type = kind / 16;
    let payload = input.bytes(len);
    match kind % 9 {
        0 => Op::Add {
            id,
            record_type,
            payload,
        },
        1 => Op::Update {
            id,
            record_type,
            payload,
        },
        2 => Op::Delete { id },
        3 => Op::AddTx {
            tx_id,
            id,
            record_type,
            payload,
        },
        4 => Op::UpdateTx {
            tx_id,
            id,
            record_type,
            payload,
        },
        5 => Op::DeleteTx { tx_id, id },
        6 => Op::Prepare {
            tx_id,
            xid: payload,
        },
        7 => Op::Commit { tx_id },
        _ => Op::Rollback { tx_id },
    }
}

/// Whether an error from opening damaged files is one recovery may give: it names the
/// damage (and a `Corrupted` offset lies inside the file it names).
fn journal_error_ok(fs: &MemFs, err: &journal::Error) -> bool {
    match err {
        journal::Error::Corrupted(journal::Corruption { path, offset, .. }) => {
            *offset < fs.size(path).max(1)
        }
        journal::Error::ForeignFile(journal::ForeignFile { .. })
        | journal::Error::WrongFileSize { .. } => true,
        _ => false,
    }
}

/// See the crate doc.
pub fn journal_recovery(data: &[u8]) {
    let mut input = Input(data);
    let fs = Arc::new(MemFs::default());
    let (j, _) = Journal::open_with_fs(journal_config(), fs.clone()).expect("a new journal");
    for _ in 0..input.byte() % 32 {
        let op = journal_op(&mut input);
        match j.append(vec![op], input.byte() & 1 == 1) {
            Ok(())
            | Err(
                journal::Error::RecordNotFound { .. }
                | journal::Error::DuplicateRecord { .. }
                | journal::Error::Transaction { .. },
            ) => {}
            Err(e) => panic!("append failed: {e}"),
        }
    }
    j.close().expect("close");
    drop(j);
    let damaged = damage(&fs, Path::new(JOURNAL_DIR), &mut input, 1);
    match Journal::open_with_fs(journal_config(), fs.clone()) {
        Ok((j, _)) => j.close().expect("close after recovery"),
        Err(e) => {
            assert!(damaged, "undamaged files must open: {e}");
            assert!(journal_error_ok(&fs, &e), "unexpected error: {e:?}");
            return;
        }
    }
    // What recovery cut or repaired stays so: the files open again.
    let (j, _) = Journal::open_with_fs(journal_config(), fs).expect("second open after recovery");
    j.close().expect("close");
}

// --- paging ----------------------------------------------------------------------------------

const PAGING_DIR: &str = "/paging";
const PAGE_SIZE: u64 = 1024; // the smallest page size: records spread over several pages

fn paging_error_ok(fs: &MemFs, err: &paging::Error) -> bool {
    match err {
        paging::Error::Corrupted(journal::Corruption { path, offset, .. }) => {
            *offset < fs.size(path).max(1)
        }
        paging::Error::ForeignFile(journal::ForeignFile { .. })
        | paging::Error::NotAStore { .. }
        | paging::Error::BadPage { .. } => true,
        _ => false,
    }
}

/// See the crate doc.
pub fn page_store_recovery(data: &[u8]) {
    let mut input = Input(data);
    let fs = Arc::new(MemFs::default());
    let dir = Path::new(PAGING_DIR);
    let store = PageStore::open_with_fs(dir, PAGE_SIZE, Some("fuzz"), fs.clone()).expect("open");
    for n in 0..u64::from(input.byte() % 16) {
        let queues: Vec<u64> = (0..input.byte() % 4).map(u64::from).collect();
        let len = usize::from(input.u16() % 1500); // some records larger than a page
        let message = input.bytes(len);
        let record = NewRecord {
            message_id: n + 1,
            tx_id: u64::from(input.byte() % 3),
            queue_offset: n,
            queue_ids: &queues,
            message: &message,
        };
        let (ticket, _) = store.append(&[record], false, false).expect("append");
        store.wait(ticket).expect("written");
    }
    store.close().expect("close");
    drop(store);
    let damaged = damage(&fs, dir, &mut input, 1);
    match PageStore::open_with_fs(dir, PAGE_SIZE, None, fs.clone()) {
        Ok(store) => store.close().expect("close after recovery"),
        Err(e) => {
            assert!(damaged, "undamaged pages must open: {e}");
            assert!(paging_error_ok(&fs, &e), "unexpected error: {e:?}");
            return;
        }
    }
    let store = PageStore::open_with_fs(dir, PAGE_SIZE, None, fs).expect("second open");
    store.close().expect("close");
}

/// See the crate doc.
pub fn page_file(data: &[u8]) {
    let path = std::env::temp_dir().join(format!("artemis-py-fuzz-page-{}", std::process::id()));
    std::fs::write(&path, data).expect("write the page file");
    let result = paging::read_page_file(&path);
    let _ = std::fs::remove_file(&path);
    match result {
        Ok((_, records, bad)) => {
            let mut end = paging::format::HEADER_LEN;
            for r in &records {
                assert_eq!(r.offset, end, "records follow each other");
                end = r.offset
                    + paging::format::RECORD_HEADER_LEN
                    + u64::from(u32::from_le_bytes(
                        data[r.offset as usize..r.offset as usize + 4]
                            .try_into()
                            .expect("4 bytes"),
                    ));
                assert!(end <= data.len() as u64, "a record ends past the file");
            }
            if let Some((offset, _)) = bad {
                assert_eq!(offset, end, "the bad spot is where the records end");
            } else {
                assert_eq!(end, data.len() as u64, "the records fill the file");
            }
        }
        Err(paging::Error::ForeignFile(journal::ForeignFile { .. })) => {}
        Err(paging::Error::Corrupted(journal::Corruption { offset, .. })) => assert_eq!(offset, 0),
        Err(e) => panic!("unexpected error: {e:?}"),
    }
}
