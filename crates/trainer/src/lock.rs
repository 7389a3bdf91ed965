//! The run directory's lock: one trainer writes a run at a time. `run.lock` is held with an
//! advisory file lock (flock) for the life of the run and names its owner's pid. The OS releases
//! the lock when the owner dies, so a lock left by a killed trainer is stale and taken over.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use bundle::layout::LOCK_FILE;

use crate::{Result, TrainError};

/// The held lock; released (and its pid cleared) when dropped.
#[derive(Debug)]
pub struct RunLock {
    file: File,
    path: PathBuf,
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
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| TrainError::io(&path, e))?;
        let mut text = String::new();
        let _ = file.read_to_string(&mut text);
        let owner: Option<u32> = text.trim().parse().ok();
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) if owner == Some(std::process::id()) => return Ok(Taken::AlreadyOurs),
            Err(TryLockError::WouldBlock) => {
                return Err(TrainError::Invalid(format!(
                    "{} is in use by another trainer ({}, lock {}); wait for it to finish or choose another --out",
                    run_dir.display(),
                    owner.map_or("pid unknown".into(), |p| format!("pid {p}")),
                    path.display()
                )))
            }
            Err(TryLockError::Error(e)) => return Err(TrainError::io(&path, e)),
        }
        if let Some(pid) = owner.filter(|&p| p != std::process::id()) {
            eprintln!("warning: taking over {} from pid {pid}, which ended without releasing it", path.display());
        }
        let pid = std::process::id().to_string();
        let write = |f: &mut File| -> std::io::Result<()> {
            f.set_len(0)?;
            f.seek(SeekFrom::Start(0))?;
            f.write_all(pid.as_bytes())?;
            f.sync_all()
        };
        write(&mut file).map_err(|e| TrainError::io(&path, e))?;
        Ok(Taken::Locked(Self { file, path }))
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_and_a_released_lock_is_taken_again() {
        let tmp = tempfile::tempdir().unwrap();
        let Taken::Locked(first) = RunLock::take(tmp.path()).unwrap() else { panic!("not locked") };
        assert_eq!(std::fs::read_to_string(first.path()).unwrap(), std::process::id().to_string());
        assert!(matches!(RunLock::take(tmp.path()).unwrap(), Taken::AlreadyOurs));
        drop(first);
        assert_eq!(std::fs::read_to_string(tmp.path().join(LOCK_FILE)).unwrap(), "");
        // A pid left by a dead owner (the file is not locked): taken over.
        std::fs::write(tmp.path().join(LOCK_FILE), "999999999").unwrap();
        assert!(matches!(RunLock::take(tmp.path()).unwrap(), Taken::Locked(_)));
    }
}
