//! `config.toml` version 1 as it lies on disk: the experiment config's document types, owned by
//! this crate and frozen, with the conversions to and from the `data` and `models` sections it
//! holds (the trainer converts its own sections, `trainer::config_format`).
//!
//! The same document is the user's experiment language (`--config FILE`, `--set key=value`) and
//! the record a run directory and an exported bundle keep (every key, after all layers). The
//! crates' config types may change; this document does not. Every conversion destructures both
//! sides whole, so a field added to, removed from or renamed in a crate type fails to compile
//! until someone decides what it is in version 1: an optional key with a default keeps the
//! version; anything else is a new version (a module beside this one, and a conversion from this
//! one so old files keep loading). What a key left out of a file means is part of the version:
//! the defaults below are frozen with the names (field order = file order). The product's own
//! starting point is `configs/default.toml`, a layer over these defaults. Keys are documented in
//! docs/CONFIG.md; the golden-file test in `trainer` holds the serialized form to a run directory
//! this release wrote.
//!
//! Device and precision requests stay strings here (`"cuda:1"`, `"bf16"`): their grammar is the
//! `device` crate's, and the trainer parses them when it converts the document.

use std::fmt;

use data::augment::AugmentConfig;
use data::dataset::OnError;
use data::islr::Codec;
use data::sentences::SentenceConfig;
use data::synth::SynthConfig;
use serde::{Deserialize, Serialize};

use crate::card_v1::{ConvTransformerV1, DecodeV1, ModelV1, PreprocessV1, TaskV1};

/// The schema version of this document (`config_version`; a file without the key is version 1).
pub const VERSION: u32 = 1;

/// The whole `config.toml` of version 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[allow(missing_docs)] // keys documented in docs/CONFIG.md
pub struct ConfigV1 {
    pub config_version: u32,
    pub name: String,
    pub task: TaskV1,
    pub data: DataV1,
    pub synthetic: SynthV1,
    pub sentences: SentencesV1,
    pub ctc: DecodeV1,
    pub preprocess: PreprocessV1,
    pub augment: AugmentV1,
    pub model: ModelV1,
    pub optimizer: OptimizerV1,
    pub schedule: ScheduleV1,
    pub training: TrainingV1,
    pub checkpoint: CheckpointV1,
    pub device: DeviceV1,
    pub amp: AmpV1,
    pub recovery: RecoveryV1,
    pub distributed: DistributedV1,
}

/// `[data]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[allow(missing_docs)] // keys documented in docs/CONFIG.md
pub struct DataV1 {
    pub path: String,
    pub synthetic_dir: String,
    pub cache_dir: String,
    pub valid_fraction: f64,
    pub split_seed: u64,
    pub folds: usize,
    pub fold: usize,
    pub on_error: OnErrorV1,
    pub max_bad_fraction: f64,
    pub workers: usize,
    pub prefetch: usize,
    pub device_prefetch: bool,
}

/// `data.on_error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum OnErrorV1 {
    Skip,
    Fail,
}

/// `[synthetic]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[allow(missing_docs)] // keys documented in docs/CONFIG.md
pub struct SynthV1 {
    pub classes: usize,
    pub signers: usize,
    pub repetitions: usize,
    pub min_frames: usize,
    pub max_frames: usize,
    pub seed: u64,
    pub noise: f32,
    pub drop_frame_prob: f32,
    pub lost_hand_prob: f32,
    pub idle_fraction: f32,
    pub time_warp: f32,
    pub compression: CodecV1,
}

/// `synthetic.compression`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum CodecV1 {
    Snappy,
    Zstd,
    Gzip,
    Lz4,
    Brotli,
    None,
}

/// `[sentences]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[allow(missing_docs)] // keys documented in docs/CONFIG.md
pub struct SentencesV1 {
    pub per_signer: usize,
    pub min_signs: usize,
    pub max_signs: usize,
    pub transition_frames: [usize; 2],
    pub pause_prob: f32,
    pub pause_frames: [usize; 2],
    pub rest_prob: f32,
}

