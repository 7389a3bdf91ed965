//! Model tests on the real CPU backend (Burn Flex through `Dispatch`).

use burn::backend::Autodiff;
use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::{Bool, Distribution, FloatDType, Int, Tensor, TensorData};
use models::common::CausalDepthwiseConv;
use models::precision::cast_for_compute;
use models::{ConvTransformerConfig, GruModelConfig, ModelConfig, ModelError, SignModel, TransformerConfig};

type B = device::Backend;
type AD = Autodiff<device::Backend>;

fn dev() -> device::DispatchDevice {
    device::dispatch_device(&device::Target::Cpu).unwrap()
}

fn small_configs() -> Vec<ModelConfig> {
    vec![
        ModelConfig::ConvTransformer(ConvTransformerConfig { dim: 32, kernel: 5, heads: 4, ..Default::default() }),
        ModelConfig::Transformer(TransformerConfig { dim: 32, layers: 2, heads: 4, ff_dim: 64, ..Default::default() }),
        ModelConfig::Gru(GruModelConfig { hidden: 24, ..Default::default() }),
    ]
}

fn mask(lengths: &[usize], frames: usize) -> Tensor<B, 2, Bool> {
    let v: Vec<bool> = lengths.iter().flat_map(|&l| (0..frames).map(move |t| t >= l)).collect();
    Tensor::from_data(TensorData::new(v, [lengths.len(), frames]), &dev())
}

fn values<const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    t.into_data().convert::<f32>().to_vec::<f32>().unwrap()
}

#[test]
fn every_model_gives_batch_by_classes_logits_for_all_sizes() {
    for cfg in small_configs() {
        let model = cfg.init::<B>(12, 7, &dev());
        for (batch, frames) in [(1, 1), (1, 9), (3, 1), (4, 20), (2, 64)] {
            let x = Tensor::<B, 3>::random([batch, frames, 12], Distribution::Normal(0.0, 1.0), &dev());
            let lengths: Vec<usize> = (0..batch).map(|b| frames - (b % frames.max(1)).min(frames - 1)).collect();
            let logits = model.try_forward(x, mask(&lengths, frames)).unwrap();
            assert_eq!(logits.dims(), [batch, 7], "{} at batch {batch}, frames {frames}", cfg.kind());
            assert!(values(logits).iter().all(|v| v.is_finite()), "{}", cfg.kind());
        }
    }
}

#[test]
fn logits_do_not_change_when_padding_is_appended() {
    for cfg in small_configs() {
        let model = cfg.init::<B>(12, 7, &dev());
        let x = Tensor::<B, 3>::random([1, 10, 12], Distribution::Normal(0.0, 1.0), &dev());
        let base = values(model.forward(x.clone(), mask(&[10], 10)));
        for pad in [1, 6, 30] {
            // Padding frames hold garbage, not zeros: the mask alone must hide them.
            let junk = Tensor::<B, 3>::random([1, pad, 12], Distribution::Normal(5.0, 3.0), &dev());
            let padded = Tensor::cat(vec![x.clone(), junk], 1);
            let out = values(model.forward(padded, mask(&[10], 10 + pad)));
            let diff = base.iter().zip(&out).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(diff < 1e-4, "{}: padding {pad} changed logits by {diff}", cfg.kind());
        }
        // A batch mixing lengths gives each sequence its own logits.
        let other = Tensor::<B, 3>::random([1, 16, 12], Distribution::Normal(0.0, 1.0), &dev());
        let short = Tensor::cat(vec![x.clone(), Tensor::zeros([1, 6, 12], &dev())], 1);
        let both = values(model.forward(Tensor::cat(vec![short, other], 0), mask(&[10, 16], 16)));
        let diff = base.iter().zip(&both[..7]).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(diff < 1e-4, "{}: batching changed logits by {diff}", cfg.kind());
    }
}

#[test]
fn depthwise_conv_is_causal() {
    let conv = CausalDepthwiseConv::<B>::new(6, 5, &dev());
    let x = Tensor::<B, 3>::random([2, 6, 12], Distribution::Normal(0.0, 1.0), &dev());
    let base = values(conv.forward(x.clone()));
    // Change frame 7 only: outputs before it must not move, outputs 7..=11 do.
    let bump =
        Tensor::<B, 3>::zeros([2, 6, 12], &dev()).slice_assign([0..2, 0..6, 7..8], Tensor::ones([2, 6, 1], &dev()));
    let out = values(conv.forward(x + bump));
    for b in 0..2 {
        for c in 0..6 {
            for t in 0..12 {
                let i = (b * 6 + c) * 12 + t;
                if t < 7 {
                    assert_eq!(base[i], out[i], "frame {t} saw the future");
                }
            }
        }
    }
    assert_ne!(base, out);
}

