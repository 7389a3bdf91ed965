//! Where the reference model's step time goes, layer by layer, on the CPU backend: forward
//! (inference mode, no autodiff) and forward+backward (autodiff, input requiring grad as it does
//! inside the network) of each building block at the reference size (batch 64, 64 frames,
//! 469 features, dim 192, expand 2, kernel 17, 4 heads, 250 classes).
//!
//! `cargo bench -p trainer --bench layers` (add `-- --quick` for a fast, rougher pass)

use burn::backend::Autodiff;
use burn::module::Module;
use burn::tensor::backend::Backend;
use burn::tensor::{Bool, Distribution, Tensor, TensorData};
use criterion::{criterion_group, Criterion, Throughput};
use models::common::{CausalDepthwiseConv, ChannelNorm, DropDraw, Eca, FrameMask, SelfAttention};
use models::conv_transformer::{ConvBlock, TransformerBlock};
use models::ConvTransformerConfig;

type B = device::Backend;
type AD = Autodiff<device::Backend>;

const BATCH: usize = 64;
const FRAMES: usize = 64;
const FEATURES: usize = 469;

/// The blocks' frame mask (f32) of a realistic padding: sequence lengths spread over the window.
fn frame_mask<Bk: Backend>(device: &Bk::Device) -> FrameMask<Bk> {
    let mask = trainer::bench::pad_mask_host(BATCH, FRAMES);
    let pad: Tensor<Bk, 2, Bool> = Tensor::from_data(TensorData::new(mask, [BATCH, FRAMES]), device);
    FrameMask::new(pad, burn::tensor::DType::F32)
}

/// Activations as the blocks take them: each sample's frames as consecutive rows.
fn input<Bk: Backend>(channels: usize, device: &Bk::Device) -> Tensor<Bk, 2> {
    Tensor::random([BATCH * FRAMES, channels], Distribution::Normal(0.0, 1.0), device)
}

/// Benchmarks `f` in inference mode on `B` and with backward on `AD`.
fn pair<MB, MA>(
    c: &mut Criterion,
    name: &str,
    channels: usize,
    make_b: impl Fn(&device::DispatchDevice) -> MB,
    make_ad: impl Fn(&device::DispatchDevice) -> MA,
    fwd_b: impl Fn(&MB, Tensor<B, 2>, &FrameMask<B>) -> Tensor<B, 2>,
    fwd_ad: impl Fn(&MA, Tensor<AD, 2>, &FrameMask<AD>) -> Tensor<AD, 2>,
) where
    MB: Module<B>,
    MA: Module<AD>,
{
    let device = device::dispatch_device(&device::Target::Cpu).unwrap();
    let mut g = c.benchmark_group("layers_cpu_b64_t64");
    g.sample_size(10);
    g.throughput(Throughput::Elements(BATCH as u64));
    let m = make_b(&device);
    let x = input::<B>(channels, &device);
    let mask = frame_mask::<B>(&device);
    g.bench_function(format!("{name}/forward"), |bch| bch.iter(|| fwd_b(&m, x.clone(), &mask).into_data()));
    let m = make_ad(&device);
    let x = input::<AD>(channels, &device).require_grad();
    let mask = frame_mask::<AD>(&device);
    g.bench_function(format!("{name}/forward_backward"), |bch| {
        bch.iter(|| fwd_ad(&m, x.clone(), &mask).sum().backward())
    });
    g.finish();
}

fn layers(c: &mut Criterion) {
    let cfg = ConvTransformerConfig::default();
    let (dim, wide) = (cfg.dim, cfg.dim * cfg.expand);
    let cf = cfg.clone();
    pair(
        c,
        "stem_linear",
        FEATURES,
        |d| burn::nn::LinearConfig::new(FEATURES, dim).with_bias(false).init::<B>(d),
        |d| burn::nn::LinearConfig::new(FEATURES, dim).with_bias(false).init::<AD>(d),
        |m, x, _| m.forward(x),
        |m, x, _| m.forward(x),
    );
    pair(
        c,
        "silu_384",
        wide,
        |_| burn::nn::Dropout { prob: 0.0 },
        |_| burn::nn::Dropout { prob: 0.0 },
        |_, x, _| burn::tensor::activation::silu(x),
        |_, x, _| burn::tensor::activation::silu(x),
    );
    pair(
        c,
        "channel_norm_384",
        wide,
        |d| ChannelNorm::<B>::new(wide, 0.05, d),
        |d| ChannelNorm::<AD>::new(wide, 0.05, d),
        |m, x, _| m.forward(x),
        |m, x, _| m.forward(x),
    );
    pair(
        c,
        "dwconv_k17_384",
        wide,
        |d| CausalDepthwiseConv::<B>::new(wide, cf.kernel, d),
        |d| CausalDepthwiseConv::<AD>::new(wide, cf.kernel, d),
        |m, x, _| m.forward(x, FRAMES),
        |m, x, _| m.forward(x, FRAMES),
    );
    pair(
        c,
        "eca_384",
        wide,
        |d| Eca::<B>::new(cf.eca_kernel, d),
        |d| Eca::<AD>::new(cf.eca_kernel, d),
        |m, x, mask| m.forward(x, mask),
        |m, x, mask| m.forward(x, mask),
    );
    pair(
        c,
        "attention_192",
        dim,
        |d| SelfAttention::<B>::new(dim, cf.heads, 0.0, d),
        |d| SelfAttention::<AD>::new(dim, cf.heads, 0.0, d),
        |m, x, mask| m.forward(x, mask),
        |m, x, mask| m.forward(x, mask),
    );
    let c1 = cfg.clone();
    let c2 = cfg.clone();
    pair(
        c,
        "conv_block",
        dim,
        move |d| ConvBlock::<B>::new(&c1, d),
        move |d| ConvBlock::<AD>::new(&c2, d),
        |m, x, mask| {
            let no_drop = DropDraw::new(0.0, 0, &x, mask);
            m.forward(x, mask, &no_drop)
        },
        |m, x, mask| {
            let no_drop = DropDraw::new(0.0, 0, &x, mask);
            m.forward(x, mask, &no_drop)
        },
    );
    let c1 = cfg.clone();
    let c2 = cfg.clone();
    pair(
        c,
        "transformer_block",
        dim,
        move |d| TransformerBlock::<B>::new(&c1, d),
        move |d| TransformerBlock::<AD>::new(&c2, d),
        |m, x, mask| {
            let no_drop = DropDraw::new(0.0, 0, &x, mask);
            m.forward(x, mask, &no_drop)
        },
        |m, x, mask| {
            let no_drop = DropDraw::new(0.0, 0, &x, mask);
            m.forward(x, mask, &no_drop)
        },
    );
}

criterion_group!(benches, layers);
device::bench_main!(benches);
