//! Forward and forward+backward time per batch of every model on the CPU backend at a realistic
//! size (batch 32, 64 frames, 469 features, 250 classes).
//!
//! `cargo bench -p models --bench models`

use burn::backend::Autodiff;
use burn::tensor::{Bool, Distribution, Int, Tensor};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use models::{ConvTransformerConfig, GruModelConfig, ModelConfig, TransformerConfig};

type B = device::Backend;
type AD = Autodiff<device::Backend>;

fn bench(c: &mut Criterion) {
    let device = device::dispatch_device(&device::Target::Cpu).unwrap();
    let (batch, frames, features, classes) = (32, 64, 469, 250);
    let configs = [
        ModelConfig::ConvTransformer(ConvTransformerConfig::default()),
        ModelConfig::Transformer(TransformerConfig::default()),
        ModelConfig::Gru(GruModelConfig::default()),
    ];
    let mut mask_host = vec![false; batch * frames];
    for b in 0..batch {
        for t in frames - (b % 16)..frames {
            mask_host[b * frames + t] = true;
        }
    }
    let mut g = c.benchmark_group("models_cpu_b32_t64_f469");
    g.sample_size(10);
    g.throughput(Throughput::Elements(batch as u64));
    for cfg in configs {
        let kind = cfg.kind();
        let model = cfg.init::<B>(features, classes, &device);
        let x = Tensor::<B, 3>::random([batch, frames, features], Distribution::Normal(0.0, 1.0), &device);
        let mask =
            Tensor::<B, 2, Bool>::from_data(burn::tensor::TensorData::new(mask_host.clone(), [batch, frames]), &device);
        g.bench_function(format!("{kind}/forward"), |bch| {
            bch.iter(|| model.forward(x.clone(), mask.clone()).into_data())
        });
        let model = cfg.init::<AD>(features, classes, &device);
        let x = Tensor::<AD, 3>::random([batch, frames, features], Distribution::Normal(0.0, 1.0), &device);
        let mask = Tensor::<AD, 2, Bool>::from_data(
            burn::tensor::TensorData::new(mask_host.clone(), [batch, frames]),
            &device,
        );
        let labels = Tensor::<AD, 1, Int>::arange(0..batch as i64, &device);
        let loss_fn = burn::nn::loss::CrossEntropyLossConfig::new().init(&device);
        g.bench_function(format!("{kind}/forward_backward"), |bch| {
            bch.iter(|| {
                let loss = loss_fn.forward(model.forward(x.clone(), mask.clone()), labels.clone());
                // Flex executes eagerly, so backward() returning means the work is done.
                loss.backward()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
