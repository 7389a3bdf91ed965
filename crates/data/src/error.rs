use std::path::{Path, PathBuf};

use thiserror::Error;

/// Every way reading or preparing data can fail. Each names the file (and line or column) and
/// what was expected.
#[derive(Debug, Error)]
pub enum DataError {
    /// The file system refused.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Not a parquet file the reader can decode.
    #[error("{path}: not a readable parquet file: {message}")]
    Parquet {
        /// The file.
        path: PathBuf,
        /// The decoder's reason.
        message: String,
    },
    /// A required column is absent.
    #[error("{path}: missing column `{column}` (found: {found})")]
    MissingColumn {
        /// The file.
        path: PathBuf,
        /// The column needed.
        column: String,
        /// The columns there are.
        found: String,
    },
    /// A column of the wrong type.
    #[error("{path}: column `{column}` has type {found}, expected {expected}")]
    WrongType {
        /// The file.
        path: PathBuf,
        /// The column.
        column: String,
        /// The types accepted.
        expected: String,
        /// The type found.
        found: String,
    },
    /// A label the label map does not have.
    #[error("{path}:{line}: unknown label `{label}` (not in the label map)")]
    UnknownLabel {
        /// The CSV file.
        path: PathBuf,
        /// Its line.
        line: usize,
        /// The label.
        label: String,
    },
    /// A sequence without frames.
    #[error("{path}: empty sequence (no frames{detail})")]
    EmptySequence {
        /// The file.
        path: PathBuf,
        /// Why no frame is left (e.g. every frame empty).
        detail: String,
    },
    /// A size that does not match what the dataset or model needs.
    #[error("{path}: {expected_what} expected {expected}, found {found}")]
    ShapeMismatch {
        /// The file.
        path: PathBuf,
        /// Which size.
        expected_what: String,
        /// The size needed.
        expected: usize,
        /// The size found.
        found: usize,
    },
    /// Any other problem with a file's content.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong and what was expected.
        message: String,
    },
    /// A bad CSV line.
    #[error("{path}:{line}: {message}")]
    Csv {
        /// The file.
        path: PathBuf,
        /// The line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A config value out of range.
    #[error("config key `{key}`: {message}")]
    Config {
        /// The dotted key.
        key: String,
        /// What was expected.
        message: String,
    },
    /// More bad files than `max_bad_fraction` allows.
    #[error("{count} of {total} sequences failed to load; first: {first}")]
    TooManyBad {
        /// Bad files.
        count: usize,
        /// Files tried.
        total: usize,
        /// The first error.
        first: Box<DataError>,
    },
}

/// `Result` with [`DataError`].
pub type Result<T, E = DataError> = std::result::Result<T, E>;

impl DataError {
    /// An I/O error on `path`.
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io { path: path.to_path_buf(), source }
    }
    /// An invalid file.
    pub fn invalid(path: &Path, message: impl Into<String>) -> Self {
        Self::Invalid { path: path.to_path_buf(), message: message.into() }
    }
}

/// Open `path` for reading if it is a regular file (a symlink to one is followed). A device, a
/// FIFO, a socket or a directory named by a dataset's index is refused before it is opened: a
/// FIFO would block the open forever, and `/dev/zero` would be read until memory ran out.
pub fn open_regular(path: &Path) -> Result<std::fs::File> {
    let meta = std::fs::metadata(path).map_err(|e| DataError::io(path, e))?;
    if !meta.is_file() {
        return Err(DataError::invalid(path, "not a regular file (a device, FIFO, socket or directory)"));
    }
    std::fs::File::open(path).map_err(|e| DataError::io(path, e))
}

/// The bytes of the regular file `path` ([`open_regular`]), at most as many as its size said when
/// it was opened (a file that grows while it is read is refused, not followed).
pub fn read_regular(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let file = open_regular(path)?;
    let len = file.metadata().map_err(|e| DataError::io(path, e))?.len();
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(len as usize)
        .map_err(|_| DataError::invalid(path, format!("{len} bytes do not fit in memory")))?;
    file.take(len + 1).read_to_end(&mut bytes).map_err(|e| DataError::io(path, e))?;
    if bytes.len() as u64 > len {
        return Err(DataError::invalid(path, format!("grew past its {len} bytes while it was read")));
    }
    Ok(bytes)
}

