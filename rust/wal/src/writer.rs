//! The ticketed group-commit writer: one writer thread per store, woken by submits.
//!
//! Theory of operation:
//! - Submitters queue work under the store's state lock (no I/O), take the next ticket
//!   ([`WriterState::next_ticket`]) and wake the writer only when that changes what it
//!   waits for ([`submitted`]); a *deferred* submit leaves the wake-up to
//!   [`Signal::wake_deferred`], so the submits of one event-loop pass share a batch.
//! - The writer thread ([`run`]) sleeps until the store says a batch is due
//!   ([`GroupCommit::due`]), possibly at a deadline (a buffer timeout), then has the store
//!   write everything queued as one batch ([`GroupCommit::write_batch`]: the store's
//!   `pwrite`s and at most one `fdatasync`), which completes the batch's tickets. The
//!   bigger the load, the bigger the batches.
//! - At close the thread writes what is still due, then lets the store make it durable
//!   ([`GroupCommit::finish`]) and stops.
//! - The first error fails the store for good ([`fail`]): its [`Completion`] keeps the
//!   cause, the writer thread stops, and nothing is written again until reopened, so a
//!   store cannot corrupt what it wrote.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use crate::completion::{Completion, Ticket};
use crate::lock;

/// Whether queued work may be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    Nothing,
    Now,
    At(Instant),
}

/// The writer's part of a store's state, behind the store's state lock.
#[derive(Debug, Default)]
pub struct WriterState {
    /// The last ticket handed out.
    pub last_ticket: Ticket,
    /// The writer thread sleeps on [`Signal`] and must be woken for new work.
    pub waiting: bool,
    /// Closing: the writer writes what is queued, makes it durable and stops.
    pub closing: bool,
}

impl WriterState {
    /// Hands out the next ticket.
    pub fn next_ticket(&mut self) -> Ticket {
        self.last_ticket += 1;
        self.last_ticket
    }
}

/// What the state lock guards: the store's state `S` (its queue, its tables) and the
/// [`WriterState`]. Derefs to `S`.
#[derive(Debug)]
pub struct Locked<S> {
    pub writing: WriterState,
    pub store: S,
}

impl<S> Deref for Locked<S> {
    type Target = S;

    fn deref(&self) -> &S {
        &self.store
    }
}

impl<S> DerefMut for Locked<S> {
    fn deref_mut(&mut self) -> &mut S {
        &mut self.store
    }
}

/// How submitters wake the writer thread.
#[derive(Default)]
pub struct Signal {
    cv: Condvar,
    /// A deferred submit would have woken the writer: [`Signal::wake_deferred`] does it.
    /// Outside the state lock so that waking never waits for the writer (which holds that
    /// lock while it takes a batch, and may be preempted meanwhile).
    deferred: AtomicBool,
}

impl Signal {
    /// Wakes the writer if a deferred submit left it asleep with work due. Lock-free: the
    /// submit saw the writer waiting under the state lock, and the writer's wait releases
    /// that lock only once it waits, so the notification reaches it (or it is already
    /// awake, and finds the queued work when it looks under the lock).
    pub fn wake_deferred(&self) {
        if self.deferred.swap(false, Ordering::AcqRel) {
            self.cv.notify_one();
        }
    }

    /// Wakes the writer thread whatever it waits for (closing, failure).
    pub fn wake_all(&self) {
        self.cv.notify_all();
    }

    /// Wakes the writer thread if it sleeps (its `waiting` flag is cleared here).
    pub fn wake_if_waiting(&self, ws: &mut WriterState) {
        if ws.waiting {
            ws.waiting = false;
            self.cv.notify_one();
        }
    }
}

/// What a store shares with its writer thread and its waiters: its state `S` and the
/// [`WriterState`] behind the state lock, the writer's wake-up, and the completion of its
/// tickets (failing with `E`).
pub struct Group<S, E> {
    pub state: Mutex<Locked<S>>,
    pub signal: Signal,
    pub completion: Completion<E>,
}

