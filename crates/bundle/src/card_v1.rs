//! `model.json` version 1 as it lies on disk: the card's document types, owned by this crate and
//! frozen, with the conversions to and from the crates' own types ([`ModelCard`] and the
//! `models`/`data` configs it holds).
//!
//! The crates' config types may change (a field renamed in `data`, a new architecture option in
//! `models`); this document does not. Every conversion destructures both sides whole, so a field
//! added to or removed from a crate type fails to compile here until someone decides what it is
//! in version 1 (an optional field with a default keeps the version; anything else is a new
//! version, a new module beside this one, and a conversion from this one so old cards keep
//! loading). The golden-file test in `trainer` holds the serialized form to a card this release
//! wrote.

use data::preprocess::{Coords, LongSequences, PreprocessConfig};
use data::tokens::Unit;
use models::conv_transformer::ConvTransformerConfig;
use models::decode::{DecodeConfig, Decoder, Scores};
use models::gru::GruModelConfig;
use models::transformer::TransformerConfig;
use models::{ModelConfig, Task};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

use crate::card::{CtcCard, ModelCard, TrainingSplit};

/// The whole `model.json` of format version 1. Keys left out of the `model`, `preprocess` and
/// `ctc.decode` sections (a card written by hand for `infer import-torch`) take version 1's
/// defaults, which are frozen here like the names (field order = file order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CardV1 {
    /// `signflow-model`.
    pub format: String,
    /// 1.
    pub format_version: u32,
    /// The SignFlow version that wrote the bundle.
    pub signflow_version: String,
    /// The architecture and its sizes.
    pub model: ModelV1,
    /// The preprocessing applied to raw landmarks before the model.
    pub preprocess: PreprocessV1,
    /// Features per frame of the model's input.
    pub input_features: usize,
    /// Class names, index = model output.
    pub labels: Vec<String>,
    /// Trainable parameters.
    pub trainable_params: usize,
    /// Epoch (1-based) of the weights.
    pub epoch: usize,
    /// Optimizer step of the weights.
    pub step: usize,
    /// Validation top-1 of the weights.
    pub valid_top1: Option<f64>,
    /// Validation loss of the weights.
    pub valid_loss: Option<f64>,
    /// Median training sequence length (frames).
    #[serde(default)]
    pub median_frames: Option<usize>,
    /// The training run's split.
    #[serde(default)]
    pub split: Option<SplitV1>,
    /// `classification` (absent in the first cards) or `ctc`.
    #[serde(default)]
    pub task: TaskV1,
    /// CTC decoding (`task = "ctc"` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ctc: Option<CtcV1>,
}

/// `model`, tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ModelV1 {
    /// The conv-transformer.
    ConvTransformer(ConvTransformerV1),
    /// The transformer encoder.
    Transformer(TransformerV1),
    /// The bidirectional GRU.
    Gru(GruV1),
}

/// `model` of `kind = "conv_transformer"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[allow(missing_docs)] // the fields are the model's sizes, documented on `ConvTransformerConfig`
pub struct ConvTransformerV1 {
    pub dim: usize,
    pub stages: usize,
    pub conv_blocks_per_stage: usize,
    pub kernel: usize,
    pub expand: usize,
    pub heads: usize,
    pub eca_kernel: usize,
    pub drop_path: f64,
    pub attention_dropout: f64,
    pub late_dropout: f64,
    pub bn_momentum: f64,
}

/// `model` of `kind = "transformer"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[allow(missing_docs)] // documented on `TransformerConfig`
pub struct TransformerV1 {
    pub dim: usize,
    pub layers: usize,
    pub heads: usize,
    pub ff_dim: usize,
    pub dropout: f64,
    pub max_frames: usize,
}

/// `model` of `kind = "gru"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[allow(missing_docs)] // documented on `GruModelConfig`
pub struct GruV1 {
    pub hidden: usize,
    pub dropout: f64,
}

/// `preprocess`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[allow(missing_docs)] // documented on `PreprocessConfig`
pub struct PreprocessV1 {
    pub landmarks: Vec<String>,
    pub coords: CoordsV1,
    pub normalize: bool,
    pub reference_point: usize,
    pub time_differences: bool,
    pub window: usize,
    pub long_sequences: LongSequencesV1,
    pub drop_empty_frames: bool,
    pub pose_components: Vec<String>,
}

/// `preprocess.coords`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum CoordsV1 {
    Xy,
    Xyz,
}

/// `preprocess.long_sequences`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum LongSequencesV1 {
    Resize,
    Crop,
}

/// `split`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)] // documented on `TrainingSplit`
pub struct SplitV1 {
    pub valid_fraction: f64,
    pub split_seed: u64,
    pub folds: usize,
    pub fold: usize,
    pub valid_groups: Vec<String>,
}

