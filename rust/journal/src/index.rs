//! The physical index: where every live record and every record of an unfinished
//! transaction lives, per-file live counts, and the dependencies that decide when a file
//! may be reclaimed.
//!
//! Recovery replays the journal into an `Index<Data>` (keeping payloads for the load
//! report); the running journal keeps an `Index<()>` updated by the writer after each batch
//! is written. Both go through [`Index::apply`], so replay and run time agree.
//!
//! Reclaim rule: a file may be reclaimed when it holds no live record and every file it
//! *depends on* is gone. A file depends on another when it holds a record that negates a
//! record there: a delete (of the add and updates), a commit or rollback (of the
//! transaction's records), a transactional delete (of the deleted record). Were the
//! negating file reclaimed first, replay would resurrect what it negated.

use std::collections::{BTreeSet, HashMap};

use crate::format::{Kind, RecordRef};

pub(crate) type FileId = u64;

/// Where one record is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Loc {
    pub file: FileId,
    pub offset: u32,
    pub len: u32,
}

/// Payload kept by the index: `()` at run time, the record's data during recovery.
pub(crate) trait Payload: Sized {
    fn from_record(r: &RecordRef<'_>) -> Self;
}

impl Payload for () {
    fn from_record(_: &RecordRef<'_>) -> Self {}
}

/// A record's type and payload (for Prepare: the xid).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Data {
    pub record_type: u8,
    pub payload: Vec<u8>,
}

impl Payload for Data {
    fn from_record(r: &RecordRef<'_>) -> Self {
        Data {
            record_type: r.record_type,
            payload: r.payload.to_vec(),
        }
    }
}

/// A live record: its add and its updates in order.
#[derive(Debug)]
pub(crate) struct Rec<P> {
    pub add: Loc,
    pub data: P,
    pub updates: Vec<(Loc, P)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TxKind {
    Add,
    Update,
    Delete,
}

#[derive(Debug)]
pub(crate) struct TxOp<P> {
    pub kind: TxKind,
    pub id: u64,
    pub loc: Loc,
    pub data: P,
}

/// An unfinished transaction.
#[derive(Debug)]
pub(crate) struct Tx<P> {
    pub ops: Vec<TxOp<P>>,
    pub prepare: Option<(Loc, P)>,
}

impl<P> Default for Tx<P> {
    fn default() -> Self {
        Tx {
            ops: Vec::new(),
            prepare: None,
        }
    }
}

/// Accounting for one data file.
#[derive(Debug, Default, Clone)]
pub(crate) struct FileStats {
    /// Live adds and updates plus records of unfinished transactions stored here.
    pub live: u64,
    pub live_bytes: u64,
    /// Files that must be reclaimed before this one.
    pub deps: BTreeSet<FileId>,
}

/// [`Index::strip`]: the run-time index, and the payload-carrying records and transactions.
pub(crate) type Stripped<P> = (Index<()>, HashMap<u64, Rec<P>>, HashMap<u64, Tx<P>>);

#[derive(Debug)]
pub(crate) struct Index<P> {
    pub records: HashMap<u64, Rec<P>>,
    pub txs: HashMap<u64, Tx<P>>,
    pub files: HashMap<FileId, FileStats>,
}

impl<P> Default for Index<P> {
    fn default() -> Self {
        Index {
            records: HashMap::new(),
            txs: HashMap::new(),
            files: HashMap::new(),
        }
    }
}

impl<P: Payload> Index<P> {
    pub(crate) fn add_file(&mut self, id: FileId) {
        self.files.entry(id).or_default();
    }

    pub(crate) fn live_inc(&mut self, loc: Loc) {
        if let Some(f) = self.files.get_mut(&loc.file) {
            f.live += 1;
            f.live_bytes += u64::from(loc.len);
        }
    }

    fn live_dec(&mut self, loc: Loc) {
        if let Some(f) = self.files.get_mut(&loc.file) {
            f.live = f.live.saturating_sub(1);
            f.live_bytes = f.live_bytes.saturating_sub(u64::from(loc.len));
        }
    }

    fn depend(&mut self, file: FileId, on: FileId) {
        if file != on {
            if let Some(f) = self.files.get_mut(&file) {
                f.deps.insert(on);
            }
        }
    }

