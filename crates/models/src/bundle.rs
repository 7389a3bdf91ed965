//! The exported-model bundle: the directory the trainer writes (`<run>/model/`) and `infer`
//! loads. Defined here, below both, so neither depends on the other.
//!
//! ```text
//! model.json    ModelCard: format + version, architecture, preprocessing, labels, provenance
//! model.mpk     weights (Burn NamedMpk, full precision)
//! config.toml   the resolved experiment config (for people; not needed to load)
//! labels.json   class names, index = model output
//! ```

use crate::kernels::Kernels;
use std::path::{Path, PathBuf};

use burn::module::{Module, ModuleVisitor, Param};
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn::tensor::Tensor;
use data::preprocess::PreprocessConfig;
use serde::{Deserialize, Serialize};

use crate::{ModelConfig, SignModel};

/// `model.json`'s `format`.
pub const MODEL_FORMAT: &str = "signflow-model";
/// Bumped when the bundle layout changes incompatibly.
pub const MODEL_FORMAT_VERSION: u32 = 1;
pub const CARD_FILE: &str = "model.json";
pub const WEIGHTS_FILE: &str = "model.mpk";

/// `model.json`: everything needed to rebuild and feed the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelCard {
    pub format: String,
    pub format_version: u32,
    pub signflow_version: String,
    pub model: ModelConfig,
    pub preprocess: PreprocessConfig,
    pub input_features: usize,
    pub labels: Vec<String>,
    pub trainable_params: usize,
    /// Epoch (1-based) and optimizer step of the exported weights.
    pub epoch: usize,
    pub step: usize,
    /// Validation figures of the exported weights, when there was a validation split.
    pub valid_top1: Option<f64>,
    pub valid_loss: Option<f64>,
    /// Median length (frames, after dropping empty ones) of the training sequences: what a
    /// streaming recognizer should look at to see one whole sign.
    #[serde(default)]
    pub median_frames: Option<usize>,
}

impl ModelCard {
    /// A card of the current format for `model` (epoch/step 0, no validation figures, no median
    /// length: set those fields when they are known).
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
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

fn io(path: &Path, e: impl std::fmt::Display) -> BundleError {
    BundleError::Io { path: path.into(), message: e.to_string() }
}

pub fn recorder() -> NamedMpkFileRecorder<FullPrecisionSettings> {
    NamedMpkFileRecorder::<FullPrecisionSettings>::new()
}

/// Save module weights as `<dir>/model.mpk`.
pub fn save_weights<B: Kernels>(model: &SignModel<B>, dir: &Path) -> Result<(), BundleError> {
    let path = dir.join("model");
    model.clone().save_file(&path, &recorder()).map_err(|e| io(&dir.join(WEIGHTS_FILE), e))
}

/// Parameter shapes in visiting order.
fn shapes<B: Kernels>(model: &SignModel<B>) -> Vec<Vec<usize>> {
    struct Shapes(Vec<Vec<usize>>);
    impl<B: Kernels> ModuleVisitor<B> for Shapes {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            self.0.push(param.shape().to_vec());
        }
    }
    let mut s = Shapes(Vec::new());
    model.visit(&mut s);
    s.0
}

