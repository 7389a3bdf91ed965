//! Model tests on the real CPU backend (Burn Flex through `Dispatch`).

use burn::backend::Autodiff;
use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::{Bool, Distribution, FloatDType, Int, Tensor, TensorData};
use models::common::CausalDepthwiseConv;
use models::precision::cast_for_compute;
use models::{
    ConvTransformerConfig, GruModelConfig, ModelConfig, ModelError, SignModel, TransformerConfig, MAX_FRAMES_LIMIT,
};

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
    // Rows of [batch 2, 12 frames, 6 channels].
    let conv = CausalDepthwiseConv::<B>::new(6, 5, &dev());
    let x = Tensor::<B, 3>::random([2, 12, 6], Distribution::Normal(0.0, 1.0), &dev());
    let base = values(conv.forward(x.clone().reshape([24, 6]), 12));
    // Change frame 7 only: outputs before it must not move, outputs 7..=11 do.
    let bump =
        Tensor::<B, 3>::zeros([2, 12, 6], &dev()).slice_assign([0..2, 7..8, 0..6], Tensor::ones([2, 1, 6], &dev()));
    let out = values(conv.forward((x + bump).reshape([24, 6]), 12));
    for b in 0..2 {
        for t in 0..12 {
            for c in 0..6 {
                let i = (b * 12 + t) * 6 + c;
                if t < 7 {
                    assert_eq!(base[i], out[i], "frame {t} saw the future");
                } else if t < 12 {
                    assert_ne!(base[i], out[i], "frame {t} did not see frame 7");
                }
            }
        }
    }
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

/// The lower bound a bundle's weights file is checked against never exceeds the real count,
/// whatever the sizes: a GRU of 32 hidden units over 708 features (bound 68,160 where the model
/// has 35,750) once made its own bundle unloadable.
#[test]
fn the_parameter_lower_bound_holds_for_every_architecture_and_size() {
    let mut configs = small_configs();
    configs.extend([
        ModelConfig::default(),
        ModelConfig::Gru(GruModelConfig { hidden: 32, ..Default::default() }),
        ModelConfig::Gru(GruModelConfig::default()),
        ModelConfig::Transformer(TransformerConfig::default()),
    ]);
    for cfg in configs {
        for (features, classes) in [(8, 3), (708, 6), (469, 250)] {
            let model = cfg.init::<B>(features, classes, &dev());
            let (bound, real) = (cfg.min_params(features, classes), models::trainable_params(&model) as u128);
            assert!(
                bound <= real,
                "{}: bound {bound} > {real} parameters ({features} features, {classes} classes)",
                cfg.kind()
            );
            assert!(bound * 3 >= real, "{}: bound {bound} is far below {real}", cfg.kind());
        }
    }
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
    // What Burn's sinusoidal encoding refuses (with a panic) is refused by validation; its limit builds.
    let t = |dim, max_frames| {
        ModelConfig::Transformer(TransformerConfig { dim, heads: 3, max_frames, ..Default::default() })
    };
    assert_eq!(
        t(15, 8).validate().unwrap_err().to_string(),
        "model config `model.dim`: must be even (the sinusoidal positional encoding), got 15"
    );
    let err = t(18, MAX_FRAMES_LIMIT + 1).validate().unwrap_err().to_string();
    assert_eq!(err, "model config `model.max_frames`: 10001 is above the limit of 10000");
    t(18, MAX_FRAMES_LIMIT).validate().unwrap();
    let _ = t(18, MAX_FRAMES_LIMIT).init::<B>(12, 3, &dev());
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

// ---- Custom kernels (models::kernels) against the straightforward Burn formulation ----------

fn close(name: &str, got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "{name}: length");
    let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(1e-3);
    let worst = got.iter().zip(want).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    assert!(worst <= tol * scale, "{name}: max |diff| {worst} > {tol} x {scale}");
    assert!(got.iter().all(|v| v.is_finite()), "{name}: non-finite values");
}

fn ad_values<const D: usize>(t: Tensor<AD, D>) -> Vec<f32> {
    values(t.inner())
}

fn grad_values<const D: usize>(
    t: &Tensor<AD, D>,
    grads: &<AD as burn::tensor::backend::AutodiffBackend>::Gradients,
) -> Vec<f32> {
    values(t.grad(grads).expect("gradient reached the input"))
}

fn rand_ad<const D: usize>(shape: [usize; D]) -> Tensor<AD, D> {
    Tensor::<AD, D>::random(shape, Distribution::Normal(0.0, 1.0), &dev()).require_grad()
}

/// A fixed random projection of the output, so the upstream gradient is not uniform.
fn probe<const D: usize>(y: Tensor<AD, D>, seed_shape: [usize; D]) -> Tensor<AD, 1> {
    let w = Tensor::<AD, D>::from_data(
        TensorData::new(
            (0..seed_shape.iter().product::<usize>())
                .map(|i| ((i * 7919 % 97) as f32 / 97.0) - 0.5)
                .collect::<Vec<_>>(),
            seed_shape,
        ),
        &dev(),
    );
    (y * w).sum()
}

#[test]
fn causal_dwconv_kernel_matches_burn_conv1d_forward_and_backward() {
    use models::kernels::{ops, reference};
    // Shapes: batch 1 (streaming), a sequence shorter than the kernel, the reference block size.
    for [b, t, c, k] in [[1, 9, 5, 3], [3, 4, 8, 7], [2, 64, 384, 17]] {
        let x = rand_ad([b, t, c]);
        let w = rand_ad([c, k]);
        // The op takes rows and the depthwise `Conv1d`'s own weight shape.
        let ours =
            ops::causal_dwconv(x.clone().reshape([b * t, c]), w.clone().reshape([c, 1, k]), t).reshape([b, t, c]);
        let g1 = probe(ours.clone(), [b, t, c]).backward();
        let (x2, w2) = (x.clone().detach().require_grad(), w.clone().detach().require_grad());
        let theirs = reference::causal_dwconv(x2.clone(), w2.clone());
        let g2 = probe(theirs.clone(), [b, t, c]).backward();
        let name = format!("dwconv b{b} t{t} c{c} k{k}");
        close(&format!("{name} forward"), &ad_values(ours), &ad_values(theirs), 1e-5);
        close(&format!("{name} dx"), &grad_values(&x, &g1), &grad_values(&x2, &g2), 1e-5);
        close(&format!("{name} dw"), &grad_values(&w, &g1), &grad_values(&w2, &g2), 1e-4);
        // The closed-form backward used off the CPU (tensor ops) agrees too.
        let gy = Tensor::<B, 3>::random([b, t, c], Distribution::Normal(0.0, 1.0), &dev());
        let (gx_ref, gw_ref) = reference::causal_dwconv_backward(x.clone().inner(), w.clone().inner(), gy.clone());
        let (x3, w3) = (x.clone().detach().require_grad(), w.clone().detach().require_grad());
        let y3 = reference::causal_dwconv(x3.clone(), w3.clone());
        let g3 = (y3 * Tensor::<AD, 3>::from_inner(gy)).sum().backward();
        close(&format!("{name} closed-form dx"), &values(gx_ref), &grad_values(&x3, &g3), 1e-5);
        close(&format!("{name} closed-form dw"), &values(gw_ref), &grad_values(&w3, &g3), 1e-4);
        // The conv of SiLU as one op (its own backward) against SiLU and the conv as two.
        let ours = ops::silu_dwconv(x.clone().reshape([b * t, c]), w.clone().reshape([c, 1, k]), t);
        let g4 = probe(ours.clone().reshape([b, t, c]), [b, t, c]).backward();
        let (x5, w5) = (x.clone().detach().require_grad(), w.clone().detach().require_grad());
        let two = ops::causal_dwconv(ops::silu(x5.clone().reshape([b * t, c])), w5.clone().reshape([c, 1, k]), t);
        let g5 = probe(two.clone().reshape([b, t, c]), [b, t, c]).backward();
        close(&format!("silu {name} forward"), &ad_values(ours), &ad_values(two), 1e-6);
        close(&format!("silu {name} dx"), &grad_values(&x, &g4), &grad_values(&x5, &g5), 1e-6);
        close(&format!("silu {name} dw"), &grad_values(&w, &g4), &grad_values(&w5, &g5), 1e-6);
    }
}

