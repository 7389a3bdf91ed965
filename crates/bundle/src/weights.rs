//! Model weights (`model.mpk`, Burn's NamedMpk recorder at full precision), loaded with a shape
//! check so weights of another architecture are an error, not a panic in a later forward pass.

use std::path::Path;

use burn::module::{Module, ModuleVisitor, Param};
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn::tensor::Tensor;
use models::kernels::Kernels;
use models::SignModel;

use crate::layout::{WEIGHTS_FILE, WEIGHTS_STEM};
use crate::{BundleError, Result};

/// The recorder of every weights file SignFlow writes.
pub fn recorder() -> NamedMpkFileRecorder<FullPrecisionSettings> {
    NamedMpkFileRecorder::<FullPrecisionSettings>::new()
}

/// Save module weights as `<dir>/model.mpk`.
pub fn save_weights<B: Kernels>(model: &SignModel<B>, dir: &Path) -> Result<()> {
    model
        .clone()
        .save_file(dir.join(WEIGHTS_STEM), &recorder())
        .map_err(|e| BundleError::io(&dir.join(WEIGHTS_FILE), e))
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

/// Load `<dir>/model.mpk` into `model`, which fixes the architecture and shapes.
pub fn load_weights<B: Kernels>(model: SignModel<B>, dir: &Path, device: &B::Device) -> Result<SignModel<B>> {
    let path = dir.join(WEIGHTS_FILE);
    let invalid = |message: String| BundleError::Invalid { path: path.clone(), message };
    if !path.is_file() {
        return Err(invalid("the weights file is missing".into()));
    }
    let expected = shapes(&model);
    // Burn panics on some malformed records; a corrupt file must be an error, not a crash.
    let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        model.load_file(dir.join(WEIGHTS_STEM), &recorder(), device)
    }));
    let m = match loaded {
        Ok(Ok(m)) => m,
        Ok(Err(e)) => return Err(invalid(format!("cannot load the weights: {e}"))),
        Err(_) => {
            return Err(invalid(
                "cannot load the weights: the file does not match this architecture or is corrupt".into(),
            ))
        }
    };
    let found = shapes(&m);
    match expected.iter().zip(&found).position(|(a, b)| a != b) {
        None if expected.len() == found.len() => Ok(m),
        Some(i) => Err(invalid(format!(
            "cannot load the weights: parameter {i} has shape {:?}, the architecture in model.json needs {:?}",
            found[i], expected[i]
        ))),
        None => Err(invalid(format!(
            "cannot load the weights: {} parameter tensors, the architecture needs {}",
            found.len(),
            expected.len()
        ))),
    }
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
