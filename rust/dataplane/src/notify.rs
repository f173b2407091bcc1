//! The events' way to Python: one queue shared by the I/O threads and one eventfd.
//!
//! An I/O thread collects the events of one pass of its loop and appends them under the
//! queue's lock at the end of the pass; it pokes the eventfd only when the queue was empty
//! before (a reader is owed a wake-up only for the first batch it has not taken yet).
//! [`EventQueue::drain`] first resets the eventfd, then takes the whole queue. No wake-up
//! is lost: a batch appended after the take finds the queue empty and pokes the eventfd
//! again, after the reset; at worst a poke that raced the take wakes the reader to an
//! empty queue.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::api::Event;
use crate::error::{Error, Result};

/// The queue of events for Python and the eventfd that says it is not empty.
#[derive(Debug)]
pub(crate) struct EventQueue {
    queue: Mutex<Vec<Event>>,
    eventfd: File,
    /// Pokes of the eventfd so far (the batching tests count them).
    pokes: AtomicU64,
    /// Events queued (the I/O threads hold back reading while it is at the limit).
    len: AtomicUsize,
    limit: usize,
}

impl EventQueue {
    pub(crate) fn new(limit: usize) -> Result<Self> {
        // SAFETY: a plain syscall with no pointer arguments; a non-negative result is a
        // fresh descriptor that nothing else owns.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(Error::setup("eventfd")(std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` is the valid descriptor just created, owned by nobody else: the
        // OwnedFd (then the File) becomes its only owner and closes it once.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self {
            queue: Mutex::new(Vec::new()),
            eventfd: File::from(owned),
            pokes: AtomicU64::new(0),
            len: AtomicUsize::new(0),
            limit,
        })
    }

    pub(crate) fn fileno(&self) -> RawFd {
        self.eventfd.as_raw_fd()
    }

    pub(crate) fn pokes(&self) -> u64 {
        self.pokes.load(Ordering::Relaxed)
    }

    /// Appends `events` (leaving it empty) and pokes the eventfd if the queue was empty;
    /// whether the queue is below its limit after.
    pub(crate) fn publish(&self, events: &mut Vec<Event>) -> bool {
        if events.is_empty() {
            return self.len() < self.limit;
        }
        let (was_empty, room) = {
            let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            let was_empty = queue.is_empty();
            queue.append(events);
            self.len.store(queue.len(), Ordering::Release);
            (was_empty, queue.len() < self.limit)
        };
        if was_empty {
            self.pokes.fetch_add(1, Ordering::Relaxed);
            // The only failure is EAGAIN with the counter near u64::MAX: readable anyway.
            let _ = (&self.eventfd).write(&1u64.to_ne_bytes());
        }
        room
    }

    /// Events queued now.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Resets the eventfd, then moves every queued event to the end of `out`; whether the
    /// queue was at its limit (the I/O threads then wait to be told to read on).
    pub(crate) fn drain(&self, out: &mut Vec<Event>) -> bool {
        let mut counter = [0u8; 8];
        // EAGAIN: it was 0 already.
        let _ = (&self.eventfd).read(&mut counter);
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        let full = queue.len() >= self.limit;
        if out.is_empty() {
            std::mem::swap(&mut *queue, out);
        } else {
            out.append(&mut queue);
        }
        self.len.store(0, Ordering::Release);
        full
    }

    /// Blocks until the eventfd is readable or `timeout` passes; whether it is readable.
    pub(crate) fn wait(&self, timeout: Duration) -> bool {
        let mut poll_fd = libc::pollfd {
            fd: self.eventfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let millis = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: `poll_fd` is a live, initialised pollfd and the count (1) matches it; the
        // descriptor stays open for the call (self owns it).
        let ready = unsafe { libc::poll(std::ptr::addr_of_mut!(poll_fd), 1, millis) };
        ready > 0 && poll_fd.revents & libc::POLLIN != 0
    }
}