#[test]
fn eca_and_fused_attention_closed_forms_match_autodiff_and_the_layers() {
    use models::kernels::{ops, reference};
    // ECA: the closed-form gradients against autodiff of the tensor-op formulation, which itself
    // equals the layer's own (mean over valid frames, Burn's Conv1d, sigmoid gate).
    for [b, t, c, k] in [[1, 1, 3, 3], [3, 7, 20, 5], [2, 16, 384, 5]] {
        let x = rand_ad([b, t, c]);
        let lengths: Vec<usize> = (0..b).map(|i| t - (i % t)).collect();
        let m = models::common::FrameMask::<AD>::new(Tensor::from_inner(mask(&lengths, t)), burn::tensor::DType::F32);
        let eca = models::common::Eca::<AD>::new(k, &dev());
        let w = eca.conv.weight.val();
        let layer = eca.forward(x.clone().reshape([b * t, c]), &m).reshape([b, t, c]);
        let y = reference::eca(x.clone(), m.mean_weights.clone(), w.clone());
        let name = format!("eca b{b} t{t} c{c} k{k}");
        close(&format!("{name} forward"), &ad_values(y.clone()), &ad_values(layer), 1e-6);
        let gy = Tensor::<B, 3>::random([b, t, c], Distribution::Normal(0.0, 1.0), &dev());
        let g = (y * Tensor::<AD, 3>::from_inner(gy.clone())).sum().backward();
        let (gx, gw) =
            reference::eca_backward(x.clone().inner(), m.mean_weights.clone().inner(), w.clone().inner(), gy);
        close(&format!("{name} closed-form dx"), &values(gx), &grad_values(&x, &g), 1e-5);
        close(&format!("{name} closed-form dw"), &values(gw), &grad_values(&w, &g), 1e-4);
    }
    // Attention from one fused projection: scores and values against the per-part products, and
    // their closed-form gradients against autodiff.
    for [b, t, h, hd] in [[1, 1, 1, 4], [3, 5, 2, 3], [2, 16, 4, 48]] {
        let d = h * hd;
        let qkv = rand_ad([b * t, 3 * d]);
        let q = qkv.clone().narrow(1, 0, d).reshape([b, t, d]);
        let k = qkv.clone().narrow(1, d, d).reshape([b, t, d]);
        let scores =
            ops::split_heads(q, h).matmul(ops::split_heads_transposed(k, h)).mul_scalar(1.0 / (hd as f64).sqrt());
        let ours = reference::attention_scores(qkv.clone(), b, h);
        let name = format!("attention b{b} t{t} h{h} hd{hd}");
        close(&format!("{name} scores"), &ad_values(ours.clone()), &ad_values(scores), 1e-5);
        let attn = Tensor::<AD, 4>::random([b, h, t, t], Distribution::Uniform(0.0, 1.0), &dev()).require_grad();
        let out = reference::attention_values(attn.clone(), qkv.clone());
        let v = qkv.clone().narrow(1, 2 * d, d).reshape([b, t, d]);
        let want = ops::merge_heads(attn.clone().matmul(ops::split_heads(v, h))).reshape([b * t, d]);
        close(&format!("{name} values"), &ad_values(out.clone()), &ad_values(want), 1e-5);
        let gs = Tensor::<B, 4>::random([b, h, t, t], Distribution::Normal(0.0, 1.0), &dev());
        let go = Tensor::<B, 2>::random([b * t, d], Distribution::Normal(0.0, 1.0), &dev());
        let g = (ours * Tensor::<AD, 4>::from_inner(gs.clone())).sum().backward();
        let closed = reference::attention_scores_backward(qkv.clone().inner(), gs);
        close(&format!("{name} closed-form scores dqkv"), &values(closed), &grad_values(&qkv, &g), 1e-5);
        let g = (out * Tensor::<AD, 2>::from_inner(go.clone())).sum().backward();
        let (ga, gq) = reference::attention_values_backward(attn.clone().inner(), qkv.clone().inner(), go);
        close(&format!("{name} closed-form values dattn"), &values(ga), &grad_values(&attn, &g), 1e-5);
        close(&format!("{name} closed-form values dqkv"), &values(gq), &grad_values(&qkv, &g), 1e-5);
    }
}

/// `n` fixed values spread over `center +- width` (a hash of the index and `salt`).
fn spread(n: usize, center: f32, width: f32, salt: usize) -> Vec<f32> {
    (0..n).map(|i| center + width * (((i * 7919 + salt * 104729) % 1009) as f32 / 504.5 - 1.0)).collect()
}

#[test]
fn channel_norm_kernel_matches_burn_batch_norm_and_updates_running_stats_the_same() {
    use burn::nn::BatchNormConfig;
    use models::common::ChannelNorm;
    for [b, t, c] in [[1, 1, 3], [2, 5, 7], [64, 64, 384]] {
        let ours = ChannelNorm::<AD>::new(c, 0.05, &dev());
        // Non-trivial affine parameters, the same in both.
        // Fixed values, so the figures do not depend on the test order (the RNG is global).
        let gamma = Tensor::<AD, 1>::from_data(TensorData::new(spread(c, 1.0, 0.5, 1), [c]), &dev());
        let beta = Tensor::<AD, 1>::from_data(TensorData::new(spread(c, 0.0, 1.0, 2), [c]), &dev());
        let ours = ChannelNorm {
            bn: burn::nn::BatchNorm {
                gamma: burn::module::Param::from_tensor(gamma.clone()),
                beta: burn::module::Param::from_tensor(beta.clone()),
                ..ours.bn
            },
            folded: false,
        };
        let theirs = BatchNormConfig::new(c).with_momentum(0.05).init::<AD>(&dev());
        let theirs = burn::nn::BatchNorm {
            gamma: burn::module::Param::from_tensor(gamma),
            beta: burn::module::Param::from_tensor(beta),
            ..theirs
        };
        let x = Tensor::<AD, 3>::from_data(TensorData::new(spread(b * t * c, 3.0, 2.0, 3), [b, t, c]), &dev())
            .require_grad();
        let y1 = ours.forward(x.clone().reshape([b * t, c])).reshape([b, t, c]);
        let g1 = probe(y1.clone(), [b, t, c]).backward();
        let x2 = x.clone().detach().require_grad();
        let y2 = theirs.forward(x2.clone().reshape([b * t, c])).reshape([b, t, c]);
        let g2 = probe(y2.clone(), [b, t, c]).backward();
        let name = format!("norm b{b} t{t} c{c}");
        // One row: zero variance, so the output is beta and any rounding in the mean is
        // multiplied by 1/sqrt(eps) = 316 (one ulp of x ~ 5e-7 -> ~2e-4).
        let tol = if b * t == 1 { 1e-3 } else { 1e-4 };
        close(&format!("{name} forward"), &ad_values(y1), &ad_values(y2), tol);
        close(&format!("{name} dx"), &grad_values(&x, &g1), &grad_values(&x2, &g2), 1e-4);
        close(
            &format!("{name} dgamma"),
            &grad_values(&ours.bn.gamma.val(), &g1),
            &grad_values(&theirs.gamma.val(), &g2),
            1e-4,
        );
        close(
            &format!("{name} dbeta"),
            &grad_values(&ours.bn.beta.val(), &g1),
            &grad_values(&theirs.beta.val(), &g2),
            1e-4,
        );
        close(
            &format!("{name} running mean"),
            &values(ours.bn.running_mean.value().inner()),
            &values(theirs.running_mean.value().inner()),
            1e-5,
        );
        close(
            &format!("{name} running var"),
            &values(ours.bn.running_var.value().inner()),
            &values(theirs.running_var.value().inner()),
            1e-5,
        );
        // Inference with those running statistics: Burn's formulation, the same values.
        use burn::module::AutodiffModule;
        let (ours, theirs) = (ours.valid(), theirs.valid());
        let rows = x.inner().reshape([b * t, c]);
        close(&format!("{name} inference"), &values(ours.forward(rows.clone())), &values(theirs.forward(rows)), 1e-6);
    }
    // The closed-form backward used off the CPU agrees with autodiff through the tensor-op norm.
    use models::kernels::reference;
    let x = Tensor::<B, 2>::random([50, 6], Distribution::Normal(1.0, 3.0), &dev());
    let gamma = Tensor::<B, 1>::random([6], Distribution::Uniform(0.5, 1.5), &dev());
    let gy = Tensor::<B, 2>::random([50, 6], Distribution::Normal(0.0, 1.0), &dev());
    let stats = reference::channel_stats(x.clone());
    let (gx, gg, _) = reference::channel_norm_backward(x.clone(), stats, gamma.clone(), gy.clone());
    let xa = Tensor::<AD, 2>::from_inner(x).require_grad();
    let ga = Tensor::<AD, 1>::from_inner(gamma).require_grad();
    let y = reference::channel_norm(
        xa.clone(),
        reference::channel_stats(xa.clone()),
        ga.clone(),
        Tensor::zeros([6], &dev()),
    );
    let g = (y * Tensor::<AD, 2>::from_inner(gy)).sum().backward();
    close("closed-form norm dx", &values(gx), &grad_values(&xa, &g), 1e-4);
    close("closed-form norm dgamma", &values(gg), &grad_values(&ga, &g), 1e-4);
}

#[test]
fn attention_and_gate_kernels_match_the_tensor_op_formulations() {
    use models::kernels::{ops, reference};
    // SiLU (rank 2 and 3, positive and negative inputs, large magnitudes)
    for shape in [[4, 6, 5], [1, 1, 3], [64, 64, 384]] {
        let x = (rand_ad(shape) * 4.0).detach().require_grad();
        let y1 = ops::silu(x.clone());
        let g1 = probe(y1.clone(), shape).backward();
        let x2 = x.clone().detach().require_grad();
        let y2 = burn::tensor::activation::silu(x2.clone());
        let g2 = probe(y2.clone(), shape).backward();
        close(&format!("silu {shape:?} forward"), &ad_values(y1), &ad_values(y2), 1e-6);
        close(&format!("silu {shape:?} dx"), &grad_values(&x, &g1), &grad_values(&x2, &g2), 1e-5);
        let gy = Tensor::<B, 3>::random(shape, Distribution::Normal(0.0, 1.0), &dev());
        let closed = reference::silu_backward(x.clone().inner(), gy.clone());
        let x3 = x.clone().detach().require_grad();
        let g3 = (burn::tensor::activation::silu(x3.clone()) * Tensor::<AD, 3>::from_inner(gy)).sum().backward();
        close(&format!("silu {shape:?} closed-form dx"), &values(closed), &grad_values(&x3, &g3), 1e-5);
    }
    let x2d = rand_ad([5, 7]);
    close("silu rank 2", &ad_values(ops::silu(x2d.clone())), &ad_values(burn::tensor::activation::silu(x2d)), 1e-6);

    // scale_channels (ECA gate)
    let (x, gate) = (rand_ad([3, 10, 8]), rand_ad([3, 8]));
    let y1 = ops::scale_channels(x.clone().reshape([30, 8]), gate.clone()).reshape([3, 10, 8]);
    let g1 = probe(y1.clone(), [3, 10, 8]).backward();
    let (x2, gate2) = (x.clone().detach().require_grad(), gate.clone().detach().require_grad());
    let y2 = reference::scale_channels(x2.clone(), gate2.clone());
    let g2 = probe(y2.clone(), [3, 10, 8]).backward();
    close("scale forward", &ad_values(y1), &ad_values(y2), 1e-6);
    close("scale dx", &grad_values(&x, &g1), &grad_values(&x2, &g2), 1e-6);
    close("scale dgate", &grad_values(&gate, &g1), &grad_values(&gate2, &g2), 1e-5);

    // key-biased softmax with a padding bias
    let s = rand_ad([2, 3, 5, 6]);
    let bias_host: Vec<f32> = (0..12).map(|i| if i % 6 >= 4 && i >= 6 { -1e4 } else { 0.0 }).collect();
    let bias = Tensor::<AD, 2>::from_data(TensorData::new(bias_host, [2, 6]), &dev());
    let y1 = ops::key_biased_softmax(s.clone(), bias.clone());
    let g1 = probe(y1.clone(), [2, 3, 5, 6]).backward();
    let s2 = s.clone().detach().require_grad();
    let y2 = reference::key_biased_softmax(s2.clone(), bias);
    let g2 = probe(y2.clone(), [2, 3, 5, 6]).backward();
    let probs = ad_values(y1.clone());
    close("softmax forward", &probs, &ad_values(y2), 1e-6);
    close("softmax dscores", &grad_values(&s, &g1), &grad_values(&s2, &g2), 1e-5);
    // Padded keys of sample 1 get no attention; every row sums to 1.
    for row in probs.chunks(6).enumerate().filter(|(i, _)| *i >= 15).map(|(_, r)| r.to_vec()) {
        assert!(row[4] < 1e-6 && row[5] < 1e-6, "padded key attended: {row:?}");
    }
    for row in probs.chunks(6) {
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
    }

    // head split / merge round trip and gradients
    let x = rand_ad([2, 7, 12]);
    let heads = ops::split_heads(x.clone(), 3);
    assert_eq!(heads.dims(), [2, 3, 7, 4]);
    let x2 = x.clone().detach().require_grad();
    close("split heads", &ad_values(heads.clone()), &ad_values(reference::split_heads(x2.clone(), 3)), 0.0);
    let back = ops::merge_heads(heads.clone());
    close("merge heads", &ad_values(back.clone()), &ad_values(x.clone()), 0.0);
    let g1 = probe(back * 2.0, [2, 7, 12]).backward();
    let g2 = probe(reference::merge_heads(reference::split_heads(x2.clone(), 3)) * 2.0, [2, 7, 12]).backward();
    close("split/merge dx", &grad_values(&x, &g1), &grad_values(&x2, &g2), 0.0);

    // keys split and transposed in one contiguous op, and its gradient
    let kt = ops::split_heads_transposed(x.clone(), 3);
    assert_eq!(kt.dims(), [2, 3, 4, 7]);
    let x3 = x.clone().detach().require_grad();
    let kt_ref = reference::split_heads(x3.clone(), 3).swap_dims(2, 3);
    close("split heads transposed", &ad_values(kt.clone()), &ad_values(kt_ref.clone()), 0.0);
    let g1 = probe(kt * 3.0, [2, 3, 4, 7]).backward();
    let g3 = probe(kt_ref * 3.0, [2, 3, 4, 7]).backward();
    close("split heads transposed dx", &grad_values(&x, &g1), &grad_values(&x3, &g3), 0.0);
}

