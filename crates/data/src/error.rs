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