#[test]
fn reference_conv_transformer_has_the_published_parameter_count() {
    let model = ModelConfig::default().init::<B>(469, 250, &dev());
    // Trainable parameters: 1,784,152, as an independent PyTorch implementation counts them.
    assert_eq!(models::trainable_params(&model), 1_784_152);
    // Keras (and Burn's num_params) also count BatchNorm running mean/variance: 5 BN of 192 and
    // 6 of 384 channels.
    let bn_stats = 2 * (5 * 192 + 6 * 384);
    assert_eq!(model.num_params(), 1_784_152 + bn_stats);
    assert_eq!(model.num_params(), 1_790_680);
    assert_eq!((model.input_features(), model.classes()), (469, 250));
}

struct GradCheck<'a> {
    grads: &'a burn::optim::GradientsParams,
    total: usize,
    missing: Vec<String>,
    zero: usize,
    field: String,
}

impl ModuleVisitor<AD> for GradCheck<'_> {
    fn enter_module(&mut self, name: &str, _container: &str) {
        self.field = name.to_string();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<AD, D>>) {
        // BatchNorm running statistics are state, not parameters: they get no gradient.
        if self.field == "running_mean" || self.field == "running_var" {
            return;
        }
        self.total += 1;
        match self.grads.get::<device::Backend, D>(param.id) {
            None => self.missing.push(format!("{:?} {:?}", param.id, param.val().dims())),
            Some(g) => {
                if g.abs().max().into_scalar() == 0.0 {
                    self.zero += 1;
                }
            }
        }
    }
}

#[test]
fn gradients_reach_every_parameter() {
    let configs = vec![
        ModelConfig::ConvTransformer(ConvTransformerConfig {
            dim: 32,
            kernel: 5,
            drop_path: 0.0,
            attention_dropout: 0.0,
            ..Default::default()
        }),
        ModelConfig::Transformer(TransformerConfig {
            dim: 32,
            layers: 2,
            ff_dim: 64,
            dropout: 0.0,
            ..Default::default()
        }),
        ModelConfig::Gru(GruModelConfig { hidden: 16, dropout: 0.0 }),
    ];
    for cfg in configs {
        let model: SignModel<AD> = cfg.init(12, 5, &dev());
        let x = Tensor::<AD, 3>::random([4, 9, 12], Distribution::Normal(0.0, 1.0), &dev());
        let m = Tensor::<AD, 2, Bool>::from_data(
            TensorData::new((0..36).map(|i| i % 9 >= 9 - i / 9).collect::<Vec<_>>(), [4, 9]),
            &dev(),
        );
        let labels = Tensor::<AD, 1, Int>::from_data(TensorData::new(vec![0i64, 1, 2, 3], [4]), &dev());
        let logits = model.forward(x, m);
        let loss = burn::nn::loss::CrossEntropyLossConfig::new().init(&dev()).forward(logits, labels);
        let grads = burn::optim::GradientsParams::from_grads(loss.backward(), &model);
        let mut check = GradCheck { grads: &grads, total: 0, missing: vec![], zero: 0, field: String::new() };
        model.visit(&mut check);
        assert!(check.total > 5, "{}: only {} params", cfg.kind(), check.total);
        assert!(check.missing.is_empty(), "{}: no gradient for {:?}", cfg.kind(), check.missing);
        assert_eq!(check.zero, 0, "{}: {} params got an all-zero gradient", cfg.kind(), check.zero);
    }
}

