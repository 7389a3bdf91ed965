//! Checkpoints: model, optimizer state and loop state, written atomically; exact resume.
//!
//! Nothing random is stored: model init, data order, augmentation and dropout are all seeded from
//! (seed, epoch, step), so the loop state below is enough to continue bit for bit on the CPU.

use std::path::{Path, PathBuf};

use bundle::atomic::{write_json, StagedDir};
use bundle::layout;
use models::SignModel;
use serde::{Deserialize, Serialize};

use crate::amp::LossScaler;
use crate::config::{CheckpointConfig, ExperimentConfig};
use crate::optim::Optim;
use crate::{Result, TrainBackend, TrainError};

/// Version of `state.json` this release writes.
pub const STATE_FORMAT: u32 = bundle::state_v1::STATE_FORMAT_V1;

/// One epoch's figures (also the `kind=epoch` rows of `metrics.csv`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochRecord {
    /// 1-based.
    pub epoch: usize,
    /// Optimizer steps done at the end of the epoch.
    pub step: usize,
    /// Mean training loss of the epoch's applied steps.
    pub train_loss: f64,
    /// Training top-1 of the epoch (on augmented batches).
    pub train_top1: f64,
    /// Validation loss, when there is a validation split.
    pub valid_loss: Option<f64>,
    /// Validation top-1.
    pub valid_top1: Option<f64>,
    /// Validation top-5 (classification).
    pub valid_top5: Option<f64>,
    /// Validation decoding scores (CTC).
    #[serde(default)]
    pub valid_sequences: Option<crate::validate::SequenceScores>,
    /// The LR of the epoch's last step.
    pub lr: f64,
    /// Training throughput of the epoch.
    pub samples_per_s: f64,
    /// Training time at the end of the epoch, over resumes.
    pub elapsed_s: f64,
    /// Peak device memory held by tensors during the epoch, MiB (GPU backends).
    #[serde(default)]
    pub peak_mem_in_use_mib: Option<f64>,
    /// Peak device memory reserved by the pool during the epoch, MiB (GPU backends).
    #[serde(default)]
    pub peak_mem_reserved_mib: Option<f64>,
}

/// The best epoch so far by `training.early_stopping.metric`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BestRecord {
    /// Epoch (1-based).
    pub epoch: usize,
    /// Optimizer steps done at its end.
    pub step: usize,
    /// The metric's name (`valid_top1`, `valid_loss`, or `train_loss` without validation).
    pub metric: String,
    /// The metric's value.
    pub value: f64,
}

/// What identifies the model's shapes; a resume with a different one is refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSignature {
    /// `model.kind`.
    pub kind: String,
    /// Features per frame.
    pub input_features: usize,
    /// Classes.
    pub classes: usize,
    /// Trainable parameters.
    pub trainable_params: usize,
    /// The `[model]` section as TOML, in the model card's version-1 form.
    pub config: String,
}

impl ModelSignature {
    /// The signature of `model` built from `cfg`.
    pub fn of(cfg: &ExperimentConfig, model: &SignModel<TrainBackend>) -> Self {
        Self {
            kind: cfg.model.kind().into(),
            input_features: model.input_features(),
            classes: model.classes(),
            trainable_params: models::trainable_params(model),
            // In the model card's frozen form, so a renamed field in `models` does not make
            // old checkpoints look like another model.
            config: toml::to_string(&bundle::card_v1::ModelV1::from(&cfg.model)).unwrap_or_default(),
        }
    }
}

