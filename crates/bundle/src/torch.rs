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

use burn::module::{Module, ParamId};
use burn::tensor::TensorData;
use burn_store::{
    Applier, BurnToPyTorchAdapter, ModuleSnapshot, PyTorchToBurnAdapter, SafetensorsStore, TensorSnapshot,
};
use models::kernels::Kernels;
use models::SignModel;

use crate::torch_file::TorchFile;
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

/// Write `model`'s weights to `path` as safetensors (see [`to_safetensors`]), atomically. An
/// existing file is replaced only if it is a safetensors file SignFlow wrote (it carries
/// [`CARD_METADATA`]); any other file is left alone and the export refused.
pub fn export_safetensors<B: Kernels>(model: &SignModel<B>, card: &ModelCard, path: &Path) -> Result<()> {
    if std::fs::symlink_metadata(path).is_ok() && !is_signflow_safetensors(path) {
        return Err(BundleError::Invalid {
            path: path.into(),
            message: "exists and is not a safetensors file SignFlow wrote; it is left as it is: choose another --out"
                .into(),
        });
    }
    let bytes = to_safetensors(model, card)?;
    crate::atomic::write_atomic(path, &bytes)
}

/// Whether `path` is a plain file in the safetensors layout whose header carries [`CARD_METADATA`]
/// (reads at most the header, itself at most 16 MB).
fn is_signflow_safetensors(path: &Path) -> bool {
    use std::io::Read;
    let Ok(meta) = std::fs::symlink_metadata(path) else { return false };
    let Ok(mut f) = std::fs::File::open(path) else { return false };
    let mut len = [0u8; 8];
    if !meta.is_file() || f.read_exact(&mut len).is_err() {
        return false;
    }
    let n = u64::from_le_bytes(len);
    if n > 16 << 20 || n + 8 > meta.len() {
        return false;
    }
    let mut header = Vec::new();
    f.take(n).read_to_end(&mut header).is_ok()
        && header.windows(CARD_METADATA.len()).any(|w| w == CARD_METADATA.as_bytes())
}

/// Load a PyTorch `state_dict` file (`torch.save(model.state_dict(), path)`; a checkpoint dict
/// with the weights under `state_dict` or `model_state_dict` works too) into `model`, whose
/// architecture and sizes must match. Every parameter of `model` must be found, floating point
/// (f32, f64, f16 or bf16) and of the same shape; extra entries (`num_batches_tracked`) are
/// ignored.
///
/// The file is untrusted: it is read by [`crate::torch_file`] (a bounded pickle reader, no code
/// run), every tensor is checked against the model before its data is read, and the checked
/// values are applied through safe code, so a crafted file is an error naming the file and the
/// tensor, never a crash or an allocation the model does not justify.
pub fn import_pytorch<B: Kernels>(model: SignModel<B>, path: &Path) -> Result<SignModel<B>> {
    let invalid = |message: String| BundleError::Invalid { path: path.into(), message };
    if !path.is_file() {
        return Err(BundleError::io(path, "no such file"));
    }
    let mut file = TorchFile::open(path)?;
    let mut expected: Vec<(String, Vec<usize>)> = parameter_shapes(&model).into_iter().collect();
    expected.sort();
    let missing: Vec<&str> =
        expected.iter().map(|(n, _)| n.as_str()).filter(|n| !file.tensors.contains_key(*n)).collect();
    if !missing.is_empty() {
        let found: Vec<&str> = file.tensors.keys().map(String::as_str).collect();
        return Err(invalid(format!(
            "cannot import the PyTorch weights: {} of the model's {} tensors are missing ({}); the file holds {} tensors ({})",
            missing.len(),
            expected.len(),
            crate::layout::first_names(&missing),
            found.len(),
            crate::layout::first_names(&found),
        )));
    }
    let mut snapshots = Vec::with_capacity(expected.len());
    for (name, shape) in &expected {
        let values = file.read_f32(name, shape)?;
        let path_stack = name.split('.').map(str::to_owned).collect();
        snapshots.push(TensorSnapshot::from_data(
            TensorData::new(values, shape.clone()),
            path_stack,
            Vec::new(),
            ParamId::new(),
        ));
    }
    // Applied by value through `Module::map` (ModuleSnapshot::apply moves the module out of a
    // reference with ptr::read, which a panic would turn into a double free).
    let mut applier = Applier::new(snapshots, None, Some(Box::new(PyTorchToBurnAdapter)), true);
    let model = model.map(&mut applier);
    let result = applier.into_result();
    if !result.errors.is_empty() || !result.missing.is_empty() {
        return Err(invalid(format!(
            "cannot import the PyTorch weights: tensors that do not fit the architecture: {:?} {:?}",
            result.errors, result.missing
        )));
    }
    Ok(model)
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