/// `task`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum TaskV1 {
    #[default]
    Classification,
    Ctc,
}

/// `ctc`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)] // documented on `CtcCard`
pub struct CtcV1 {
    pub unit: UnitV1,
    pub decode: DecodeV1,
    pub valid: Option<ScoresV1>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lexicon: Vec<String>,
}

/// `ctc.unit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum UnitV1 {
    Character,
    Gloss,
}

/// `ctc.decode`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[allow(missing_docs)] // documented on `DecodeConfig`
pub struct DecodeV1 {
    pub decoder: DecoderV1,
    pub beam_width: usize,
    pub lexicon: Option<PathBuf>,
}

/// `ctc.decode.decoder`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum DecoderV1 {
    Greedy,
    Beam,
}

/// `ctc.valid`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)] // documented on `models::decode::Scores`
pub struct ScoresV1 {
    pub nld: f64,
    pub cer: f64,
    pub wer: f64,
    pub sequence_accuracy: f64,
}

impl Default for ConvTransformerV1 {
    fn default() -> Self {
        Self {
            dim: 192,
            stages: 2,
            conv_blocks_per_stage: 3,
            kernel: 17,
            expand: 2,
            heads: 4,
            eca_kernel: 5,
            drop_path: 0.2,
            attention_dropout: 0.2,
            late_dropout: 0.8,
            bn_momentum: 0.05,
        }
    }
}

impl Default for TransformerV1 {
    fn default() -> Self {
        Self { dim: 192, layers: 4, heads: 4, ff_dim: 384, dropout: 0.1, max_frames: 1024 }
    }
}

impl Default for GruV1 {
    fn default() -> Self {
        Self { hidden: 192, dropout: 0.2 }
    }
}

impl Default for PreprocessV1 {
    fn default() -> Self {
        Self {
            landmarks: ["lips", "hands", "nose", "eyes"].map(String::from).to_vec(),
            coords: CoordsV1::Xy,
            normalize: true,
            reference_point: 17,
            time_differences: true,
            window: 64,
            long_sequences: LongSequencesV1::Resize,
            drop_empty_frames: true,
            pose_components: Vec::new(),
        }
    }
}

impl Default for DecodeV1 {
    fn default() -> Self {
        Self { decoder: DecoderV1::Beam, beam_width: 8, lexicon: None }
    }
}

impl From<&ModelConfig> for ModelV1 {
    fn from(m: &ModelConfig) -> Self {
        match m {
            ModelConfig::ConvTransformer(c) => {
                let ConvTransformerConfig {
                    dim,
                    stages,
                    conv_blocks_per_stage,
                    kernel,
                    expand,
                    heads,
                    eca_kernel,
                    drop_path,
                    attention_dropout,
                    late_dropout,
                    bn_momentum,
                } = c.clone();
                Self::ConvTransformer(ConvTransformerV1 {
                    dim,
                    stages,
                    conv_blocks_per_stage,
                    kernel,
                    expand,
                    heads,
                    eca_kernel,
                    drop_path,
                    attention_dropout,
                    late_dropout,
                    bn_momentum,
                })
            }
            ModelConfig::Transformer(c) => {
                let TransformerConfig { dim, layers, heads, ff_dim, dropout, max_frames } = c.clone();
                Self::Transformer(TransformerV1 { dim, layers, heads, ff_dim, dropout, max_frames })
            }
            ModelConfig::Gru(c) => {
                let GruModelConfig { hidden, dropout } = c.clone();
                Self::Gru(GruV1 { hidden, dropout })
            }
        }
    }
}

impl From<ModelV1> for ModelConfig {
    fn from(m: ModelV1) -> Self {
        match m {
            ModelV1::ConvTransformer(c) => {
                let ConvTransformerV1 {
                    dim,
                    stages,
                    conv_blocks_per_stage,
                    kernel,
                    expand,
                    heads,
                    eca_kernel,
                    drop_path,
                    attention_dropout,
                    late_dropout,
                    bn_momentum,
                } = c;
                Self::ConvTransformer(ConvTransformerConfig {
                    dim,
                    stages,
                    conv_blocks_per_stage,
                    kernel,
                    expand,
                    heads,
                    eca_kernel,
                    drop_path,
                    attention_dropout,
                    late_dropout,
                    bn_momentum,
                })
            }
            ModelV1::Transformer(c) => {
                let TransformerV1 { dim, layers, heads, ff_dim, dropout, max_frames } = c;
                Self::Transformer(TransformerConfig { dim, layers, heads, ff_dim, dropout, max_frames })
            }
            ModelV1::Gru(c) => {
                let GruV1 { hidden, dropout } = c;
                Self::Gru(GruModelConfig { hidden, dropout })
            }
        }
    }
}

