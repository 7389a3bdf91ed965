//! CPU time of each thread of this process, so a count can say which thread a step's host time
//! goes to: the caller's (autodiff and Burn's dispatch), Burn fusion's device thread (plans,
//! allocation, launch arguments) or cubecl's compute server (the driver's launch calls; on a
//! software adapter such as llvmpipe also the kernels themselves). Linux only: each thread's
//! name from `/proc/self/task/<tid>/comm` and its CPU clock (nanoseconds, `clock_gettime` on the
//! thread's clock id, the one `pthread_getcpuclockid` returns); elsewhere nothing is measured.
//! cubecl's device channel spins and yields before it sleeps, so a thread waiting on it is
//! charged CPU time too: these are upper bounds on each thread's work.

use std::collections::BTreeMap;
use std::time::Duration;

/// CPU time of every live thread of the process at one moment, by thread id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadCpu {
    /// Thread id -> (name, CPU time so far).
    threads: BTreeMap<i64, (String, Duration)>,
}

impl ThreadCpu {
    /// The process's threads now (empty where the platform gives no per-thread clocks).
    pub fn now() -> Self {
        Self { threads: read_threads() }
    }

    /// CPU time each thread spent since `before`, summed by thread name, most first. A thread
    /// that started later counts from zero; one that ended meanwhile is not seen.
    pub fn since(&self, before: &ThreadCpu) -> Vec<(String, Duration)> {
        let mut by_name: BTreeMap<&str, Duration> = BTreeMap::new();
        for (tid, (name, cpu)) in &self.threads {
            let start = before.threads.get(tid).map_or(Duration::ZERO, |(_, c)| *c);
            *by_name.entry(name).or_default() += cpu.saturating_sub(start);
        }
        let mut v: Vec<(String, Duration)> = by_name.into_iter().map(|(n, d)| (n.to_string(), d)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }
}

#[cfg(target_os = "linux")]
fn read_threads() -> BTreeMap<i64, (String, Duration)> {
    let mut threads = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return threads };
    for entry in dir.flatten() {
        let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse::<i64>().ok()) else { continue };
        let name = std::fs::read_to_string(entry.path().join("comm")).map(|s| s.trim().to_string());
        if let (Ok(name), Some(cpu)) = (name, thread_clock(tid)) {
            threads.insert(tid, (name, cpu));
        }
    }
    threads
}

#[cfg(not(target_os = "linux"))]
fn read_threads() -> BTreeMap<i64, (String, Duration)> {
    BTreeMap::new()
}

/// The CPU clock of thread `tid` of this process: Linux encodes it as `(!tid << 3) | 6`
/// (per-thread, scheduler clock), as glibc's `pthread_getcpuclockid` builds it. `None` when the
/// thread has ended.
#[cfg(target_os = "linux")]
fn thread_clock(tid: i64) -> Option<Duration> {
    let clock = ((!tid) << 3) | 6;
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; a clock id of an ended thread makes the call
    // fail with EINVAL and write nothing.
    let rc = unsafe { libc::clock_gettime(clock as libc::clockid_t, &mut ts) };
    (rc == 0).then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread that spins for 50 ms shows (at least 20 ms of it, on a shared machine) under
    /// its name, and the caller's own thread is seen too.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_busy_thread_is_charged_its_cpu_time_under_its_name() {
        let before = ThreadCpu::now();
        let spin = std::thread::Builder::new()
            .name("cpu-spin".into())
            .spawn(|| {
                let t0 = std::time::Instant::now();
                let mut x = 0u64;
                while t0.elapsed() < Duration::from_millis(50) {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                }
                let after = ThreadCpu::now();
                std::hint::black_box(x);
                after
            })
            .unwrap();
        let after = spin.join().unwrap();
        let used = after.since(&before);
        let spun = used.iter().find(|(n, _)| n == "cpu-spin").map(|(_, d)| *d).expect("the spinning thread is listed");
        assert!(spun >= Duration::from_millis(20), "cpu-spin used {spun:?}");
        assert!(spun <= Duration::from_secs(5), "cpu-spin used {spun:?}");
        assert!(used.len() >= 2, "{used:?}");
    }
}