/// `[augment]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[allow(missing_docs)] // keys documented in docs/CONFIG.md
pub struct AugmentV1 {
    pub enabled: bool,
    pub flip_prob: f32,
    pub affine_prob: f32,
    pub scale: [f32; 2],
    pub shear: f32,
    pub shift: f32,
    pub rotation_deg: f32,
    pub speed_prob: f32,
    pub speed: [f32; 2],
    pub temporal_mask_prob: f32,
    pub temporal_mask: [f32; 2],
    pub cutout_prob: f32,
    pub cutout_fraction: f32,
    pub crop_prob: f32,
    pub crop: [f32; 2],
}

/// `[optimizer]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[allow(missing_docs)] // keys documented in docs/CONFIG.md
pub struct OptimizerV1 {
    pub kind: OptimizerKindV1,
    pub lr: f64,
    pub weight_decay: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub epsilon: f64,
    pub momentum: f64,
    pub nesterov: bool,
    pub clip_grad_norm: f64,
}

/// `optimizer.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum OptimizerKindV1 {
    Adamw,
    Sgd,
}

/// `[schedule]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[allow(missing_docs)] // keys documented in docs/CONFIG.md
pub struct ScheduleV1 {
    pub kind: ScheduleKindV1,
    pub warmup_steps: usize,
    pub warmup_epochs: f64,
    pub min_lr: f64,
    pub step_size: usize,
    pub gamma: f64,
}

/// `schedule.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum ScheduleKindV1 {
    Cosine,
    Constant,
    Step,
}

/// `[training]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[allow(missing_docs)] // keys documented in docs/CONFIG.md
pub struct TrainingV1 {
    pub epochs: usize,
    pub batch_size: BatchSizeV1,
    pub effective_batch_size: usize,
    pub max_batch_size: usize,
    /// A precision request in the `device` crate's grammar (`auto`, `f32`, `f16`, `bf16`, aliases).
    pub precision: String,
    pub empty_cache_interval: usize,
    pub profile: bool,
    pub accumulation_steps: usize,
    pub label_smoothing: f64,
    pub seed: u64,
    pub drop_last: bool,
    pub max_steps: usize,
    pub late_dropout_epoch: usize,
    pub log_every: usize,
    pub early_stopping: EarlyStoppingV1,
    pub progress: ProgressV1,
    pub out_dir: String,
}

/// `training.batch_size`: a positive integer or `"auto"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchSizeV1 {
    /// `"auto"`: searched on the device.
    Auto,
    /// A number of sequences.
    Fixed(usize),
}

/// `[training.early_stopping]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[allow(missing_docs)] // keys documented in docs/CONFIG.md
pub struct EarlyStoppingV1 {
    pub metric: MetricV1,
    pub patience: usize,
    pub min_delta: f64,
}

/// `training.early_stopping.metric`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum MetricV1 {
    ValidLoss,
    ValidTop1,
    ValidCer,
}

/// `training.progress`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum ProgressV1 {
    Auto,
    Bar,
    Plain,
    Off,
}

/// `[checkpoint]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[allow(missing_docs)] // keys documented in docs/CONFIG.md
pub struct CheckpointV1 {
    pub every_steps: usize,
    pub gpu_every_steps: usize,
    pub keep_last: usize,
}

/// `[device]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[allow(missing_docs)] // keys documented in docs/CONFIG.md
pub struct DeviceV1 {
    /// A device request in the `device` crate's grammar (`auto`, `cpu`, `cuda:N`, `wgpu:N`, ...).
    pub device: String,
    pub choose: ChooseV1,
    pub prefer: Vec<String>,
    pub min_free_memory_mib: u64,
    pub allow_software_wgpu: bool,
}

/// `device.choose`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum ChooseV1 {
    Ranked,
    Fastest,
}

