//! Burn records on disk: model weights (`model.mpk`) and optimizer state (`optim.mpk`), both
//! Burn's named MessagePack at full precision. Records are encoded in memory and written
//! atomically, so a full disk is an error naming the file and the OS reason and leaves no partial
//! file; reading checks the shapes, so weights of another architecture or a corrupt file are an
//! error in SignFlow's words, never a panic in a later forward pass.

use std::path::Path;

use burn::module::{Module, ModuleVisitor, Param};
use burn::record::{FullPrecisionSettings, NamedMpkBytesRecorder, Record, Recorder};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use data::guard::guarded;
use models::kernels::Kernels;
use models::SignModel;

use crate::layout::WEIGHTS_FILE;
use crate::{BundleError, Result};

/// The recorder of every record SignFlow writes (the bytes `NamedMpkFileRecorder` writes too).
fn recorder() -> NamedMpkBytesRecorder<FullPrecisionSettings> {
    NamedMpkBytesRecorder::<FullPrecisionSettings>::new()
}

/// Write a Burn record to `path`: encoded in memory, then written atomically.
pub fn write_record<B: Backend, R: Record<B>>(record: R, path: &Path) -> Result<()> {
    let bytes = Recorder::<B>::record(&recorder(), record, ())
        .map_err(|e| BundleError::Invalid { path: path.into(), message: format!("cannot encode the record: {e}") })?;
    crate::atomic::write_atomic(path, &bytes)
}

/// Read a Burn record written by [`write_record`]. `what` names the file's content in errors
/// ("weights", "optimizer state"); a truncated or corrupt file is reported as such.
pub fn read_record<B: Backend, R: Record<B>>(path: &Path, what: &str, device: &B::Device) -> Result<R> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(BundleError::Invalid { path: path.into(), message: format!("the {what} file is missing") })
        }
        Err(e) => return Err(BundleError::io(path, e)),
    };
    let len = bytes.len();
    // Burn's decoder panics on some malformed input; a corrupt file must be an error, not a crash.
    let loaded = guarded(|| Recorder::<B>::load::<R>(&recorder(), bytes, device));
    match loaded {
        Ok(Ok(r)) => Ok(r),
        _ => Err(BundleError::Invalid {
            path: path.into(),
            message: format!(
                "cannot read the {what}: the file ({len} bytes) is truncated or corrupt, or holds another model's {what}"
            ),
        }),
    }
}

/// Save module weights as `<dir>/model.mpk`.
pub fn save_weights<B: Kernels>(model: &SignModel<B>, dir: &Path) -> Result<()> {
    write_record::<B, _>(model.clone().into_record(), &dir.join(WEIGHTS_FILE))
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
    let expected = shapes(&model);
    let record = read_record::<B, _>(&path, "weights", device)?;
    // Loading a record of another architecture can panic inside Burn: an error instead.
    let m = guarded(|| model.load_record(record)).map_err(|_| {
        invalid("cannot load the weights: the file holds another architecture than the one in model.json".into())
    })?;
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

/// A 64-bit FNV-1a hash of the bits of every float parameter, in visiting order, as 16 hex
/// digits: equal for two models exactly when their weights are equal bit for bit (the encoded
/// `model.mpk` bytes are not: Burn stores random parameter ids).
pub fn fingerprint<B: Kernels>(model: &SignModel<B>) -> String {
    let mut h = 0xcbf29ce484222325;
    for v in flat_weights(model) {
        h = data::index::fnv1a(h, &v.to_bits().to_le_bytes());
    }
    format!("{h:016x}")
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
