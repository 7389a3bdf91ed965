//! # SignFlow bundle: the run-directory and exported-model format
//!
//! The trainer writes run directories and `infer` reads the model they export; this crate is
//! the one definition of that format, below both, so neither depends on the other:
//! - [`layout`]: every file and directory name of a run directory and of a model bundle, and how
//!   a path given by a user is resolved to the model in it;
//! - [`card`]: `model.json`, the [`ModelCard`] (architecture, preprocessing, labels, provenance,
//!   and the [`TrainingSplit`] the model was validated on), read and written through
//!   [`card_v1`], the frozen document of format version 1;
//! - [`config_v1`]: `config.toml`, the experiment config (the user's layers and the resolved record a
//!   run directory and a bundle keep), frozen as version 1;
//! - [`state_v1`]: a checkpoint's `state.json` (the trainer's loop state), frozen as version 1;
//! - [`weights`]: saving and loading weights (`model.mpk`) with shape checks;
//! - [`atomic`]: atomic file writes and directories staged under a temporary name;
//! - [`manifest`]: sizes and CRC-32s of a staged directory's files, checked before loading;
//! - [`torch`]: safetensors out and PyTorch state dicts in, read by [`torch_file`] and
//!   [`pickle`] (bounded readers of an untrusted `torch.save` archive);
//! - [`save_bundle`] / [`load_bundle`]: a whole bundle, staged and renamed into place;
//!   [`write_bundle`] writes its files into a directory the caller stages.
//!
//! ```no_run
//! let device = device::dispatch_device(&device::Target::Cpu)?;
//! let dir = bundle::layout::find_model_dir("runs/default-20261122-193204".as_ref())?;
//! let (card, model) = bundle::load_bundle::<device::Backend>(&dir, &device)?;
//! println!("{} classes, trained on {:?}", card.labels.len(), card.split);
//! # let _ = model;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub mod atomic;
pub mod card;
pub mod card_v1;
pub mod config_v1;
pub mod layout;
pub mod manifest;
pub mod pickle;
pub mod state_v1;
pub mod torch;
pub mod torch_file;
pub mod weights;

use std::path::{Path, PathBuf};

use models::kernels::Kernels;
use models::SignModel;

pub use card::{build_lexicon, CtcCard, ModelCard, TrainingSplit, MODEL_FORMAT, MODEL_FORMAT_VERSION};

/// Why a bundle or run-directory file could not be read or written. Each names the file.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The file system refused (missing file, permission, full disk); the message is the OS reason.
    #[error("{path}: {message}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The file was read but is not what the format expects.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What was expected and what was found.
        message: String,
    },
}

impl BundleError {
    /// An I/O error on `path`.
    pub fn io(path: &Path, e: impl std::fmt::Display) -> Self {
        Self::Io { path: path.into(), message: e.to_string() }
    }
}

/// `Result` with [`BundleError`].
pub type Result<T, E = BundleError> = std::result::Result<T, E>;

/// Write a whole bundle into `dir` (the caller stages `dir` and renames it into place):
/// weights, card, the resolved experiment config (for people; not needed to load) and labels.
pub fn write_bundle<B: Kernels>(dir: &Path, model: &SignModel<B>, card: &ModelCard, config_toml: &str) -> Result<()> {
    weights::save_weights(model, dir)?;
    atomic::write_json(&dir.join(layout::CARD_FILE), card)?;
    atomic::write_atomic(&dir.join(layout::CONFIG_FILE), config_toml.as_bytes())?;
    atomic::write_json(&dir.join(layout::LABELS_FILE), &card.labels)
}

/// Write `model` with `card` as the bundle directory `dir`, created or replaced whole (staged
/// and renamed into place: a crash leaves the old or the new bundle, never a mix), and return
/// `dir`. `config_toml` is kept beside the weights as the record of how the model was trained.
/// Refuses a card that does not describe the model's input features and classes.
pub fn save_bundle<B: Kernels>(
    dir: &Path,
    model: &SignModel<B>,
    card: &ModelCard,
    config_toml: &str,
) -> Result<PathBuf> {
    if card.input_features != model.input_features() || card.labels.len() != model.classes() {
        return Err(BundleError::Invalid {
            path: dir.join(layout::CARD_FILE),
            message: format!(
                "the card describes {} input features and {} classes, the model has {} and {}",
                card.input_features,
                card.labels.len(),
                model.input_features(),
                model.classes()
            ),
        });
    }
    let staged = atomic::StagedDir::new(dir)?;
    write_bundle(&staged.tmp, model, card, config_toml)?;
    staged.commit()
}

/// Refuse a card whose model cannot fit in its weights file (4 bytes a parameter at full
/// precision), before the model is built: damaged sizes would otherwise allocate without bound.
fn check_size(dir: &Path, card: &ModelCard) -> Result<()> {
    let weights = dir.join(layout::WEIGHTS_FILE);
    let Ok(meta) = std::fs::metadata(&weights) else {
        return Ok(()); // the weights reader names a missing file
    };
    let bytes = meta.len() as u128;
    let params = card.model.min_params(card.input_features, card.labels.len());
    if params.saturating_mul(4) > bytes {
        return Err(BundleError::Invalid {
            path: dir.join(layout::CARD_FILE),
            message: format!(
                "it describes a {} model of at least {params} parameters ({} bytes), but {} holds {bytes} bytes: the weights file is truncated, or the card is damaged or belongs to other weights",
                card.model.kind(),
                params.saturating_mul(4),
                layout::WEIGHTS_FILE
            ),
        });
    }
    Ok(())
}

/// Load a bundle: its card and the model with its weights.
pub fn load_bundle<B: Kernels>(dir: &Path, device: &B::Device) -> Result<(ModelCard, SignModel<B>)> {
    manifest::verify(dir, &[layout::WEIGHTS_FILE])?;
    let card = card::read_card(dir)?;
    check_size(dir, &card)?;
    // The card's architecture was validated when it was read; should Burn still refuse to build
    // it (its layers assert on their settings), that is an error naming the card, not a crash.
    let model =
        data::guard::guarded(|| card.model.init::<B>(card.input_features, card.labels.len(), device)).map_err(|m| {
            BundleError::Invalid {
                path: dir.join(layout::CARD_FILE),
                message: format!("the {} model it describes cannot be built: {m}", card.model.kind()),
            }
        })?;
    let model = weights::load_weights(model, dir, device)?;
    Ok((card, model))
}
