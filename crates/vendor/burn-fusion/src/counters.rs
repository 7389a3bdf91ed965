//! SignFlow patch: process-wide counts of the work Burn's fusion layer does on the host: the
//! operations registered on its streams (each one an IR built, a stream resolved and a plan
//! looked up; tensor drops included, as they are registered like any operation) and the
//! execution plans run (each one fused block or unfused operation set handed to the backend).
//! Counting only; relaxed atomics.

use core::sync::atomic::{AtomicU64, Ordering};

static OPERATIONS: AtomicU64 = AtomicU64::new(0);
static DROPS: AtomicU64 = AtomicU64::new(0);
static PLANS: AtomicU64 = AtomicU64::new(0);

/// The fusion layer's host work so far in this process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FusionWork {
    /// Operations registered on a fusion stream, tensor drops included.
    pub operations: u64,
    /// Of these, tensor drops.
    pub drops: u64,
    /// Execution plans run.
    pub plans: u64,
}

/// The counts so far.
pub fn fusion_work() -> FusionWork {
    FusionWork {
        operations: OPERATIONS.load(Ordering::Relaxed),
        drops: DROPS.load(Ordering::Relaxed),
        plans: PLANS.load(Ordering::Relaxed),
    }
}

pub(crate) fn count_operation(drop: bool) {
    OPERATIONS.fetch_add(1, Ordering::Relaxed);
    if drop {
        DROPS.fetch_add(1, Ordering::Relaxed);
    }
}

pub(crate) fn count_plan() {
    PLANS.fetch_add(1, Ordering::Relaxed);
}
