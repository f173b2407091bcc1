//! Compaction keeps exactly the live set: randomized model tests with transactions,
//! reopens and concurrent appends; automatic compaction.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use journal::{Journal, JournalConfig, Op, PreparedTransaction, RecordInfo, Update};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The journal's semantics, transactions included.
#[derive(Default, Clone, Debug)]
struct TxModel {
    /// Committed records: the plain-record semantics shared with the other tests.
    base: Model,
    /// Open transactions: ops so far and the xid once prepared.
    txs: BTreeMap<u64, (Vec<Op>, Option<Vec<u8>>)>,
    next_id: u64,
    next_tx: u64,
}

impl TxModel {
    fn records(&self) -> &BTreeMap<u64, RecordInfo> {
        &self.base.records
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Add { .. } | Op::Update { .. } => self.base.apply(op),
            Op::Delete { id } => {
                assert!(
                    self.records().contains_key(id),
                    "delete of a dead record {id}"
                );
                self.base.apply(op);
            }
            Op::AddTx { tx_id, .. } | Op::UpdateTx { tx_id, .. } | Op::DeleteTx { tx_id, .. } => {
                self.txs.entry(*tx_id).or_default().0.push(op.clone());
            }
            Op::Prepare { tx_id, xid } => self.txs.entry(*tx_id).or_default().1 = Some(xid.clone()),
            Op::Commit { tx_id } => {
                for op in self.txs.remove(tx_id).unwrap().0 {
                    match op {
                        Op::AddTx {
                            id,
                            record_type,
                            payload,
                            ..
                        } => self.apply(&Op::Add {
                            id,
                            record_type,
                            payload,
                        }),
                        Op::UpdateTx {
                            id,
                            record_type,
                            payload,
                            ..
                        } => {
                            if let Some(r) = self.base.records.get_mut(&id) {
                                r.updates.push(Update {
                                    record_type,
                                    payload,
                                });
                            }
                        }
                        Op::DeleteTx { id, .. } => {
                            self.base.records.remove(&id);
                        }
                        _ => unreachable!(),
                    }
                }
            }
            Op::Rollback { tx_id } => {
                self.txs.remove(tx_id).unwrap();
            }
        }
    }

    fn prepared(&self) -> Vec<PreparedTransaction> {
        self.txs
            .iter()
            .filter_map(|(&tx_id, (ops, xid))| {
                xid.as_ref().map(|x| PreparedTransaction {
                    tx_id,
                    xid: x.clone(),
                    ops: ops.clone(),
                })
            })
            .collect()
    }

    /// What reopening does: unprepared transactions are rolled back.
    fn reopened(&mut self) -> usize {
        let before = self.txs.len();
        self.txs.retain(|_, (_, xid)| xid.is_some());
        before - self.txs.len()
    }

    fn reserved_by(&self, id: u64) -> Option<u64> {
        self.txs.iter().find_map(|(&t, (ops, _))| {
            ops.iter()
                .any(|o| matches!(o, Op::AddTx { id: i, .. } if *i == id))
                .then_some(t)
        })
    }

    /// A transactional add, update or delete, in an open transaction or a new one.
    fn random_tx_op(&mut self, rng: &mut StdRng, live: &[u64], open: &[u64], size: usize) -> Op {
        let tx_id = if open.is_empty() || rng.gen_bool(0.3) {
            self.next_tx += 1;
            self.next_tx
        } else {
            pick(open, rng)
        };
        let candidates: Vec<u64> = live
            .iter()
            .copied()
            .chain(self.txs.get(&tx_id).into_iter().flat_map(|(ops, _)| {
                ops.iter().filter_map(|o| match o {
                    Op::AddTx { id, .. } => Some(*id),
                    _ => None,
                })
            }))
            .filter(|&id| self.records().contains_key(&id) || self.reserved_by(id) == Some(tx_id))
            .collect();
        match rng.gen_range(0..3) {
            1 if !candidates.is_empty() => Op::UpdateTx {
                tx_id,
                id: pick(&candidates, rng),
                record_type: 2,
                payload: payload(rng.gen(), size / 2),
            },
            2 if !candidates.is_empty() => Op::DeleteTx {
                tx_id,
                id: pick(&candidates, rng),
            },
            _ => {
                self.next_id += 1;
                Op::AddTx {
                    tx_id,
                    id: self.next_id,
                    record_type: 5,
                    payload: payload(self.next_id, size),
                }
            }
        }
    }

    /// One random op that the journal must accept in this state.
    fn random_op(&mut self, rng: &mut StdRng) -> Op {
        let live: Vec<u64> = self.records().keys().copied().collect();
        let open: Vec<u64> = self
            .txs
            .iter()
            .filter(|(_, (_, x))| x.is_none())
            .map(|(&t, _)| t)
            .collect();
        let all_tx: Vec<u64> = self.txs.keys().copied().collect();
        loop {
            let size = if rng.gen_bool(0.1) {
                rng.gen_range(3_000..9_000)
            } else {
                rng.gen_range(0..1_200)
            };
            return match rng.gen_range(0..100) {
                0..=34 => {
                    self.next_id += 1;
                    add(self.next_id, &payload(self.next_id, size))
                }
                35..=49 if !live.is_empty() => {
                    update(pick(&live, rng), &payload(rng.gen(), size / 4))
                }
                50..=66 if !live.is_empty() => del(pick(&live, rng)),
                67..=76 => self.random_tx_op(rng, &live, &open, size),
                77..=81 if !open.is_empty() => {
                    let tx_id = pick(&open, rng);
                    Op::Prepare {
                        tx_id,
                        xid: format!("xid-{tx_id}").into_bytes(),
                    }
                }
                82..=93 if !all_tx.is_empty() => Op::Commit {
                    tx_id: pick(&all_tx, rng),
                },
                94..=99 if !all_tx.is_empty() => Op::Rollback {
                    tx_id: pick(&all_tx, rng),
                },
                _ => continue,
            };
        }
    }

    /// A random valid submit of 1..=4 ops, applied to the model.
    fn random_submit(&mut self, rng: &mut StdRng) -> Vec<Op> {
        let n = rng.gen_range(1..=4);
        let mut ops = Vec::new();
        let mut budget = FILE_SIZE as usize - 200;
        for _ in 0..n {
            let op = self.random_op(rng);
            let size = match &op {
                Op::Add { payload, .. }
                | Op::Update { payload, .. }
                | Op::AddTx { payload, .. }
                | Op::UpdateTx { payload, .. } => payload.len() + 40,
                _ => 40,
            };
            if size > budget {
                break;
            }
            budget -= size;
            self.apply(&op);
            ops.push(op);
        }
        if ops.is_empty() {
            let op = self.random_op(rng);
            self.apply(&op);
            ops.push(op);
        }
        ops
    }
}

