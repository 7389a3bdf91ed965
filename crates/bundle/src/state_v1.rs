//! `state.json` version 1 as it lies on disk: a checkpoint's loop state (position, history, loss
//! scaler, the model signature a resume checks), owned by this crate and frozen.
//!
//! The trainer's own types (`trainer::checkpoint::TrainState` and the records it holds) are
//! serialized only through this document; their conversions destructure both sides whole, so a
//! field added to or removed from a trainer type fails to compile until someone decides what it
//! is in version 1 (a field with a default keeps the version; anything else is a new version, a
//! new module beside this one, and a conversion from this one so old checkpoints keep resuming).
//! The golden-file test in `trainer` holds the serialized form to checkpoints this release wrote.

use serde::{Deserialize, Serialize};

use crate::card_v1::{DecoderV1, ScoresV1};

/// Version of the `state.json` document this module describes.
pub const STATE_FORMAT_V1: u32 = 1;

/// Just the version of a `state.json`, read before the rest so a newer file is refused by its
/// number rather than by whichever field it renamed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct StateFormat {
    /// The writer's `state.json` version.
    pub format: u32,
}

/// The whole `state.json` of version 1 (field order = file order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateV1 {
    /// 1.
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
    pub best: Option<BestV1>,
    /// Epochs since the best one.
    pub epochs_since_best: usize,
    /// Every finished epoch's figures.
    pub history: Vec<EpochV1>,
    /// Training time before the writing process.
    pub elapsed_s: f64,
    /// Steps skipped for non-finite loss or gradients.
    pub skipped_steps: usize,
    /// Multiplier on the scheduled LR.
    pub lr_scale: f64,
    /// Rollbacks to a snapshot.
    pub rollbacks: usize,
    /// Non-finite steps in a row.
    pub consecutive_bad: usize,
    /// f16 dynamic loss scaling.
    pub scaler: ScalerV1,
    /// The model this state belongs to.
    pub signature: SignatureV1,
    /// The micro-batch size `batch_in_epoch` counts in (0 in the first files: the run's own).
    #[serde(default)]
    pub micro_batch: usize,
    /// Device faults the run survived.
    #[serde(default)]
    pub device_faults: Vec<DeviceFaultV1>,
    /// Running sums of the epoch in progress.
    #[serde(default)]
    pub epoch_sums: SumsV1,
    /// Running sums of the logging window in progress.
    #[serde(default)]
    pub window_sums: SumsV1,
}

/// `history[]`: one finished epoch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // documented on `trainer::checkpoint::EpochRecord`
pub struct EpochV1 {
    pub epoch: usize,
    pub step: usize,
    pub train_loss: f64,
    pub train_top1: f64,
    pub valid_loss: Option<f64>,
    pub valid_top1: Option<f64>,
    pub valid_top5: Option<f64>,
    #[serde(default)]
    pub valid_sequences: Option<SequenceScoresV1>,
    pub lr: f64,
    pub samples_per_s: f64,
    pub elapsed_s: f64,
    #[serde(default)]
    pub peak_mem_in_use_mib: Option<f64>,
    #[serde(default)]
    pub peak_mem_reserved_mib: Option<f64>,
}

/// `history[].valid_sequences`: both CTC decoders' validation scores.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // documented on `trainer::validate::SequenceScores`
pub struct SequenceScoresV1 {
    pub greedy: ScoresV1,
    pub beam: ScoresV1,
    pub decoder: DecoderV1,
}

/// `best`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // documented on `trainer::checkpoint::BestRecord`
pub struct BestV1 {
    pub epoch: usize,
    pub step: usize,
    pub metric: String,
    pub value: f64,
}

/// `scaler`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // documented on `trainer::amp::LossScaler`
pub struct ScalerV1 {
    pub enabled: bool,
    pub scale: f64,
    pub good_steps: usize,
    pub backoffs: usize,
    pub growths: usize,
}

/// `signature`: what a resume compares. `config` is the `[model]` section as TOML in the model
/// card's version-1 form ([`crate::card_v1::ModelV1`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // documented on `trainer::checkpoint::ModelSignature`
pub struct SignatureV1 {
    pub kind: String,
    pub input_features: usize,
    pub classes: usize,
    pub trainable_params: usize,
    pub config: String,
}

