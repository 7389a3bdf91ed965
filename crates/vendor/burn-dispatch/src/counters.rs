//! SignFlow patch: counts of the calls through [`Dispatch`](crate::Dispatch) that make the host
//! wait for a device (a read of tensor data, a transaction, a sync, a re-seed: under Burn's
//! fusion a seed drains the queue). Counted when requested, before the backend runs them, so a
//! caller can tell how many times one piece of work waited; relaxed atomics, process-wide.

use core::sync::atomic::{AtomicU64, Ordering};

static READS: AtomicU64 = AtomicU64::new(0);
static SYNCS: AtomicU64 = AtomicU64::new(0);
static SEEDS: AtomicU64 = AtomicU64::new(0);

/// The host waits requested so far in this process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostWaits {
    /// Tensor data read back to the host (`into_data` of any kind, or one transaction).
    pub reads: u64,
    /// Explicit device syncs.
    pub syncs: u64,
    /// Backend re-seeds.
    pub seeds: u64,
}

/// The counts so far.
pub fn host_waits() -> HostWaits {
    HostWaits {
        reads: READS.load(Ordering::Relaxed),
        syncs: SYNCS.load(Ordering::Relaxed),
        seeds: SEEDS.load(Ordering::Relaxed),
    }
}

pub(crate) fn count_read() {
    READS.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn count_sync() {
    SYNCS.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn count_seed() {
    SEEDS.fetch_add(1, Ordering::Relaxed);
}
