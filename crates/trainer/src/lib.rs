//! # SignFlow trainer
//!
//! Config-driven training of sign-language models on `Autodiff<Dispatch>` (CUDA, WGPU or CPU,
//! chosen at run time by the `device` crate):
//! - [`config`]: TOML experiment files, layering (built-in default -> `--config` -> `--set` ->
//!   flags) and errors that name the file, key and line;
//! - [`resolve`]: a config resolved once into a [`resolve::ResolvedRun`] (device, precision,
//!   data, batch size after `"auto"`);
//! - [`step`]: the one training step (mixed precision, accumulation, finite check, clipping,
//!   optimizer) every caller uses;
//! - [`train`]: the epoch loop (validation, early stopping, best-model tracking, checkpoints),
//!   with [`recovery`] (non-finite steps), [`report`] (progress, summary), [`export`] (the model
//!   bundle and the run's files) and [`resume`] (opening a run directory);
//! - [`checkpoint`]: atomic checkpoints and exact resume;
//! - [`cv`]: K-fold cross-validation by signer;
//! - [`tune`]: automatic batch size; [`bench`]: the Burn half of the PyTorch comparison;
//! - [`metrics`]: `metrics.csv` and `events.jsonl`; [`plot`]: `curves.svg`.
//!
//! File names and the exported-model format belong to the `bundle` crate.
//!
//! ```no_run
//! let cfg = trainer::ConfigBuilder::new().add_set("training.epochs=2")?.build()?;
//! let outcome = trainer::run(cfg, trainer::RunOptions::default())?;
//! println!("{:?}", outcome.summary.and_then(|s| s.last));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub mod amp;
pub mod bench;
pub mod checkpoint;
pub mod choose;
pub mod config;
pub mod cv;
pub mod dist;
pub mod export;
pub mod fault;
pub mod lock;
pub mod metrics;
pub mod objective;
pub mod optim;
pub mod plot;
pub mod profile;
pub mod recovery;
pub mod report;
pub mod resolve;
pub mod resume;
pub mod schedule;
pub mod step;
pub mod tensorboard;
pub mod train;
pub mod tune;
pub mod validate;
pub mod workcount;

use std::path::PathBuf;

pub use config::{ConfigBuilder, ConfigError, ExperimentConfig};
pub use train::{run, run_lock, RunOptions, RunOutcome};

/// The training backend (autodiff over the run-time dispatch backend).
pub type TrainBackend = device::TrainBackend;
/// The same backend without autodiff (validation, export).
pub type InnerBackend = device::Backend;

/// Whether `device` is a GPU backend (CUDA or WGPU): work is queued and runs asynchronously,
/// kernels are compiled per shape, memory comes from a pool.
pub fn on_gpu(device: &device::DispatchDevice) -> bool {
    device::backend_name(device) != "cpu"
}

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

/// `Result` with [`TrainError`].
pub type Result<T, E = TrainError> = std::result::Result<T, E>;
