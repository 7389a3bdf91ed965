//! # SignFlow trainer
//!
//! Config-driven training of sign-language models on `Autodiff<Dispatch>` (CUDA, WGPU or CPU,
//! chosen at run time by the `device` crate):
//! - [`config`]: TOML experiment files, layering (built-in default -> `--config` -> `--set` ->
//!   flags) and errors that name the file, key and line;
//! - [`train`]: the training loop (AdamW/SGD, LR schedules, label smoothing, global-norm
//!   clipping, gradient accumulation, validation, early stopping, best-model tracking);
//! - [`checkpoint`]: atomic checkpoints and exact resume;
//! - [`cv`]: K-fold cross-validation by signer;
//! - [`metrics`]: `metrics.csv`, `summary.json` and `curves.svg` in the run directory;
//! - [`rundir`]: the run-directory layout, including the exported `model/` that `infer` loads.

pub mod amp;
pub mod bench;
pub mod checkpoint;
pub mod config;
pub mod cv;
pub mod metrics;
pub mod optim;
pub mod plot;
pub mod rundir;
pub mod schedule;
pub mod train;
pub mod tune;

use std::path::PathBuf;

pub use config::{ConfigBuilder, ConfigError, ExperimentConfig};
pub use train::{run, RunOptions, RunOutcome};

/// The training backend (autodiff over the run-time dispatch backend).
pub type TrainBackend = device::TrainBackend;
/// The same backend without autodiff (validation, export).
pub type InnerBackend = device::Backend;

#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Data(#[from] data::DataError),
    #[error(transparent)]
    Model(#[from] models::ModelError),
    #[error(transparent)]
    Device(#[from] device::DeviceError),
    #[error(transparent)]
    Bundle(#[from] models::bundle::BundleError),
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error("checkpoint {path}: {message}")]
    Checkpoint { path: PathBuf, message: String },
    #[error("cannot resume {path}: {message}")]
    Resume { path: PathBuf, message: String },
    #[error("{0}")]
    Invalid(String),
    #[error("training diverged and was aborted: {0}")]
    Diverged(String),
}

impl TrainError {
    pub fn io(path: impl Into<PathBuf>, e: impl std::fmt::Display) -> Self {
        Self::Io { path: path.into(), message: e.to_string() }
    }
}

pub type Result<T, E = TrainError> = std::result::Result<T, E>;