impl From<&PreprocessConfig> for PreprocessV1 {
    fn from(p: &PreprocessConfig) -> Self {
        let PreprocessConfig {
            landmarks,
            coords,
            normalize,
            reference_point,
            time_differences,
            window,
            long_sequences,
            drop_empty_frames,
            pose_components,
        } = p.clone();
        Self {
            landmarks,
            coords: match coords {
                Coords::Xy => CoordsV1::Xy,
                Coords::Xyz => CoordsV1::Xyz,
            },
            normalize,
            reference_point,
            time_differences,
            window,
            long_sequences: match long_sequences {
                LongSequences::Resize => LongSequencesV1::Resize,
                LongSequences::Crop => LongSequencesV1::Crop,
            },
            drop_empty_frames,
            pose_components,
        }
    }
}

impl From<PreprocessV1> for PreprocessConfig {
    fn from(p: PreprocessV1) -> Self {
        let PreprocessV1 {
            landmarks,
            coords,
            normalize,
            reference_point,
            time_differences,
            window,
            long_sequences,
            drop_empty_frames,
            pose_components,
        } = p;
        Self {
            landmarks,
            coords: match coords {
                CoordsV1::Xy => Coords::Xy,
                CoordsV1::Xyz => Coords::Xyz,
            },
            normalize,
            reference_point,
            time_differences,
            window,
            long_sequences: match long_sequences {
                LongSequencesV1::Resize => LongSequences::Resize,
                LongSequencesV1::Crop => LongSequences::Crop,
            },
            drop_empty_frames,
            pose_components,
        }
    }
}

impl From<&TrainingSplit> for SplitV1 {
    fn from(s: &TrainingSplit) -> Self {
        let TrainingSplit { valid_fraction, split_seed, folds, fold, valid_groups } = s.clone();
        Self { valid_fraction, split_seed, folds, fold, valid_groups }
    }
}

impl From<SplitV1> for TrainingSplit {
    fn from(s: SplitV1) -> Self {
        let SplitV1 { valid_fraction, split_seed, folds, fold, valid_groups } = s;
        Self { valid_fraction, split_seed, folds, fold, valid_groups }
    }
}

impl From<Decoder> for DecoderV1 {
    fn from(d: Decoder) -> Self {
        match d {
            Decoder::Greedy => Self::Greedy,
            Decoder::Beam => Self::Beam,
        }
    }
}

impl From<DecoderV1> for Decoder {
    fn from(d: DecoderV1) -> Self {
        match d {
            DecoderV1::Greedy => Self::Greedy,
            DecoderV1::Beam => Self::Beam,
        }
    }
}

impl From<Scores> for ScoresV1 {
    fn from(s: Scores) -> Self {
        let Scores { nld, cer, wer, sequence_accuracy } = s;
        Self { nld, cer, wer, sequence_accuracy }
    }
}

impl From<ScoresV1> for Scores {
    fn from(s: ScoresV1) -> Self {
        let ScoresV1 { nld, cer, wer, sequence_accuracy } = s;
        Self { nld, cer, wer, sequence_accuracy }
    }
}

impl From<Task> for TaskV1 {
    fn from(t: Task) -> Self {
        match t {
            Task::Classification => Self::Classification,
            Task::Ctc => Self::Ctc,
        }
    }
}

impl From<TaskV1> for Task {
    fn from(t: TaskV1) -> Self {
        match t {
            TaskV1::Classification => Self::Classification,
            TaskV1::Ctc => Self::Ctc,
        }
    }
}

impl From<&DecodeConfig> for DecodeV1 {
    fn from(d: &DecodeConfig) -> Self {
        let DecodeConfig { decoder, beam_width, lexicon } = d.clone();
        Self { decoder: decoder.into(), beam_width, lexicon }
    }
}

impl From<DecodeV1> for DecodeConfig {
    fn from(d: DecodeV1) -> Self {
        let DecodeV1 { decoder, beam_width, lexicon } = d;
        Self { decoder: decoder.into(), beam_width, lexicon }
    }
}

impl From<&CtcCard> for CtcV1 {
    fn from(c: &CtcCard) -> Self {
        let CtcCard { unit, decode, valid, lexicon } = c.clone();
        Self {
            unit: match unit {
                Unit::Character => UnitV1::Character,
                Unit::Gloss => UnitV1::Gloss,
            },
            decode: (&decode).into(),
            valid: valid.map(ScoresV1::from),
            lexicon,
        }
    }
}

impl From<CtcV1> for CtcCard {
    fn from(c: CtcV1) -> Self {
        let CtcV1 { unit, decode, valid, lexicon } = c;
        Self {
            unit: match unit {
                UnitV1::Character => Unit::Character,
                UnitV1::Gloss => Unit::Gloss,
            },
            decode: decode.into(),
            valid: valid.map(Scores::from),
            lexicon,
        }
    }
}

