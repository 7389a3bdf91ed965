//! Locks: the process's turns on Burn's random generators ([`turn`]: runs in one process that
//! draw from one generator take turns) and the run directory's lock ([`RunLock`]): one trainer
//! writes a run at a time. `run.lock` is held with an advisory file lock (flock) for the life of
//! the run and names its owner (pid and host, for messages only). The lock alone decides: a pid
//! equal to ours proves nothing (another PID namespace, another host on a shared disk), so
//! whether this process holds a run's lock is kept in this process. The OS releases the lock
//! when the owner dies, so a lock left by a killed trainer is stale and taken over.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// Burn's random generators are process-wide, one per backend crate: Flex's for the CPU and
/// cubecl's for WGPU and CUDA together. Two runs drawing from one generator at once would
/// interleave their draws and neither would be reproducible, so work in a process takes turns
/// on the generators its devices draw from: a run on the CPU and a run on a GPU go side by side,
/// two runs on one kind of device one after the other.
static HOST_STREAM: Mutex<()> = Mutex::new(());
static CUBE_STREAM: Mutex<()> = Mutex::new(());

/// Which of Burn's process-wide random generators a piece of work draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Streams {
    /// The CPU backend's (Flex).
    pub host: bool,
    /// The CubeCL backends' (WGPU and CUDA share it).
    pub cube: bool,
}

impl Streams {
    /// Both: work whose devices are not known yet, or that must not run beside any other.
    pub const ALL: Streams = Streams { host: true, cube: true };
    /// The CPU backend's.
    pub const HOST: Streams = Streams { host: true, cube: false };
    /// The CubeCL backends'.
    pub const CUBE: Streams = Streams { host: false, cube: true };

    /// The generator of the device a spec names; `auto` may pick either (and `choose =
    /// "fastest"` times both).
    pub fn of_spec(spec: &device::DeviceSpec) -> Self {
        match spec {
            device::DeviceSpec::Cpu => Self::HOST,
            device::DeviceSpec::Cuda(_) | device::DeviceSpec::Wgpu(_) => Self::CUBE,
            device::DeviceSpec::Auto => Self::ALL,
        }
    }

    /// The generator a device draws from.
    pub fn of_device(device: &device::DispatchDevice) -> Self {
        if crate::on_gpu(device) {
            Self::CUBE
        } else {
            Self::HOST
        }
    }

    /// What a run of `cfg` draws from. A data-parallel group takes both: its peers may be of
    /// either kind, and Burn's collective keeps one registry per process.
    pub fn of_run(cfg: &crate::ExperimentConfig) -> Self {
        match cfg.distributed.devices.is_empty() && cfg.distributed.nodes <= 1 {
            true => Self::of_spec(&cfg.device.device),
            false => Self::ALL,
        }
    }
}

/// A held turn ([`turn`]); the generators are free again when it drops.
#[derive(Debug)]
pub struct Turn {
    _host: Option<MutexGuard<'static, ()>>,
    _cube: Option<MutexGuard<'static, ()>>,
}

/// Wait for the turn on `streams`. Taken in one order (the CPU's, then cubecl's), so two turns
/// never wait on each other. Not reentrant: do not call [`crate::run`] while holding one.
pub fn turn(streams: Streams) -> Turn {
    let take = |lock: &'static Mutex<()>| lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let host = streams.host.then(|| take(&HOST_STREAM));
    let cube = streams.cube.then(|| take(&CUBE_STREAM));
    Turn { _host: host, _cube: cube }
}

/// The turn on every generator: what [`crate::run`] takes when its devices are not known
/// ahead. Code that draws from Burn's generators (building a model, loading a bundle, which
/// builds one first) in a process where runs may be going on holds it (or the [`turn`] of its
/// device), so those runs stay reproducible.
pub fn run_lock() -> Turn {
    turn(Streams::ALL)
}

/// The lock files this process holds (canonical paths).
static HELD: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn held() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    HELD.lock().unwrap_or_else(|p| p.into_inner())
}

