//! PyTorch and safetensors weights through burn-store, on the fixtures made by
//! benches/reference/torch_interop.py.

use std::path::Path;

use bundle::torch::{import_pytorch, parameter_shapes, to_safetensors};
use bundle::ModelCard;
use burn::tensor::{Bool, Tensor, TensorData};
use burn_store::{ModuleSnapshot, PyTorchToBurnAdapter, SafetensorsStore};
use models::conv_transformer::ConvTransformerConfig;
use models::ModelConfig;
use models::SignModel;

type B = device::Backend;

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../bundle/tests/fixtures").join(name)
}

/// The sizes of `TINY` in benches/reference/torch_interop.py.
fn tiny(dim: usize) -> ModelConfig {
    ModelConfig::ConvTransformer(ConvTransformerConfig {
        dim,
        stages: 1,
        conv_blocks_per_stage: 1,
        kernel: 5,
        expand: 2,
        heads: 2,
        eca_kernel: 3,
        drop_path: 0.0,
        attention_dropout: 0.0,
        ..Default::default()
    })
}

/// Logits of `model` on the fixture's inputs, and the fixture's PyTorch logits.
fn logits(model: &SignModel<B>, dev: &device::DispatchDevice) -> (Vec<f32>, Vec<f32>) {
    let arrays = data::npy::read_npz_arrays(&fixture("tiny_reference_logits.npz")).unwrap();
    let get = |n: &str| arrays.iter().find(|(k, _)| k == n).map(|(_, a)| a.clone()).unwrap();
    let (x, valid, expected) = (get("x"), get("valid"), get("logits"));
    let (b, t, f) = (x.shape[0], x.shape[1], x.shape[2]);
    let x = Tensor::<B, 3>::from_data(TensorData::new(x.data, [b, t, f]), dev);
    let mask: Vec<bool> = (0..b * t).map(|i| (i % t) as f32 >= valid.data[i / t]).collect();
    let mask = Tensor::<B, 2, Bool>::from_data(TensorData::new(mask, [b, t]), dev);
    let out = model.forward(x, mask).into_data().to_vec::<f32>().unwrap();
    (out, expected.data)
}

#[test]
fn a_pytorch_state_dict_imports_and_reproduces_its_logits() {
    let dev = device::dispatch_device(&device::Target::Cpu).unwrap();
    let model = tiny(16).init::<B>(10, 5, &dev);
    let model = import_pytorch(model, &fixture("tiny_reference.pt")).unwrap();
    let (ours, torch) = logits(&model, &dev);
    assert_eq!(ours.len(), 10);
    let diff = ours.iter().zip(&torch).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(diff <= 1e-4, "max |logit difference| {diff} vs PyTorch");
    // The untrained model is far from them: the weights did arrive.
    let (fresh, _) = logits(&tiny(16).init::<B>(10, 5, &dev), &dev);
    assert!(fresh.iter().zip(&torch).any(|(a, b)| (a - b).abs() > 1e-2));
}

#[test]
fn safetensors_export_has_pytorch_names_and_layouts_and_reads_back_exactly() {
    let dev = device::dispatch_device(&device::Target::Cpu).unwrap();
    let model = import_pytorch(tiny(16).init::<B>(10, 5, &dev), &fixture("tiny_reference.pt")).unwrap();
    let shapes = parameter_shapes(&model);
    assert_eq!(shapes["stem.weight"], vec![16, 10], "Linear weights are [out, in] as in PyTorch");
    assert_eq!(shapes["stem_norm.bn.weight"], vec![16]);
    assert_eq!(shapes["stem_norm.bn.running_var"], vec![16]);
    assert_eq!(shapes["conv_blocks.0.dwconv.conv.weight"], vec![32, 1, 5]);
    assert_eq!(shapes["transformer_blocks.0.attention.qkv.weight"], vec![48, 16]);
    assert_eq!(shapes["classifier.bias"], vec![5]);
    let card = ModelCard::new(tiny(16), Default::default(), 10, (0..5).map(|i| i.to_string()).collect(), 0);
    let bytes = to_safetensors(&model, &card).unwrap();
    let mut back = tiny(16).init::<B>(10, 5, &dev);
    let mut store =
        SafetensorsStore::from_bytes(Some(bytes)).skip_enum_variants(true).with_from_adapter(PyTorchToBurnAdapter);
    let result = back.load_from(&mut store).unwrap();
    assert!(result.missing.is_empty() && result.errors.is_empty(), "{result}");
    assert_eq!(bundle::weights::fingerprint(&back), bundle::weights::fingerprint(&model));
}

#[test]
fn bad_pytorch_files_are_errors_naming_the_file() {
    let dev = device::dispatch_device(&device::Target::Cpu).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let valid = std::fs::read(fixture("tiny_reference.pt")).unwrap();
    let p = dir.path().join("broken.pt");
    for cut in [0, 10, valid.len() / 2, valid.len() - 30] {
        std::fs::write(&p, &valid[..cut]).unwrap();
        let err = import_pytorch(tiny(16).init::<B>(10, 5, &dev), &p).unwrap_err().to_string();
        assert!(err.contains("broken.pt"), "cut {cut}: {err}");
    }
    // Another width: the tensors do not fit.
    let err = import_pytorch(tiny(8).init::<B>(10, 5, &dev), &fixture("tiny_reference.pt")).unwrap_err().to_string();
    assert!(err.contains("tiny_reference.pt"), "{err}");
    let err = import_pytorch(tiny(16).init::<B>(10, 5, &dev), &dir.path().join("none.pt")).unwrap_err().to_string();
    assert!(err.contains("none.pt"), "{err}");
}
