//! Atomic writes: a file is written to a temporary name and renamed; a directory is built under a
//! `.tmp-*` name and renamed whole. A crash leaves the old version or the new one, never half;
//! a failed write (full disk, permission) removes what it staged, so the space is not held.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::{BundleError, Result};

/// Write `bytes` to `path` atomically (temporary file in the same directory, fsync, rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    data::write_atomic(path, bytes).map_err(|e| match e {
        data::DataError::Io { path, source } => BundleError::io(&path, source),
        other => BundleError::io(path, other),
    })
}

/// Write `value` as pretty JSON to `path`, atomically.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| BundleError::io(path, e))?;
    write_atomic(path, text.as_bytes())
}

/// A directory built under a temporary name and renamed into place when complete, with a
/// [`crate::manifest`] of its files. Dropped without [`StagedDir::commit`] (a write failed), the
/// staged directory is removed.
#[derive(Debug)]
pub struct StagedDir {
    /// Where to write the files.
    pub tmp: PathBuf,
    /// Where the directory goes on [`StagedDir::commit`].
    pub target: PathBuf,
}

impl StagedDir {
    /// Start staging `target` (a leftover staging directory of this process is replaced).
    pub fn new(target: &Path) -> Result<Self> {
        let parent = target.parent().unwrap_or(Path::new("."));
        let name = target.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        let tmp = parent.join(format!(".tmp-{name}-{}", std::process::id()));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(|e| BundleError::io(&tmp, e))?;
        }
        std::fs::create_dir_all(&tmp).map_err(|e| BundleError::io(&tmp, e))?;
        Ok(Self { tmp, target: target.to_path_buf() })
    }

    /// Replace `target` with the staged directory. An existing target is moved aside first and
    /// removed after the rename, so a crash leaves either the old or the new directory. Only an
    /// empty target or one SignFlow wrote whole ([`crate::manifest::foreign_entries`]) is replaced;
    /// anything else is an error naming what is there, and nothing is removed.
    pub fn commit(self) -> Result<PathBuf> {
        if self.target.exists() || self.target.is_symlink() {
            check_replaceable(&self.target)?;
        }
        crate::manifest::write(&self.tmp)?;
        sync_dir(&self.tmp);
        let old = self.target.with_file_name(format!(
            ".old-{}-{}",
            self.target.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default(),
            std::process::id()
        ));
        let had_old = self.target.exists();
        if had_old {
            std::fs::rename(&self.target, &old).map_err(|e| BundleError::io(&self.target, e))?;
        }
        std::fs::rename(&self.tmp, &self.target).map_err(|e| BundleError::io(&self.target, e))?;
        if had_old {
            let _ = std::fs::remove_dir_all(&old);
        }
        if let Some(parent) = self.target.parent() {
            sync_dir(parent);
        }
        Ok(self.target.clone())
    }
}

impl Drop for StagedDir {
    fn drop(&mut self) {
        // After a commit the staged name no longer exists; before one, a write failed.
        if self.tmp.exists() {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

/// Refuse to replace `target` unless it is an empty directory or one SignFlow wrote whole.
pub fn check_replaceable(target: &Path) -> Result<()> {
    let refuse = |message: String| Err(BundleError::Invalid { path: target.into(), message });
    let meta = std::fs::symlink_metadata(target).map_err(|e| BundleError::io(target, e))?;
    if !meta.is_dir() {
        return refuse("exists and is not a directory; SignFlow replaces only directories it wrote".into());
    }
    let foreign = crate::manifest::foreign_entries(target)?;
    if foreign.is_empty() {
        return Ok(());
    }
    refuse(format!(
        "holds files SignFlow did not write ({}); it is left as it is: move them or choose another directory",
        crate::layout::first_names(&foreign)
    ))
}

fn sync_dir(dir: &Path) {
    if let Ok(f) = std::fs::File::open(dir) {
        let _ = f.sync_all();
    }
}

/// Tidy what interrupted writes left in `dir`: staged directories and temporary files
/// (`.tmp*`) are removed; a directory moved aside by a commit that died before its replacement
/// was renamed in (`.old-NAME-PID` with no `NAME`) is put back, so the old version is not lost.
/// Call it only while holding the run's lock (another writer's work in progress looks the same).
pub fn clean_staging(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if let Some(rest) = name.strip_prefix(".old-") {
            let original = rest.rsplit_once('-').map_or(rest, |(n, _)| n);
            if !original.is_empty()
                && !dir.join(original).exists()
                && std::fs::rename(e.path(), dir.join(original)).is_ok()
            {
                continue;
            }
            let _ = std::fs::remove_dir_all(e.path());
        } else if name.starts_with(".tmp") {
            let p = e.path();
            let _ = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_committed_directory_replaces_the_old_one_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("model");
        let old = StagedDir::new(&target).unwrap();
        write_atomic(&old.tmp.join("old.txt"), b"old").unwrap();
        old.commit().unwrap();
        let staged = StagedDir::new(&target).unwrap();
        write_atomic(&staged.tmp.join("new.txt"), b"new").unwrap();
        assert!(!target.join("new.txt").exists(), "nothing is visible before the commit");
        staged.commit().unwrap();
        assert_eq!(std::fs::read_to_string(target.join("new.txt")).unwrap(), "new");
        assert!(!target.join("old.txt").exists());
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(left, ["model"]);
        crate::manifest::verify(&target, &[]).unwrap();
        assert!(target.join(crate::layout::MANIFEST_FILE).is_file());
    }

    #[test]
    fn a_directory_signflow_did_not_write_is_never_replaced() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("model");
        std::fs::create_dir_all(&target).unwrap();
        std::fs::write(target.join("keep.txt"), "someone's").unwrap();
        let staged = StagedDir::new(&target).unwrap();
        write_atomic(&staged.tmp.join("model.json"), b"{}").unwrap();
        let e = staged.commit().unwrap_err().to_string();
        assert!(e.contains("model") && e.contains("did not write (keep.txt)"), "{e}");
        assert_eq!(std::fs::read_to_string(target.join("keep.txt")).unwrap(), "someone's");
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(left, ["model"], "the staged copy is removed, the user's directory kept");
        // A file in the way is not replaced either.
        std::fs::write(tmp.path().join("best"), "a file").unwrap();
        let staged = StagedDir::new(&tmp.path().join("best")).unwrap();
        assert!(staged.commit().unwrap_err().to_string().contains("not a directory"));
        assert_eq!(std::fs::read_to_string(tmp.path().join("best")).unwrap(), "a file");
    }

    #[test]
    fn a_staged_directory_dropped_uncommitted_is_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let staged = StagedDir::new(&tmp.path().join("step-00000004")).unwrap();
        write_atomic(&staged.tmp.join("model.mpk"), b"half").unwrap();
        drop(staged);
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }

    #[test]
    fn leftover_staging_is_cleaned_and_write_errors_name_the_path() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join(".tmp-step-00000004-17")).unwrap();
        std::fs::create_dir_all(tmp.path().join("step-00000002")).unwrap();
        std::fs::create_dir_all(tmp.path().join(".old-best-17")).unwrap();
        std::fs::write(tmp.path().join(".tmpAbC12"), "half a file").unwrap();
        clean_staging(tmp.path());
        let mut left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        left.sort();
        assert_eq!(left, ["best", "step-00000002"], "a moved-aside best/ whose replacement never came is put back");
        let file = tmp.path().join("a-file");
        std::fs::write(&file, "x").unwrap();
        let e = write_atomic(&file.join("below-a-file.json"), b"{}").unwrap_err().to_string();
        assert!(e.contains("a-file"), "{e}");
    }
}
