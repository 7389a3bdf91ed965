//! SignFlow patch: reads that finish before their future is returned.
//!
//! The state machine of an `async fn` is compiled in every crate that awaits it, and the
//! dispatcher's reads await the read of each backend, so every crate that read a tensor
//! compiled the CUDA and WGPU fusion servers (their queues, fused kernels and code generators)
//! again. The dispatcher's reads now run here, to the end, and return a ready future: callers
//! compile only that. Burn's readers block on these futures anyway (`try_read_sync`).

/// Runs `future` to its end on this thread.
pub(crate) fn now<T>(future: impl Future<Output = T>) -> T {
    burn_backend::try_read_sync(future).expect("a blocking read (every native platform supports one)")
}
