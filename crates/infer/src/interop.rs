//! PyTorch interop on the CPU, the library side of `infer export-safetensors` and `infer
//! import-torch`: the model is built and dropped here, so callers do not compile Burn's model
//! and tensor code again for `Dispatch` (see `held.rs`).

use std::path::Path;

use bundle::ModelCard;
use device::{DeviceSpec, SelectionPolicy};

use crate::{Backend, Result};

/// Write the weights of the model in `model` (a run or model directory) to `out` as
/// safetensors with PyTorch's names and layouts (temp file + rename); returns its card.
#[inline(never)]
pub fn export_safetensors(model: &Path, out: &Path) -> Result<ModelCard> {
    let dir = bundle::layout::find_model_dir(model)?;
    let (card, m) = bundle::load_bundle::<Backend>(&dir, &cpu()?)?;
    bundle::torch::export_safetensors(&m, &card, out)?;
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