/// `[amp]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[allow(missing_docs)] // keys documented in docs/CONFIG.md
pub struct AmpV1 {
    pub init_scale: f64,
    pub growth_factor: f64,
    pub growth_interval: usize,
    pub backoff_factor: f64,
    pub min_scale: f64,
}

/// `[recovery]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[allow(missing_docs)] // keys documented in docs/CONFIG.md
pub struct RecoveryV1 {
    pub max_consecutive_bad: usize,
    pub max_rollbacks: usize,
    pub lr_cut: f64,
    pub snapshot_every: usize,
    pub max_device_faults: usize,
}

/// `[distributed]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[allow(missing_docs)] // keys documented in docs/CONFIG.md
pub struct DistributedV1 {
    pub devices: Vec<String>,
    pub balance: BalanceV1,
    pub shares: Vec<f64>,
    pub rebalance_every: usize,
    pub nodes: u32,
    pub node_rank: u32,
    pub orchestrator: String,
    pub node_address: String,
    pub data_port: u16,
    pub timeout_s: u64,
    pub secret_file: String,
    pub insecure: bool,
}

/// `distributed.balance`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum BalanceV1 {
    Equal,
    Measured,
    Fixed,
}

impl Serialize for BatchSizeV1 {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Auto => s.serialize_str("auto"),
            Self::Fixed(n) => s.serialize_u64(*n as u64),
        }
    }
}

impl<'de> Deserialize<'de> for BatchSizeV1 {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = BatchSizeV1;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a positive integer or \"auto\"")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<BatchSizeV1, E> {
                usize::try_from(v)
                    .map(BatchSizeV1::Fixed)
                    .map_err(|_| E::custom(format!("must be a positive integer or \"auto\", got {v}")))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<BatchSizeV1, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::custom(format!("must be a positive integer or \"auto\", got {v}"))),
                }
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<BatchSizeV1, E> {
                if v == "auto" {
                    Ok(BatchSizeV1::Auto)
                } else {
                    Err(E::custom(format!("must be a positive integer or \"auto\", got \"{v}\"")))
                }
            }
        }
        d.deserialize_any(V)
    }
}

// Version 1's meaning of a key a file leaves out.

impl Default for ConfigV1 {
    fn default() -> Self {
        Self {
            config_version: VERSION,
            name: "signflow".into(),
            task: TaskV1::Classification,
            data: DataV1::default(),
            synthetic: SynthV1::default(),
            sentences: SentencesV1::default(),
            ctc: DecodeV1::default(),
            preprocess: PreprocessV1::default(),
            augment: AugmentV1::default(),
            model: ModelV1::ConvTransformer(ConvTransformerV1::default()),
            optimizer: OptimizerV1::default(),
            schedule: ScheduleV1::default(),
            training: TrainingV1::default(),
            checkpoint: CheckpointV1::default(),
            device: DeviceV1::default(),
            amp: AmpV1::default(),
            recovery: RecoveryV1::default(),
            distributed: DistributedV1::default(),
        }
    }
}

impl Default for DataV1 {
    fn default() -> Self {
        Self {
            path: String::new(),
            synthetic_dir: ".signflow/synthetic".into(),
            cache_dir: ".signflow/cache".into(),
            valid_fraction: 0.25,
            split_seed: 42,
            folds: 0,
            fold: 0,
            on_error: OnErrorV1::Skip,
            max_bad_fraction: 0.05,
            workers: 2,
            prefetch: 2,
            device_prefetch: true,
        }
    }
}

impl Default for SynthV1 {
    fn default() -> Self {
        Self {
            classes: 20,
            signers: 8,
            repetitions: 6,
            min_frames: 20,
            max_frames: 60,
            seed: 7,
            noise: 0.006,
            drop_frame_prob: 0.05,
            lost_hand_prob: 0.25,
            idle_fraction: 0.2,
            time_warp: 0.2,
            compression: CodecV1::Snappy,
        }
    }
}

