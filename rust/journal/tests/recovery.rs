//! Recovery: torn tails are cut, corruption is reported with file and offset.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod common;

use std::path::{Path, PathBuf};

use common::*;
use journal::{Error, Fault, FaultyFileSystem, FsOp, Journal, JournalConfig};
use rand::{Rng, SeedableRng};

/// Writes `batches` sync appends of a few records each; returns the model after each one.
fn write_batches(dir: &Path, n: u64) -> Vec<Model> {
    let (j, _) = open(dir);
    let mut model = Model::default();
    let mut after = Vec::new();
    for b in 0..n {
        let mut ops = vec![
            add(b * 10, &payload(b, 150)),
            add(b * 10 + 1, &payload(b + 7, 33)),
        ];
        if b > 0 {
            ops.push(update((b - 1) * 10, b"changed"));
            ops.push(del((b - 1) * 10 + 1));
        }
        for op in &ops {
            model.apply(op);
        }
        j.append(ops, true).unwrap();
        after.push(model.clone());
    }
    j.close().unwrap();
    after
}

fn current_file(dir: &Path) -> PathBuf {
    normal_data_files(dir).pop().unwrap().1
}

/// Whether the bytes at `offset` carry the batch magic and the file's id.
fn looks_like_ours(file: &Path, offset: u64) -> bool {
    let b = std::fs::read(file).unwrap();
    let o = offset as usize;
    b[o..o + 4] == 0x4254_4A41u32.to_le_bytes() && b[o + 8..o + 16] == b[16..24]
}

fn reopen_expect(dir: &Path, model: &Model) -> Option<(PathBuf, u64)> {
    let (j, rep) = Journal::open(JournalConfig {
        datasync: false,
        ..config(dir)
    })
    .unwrap();
    assert_eq!(rep.records, model.list());
    drop(j);
    rep.torn_tail
}

#[test]
fn torn_tail_at_every_offset() {
    let dir = tempfile::tempdir().unwrap();
    let models = write_batches(dir.path(), 4);
    let file = current_file(dir.path());
    let original = std::fs::read(&file).unwrap();
    let last = *batches(&file).last().unwrap();
    for cut in last.offset..last.end {
        std::fs::write(&file, &original).unwrap();
        let zeros = vec![0u8; (last.end - cut) as usize];
        patch(&file, cut, &zeros);
        let expected = if cut >= last.body_end {
            &models[3]
        } else {
            &models[2]
        };
        let ours = looks_like_ours(&file, last.offset);
        let torn = reopen_expect(dir.path(), expected);
        // Only bytes that still start like a batch of this file count as a torn tail; a
        // cut through the magic or the file id can leave nothing recognisable.
        let want = (ours && cut < last.body_end).then(|| (file.clone(), last.offset));
        assert_eq!(torn, want, "cut at {cut}");
        // The tail was cut for good: appending resumes there and survives a reopen.
        let (j, rep) = open(dir.path());
        assert!(rep.torn_tail.is_none(), "cut at {cut}");
        j.append(vec![add(1_000_000, b"after")], true).unwrap();
        drop(j);
        let mut m = expected.clone();
        m.apply(&add(1_000_000, b"after"));
        assert_eq!(reopen_expect(dir.path(), &m), None, "cut at {cut}");
        // Restore the directory state for the next cut.
        let (j, _) = open(dir.path());
        j.append(vec![del(1_000_000)], true).unwrap();
        drop(j);
    }
}

#[test]
fn torn_tail_with_stale_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let models = write_batches(dir.path(), 3);
    let file = current_file(dir.path());
    let original = std::fs::read(&file).unwrap();
    let last = *batches(&file).last().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for cut in (last.offset + 16..last.body_end).step_by(3) {
        std::fs::write(&file, &original).unwrap();
        let junk: Vec<u8> = (cut..last.end + 64).map(|_| rng.gen()).collect();
        patch(&file, cut, &junk);
        let torn = reopen_expect(dir.path(), &models[1]);
        assert_eq!(torn, Some((file.clone(), last.offset)), "cut at {cut}");
    }
}