/// Attention dropout on the host is one op whose mask is a hash of (seed, index): its output and
/// gradient equal the softmax times that mask as a constant, through Burn's autodiff; the mask
/// keeps 1 - p of the elements and differs between seeds and between unseeded calls; there is
/// no dropout without autodiff.
#[test]
fn fused_attention_dropout_equals_softmax_times_its_mask() {
    use models::kernels::{dropout_mask, ops, reference};
    let shape = [2, 3, 5, 8];
    let n: usize = shape.iter().product();
    let (prob, seed) = (0.3, 0x0123_4567_89ab_cdef_u64);
    let s = rand_ad(shape);
    let bias_host: Vec<f32> = (0..16).map(|i| if i >= 8 + 5 { -1e4 } else { 0.0 }).collect();
    let bias = Tensor::<AD, 2>::from_data(TensorData::new(bias_host, [2, 8]), &dev());
    let y1 = ops::key_biased_softmax_dropout_seeded(s.clone(), bias.clone(), prob, seed);
    let g1 = probe(y1.clone(), shape).backward();
    let mask_host = dropout_mask(seed, n, prob);
    let mask = Tensor::<AD, 4>::from_data(TensorData::new(mask_host.clone(), shape), &dev());
    let s2 = s.clone().detach().require_grad();
    let y2 = reference::key_biased_softmax(s2.clone(), bias.clone()) * mask;
    let g2 = probe(y2.clone(), shape).backward();
    close("dropout forward", &ad_values(y1.clone()), &ad_values(y2), 1e-6);
    close("dropout dscores", &grad_values(&s, &g1), &grad_values(&s2, &g2), 1e-5);
    let scale = 1.0 / (1.0 - prob as f32);
    assert!(mask_host.iter().all(|&m| m == 0.0 || m == scale), "mask values are 0 or 1/(1-p)");
    let dropped = mask_host.iter().filter(|&&m| m == 0.0).count();
    assert!(dropped > 0 && dropped < n, "some kept, some dropped: {dropped} of {n}");

    // The mask keeps 1 - p of a large tensor and differs between seeds.
    let big = dropout_mask(seed, 1 << 20, 0.2);
    let kept = big.iter().filter(|&&m| m > 0.0).count() as f64 / big.len() as f64;
    assert!((kept - 0.8).abs() < 0.002, "kept fraction {kept}, want 0.8");
    let other = dropout_mask(seed + 1, 1 << 20, 0.2);
    let same = big.iter().zip(&other).filter(|(a, b)| (**a > 0.0) == (**b > 0.0)).count() as f64 / big.len() as f64;
    assert!((same - 0.68).abs() < 0.01, "masks of two seeds agree on {same}, want 0.8^2 + 0.2^2 = 0.68");

    // Unseeded, each call draws a new seed from the backend's random stream (the stream is
    // process-wide and other tests draw from it, so only the mask's form is checked here).
    let probs = values(reference::key_biased_softmax(s.clone().inner(), bias.clone().inner()));
    let draw = || ad_values(ops::key_biased_softmax_dropout(s.clone().detach(), bias.clone(), prob));
    let (a, b) = (draw(), draw());
    for out in [&a, &b] {
        for (o, p) in out.iter().zip(&probs) {
            assert!(*o == 0.0 || (o - p * scale).abs() <= 1e-6 * scale, "dropped output {o} of probability {p}");
        }
    }
    assert_ne!(a, b, "two draws, two masks");

    // Without autodiff (inference) there is no dropout.
    let plain = ops::key_biased_softmax_dropout(s.clone().inner(), bias.clone().inner(), prob);
    close(
        "no dropout at inference",
        &values(plain),
        &values(reference::key_biased_softmax(s.inner(), bias.inner())),
        1e-6,
    );
}

/// The transformer baseline's own forward (linear_rows + kernels) equals Burn's
/// `TransformerEncoder::forward` on the same weights, in value and in every weight gradient.
#[test]
fn transformer_forward_matches_burn_encoder_forward_and_gradients() {
    use burn::nn::transformer::TransformerEncoderInput;
    use models::common::masked_mean;
    let cfg = TransformerConfig { dim: 32, layers: 2, heads: 4, ff_dim: 64, dropout: 0.0, max_frames: 64 };
    let model = cfg.init::<AD>(11, 5, &dev());
    let (b, t) = (3, 12);
    let x = Tensor::<AD, 3>::random([b, t, 11], Distribution::Normal(0.0, 1.0), &dev());
    let pad = Tensor::<AD, 2, Bool>::from_inner(mask(&[12, 7, 1], t));
    let ours = model.forward(x.clone(), pad.clone());
    let burns = {
        let h = model.embed.forward(x);
        let h = h + model.positions.sinusoids.clone().narrow(1, 0, t);
        let h = model.encoder.forward(TransformerEncoderInput::new(h).mask_pad(pad.clone()));
        model.classifier.forward(masked_mean(h, pad))
    };
    close("logits", &ad_values(ours.clone()), &ad_values(burns.clone()), 1e-5);
    let g_ours = probe(ours, [b, 5]).backward();
    let g_burn = probe(burns, [b, 5]).backward();
    let layer = &model.encoder.layers[1];
    for (name, w) in [
        ("query", &layer.mha.query.weight),
        ("key", &layer.mha.key.weight),
        ("value", &layer.mha.value.weight),
        ("output", &layer.mha.output.weight),
        ("ff inner", &layer.pwff.linear_inner.weight),
        ("ff outer", &layer.pwff.linear_outer.weight),
        ("embed", &model.embed.weight),
    ] {
        close(name, &grad_values(&w.val(), &g_ours), &grad_values(&w.val(), &g_burn), 1e-4);
    }
    let norm = &model.encoder.layers[0].norm_2.gamma;
    close("norm gamma", &grad_values(&norm.val(), &g_ours), &grad_values(&norm.val(), &g_burn), 1e-4);
}

// ---- CPU / WGPU parity (the seeds' CPU/GPU drift check) ----------------------------------------

/// The WGPU device (software Vulkan, llvmpipe, in CI), or `None` (skip) on a machine without an
/// adapter. CI sets SIGNFLOW_REQUIRE_WGPU=1, which turns a missing adapter into a failure.
fn wgpu_device() -> Option<device::SelectedDevice> {
    wgpu_devices().map(|(selected, _)| selected)
}

/// [`wgpu_device`], and beside it a second device on the same adapter when it is the machine's
/// only one (llvmpipe in CI), for a test that should run beside the parity test: cubecl gives each
/// device its own server thread and kernel cache, so the two tests compile and run their kernels
/// at the same time instead of queueing on one thread. Elsewhere the selected device itself.
fn wgpu_devices() -> Option<(device::SelectedDevice, device::DispatchDevice)> {
    use burn::backend::wgpu::WgpuDevice;
    let inv = device::probe_for(&device::DeviceSpec::Wgpu(None));
    if inv.wgpu.adapters.is_empty() {
        assert!(std::env::var("SIGNFLOW_REQUIRE_WGPU").is_err(), "SIGNFLOW_REQUIRE_WGPU is set but no WGPU adapter");
        eprintln!("skipped: no WGPU adapter (install mesa-vulkan-drivers libvulkan1)");
        return None;
    }
    let policy = device::SelectionPolicy { allow_software_wgpu: true, ..Default::default() };
    let selected = device::resolve_with(&device::DeviceSpec::Wgpu(None), &policy, &inv).unwrap();
    let beside = match &selected.device {
        device::DispatchDevice::Wgpu(WgpuDevice::Cpu) if inv.wgpu.adapters.len() == 1 => {
            device::DispatchDevice::Wgpu(WgpuDevice::DefaultDevice)
        }
        other => other.clone(),
    };
    Some((selected, beside))
}

/// Every float parameter's gradient, in visit order (BatchNorm running statistics skipped).
struct GradList<'a> {
    grads: &'a burn::optim::GradientsParams,
    field: String,
    out: Vec<(String, Vec<f32>)>,
}