impl Default for SentencesV1 {
    fn default() -> Self {
        Self {
            per_signer: 40,
            min_signs: 2,
            max_signs: 5,
            transition_frames: [2, 6],
            pause_prob: 0.3,
            pause_frames: [3, 10],
            rest_prob: 0.0,
        }
    }
}

impl Default for AugmentV1 {
    fn default() -> Self {
        Self {
            enabled: true,
            flip_prob: 0.5,
            affine_prob: 0.75,
            scale: [0.8, 1.2],
            shear: 0.15,
            shift: 0.1,
            rotation_deg: 30.0,
            speed_prob: 0.5,
            speed: [0.67, 1.5],
            temporal_mask_prob: 0.5,
            temporal_mask: [0.2, 0.4],
            cutout_prob: 0.2,
            cutout_fraction: 0.1,
            crop_prob: 0.0,
            crop: [0.7, 1.0],
        }
    }
}

impl Default for OptimizerV1 {
    fn default() -> Self {
        Self {
            kind: OptimizerKindV1::Adamw,
            lr: 1e-3,
            weight_decay: 0.05,
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-8,
            momentum: 0.9,
            nesterov: false,
            clip_grad_norm: 1.0,
        }
    }
}

impl Default for ScheduleV1 {
    fn default() -> Self {
        Self {
            kind: ScheduleKindV1::Cosine,
            warmup_steps: 0,
            warmup_epochs: 1.0,
            min_lr: 1e-6,
            step_size: 1000,
            gamma: 0.5,
        }
    }
}

impl Default for TrainingV1 {
    fn default() -> Self {
        Self {
            epochs: 20,
            batch_size: BatchSizeV1::Fixed(32),
            effective_batch_size: 0,
            max_batch_size: 512,
            precision: "auto".into(),
            empty_cache_interval: 0,
            profile: false,
            accumulation_steps: 1,
            label_smoothing: 0.1,
            seed: 1,
            drop_last: true,
            max_steps: 0,
            late_dropout_epoch: 0,
            log_every: 10,
            early_stopping: EarlyStoppingV1::default(),
            progress: ProgressV1::Auto,
            out_dir: "runs".into(),
        }
    }
}

impl Default for EarlyStoppingV1 {
    fn default() -> Self {
        Self { metric: MetricV1::ValidTop1, patience: 0, min_delta: 0.0 }
    }
}

impl Default for CheckpointV1 {
    fn default() -> Self {
        Self { every_steps: 0, gpu_every_steps: 100, keep_last: 2 }
    }
}

impl Default for DeviceV1 {
    fn default() -> Self {
        Self {
            device: "auto".into(),
            choose: ChooseV1::Ranked,
            prefer: Vec::new(),
            min_free_memory_mib: 0,
            allow_software_wgpu: false,
        }
    }
}

impl Default for AmpV1 {
    fn default() -> Self {
        Self { init_scale: 65536.0, growth_factor: 2.0, growth_interval: 2000, backoff_factor: 0.5, min_scale: 1.0 }
    }
}

impl Default for RecoveryV1 {
    fn default() -> Self {
        Self { max_consecutive_bad: 3, max_rollbacks: 3, lr_cut: 0.5, snapshot_every: 20, max_device_faults: 3 }
    }
}

impl Default for DistributedV1 {
    fn default() -> Self {
        Self {
            devices: Vec::new(),
            balance: BalanceV1::Equal,
            shares: Vec::new(),
            rebalance_every: 50,
            nodes: 1,
            node_rank: 0,
            orchestrator: String::new(),
            node_address: "127.0.0.1".into(),
            data_port: 0,
            timeout_s: 300,
            secret_file: String::new(),
            insecure: false,
        }
    }
}

// Conversions of the sections `data` owns (the trainer converts its own and the document).

impl From<OnError> for OnErrorV1 {
    fn from(e: OnError) -> Self {
        match e {
            OnError::Skip => Self::Skip,
            OnError::Fail => Self::Fail,
        }
    }
}