/// The prefix of this process's temporary files: `.tmp-PID-`.
fn temp_prefix() -> String {
    format!(".tmp-{}-", std::process::id())
}

/// Write `bytes` to `path` atomically: a temp file (`.tmp-PID-*`) in the same directory, fsync,
/// rename. A crash leaves either the old file or the new one, never half of one; the temp file of
/// a killed writer is removed later by [`sweep_temp_files`].
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| DataError::io(dir, e))?;
    let prefix = temp_prefix();
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix);
    // The mode a plain file gets (0o666 less the umask), not the temp file's private 0o600: an
    // exported model is meant to be read by other users and servers.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    let mut tmp = builder.tempfile_in(dir).map_err(|e| DataError::io(dir, e))?;
    tmp.write_all(bytes).map_err(|e| DataError::io(path, e))?;
    tmp.as_file().sync_all().map_err(|e| DataError::io(path, e))?;
    tmp.persist(path).map_err(|e| DataError::io(path, e.error))?;
    Ok(())
}

/// Remove from `dir` the temporary files of [`write_atomic`] whose writer is gone (killed
/// mid-write): `.tmp-PID-*` where no process PID runs (Linux), or older than an hour elsewhere.
/// Another live writer's temp file is left alone, so this is safe while others write.
pub fn sweep_temp_files(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(pid) =
            name.strip_prefix(".tmp-").and_then(|r| r.split('-').next()).and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || !e.path().is_file() {
            continue;
        }
        let gone = if Path::new("/proc/self").exists() {
            !Path::new("/proc").join(pid.to_string()).exists()
        } else {
            e.metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > std::time::Duration::from_secs(3600))
        };
        if gone {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(unix)]
    #[test]
    fn atomic_writes_get_the_mode_of_a_plain_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::File::create(&plain).unwrap();
        let atomic = dir.path().join("atomic");
        super::write_atomic(&atomic, b"x").unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&atomic), mode(&plain));
    }

    use super::*;

    /// A FIFO, `/dev/zero` behind a symlink and a directory are refused before they are read (the
    /// first would block, the second fill memory); a regular file, also behind a symlink, reads.
    #[test]
    fn only_regular_files_are_read() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let fifo = dir.join("fifo.npy");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        std::os::unix::fs::symlink("/dev/zero", dir.join("zero.npy")).unwrap();
        std::fs::create_dir(dir.join("dir.npy")).unwrap();
        for name in ["fifo.npy", "zero.npy", "dir.npy"] {
            let e = read_regular(&dir.join(name)).unwrap_err().to_string();
            assert!(e.contains(name) && e.contains("not a regular file"), "{e}");
        }
        std::fs::write(dir.join("real.npy"), b"bytes").unwrap();
        std::os::unix::fs::symlink(dir.join("real.npy"), dir.join("link.npy")).unwrap();
        assert_eq!(read_regular(&dir.join("link.npy")).unwrap(), b"bytes");
    }

    #[test]
    fn only_temp_files_of_dead_writers_are_swept() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let own = format!(".tmp-{}-abc", std::process::id());
        for name in [".tmp-999999999-dead", ".tmp-1-alive", own.as_str(), "seq.parquet", ".tmpOldStyle"] {
            std::fs::write(dir.join(name), "x").unwrap();
        }
        write_atomic(&dir.join("new.json"), b"{}").unwrap();
        sweep_temp_files(dir);
        let mut left: Vec<String> =
            std::fs::read_dir(dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().to_string()).collect();
        left.sort();
        let mut expected = vec![".tmp-1-alive", own.as_str(), ".tmpOldStyle", "new.json", "seq.parquet"];
        expected.sort();
        assert_eq!(left, expected);
    }
}
