use std::path::{Path, PathBuf};

use thiserror::Error;

/// Every way reading or preparing data can fail. Each names the file (and line or column) and
/// what was expected.
#[derive(Debug, Error)]
pub enum DataError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a readable parquet file: {message}")]
    Parquet { path: PathBuf, message: String },
    #[error("{path}: missing column `{column}` (found: {found})")]
    MissingColumn { path: PathBuf, column: String, found: String },
    #[error("{path}: column `{column}` has type {found}, expected {expected}")]
    WrongType { path: PathBuf, column: String, expected: String, found: String },
    #[error("{path}:{line}: unknown label `{label}` (not in the label map)")]
    UnknownLabel { path: PathBuf, line: usize, label: String },
    #[error("{path}: empty sequence (no frames{detail})")]
    EmptySequence { path: PathBuf, detail: String },
    #[error("{path}: {expected_what} expected {expected}, found {found}")]
    ShapeMismatch { path: PathBuf, expected_what: String, expected: usize, found: usize },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("{path}:{line}: {message}")]
    Csv { path: PathBuf, line: usize, message: String },
    #[error("config key `{key}`: {message}")]
    Config { key: String, message: String },
    #[error("{count} of {total} sequences failed to load; first: {first}")]
    TooManyBad { count: usize, total: usize, first: Box<DataError> },
}

pub type Result<T, E = DataError> = std::result::Result<T, E>;

impl DataError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io { path: path.to_path_buf(), source }
    }
    pub fn invalid(path: &Path, message: impl Into<String>) -> Self {
        Self::Invalid { path: path.to_path_buf(), message: message.into() }
    }
}

/// Write `bytes` to `path` atomically: a temp file in the same directory, fsync, rename. A crash
/// leaves either the old file or the new one, never half of one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| DataError::io(dir, e))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| DataError::io(dir, e))?;
    tmp.write_all(bytes).map_err(|e| DataError::io(path, e))?;
    tmp.as_file().sync_all().map_err(|e| DataError::io(path, e))?;
    tmp.persist(path).map_err(|e| DataError::io(path, e.error))?;
    Ok(())
}