    /// Marks a record's locations dead; `killers` are the files holding what killed it.
    fn kill(&mut self, rec: &Rec<P>, killers: &[FileId]) {
        for loc in std::iter::once(rec.add).chain(rec.updates.iter().map(|u| u.0)) {
            self.live_dec(loc);
            for &k in killers {
                self.depend(k, loc.file);
            }
        }
    }

    /// Applies one record stored at `loc`, exactly as replay does.
    ///
    /// Tolerant by design: updates and deletes of unknown records and commits of unknown
    /// transactions are no-ops, because reclaiming may have removed what they refer to.
    pub(crate) fn apply(&mut self, r: &RecordRef<'_>, loc: Loc) {
        match r.kind {
            Kind::Add => {
                if let Some(old) = self.records.remove(&r.id) {
                    self.kill(&old, &[loc.file]);
                }
                self.records.insert(
                    r.id,
                    Rec {
                        add: loc,
                        data: P::from_record(r),
                        updates: Vec::new(),
                    },
                );
                self.live_inc(loc);
            }
            Kind::Update => {
                if let Some(rec) = self.records.get_mut(&r.id) {
                    rec.updates.push((loc, P::from_record(r)));
                    self.live_inc(loc);
                }
            }
            Kind::Delete => {
                if let Some(old) = self.records.remove(&r.id) {
                    self.kill(&old, &[loc.file]);
                }
            }
            Kind::AddTx | Kind::UpdateTx | Kind::DeleteTx => {
                let kind = match r.kind {
                    Kind::AddTx => TxKind::Add,
                    Kind::UpdateTx => TxKind::Update,
                    _ => TxKind::Delete,
                };
                self.txs.entry(r.tx_id).or_default().ops.push(TxOp {
                    kind,
                    id: r.id,
                    loc,
                    data: P::from_record(r),
                });
                self.live_inc(loc);
            }
            Kind::Prepare => {
                let tx = self.txs.entry(r.tx_id).or_default();
                let old = tx.prepare.replace((loc, P::from_record(r)));
                if let Some((old, _)) = old {
                    self.live_dec(old);
                }
                self.live_inc(loc);
            }
            Kind::Commit => {
                if let Some(tx) = self.txs.remove(&r.tx_id) {
                    self.commit(tx, loc.file);
                }
            }
            Kind::Rollback => {
                if let Some(tx) = self.txs.remove(&r.tx_id) {
                    self.finish_rollback(tx, loc.file);
                }
            }
        }
    }

    fn commit(&mut self, tx: Tx<P>, at: FileId) {
        if let Some((loc, _)) = tx.prepare {
            self.live_dec(loc);
            self.depend(at, loc.file);
        }
        for op in tx.ops {
            // Without the commit record, replay would roll these back.
            self.depend(at, op.loc.file);
            match op.kind {
                TxKind::Add => {
                    if let Some(old) = self.records.remove(&op.id) {
                        self.kill(&old, &[op.loc.file, at]);
                    }
                    // The AddTx record itself becomes the record's add (it stays live).
                    self.records.insert(
                        op.id,
                        Rec {
                            add: op.loc,
                            data: op.data,
                            updates: Vec::new(),
                        },
                    );
                }
                TxKind::Update => match self.records.get_mut(&op.id) {
                    Some(rec) => rec.updates.push((op.loc, op.data)),
                    None => self.live_dec(op.loc),
                },
                TxKind::Delete => {
                    self.live_dec(op.loc);
                    if let Some(old) = self.records.remove(&op.id) {
                        self.kill(&old, &[op.loc.file, at]);
                    }
                }
            }
        }
    }

    fn finish_rollback(&mut self, tx: Tx<P>, at: FileId) {
        if let Some((loc, _)) = tx.prepare {
            self.live_dec(loc);
            self.depend(at, loc.file);
        }
        for op in tx.ops {
            self.live_dec(op.loc);
            self.depend(at, op.loc.file);
        }
    }

    /// Forgets a file that was reclaimed or retired: nothing depends on it any more.
    pub(crate) fn remove_file(&mut self, id: FileId) {
        self.files.remove(&id);
        for f in self.files.values_mut() {
            f.deps.remove(&id);
        }
    }

