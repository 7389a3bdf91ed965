//! Batch inference from files, 160 synthetic ISLR parquet sequences, batches of 32, CPU backend,
//! the default experiment's model (conv-transformer dim 64, 32-frame window; untrained weights,
//! timing does not depend on them):
//!
//! - `predict_files/read_ahead`: `Predictor::predict_files`, which reads and prepares the next
//!   batch on worker threads while the model runs the current one (what `infer predict` and
//!   `infer eval` do);
//! - `predict_files/sequential`: the same work in sequence on one thread (read a batch, then run
//!   it), as `infer predict` did before.
//!
//! `cargo bench -p infer --bench predict_files`

use std::hint::black_box;
use std::path::PathBuf;

use bundle::ModelCard;
use burn::module::Module;
use criterion::{criterion_group, Criterion, Throughput};
use infer::{Classifier, PredictorOptions};

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = trainer::config::ConfigBuilder::new().build().unwrap();
    let synth = data::synth::SynthConfig { classes: 10, signers: 4, repetitions: 4, ..cfg.synthetic.clone() };
    let generated = data::synth::generate(&tmp.path().join("data"), &synth, false).unwrap();
    let index = data::index::open(&generated.root).unwrap();
    let files: Vec<PathBuf> = index.entries.iter().map(|e| e.path.clone()).collect();

    let pre = data::preprocess::Preprocessor::new(cfg.preprocess.clone()).unwrap();
    let features = pre.output_features(true, data::layout::NUM_LANDMARKS);
    let device = device::dispatch_device(&device::Target::Cpu).unwrap();
    let model = cfg.model.init::<device::Backend>(features, index.labels.len(), &device);
    let card =
        ModelCard::new(cfg.model.clone(), cfg.preprocess.clone(), features, index.labels.clone(), model.num_params());
    let model_dir = tmp.path().join("model");
    bundle::write_bundle(&model_dir, &model, &card, "").unwrap();
    let opts = PredictorOptions { device: device::DeviceSpec::Cpu, ..Default::default() };
    let predictor = Classifier::load(&model_dir, &opts).unwrap();

    let mut g = c.benchmark_group("predict_files");
    g.sample_size(10);
    g.throughput(Throughput::Elements(files.len() as u64));
    g.bench_function("read_ahead", |b| {
        b.iter(|| {
            predictor
                .predict_files(&files, 32, |_, r| {
                    black_box(r.unwrap());
                })
                .unwrap()
        })
    });
    g.bench_function("sequential", |b| {
        b.iter(|| {
            for chunk in files.chunks(32) {
                let samples: Vec<_> = chunk.iter().map(|f| predictor.read_file(f).unwrap()).collect();
                black_box(predictor.predict_batch(&samples).unwrap());
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
device::bench_main!(benches);