impl<S, E> Group<S, E> {
    pub fn new(store: S) -> Self {
        Group {
            state: Mutex::new(Locked {
                writing: WriterState::default(),
                store,
            }),
            signal: Signal::default(),
            completion: Completion::default(),
        }
    }

    /// Locks the state.
    pub fn lock(&self) -> MutexGuard<'_, Locked<S>> {
        lock(&self.state)
    }
}

/// What the writer thread needs from a store (`S` its state, `E` its error): its
/// [`Group`] and its batching rules. Implemented by the store's shared state.
pub trait GroupCommit<S, E>: Sync {
    fn group(&self) -> &Group<S, E>;
    /// What the writer thread may write now (never `Now` once failed).
    fn due(&self, st: &Locked<S>) -> Due;
    /// Takes what is due and writes it as one batch, completing its tickets.
    fn write_batch(&self) -> Result<(), E>;
    /// At close, after the last batch: makes everything written durable.
    fn finish(&self) -> Result<(), E>;
    /// Wakes the store's other threads after a failure (the writer thread is woken anyway).
    fn on_fail(&self) {}
}

/// After queueing work under the state lock: wakes the writer if it sleeps and `wake` (the
/// work changes what it waits for). With `defer` the wake-up is left to
/// [`Signal::wake_deferred`]. The notification goes out after unlocking: the writer waits
/// inside the condition variable's wait (it set `waiting` under this lock), so it cannot be
/// lost, and woken while we still held the lock it would block on it at once.
pub fn submitted<S, E>(
    group: &Group<S, E>,
    mut st: MutexGuard<'_, Locked<S>>,
    wake: bool,
    defer: bool,
) {
    let ws = &mut st.writing;
    if !(ws.waiting && wake) {
        return;
    }
    let signal = &group.signal;
    if defer {
        signal.deferred.store(true, Ordering::Release);
    } else {
        ws.waiting = false;
        drop(st);
        signal.cv.notify_one();
    }
}

/// Puts the store in the failed state (the first error wins, and is returned) and wakes
/// every thread and waiter.
pub fn fail<S, E>(store: &impl GroupCommit<S, E>, err: E) -> Arc<E> {
    let group = store.group();
    let cause = {
        // Under the state lock, so the writer thread (which looks for a failure under it
        // before it sleeps) cannot miss the wake-up.
        let _st = group.lock();
        group.completion.fail(err)
    };
    group.signal.wake_all();
    store.on_fail();
    group.completion.notify_listener();
    cause
}

/// Asks the writer thread to write what is queued, make it durable and stop.
pub fn close<S, E>(group: &Group<S, E>) {
    group.lock().writing.closing = true;
    group.signal.wake_all();
}

/// The writer thread's loop; returns when the store closed or failed.
pub fn run<S, E>(store: &impl GroupCommit<S, E>) {
    crate::run_as_batch_thread();
    loop {
        if !wait_for_work(store) {
            return;
        }
        if let Err(e) = store.write_batch() {
            fail(store, e);
            return;
        }
    }
}

/// Sleeps until a batch is due (`true`), or the store closed (after finishing) or failed.
fn wait_for_work<S, E>(store: &impl GroupCommit<S, E>) -> bool {
    let group = store.group();
    let completion = &group.completion;
    let cv = &group.signal.cv;
    let mut st = group.lock();
    loop {
        if completion.has_failed() {
            return false;
        }
        match store.due(&st) {
            Due::Now => return true,
            Due::At(at) => {
                st.writing.waiting = true;
                let timeout = at.saturating_duration_since(Instant::now());
                st = cv
                    .wait_timeout(st, timeout)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            Due::Nothing if st.writing.closing => {
                drop(st);
                if !completion.has_failed() {
                    if let Err(e) = store.finish() {
                        fail(store, e);
                    }
                }
                return false;
            }
            Due::Nothing => {
                st.writing.waiting = true;
                st = cv.wait(st).unwrap_or_else(PoisonError::into_inner);
            }
        }
        st.writing.waiting = false;
    }
}