impl From<OnErrorV1> for OnError {
    fn from(e: OnErrorV1) -> Self {
        match e {
            OnErrorV1::Skip => Self::Skip,
            OnErrorV1::Fail => Self::Fail,
        }
    }
}

impl From<Codec> for CodecV1 {
    fn from(c: Codec) -> Self {
        match c {
            Codec::Snappy => Self::Snappy,
            Codec::Zstd => Self::Zstd,
            Codec::Gzip => Self::Gzip,
            Codec::Lz4 => Self::Lz4,
            Codec::Brotli => Self::Brotli,
            Codec::None => Self::None,
        }
    }
}

impl From<CodecV1> for Codec {
    fn from(c: CodecV1) -> Self {
        match c {
            CodecV1::Snappy => Self::Snappy,
            CodecV1::Zstd => Self::Zstd,
            CodecV1::Gzip => Self::Gzip,
            CodecV1::Lz4 => Self::Lz4,
            CodecV1::Brotli => Self::Brotli,
            CodecV1::None => Self::None,
        }
    }
}

impl From<&SynthConfig> for SynthV1 {
    fn from(s: &SynthConfig) -> Self {
        let SynthConfig {
            classes,
            signers,
            repetitions,
            min_frames,
            max_frames,
            seed,
            noise,
            drop_frame_prob,
            lost_hand_prob,
            idle_fraction,
            time_warp,
            compression,
        } = s.clone();
        Self {
            classes,
            signers,
            repetitions,
            min_frames,
            max_frames,
            seed,
            noise,
            drop_frame_prob,
            lost_hand_prob,
            idle_fraction,
            time_warp,
            compression: compression.into(),
        }
    }
}

impl From<SynthV1> for SynthConfig {
    fn from(s: SynthV1) -> Self {
        let SynthV1 {
            classes,
            signers,
            repetitions,
            min_frames,
            max_frames,
            seed,
            noise,
            drop_frame_prob,
            lost_hand_prob,
            idle_fraction,
            time_warp,
            compression,
        } = s;
        Self {
            classes,
            signers,
            repetitions,
            min_frames,
            max_frames,
            seed,
            noise,
            drop_frame_prob,
            lost_hand_prob,
            idle_fraction,
            time_warp,
            compression: compression.into(),
        }
    }
}

impl From<&SentenceConfig> for SentencesV1 {
    fn from(s: &SentenceConfig) -> Self {
        let SentenceConfig { per_signer, min_signs, max_signs, transition_frames, pause_prob, pause_frames, rest_prob } =
            s.clone();
        Self { per_signer, min_signs, max_signs, transition_frames, pause_prob, pause_frames, rest_prob }
    }
}

impl From<SentencesV1> for SentenceConfig {
    fn from(s: SentencesV1) -> Self {
        let SentencesV1 { per_signer, min_signs, max_signs, transition_frames, pause_prob, pause_frames, rest_prob } =
            s;
        Self { per_signer, min_signs, max_signs, transition_frames, pause_prob, pause_frames, rest_prob }
    }
}

impl From<&AugmentConfig> for AugmentV1 {
    fn from(a: &AugmentConfig) -> Self {
        let AugmentConfig {
            enabled,
            flip_prob,
            affine_prob,
            scale,
            shear,
            shift,
            rotation_deg,
            speed_prob,
            speed,
            temporal_mask_prob,
            temporal_mask,
            cutout_prob,
            cutout_fraction,
            crop_prob,
            crop,
        } = a.clone();
        Self {
            enabled,
            flip_prob,
            affine_prob,
            scale,
            shear,
            shift,
            rotation_deg,
            speed_prob,
            speed,
            temporal_mask_prob,
            temporal_mask,
            cutout_prob,
            cutout_fraction,
            crop_prob,
            crop,
        }
    }
}

