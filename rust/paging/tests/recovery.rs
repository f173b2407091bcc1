//! Recovery: a torn tail of the last page is cut at every byte, corruption before it is an
//! error naming file and offset, foreign files are refused, a header-torn last page is
//! repaired.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod common;

use std::path::Path;

use common::*;
use paging::format::{self, HEADER_LEN};
use paging::{Error, PageStore};

/// Writes `n` records of `len` bytes into a fresh store in `dir` and closes it; returns
/// the position and length of the last record.
fn fill(dir: &Path, n: u64, len: usize) -> (u64, u64, u64) {
    let store = PageStore::open(dir, PAGE, Some("a")).unwrap();
    let recs: Vec<_> = (1..=n).map(|i| record(i, len)).collect();
    let t = append(&store, &recs, true);
    store.wait(t).unwrap();
    store.close().unwrap();
    let (page, offset) = {
        let all = read_all(&store);
        let last = all.last().unwrap();
        (last.page, last.offset)
    };
    (page, offset, format::record_len(2, len))
}

fn truncate(path: &Path, len: u64) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.set_len(len).unwrap();
}

#[test]
fn torn_tail_is_cut_at_every_byte_of_the_last_record() {
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    // 1000-byte messages, 3 per page: 5 records end on page 2, its 2nd record last.
    let (page, offset, len) = fill(&src, 5, 1000);
    assert_eq!(page, 2);
    for cut in 0..len {
        let dir = base.path().join(format!("cut{cut}"));
        std::fs::create_dir(&dir).unwrap();
        for entry in std::fs::read_dir(&src).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
        }
        let page_path = dir.join(format::file_name(page));
        truncate(&page_path, offset + cut);
        let store = PageStore::open(&dir, PAGE, None).unwrap();
        let want_torn = (cut > 0).then_some((page, offset));
        assert_eq!(store.torn(), want_torn, "cut {cut}");
        assert_eq!(std::fs::metadata(&page_path).unwrap().len(), offset);
        let got = read_all(&store);
        assert_eq!(ids(&got), vec![1, 2, 3, 4], "cut {cut}");
        assert_whole(&got, |_| 1000);
        // Appends go on in a fresh page, and survive another reopen.
        let t = append(&store, &[record(6, 1000)], true);
        store.wait(t).unwrap();
        drop(store);
        let store = PageStore::open(&dir, PAGE, None).unwrap();
        assert_eq!(store.torn(), None);
        assert_eq!(ids(&read_all(&store)), vec![1, 2, 3, 4, 6]);
        drop(store);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn garbage_after_the_last_record_is_cut_too() {
    let dir = tempfile::tempdir().unwrap();
    let (page, offset, len) = fill(dir.path(), 2, 100);
    let page_path = dir.path().join(format::file_name(page));
    // Overwrite one byte in the middle of the last record: its CRC fails.
    let mut bytes = std::fs::read(&page_path).unwrap();
    bytes[(offset + len / 2) as usize] ^= 0x40;
    std::fs::write(&page_path, &bytes).unwrap();
    let store = PageStore::open(dir.path(), PAGE, None).unwrap();
    assert_eq!(store.torn(), Some((page, offset)));
    assert_eq!(ids(&read_all(&store)), vec![1]);
}

#[test]
fn a_flipped_byte_in_an_earlier_page_is_corruption_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 5, 1000);
    let first = dir.path().join(format::file_name(1));
    // The second record of page 1 starts at 32 + 1042.
    let second = HEADER_LEN + format::record_len(2, 1000);
    let mut bytes = std::fs::read(&first).unwrap();
    bytes[(second + 20) as usize] ^= 1;
    std::fs::write(&first, &bytes).unwrap();
    let before = std::fs::read(&first).unwrap();
    let err = PageStore::open(dir.path(), PAGE, None).err().unwrap();
    match &err {
        Error::Corrupted(paging::Corruption { path, offset, .. }) => {
            assert_eq!(path, &first);
            assert_eq!(*offset, second);
        }
        other => panic!("{other:?}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("000000001.page") && text.contains(&second.to_string()),
        "{text}"
    );
    // Nothing was repaired behind the user's back.
    assert_eq!(std::fs::read(&first).unwrap(), before);
    // The offline reader shows the same spot without changing the file.
    let (page, records, bad) = paging::read_page_file(&first).unwrap();
    assert_eq!((page, records.len()), (1, 1));
    assert_eq!(bad.unwrap().0, second);
    assert_eq!(std::fs::read(&first).unwrap(), before);
}