#[test]
fn bit_flips_before_the_tail_are_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let models = write_batches(dir.path(), 5);
    let file = current_file(dir.path());
    let original = std::fs::read(&file).unwrap();
    let bs = batches(&file);
    assert_eq!(bs.len(), 5);
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    for (k, b) in bs.iter().enumerate() {
        let bits: Vec<u64> = (0..40)
            .map(|_| rng.gen_range(b.offset * 8..b.body_end * 8))
            .chain([b.offset * 8, b.body_end * 8 - 1])
            .collect();
        for bit in bits {
            std::fs::write(&file, &original).unwrap();
            flip_bit(&file, bit);
            let ours = looks_like_ours(&file, b.offset);
            let r = Journal::open(JournalConfig {
                datasync: false,
                ..config(dir.path())
            });
            if k + 1 < bs.len() {
                // A later batch says this one was durable.
                match r {
                    Err(Error::Corrupted(journal::Corruption { path, offset, .. })) => {
                        assert_eq!((path, offset), (file.clone(), b.offset), "bit {bit}");
                    }
                    other => panic!("bit {bit} in batch {k}: {:?}", other.map(|_| ())),
                }
            } else {
                let (_, rep) = r.unwrap();
                assert_eq!(rep.records, models[k - 1].list(), "bit {bit}");
                assert_eq!(
                    rep.torn_tail,
                    ours.then(|| (file.clone(), b.offset)),
                    "bit {bit}"
                );
            }
        }
    }
    // Bits in the padding after a batch are not covered and do no harm.
    std::fs::write(&file, &original).unwrap();
    if bs[0].end > bs[0].body_end {
        flip_bit(&file, bs[0].body_end * 8);
        let (_, rep) = open(dir.path());
        assert_eq!(rep.records, models[4].list());
    }
}

/// Fills several files with sync appends; returns the final model.
fn write_files(dir: &Path, files: usize) -> Model {
    let (j, _) = open(dir);
    let mut model = Model::default();
    let mut i = 0;
    while j.stats().data_files < files {
        let op = add(i, &payload(i, 3_000 + i as usize % 500));
        model.apply(&op);
        j.append(vec![op], true).unwrap();
        i += 1;
    }
    for _ in 0..3 {
        let op = add(i, b"tail");
        model.apply(&op);
        j.append(vec![op], true).unwrap();
        i += 1;
    }
    j.close().unwrap();
    model
}

#[test]
fn corruption_in_earlier_files() {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), 3);
    let files = normal_data_files(dir.path());
    assert!(files.len() >= 3);
    let cases = [
        (0usize, 0usize),                    // first batch of the oldest file
        (0, batches(&files[0].1).len() - 1), // last batch of a full file
        (1, 0),
        (1, batches(&files[1].1).len() - 1),
    ];
    for (f, k) in cases {
        let path = &files[f].1;
        let original = std::fs::read(path).unwrap();
        let b = batches(path)[k];
        flip_bit(path, (b.offset + 50) * 8 + 3);
        match Journal::open(config(dir.path())) {
            Err(Error::Corrupted(journal::Corruption {
                path: p, offset, ..
            })) => {
                assert_eq!((&p, offset), (path, b.offset), "file {f} batch {k}");
            }
            other => panic!("file {f} batch {k}: {:?}", other.map(|_| ())),
        }
        std::fs::write(path, &original).unwrap();
    }
    let (_, rep) = open(dir.path());
    assert!(rep.torn_tail.is_none());
}

/// Waits until background I/O (pre-allocation, reclaim) has stopped.
fn settle(fs: &FaultyFileSystem) {
    let mut last = fs.op_count();
    loop {
        std::thread::sleep(std::time::Duration::from_millis(30));
        let now = fs.op_count();
        if now == last {
            return;
        }
        last = now;
    }
}

#[test]
fn torn_first_batch_of_a_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultyFileSystem::std();
    let mut model = Model::default();
    let mut acked = Model::default();
    {
        let (j, _) = open_fs(dir.path(), fs.clone());
        let mut i = 0;
        loop {
            let files = j.stats().data_files;
            let op = add(i, &payload(i, 4_000));
            // The write that moves into a new file tears inside its first batch.
            let will_roll = {
                let cur = normal_data_files(dir.path());
                let last = cur.last().map(|(_, p)| batches(p));
                last.is_some_and(|b| b.last().is_some_and(|b| b.end + 4_100 > FILE_SIZE))
            };
            if will_roll && files >= 2 {
                // The writer moves into the free file with the lowest id, once the
                // housekeeper has one ready (and re-stamps it first if its id is not above
                // the current file's: then try again at the next file switch).
                let free = || {
                    data_files(dir.path())
                        .into_iter()
                        .filter_map(|p| Some((try_header(&p)?, p)))
                        .filter(|(h, _)| h.flags == 0)
                        .min_by_key(|(h, _)| h.id)
                };
                assert!(wait_for(std::time::Duration::from_secs(10), || free().is_some()));
                settle(&fs);
                let (h, next) = free().unwrap();
                let current = normal_data_files(dir.path()).last().unwrap().0.id;
                if h.id < current {
                    model.apply(&op);
                    j.append(vec![op], true).unwrap();
                    acked = model.clone();
                    i += 1;
                    continue;
                }
                fs.inject_at(
                    Some(FsOp::Write),
                    &next,
                    0,
                    Fault::TornWrite(64 + 40 + 1_000),
                );
            }
            model.apply(&op);
            match j.append(vec![op], true) {
                Ok(()) => acked = model.clone(),
                Err(Error::Failed(_)) => break,
                Err(e) => panic!("{e}"),
            }
            i += 1;
            assert!(i < 1000);
        }
    }
    let newest = normal_data_files(dir.path()).pop().unwrap().1;
    let (j, rep) = open(dir.path());
    assert_eq!(rep.records, acked.list());
    assert_eq!(rep.torn_tail, Some((newest, 64)));
    j.append(vec![add(99_999, b"x")], true).unwrap();
    drop(j);
    acked.apply(&add(99_999, b"x"));
    let (_, rep) = open(dir.path());
    assert_eq!(rep.records, acked.list());
    assert!(rep.torn_tail.is_none());
}