impl From<AugmentV1> for AugmentConfig {
    fn from(a: AugmentV1) -> Self {
        let AugmentV1 {
            enabled,
            flip_prob,
            affine_prob,
            scale,
            shear,
            shift,
            rotation_deg,
            speed_prob,
            speed,
            temporal_mask_prob,
            temporal_mask,
            cutout_prob,
            cutout_fraction,
            crop_prob,
            crop,
        } = a;
        Self {
            enabled,
            flip_prob,
            affine_prob,
            scale,
            shear,
            shift,
            rotation_deg,
            speed_prob,
            speed,
            temporal_mask_prob,
            temporal_mask,
            cutout_prob,
            cutout_fraction,
            crop_prob,
            crop,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_written_in_file_order_and_reads_back() {
        let doc = ConfigV1::default();
        let text = toml::to_string(&doc).unwrap();
        let sections: Vec<&str> = text.lines().filter(|l| l.starts_with('[')).collect();
        assert_eq!(
            sections,
            [
                "[data]",
                "[synthetic]",
                "[sentences]",
                "[ctc]",
                "[preprocess]",
                "[augment]",
                "[model]",
                "[optimizer]",
                "[schedule]",
                "[training]",
                "[training.early_stopping]",
                "[checkpoint]",
                "[device]",
                "[amp]",
                "[recovery]",
                "[distributed]"
            ]
        );
        assert_eq!(toml::from_str::<ConfigV1>(&text).unwrap(), doc);
    }

    #[test]
    fn left_out_keys_take_version_1s_meaning_and_unknown_keys_are_refused() {
        let doc: ConfigV1 = toml::from_str("[training]\nbatch_size = \"auto\"\n[device]\ndevice = \"cuda:1\"").unwrap();
        assert_eq!(doc.training.batch_size, BatchSizeV1::Auto);
        assert_eq!(doc.training.epochs, 20, "a left-out key means version 1's default");
        assert_eq!(doc.device.device, "cuda:1");
        assert_eq!(doc.config_version, 1, "a file without config_version is version 1");

        let err = toml::from_str::<ConfigV1>("[training]\nepoch = 3").unwrap_err().to_string();
        assert!(err.contains("unknown field `epoch`"), "{err}");
        let err = toml::from_str::<ConfigV1>("[training]\nbatch_size = -4").unwrap_err().to_string();
        assert!(err.contains("must be a positive integer or \"auto\", got -4"), "{err}");
        let err = toml::from_str::<ConfigV1>("[training]\nbatch_size = \"big\"").unwrap_err().to_string();
        assert!(err.contains("got \"big\""), "{err}");
    }

    #[test]
    fn the_data_sections_convert_both_ways_and_v1_defaults_are_todays_crate_defaults() {
        // A crate default that moves away from version 1's fails here: a file that leaves the
        // key out keeps version 1's meaning, so decide whether that is a new version.
        assert_eq!(SynthConfig::from(SynthV1::default()), SynthConfig::default());
        assert_eq!(SentenceConfig::from(SentencesV1::default()), SentenceConfig::default());
        assert_eq!(AugmentConfig::from(AugmentV1::default()), AugmentConfig::default());
        assert_eq!(data::preprocess::PreprocessConfig::from(PreprocessV1::default()), Default::default());
        assert_eq!(models::decode::DecodeConfig::from(DecodeV1::default()), Default::default());
        assert_eq!(models::ModelConfig::from(ConfigV1::default().model), models::ModelConfig::default());

        let synth = SynthConfig { classes: 5, compression: Codec::Zstd, noise: 0.5, ..SynthConfig::default() };
        assert_eq!(SynthConfig::from(SynthV1::from(&synth)), synth);
        let sentences = SentenceConfig { rest_prob: 0.25, pause_frames: [1, 2], ..SentenceConfig::default() };
        assert_eq!(SentenceConfig::from(SentencesV1::from(&sentences)), sentences);
        let augment = AugmentConfig { enabled: false, speed: [0.5, 2.0], ..AugmentConfig::default() };
        assert_eq!(AugmentConfig::from(AugmentV1::from(&augment)), augment);
        assert_eq!(OnError::from(OnErrorV1::from(OnError::Fail)), OnError::Fail);
    }
}