/// `device_faults[]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // documented on `trainer::fault::DeviceFault`
pub struct DeviceFaultV1 {
    pub step: usize,
    pub epoch: usize,
    pub kind: FaultKindV1,
    pub message: String,
    pub micro_batch: [usize; 2],
    pub accumulation_steps: [usize; 2],
    pub resumed_from_step: usize,
}

/// `device_faults[].kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum FaultKindV1 {
    OutOfMemory,
    Device,
}

/// `epoch_sums`, `window_sums`: `loss_sum_bits` is an `f64`'s bits (exact over JSON).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // documented on `trainer::checkpoint::RunningSums`
pub struct SumsV1 {
    pub loss_sum_bits: u64,
    pub steps: usize,
    pub correct: u64,
    pub samples: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> StateV1 {
        StateV1 {
            format: STATE_FORMAT_V1,
            step: 12,
            epoch: 1,
            batch_in_epoch: 3,
            samples: 384,
            best: Some(BestV1 { epoch: 1, step: 9, metric: "valid_top1".into(), value: 0.5 }),
            epochs_since_best: 0,
            history: vec![EpochV1 {
                epoch: 1,
                step: 9,
                train_loss: 2.0,
                train_top1: 0.25,
                valid_loss: Some(1.5),
                valid_top1: Some(0.5),
                valid_top5: None,
                valid_sequences: Some(SequenceScoresV1 {
                    greedy: ScoresV1 { nld: 0.5, cer: 0.25, wer: 0.5, sequence_accuracy: 0.125 },
                    beam: ScoresV1 { nld: 0.25, cer: 0.125, wer: 0.25, sequence_accuracy: 0.5 },
                    decoder: DecoderV1::Beam,
                }),
                lr: 1e-3,
                samples_per_s: 100.0,
                elapsed_s: 3.0,
                peak_mem_in_use_mib: None,
                peak_mem_reserved_mib: Some(12.0),
            }],
            elapsed_s: 3.5,
            skipped_steps: 1,
            lr_scale: 0.5,
            rollbacks: 1,
            consecutive_bad: 0,
            scaler: ScalerV1 { enabled: true, scale: 1024.0, good_steps: 3, backoffs: 1, growths: 0 },
            signature: SignatureV1 {
                kind: "gru".into(),
                input_features: 8,
                classes: 3,
                trainable_params: 100,
                config: "kind = \"gru\"\n".into(),
            },
            micro_batch: 32,
            device_faults: vec![DeviceFaultV1 {
                step: 5,
                epoch: 1,
                kind: FaultKindV1::OutOfMemory,
                message: "out of memory".into(),
                micro_batch: [32, 16],
                accumulation_steps: [1, 2],
                resumed_from_step: 4,
            }],
            epoch_sums: SumsV1 { loss_sum_bits: 2.0f64.to_bits(), steps: 3, correct: 10, samples: 96 },
            window_sums: SumsV1::default(),
        }
    }

    #[test]
    fn the_document_round_trips_and_refuses_unknown_keys() {
        let s = state();
        let text = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<StateV1>(&text).unwrap(), s);
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(doc["device_faults"][0]["kind"], "out_of_memory");
        assert_eq!(doc["history"][0]["valid_sequences"]["decoder"], "beam");
        assert_eq!(serde_json::from_str::<StateFormat>(&text).unwrap().format, 1);

        let mut extra = doc.clone();
        extra["history"][0]["valid_cer"] = 0.5.into();
        let err = serde_json::from_value::<StateV1>(extra).unwrap_err().to_string();
        assert!(err.contains("valid_cer"), "{err}");
    }

    #[test]
    fn keys_added_within_version_1_take_their_defaults() {
        let mut doc = serde_json::to_value(state()).unwrap();
        let obj = doc.as_object_mut().unwrap();
        for key in ["micro_batch", "device_faults", "epoch_sums", "window_sums"] {
            obj.remove(key).unwrap();
        }
        let s: StateV1 = serde_json::from_value(doc).unwrap();
        assert_eq!((s.micro_batch, s.device_faults.len()), (0, 0));
        assert_eq!((s.epoch_sums, s.window_sums), (SumsV1::default(), SumsV1::default()));
    }
}
