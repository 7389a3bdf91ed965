//! Inference of the reference conv-transformer (469 features, 250 classes, 64 frames) three ways:
//! Burn's forward, the eval graph in f32 (BatchNorm folded, no autodiff or dropout), and the
//! eval graph in int8; and one dense layer in f32 (gemm) vs int8, per kernel.
//!
//! `cargo bench -p engine --bench engine` (`-- --quick` for a short pass).

use burn::tensor::{Bool, Distribution, Tensor, TensorData};
use criterion::{criterion_group, BenchmarkId, Criterion};
use engine::dense::Dense;
use engine::q8::{Int8Linear, Kernel};
use engine::{EvalGraph, Weights};
use models::{ConvTransformerConfig, ModelConfig};
use std::hint::black_box;

type B = device::Backend;

const FEATURES: usize = 469;
const CLASSES: usize = 250;
const FRAMES: usize = 64;

fn inference(c: &mut Criterion) {
    let dev = device::dispatch_device(&device::Target::Cpu).unwrap();
    let model = ModelConfig::ConvTransformer(ConvTransformerConfig::default()).init::<B>(FEATURES, CLASSES, &dev);
    let f32_graph = EvalGraph::new(&model, Weights::F32).unwrap();
    let int8 = EvalGraph::new(&model, Weights::Int8).unwrap();
    eprintln!(
        "parameters held: f32 graph {:.2} MB, int8 graph {:.2} MB",
        f32_graph.bytes() as f64 / 1e6,
        int8.bytes() as f64 / 1e6
    );
    let mut group = c.benchmark_group("reference_inference");
    group.sample_size(10);
    for batch in [1usize, 64] {
        let x = Tensor::<B, 3>::random([batch, FRAMES, FEATURES], Distribution::Normal(0.0, 1.0), &dev);
        let host: Vec<f32> = x.to_data().iter::<f32>().collect();
        let valid: Vec<usize> = (0..batch).map(|b| FRAMES - b % 24).collect();
        let mask: Vec<bool> = valid.iter().flat_map(|&n| (0..FRAMES).map(move |t| t >= n)).collect();
        let mask = Tensor::<B, 2, Bool>::from_data(TensorData::new(mask, [batch, FRAMES]), &dev);
        group.bench_function(BenchmarkId::new("burn_f32", batch), |b| {
            b.iter(|| {
                let y = model.forward(x.clone(), mask.clone());
                black_box(y.into_data())
            })
        });
        group.bench_function(BenchmarkId::new("graph_f32", batch), |b| {
            b.iter(|| black_box(f32_graph.logits(&host, &valid, FRAMES).unwrap()))
        });
        group.bench_function(BenchmarkId::new("graph_int8", batch), |b| {
            b.iter(|| black_box(int8.logits(&host, &valid, FRAMES).unwrap()))
        });
    }
    group.finish();
}

fn dense(c: &mut Criterion) {
    // The conv block's expansion at batch 64: 4,096 rows x 192 -> 384.
    let (m, k, n) = (4096usize, 192usize, 384usize);
    let w: Vec<f32> = (0..k * n).map(|i| ((i * 37 % 101) as f32 - 50.0) / 500.0).collect();
    let x: Vec<f32> = (0..m * k).map(|i| ((i * 53 % 97) as f32 - 48.0) / 20.0).collect();
    let f32_dense = Dense::new(w.clone(), k, n, None, Weights::F32);
    let q = Int8Linear::new(&w, k, n, None);
    let mut group = c.benchmark_group("dense_4096x192x384");
    group.sample_size(20);
    group.bench_function("f32_gemm", |b| b.iter(|| black_box(f32_dense.forward(&x, m))));
    for kernel in Kernel::available() {
        group.bench_function(format!("int8_{kernel:?}").to_lowercase(), |b| {
            b.iter(|| black_box(q.forward_with(&x, m, kernel)))
        });
    }
    group.finish();
}

criterion_group!(benches, inference, dense);
device::bench_main!(benches);
