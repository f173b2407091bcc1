//! Tickets and their completion: the contract both stores give their callers.
//!
//! Every submit gets the next ticket; the writer completes tickets in order, so "ticket N
//! is complete" means every ticket up to N is. The first failure is sticky: tickets above
//! the completed one never complete, and every later wait gets the failure. Closing stops
//! completion: waiters for what was not written get [`Stopped::Closed`].
//!
//! The completed ticket is an atomic (waiters and `progress` read it without a lock); the
//! rest sits behind its own mutex, separate from the store's state, so waking waiters does
//! not contend with submitters. Waiters sleep on a condition variable; completion skips the
//! wake-up syscall when nobody sleeps. A listener (the bindings' eventfd) is called after
//! every completion, failure and stop.
//!
//! Replication gate (shared-nothing HA): while the gate is on, a ticket counts as complete
//! only once it is written *and* the backup has it, `min(written, max(replicated, from))`,
//! `from` being the last ticket issued when the gate went on (those were never held back).
//! Every input only grows, so the completed ticket stays monotonic.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use crate::lock;

/// Completion sequence number of one submit.
pub type Ticket = u64;

/// Called after every batch completes, on failure and at close. Must be cheap and must not
/// call back into the store.
pub type Listener = Box<dyn Fn() + Send + Sync>;

/// What a store's `progress` reports.
#[derive(Debug, Clone)]
pub struct Progress<E> {
    /// Every ticket up to this one is complete.
    pub completed: Ticket,
    /// Set once the writer failed: tickets above `completed` never complete.
    pub failed: Option<Arc<E>>,
}

impl<E> Default for Progress<E> {
    fn default() -> Self {
        Progress {
            completed: 0,
            failed: None,
        }
    }
}

/// Why a waited-for ticket will never complete.
#[derive(Debug)]
pub enum Stopped<E> {
    /// The writer failed with this error (the first one).
    Failed(Arc<E>),
    /// The store was closed first.
    Closed,
}

struct Done<E> {
    failed: Option<Arc<E>>,
    /// The writer stopped (closed); unfinished tickets never complete.
    stopped: bool,
    /// Threads blocked on `done_cv`.
    sleepers: usize,
    /// Highest ticket the writer completed (`completed` unless the gate holds it back).
    written: Ticket,
    /// The replication gate: `Some(from)` while on.
    gate: Option<Ticket>,
    /// Highest ticket the backup reported durable.
    replicated: Ticket,
}

impl<E> Done<E> {
    /// The completed ticket the waiters see.
    fn effective(&self) -> Ticket {
        match self.gate {
            Some(from) => self.written.min(self.replicated.max(from)),
            None => self.written,
        }
    }
}

/// The completion side of a store's tickets.
pub struct Completion<E> {
    /// Highest completed ticket (all below are complete too).
    completed: AtomicU64,
    /// Mirrors `done.failed.is_some()`, for checks that take no lock.
    failed: AtomicBool,
    done: Mutex<Done<E>>,
    done_cv: Condvar,
    listener: Mutex<Option<Arc<dyn Fn() + Send + Sync>>>,
}

impl<E> Default for Completion<E> {
    fn default() -> Self {
        Completion {
            completed: AtomicU64::new(0),
            failed: AtomicBool::new(false),
            done: Mutex::new(Done {
                failed: None,
                stopped: false,
                sleepers: 0,
                written: 0,
                gate: None,
                replicated: 0,
            }),
            done_cv: Condvar::new(),
            listener: Mutex::new(None),
        }
    }
}

impl<E> Completion<E> {
    /// Every ticket up to this one is complete.
    pub fn completed(&self) -> Ticket {
        self.completed.load(Ordering::Acquire)
    }

    /// Whether the writer failed (no lock taken).
    pub fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// The failure, if the writer failed.
    pub fn failure(&self) -> Option<Arc<E>> {
        if self.has_failed() {
            lock(&self.done).failed.clone()
        } else {
            None
        }
    }

    pub fn progress(&self) -> Progress<E> {
        let d = lock(&self.done);
        Progress {
            completed: self.completed(),
            failed: d.failed.clone(),
        }
    }

    /// Replaces the function called after every completion, failure and stop.
    pub fn set_listener(&self, listener: Listener) {
        *lock(&self.listener) = Some(Arc::from(listener));
    }

    pub fn notify_listener(&self) {
        let l = lock(&self.listener).clone();
        if let Some(l) = l {
            l();
        }
    }

    /// Publishes completion of every ticket up to `ticket` (as far as the replication gate
    /// lets it through) and wakes the waiters.
    pub fn complete(&self, ticket: Ticket) {
        let sleepers = {
            let mut d = lock(&self.done);
            d.written = ticket;
            self.publish(&d);
            d.sleepers
        };
        if sleepers > 0 {
            self.done_cv.notify_all();
        }
        self.notify_listener();
    }

