//! What the journal and the page stores share, so each store is only its format and its
//! state: the file system they write through ([`FileSystem`], the real
//! [`StdFileSystem`] and the fault-injecting [`FaultyFileSystem`] of the tests), the
//! ticketed group-commit writer ([`writer`], [`Completion`]) and the error parts that
//! mean the same in both ([`IoError`], [`Corruption`], [`ForeignFile`]). Pure Rust (no
//! pyo3).
//!
//! The stores keep their own batching rules (the journal's buffer size and timeout and
//! its callers that write their own batch; the page store's per-page segments) behind
//! [`writer::GroupCommit`]; the shape of the hot path stays theirs: one `pwrite` per
//! segment and at most one `fdatasync` per batch.

mod completion;
mod counters;
mod error;
mod fault;
mod fs;
pub mod le;
pub mod writer;

pub use completion::{Completion, Listener, Progress, Stopped, Ticket};
pub use counters::{Counters, IoStats};
pub use error::{io_err, root_errno, Corruption, ForeignFile, IoError};
pub use fault::{Fault, FaultyFileSystem, FsOp};
pub use fs::{read_exact_at, FileSystem, StdFileSystem, StoreFile};

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Makes the calling thread a batch thread for Linux's scheduler (`SCHED_BATCH`): when
/// the node's event loop wakes it and every core is busy, it waits for a core to free (or
/// for the scheduler's next tick) instead of taking the loop's core at once. The loop is
/// the node's serial part: a writer or I/O thread that preempted it at each wake-up cost
/// it a context switch per wake-up (`BENCHMARKS.md`, "Step 2, fourth pass"). With a core
/// idle nothing changes. Best effort: where the call fails the thread keeps its policy.
pub fn run_as_batch_thread() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` is a valid sched_param that outlives the call, which only reads
        // it; pid 0 names the calling thread. A failure returns -1 and changes nothing.
        unsafe {
            libc::sched_setscheduler(0, libc::SCHED_BATCH, &param);
        }
    }
}

/// Locks `m`, going on past a poisoned lock: a panic elsewhere must not stop the writer
/// from failing the store cleanly.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
