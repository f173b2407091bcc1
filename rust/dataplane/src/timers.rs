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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn only_the_armed_deadline_is_live_and_a_later_one_does_not_replace_an_earlier() {
        let mut timers = Timers::default();
        let mut armed = Armed::default();
        let conn = ConnId(7);
        let t0 = Instant::now();
        let (early, late) = (
            t0 + Duration::from_millis(10),
            t0 + Duration::from_millis(20),
        );
        timers.arm(&mut armed, conn, Timer::Ttl, late);
        timers.arm(&mut armed, conn, Timer::Ttl, early); // earlier: armed, the late one stale
        timers.arm(&mut armed, conn, Timer::Ttl, late); // later than armed: nothing
        assert_eq!(armed.get(Timer::Ttl), Some(early));
        assert_eq!(timers.next(), Some(early));
        assert_eq!(timers.pop_due(t0), None, "nothing is due yet");
        assert_eq!(timers.pop_due(late), Some((early, conn, Timer::Ttl)));
        armed.clear(Timer::Ttl);
        // The stale entry comes out too; the caller skips it (armed is not `late`).
        assert_eq!(timers.pop_due(late), Some((late, conn, Timer::Ttl)));
        assert_ne!(armed.get(Timer::Ttl), Some(late));
        assert_eq!(timers.pop_due(late), None);
        assert_eq!(timers.next(), None);
    }
}
