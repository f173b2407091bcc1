//! The shared writer with a toy store: batches of queued numbers "written" to a vector,
//! with a failure that can be armed. The stores' own tests (journal, paging) cover it with
//! real files and the fault-injecting file system.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use wal::writer::{self, Due, Group, GroupCommit, Locked};
use wal::{Stopped, Ticket};

#[derive(Default)]
struct Queue {
    items: Vec<u32>,
}

struct Toy {
    group: Group<Queue, String>,
    /// What was written, batch by batch.
    written: Mutex<Vec<Vec<u32>>>,
    finished: AtomicBool,
    fail_next: AtomicBool,
}

impl GroupCommit<Queue, String> for Toy {
    fn group(&self) -> &Group<Queue, String> {
        &self.group
    }

    fn due(&self, st: &Locked<Queue>) -> Due {
        if st.items.is_empty() || self.group.completion.has_failed() {
            Due::Nothing
        } else {
            Due::Now
        }
    }

    fn write_batch(&self) -> Result<(), String> {
        let (batch, ticket) = {
            let mut st = self.group.lock();
            (std::mem::take(&mut st.items), st.writing.last_ticket)
        };
        if self.fail_next.swap(false, Ordering::SeqCst) {
            return Err("disk on fire".into());
        }
        self.written.lock().unwrap().push(batch);
        self.group.completion.complete(ticket);
        Ok(())
    }

    fn finish(&self) -> Result<(), String> {
        self.finished.store(true, Ordering::SeqCst);
        Ok(())
    }
}

fn start() -> (Arc<Toy>, thread::JoinHandle<()>) {
    let toy = Arc::new(Toy {
        group: Group::new(Queue::default()),
        written: Mutex::new(Vec::new()),
        finished: AtomicBool::new(false),
        fail_next: AtomicBool::new(false),
    });
    let t = Arc::clone(&toy);
    let handle = thread::spawn(move || writer::run(&*t));
    (toy, handle)
}

fn submit(toy: &Toy, n: u32, defer: bool) -> Ticket {
    let mut st = toy.group.lock();
    st.items.push(n);
    let ticket = st.writing.next_ticket();
    writer::submitted(&toy.group, st, true, defer);
    ticket
}

fn wait(toy: &Toy, ticket: Ticket) -> Result<(), Stopped<String>> {
    toy.group.completion.wait(ticket, || false)
}

fn wait_until(what: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !what() {
        assert!(Instant::now() < deadline, "timed out");
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn tickets_complete_in_order_and_everything_is_written_once() {
    let (toy, handle) = start();
    let tickets: Vec<_> = (0..100).map(|n| submit(&toy, n, false)).collect();
    wait(&toy, *tickets.last().unwrap()).unwrap();
    assert_eq!(toy.group.completion.completed(), 100);
    let all: Vec<u32> = toy.written.lock().unwrap().concat();
    assert_eq!(all, (0..100).collect::<Vec<_>>());
    writer::close(&toy.group);
    handle.join().unwrap();
    assert!(
        toy.finished.load(Ordering::SeqCst),
        "close makes what was written durable"
    );
}

#[test]
fn a_deferred_submit_waits_for_its_wake_up() {
    let (toy, handle) = start();
    wait_until(|| toy.group.lock().writing.waiting);
    let t = submit(&toy, 1, true);
    thread::sleep(Duration::from_millis(50));
    assert_eq!(
        toy.group.completion.completed(),
        0,
        "written without a wake-up"
    );
    toy.group.signal.wake_deferred();
    wait(&toy, t).unwrap();
    writer::close(&toy.group);
    handle.join().unwrap();
}

#[test]
fn the_first_failure_is_sticky_and_stops_the_writer() {
    let (toy, handle) = start();
    wait(&toy, submit(&toy, 1, false)).unwrap();
    toy.fail_next.store(true, Ordering::SeqCst);
    let failed = submit(&toy, 2, false);
    match wait(&toy, failed) {
        Err(Stopped::Failed(cause)) => assert_eq!(*cause, "disk on fire"),
        other => panic!("{other:?}"),
    }
    // The writer thread stopped; a later failure does not replace the first.
    handle.join().unwrap();
    writer::fail(&*toy, "later".to_string());
    let progress = toy.group.completion.progress();
    assert_eq!(progress.completed, 1);
    assert_eq!(
        progress.failed.as_deref().map(String::as_str),
        Some("disk on fire")
    );
    assert!(
        !toy.finished.load(Ordering::SeqCst),
        "a failed store is not finished"
    );
}

#[test]
fn waiters_for_what_was_never_written_get_closed() {
    let (toy, handle) = start();
    writer::close(&toy.group);
    handle.join().unwrap();
    toy.group.completion.stop();
    assert!(matches!(wait(&toy, 1), Err(Stopped::Closed)));
}