    /// Splits into a run-time index (locations only) and the records and transactions
    /// with their payloads.
    pub(crate) fn strip(self) -> Stripped<P> {
        let records = self
            .records
            .iter()
            .map(|(&id, r)| {
                (
                    id,
                    Rec {
                        add: r.add,
                        data: (),
                        updates: r.updates.iter().map(|u| (u.0, ())).collect(),
                    },
                )
            })
            .collect();
        let txs = self
            .txs
            .iter()
            .map(|(&id, t)| {
                (
                    id,
                    Tx {
                        ops: t
                            .ops
                            .iter()
                            .map(|o| TxOp {
                                kind: o.kind,
                                id: o.id,
                                loc: o.loc,
                                data: (),
                            })
                            .collect(),
                        prepare: t.prepare.as_ref().map(|p| (p.0, ())),
                    },
                )
            })
            .collect();
        (
            Index {
                records,
                txs,
                files: self.files,
            },
            self.records,
            self.txs,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Op;

    fn loc(file: FileId, offset: u32) -> Loc {
        Loc {
            file,
            offset,
            len: 10,
        }
    }

    fn apply(ix: &mut Index<()>, op: &Op, l: Loc) {
        ix.apply(&RecordRef::from_op(op), l);
    }

    fn add(id: u64) -> Op {
        Op::Add {
            id,
            record_type: 1,
            payload: vec![],
        }
    }

    #[test]
    fn delete_makes_deleting_file_depend_on_added_file() {
        let mut ix = Index::<()>::default();
        ix.add_file(1);
        ix.add_file(2);
        apply(&mut ix, &add(7), loc(1, 64));
        apply(
            &mut ix,
            &Op::Update {
                id: 7,
                record_type: 1,
                payload: vec![],
            },
            loc(2, 64),
        );
        assert_eq!((ix.files[&1].live, ix.files[&2].live), (1, 1));
        apply(&mut ix, &Op::Delete { id: 7 }, loc(2, 100));
        assert_eq!((ix.files[&1].live, ix.files[&2].live), (0, 0));
        assert_eq!(ix.files[&2].deps, BTreeSet::from([1]));
        ix.remove_file(1);
        assert!(ix.files[&2].deps.is_empty());
    }

    #[test]
    fn commit_moves_tx_records_into_the_record_set() {
        let mut ix = Index::<()>::default();
        for f in 1..=3 {
            ix.add_file(f);
        }
        apply(&mut ix, &add(5), loc(1, 64));
        apply(
            &mut ix,
            &Op::AddTx {
                tx_id: 9,
                id: 6,
                record_type: 1,
                payload: vec![],
            },
            loc(1, 80),
        );
        apply(&mut ix, &Op::DeleteTx { tx_id: 9, id: 5 }, loc(2, 64));
        assert_eq!(ix.files[&1].live, 2);
        assert_eq!(ix.files[&2].live, 1);
        apply(&mut ix, &Op::Commit { tx_id: 9 }, loc(3, 64));
        assert!(ix.records.contains_key(&6) && !ix.records.contains_key(&5));
        assert_eq!(ix.files[&1].live, 1); // the AddTx of 6
        assert_eq!(ix.files[&2].live, 0);
        assert_eq!(ix.files[&3].deps, BTreeSet::from([1, 2]));
        assert_eq!(ix.files[&2].deps, BTreeSet::from([1]));
    }

    #[test]
    fn rollback_and_unknown_ids_are_tolerated() {
        let mut ix = Index::<()>::default();
        ix.add_file(1);
        apply(&mut ix, &Op::Delete { id: 1 }, loc(1, 64));
        apply(&mut ix, &Op::Commit { tx_id: 1 }, loc(1, 64));
        apply(
            &mut ix,
            &Op::UpdateTx {
                tx_id: 2,
                id: 3,
                record_type: 0,
                payload: vec![],
            },
            loc(1, 64),
        );
        apply(
            &mut ix,
            &Op::Prepare {
                tx_id: 2,
                xid: vec![1],
            },
            loc(1, 80),
        );
        assert_eq!(ix.files[&1].live, 2);
        apply(&mut ix, &Op::Rollback { tx_id: 2 }, loc(1, 96));
        assert_eq!(ix.files[&1].live, 0);
        assert!(ix.txs.is_empty() && ix.records.is_empty());
    }
}
