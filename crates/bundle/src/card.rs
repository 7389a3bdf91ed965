//! `model.json`: the model card, everything needed to rebuild and feed the model, and how it was
//! validated.

use std::path::Path;
use std::sync::Arc;

use data::dataset::SignDataset;
use data::preprocess::PreprocessConfig;
use data::tokens::{Unit, Vocabulary, WordList, BLANK};
use models::decode::{CtcDecoder, DecodeConfig, Lexicon, Scores};
use models::kernels::Kernels;
use models::{ModelConfig, SignModel, Task};
use serde::{Deserialize, Serialize};

use crate::layout::CARD_FILE;
use crate::{BundleError, Result};

/// `model.json`'s `format`.
pub const MODEL_FORMAT: &str = "signflow-model";
/// Bumped when the bundle layout changes incompatibly (added optional fields do not bump it).
pub const MODEL_FORMAT_VERSION: u32 = 1;

/// How the training run split its data into training and validation signers (groups): enough to
/// rebuild the same split of the same dataset (`data::index::split_by_group` or
/// `fold_by_group`), plus the held-out signers by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainingSplit {
    /// `data.valid_fraction`: share of signers held out (when `folds` is 0).
    pub valid_fraction: f64,
    /// `data.split_seed`.
    pub split_seed: u64,
    /// `data.folds`: 0 = no cross-validation, K >= 2 = fold `fold` of K was held out.
    pub folds: usize,
    /// `data.fold`: the held-out fold (0-based) when `folds` >= 2.
    pub fold: usize,
    /// The signers held out for validation, sorted.
    pub valid_groups: Vec<String>,
}

impl TrainingSplit {
    /// Range checks (a hand-edited card must not reach the split functions with nonsense).
    pub fn validate(&self) -> std::result::Result<(), String> {
        if !(0.0..1.0).contains(&self.valid_fraction) {
            return Err(format!("`split.valid_fraction` is {}, expected [0, 1)", self.valid_fraction));
        }
        if self.folds == 1 || (self.folds > 1 && self.fold >= self.folds) {
            return Err(format!("`split.folds` = {}, `split.fold` = {}: not a valid fold", self.folds, self.fold));
        }
        Ok(())
    }
}

/// What a CTC model's card adds: how its labels are tokens and how to decode its output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CtcCard {
    /// `character` (labels joined without spaces) or `gloss` (joined with spaces).
    pub unit: Unit,
    /// The decoder, beam width and lexicon file (`[ctc]` of the training config).
    pub decode: DecodeConfig,
    /// The configured decoder's validation scores of the exported weights, when there was a
    /// validation split.
    pub valid: Option<Scores>,
    /// The lexicon's words (read from `decode.lexicon` at training); empty without a lexicon.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lexicon: Vec<String>,
}

impl CtcCard {
    /// The decoder this card describes, its lexicon built from the card's words over `labels`
    /// (the model's classes, blank first).
    pub fn decoder(&self, labels: &[String]) -> std::result::Result<CtcDecoder, String> {
        let words = WordList::new(self.lexicon.clone(), CARD_FILE.into());
        let lexicon = (!self.lexicon.is_empty()).then(|| build_lexicon(&words, self.unit, labels)).transpose()?;
        Ok(CtcDecoder { config: self.decode.clone(), lexicon: lexicon.map(Arc::new) })
    }
}

/// The lexicon of `words` for a model whose classes are `labels` (blank first) split by `unit`:
/// words spelled in its tokens, joined by its word separator (see [`models::lexicon`]). The
/// message of a refusal names the word list and the word.
pub fn build_lexicon(words: &WordList, unit: Unit, labels: &[String]) -> std::result::Result<Lexicon, String> {
    let tokens = labels.get(1..).unwrap_or_default().to_vec();
    let vocabulary = Vocabulary::new(unit, tokens, "the model's labels".into()).map_err(|e| e.to_string())?;
    let classes = words.classes(&vocabulary)?;
    let separator = data::tokens::word_separator(unit, labels);
    Lexicon::new(&classes, separator, BLANK).map_err(|e| format!("{}: {e}", words.source.display()))
}

/// `model.json`: everything needed to rebuild and feed the model. It is read and written as the
/// frozen document of its format version ([`crate::card_v1::CardV1`]), not through the crates'
/// types it holds, so a change to those types does not change the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "crate::card_v1::CardV1", from = "crate::card_v1::CardV1")]
pub struct ModelCard {
    /// Always [`MODEL_FORMAT`].
    pub format: String,
    /// [`MODEL_FORMAT_VERSION`] of the writer.
    pub format_version: u32,
    /// The SignFlow version that wrote the bundle.
    pub signflow_version: String,
    /// The architecture and its sizes.
    pub model: ModelConfig,
    /// The preprocessing the model was trained with (applied to raw landmarks before the model).
    pub preprocess: PreprocessConfig,
    /// Features per frame of the model's input.
    pub input_features: usize,
    /// Class names, index = model output.
    pub labels: Vec<String>,
    /// Trainable parameters (BatchNorm running statistics not counted).
    pub trainable_params: usize,
    /// Epoch (1-based) of the exported weights.
    pub epoch: usize,
    /// Optimizer step of the exported weights.
    pub step: usize,
    /// Validation top-1 of the exported weights, when there was a validation split.
    pub valid_top1: Option<f64>,
    /// Validation loss of the exported weights, when there was a validation split.
    pub valid_loss: Option<f64>,
    /// Median length (frames, after dropping empty ones) of the training sequences: what a
    /// streaming recognizer should look at to see one whole sign.
    pub median_frames: Option<usize>,
    /// The training run's split (absent in bundles written before it was recorded).
    pub split: Option<TrainingSplit>,
    /// What the model outputs: pooled class scores (`classification`, the default of older
    /// cards) or per-frame token scores for CTC decoding (`ctc`; `labels[0]` is the blank).
    pub task: Task,
    /// CTC decoding settings (`task = "ctc"` only).
    pub ctc: Option<CtcCard>,
}

