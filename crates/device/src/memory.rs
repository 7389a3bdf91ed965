//! Device memory statistics and cache emptying that reach the concrete backend.
//!
//! Pool statistics come from the cubecl runtime behind the [`DispatchDevice`] variant; cache
//! emptying goes through `Dispatch` (whose upstream `memory_cleanup` is a no-op; the vendored
//! dispatcher passes it to the backend). Fusion defers frees, so the device is synced first.

use serde::{Deserialize, Serialize};

use burn::DispatchDevice;

/// A snapshot of a device's memory pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryStats {
    /// Bytes held by live tensors.
    pub bytes_in_use: u64,
    /// Bytes the pool has reserved from the device (>= in use).
    pub bytes_reserved: u64,
    /// Live allocations.
    pub allocations: u64,
}

/// Pool statistics of `device`, or `None` when its backend keeps none (the CPU backend uses the
/// system allocator).
pub fn memory_stats(device: &DispatchDevice) -> Option<MemoryStats> {
    match device {
        #[cfg(feature = "cuda")]
        DispatchDevice::Cuda(d) => {
            use cubecl::Runtime;
            sync(device);
            let u = cubecl::cuda::CudaRuntime::client(d).memory_usage().ok()?;
            Some(MemoryStats {
                bytes_in_use: u.bytes_in_use,
                bytes_reserved: u.bytes_reserved,
                allocations: u.number_allocs,
            })
        }
        #[cfg(feature = "wgpu")]
        DispatchDevice::Wgpu(d) => {
            use cubecl::Runtime;
            sync(device);
            let u = cubecl::wgpu::WgpuRuntime::client(d).memory_usage().ok()?;
            Some(MemoryStats {
                bytes_in_use: u.bytes_in_use,
                bytes_reserved: u.bytes_reserved,
                allocations: u.number_allocs,
            })
        }
        _ => None,
    }
}

/// Wait for all queued work on `device`. Errors are logged: a failed sync surfaces again on the
/// next read of a tensor, where the caller handles it.
pub fn sync(device: &DispatchDevice) {
    use burn::tensor::backend::Backend;
    if let Err(e) = burn::Dispatch::sync(device) {
        tracing::warn!("device sync failed: {e:?}");
    }
}

/// Release cached, unused blocks of `device`'s memory pool back to the driver. Returns `true`
/// when the backend has a pool to empty.
pub fn empty_cache(device: &DispatchDevice) -> bool {
    use burn::tensor::backend::Backend;
    match device {
        DispatchDevice::Flex(_) => false,
        #[allow(unreachable_patterns)] // CUDA and WGPU, when compiled in
        _ => {
            sync(device);
            // Through `Dispatch` (its vendored `memory_cleanup` reaches the backend), not the
            // concrete fusion backend, whose client this crate would otherwise compile again.
            burn::Dispatch::memory_cleanup(device);
            true
        }
    }
}

/// What a block of work left allocated on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryDelta {
    /// Statistics before.
    pub before: MemoryStats,
    /// Statistics after.
    pub after: MemoryStats,
}

impl MemoryDelta {
    /// Change of bytes in use (after - before).
    pub fn in_use_change(&self) -> i64 {
        self.after.bytes_in_use as i64 - self.before.bytes_in_use as i64
    }
    /// Change of bytes reserved (after - before).
    pub fn reserved_change(&self) -> i64 {
        self.after.bytes_reserved as i64 - self.before.bytes_reserved as i64
    }
}

/// Measures the memory a block of work leaves behind:
/// `let g = MemoryGuard::new(&dev); work(); let left = g.finish();`.
/// `finish` returns `None` on backends without statistics.
#[derive(Debug)]
pub struct MemoryGuard {
    device: DispatchDevice,
    before: Option<MemoryStats>,
    label: String,
}

impl MemoryGuard {
    /// Start measuring `device`'s memory for the work labelled `label`.
    pub fn new(device: &DispatchDevice, label: impl Into<String>) -> Self {
        Self { device: device.clone(), before: memory_stats(device), label: label.into() }
    }

    /// Stop and return the change (`None` on backends without statistics).
    pub fn finish(self) -> Option<MemoryDelta> {
        let before = self.before?;
        let after = memory_stats(&self.device)?;
        let delta = MemoryDelta { before, after };
        tracing::debug!(
            "{}: left {} bytes in use ({} allocations), reserved changed by {} bytes",
            self.label,
            delta.in_use_change(),
            after.allocations as i64 - before.allocations as i64,
            delta.reserved_change()
        );
        Some(delta)
    }
}

/// Host memory: this process's resident set and the machine's total and available memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostMemory {
    /// Resident set size of this process.
    pub process_rss_bytes: u64,
    /// Total host memory.
    pub total_bytes: u64,
    /// Available host memory.
    pub available_bytes: u64,
}

/// Read [`HostMemory`] (used as the CPU's memory budget, e.g. by automatic batch sizing).
pub fn host_memory() -> Option<HostMemory> {
    let pid = sysinfo::get_current_pid().ok()?;
    let mut sys = sysinfo::System::new();
    sys.refresh_memory();
    sys.refresh_processes_specifics(
        sysinfo::ProcessesToUpdate::Some(&[pid]),
        false,
        sysinfo::ProcessRefreshKind::nothing().with_memory(),
    );
    let rss = sys.process(pid)?.memory();
    Some(HostMemory {
        process_rss_bytes: rss,
        total_bytes: sys.total_memory(),
        available_bytes: sys.available_memory(),
    })
}
