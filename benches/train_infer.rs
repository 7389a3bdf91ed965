//! Training step and inference of every model on the CPU backend at the reference shape
//! (batch 64, 64 frames, 469 features, 250 classes; sample `b` has `b % 24` padded frames):
//!
//! - `train/<model>/forward`: forward + cross-entropy with autodiff tracking;
//! - `train/<model>/forward_backward`: the above plus `backward()`;
//! - `train/<model>/step`: one whole optimizer step, `trainer::step::train_step` (forward,
//!   backward, finite check and global gradient norm, clipping, the AdamW update);
//! - `infer/<model>/batch1` and `infer/<model>/batch64`: forward without autodiff, read back.
//!
//! `cargo bench -p trainer --bench train_infer` (add `-- --quick` for a rougher, faster pass).
//! The side-by-side comparison with PyTorch is `python3 benches/reference/compare.py`.

use burn::module::{AutodiffModule, Module};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::tensor::{Bool, Distribution, FloatDType, Tensor, TensorData};
use criterion::{criterion_group, Criterion, Throughput};
use models::precision::{ComputeModel, Materialize};
use models::{ConvTransformerConfig, GruModelConfig, ModelConfig, SignModel, TransformerConfig};
use trainer::bench::{pad_mask_host, synthetic_batch};
use trainer::config::ExperimentConfig;
use trainer::objective::Objective;
use trainer::optim::Optim;
use trainer::profile::Profiler;
use trainer::step::{train_step, StepSettings};
use trainer::{InnerBackend, TrainBackend};

const BATCH: usize = 64;
const FRAMES: usize = 64;
const FEATURES: usize = 469;
const CLASSES: usize = 250;

fn bench(c: &mut Criterion) {
    let device = device::dispatch_device(&device::Target::Cpu).unwrap();
    let configs = [
        ModelConfig::ConvTransformer(ConvTransformerConfig::default()),
        ModelConfig::Transformer(TransformerConfig::default()),
        ModelConfig::Gru(GruModelConfig::default()),
    ];
    for cfg in configs {
        let kind = cfg.kind();
        let mut g = c.benchmark_group(format!("train/{kind}"));
        g.sample_size(10);
        g.throughput(Throughput::Elements(BATCH as u64));
        let model: SignModel<TrainBackend> = cfg.init::<TrainBackend>(FEATURES, CLASSES, &device).map(&mut Materialize);
        let batch = synthetic_batch(BATCH, FRAMES, FEATURES, CLASSES, &device);
        let (x, mask, labels) = (batch.inputs.clone(), batch.pad_mask.clone(), batch.labels.clone());
        let loss_fn = CrossEntropyLossConfig::new().init::<TrainBackend>(&device);
        // Flex executes eagerly: when an op returns, its work is done (no device sync needed).
        g.bench_function("forward", |b| {
            b.iter(|| loss_fn.forward(model.forward(x.clone(), mask.clone()), labels.clone()).into_scalar())
        });
        g.bench_function("forward_backward", |b| {
            b.iter(|| loss_fn.forward(model.forward(x.clone(), mask.clone()), labels.clone()).backward())
        });
        let optimizer = ExperimentConfig::default().optimizer;
        let mut optim = Optim::new(&optimizer);
        let objective = Objective::new(models::Task::Classification, 0.0, &device);
        let settings = StepSettings::timing(FloatDType::F32, optimizer.clip_grad_norm);
        let mut prof = Profiler::new(false);
        let mut m = Some(model.clone());
        g.bench_function("step", |b| {
            b.iter(|| {
                let model = m.take().unwrap();
                let (next, _) =
                    train_step(&device, model, &mut optim, &objective, &settings, &mut prof, |_| Ok(batch.clone()))
                        .unwrap();
                m = Some(next);
            })
        });
        g.finish();

        let mut g = c.benchmark_group(format!("infer/{kind}"));
        g.sample_size(20);
        let infer = ComputeModel::<InnerBackend>::new(model.valid(), FloatDType::F32);
        for size in [1, BATCH] {
            let x =
                Tensor::<InnerBackend, 3>::random([size, FRAMES, FEATURES], Distribution::Normal(0.0, 1.0), &device);
            let mask = Tensor::<InnerBackend, 2, Bool>::from_data(
                TensorData::new(pad_mask_host(size, FRAMES), [size, FRAMES]),
                &device,
            );
            g.throughput(Throughput::Elements(size as u64));
            g.bench_function(format!("batch{size}"), |b| b.iter(|| infer.forward(x.clone(), mask.clone()).into_data()));
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
device::bench_main!(benches);