impl ModelCard {
    /// A card of the current format for `model` (epoch/step 0, no validation figures, no median
    /// length, no split: set those fields when they are known).
    pub fn new(
        model: ModelConfig,
        preprocess: PreprocessConfig,
        input_features: usize,
        labels: Vec<String>,
        trainable_params: usize,
    ) -> Self {
        Self {
            format: MODEL_FORMAT.into(),
            format_version: MODEL_FORMAT_VERSION,
            signflow_version: env!("CARGO_PKG_VERSION").into(),
            model,
            preprocess,
            input_features,
            labels,
            trainable_params,
            epoch: 0,
            step: 0,
            valid_top1: None,
            valid_loss: None,
            median_frames: None,
            split: None,
            task: Task::Classification,
            ctc: None,
        }
    }

    /// The card of `model` (built from `config`) trained with `preprocess` on the samples
    /// `train` of `ds`: the dataset's feature count and class names, the model's trainable
    /// parameters, the training samples' median length. Epoch, step, validation figures, split,
    /// task and CTC decoding are left for the caller to set.
    pub fn for_dataset<B: Kernels>(
        model: &SignModel<B>,
        config: ModelConfig,
        preprocess: PreprocessConfig,
        ds: &SignDataset,
        train: &[usize],
    ) -> Self {
        Self {
            median_frames: ds.median_frames(train),
            ..Self::new(config, preprocess, ds.features, ds.labels.clone(), models::trainable_params(model))
        }
    }
}

/// Read and check `<dir>/model.json`.
pub fn read_card(dir: &Path) -> Result<ModelCard> {
    let path = dir.join(CARD_FILE);
    let invalid = |message: String| BundleError::Invalid { path: path.clone(), message };
    let text = std::fs::read_to_string(&path).map_err(|e| BundleError::io(&path, e))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| invalid(format!("not valid JSON: {e}")))?;
    let format = value.get("format").and_then(|v| v.as_str()).unwrap_or("");
    if format != MODEL_FORMAT {
        return Err(invalid(format!("`format` is {format:?}, expected {MODEL_FORMAT:?}: not a SignFlow model bundle")));
    }
    let version = value.get("format_version").and_then(|v| v.as_u64()).unwrap_or(0);
    if version != u64::from(MODEL_FORMAT_VERSION) {
        return Err(invalid(format!(
            "`format_version` is {version}; this SignFlow reads version {MODEL_FORMAT_VERSION} (re-export the model with a matching trainer)"
        )));
    }
    let card: ModelCard = serde_json::from_value(value).map_err(|e| invalid(format!("invalid model card: {e}")))?;
    card.model.validate().map_err(|e| invalid(format!("invalid model config: {e}")))?;
    if card.labels.len() < 2 || card.input_features == 0 {
        return Err(invalid(format!(
            "needs at least 2 labels and 1 input feature, has {} and {}",
            card.labels.len(),
            card.input_features
        )));
    }
    if let Some(split) = &card.split {
        split.validate().map_err(invalid)?;
    }
    match (card.task, &card.ctc) {
        (Task::Ctc, None) => return Err(invalid("`task` is \"ctc\" but the card has no `ctc` section".into())),
        (Task::Classification, Some(_)) => {
            return Err(invalid("a `ctc` section on a classification model (`task` is \"classification\")".into()))
        }
        (Task::Ctc, Some(c)) => {
            c.decode.validate().map_err(|(key, message)| invalid(format!("`{key}` {message}")))?;
            if c.decode.lexicon.is_some() == c.lexicon.is_empty() {
                return Err(invalid(
                    "`ctc.decode.lexicon` names a word list exactly when `ctc.lexicon` holds words".into(),
                ));
            }
            if card.labels[0] != data::index::BLANK_LABEL {
                return Err(invalid(format!(
                    "a CTC model's first label must be the blank {:?}, got {:?}",
                    data::index::BLANK_LABEL,
                    card.labels[0]
                )));
            }
        }
        (Task::Classification, None) => {}
    }
    if let Some(c) = &card.ctc {
        c.decoder(&card.labels).map_err(|e| invalid(format!("`ctc.lexicon`: {e}")))?;
    }
    Ok(card)
}
