//! Submit-time validation: the logical state of the journal including ops that are queued
//! but not yet written. `submit` validates and applies ops here atomically (all or nothing,
//! via an undo log), so the checks see everything submitted before.
//!
//! Rules (Artemis semantics, made strict where a violation would make replay ambiguous):
//! - add: the id must not be live, added by an open transaction, or referenced by an open
//!   transaction's update/delete (so a transaction's pending update or delete always applies
//!   to the record that existed when it was submitted) -> `DuplicateRecord`;
//! - update/delete: the id must be live -> `RecordNotFound`;
//! - transactional update/delete: the id must be live or added by the same transaction;
//! - no transactional op after prepare; prepare once; commit/rollback of a transaction that
//!   is unknown (never started or already finished) -> `Transaction`.

use std::collections::{HashMap, HashSet};

use crate::index::{Index, TxKind};
use crate::{Error, Op, Result};

#[derive(Debug, Clone, Default)]
pub(crate) struct LTx {
    prepared: bool,
    ops: Vec<(TxKind, u64)>,
}

#[derive(Debug)]
enum Undo {
    LiveAdded(u64),
    LiveRemoved(u64),
    Reserved(u64),
    Unreserved(u64, u64),
    RefAdded(u64),
    RefRemoved(u64),
    TxCreated(u64),
    TxPushed(u64),
    TxPrepared(u64),
    TxRemoved(u64, LTx),
}

#[derive(Debug, Default)]
pub(crate) struct Logical {
    live: HashSet<u64>,
    /// Ids added by open transactions -> the transaction.
    reserved: HashMap<u64, u64>,
    /// Ids with pending transactional updates/deletes -> how many.
    refs: HashMap<u64, u32>,
    txs: HashMap<u64, LTx>,
    undo: Vec<Undo>,
}

fn tx_err(tx_id: u64, reason: &str) -> Error {
    Error::Transaction {
        tx_id,
        reason: reason.to_string(),
    }
}

impl Logical {
    /// The logical state equal to a recovered index.
    pub(crate) fn from_index<P>(ix: &Index<P>) -> Logical {
        let mut l = Logical {
            live: ix.records.keys().copied().collect(),
            ..Logical::default()
        };
        for (&tx_id, tx) in &ix.txs {
            let mut lt = LTx {
                prepared: tx.prepare.is_some(),
                ops: Vec::with_capacity(tx.ops.len()),
            };
            for op in &tx.ops {
                lt.ops.push((op.kind, op.id));
                match op.kind {
                    TxKind::Add => {
                        l.reserved.insert(op.id, tx_id);
                    }
                    TxKind::Update | TxKind::Delete => *l.refs.entry(op.id).or_default() += 1,
                }
            }
            l.txs.insert(tx_id, lt);
        }
        l
    }

    #[cfg(test)]
    pub(crate) fn live_len(&self) -> usize {
        self.live.len()
    }

    /// Validates and applies `ops` in order; on error nothing is applied.
    pub(crate) fn apply_all(&mut self, ops: &[Op]) -> Result<()> {
        self.undo.clear();
        for op in ops {
            if let Err(e) = self.apply(op) {
                self.rollback_undo();
                return Err(e);
            }
        }
        self.undo.clear();
        Ok(())
    }

    fn rollback_undo(&mut self) {
        while let Some(u) = self.undo.pop() {
            match u {
                Undo::LiveAdded(id) => {
                    self.live.remove(&id);
                }
                Undo::LiveRemoved(id) => {
                    self.live.insert(id);
                }
                Undo::Reserved(id) => {
                    self.reserved.remove(&id);
                }
                Undo::Unreserved(id, tx) => {
                    self.reserved.insert(id, tx);
                }
                Undo::RefAdded(id) => self.ref_dec(id),
                Undo::RefRemoved(id) => *self.refs.entry(id).or_default() += 1,
                Undo::TxCreated(tx) => {
                    self.txs.remove(&tx);
                }
                Undo::TxPushed(tx) => {
                    if let Some(t) = self.txs.get_mut(&tx) {
                        t.ops.pop();
                    }
                }
                Undo::TxPrepared(tx) => {
                    if let Some(t) = self.txs.get_mut(&tx) {
                        t.prepared = false;
                    }
                }
                Undo::TxRemoved(tx, t) => {
                    self.txs.insert(tx, t);
                }
            }
        }
    }

