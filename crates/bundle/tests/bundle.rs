//! PyTorch and safetensors weights, on the fixtures made by benches/reference/torch_interop.py
//! and on files crafted from them.

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

/// The fixture with its entries edited: `edit(name, bytes)` returns the new bytes, or `None`
/// to leave the entry out. Written as torch.save does (stored, not compressed).
fn edited_fixture(dir: &Path, name: &str, edit: impl Fn(&str, Vec<u8>) -> Option<Vec<u8>>) -> std::path::PathBuf {
    use std::io::{Read, Write};
    let mut src = zip::ZipArchive::new(std::fs::File::open(fixture("tiny_reference.pt")).unwrap()).unwrap();
    let path = dir.join(name);
    let mut out = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for i in 0..src.len() {
        let mut f = src.by_index(i).unwrap();
        let entry = f.name().to_string();
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes).unwrap();
        if let Some(bytes) = edit(&entry, bytes) {
            out.start_file(entry, opts).unwrap();
            out.write_all(&bytes).unwrap();
        }
    }
    out.finish().unwrap();
    path
}

/// The fixture's pickle with the first `from` replaced by `to` (which must be there).
fn pickle_edit(from: &'static [u8], to: Vec<u8>) -> impl Fn(&str, Vec<u8>) -> Option<Vec<u8>> {
    move |entry, bytes| {
        if !entry.ends_with("data.pkl") {
            return Some(bytes);
        }
        let at = bytes.windows(from.len()).position(|w| w == from).expect("the pattern is in the fixture's pickle");
        Some([&bytes[..at], &to[..], &bytes[at + from.len()..]].concat())
    }
}

/// A pickle of its own in place of the fixture's.
fn pickle_of(pickle: Vec<u8>) -> impl Fn(&str, Vec<u8>) -> Option<Vec<u8>> {
    move |entry, bytes| Some(if entry.ends_with("data.pkl") { pickle.clone() } else { bytes })
}

fn binint(v: i32) -> Vec<u8> {
    [&[b'J'][..], &v.to_le_bytes()].concat()
}