/// The loop's position and history, on disk as `bundle::state_v1::StateV1` (`state.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "bundle::state_v1::StateV1", from = "bundle::state_v1::StateV1")]
pub struct TrainState {
    /// [`STATE_FORMAT`] of the writer.
    pub format: u32,
    /// Optimizer steps done.
    pub step: usize,
    /// The epoch in progress (0-based).
    pub epoch: usize,
    /// Micro-batches of `epoch` already consumed.
    pub batch_in_epoch: usize,
    /// Training samples processed.
    pub samples: u64,
    /// The best epoch so far.
    pub best: Option<BestRecord>,
    /// Epochs since the best one (early stopping).
    pub epochs_since_best: usize,
    /// Every finished epoch's figures.
    pub history: Vec<EpochRecord>,
    /// Training time before this process (for throughput over resumes).
    pub elapsed_s: f64,
    /// Steps skipped for non-finite loss or gradients.
    pub skipped_steps: usize,
    /// Multiplier on the scheduled LR (cut at each NaN rollback).
    pub lr_scale: f64,
    /// Rollbacks to a snapshot.
    pub rollbacks: usize,
    /// Non-finite steps in a row (NaN policy).
    pub consecutive_bad: usize,
    /// f16 dynamic loss scaling.
    pub scaler: LossScaler,
    /// The model this state belongs to.
    pub signature: ModelSignature,
    /// The micro-batch size `batch_in_epoch` counts in (0: unknown, the run's own).
    pub micro_batch: usize,
    /// Device faults the run survived.
    pub device_faults: Vec<crate::fault::DeviceFault>,
    /// The running sums of the epoch in progress (zero at an epoch boundary), so an epoch
    /// continued after a resume reports the figures of an uninterrupted one.
    pub epoch_sums: RunningSums,
    /// The running sums of the logging window in progress (the `kind=step` rows of
    /// `metrics.csv`), for the same reason.
    pub window_sums: RunningSums,
}

/// Running sums of training figures (of an epoch or a logging window in progress).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RunningSums {
    /// The sum of the applied steps' losses, as the bits of an `f64` (JSON numbers do not
    /// round-trip every `f64` exactly, and the resumed epoch's mean must equal the original).
    pub loss_sum_bits: u64,
    /// Applied steps (the loss sum's count).
    pub steps: usize,
    /// Correct training predictions.
    pub correct: u64,
    /// Training samples.
    pub samples: u64,
}

impl TrainState {
    /// The state of a run that has not started.
    pub fn new(signature: ModelSignature) -> Self {
        Self {
            format: STATE_FORMAT,
            step: 0,
            epoch: 0,
            batch_in_epoch: 0,
            samples: 0,
            best: None,
            epochs_since_best: 0,
            history: Vec::new(),
            elapsed_s: 0.0,
            skipped_steps: 0,
            lr_scale: 1.0,
            rollbacks: 0,
            consecutive_bad: 0,
            scaler: LossScaler { enabled: false, scale: 1.0, good_steps: 0, backoffs: 0, growths: 0 },
            signature,
            micro_batch: 0,
            device_faults: Vec::new(),
            epoch_sums: RunningSums::default(),
            window_sums: RunningSums::default(),
        }
    }
}

/// Whether a step checkpoint is due after optimizer step `step`, on a GPU backend or not (epoch
/// ends always checkpoint, so a step that ends an epoch is left to them).
pub fn step_checkpoint_due(cfg: &CheckpointConfig, on_gpu: bool, step: usize, epoch_ends: bool) -> bool {
    let every = cfg.interval(on_gpu);
    every > 0 && step.is_multiple_of(every) && !epoch_ends
}

/// Write a step checkpoint and keep only the newest `keep_last` (`faults` may pause the write
/// half-way, for drills).
pub fn save(
    run_dir: &Path,
    model: &SignModel<TrainBackend>,
    optim: &Optim,
    state: &TrainState,
    keep_last: usize,
    faults: &crate::inject::Faults,
) -> Result<PathBuf> {
    let dir = layout::checkpoints_dir(run_dir);
    std::fs::create_dir_all(&dir).map_err(|e| TrainError::io(&dir, e))?;
    let staged = StagedDir::new(&layout::step_dir(run_dir, state.step))?;
    bundle::weights::save_weights(model, &staged.tmp)?;
    optim.save(&staged.tmp.join(layout::OPTIM_FILE))?;
    faults.checkpoint_pause();
    write_json(&staged.tmp.join(layout::STATE_FILE), state)?;
    let path = staged.commit()?;
    let mut all = list(run_dir);
    while all.len() > keep_last.max(1) {
        let (_, old) = all.remove(0);
        let _ = std::fs::remove_dir_all(old);
    }
    Ok(path)
}

/// Save the best model so far (weights + state).
pub fn save_best(run_dir: &Path, model: &SignModel<TrainBackend>, state: &TrainState) -> Result<PathBuf> {
    let dir = layout::checkpoints_dir(run_dir);
    std::fs::create_dir_all(&dir).map_err(|e| TrainError::io(&dir, e))?;
    let staged = StagedDir::new(&layout::best_dir(run_dir))?;
    bundle::weights::save_weights(model, &staged.tmp)?;
    write_json(&staged.tmp.join(layout::STATE_FILE), state)?;
    Ok(staged.commit()?)
}

