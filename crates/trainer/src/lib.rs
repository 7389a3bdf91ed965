//! # SignFlow trainer
//!
//! Config-driven training of sign-language models on `Autodiff<Dispatch>` (CUDA, WGPU or CPU,
//! chosen at run time by the `device` crate):
//! - [`config`]: TOML experiment files, layering (built-in default -> `--config` -> `--set` ->
//!   flags) and errors that name the file, key and line;
//! - a run's pipeline: [`config`] (parse, validate) -> [`measure`] (device, data, batch-size
//!   search; [`resolve`] holds the device and data types) -> [`plan`] (a pure function to the
//!   [`plan::ResolvedRun`]) -> [`train`], sequenced by [`run`];
//! - [`step`]: the one training step (mixed precision, accumulation, finite check, clipping,
//!   optimizer) every caller uses;
//! - [`train`]: the epoch loop (validation, early stopping, best-model tracking, checkpoints),
//!   with [`recovery`] (non-finite steps), [`report`] (progress, summary), [`export`] (the model
//!   bundle and the run's files) and [`resume`] (opening a run directory);
//! - [`checkpoint`]: atomic checkpoints and exact resume, the loop state written through
//!   [`state_format`] as `bundle`'s frozen `state.json` document; [`lock`]: the process's turn and the
//!   run directory's lock; [`error`]: [`TrainError`];
//! - [`fault`]: device faults (out-of-memory) recognised and recorded; [`inject`]: deliberate
//!   failures for tests and drills (the `fault-injection` feature);
//! - [`cv`]: K-fold cross-validation by signer;
//! - [`tune`]: automatic batch size; [`bench`]: the Burn half of the PyTorch comparison;
//! - [`metrics`]: `metrics.csv` and `events.jsonl`; [`plot`]: `curves.svg`.
//!
//! File names, the exported-model format and the checkpoint state's format belong to the
//! `bundle` crate.
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
pub mod config_format;
pub mod cv;
pub mod dist;
pub mod error;
pub mod export;
pub mod fault;
pub mod inject;
pub mod lock;
pub mod measure;
pub mod metrics;
pub mod objective;
pub mod optim;
pub mod plan;
pub mod plot;
pub mod profile;
pub mod recovery;
pub mod report;
pub mod resolve;
pub mod resume;
pub mod run;
pub mod schedule;
pub mod shape;
pub mod state_format;
pub mod step;
pub mod tensorboard;
pub mod train;
pub mod tune;
pub mod validate;
pub mod workcount;

pub use config::{ConfigBuilder, ConfigError, ExperimentConfig};
pub use error::TrainError;
pub use lock::{run_lock, turn, Streams};
pub use run::{run, RunOptions, RunOutcome};

/// The training backend (autodiff over the run-time dispatch backend).
pub type TrainBackend = device::TrainBackend;
/// The same backend without autodiff (validation, export).
pub type InnerBackend = device::Backend;

/// Whether `device` is a GPU backend (CUDA or WGPU): work is queued and runs asynchronously,
/// kernels are compiled per shape, memory comes from a pool.
pub fn on_gpu(device: &device::DispatchDevice) -> bool {
    device::backend_name(device) != "cpu"
}

/// `Result` with [`TrainError`].
pub type Result<T, E = TrainError> = std::result::Result<T, E>;
