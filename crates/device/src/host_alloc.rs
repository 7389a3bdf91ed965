//! The host allocator's settings for tensor-sized buffers on the CPU backend.
//!
//! Burn's CPU backend allocates every activation, gradient and matmul output with the system
//! allocator. glibc serves each allocation above a moving threshold (128 KiB at start) with its own
//! `mmap` and unmaps it on free, so a training step or a batch of inference faulted its buffers in
//! again on every pass: on the reference model 680k page faults in 6 training steps, and steps
//! 21-25% longer than with the settings below (docs/PERFORMANCE.md). [`keep_freed_memory`] lets
//! the heap keep and reuse them instead; [`bench_main!`](crate::bench_main) applies it in the
//! criterion benches.

/// mmap threshold set by [`keep_freed_memory`]: glibc's maximum (32 MiB on 64-bit). Allocations
/// below it come from the heap and are reused after free.
pub const MMAP_THRESHOLD_BYTES: usize = 32 << 20;
/// Trim threshold set by [`keep_freed_memory`]: free memory at the top of the heap is returned to
/// the system only above this much.
pub const TRIM_THRESHOLD_BYTES: usize = 256 << 20;

/// Raise glibc's mmap threshold ([`MMAP_THRESHOLD_BYTES`]) and trim threshold
/// ([`TRIM_THRESHOLD_BYTES`]) so that tensor buffers freed by one step or batch are reused by the
/// next instead of being unmapped and faulted in again. Returns `true` where the settings were
/// applied (Linux with glibc), `false` elsewhere, where it does nothing.
///
/// Call it first thing in `main`, before other threads start: the `trainer`, `infer` and `device`
/// binaries and the criterion benches do; a program that embeds `infer` should too. Settings given
/// through `GLIBC_TUNABLES=glibc.malloc.mmap_threshold=...` are overridden. The cost is resident
/// memory: freed buffers stay in the process (up to the largest step's working set, plus
/// [`TRIM_THRESHOLD_BYTES`] at the top of the heap) instead of going back to the system.
pub fn keep_freed_memory() -> bool {
    apply()
}

/// `criterion_main!` with [`keep_freed_memory`] applied first, so that a bench measures the
/// allocator the binaries run with. Takes the `criterion_group!` names; the bench crate must
/// depend on `criterion` (this crate does not).
///
/// ```ignore
/// criterion::criterion_group!(benches, bench);
/// device::bench_main!(benches);
/// ```
#[macro_export]
macro_rules! bench_main {
    ($($group:path),+ $(,)?) => {
        fn main() {
            $crate::keep_freed_memory();
            $($group();)+
            ::criterion::Criterion::default().configure_from_args().final_summary();
        }
    };
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn apply() -> bool {
    // SAFETY: mallopt only sets allocator parameters (taking the main arena's lock); the values
    // are in range for both parameters (mmap threshold <= HEAP_MAX/2 = 32 MiB on 64-bit).
    unsafe {
        let mmap = libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES as libc::c_int);
        let trim = libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES as libc::c_int);
        mmap == 1 && trim == 1
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn apply() -> bool {
    false
}
