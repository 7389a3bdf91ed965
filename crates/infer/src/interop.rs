//! A bundle's Burn model for code that works on the model itself, and PyTorch interop on the CPU
//! (the library side of `infer export-safetensors` and `infer import-torch`). The model is
//! built, and held or dropped, here, so callers do not compile Burn's model and tensor code
//! again for `Dispatch` (see [`crate::held`]).

use std::path::Path;

use bundle::ModelCard;
use device::{DeviceSpec, SelectionPolicy};
use models::SignModel;

use crate::held::Held;
use crate::{Backend, Result};

/// The card and the Burn model (with its weights) of the bundle in `model` (a run or model
/// directory), on `device`: for code that inspects, edits or converts the model itself; to run
/// it, load a [`crate::Predictor`]. Building a model draws from Burn's process-wide RNG.
#[inline(never)]
pub fn load_model(model: &Path, device: &device::DispatchDevice) -> Result<(ModelCard, Held<SignModel<Backend>>)> {
    let dir = bundle::layout::find_model_dir(model)?;
    let (card, m) = bundle::load_bundle::<Backend>(&dir, device)?;
    Ok((card, Held::new(m)))
}

/// Write the weights of the model in `model` (a run or model directory) to `out` as
/// safetensors with PyTorch's names and layouts (temp file + rename); returns its card.
#[inline(never)]
pub fn export_safetensors(model: &Path, out: &Path) -> Result<ModelCard> {
    let (card, m) = load_model(model, &cpu()?)?;
    bundle::torch::export_safetensors(&*m, &card, out)?;
    Ok(card)
}

/// Make a model directory `out` from a PyTorch `state_dict` file (`weights`) and the card of
/// the architecture it belongs to.
#[inline(never)]
pub fn import_torch(card: &ModelCard, weights: &Path, out: &Path) -> Result<()> {
    bundle::torch::import_bundle::<Backend>(card, weights, out, &cpu()?)?;
    Ok(())
}

/// The CPU device of the dispatch backend (weights conversion needs no accelerator).
pub(crate) fn cpu() -> Result<device::DispatchDevice> {
    Ok(device::resolve(&DeviceSpec::Cpu, &SelectionPolicy::default())?.device)
}