#[test]
fn half_precision_forward_agrees_with_f32() {
    for dtype in [FloatDType::F16, FloatDType::BF16] {
        for cfg in small_configs() {
            let model = cfg.init::<B>(12, 7, &dev());
            let model = model.map(&mut models::precision::Materialize);
            let x = Tensor::<B, 3>::random([3, 16, 12], Distribution::Normal(0.0, 1.0), &dev());
            let m = mask(&[16, 10, 3], 16);
            let reference = values(model.forward(x.clone(), m.clone()));
            let half = cast_for_compute(model, dtype);
            let out = half.forward(x.cast(dtype), m);
            assert_eq!(out.dtype(), burn::tensor::DType::from(dtype), "{}", cfg.kind());
            let out = values(out.cast(FloatDType::F32));
            let scale = reference.iter().map(|v| v.abs()).fold(0f32, f32::max).max(1.0);
            let diff = reference.iter().zip(&out).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            let tol = if dtype == FloatDType::F16 { 0.02 } else { 0.1 };
            assert!(diff <= tol * scale, "{} in {dtype:?}: max diff {diff} (scale {scale})", cfg.kind());
        }
    }
}

#[test]
fn bad_inputs_and_configs_are_errors_not_panics() {
    let model = small_configs()[0].init::<B>(12, 7, &dev());
    let x = Tensor::<B, 3>::zeros([2, 5, 11], &dev());
    assert_eq!(model.try_forward(x, mask(&[5, 5], 5)).unwrap_err(), ModelError::Features { expected: 12, found: 11 });
    let x = Tensor::<B, 3>::zeros([2, 5, 12], &dev());
    let err = model.try_forward(x, mask(&[5, 5, 5], 5)).unwrap_err();
    assert_eq!(err.to_string(), "pad mask has shape [3, 5], expected [batch, time] = [2, 5] to match the input");
    let t = TransformerConfig { dim: 16, heads: 2, layers: 1, ff_dim: 16, max_frames: 8, ..Default::default() };
    let model = ModelConfig::Transformer(t).init::<B>(12, 3, &dev());
    let err = model.try_forward(Tensor::zeros([1, 9, 12], &dev()), mask(&[9], 9)).unwrap_err();
    assert_eq!(err.to_string(), "input has 9 frames, more than this model supports (8)");

    let err = ModelConfig::ConvTransformer(ConvTransformerConfig { dim: 30, heads: 4, ..Default::default() })
        .validate()
        .unwrap_err();
    assert_eq!(err.to_string(), "model config `model.heads`: dim (30) must be a positive multiple of heads (4)");
    let err = ModelConfig::Gru(GruModelConfig { hidden: 8, dropout: 1.5 }).validate().unwrap_err();
    assert_eq!(err.to_string(), "model config `model.dropout`: must be in [0, 1), got 1.5");
}

#[test]
fn model_config_is_a_tagged_enum() {
    let cfg: ModelConfig = serde_json::from_str(r#"{"kind": "gru", "hidden": 64}"#).unwrap();
    assert_eq!(cfg, ModelConfig::Gru(GruModelConfig { hidden: 64, ..Default::default() }));
    let cfg: ModelConfig = serde_json::from_str(r#"{"kind": "conv_transformer"}"#).unwrap();
    assert_eq!(cfg, ModelConfig::default());
    let err = serde_json::from_str::<ModelConfig>(r#"{"kind": "gru", "hiden": 64}"#).unwrap_err().to_string();
    assert!(err.contains("unknown field `hiden`"), "{err}");
    let err = serde_json::from_str::<ModelConfig>(r#"{"kind": "lstm"}"#).unwrap_err().to_string();
    assert!(err.contains("unknown variant `lstm`"), "{err}");
}

#[test]
fn late_dropout_only_acts_when_enabled() {
    let cfg = ModelConfig::ConvTransformer(ConvTransformerConfig {
        dim: 16,
        heads: 2,
        kernel: 3,
        drop_path: 0.0,
        attention_dropout: 0.0,
        late_dropout: 0.5,
        ..Default::default()
    });
    let mut model: SignModel<AD> = cfg.init(6, 3, &dev());
    let x = Tensor::<AD, 3>::random([8, 5, 6], Distribution::Normal(0.0, 1.0), &dev());
    let m = Tensor::<AD, 2, Bool>::from_data(TensorData::new(vec![false; 40], [8, 5]), &dev());
    let read = |t: Tensor<AD, 2>| t.into_data().to_vec::<f32>().unwrap();
    let a = read(model.forward(x.clone(), m.clone()));
    let b = read(model.forward(x.clone(), m.clone()));
    // BatchNorm in training mode is deterministic for a fixed batch; without late dropout the
    // two passes agree, with it they do not.
    assert_eq!(a, b);
    model.set_late_dropout(true);
    let c = read(model.forward(x, m));
    assert_ne!(a, c);
}