/// This process as a lock file names it: `pid N on HOST`.
fn owner_text() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "an unknown host".into());
    format!("pid {} on {host}", std::process::id())
}

use bundle::layout::LOCK_FILE;

use crate::{Result, TrainError};

/// The held lock; released (and its pid cleared) when dropped.
#[derive(Debug)]
pub struct RunLock {
    file: File,
    path: PathBuf,
    canonical: PathBuf,
}

/// What taking the lock found.
#[derive(Debug)]
pub enum Taken {
    /// Locked by this call.
    Locked(RunLock),
    /// This process holds it already (a run continuing after a device fault).
    AlreadyOurs,
}

impl RunLock {
    /// Take the lock of `run_dir` (which must exist). Refused, naming the owner's pid, while
    /// another live process holds it; a lock whose owner died is taken over with a warning.
    pub fn take(run_dir: &Path) -> Result<Taken> {
        let path = run_dir.join(LOCK_FILE);
        let canonical = run_dir.canonicalize().map_err(|e| TrainError::io(run_dir, e))?.join(LOCK_FILE);
        if held().contains(&canonical) {
            return Ok(Taken::AlreadyOurs);
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| TrainError::io(&path, e))?;
        let mut text = String::new();
        let _ = Read::by_ref(&mut file).take(256).read_to_string(&mut text);
        let owner = text.trim().chars().filter(|c| !c.is_control()).take(120).collect::<String>();
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(TrainError::Invalid(format!(
                    "{} is in use by another trainer ({}, lock {}); wait for it to finish or choose another --out",
                    run_dir.display(),
                    if owner.is_empty() { "owner unknown".into() } else { owner },
                    path.display()
                )))
            }
            Err(TryLockError::Error(e)) => return Err(TrainError::io(&path, e)),
        }
        if !owner.is_empty() {
            eprintln!("warning: taking over {} from {owner}, which ended without releasing it", path.display());
        }
        let me = owner_text();
        let write = |f: &mut File| -> std::io::Result<()> {
            f.set_len(0)?;
            f.seek(SeekFrom::Start(0))?;
            f.write_all(me.as_bytes())?;
            f.sync_all()
        };
        write(&mut file).map_err(|e| TrainError::io(&path, e))?;
        held().push(canonical.clone());
        Ok(Taken::Locked(Self { file, path, canonical }))
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Cleared, not removed: removing a lock file another process has open lets two hold it.
        let _ = self.file.set_len(0);
        let _ = self.file.unlock();
        held().retain(|p| p != &self.canonical);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_and_a_released_lock_is_taken_again() {
        let tmp = tempfile::tempdir().unwrap();
        let Taken::Locked(first) = RunLock::take(tmp.path()).unwrap() else { panic!("not locked") };
        assert_eq!(std::fs::read_to_string(first.path()).unwrap(), owner_text());
        assert!(matches!(RunLock::take(tmp.path()).unwrap(), Taken::AlreadyOurs));
        drop(first);
        assert_eq!(std::fs::read_to_string(tmp.path().join(LOCK_FILE)).unwrap(), "");
        // An owner left by a dead process (the file is not locked): taken over.
        std::fs::write(tmp.path().join(LOCK_FILE), "pid 999999999 on elsewhere").unwrap();
        assert!(matches!(RunLock::take(tmp.path()).unwrap(), Taken::Locked(_)));
    }

    /// A holder in another PID namespace (or on another host) can have our pid: the lock, not
    /// the pid, decides. Simulated with a second open file description holding the flock and
    /// naming this very pid.
    #[test]
    fn a_holder_with_our_pid_elsewhere_is_still_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let other = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(tmp.path().join(LOCK_FILE))
            .unwrap();
        other.try_lock().unwrap();
        std::fs::write(tmp.path().join(LOCK_FILE), owner_text()).unwrap();
        let e = RunLock::take(tmp.path()).unwrap_err().to_string();
        assert!(e.contains("in use by another trainer") && e.contains(&owner_text()), "{e}");
        drop(other);
        assert!(matches!(RunLock::take(tmp.path()).unwrap(), Taken::Locked(_)));
    }
}
