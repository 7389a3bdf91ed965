//! [`TrainError`]: every way training can fail, each naming the file, key, run or peer.

use std::path::PathBuf;

use crate::config::ConfigError;
use crate::fault;

/// Every way training can fail; each names the file, key or run it is about.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// A config value (located: file, line, key).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A dataset file or directory.
    #[error(transparent)]
    Data(#[from] data::DataError),
    /// A model config or input.
    #[error(transparent)]
    Model(#[from] models::ModelError),
    /// Device selection.
    #[error(transparent)]
    Device(#[from] device::DeviceError),
    /// A run-directory or bundle file.
    #[error(transparent)]
    Bundle(#[from] bundle::BundleError),
    /// A file the trainer reads or writes itself.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS reason.
        message: String,
    },
    /// A checkpoint that cannot be used.
    #[error("checkpoint {path}: {message}")]
    Checkpoint {
        /// The checkpoint file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// A run that cannot be continued as asked.
    #[error("cannot resume {path}: {message}")]
    Resume {
        /// The run directory or checkpoint.
        path: PathBuf,
        /// Why (the differing keys, or what is missing).
        message: String,
    },
    /// A request that cannot run (e.g. fewer sequences than one step needs).
    #[error("{0}")]
    Invalid(String),
    /// Non-finite steps outlasted the recovery policy; the message is its log.
    #[error("training diverged and was aborted: {0}")]
    Diverged(String),
    /// The device failed (out of memory, device lost) and recovery could not continue.
    #[error("{kind} at step {step} of {run_dir}: {message}. {advice}")]
    DeviceFault {
        /// The run directory (its checkpoints are intact).
        run_dir: PathBuf,
        /// The optimizer step that failed.
        step: usize,
        /// What failed.
        kind: fault::FaultKind,
        /// The runtime's message (first line).
        message: String,
        /// Why the run stopped and what to do.
        advice: String,
    },
    /// A data-parallel group stopped: a peer failed or went silent.
    #[error("data-parallel group: {peer}: {message}")]
    Group {
        /// The peer that failed or went silent (`peer 1 (cpu, node 0)`).
        peer: String,
        /// What happened.
        message: String,
    },
}

impl TrainError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, e: impl std::fmt::Display) -> Self {
        Self::Io { path: path.into(), message: e.to_string() }
    }
}