fn cfg(dir: &Path) -> JournalConfig {
    JournalConfig {
        datasync: false,
        ..config(dir)
    }
}

fn check(dir: &Path, model: &mut TxModel) -> Journal {
    let (j, rep) = Journal::open(cfg(dir)).unwrap();
    let rolled_back = model.reopened();
    assert_eq!(
        rep.records,
        model.records().values().cloned().collect::<Vec<_>>()
    );
    assert_eq!(rep.prepared, model.prepared());
    assert_eq!(rep.incomplete_transactions_rolled_back, rolled_back);
    j
}

#[test]
fn randomized_compaction_keeps_the_live_set() {
    for seed in 0..6u64 {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = StdRng::seed_from_u64(seed);
        let mut model = TxModel::default();
        let mut j = check(dir.path(), &mut model);
        let mut compactions = 0;
        for step in 0..1_500 {
            match rng.gen_range(0..1_000) {
                0..=14 => {
                    let before = j.stats();
                    let r = j.compact().unwrap();
                    let after = j.stats();
                    assert_eq!(
                        r.files_before + after.data_files,
                        before.data_files + r.files_after
                    );
                    assert_eq!(
                        after.live_records,
                        model.records().len(),
                        "seed {seed} step {step}"
                    );
                    compactions += 1;
                }
                15..=24 => {
                    drop(j);
                    j = check(dir.path(), &mut model);
                }
                _ => {
                    let ops = model.random_submit(&mut rng);
                    j.append(ops, rng.gen_bool(0.2)).unwrap();
                }
            }
        }
        j.compact().unwrap();
        drop(j);
        let j = check(dir.path(), &mut model);
        assert!(compactions > 5);
        // Dead data does not pile up: compaction got the files down to about the live size.
        let s = j.stats();
        let live_bytes: usize = model
            .records()
            .values()
            .map(|r| {
                r.payload.len()
                    + r.updates
                        .iter()
                        .map(|u| u.payload.len() + 40)
                        .sum::<usize>()
                    + 40
            })
            .sum();
        assert!(
            (s.data_files as u64) <= 3 + 2 * live_bytes as u64 / FILE_SIZE,
            "seed {seed}: {s:?}, {live_bytes} live bytes"
        );
    }
}

