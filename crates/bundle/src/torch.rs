//! Weights other tools read and write, through burn-store: safetensors with PyTorch parameter
//! names out, and a PyTorch `state_dict` (`torch.save`) in.
//!
//! Names follow the module tree (`stem.weight`, `conv_blocks.0.expand.weight`,
//! `transformer_blocks.1.norm1.bn.running_var`, …), which for the conv-transformer is exactly the
//! PyTorch module in `benches/reference/reference_model.py`: Linear weights are stored `[out, in]`
//! and BatchNorm's gamma/beta as `weight`/`bias`, as PyTorch has them. `num_batches_tracked` is
//! neither written nor needed.

use std::collections::HashMap;
use std::path::Path;

use burn::module::Module;
use burn_store::{BurnToPyTorchAdapter, ModuleSnapshot, PytorchStore, SafetensorsStore};
use models::kernels::Kernels;
use models::SignModel;

use crate::weights::guarded;
use crate::{BundleError, ModelCard, Result};

/// Safetensors metadata key holding the model card as JSON.
pub const CARD_METADATA: &str = "signflow_model_card";

/// Encode `model`'s weights as safetensors with PyTorch names and layouts; the card goes into the
/// metadata under [`CARD_METADATA`].
pub fn to_safetensors<B: Kernels>(model: &SignModel<B>, card: &ModelCard) -> Result<Vec<u8>> {
    let card_json = serde_json::to_string(card).expect("a card serializes");
    let mut store = SafetensorsStore::from_bytes(None)
        .skip_enum_variants(true)
        .with_to_adapter(BurnToPyTorchAdapter)
        .metadata(CARD_METADATA, card_json)
        .metadata("format", "pt");
    let invalid = |e: String| BundleError::Invalid { path: "model".into(), message: e };
    model.save_into(&mut store).map_err(|e| invalid(format!("cannot encode the weights as safetensors: {e}")))?;
    store.get_bytes().map_err(|e| invalid(format!("cannot encode the weights as safetensors: {e}")))
}

/// Write `model`'s weights to `path` as safetensors (see [`to_safetensors`]), atomically.
pub fn export_safetensors<B: Kernels>(model: &SignModel<B>, card: &ModelCard, path: &Path) -> Result<()> {
    let bytes = to_safetensors(model, card)?;
    crate::atomic::write_atomic(path, &bytes)
}

/// Load a PyTorch `state_dict` file (`torch.save(model.state_dict(), path)`; a checkpoint dict
/// with the weights under `state_dict` or `model_state_dict` works too) into `model`, whose
/// architecture and sizes must match. Every parameter of `model` must be found with the same
/// shape; extra entries (`num_batches_tracked`) are ignored.
pub fn import_pytorch<B: Kernels>(model: SignModel<B>, path: &Path) -> Result<SignModel<B>> {
    let invalid = |message: String| BundleError::Invalid { path: path.into(), message };
    if !path.is_file() {
        return Err(BundleError::io(path, "no such file"));
    }
    let mut last_err = String::new();
    for key in [None, Some("state_dict"), Some("model_state_dict")] {
        let mut store = PytorchStore::from_file(path).skip_enum_variants(true);
        if let Some(k) = key {
            store = store.with_top_level_key(k);
        }
        // The reader can panic on some malformed pickles: an error instead.
        let mut attempt = model.clone();
        match guarded(move || attempt.load_from(&mut store).map(|r| (attempt, r))) {
            Ok(Ok((loaded, result))) if !result.applied.is_empty() => {
                if !result.errors.is_empty() {
                    return Err(invalid(format!("tensors that do not fit the architecture: {:?}", result.errors)));
                }
                return Ok(loaded);
            }
            Ok(Ok(_)) => last_err = "no tensor of the model found in it".into(),
            Ok(Err(e)) => last_err = e.to_string(),
            Err(_) => last_err = "the PyTorch reader failed on this file (truncated or not a torch.save file)".into(),
        }
        // A missing tensor under the root says the root is right but the file is of another model.
        if last_err.contains("Missing") || last_err.contains("missing") {
            break;
        }
    }
    Err(invalid(format!("cannot import the PyTorch weights: {last_err}")))
}

/// Parameter names and shapes of `model` as [`to_safetensors`] writes them (for messages and
/// tests).
pub fn parameter_shapes<B: Kernels>(model: &SignModel<B>) -> HashMap<String, Vec<usize>> {
    let adapter = BurnToPyTorchAdapter;
    model.collect(None, Some(Box::new(adapter)), true).into_iter().map(|s| (s.full_path(), s.shape.to_vec())).collect()
}

/// A bundle's model with weights imported from a PyTorch `state_dict`: the card (architecture,
/// preprocessing, labels) comes from `card`, the weights from `state_dict`. Written into `dir`.
pub fn import_bundle<B: Kernels>(card: &ModelCard, state_dict: &Path, dir: &Path, device: &B::Device) -> Result<()> {
    let model = card.model.init::<B>(card.input_features, card.labels.len(), device);
    let model = import_pytorch(model, state_dict)?;
    let mut card = card.clone();
    card.trainable_params = model.num_params();
    card.epoch = 0;
    card.step = 0;
    card.valid_top1 = None;
    card.valid_loss = None;
    crate::save_bundle(dir, &model, &card, "# imported from a PyTorch state_dict\n").map(|_| ())
}
