//! Exact counts of the device work a piece of code causes: kernels launched and compiled (from
//! cubecl's launch and compilation log, switched on by [`crate::runtime::configure`] with a log
//! file) and the times the host waited for a device (reads of tensor data, syncs, re-seeds,
//! counted by SignFlow's patch of Burn's `Dispatch` backend), and the host work of Burn's fusion
//! layer (operations registered, plans run; SignFlow's patch of `burn-fusion`). These counts
//! depend only on the code, not on the GPU, so a software adapter (llvmpipe) gives the counts of
//! a CUDA card.
//!
//! ```no_run
//! # fn main() -> std::io::Result<()> {
//! let log = std::env::temp_dir().join("kernels.log");
//! device::runtime::configure(None, Some(&log));
//! let counter = device::counters::WorkCounter::new(&log);
//! let before = counter.read()?;
//! // ... work on a WGPU or CUDA device, then `device::memory::sync(&dev)` ...
//! let work = counter.read()? - before;
//! println!("{} launches, {} host waits", work.launches, work.host_waits());
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

/// Line prefix of a launched kernel in cubecl's profiling log (level `minimal`).
const LAUNCH: &str = "Executing ";
/// Line prefix of a compiled kernel in cubecl's compilation log (level `basic`).
const COMPILE: &str = "[Compiling kernel]";

/// Work counted between two [`WorkCounter::read`]s (subtract them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WorkCounts {
    /// Kernels launched.
    pub launches: u64,
    /// Kernels compiled (a kernel found in the compilation cache is not compiled).
    pub compilations: u64,
    /// Reads of tensor data to the host (each waits for the work it depends on).
    pub reads: u64,
    /// Explicit device syncs.
    pub syncs: u64,
    /// Backend re-seeds (under Burn's fusion, each drains the queue and waits).
    pub seeds: u64,
    /// Operations registered with Burn's fusion layer, tensor drops included: each costs host
    /// time (an IR built, a stream resolved, a plan looked up) whether or not it launches.
    pub operations: u64,
    /// Of these, tensor drops.
    pub drops: u64,
    /// Fusion execution plans run (a fused block or a set of unfused operations each).
    pub plans: u64,
    /// Launches by kernel name (cubecl's short type name).
    pub by_kernel: BTreeMap<String, u64>,
}

impl WorkCounts {
    /// Every time the host waited: reads, syncs and re-seeds.
    pub fn host_waits(&self) -> u64 {
        self.reads + self.syncs + self.seeds
    }

    /// The `n` kernels launched most often, most first.
    pub fn top_kernels(&self, n: usize) -> Vec<(&str, u64)> {
        let mut v: Vec<(&str, u64)> = self.by_kernel.iter().map(|(k, c)| (k.as_str(), *c)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        v.truncate(n);
        v
    }
}

impl std::ops::Sub for WorkCounts {
    type Output = WorkCounts;

    fn sub(self, before: WorkCounts) -> WorkCounts {
        let mut by_kernel = self.by_kernel;
        for (name, n) in &before.by_kernel {
            if let Some(c) = by_kernel.get_mut(name) {
                *c = c.saturating_sub(*n);
            }
        }
        by_kernel.retain(|_, c| *c > 0);
        WorkCounts {
            launches: self.launches.saturating_sub(before.launches),
            compilations: self.compilations.saturating_sub(before.compilations),
            reads: self.reads.saturating_sub(before.reads),
            syncs: self.syncs.saturating_sub(before.syncs),
            seeds: self.seeds.saturating_sub(before.seeds),
            operations: self.operations.saturating_sub(before.operations),
            drops: self.drops.saturating_sub(before.drops),
            plans: self.plans.saturating_sub(before.plans),
            by_kernel,
        }
    }
}

/// Burn fusion's operations registered, tensor drops among them, and plans run so far.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn fusion_work() -> [u64; 3] {
    let work = burn_fusion::counters::fusion_work();
    [work.operations, work.drops, work.plans]
}

/// Without a GPU backend nothing goes through Burn's fusion.
#[cfg(not(any(feature = "cuda", feature = "wgpu")))]
fn fusion_work() -> [u64; 3] {
    [0; 3]
}

/// Reads the counts of a process configured with a count log ([`crate::runtime::configure`]).
#[derive(Debug, Clone)]
pub struct WorkCounter {
    log: PathBuf,
}

impl WorkCounter {
    /// A counter over `log`, the file given to [`crate::runtime::configure`].
    pub fn new(log: &Path) -> Self {
        Self { log: log.to_path_buf() }
    }

    /// The counts since the process started. cubecl writes its log on a thread of its own: sync
    /// the device first, then this waits until the log has stopped growing (at most 10 s).
    pub fn read(&self) -> std::io::Result<WorkCounts> {
        let text = self.settled_log()?;
        let mut counts = WorkCounts::default();
        for line in text.lines() {
            if let Some(name) = line.strip_prefix(LAUNCH) {
                counts.launches += 1;
                *counts.by_kernel.entry(name.trim().to_string()).or_default() += 1;
            } else if line.starts_with(COMPILE) {
                counts.compilations += 1;
            }
        }
        let waits = burn_dispatch::counters::host_waits();
        counts.reads = waits.reads;
        counts.syncs = waits.syncs;
        counts.seeds = waits.seeds;
        [counts.operations, counts.drops, counts.plans] = fusion_work();
        Ok(counts)
    }

    fn settled_log(&self) -> std::io::Result<String> {
        let size = || {
            std::fs::metadata(&self.log).map(|m| m.len()).or_else(|e| match e.kind() {
                std::io::ErrorKind::NotFound => Ok(0),
                _ => Err(e),
            })
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut last = size()?;
        let mut stable = 0;
        while stable < 3 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(30));
            let now = size()?;
            stable = if now == last { stable + 1 } else { 0 };
            last = now;
        }
        match std::fs::read(&self.log) {
            Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_lines_of_the_log_and_subtracts() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("k.log");
        std::fs::write(&log, "Executing matmul\n[Compiling kernel] matmul\nExecuting matmul\nExecuting fuse\n")
            .unwrap();
        let c = WorkCounter::new(&log);
        let a = c.read().unwrap();
        assert_eq!((a.launches, a.compilations), (3, 1));
        assert_eq!(a.top_kernels(1), vec![("matmul", 2)]);
        std::fs::write(
            &log,
            "Executing matmul\n[Compiling kernel] matmul\nExecuting matmul\nExecuting fuse\nExecuting fuse\n",
        )
        .unwrap();
        let d = c.read().unwrap() - a;
        assert_eq!((d.launches, d.compilations), (1, 0));
        assert_eq!(d.by_kernel.into_iter().collect::<Vec<_>>(), vec![("fuse".to_string(), 1)]);
    }
}