#[test]
fn compaction_runs_while_appends_continue() {
    for seed in 0..3u64 {
        let dir = tempfile::tempdir().unwrap();
        let mut model = TxModel::default();
        let j = Arc::new(check(dir.path(), &mut model));
        let stop = Arc::new(AtomicBool::new(false));
        let appender = {
            let j = j.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed + 100);
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) || n < 1_500 {
                    let ops = model.random_submit(&mut rng);
                    j.append(ops, rng.gen_bool(0.1)).unwrap();
                    n += 1;
                }
                model
            })
        };
        let mut compactions = 0;
        let mut moved = 0;
        while !appender.is_finished() {
            let r = j.compact().unwrap();
            moved += r.records_moved;
            compactions += 1;
            stop.store(compactions >= 20, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(2));
        }
        let mut model = appender.join().unwrap();
        assert!(
            compactions >= 5 && moved > 0,
            "{compactions} compactions, {moved} moved"
        );
        assert_eq!(j.stats().live_records, model.records().len());
        drop(j);
        check(dir.path(), &mut model);
    }
}

#[test]
fn deletes_racing_a_compaction_stay_deleted_after_reclaim() {
    // Delete records while they are being copied, then delete the rest: every file,
    // compacted or not, must eventually be reclaimable, and nothing comes back.
    let dir = tempfile::tempdir().unwrap();
    let (j, _) = Journal::open(cfg(dir.path())).unwrap();
    let j = Arc::new(j);
    let n = 400u64;
    for i in 0..n {
        j.append(vec![add(i, &payload(i, 1_500))], false).unwrap();
    }
    let deleter = {
        let j = j.clone();
        std::thread::spawn(move || {
            for i in (0..n).step_by(2) {
                j.append(vec![del(i)], false).unwrap();
            }
        })
    };
    j.compact().unwrap();
    deleter.join().unwrap();
    j.compact().unwrap();
    j.append((1..n).step_by(2).map(del).collect(), true)
        .unwrap();
    j.compact().unwrap();
    assert!(
        wait_for(Duration::from_secs(10), || j.stats().data_files <= 2),
        "{:?}",
        j.stats()
    );
    drop(j);
    let (_, rep) = Journal::open(cfg(dir.path())).unwrap();
    assert!(rep.records.is_empty());
}

#[test]
fn automatic_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let (j, _) = Journal::open(JournalConfig {
        compact_min_files: 4,
        compact_percentage: 40,
        ..cfg(dir.path())
    })
    .unwrap();
    let mut model = Model::default();
    // Every file keeps one live record, so nothing can be reclaimed without compaction.
    for i in 0..300u64 {
        let op = add(i, &payload(i, 2_000));
        model.apply(&op);
        j.append(vec![op], false).unwrap();
        if i % 30 != 0 && i > 0 {
            let op = del(i - 1);
            if model.records.contains_key(&(i - 1)) && (i - 1) % 30 != 0 {
                model.apply(&op);
                j.append(vec![op], false).unwrap();
            }
        }
    }
    j.append(vec![], true).unwrap();
    assert!(
        wait_for(Duration::from_secs(20), || j.stats().compactions >= 1),
        "{:?}",
        j.stats()
    );
    assert!(
        wait_for(Duration::from_secs(10), || j.stats().data_files <= 4),
        "{:?}",
        j.stats()
    );
    drop(j);
    let (_, rep) = Journal::open(cfg(dir.path())).unwrap();
    assert_eq!(rep.records, model.list());
}

#[test]
fn automatic_compaction_only_when_it_frees_files() {
    // One sparse file before the current one: compacting it would produce one file again,
    // and then again: no automatic compaction.
    let dir = tempfile::tempdir().unwrap();
    let (j, _) = Journal::open(JournalConfig {
        compact_min_files: 1,
        compact_percentage: 50,
        ..cfg(dir.path())
    })
    .unwrap();
    j.append(vec![add(0, b"keep")], false).unwrap();
    for i in 1..40u64 {
        j.append(vec![add(i, &payload(i, 2_000))], false).unwrap();
    }
    j.append((1..40).map(del).collect(), true).unwrap();
    assert!(j.stats().data_files >= 2);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(j.stats().compactions, 0, "{:?}", j.stats());
    // On demand it still runs.
    let r = j.compact().unwrap();
    assert_eq!(r.files_after, 1);
    drop(j);
    let (_, rep) = Journal::open(cfg(dir.path())).unwrap();
    assert_eq!(rep.records.len(), 1);
}

fn pick(v: &[u64], rng: &mut StdRng) -> u64 {
    v[rng.gen_range(0..v.len())]
}