impl From<ModelCard> for CardV1 {
    fn from(c: ModelCard) -> Self {
        let ModelCard {
            format,
            format_version,
            signflow_version,
            model,
            preprocess,
            input_features,
            labels,
            trainable_params,
            epoch,
            step,
            valid_top1,
            valid_loss,
            median_frames,
            split,
            task,
            ctc,
        } = c;
        Self {
            format,
            format_version,
            signflow_version,
            model: (&model).into(),
            preprocess: (&preprocess).into(),
            input_features,
            labels,
            trainable_params,
            epoch,
            step,
            valid_top1,
            valid_loss,
            median_frames,
            split: split.as_ref().map(SplitV1::from),
            task: task.into(),
            ctc: ctc.as_ref().map(CtcV1::from),
        }
    }
}

impl From<CardV1> for ModelCard {
    fn from(c: CardV1) -> Self {
        let CardV1 {
            format,
            format_version,
            signflow_version,
            model,
            preprocess,
            input_features,
            labels,
            trainable_params,
            epoch,
            step,
            valid_top1,
            valid_loss,
            median_frames,
            split,
            task,
            ctc,
        } = c;
        Self {
            format,
            format_version,
            signflow_version,
            model: model.into(),
            preprocess: preprocess.into(),
            input_features,
            labels,
            trainable_params,
            epoch,
            step,
            valid_top1,
            valid_loss,
            median_frames,
            split: split.map(TrainingSplit::from),
            task: task.into(),
            ctc: ctc.map(CtcCard::from),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(model: ModelConfig) -> ModelCard {
        ModelCard::new(model, PreprocessConfig::default(), 12, vec!["a".into(), "b".into()], 100)
    }

    /// Every architecture and the CTC section come back from their version-1 document as they
    /// went in, and the document has exactly version 1's keys.
    #[test]
    fn cards_of_every_kind_round_trip_through_the_version_1_document() {
        let mut ctc = card(ModelConfig::Gru(GruModelConfig { hidden: 8, dropout: 0.1 }));
        ctc.task = Task::Ctc;
        ctc.labels = vec![data::index::BLANK_LABEL.into(), "a".into()];
        ctc.ctc = Some(CtcCard {
            unit: Unit::Gloss,
            decode: DecodeConfig { decoder: Decoder::Greedy, beam_width: 4, lexicon: Some("words.txt".into()) },
            valid: Some(Scores { nld: 0.5, cer: 0.25, wer: 0.5, sequence_accuracy: 0.125 }),
            lexicon: vec!["a".into()],
        });
        ctc.split = Some(TrainingSplit {
            valid_fraction: 0.25,
            split_seed: 3,
            folds: 0,
            fold: 0,
            valid_groups: vec!["7".into()],
        });
        let cards = [
            card(ModelConfig::ConvTransformer(ConvTransformerConfig::default())),
            card(ModelConfig::Transformer(TransformerConfig::default())),
            ctc,
        ];
        for c in cards {
            let text = serde_json::to_string(&c).unwrap();
            assert_eq!(serde_json::from_str::<ModelCard>(&text).unwrap(), c, "{text}");
            let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
            let mut keys: Vec<&str> = doc.as_object().unwrap().keys().map(String::as_str).collect();
            keys.sort_unstable();
            let mut expected = vec![
                "format",
                "format_version",
                "signflow_version",
                "model",
                "preprocess",
                "input_features",
                "labels",
                "trainable_params",
                "epoch",
                "step",
                "valid_top1",
                "valid_loss",
                "median_frames",
                "split",
                "task",
            ];
            if c.ctc.is_some() {
                expected.push("ctc");
            }
            expected.sort_unstable();
            assert_eq!(keys, expected, "model.json's top-level keys");
        }
    }

    /// The conv-transformer section's keys are version 1's, whatever `models` names its fields.
    #[test]
    fn the_model_section_keeps_version_1_names() {
        let doc = serde_json::to_value(ModelV1::from(&ModelConfig::ConvTransformer(ConvTransformerConfig::default())))
            .unwrap();
        let mut keys: Vec<&str> = doc.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "attention_dropout",
                "bn_momentum",
                "conv_blocks_per_stage",
                "dim",
                "drop_path",
                "eca_kernel",
                "expand",
                "heads",
                "kernel",
                "kind",
                "late_dropout",
                "stages"
            ]
        );
        let partial: ModelV1 = serde_json::from_str(r#"{"kind": "gru", "hidden": 8}"#).unwrap();
        assert_eq!(partial, ModelV1::Gru(GruV1 { hidden: 8, dropout: 0.2 }), "left-out keys take version 1's defaults");
        let mut extra = doc.clone();
        extra["depth"] = 3.into();
        let e = serde_json::from_value::<ModelV1>(extra).unwrap_err().to_string();
        assert!(e.contains("unknown field `depth`"), "{e}");
    }
}