#[test]
fn crash_cycles_keep_exactly_what_was_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let mut model = Model::default();
    let mut next_id = 0u64;
    for cycle in 0..25 {
        let fs = FaultyFileSystem::std();
        let (j, rep) = Journal::open_with_fs(config(dir.path()), fs.clone()).unwrap();
        assert_eq!(rep.records, model.list(), "cycle {cycle}");
        let fault = match rng.gen_range(0..4) {
            0 => Fault::Crash,
            1 => Fault::TornWrite(rng.gen_range(0..3_000)),
            2 => Fault::Error(libc::EIO),
            _ => Fault::Error(libc::ENOSPC),
        };
        let kind = [None, Some(FsOp::Write), Some(FsOp::SyncData)][rng.gen_range(0..3)];
        fs.inject(kind, rng.gen_range(0..12), fault);
        for _ in 0..20 {
            let mut ops = Vec::new();
            let mut m = model.clone();
            for _ in 0..rng.gen_range(1..4) {
                let live: Vec<u64> = m.records.keys().copied().collect();
                let op = match rng.gen_range(0..10) {
                    0..=5 => {
                        next_id += 1;
                        add(next_id, &payload(next_id, rng.gen_range(0..2_500)))
                    }
                    6 | 7 if !live.is_empty() => update(live[rng.gen_range(0..live.len())], b"u"),
                    _ if !live.is_empty() => del(live[rng.gen_range(0..live.len())]),
                    _ => continue,
                };
                m.apply(&op);
                ops.push(op);
            }
            match j.append(ops, true) {
                Ok(()) => model = m,
                Err(Error::Failed(_)) => {
                    // The failed batch may or may not have reached the file: either
                    // outcome is allowed, nothing else is.
                    drop(j);
                    let (_, rep) = open(dir.path());
                    if rep.records != model.list() {
                        assert_eq!(rep.records, m.list(), "cycle {cycle}");
                        model = m;
                    }
                    break;
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
}

#[test]
fn stale_bytes_from_earlier_uses_never_come_back() {
    // Small files, lots of churn: every file is reused many times, and each use leaves
    // valid-looking batches of its earlier ids behind.
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::default();
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let mut id = 0u64;
    for cycle in 0..8 {
        let fs = FaultyFileSystem::std();
        let (j, rep) = Journal::open_with_fs(config(dir.path()), fs.clone()).unwrap();
        assert_eq!(rep.records, model.list(), "cycle {cycle}");
        for _ in 0..60 {
            let op = add(id, &payload(id, rng.gen_range(500..3_000)));
            model.apply(&op);
            id += 1;
            let mut ops = vec![op];
            let live: Vec<u64> = model.records.keys().copied().collect();
            if live.len() > 3 {
                let victim = live[rng.gen_range(0..live.len() - 1)];
                ops.push(del(victim));
                model.apply(&del(victim));
            }
            j.append(ops, rng.gen_bool(0.3)).unwrap();
        }
        // Crash (no close) at a random point of the next appends.
        fs.inject(None, rng.gen_range(0..5), Fault::Crash);
        let mut m = model.clone();
        let op = add(id, b"maybe");
        m.apply(&op);
        id += 1;
        if j.append(vec![op], true).is_ok() {
            model = m.clone();
        }
        drop(j);
        let (_, rep) = open(dir.path());
        if rep.records != model.list() {
            assert_eq!(rep.records, m.list());
            model = m;
        }
    }
}