    fn ref_dec(&mut self, id: u64) {
        if let Some(n) = self.refs.get_mut(&id) {
            *n -= 1;
            if *n == 0 {
                self.refs.remove(&id);
            }
        }
    }

    fn addable(&self, id: u64) -> Result<()> {
        if self.live.contains(&id) || self.reserved.contains_key(&id) || self.refs.contains_key(&id)
        {
            return Err(Error::DuplicateRecord { id });
        }
        Ok(())
    }

    /// The open, unprepared transaction `tx_id`, created if needed.
    fn open_tx(&mut self, tx_id: u64) -> Result<&mut LTx> {
        let t = match self.txs.entry(tx_id) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                self.undo.push(Undo::TxCreated(tx_id));
                e.insert(LTx::default())
            }
        };
        if t.prepared {
            return Err(tx_err(tx_id, "transaction is prepared"));
        }
        Ok(t)
    }

    fn push_tx_op(&mut self, tx_id: u64, kind: TxKind, id: u64) -> Result<()> {
        self.open_tx(tx_id)?.ops.push((kind, id));
        self.undo.push(Undo::TxPushed(tx_id));
        Ok(())
    }

    fn apply(&mut self, op: &Op) -> Result<()> {
        match *op {
            Op::Add { id, .. } => {
                self.addable(id)?;
                self.live.insert(id);
                self.undo.push(Undo::LiveAdded(id));
            }
            Op::Update { id, .. } => {
                if !self.live.contains(&id) {
                    return Err(Error::RecordNotFound { id });
                }
            }
            Op::Delete { id } => {
                if !self.live.remove(&id) {
                    return Err(Error::RecordNotFound { id });
                }
                self.undo.push(Undo::LiveRemoved(id));
            }
            Op::AddTx { tx_id, id, .. } => {
                if self.txs.get(&tx_id).is_some_and(|t| t.prepared) {
                    return Err(tx_err(tx_id, "transaction is prepared"));
                }
                self.addable(id)?;
                self.push_tx_op(tx_id, TxKind::Add, id)?;
                self.reserved.insert(id, tx_id);
                self.undo.push(Undo::Reserved(id));
            }
            Op::UpdateTx { tx_id, id, .. } | Op::DeleteTx { tx_id, id } => {
                if self.txs.get(&tx_id).is_some_and(|t| t.prepared) {
                    return Err(tx_err(tx_id, "transaction is prepared"));
                }
                if !self.live.contains(&id) && self.reserved.get(&id) != Some(&tx_id) {
                    return Err(Error::RecordNotFound { id });
                }
                let kind = if matches!(op, Op::UpdateTx { .. }) {
                    TxKind::Update
                } else {
                    TxKind::Delete
                };
                self.push_tx_op(tx_id, kind, id)?;
                *self.refs.entry(id).or_default() += 1;
                self.undo.push(Undo::RefAdded(id));
            }
            Op::Prepare { tx_id, .. } => {
                if self.txs.get(&tx_id).is_some_and(|t| t.prepared) {
                    return Err(tx_err(tx_id, "transaction is already prepared"));
                }
                self.open_tx(tx_id)?.prepared = true;
                self.undo.push(Undo::TxPrepared(tx_id));
            }
            Op::Commit { tx_id } => self.finish_tx(tx_id, true)?,
            Op::Rollback { tx_id } => self.finish_tx(tx_id, false)?,
        }
        Ok(())
    }

    /// A commit (`commit`) or rollback of `tx_id`: its adds become live or are dropped, its
    /// deletes take effect or not, and its references end.
    fn finish_tx(&mut self, tx_id: u64, commit: bool) -> Result<()> {
        let Some(t) = self.txs.remove(&tx_id) else {
            return Err(tx_err(tx_id, "unknown or finished transaction"));
        };
        for &(kind, id) in &t.ops {
            match kind {
                TxKind::Add => {
                    if self.reserved.remove(&id).is_some() {
                        self.undo.push(Undo::Unreserved(id, tx_id));
                    }
                    if commit && self.live.insert(id) {
                        self.undo.push(Undo::LiveAdded(id));
                    }
                }
                TxKind::Update => {
                    self.ref_dec(id);
                    self.undo.push(Undo::RefRemoved(id));
                }
                TxKind::Delete => {
                    self.ref_dec(id);
                    self.undo.push(Undo::RefRemoved(id));
                    if commit && self.live.remove(&id) {
                        self.undo.push(Undo::LiveRemoved(id));
                    }
                }
            }
        }
        self.undo.push(Undo::TxRemoved(tx_id, t));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(id: u64) -> Op {
        Op::Add {
            id,
            record_type: 0,
            payload: vec![],
        }
    }

    fn add_tx(tx_id: u64, id: u64) -> Op {
        Op::AddTx {
            tx_id,
            id,
            record_type: 0,
            payload: vec![],
        }
    }

    #[test]
    fn basic_rules() {
        let mut l = Logical::default();
        l.apply_all(&[add(1)]).unwrap();
        assert!(matches!(
            l.apply_all(&[add(1)]),
            Err(Error::DuplicateRecord { id: 1 })
        ));
        assert!(matches!(
            l.apply_all(&[Op::Delete { id: 2 }]),
            Err(Error::RecordNotFound { id: 2 })
        ));
        l.apply_all(&[Op::Delete { id: 1 }, add(1), Op::Delete { id: 1 }])
            .unwrap();
        assert_eq!(l.live_len(), 0);
    }

    #[test]
    fn all_or_nothing() {
        let mut l = Logical::default();
        l.apply_all(&[add(1)]).unwrap();
        let r = l.apply_all(&[
            add(2),
            Op::Delete { id: 1 },
            add_tx(5, 3),
            Op::DeleteTx { tx_id: 5, id: 2 },
            Op::Prepare {
                tx_id: 5,
                xid: vec![],
            },
            Op::Commit { tx_id: 5 },
            Op::Delete { id: 99 },
        ]);
        assert!(matches!(r, Err(Error::RecordNotFound { id: 99 })));
        assert!(l.live.contains(&1) && l.live.len() == 1);
        assert!(l.txs.is_empty() && l.reserved.is_empty() && l.refs.is_empty());
    }

    #[test]
    fn transactions() {
        let mut l = Logical::default();
        l.apply_all(&[add(1)]).unwrap();
        l.apply_all(&[add_tx(7, 2), Op::DeleteTx { tx_id: 7, id: 1 }])
            .unwrap();
        // Reserved by the tx / referenced by the tx: cannot be added.
        assert!(matches!(
            l.apply_all(&[add(2)]),
            Err(Error::DuplicateRecord { .. })
        ));
        assert!(matches!(
            l.apply_all(&[add_tx(8, 2)]),
            Err(Error::DuplicateRecord { .. })
        ));
        // A plain delete of a record the tx deletes is fine, but not a re-add.
        l.apply_all(&[Op::Delete { id: 1 }]).unwrap();
        assert!(matches!(
            l.apply_all(&[add(1)]),
            Err(Error::DuplicateRecord { .. })
        ));
        // Another tx cannot update what tx 7 adds.
        assert!(matches!(
            l.apply_all(&[Op::UpdateTx {
                tx_id: 8,
                id: 2,
                record_type: 0,
                payload: vec![]
            }]),
            Err(Error::RecordNotFound { id: 2 })
        ));
        l.apply_all(&[Op::Prepare {
            tx_id: 7,
            xid: vec![1],
        }])
        .unwrap();
        assert!(matches!(
            l.apply_all(&[add_tx(7, 3)]),
            Err(Error::Transaction { .. })
        ));
        assert!(matches!(
            l.apply_all(&[Op::Prepare {
                tx_id: 7,
                xid: vec![]
            }]),
            Err(Error::Transaction { .. })
        ));
        l.apply_all(&[Op::Commit { tx_id: 7 }]).unwrap();
        assert!(l.live.contains(&2) && !l.live.contains(&1));
        assert!(matches!(
            l.apply_all(&[Op::Commit { tx_id: 7 }]),
            Err(Error::Transaction { .. })
        ));
        assert!(matches!(
            l.apply_all(&[Op::Rollback { tx_id: 99 }]),
            Err(Error::Transaction { .. })
        ));
        l.apply_all(&[add(1)]).unwrap();
        // Rollback releases reservations.
        l.apply_all(&[add_tx(9, 10), Op::Rollback { tx_id: 9 }, add(10)])
            .unwrap();
        assert!(l.refs.is_empty() && l.reserved.is_empty());
    }
}