/// Complete step checkpoints, oldest first.
pub fn list(run_dir: &Path) -> Vec<(usize, PathBuf)> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(layout::checkpoints_dir(run_dir)) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if let Some(step) = layout::parse_step_dir(&name) {
                if e.path().join(layout::STATE_FILE).is_file() {
                    out.push((step, e.path()));
                }
            }
        }
    }
    out.sort();
    out
}

/// Read a checkpoint's loop state.
pub fn read_state(dir: &Path) -> Result<TrainState> {
    let path = dir.join(layout::STATE_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| TrainError::io(&path, e))?;
    let unreadable =
        |e: serde_json::Error| TrainError::Checkpoint { path: path.clone(), message: format!("unreadable state: {e}") };
    // The version first, so a newer file is refused by its number.
    let bundle::state_v1::StateFormat { format } = serde_json::from_str(&text).map_err(unreadable)?;
    if format != STATE_FORMAT {
        return Err(TrainError::Checkpoint {
            path,
            message: format!("state format {format} is not supported (expected {STATE_FORMAT})"),
        });
    }
    serde_json::from_str(&text).map_err(unreadable)
}

/// A checkpoint passed over on resume because it could not be read, and why.
#[derive(Debug, Clone)]
pub struct Skipped {
    /// Its step.
    pub step: usize,
    /// Its directory.
    pub dir: PathBuf,
    /// The error that ruled it out.
    pub reason: String,
}

/// A model, optimizer and loop state restored from a checkpoint.
pub type Restored = (SignModel<TrainBackend>, Optim, TrainState);

/// What [`restore_newest`] found: the newest readable checkpoint's step and contents, if any, and
/// the newer checkpoints passed over.
pub type Newest = (Option<(usize, Restored)>, Vec<Skipped>);

/// Restore the newest intact step checkpoint of `run_dir`: one that is corrupt, truncated or
/// unreadable is passed over for the next older one (and returned in the list with its reason).
/// A checkpoint of another model is an error, not passed over. `Ok((None, skipped))` when the run
/// has no checkpoint; an error when it has some and none can be read. `model` and `optim` (fresh
/// ones) are cloned for each attempt and left to the caller.
pub fn restore_newest(
    run_dir: &Path,
    model: &SignModel<TrainBackend>,
    optim: &Optim,
    signature: &ModelSignature,
    device: &device::DispatchDevice,
) -> Result<Newest> {
    let mut skipped = Vec::new();
    for (step, dir) in list(run_dir).into_iter().rev() {
        match restore(&dir, model.clone(), optim.clone(), signature, device) {
            Ok(restored) => return Ok((Some((step, restored)), skipped)),
            Err(e @ (TrainError::Resume { .. } | TrainError::Device(_))) => return Err(e),
            Err(e) => skipped.push(Skipped { step, dir, reason: e.to_string() }),
        }
    }
    if skipped.is_empty() {
        return Ok((None, skipped));
    }
    Err(TrainError::Resume {
        path: run_dir.into(),
        message: format!(
            "no checkpoint can be read: {}",
            skipped.iter().map(|s| s.reason.as_str()).collect::<Vec<_>>().join("; ")
        ),
    })
}

/// Restore weights, optimizer and loop state from checkpoint `dir`, after checking its files
/// against their manifest and that it holds the model `signature` describes.
pub fn restore(
    dir: &Path,
    model: SignModel<TrainBackend>,
    optim: Optim,
    signature: &ModelSignature,
    device: &device::DispatchDevice,
) -> Result<(SignModel<TrainBackend>, Optim, TrainState)> {
    bundle::manifest::verify(dir, &[])?;
    let saved = read_state(dir)?;
    if &saved.signature != signature {
        let (a, b) = (&saved.signature, signature);
        return Err(TrainError::Resume {
            path: dir.into(),
            message: format!(
                "the checkpoint holds a {} model with {} inputs, {} classes and {} parameters; this config builds a {} model with {} inputs, {} classes and {} parameters",
                a.kind, a.input_features, a.classes, a.trainable_params, b.kind, b.input_features, b.classes, b.trainable_params
            ),
        });
    }
    let model = bundle::weights::load_weights(model, dir, device)?;
    let optim = optim.load(&dir.join(layout::OPTIM_FILE), &model, device)?;
    Ok((model, optim, saved))
}
