//! Per-thread deadlines: a binary heap, lazily cleaned.
//!
//! A connection has at most one live entry per [`Timer`] kind: it remembers the deadline
//! it armed (`Armed`), and an entry whose deadline is no longer the armed one is stale and
//! skipped when it comes out. Work that only moves a deadline later (a read, a write)
//! touches no heap: when the entry comes out, the handler finds the true deadline and arms
//! it again. So 10,000 idle connections with 10 s heart-beats cost one pop and one push per
//! connection per interval, and the thread sleeps in between (`epoll_wait` until the
//! earliest deadline).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

use crate::api::ConnId;

/// What a deadline is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Timer {
    Handshake = 0,
    Heartbeat = 1,
    Ttl = 2,
    Linger = 3,
}

/// The deadline armed for each kind of one connection.
#[derive(Debug, Default)]
pub(crate) struct Armed([Option<Instant>; 4]);

impl Armed {
    pub(crate) fn get(&self, timer: Timer) -> Option<Instant> {
        self.0[timer as usize]
    }

    pub(crate) fn clear(&mut self, timer: Timer) {
        self.0[timer as usize] = None;
    }
}

/// The deadlines of one I/O thread.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<(Instant, ConnId, Timer)>>,
}

impl Timers {
    /// Arms `timer` of `conn` at `at`, unless it is armed at or before that already.
    pub(crate) fn arm(&mut self, armed: &mut Armed, conn: ConnId, timer: Timer, at: Instant) {
        let slot = &mut armed.0[timer as usize];
        if slot.is_some_and(|current| current <= at) {
            return;
        }
        *slot = Some(at);
        self.heap.push(Reverse((at, conn, timer)));
    }

    /// The earliest deadline (stale entries included: waking for one costs a pass).
    pub(crate) fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, _, _))| *at)
    }

    /// The next entry due by `now`, if any (the caller checks it against `Armed`).
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<(Instant, ConnId, Timer)> {
        if self.next()? > now {
            return None;
        }
        self.heap.pop().map(|Reverse(entry)| entry)
    }
}