    /// Stores the effective completed ticket (under the `done` lock); returns whether it
    /// moved.
    fn publish(&self, d: &Done<E>) -> bool {
        let before = self.completed();
        let now = d.effective().max(before);
        self.completed.store(now, Ordering::Release);
        now != before
    }

    /// After a change of the gate: wakes waiters and the listener if completion moved (or
    /// `always`).
    fn regated(&self, d: MutexGuard<'_, Done<E>>, always: bool) {
        let moved = self.publish(&d);
        let sleepers = d.sleepers;
        drop(d);
        if moved && sleepers > 0 {
            self.done_cv.notify_all();
        }
        if moved || always {
            self.notify_listener();
        }
    }

    /// Switches the replication gate on (`Some(from)`: `from` is the last ticket issued,
    /// which stays ungated) or off (`None`, which releases every written ticket and always
    /// calls the listener).
    pub fn set_gate(&self, from: Option<Ticket>) {
        let mut d = lock(&self.done);
        let off = from.is_none() && d.gate.is_some();
        d.gate = from;
        self.regated(d, off);
    }

    /// The backup has every ticket up to `ticket` (lower values than before are ignored).
    pub fn replicated(&self, ticket: Ticket) {
        let mut d = lock(&self.done);
        if ticket <= d.replicated {
            return;
        }
        d.replicated = ticket;
        self.regated(d, false);
    }

    /// `(gate on, highest ticket the backup has)`.
    pub fn gate(&self) -> (bool, Ticket) {
        let d = lock(&self.done);
        (d.gate.is_some(), d.replicated)
    }

    /// Records the failure (the first one wins, and is returned) and wakes every waiter.
    /// The store calls this under its state lock and then wakes its own threads.
    pub fn fail(&self, err: E) -> Arc<E> {
        let cause = {
            let mut d = lock(&self.done);
            let cause = d.failed.get_or_insert_with(|| Arc::new(err)).clone();
            self.failed.store(true, Ordering::Release);
            cause
        };
        self.done_cv.notify_all();
        cause
    }

    /// The writer stopped (at close, after its last batch): waiters for tickets not
    /// complete by now get [`Stopped::Closed`].
    pub fn stop(&self) {
        lock(&self.done).stopped = true;
        self.done_cv.notify_all();
        self.notify_listener();
    }

    /// Blocks until `ticket` is complete, or fails with why it never will be.
    ///
    /// Before each sleep `help` runs: a store whose callers may write a due batch
    /// themselves does that there, and returns `true` when it wrote one (the wait then
    /// looks again instead of sleeping).
    pub fn wait(&self, ticket: Ticket, mut help: impl FnMut() -> bool) -> Result<(), Stopped<E>> {
        loop {
            if self.completed() >= ticket {
                return Ok(());
            }
            if help() {
                continue;
            }
            let mut d = lock(&self.done);
            if self.completed() >= ticket {
                return Ok(());
            }
            if let Some(f) = &d.failed {
                return Err(Stopped::Failed(f.clone()));
            }
            if d.stopped {
                return Err(Stopped::Closed);
            }
            d.sleepers += 1;
            d = self.done_cv.wait(d).unwrap_or_else(PoisonError::into_inner);
            d.sleepers -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    #[test]
    fn the_gate_holds_back_what_is_not_replicated() {
        let c: Completion<()> = Completion::default();
        let pokes = Arc::new(AtomicUsize::new(0));
        let p = pokes.clone();
        c.set_listener(Box::new(move || {
            p.fetch_add(1, Ordering::SeqCst);
        }));
        c.complete(2);
        // Tickets up to 5 were issued when the gate went on: never held back.
        c.set_gate(Some(5));
        c.complete(4);
        assert_eq!(c.completed(), 4);
        c.complete(8);
        assert_eq!(c.completed(), 5);
        let before = pokes.load(Ordering::SeqCst);
        c.replicated(7);
        assert_eq!(c.completed(), 7);
        assert_eq!(pokes.load(Ordering::SeqCst), before + 1);
        c.replicated(6); // lower: ignored, nobody poked
        assert_eq!((c.completed(), c.gate()), (7, (true, 7)));
        assert_eq!(pokes.load(Ordering::SeqCst), before + 1);
        c.replicated(20); // beyond what is written: written caps it
        assert_eq!(c.completed(), 8);
        c.complete(30);
        assert_eq!(c.completed(), 20);
        c.set_gate(None);
        assert_eq!(c.completed(), 30);
        // Off while off still calls nobody; on then off always calls the listener.
        let before = pokes.load(Ordering::SeqCst);
        c.set_gate(None);
        assert_eq!(pokes.load(Ordering::SeqCst), before);
        c.set_gate(Some(30));
        c.set_gate(None);
        assert_eq!(pokes.load(Ordering::SeqCst), before + 1);
    }
}
