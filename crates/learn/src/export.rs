//! A model trained with burn-train, written as a SignFlow bundle (`model/` of a run) that
//! `infer` loads: the bundle crate's format, staged and renamed into place.

use std::path::{Path, PathBuf};

use bundle::atomic::StagedDir;
use bundle::{ModelCard, TrainingSplit};
use data::dataset::SignDataset;
use data::preprocess::PreprocessConfig;
use models::kernels::Kernels;
use models::{ModelConfig, SignModel};

use crate::{LearnError, Result};

/// The model card of `model` (built from `config`) trained on the `train` positions of `ds`
/// with `preprocess`; `split` records how the held-out signers were chosen. Epoch, step and
/// validation figures are left for the caller to fill in.
pub fn model_card<B: Kernels>(
    model: &SignModel<B>,
    config: &ModelConfig,
    preprocess: &PreprocessConfig,
    ds: &SignDataset,
    train: &[usize],
    split: Option<TrainingSplit>,
) -> ModelCard {
    ModelCard {
        median_frames: ds.median_frames(train),
        split,
        ..ModelCard::new(
            config.clone(),
            preprocess.clone(),
            ds.features,
            ds.labels.clone(),
            models::trainable_params(model),
        )
    }
}

/// Write `model` and `card` as a bundle directory `dir` (created, or replaced whole: a crash
/// leaves the old or the new bundle, never a mix). `config_toml` is kept beside the weights as
/// the record of how the model was trained. Refuses a card that does not describe the model.
pub fn export_bundle<B: Kernels>(
    dir: &Path,
    model: &SignModel<B>,
    card: &ModelCard,
    config_toml: &str,
) -> Result<PathBuf> {
    if card.input_features != model.input_features() || card.labels.len() != model.classes() {
        return Err(LearnError::Invalid(format!(
            "the card describes {} input features and {} classes, the model has {} and {}",
            card.input_features,
            card.labels.len(),
            model.input_features(),
            model.classes()
        )));
    }
    let staged = StagedDir::new(dir)?;
    bundle::write_bundle(&staged.tmp, model, card, config_toml)?;
    Ok(staged.commit()?)
}