#[test]
fn another_format_or_version_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 1, 10);
    let path = dir.path().join(format::file_name(1));
    let good = std::fs::read(&path).unwrap();

    // Another format (a journal file's magic).
    let mut b = good.clone();
    b[0..8].copy_from_slice(b"AMQPYJNL");
    std::fs::write(&path, &b).unwrap();
    let err = PageStore::open(dir.path(), PAGE, None).err().unwrap();
    assert!(
        matches!(err, Error::ForeignFile(paging::ForeignFile { ref path, .. }) if path.ends_with("000000001.page")),
        "{err}"
    );
    assert!(paging::read_page_file(&path).is_err());

    // Another version, header checksum recomputed so it is not mistaken for a torn header.
    let mut b = good.clone();
    b[8..12].copy_from_slice(&3u32.to_le_bytes());
    let crc = crc32c::crc32c(&b[0..24]);
    b[24..28].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, &b).unwrap();
    let err = PageStore::open(dir.path(), PAGE, None).err().unwrap();
    assert!(err.to_string().contains("version 3"), "{err}");

    // A page file whose header names another page.
    std::fs::write(&path, &good).unwrap();
    std::fs::rename(&path, dir.path().join(format::file_name(7))).unwrap();
    let err = PageStore::open(dir.path(), PAGE, None).err().unwrap();
    assert!(
        matches!(err, Error::ForeignFile(paging::ForeignFile { .. })),
        "{err}"
    );
}

#[test]
fn a_header_torn_last_page_is_repaired_not_an_error() {
    for len in [0u64, 5, HEADER_LEN - 1] {
        let dir = tempfile::tempdir().unwrap();
        fill(dir.path(), 5, 1000);
        // A crash right after creating page 3: its file exists with part of a header.
        let p3 = dir.path().join(format::file_name(3));
        std::fs::write(&p3, &format::header(3)[..len as usize]).unwrap();
        let store = PageStore::open(dir.path(), PAGE, None).unwrap();
        assert_eq!(store.torn(), Some((3, HEADER_LEN)));
        assert_eq!(ids(&read_all(&store)), vec![1, 2, 3, 4, 5]);
        assert_eq!(store.end(), (4, HEADER_LEN));
        drop(store);
        // A torn header in an earlier page is corruption.
        std::fs::write(dir.path().join(format::file_name(2)), b"").unwrap();
        let err = PageStore::open(dir.path(), PAGE, None).err().unwrap();
        assert!(
            matches!(err, Error::Corrupted(paging::Corruption { offset: 0, .. })),
            "{err}"
        );
    }
}

#[test]
fn a_directory_that_is_not_a_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let err = PageStore::open(dir.path(), PAGE, None).err().unwrap();
    assert!(matches!(err, Error::NotAStore { .. }), "{err}");
    fill(dir.path(), 1, 10);
    std::fs::remove_file(dir.path().join("address.txt")).unwrap();
    let err = PageStore::open(dir.path(), PAGE, Some("a")).err().unwrap();
    assert!(err.to_string().contains("no address.txt"), "{err}");
}

/// Writes page `page` of a store in `dir` as a version 1 build did: test records `ids`,
/// without queue offsets.
fn write_v1_page(dir: &Path, page: u64, ids: std::ops::RangeInclusive<u64>, len: usize) {
    let mut b = format::header_of_version(page, 1).to_vec();
    for id in ids {
        let (m, t, q, body) = record(id, len);
        let fields = format::Fields {
            message_id: m,
            tx_id: t,
            queue_offset: 0, // not written in version 1
            queue_ids: &q,
            message: &body,
        };
        let at = b.len() as u64;
        format::encode_version(&mut b, page, at, &fields, 1);
    }
    std::fs::write(dir.join(format::file_name(page)), b).unwrap();
}

#[test]
fn version_1_pages_stay_readable_beside_version_2_ones() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("address.txt"), "a").unwrap();
    write_v1_page(dir.path(), 1, 1..=3, 100);
    write_v1_page(dir.path(), 2, 4..=5, 100);
    // The last v1 page has a torn tail: cut, in its own layout.
    let p2 = dir.path().join(format::file_name(2));
    let full = std::fs::metadata(&p2).unwrap().len();
    truncate(&p2, full - 3);

    let store = PageStore::open(dir.path(), PAGE, None).unwrap();
    assert_eq!(store.torn().map(|t| t.0), Some(2));
    assert_eq!(store.page_version(1), Some(1));
    assert_eq!(store.page_version(3), Some(2)); // the page appends go to
    let t = append(&store, &[record(6, 100), record(7, 100)], true);
    store.wait(t).unwrap();
    let got = read_all(&store);
    assert_eq!(ids(&got), vec![1, 2, 3, 4, 6, 7]);
    for r in &got {
        let (m, tx, q, body) = record(r.message_id, 100);
        assert_eq!((r.tx_id, &r.queue_ids, &r.message), (tx, &q, &body));
        // A version 1 record's queue offset is its message id; a new record's is its own.
        let want = if r.page <= 2 { m } else { queue_offset(m) };
        assert_eq!(r.queue_offset, want, "record {m}");
    }
    let counts = store.count(1).unwrap();
    assert_eq!(counts.values().sum::<u64>(), 6); // 3 records x 2 queues
    drop(store);

    // Offline reading, and a reopen that finds both versions.
    let (page, records, bad) = paging::read_page_file(&p2).unwrap();
    assert_eq!((page, records.len(), bad), (2, 1, None));
    assert_eq!(records[0].queue_offset, 4);
    let store = PageStore::open(dir.path(), PAGE, None).unwrap();
    assert_eq!(ids(&read_all(&store)), vec![1, 2, 3, 4, 6, 7]);
    let new_page = std::fs::read(dir.path().join(format::file_name(3))).unwrap();
    assert_eq!(format::check_header(&new_page, Some(3)).unwrap().version, 2);
}