/// Load `<dir>/model.mpk` into `model`, which fixes the architecture and shapes. Weights of a
/// different architecture are an error (Burn would load them and fail later in a forward pass).
pub fn load_weights<B: Kernels>(
    model: SignModel<B>,
    dir: &Path,
    device: &B::Device,
) -> Result<SignModel<B>, BundleError> {
    let path = dir.join(WEIGHTS_FILE);
    if !path.is_file() {
        return Err(BundleError::Invalid { path, message: "the weights file is missing".into() });
    }
    let expected = shapes(&model);
    // Burn panics on some malformed records; a corrupt file must be an error, not a crash.
    let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        model.load_file(dir.join("model"), &recorder(), device)
    }));
    match loaded {
        Ok(Ok(m)) => {
            let found = shapes(&m);
            match expected.iter().zip(&found).position(|(a, b)| a != b) {
                None if expected.len() == found.len() => Ok(m),
                Some(i) => Err(BundleError::Invalid {
                    path,
                    message: format!(
                        "cannot load the weights: parameter {i} has shape {:?}, the architecture in model.json needs {:?}",
                        found[i], expected[i]
                    ),
                }),
                None => Err(BundleError::Invalid {
                    path,
                    message: format!(
                        "cannot load the weights: {} parameter tensors, the architecture needs {}",
                        found.len(),
                        expected.len()
                    ),
                }),
            }
        }
        Ok(Err(e)) => Err(BundleError::Invalid { path, message: format!("cannot load the weights: {e}") }),
        Err(_) => Err(BundleError::Invalid {
            path,
            message: "cannot load the weights: the file does not match this architecture or is corrupt".into(),
        }),
    }
}

/// Write a bundle into `dir` (which the caller stages and renames).
pub fn write_bundle<B: Kernels>(
    dir: &Path,
    model: &SignModel<B>,
    card: &ModelCard,
    config_toml: &str,
) -> Result<(), BundleError> {
    save_weights(model, dir)?;
    write(&dir.join(CARD_FILE), to_json(card).as_bytes())?;
    write(&dir.join("config.toml"), config_toml.as_bytes())?;
    write(&dir.join("labels.json"), to_json(&card.labels).as_bytes())
}

fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).expect("bundle metadata serializes")
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), BundleError> {
    data::write_atomic(path, bytes).map_err(|e| io(path, e))
}

/// Read and check `<dir>/model.json`.
pub fn read_card(dir: &Path) -> Result<ModelCard, BundleError> {
    let path = dir.join(CARD_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| io(&path, e))?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| BundleError::Invalid { path: path.clone(), message: format!("not valid JSON: {e}") })?;
    let format = value.get("format").and_then(|v| v.as_str()).unwrap_or("");
    if format != MODEL_FORMAT {
        return Err(BundleError::Invalid {
            path,
            message: format!("`format` is {format:?}, expected {MODEL_FORMAT:?}: not a SignFlow model bundle"),
        });
    }
    let version = value.get("format_version").and_then(|v| v.as_u64()).unwrap_or(0);
    if version != u64::from(MODEL_FORMAT_VERSION) {
        return Err(BundleError::Invalid {
            path,
            message: format!(
                "`format_version` is {version}; this SignFlow reads version {MODEL_FORMAT_VERSION} (re-export the model with a matching trainer)"
            ),
        });
    }
    let card: ModelCard = serde_json::from_value(value)
        .map_err(|e| BundleError::Invalid { path: path.clone(), message: format!("invalid model card: {e}") })?;
    card.model
        .validate()
        .map_err(|e| BundleError::Invalid { path: path.clone(), message: format!("invalid model config: {e}") })?;
    if card.labels.len() < 2 || card.input_features == 0 {
        return Err(BundleError::Invalid {
            path,
            message: format!(
                "needs at least 2 labels and 1 input feature, has {} and {}",
                card.labels.len(),
                card.input_features
            ),
        });
    }
    Ok(card)
}

/// Load a bundle: its card and the model with its weights.
pub fn load_bundle<B: Kernels>(dir: &Path, device: &B::Device) -> Result<(ModelCard, SignModel<B>), BundleError> {
    let card = read_card(dir)?;
    let model = card.model.init::<B>(card.input_features, card.labels.len(), device);
    let model = load_weights(model, dir, device)?;
    Ok((card, model))
}

/// Every float parameter of `model`, flattened in visiting order (for exact comparisons).
pub fn flat_weights<B: Kernels>(model: &SignModel<B>) -> Vec<f32> {
    struct Collect(Vec<f32>);
    impl<B: Kernels> ModuleVisitor<B> for Collect {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            self.0.extend(param.val().into_data().iter::<f32>());
        }
    }
    let mut c = Collect(Vec::new());
    model.visit(&mut c);
    c.0
}