impl ModuleVisitor<AD> for GradList<'_> {
    fn enter_module(&mut self, name: &str, _container: &str) {
        self.field = name.to_string();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<AD, D>>) {
        if self.field == "running_mean" || self.field == "running_var" {
            return;
        }
        let g = self.grads.get::<device::Backend, D>(param.id).expect("every parameter gets a gradient");
        self.out.push((format!("{} {:?}", self.field, param.val().dims()), values(g.cast(FloatDType::F32))));
    }
}

/// The trainable parameters of `model` cast to `dtype` as one flat tensor, and their offsets
/// (what the trainer's optimizer hands `ComputeModel::with_precast` from its flat buffer).
fn precast_of(model: &SignModel<AD>, dtype: FloatDType) -> models::precision::Precast<AD> {
    struct Collect(Vec<Tensor<B, 1>>, Vec<usize>, usize);
    impl burn::module::ModuleVisitor<AD> for Collect {
        fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<Tensor<AD, D>>) {
            let t = param.val();
            if t.is_require_grad() {
                let n = t.shape().num_elements();
                self.0.push(t.inner().reshape([n]));
                self.1.push(self.2);
                self.2 += n;
            }
        }
    }
    let mut c = Collect(Vec::new(), Vec::new(), 0);
    model.visit(&mut c);
    let flat = Tensor::<AD, 1>::from_inner(Tensor::cat(c.0, 0).cast(dtype));
    models::precision::Precast { flat, offsets: c.1 }
}

/// Logits and every parameter gradient of one training-mode forward/backward of `model` on
/// `device` in `dtype` (f32 masters, compute-dtype copy, f32 logits: the training step's path),
/// the copy cast per parameter or, with `precast`, made from one flat cast.
fn logits_and_grads(
    model: &SignModel<AD>,
    device: &device::DispatchDevice,
    dtype: FloatDType,
    precast: bool,
    x: &TensorData,
    lengths: &[usize],
    labels: &[i64],
) -> (Vec<f32>, Vec<(String, Vec<f32>)>) {
    let model = model.clone().fork(device);
    let [b, t, _] = [x.shape[0], x.shape[1], x.shape[2]];
    let inputs = Tensor::<AD, 3>::from_data(x.clone(), device);
    let pad: Vec<bool> = lengths.iter().flat_map(|&l| (0..t).map(move |i| i >= l)).collect();
    let pad = Tensor::<AD, 2, Bool>::from_data(TensorData::new(pad, [b, t]), device);
    let labels = Tensor::<AD, 1, Int>::from_data(TensorData::new(labels.to_vec(), [b]), device);
    let compute = if precast {
        models::precision::ComputeModel::with_precast(model.clone(), precast_of(&model, dtype))
    } else {
        models::precision::ComputeModel::new(model.clone(), dtype)
    };
    let logits = compute.forward(inputs, pad);
    let loss = burn::nn::loss::CrossEntropyLossConfig::new().init(device).forward(logits.clone(), labels);
    let grads = burn::optim::GradientsParams::from_grads(loss.backward(), &model);
    let mut list = GradList { grads: &grads, field: String::new(), out: Vec::new() };
    model.visit(&mut list);
    (ad_values(logits), list.out)
}

/// Largest |a - b| over max |b| (the reference's scale, at least `floor`).
fn rel_diff(got: &[f32], want: &[f32], floor: f32) -> f32 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(floor);
    got.iter().zip(want).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max) / scale
}

/// Dropout-free versions of the three architectures (dropout masks differ between devices).
fn parity_configs() -> Vec<ModelConfig> {
    vec![
        ModelConfig::ConvTransformer(ConvTransformerConfig {
            dim: 32,
            kernel: 5,
            heads: 4,
            drop_path: 0.0,
            attention_dropout: 0.0,
            late_dropout: 0.0,
            ..Default::default()
        }),
        ModelConfig::Transformer(TransformerConfig {
            dim: 32,
            layers: 2,
            heads: 4,
            ff_dim: 64,
            dropout: 0.0,
            ..Default::default()
        }),
        ModelConfig::Gru(GruModelConfig { hidden: 24, dropout: 0.0 }),
    ]
}

// ---- CTC ----

#[derive(serde::Deserialize)]
struct CtcCase {
    batch: usize,
    frames: usize,
    classes: usize,
    logits: Vec<f64>,
    lengths: Vec<usize>,
    targets: Vec<Vec<usize>>,
    loss: Vec<Option<f64>>,
    grad: Option<Vec<f64>>,
}