/// Files made to attack the PyTorch importer: each is an error naming the file and what is wrong,
/// read without a crash, without memory corruption (scripts/memcheck-torch-import.sh runs this
/// test under valgrind) and without allocating what the file does not hold.
#[test]
fn crafted_pytorch_files_are_refused_with_what_is_wrong() {
    let dev = device::dispatch_device(&device::Target::Cpu).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // (file, what the error must say)
    let mut cases: Vec<(std::path::PathBuf, &str)> = vec![
        // Integer weights: every tensor int64 (the first storage class is shared through the memo).
        (
            edited_fixture(d, "int64.pt", pickle_edit(b"ctorch\nFloatStorage\n", b"ctorch\nLongStorage\n".to_vec())),
            "holds int64 values; the model's parameters are floating point",
        ),
        // A 200000 x 200000 broadcast view (strides 0) of a 160-element storage, 28 KB on disk.
        (
            edited_fixture(
                d,
                "broadcast.pt",
                pickle_edit(b"QK\x00K\x10K\n\x86q\tK\nK\x01\x86", {
                    let mut p = b"QK\x00".to_vec();
                    p.extend(binint(200_000));
                    p.extend(binint(200_000));
                    p.extend(b"\x86q\tK\x00K\x00\x86");
                    p
                }),
            ),
            "tensor `stem.weight` has shape [200000, 200000], the model needs [16, 10]",
        ),
        // The right shape, but strides that reach past the storage.
        (
            edited_fixture(d, "strides.pt", pickle_edit(b"q\tK\nK\x01\x86", b"q\tM\xe8\x03K\x01\x86".to_vec())),
            "tensor `stem.weight` (shape [16, 10], strides [1000, 1], offset 0) reaches past its storage of 160 elements",
        ),
        // A storage declared with a million elements; the archive holds 640 bytes for it.
        (
            edited_fixture(d, "declared.pt", pickle_edit(b"K\xa0t", [binint(1_000_000), b"t".to_vec()].concat())),
            "declares 1000000 float32 elements (4000000 bytes), the archive holds 640 bytes",
        ),
        // A storage file cut short of what the pickle declares.
        (
            edited_fixture(d, "cut_storage.pt", |e, b| Some(if e.ends_with("/data/0") { b[..100].to_vec() } else { b })),
            "declares 160 float32 elements (640 bytes), the archive holds 100 bytes",
        ),
        // A storage file missing from the archive.
        (edited_fixture(d, "no_storage.pt", |e, b| (!e.ends_with("/data/0")).then_some(b)), "is missing from the archive"),
        // A string that declares 4 GB.
        (edited_fixture(d, "long_string.pt", pickle_of(b"\x80\x02X\xf0\xff\xff\xffabc.".to_vec())), "declares 4294967280 bytes, 4 remain"),
        // A million nested tuples: no recursion, so no stack overflow.
        (
            edited_fixture(d, "deep.pt", pickle_of([&b"\x80\x02"[..], &vec![b'('; 1_000_000][..], &vec![b't'; 1_000_000][..], &b"."[..]].concat())),
            "the pickled object is not a dict",
        ),
        // One list referenced a million times from the memo: an index each, never a copy.
        (
            edited_fixture(
                d,
                "memo.pt",
                pickle_of(
                    [&b"\x80\x02}q\x00X\x01\x00\x00\x00a](K\x01K\x02eq\x010]("[..], &b"h\x01".repeat(1_000_000)[..], &b"es."[..]]
                        .concat(),
                ),
            ),
            "no tensor in it",
        ),
        // Code a pickle would run on load in Python: not run, and not a state dict.
        (edited_fixture(d, "code.pt", pickle_of(b"\x80\x02cos\nsystem\nX\x02\x00\x00\x00ls\x85R.".to_vec())), "not a dict"),
        // An opcode torch.save never writes.
        (edited_fixture(d, "opcode.pt", pickle_of(b"\x80\x02I1\n.".to_vec())), "opcode 0x49"),
        // A TorchScript archive.
        (edited_fixture(d, "script.pt", |e, b| (!e.ends_with("data.pkl")).then_some(b)), "without the <name>/data.pkl"),
    ];
    std::fs::write(d.join("legacy.pt"), b"\x80\x02\x8a\x0alz\xfc\x9cF\xf9 j\xa8P\x19.").unwrap();
    cases.push((d.join("legacy.pt"), "the legacy format"));
    std::fs::write(d.join("text.pt"), b"stem.weight = [1, 2, 3]\n").unwrap();
    cases.push((d.join("text.pt"), "not a torch.save file"));
    for (path, want) in &cases {
        let err = import_pytorch(tiny(16).init::<B>(10, 5, &dev), path).unwrap_err().to_string();
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(err.contains(name), "{name}: the error names the file: {err}");
        assert!(err.contains(want), "{name}: expected '{want}' in: {err}");
    }
}

/// What torch.save writes for float16, bfloat16 and float64 weights, and a weight saved as a
/// strided view, import as the same values.
#[test]
fn pytorch_views_and_other_float_types_import() {
    let dev = device::dispatch_device(&device::Target::Cpu).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let reference = import_pytorch(tiny(16).init::<B>(10, 5, &dev), &fixture("tiny_reference.pt")).unwrap();
    let want = parameter_shapes(&reference);
    // stem.weight stored transposed: a [10, 16] storage viewed with strides (1, 16).
    let transposed = edited_fixture(dir.path(), "view.pt", |e, b| {
        if e.ends_with("/data/0") {
            let v: Vec<f32> = b.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
            Some((0..160).flat_map(|i| v[(i % 16) * 10 + i / 16].to_le_bytes()).collect())
        } else {
            pickle_edit(b"q\tK\nK\x01\x86", b"q\tK\x01K\x10\x86".to_vec())(e, b)
        }
    });
    let viewed = import_pytorch(tiny(16).init::<B>(10, 5, &dev), &transposed).unwrap();
    assert_eq!(bundle::weights::fingerprint(&viewed), bundle::weights::fingerprint(&reference));
    // Every storage as float64: the same values (they are f32 values, exactly representable).
    let f64_file = edited_fixture(dir.path(), "f64.pt", |e, b| {
        if e.contains("/data/") && !e.ends_with(".pkl") {
            Some(b.chunks(4).flat_map(|c| (f32::from_le_bytes(c.try_into().unwrap()) as f64).to_le_bytes()).collect())
        } else {
            pickle_edit(b"ctorch\nFloatStorage\n", b"ctorch\nDoubleStorage\n".to_vec())(e, b)
        }
    });
    let wide = import_pytorch(tiny(16).init::<B>(10, 5, &dev), &f64_file).unwrap();
    assert_eq!(bundle::weights::fingerprint(&wide), bundle::weights::fingerprint(&reference));
    assert_eq!(parameter_shapes(&wide), want);
}