fn ctc_cases() -> Vec<CtcCase> {
    #[derive(serde::Deserialize)]
    struct File {
        cases: Vec<CtcCase>,
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/tests/fixtures/ctc_torch.json");
    serde_json::from_str::<File>(&std::fs::read_to_string(path).unwrap()).unwrap().cases
}

#[test]
fn ctc_loss_and_gradient_equal_pytorch_and_burn_nn() {
    let dev = device::dispatch_device(&device::Target::Cpu).unwrap();
    let (mut worst_loss, mut worst_grad, mut worst_burn) = (0f64, 0f64, 0f64);
    for c in ctc_cases() {
        let logits: Vec<f32> = c.logits.iter().map(|&v| v as f32).collect();
        let x = Tensor::<AD, 3>::from_data(TensorData::new(logits.clone(), [c.batch, c.frames, c.classes]), &dev)
            .require_grad();
        let (loss, nll) =
            models::ctc::ctc_loss(x.clone(), &c.lengths, &c.targets, 0, models::ctc::Reduction::Sum, true);
        for (b, (ours, torch)) in nll.iter().zip(&c.loss).enumerate() {
            match torch {
                None => assert!(ours.is_infinite(), "sequence {b}: {ours} where PyTorch has inf"),
                Some(t) => worst_loss = worst_loss.max((ours - t).abs() / t.abs().max(1.0)),
            }
        }
        let grads = loss.backward();
        let g: Vec<f32> = x.grad(&grads).unwrap().into_data().to_vec().unwrap();
        if let Some(torch) = &c.grad {
            for (a, b) in g.iter().zip(torch) {
                worst_grad = worst_grad.max((f64::from(*a) - b).abs());
            }
        }
        // burn-nn's CTC loss ([T, B, C] log-probabilities) on the same finite cases.
        if c.loss.iter().all(Option::is_some) {
            let lp = burn::tensor::activation::log_softmax(
                Tensor::<B, 3>::from_data(TensorData::new(logits, [c.batch, c.frames, c.classes]), &dev),
                2,
            )
            .swap_dims(0, 1);
            let width = c.targets.iter().map(Vec::len).max().unwrap_or(0).max(1);
            let flat: Vec<i64> = c
                .targets
                .iter()
                .flat_map(|t| t.iter().map(|&v| v as i64).chain(std::iter::repeat_n(0, width - t.len())))
                .collect();
            let targets = Tensor::<B, 2, Int>::from_data(TensorData::new(flat, [c.batch, width]), &dev);
            let il: Vec<i64> = c.lengths.iter().map(|&v| v as i64).collect();
            let tl: Vec<i64> = c.targets.iter().map(|t| t.len() as i64).collect();
            let il = Tensor::<B, 1, Int>::from_data(TensorData::new(il, [c.batch]), &dev);
            let tl = Tensor::<B, 1, Int>::from_data(TensorData::new(tl, [c.batch]), &dev);
            let burn_nn = burn::nn::loss::CTCLossConfig::new().init().forward(lp, targets, il, tl);
            let burn_nn: Vec<f32> = burn_nn.into_data().convert::<f32>().to_vec().unwrap();
            for (got, torch) in burn_nn.iter().zip(&c.loss) {
                let t = torch.unwrap();
                worst_burn = worst_burn.max((f64::from(*got) - t).abs() / t.abs().max(1.0));
            }
        }
    }
    eprintln!(
        "CTC vs PyTorch: loss rel {worst_loss:.2e}, grad abs {worst_grad:.2e}; burn-nn vs PyTorch rel {worst_burn:.2e}"
    );
    assert!(worst_loss < 1e-5, "loss differs from PyTorch by {worst_loss}");
    assert!(worst_grad < 1e-5, "gradient differs from PyTorch by {worst_grad}");
}

#[test]
fn per_frame_logits_do_not_change_when_padding_is_appended() {
    // The CTC head: every valid frame's logits are the same whatever padding follows the
    // sequence and whatever else is in the batch; shapes keep time (no stride).
    for cfg in small_configs() {
        let model = cfg.init::<B>(12, 7, &dev());
        let x = Tensor::<B, 3>::random([1, 10, 12], Distribution::Normal(0.0, 1.0), &dev());
        let base = values(model.forward_frames(x.clone(), mask(&[10], 10)));
        assert_eq!(base.len(), 10 * 7);
        for pad in [1, 6, 30] {
            let junk = Tensor::<B, 3>::random([1, pad, 12], Distribution::Normal(5.0, 3.0), &dev());
            let out = model.forward_frames(Tensor::cat(vec![x.clone(), junk], 1), mask(&[10], 10 + pad));
            assert_eq!(out.dims(), [1, 10 + pad, 7], "{}", cfg.kind());
            let out = values(out);
            let diff = base.iter().zip(&out[..10 * 7]).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(diff < 1e-4, "{}: padding {pad} changed per-frame logits by {diff}", cfg.kind());
        }
        let other = Tensor::<B, 3>::random([1, 16, 12], Distribution::Normal(0.0, 1.0), &dev());
        let short = Tensor::cat(vec![x.clone(), Tensor::zeros([1, 6, 12], &dev())], 1);
        let both = values(model.forward_frames(Tensor::cat(vec![short, other], 0), mask(&[10, 16], 16)));
        let diff = base.iter().zip(&both[..10 * 7]).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(diff < 1e-4, "{}: batching changed per-frame logits by {diff}", cfg.kind());
        // The pooled head and the per-frame head share the classifier: the per-frame output is
        // not a constant (it varies over time).
        let first = &base[..7];
        let last = &base[9 * 7..];
        assert!(first.iter().zip(last).any(|(a, b)| (a - b).abs() > 1e-4), "{}: frames alike", cfg.kind());
    }
}

#[test]
fn ctc_outputs_ignore_padding_frames() {
    // The per-frame head's loss and gradient of a sequence do not depend on frames past its
    // length, whatever they hold.
    let dev = device::dispatch_device(&device::Target::Cpu).unwrap();
    let (classes, frames, length) = (5, 16, 10);
    let base = Tensor::<B, 3>::random([1, frames, classes], Distribution::Normal(0.0, 1.0), &dev);
    let noise = Tensor::<B, 3>::random([1, frames, classes], Distribution::Normal(0.0, 5.0), &dev);
    let keep = Tensor::<B, 3>::from_data(
        TensorData::new(
            (0..frames * classes).map(|i| if i / classes < length { 1f32 } else { 0.0 }).collect(),
            [1, frames, classes],
        ),
        &dev,
    );
    let other = base.clone() * keep.clone() + noise * (keep.neg().add_scalar(1.0));
    let run = |x: Tensor<B, 3>| {
        let x = Tensor::<AD, 3>::from_inner(x).require_grad();
        let (loss, nll) =
            models::ctc::ctc_loss(x.clone(), &[length], &[vec![1, 3, 3]], 0, models::ctc::Reduction::Sum, false);
        let g: Vec<f32> = x.grad(&loss.backward()).unwrap().into_data().to_vec().unwrap();
        (nll[0], g)
    };
    let (a, ga) = run(base);
    let (b, gb) = run(other);
    assert_eq!(a, b);
    assert_eq!(ga, gb);
    assert!(ga[length * classes..].iter().all(|&v| v == 0.0));
}

#[test]
fn linear_kernel_matches_burn_linear_forward_and_backward() {
    use models::kernels::ops;
    // A single row (batch-1 head), a small product on one thread, the reference stem's shape.
    for [n, k, m] in [[1, 5, 3], [7, 4, 6], [4096, 192, 384]] {
        for with_bias in [true, false] {
            let (x, w, b) = (rand_ad([n, k]), rand_ad([k, m]), rand_ad([m]));
            let bias = with_bias.then(|| b.clone());
            let ours = ops::linear(x.clone(), w.clone(), bias.clone());
            let g1 = probe(ours.clone(), [n, m]).backward();
            let (x2, w2, b2) = (
                x.clone().detach().require_grad(),
                w.clone().detach().require_grad(),
                b.clone().detach().require_grad(),
            );
            let theirs = burn::tensor::module::linear(x2.clone(), w2.clone(), with_bias.then(|| b2.clone()));
            let g2 = probe(theirs.clone(), [n, m]).backward();
            let name = format!("linear n{n} k{k} m{m} bias {with_bias}");
            close(&format!("{name} forward"), &ad_values(ours), &ad_values(theirs), 1e-5);
            close(&format!("{name} dx"), &grad_values(&x, &g1), &grad_values(&x2, &g2), 1e-5);
            close(&format!("{name} dw"), &grad_values(&w, &g1), &grad_values(&w2, &g2), 1e-4);
            if with_bias {
                close(&format!("{name} dbias"), &grad_values(&b, &g1), &grad_values(&b2, &g2), 1e-4);
            } else {
                assert!(b.grad(&g1).is_none(), "{name}: an unused bias got a gradient");
            }
        }
    }
    // An input that needs no gradient (the stem's data) gets none and the weight's is unchanged;
    // a strided weight view (a column block of a fused weight) reads and differentiates the same.
    let (x, w) = (Tensor::<AD, 2>::random([9, 8], Distribution::Normal(0.0, 1.0), &dev()), rand_ad([8, 12]));
    let block = |w: Tensor<AD, 2>| w.narrow(1, 4, 4);
    let g1 = probe(ops::linear(x.clone(), block(w.clone()), None), [9, 4]).backward();
    let w2 = w.clone().detach().require_grad();
    let g2 = probe(x.clone().matmul(block(w2.clone())), [9, 4]).backward();
    assert!(x.grad(&g1).is_none());
    close("strided weight dw", &grad_values(&w, &g1), &grad_values(&w2, &g2), 1e-5);
}

/// Tests that take long (WGPU kernel compilation, whole training runs): `cargo test --workspace
/// --release` runs them, `cargo quick-test` skips them.
mod slow {
    use super::*;

    /// The same weights and batch give the same logits and gradients on the CPU (host-loop kernels)
    /// and on WGPU (the `cube` crate's kernels and `kernels::reference` ops, JIT-compiled by cubecl): f32
    /// within 1e-4 relative for every model; f16 compute on WGPU (the conv-transformer) within
    /// 2e-2 (logits) and 5e-2 (gradients) of the f32 CPU reference. Gradient tensors are compared
    /// relative to their own largest value, or to 1e-3 of the model's largest gradient where that
    /// is larger.
    #[test]
    fn cpu_and_wgpu_give_the_same_logits_and_gradients_for_every_model() {
        let Some(selected) = wgpu_device() else { return };
        let (gpu, cpu) = (selected.device, dev());
        let t0 = std::time::Instant::now();
        let (b, t, f) = (3, 16, 12);
        let x = TensorData::new(
            (0..b * t * f).map(|i| ((i * 7919 % 1009) as f32 / 1009.0 - 0.5) * 3.0).collect(),
            [b, t, f],
        );
        let (lengths, labels) = ([16, 11, 4], [0i64, 3, 6]);
        let f16_on_gpu = selected.selection.capabilities.supports(device::Precision::F16);
        for cfg in parity_configs() {
            let kind = cfg.kind();
            let model: SignModel<AD> = cfg.init::<AD>(f, 7, &cpu).map(&mut models::precision::Materialize);
            let (cpu_logits, cpu_grads) = logits_and_grads(&model, &cpu, FloatDType::F32, false, &x, &lengths, &labels);
            let (gpu_logits, gpu_grads) = logits_and_grads(&model, &gpu, FloatDType::F32, false, &x, &lengths, &labels);
            let d = rel_diff(&gpu_logits, &cpu_logits, 1e-3);
            eprintln!("{kind}: f32 logits rel diff {d:.2e} ({:.1} s)", t0.elapsed().as_secs_f64());
            assert!(d <= 1e-4, "{kind}: f32 logits differ by {d:.2e} (relative)");
            assert_eq!(cpu_grads.len(), gpu_grads.len());
            // Gradients that are zero in exact arithmetic (an attention key bias shifts every score
            // of a row equally) hold rounding noise: compare each tensor at least at 1e-3 of the
            // model's largest gradient.
            let floor = 1e-3 * cpu_grads.iter().flat_map(|(_, g)| g).fold(0.0f32, |m, v| m.max(v.abs()));
            let mut worst = (0.0f32, String::new());
            for ((name, want), (_, got)) in cpu_grads.iter().zip(&gpu_grads) {
                let d = rel_diff(got, want, floor);
                if d > worst.0 {
                    worst = (d, name.clone());
                }
            }
            eprintln!("{kind}: f32 gradients worst rel diff {:.2e} ({})", worst.0, worst.1);
            // Measured: conv_transformer ~2e-6, gru ~5e-7, transformer ~3e-6 (4e-4 when its GELU
            // was differentiated as the tanh approximation on WGPU).
            assert!(worst.0 <= 1e-4, "{kind}: f32 gradient of {} differs by {:.2e} (relative)", worst.1, worst.0);
            if !f16_on_gpu {
                eprintln!("{kind}: adapter has no SHADER_F16; f16 parity skipped");
                continue;
            }
            // f16 for the conv-transformer (the default and reference model, the one trained in
            // f16 on WGPU in the trainer's tests); each f16 model is a kernel set of its own to
            // compile (41 s for the transformer's on llvmpipe with Mesa's shader cache empty).
            if kind != "conv_transformer" {
                continue;
            }
            let (h_logits, h_grads) = logits_and_grads(&model, &gpu, FloatDType::F16, false, &x, &lengths, &labels);
            // The trainer's copy on GPU-class devices: one cast of the flat buffer, parameters as
            // views of it, gradients gathered uncast: the same values, bit for bit.
            let (p_logits, p_grads) = logits_and_grads(&model, &gpu, FloatDType::F16, true, &x, &lengths, &labels);
            assert_eq!(p_logits, h_logits, "{kind}: f16 logits of the precast copy");
            for ((name, want), (_, got)) in h_grads.iter().zip(&p_grads) {
                assert_eq!(got, want, "{kind}: f16 gradient of {name} from the precast copy");
            }
            let d = rel_diff(&h_logits, &cpu_logits, 1e-3);
            eprintln!("{kind}: f16 (WGPU) logits rel diff {d:.2e} ({:.1} s)", t0.elapsed().as_secs_f64());
            assert!(d <= 2e-2, "{kind}: f16 logits differ by {d:.2e} (relative)");
            let mut worst = (0.0f32, String::new());
            for ((name, want), (_, got)) in cpu_grads.iter().zip(&h_grads) {
                let d = rel_diff(got, want, floor);
                if d > worst.0 {
                    worst = (d, name.clone());
                }
            }
            eprintln!("{kind}: f16 (WGPU) gradients worst rel diff {:.2e} ({})", worst.0, worst.1);
            assert!(worst.0 <= 5e-2, "{kind}: f16 gradient of {} differs by {:.2e}", worst.1, worst.0);
        }
    }

    /// Burn's GELU (`activation::gelu`, the `Gelu` module's op) has the derivative of the GELU
    /// it computes (erf form), `Phi(x) + x phi(x)`, on the CPU and on WGPU, where upstream Burn's
    /// CubeCL backends differentiate it as the tanh approximation (off by up to 8.7e-4, at
    /// x = 2.02; the vendored dispatcher's `GeluGradient`).
    #[test]
    fn gelu_gradient_is_the_exact_derivative_on_cpu_and_wgpu() {
        /// erf by its Taylor series in f64 (|x| <= 3: terms below 1e-17 after 60).
        fn erf(x: f64) -> f64 {
            let (mut term, mut sum) = (x, x);
            for n in 1..60 {
                term *= -x * x / n as f64;
                sum += term / (2 * n + 1) as f64;
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        }
        let xs = [-3.0f32, -2.2, -1.0, -0.45, 0.0, 0.3, 1.0, 1.6, 2.5];
        let want: Vec<f32> = xs
            .iter()
            .map(|&x| {
                let x = f64::from(x);
                let cdf = 0.5 * (1.0 + erf(x / std::f64::consts::SQRT_2));
                let pdf = (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
                (cdf + x * pdf) as f32
            })
            .collect();
        let mut devices = vec![("cpu", dev())];
        devices.extend(wgpu_device().map(|s| ("wgpu", s.device)));
        for (name, device) in devices {
            let x = Tensor::<AD, 1>::from_data(TensorData::new(xs.to_vec(), [xs.len()]), &device).require_grad();
            let grads = burn::tensor::activation::gelu(x.clone()).sum().backward();
            let got: Vec<f32> = x.grad(&grads).unwrap().into_data().to_vec().unwrap();
            let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
            assert!(worst <= 2e-6, "{name}: GELU gradient off by {worst:.2e}: {got:?} vs {want:?}");
        }
    }

    /// Full-tensor reductions on WGPU are wrong above ~786k elements in Burn 0.21 / cubecl 0.10 on
    /// llvmpipe (docs/gpu-report.md). SignFlow never reduces one tensor that large in one go (the
    /// gradient norm sums per-parameter); this records the upstream behaviour, so an upgrade that
    /// fixes or widens it is noticed, and checks the chunked form (`sum_dim` then `sum`) is right.
    #[test]
    fn wgpu_large_reductions_chunked_are_right() {
        let Some(gpu) = wgpu_device().map(|s| s.device) else { return };
        let n = 1_000_000usize;
        let host: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 / 1000.0).collect();
        let want: f64 = host.iter().map(|&v| v as f64).sum();
        let x = Tensor::<B, 1>::from_data(TensorData::new(host, [n]), &gpu);
        let chunked = x.clone().reshape([1000, 1000]).sum_dim(1).sum().into_scalar() as f64;
        assert!((chunked - want).abs() / want < 1e-5, "chunked sum {chunked} vs {want}");
        let direct = x.sum().into_scalar() as f64;
        eprintln!("direct full reduction of {n} floats on WGPU: {direct} (exact {want})");
    }

    /// The `cube` crate's kernels on WGPU equal the reference tensor ops on the same device:
    /// values and gradients of the causal depthwise conv, the BatchNorm statistics, backward and
    /// running statistics (on rows and on `[B, T, C]` itself), BatchNorm in inference alone and
    /// with a conv block's SiLU and conv (`conv_block_eval`), and the optimizer's parameter
    /// views, on contiguous, strided (transposed) and padded-row inputs, channel counts that do
    /// not fill a cube, sequences shorter than the kernel, in f32 and (where the adapter has it)
    /// f16. Each entry point is asserted to run (not fall back) on the device.
    #[test]
    fn cube_kernels_on_wgpu_equal_the_reference_ops() {
        use burn::tensor::TensorPrimitive;
        use models::kernels::{reference, NORM_EPS};
        let Some((selected, gpu)) = wgpu_devices() else { return };
        let prim = |t: &Tensor<B, 3>| t.clone().into_primitive().tensor();
        let prim2 = |t: &Tensor<B, 2>| t.clone().into_primitive().tensor();
        let prim1 = |t: &Tensor<B, 1>| t.clone().into_primitive().tensor();
        let wrap3 = |p| Tensor::<B, 3>::from_primitive(TensorPrimitive::Float(p));
        let wrap2 = |p| Tensor::<B, 2>::from_primitive(TensorPrimitive::Float(p));
        let wrap1 = |p| Tensor::<B, 1>::from_primitive(TensorPrimitive::Float(p));
        let rand = |shape: [usize; 3], salt: usize| {
            let n = shape.iter().product();
            Tensor::<B, 3>::from_data(TensorData::new(spread(n, 0.3, 2.0, salt), shape), &gpu)
        };
        let mut dtypes = vec![FloatDType::F32];
        if selected.selection.capabilities.supports(device::Precision::F16) {
            dtypes.push(FloatDType::F16);
        }
        for dtype in dtypes {
            let tol = if dtype == FloatDType::F32 { 1e-5 } else { 1e-2 };
            for [b, t, c, k] in [[1, 9, 5, 3], [3, 4, 40, 7], [2, 64, 384, 17]] {
                let name = format!("{dtype:?} b{b} t{t} c{c} k{k}");
                // x arrives transposed (strided) in one case, as the block's activations may.
                let x = if c == 40 { rand([b, c, t], 1).swap_dims(1, 2) } else { rand([b, t, c], 1) }.cast(dtype);
                let w = rand([1, c, k], 2).reshape([c, k]).cast(dtype);
                let g = rand([b, t, c], 3).cast(dtype);
                // The kernels take rows (here strided where x is) and the `[C, 1, K]` weight.
                let (rows, g_rows) = (x.clone().reshape([b * t, c]), g.clone().reshape([b * t, c]));
                let rows = if c == 40 { rows.swap_dims(0, 1).mul_scalar(1.0).swap_dims(0, 1) } else { rows };
                let w3 = w.clone().reshape([c, 1, k]);
                let y = wrap2(cube::causal_dwconv(prim2(&rows), prim(&w3), t).expect("dwconv runs on WGPU"));
                close(
                    &format!("{name} dwconv"),
                    &values(y),
                    &values(reference::causal_dwconv(x.clone(), w.clone())),
                    tol,
                );
                let (gx, gw) =
                    cube::causal_dwconv_backward(prim2(&rows), prim(&w3), prim2(&g_rows), t).expect("runs on WGPU");
                let (gx_ref, gw_ref) = reference::causal_dwconv_backward(x.clone(), w.clone(), g.clone());
                close(&format!("{name} dwconv dx"), &values(wrap2(gx)), &values(gx_ref), tol);
                close(&format!("{name} dwconv dw"), &values(wrap3(gw)), &values(gw_ref), tol * 10.0);
                // SiLU and its gradient (x strided in one case), against the reference's values
                // computed in f32 (its own f16 `exp` overflows for x < -11).
                let y = wrap3(cube::silu(prim(&x)).expect("silu runs on WGPU"));
                let (x32, g32) = (x.clone().cast(FloatDType::F32), g.clone().cast(FloatDType::F32));
                close(&format!("{name} silu"), &values(y), &values(reference::silu(x32.clone())), tol);
                let gx = wrap3(cube::silu_backward(prim(&x), prim(&g)).expect("runs on WGPU"));
                close(
                    &format!("{name} silu dx"),
                    &values(gx),
                    &values(reference::silu_backward(x32.clone(), g32.clone())),
                    tol,
                );
                // The same on padded rows (the first C columns of rows of C + 128, as CUDA lays
                // out a new matrix whose rows are not a multiple of 512 bytes), read in place,
                // and on `[B, T, C]` over such rows: the values of the contiguous input.
                let padded = |v: &Tensor<B, 3>| {
                    let rows = v.clone().reshape([b * t, c]);
                    Tensor::cat(vec![rows, Tensor::<B, 2>::zeros([b * t, 128], &gpu).cast(dtype)], 1).narrow(1, 0, c)
                };
                let (xp, gp) = (padded(&x), padded(&g));
                let want = values(reference::silu(x32.clone()));
                close(
                    &format!("{name} silu padded"),
                    &values(wrap2(cube::silu(prim2(&xp)).expect("runs"))),
                    &want,
                    tol,
                );
                let xp3 = xp.clone().reshape([b, t, c]);
                close(
                    &format!("{name} silu padded [B, T, C]"),
                    &values(wrap3(cube::silu(prim(&xp3)).expect("runs"))),
                    &want,
                    tol,
                );
                let want = values(reference::silu_backward(x32.clone(), g32.clone()));
                let gx = wrap2(cube::silu_backward(prim2(&xp), prim2(&gp)).expect("runs on WGPU"));
                close(&format!("{name} silu dx padded"), &values(gx), &want, tol);
                let stats = wrap2(cube::channel_stats(prim(&xp3)).expect("stats run on WGPU"));
                let want = values(reference::channel_stats(x.clone().reshape([b * t, c])));
                close(&format!("{name} stats padded [B, T, C]"), &values(stats), &want, tol);
                // The optimizer's flat gradient from such parts (and the contiguous g after one),
                // each at its offset, zeros between.
                let flat = cube::assemble(vec![(3, prim2(&xp)), (b * t * c + 10, prim(&g))], 2 * b * t * c + 20)
                    .unwrap_or_else(|_| panic!("{name}: assemble runs on WGPU"));
                let mut want = vec![0.0; 2 * b * t * c + 20];
                want[3..3 + b * t * c].copy_from_slice(&values(x.clone()));
                want[b * t * c + 10..2 * b * t * c + 10].copy_from_slice(&values(g.clone()));
                close(&format!("{name} assemble padded"), &values(wrap1(flat)), &want, 0.0);
                // The conv of SiLU of x in one kernel each way, against SiLU and the conv's
                // reference ops in f32 (the kernels round once, the ops at each op).
                let w32 = w.clone().cast(FloatDType::F32);
                let s32 = reference::silu(x32.clone());
                let y = wrap2(cube::silu_dwconv(prim2(&rows), prim(&w3), t).expect("silu dwconv runs on WGPU"));
                let y_ref = reference::causal_dwconv(s32.clone(), w32.clone());
                close(&format!("{name} silu dwconv"), &values(y), &values(y_ref), tol * 5.0);
                let (gh, gw) =
                    cube::silu_dwconv_backward(prim2(&rows), prim(&w3), prim2(&g_rows), t).expect("runs on WGPU");
                let (gs_ref, gw_ref) = reference::causal_dwconv_backward(s32, w32, g32);
                let gh_ref = reference::silu_backward(x32, gs_ref);
                close(&format!("{name} silu dwconv dh"), &values(wrap2(gh)), &values(gh_ref), tol * 5.0);
                close(&format!("{name} silu dwconv dw"), &values(wrap3(gw)), &values(gw_ref), tol * 10.0);

                let (x2, g2) = (x.clone().reshape([b * t, c]), g.clone().reshape([b * t, c]));
                let stats = wrap2(cube::channel_stats(prim2(&x2)).expect("stats run on WGPU"));
                close(
                    &format!("{name} stats"),
                    &values(stats.clone()),
                    &values(reference::channel_stats(x2.clone())),
                    tol,
                );
                let gamma = rand([1, 1, c], 4).reshape([c]).cast(dtype);
                let (gx, gg, gb) =
                    cube::channel_norm_backward([prim2(&x2), prim2(&stats), prim1(&gamma), prim2(&g2)], NORM_EPS)
                        .map(|[gx, gg, gb]| (gx, gg, gb))
                        .expect("norm backward runs on WGPU");
                let (gx_ref, gg_ref, gb_ref) =
                    reference::channel_norm_backward(x2.clone(), stats.clone(), gamma.clone(), g2);
                let gx2 = values(wrap2(gx));
                close(&format!("{name} norm dx"), &gx2, &values(gx_ref), tol * 10.0);
                close(&format!("{name} norm dgamma"), &values(wrap1(gg)), &values(gg_ref), tol * 10.0);
                close(&format!("{name} norm dbeta"), &values(wrap1(gb)), &values(gb_ref), tol * 10.0);
                let (mean, var) =
                    (rand([1, 1, c], 5).reshape([c]).cast(dtype), rand([1, 1, c], 6).reshape([c]).cast(dtype));
                let (m, v) = cube::running_stats(prim2(&stats), prim1(&mean), prim1(&var), 0.05).expect("runs on WGPU");
                let (m_ref, v_ref) = reference::running_stats(stats.clone(), mean.clone(), var.clone(), 0.05);
                close(&format!("{name} running mean"), &values(wrap1(m)), &values(m_ref.clone()), tol);
                close(&format!("{name} running var"), &values(wrap1(v)), &values(v_ref.clone()), tol);
                // All of the forward in one launch.
                let beta = rand([1, 1, c], 7).reshape([c]).cast(dtype);
                let running = || [prim1(&mean), prim1(&var)];
                let [m0, v0] = running();
                let [y, st, m, v] =
                    cube::channel_norm_train([prim2(&x2), prim1(&gamma), prim1(&beta), m0, v0], NORM_EPS, 0.05)
                        .expect("the fused norm runs on WGPU");
                let y_ref = reference::channel_norm(x2.clone(), stats.clone(), gamma.clone(), beta.clone());
                let y2 = values(wrap2(y));
                close(&format!("{name} fused norm"), &y2, &values(y_ref), tol * 10.0);
                close(&format!("{name} fused stats"), &values(wrap2(st)), &values(stats.clone()), tol);
                close(&format!("{name} fused running mean"), &values(wrap1(m)), &values(m_ref), tol);
                close(&format!("{name} fused running var"), &values(wrap1(v)), &values(v_ref), tol);
                // Inference with running statistics (a positive variance), as Burn's BatchNorm
                // computes it; on strided rows where x is strided.
                let var_pos = var.clone().abs().add_scalar(0.1);
                let y = cube::channel_norm_eval(
                    [prim2(&rows), prim1(&gamma), prim1(&beta), prim1(&mean), prim1(&var_pos)],
                    NORM_EPS,
                )
                .expect("the inference norm runs on WGPU");
                let y_ref = reference::channel_norm_eval(
                    x2.clone(),
                    gamma.clone(),
                    beta.clone(),
                    mean.clone(),
                    var_pos.clone(),
                );
                close(&format!("{name} inference norm"), &values(wrap2(y)), &values(y_ref), tol);
                // A conv block's SiLU, conv and inference norm in one kernel (on strided rows
                // where x is strided), against the reference ops in f32 on the same inputs.
                let to32 = |t: &Tensor<B, 1>| t.clone().cast(FloatDType::F32);
                let block_ref = |x: Tensor<B, 3>, norm: [Tensor<B, 1>; 4]| {
                    let s = reference::silu(x.cast(FloatDType::F32));
                    let conv = reference::causal_dwconv(s, w.clone().cast(FloatDType::F32)).reshape([b * t, c]);
                    let [g, be, m, v] = norm.map(|p| p.cast(FloatDType::F32));
                    values(reference::channel_norm_eval(conv, g, be, m, v))
                };
                let norm = [&gamma, &beta, &mean, &var_pos];
                let y = cube::conv_block_eval(
                    [prim2(&rows), prim(&w3), prim1(norm[0]), prim1(norm[1]), prim1(norm[2]), prim1(norm[3])],
                    t,
                    NORM_EPS,
                )
                .expect("the inference conv block runs on WGPU");
                let want = block_ref(x.clone(), norm.map(to32));
                close(&format!("{name} inference conv block"), &values(wrap2(y)), &want, tol);
                // The same on `[B, T, C]` itself (rows read in place, or copied from the strided
                // view), as the model's norm passes it: outputs of that shape, the same values.
                let [m0, v0] = running();
                let [y3, ..] =
                    cube::channel_norm_train([prim(&x), prim1(&gamma), prim1(&beta), m0, v0], NORM_EPS, 0.05)
                        .expect("the fused norm takes [B, T, C]");
                let y3 = wrap3(y3);
                assert_eq!(y3.dims(), [b, t, c], "{name}");
                close(&format!("{name} fused norm [B, T, C]"), &values(y3), &y2, 0.0);
                let [gx3, _, _] =
                    cube::channel_norm_backward([prim(&x), prim2(&stats), prim1(&gamma), prim(&g)], NORM_EPS)
                        .expect("norm backward takes [B, T, C]");
                let gx3 = wrap3(gx3);
                assert_eq!(gx3.dims(), [b, t, c], "{name}");
                close(&format!("{name} norm dx [B, T, C]"), &values(gx3), &gx2, 0.0);
                if dtype == FloatDType::F32 {
                    continue;
                }
                // Half-precision rows beside f32 parameters and statistics (mixed precision):
                // the output and input gradient in the rows' dtype, the rest in f32, the values
                // those of the f32 kernels on the same (rounded) rows.
                use burn::tensor::{DType::F32, TensorMetadata};
                let f32s = |t: &Tensor<B, 1>| t.clone().cast(FloatDType::F32);
                let (g32, b32, m32, v32) = (f32s(&gamma), f32s(&beta), f32s(&mean), f32s(&var));
                let (x32, gr32) =
                    (x2.clone().cast(FloatDType::F32), g.clone().reshape([b * t, c]).cast(FloatDType::F32));
                let running = || [prim1(&m32), prim1(&v32)];
                let [m0, v0] = running();
                let [y, st, m, _] =
                    cube::channel_norm_train([prim2(&x2), prim1(&g32), prim1(&b32), m0, v0], NORM_EPS, 0.05)
                        .expect("the mixed-precision norm runs on WGPU");
                let [m0, v0] = running();
                let [y_ref, st_ref, m_ref, _] =
                    cube::channel_norm_train([prim2(&x32), prim1(&g32), prim1(&b32), m0, v0], NORM_EPS, 0.05)
                        .expect("the f32 norm runs on WGPU");
                assert_eq!((y.dtype(), st.dtype(), m.dtype()), (x2.dtype(), F32, F32), "{name}");
                close(&format!("{name} mixed norm"), &values(wrap2(y)), &values(wrap2(y_ref)), tol);
                close(&format!("{name} mixed stats"), &values(wrap2(st.clone())), &values(wrap2(st_ref)), 1e-5);
                close(&format!("{name} mixed running mean"), &values(wrap1(m)), &values(wrap1(m_ref)), 1e-5);
                let [gx, gg, gb] = cube::channel_norm_backward(
                    [prim2(&x2), st.clone(), prim1(&g32), prim2(&gr32.clone().cast(dtype))],
                    NORM_EPS,
                )
                .expect("the mixed-precision norm backward runs on WGPU");
                let [gx_ref, gg_ref, gb_ref] = cube::channel_norm_backward(
                    [prim2(&x32), st, prim1(&g32), prim2(&gr32.cast(dtype).cast(FloatDType::F32))],
                    NORM_EPS,
                )
                .expect("the f32 norm backward runs on WGPU");
                assert_eq!((gx.dtype(), gg.dtype(), gb.dtype()), (x2.dtype(), F32, F32), "{name}");
                close(&format!("{name} mixed norm dx"), &values(wrap2(gx)), &values(wrap2(gx_ref)), tol);
                close(&format!("{name} mixed norm dgamma"), &values(wrap1(gg)), &values(wrap1(gg_ref)), 1e-5);
                close(&format!("{name} mixed norm dbeta"), &values(wrap1(gb)), &values(wrap1(gb_ref)), 1e-5);
                let v32 = v32.abs().add_scalar(0.1);
                let eval = |x: &Tensor<B, 2>| {
                    cube::channel_norm_eval([prim2(x), prim1(&g32), prim1(&b32), prim1(&m32), prim1(&v32)], NORM_EPS)
                        .expect("the inference norm runs beside f32 parameters")
                };
                let (y, y_ref) = (eval(&x2), eval(&x32));
                assert_eq!((y.dtype(), y_ref.dtype()), (x2.dtype(), F32), "{name}");
                close(&format!("{name} mixed inference norm"), &values(wrap2(y)), &values(wrap2(y_ref)), tol);
                let y = cube::conv_block_eval(
                    [prim2(&x2), prim(&w3), prim1(&g32), prim1(&b32), prim1(&m32), prim1(&v32)],
                    t,
                    NORM_EPS,
                )
                .expect("the inference conv block runs beside f32 parameters");
                assert_eq!(y.dtype(), x2.dtype(), "{name}");
                let want = block_ref(x.clone(), [g32.clone(), b32.clone(), m32.clone(), v32.clone()]);
                close(&format!("{name} mixed inference conv block"), &values(wrap2(y)), &want, tol);
            }
        }
        // ECA and the attention ops on the fused projection, forward and backward, against the
        // tensor-op formulations (whose own gradients a CPU test holds to autodiff).
        let wrap4 = |p| Tensor::<B, 4>::from_primitive(TensorPrimitive::Float(p));
        let prim4 = |t: &Tensor<B, 4>| t.clone().into_primitive().tensor();
        for dtype in [FloatDType::F32, FloatDType::F16] {
            if dtype == FloatDType::F16 && !selected.selection.capabilities.supports(device::Precision::F16) {
                continue;
            }
            let tol = if dtype == FloatDType::F32 { 1e-5 } else { 1e-2 };
            for [b, t, c, k] in [[1, 1, 3, 3], [3, 7, 40, 5], [2, 64, 384, 5]] {
                let name = format!("{dtype:?} eca b{b} t{t} c{c} k{k}");
                let x = if c == 40 { rand([b, c, t], 1).swap_dims(1, 2) } else { rand([b, t, c], 1) }.cast(dtype);
                let counts: Vec<f32> = (0..b * t).map(|i| if i % t < t - (i / t) % t { 1.0 } else { 0.0 }).collect();
                let weights = Tensor::<B, 3>::from_data(TensorData::new(counts, [b, 1, t]), &gpu);
                let weights = (weights.clone() / weights.sum_dim(2)).cast(dtype);
                let w = rand([1, 1, k], 2).cast(dtype);
                let g = rand([b, t, c], 3).cast(dtype);
                let (rows, g_rows) = (x.clone().reshape([b * t, c]), g.clone().reshape([b * t, c]));
                let y = cube::eca(prim2(&rows), prim(&weights), prim(&w)).expect("eca runs on WGPU");
                let want = reference::eca(x.clone(), weights.clone(), w.clone());
                close(&format!("{name} forward"), &values(wrap2(y)), &values(want), tol);
                let (gx, gw) =
                    cube::eca_backward(prim2(&rows), prim(&weights), prim(&w), prim2(&g_rows)).expect("runs");
                let (gx_ref, gw_ref) = reference::eca_backward(x, weights, w, g);
                close(&format!("{name} dx"), &values(wrap2(gx)), &values(gx_ref), tol * 10.0);
                close(&format!("{name} dw"), &values(wrap3(gw)), &values(gw_ref), tol * 10.0);
            }
            for [n, k, m] in [[1, 1, 1], [7, 5, 3], [33, 40, 24]] {
                let name = format!("{dtype:?} dense n{n} k{k} m{m}");
                // The input arrives transposed (strided) in one case, as a layer's may.
                let x = if n == 7 {
                    rand([1, k, n], 10).reshape([k, n]).swap_dims(0, 1)
                } else {
                    rand([1, n, k], 10).reshape([n, k])
                }
                .cast(dtype);
                let w = rand([1, k, m], 11).reshape([k, m]).cast(dtype);
                let g = rand([1, n, m], 12).reshape([n, m]).cast(dtype);
                let [gx, gw, gb] =
                    cube::dense_backward(prim2(&x), prim2(&w), prim2(&g), [true; 3]).expect("runs on WGPU");
                let [gx, gw, gb] = [gx, gw, gb].map(|t| t.expect("every gradient asked for"));
                let want_gx = g.clone().matmul(w.clone().transpose());
                close(&format!("{name} dx"), &values(wrap2(gx)), &values(want_gx), tol);
                let want_gw = x.clone().transpose().matmul(g.clone());
                close(&format!("{name} dw"), &values(wrap2(gw.clone())), &values(want_gw), tol);
                let want_gb = g.clone().sum_dim(0).reshape([m]);
                close(&format!("{name} dbias"), &values(wrap1(gb)), &values(want_gb), tol);
                // Only the gradients asked for.
                let [gx, only_gw, gb] =
                    cube::dense_backward(prim2(&x), prim2(&w), prim2(&g), [false, true, false]).expect("runs on WGPU");
                assert!(gx.is_none() && gb.is_none(), "{name}");
                let only_gw = only_gw.expect("the weight gradient asked for");
                close(&format!("{name} dw alone"), &values(wrap2(only_gw)), &values(wrap2(gw)), 0.0);
            }
            for [b, t, h, hd] in [[1, 1, 1, 4], [3, 5, 2, 3], [2, 64, 4, 48]] {
                let name = format!("{dtype:?} attention b{b} t{t} h{h} hd{hd}");
                let d = h * hd;
                // The projection arrives transposed (strided) in one case.
                let qkv = if t == 5 {
                    rand([1, 3 * d, b * t], 4).reshape([3 * d, b * t]).swap_dims(0, 1)
                } else {
                    rand([1, b * t, 3 * d], 4).reshape([b * t, 3 * d])
                }
                .cast(dtype);
                let scores = cube::attention_scores(prim2(&qkv), b, h).expect("scores run on WGPU");
                close(
                    &format!("{name} scores"),
                    &values(wrap4(scores)),
                    &values(reference::attention_scores(qkv.clone(), b, h)),
                    tol,
                );
                let gs = rand([b * h, t, t], 5).reshape([b, h, t, t]).cast(dtype);
                let gq = cube::attention_scores_backward(prim2(&qkv), prim4(&gs)).expect("runs");
                let gq_ref = reference::attention_scores_backward(qkv.clone(), gs);
                close(&format!("{name} scores dqkv"), &values(wrap2(gq)), &values(gq_ref), tol * 10.0);
                let attn = rand([b * h, t, t], 6).reshape([b, h, t, t]).cast(dtype);
                let out = cube::attention_values(prim4(&attn), prim2(&qkv)).expect("values run on WGPU");
                close(
                    &format!("{name} values"),
                    &values(wrap2(out)),
                    &values(reference::attention_values(attn.clone(), qkv.clone())),
                    tol,
                );
                let go = rand([1, b * t, d], 7).reshape([b * t, d]).cast(dtype);
                let (ga, gq) = cube::attention_values_backward(prim4(&attn), prim2(&qkv), prim2(&go)).expect("runs");
                let (ga_ref, gq_ref) = reference::attention_values_backward(attn, qkv, go);
                close(&format!("{name} values dattn"), &values(wrap4(ga)), &values(ga_ref), tol * 10.0);
                close(&format!("{name} values dqkv"), &values(wrap2(gq)), &values(gq_ref), tol * 10.0);
            }
        }
        // Softmax with dropout in one kernel: the softmax is the reference's, the kept weights are
        // those of the host's mask for the seed its four seed words make, and the gradient is the
        // closed form `g * out - y * sum(g * out)`.
        let [b, h, q, k] = [2, 3, 5, 7];
        let scores = rand([b * h, q, k], 8).reshape([b, h, q, k]);
        let pads: Vec<f32> = (0..b * k).map(|i| if i == 2 * k - 1 { -1e4 } else { 0.0 }).collect();
        let bias = Tensor::<B, 2>::from_data(TensorData::new(pads, [b, k]), &gpu);
        let seeds = Tensor::<B, 1>::from_data(TensorData::new(vec![5.0f32, 1000.0, 77.0, 2047.0], [4]), &gpu);
        let (y, out) = cube::softmax_dropout(prim4(&scores), prim2(&bias), prim1(&seeds), 0.3).expect("runs on WGPU");
        let y_ref = reference::key_biased_softmax(scores, bias);
        close("softmax", &values(wrap4(y.clone())), &values(y_ref.clone()), 1e-5);
        let seed = (5 + 1000 * 2048) as u64 | (((77 + 2047 * 2048) as u64) << 32);
        let mask = models::kernels::dropout_mask(seed, b * h * q * k, 0.3);
        let kept = Tensor::<B, 4>::from_data(TensorData::new(mask, [b, h, q, k]), &gpu);
        close("softmax dropout", &values(wrap4(out.clone())), &values(y_ref * kept), 1e-5);
        let g = rand([b * h, q, k], 9).reshape([b, h, q, k]);
        let gs = cube::softmax_dropout_backward(y.clone(), out.clone(), prim4(&g)).expect("runs on WGPU");
        let (y, out) = (wrap4(y), wrap4(out));
        let want = g.clone() * out.clone() - y * (g * out).sum_dim(3);
        close("softmax dropout gradient", &values(wrap4(gs)), &values(want), 1e-5);

        // Drop-path masks drawn at once in training: each branch gets its own mask, 0 or 1 / keep
        // per sample and the same on all of that sample's rows (views of one draw); past the drawn
        // masks a branch draws its own. 8 samples x 3 frames: blocks padded to whole 256s.
        let (batch, frames) = (8, 3);
        let pad = Tensor::<AD, 2, burn::tensor::Bool>::zeros([batch, frames], &gpu).equal_elem(true);
        let mask = models::common::FrameMask::new(pad, burn::tensor::DType::F32);
        let like = Tensor::<AD, 2>::zeros([batch * frames, 2], &gpu);
        let draw = models::common::DropDraw::new(0.5, 3, &like, &mask);
        let path = models::common::DropPath { prob: 0.5 };
        let masks: Vec<Vec<f32>> = (0..4)
            .map(|_| ad_values(path.forward_with(Tensor::<AD, 2>::ones([batch * frames, 2], &gpu), &draw)))
            .collect();
        for m in &masks {
            assert!(m.iter().all(|v| *v == 0.0 || *v == 2.0), "{masks:?}");
            for sample in m.chunks(2 * frames) {
                assert!(sample.iter().all(|v| *v == sample[0]), "one value per sample: {masks:?}");
            }
        }
        let per_sample = |m: &Vec<f32>| m.iter().step_by(2 * frames).copied().collect::<Vec<f32>>();
        let (a, b, c) = (per_sample(&masks[0]), per_sample(&masks[1]), per_sample(&masks[2]));
        assert!(a != b || b != c, "three branches, one mask: {masks:?}");

        // The optimizer's parameter views of its flat buffer: at an aligned start with an end
        // that is not (a view, where Burn's slice copies) and at a start that is not (a copy).
        let flat = Tensor::<B, 1>::from_data(TensorData::new(spread(1024, 0.0, 5.0, 7), [1024]), &gpu);
        for (start, shape) in [(256, [3, 5]), (260, [2, 2])] {
            let mut one = cube::views(prim1(&flat), &[(start, shape.into())]).expect("views on WGPU");
            let view = one.pop().expect("one view per window");
            let want = flat.clone().slice(start..start + shape[0] * shape[1]).reshape(shape);
            close(&format!("view at {start}"), &values(wrap2(view)), &values(want), 0.0);
        }
        // The same windows, and a 1-D one, as one operation.
        let windows = [(256, burn::tensor::Shape::new([3, 5])), (260, [2, 2].into()), (512, [7].into())];
        let views = cube::views(prim1(&flat), &windows).expect("views on WGPU");
        assert_eq!(views.len(), 3);
        for ((start, shape), view) in windows.iter().zip(views) {
            let n = shape.num_elements();
            let want = values(flat.clone().slice(*start..start + n));
            let got = values(Tensor::<B, 1>::from_primitive(TensorPrimitive::Float(view)).reshape([n]));
            close(&format!("views at {start}"), &got, &want, 0.0);
        }
        assert!(cube::views(prim1(&flat), &[(1020, [2, 3].into())]).is_err(), "a window past the end");
        // Tensors on the CPU are not the kernels' to run.
        let x = Tensor::<B, 2>::ones([4, 3], &dev());
        assert!(cube::channel_stats(prim2(&x)).is_err());
    }
}
