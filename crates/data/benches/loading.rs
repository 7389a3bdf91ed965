//! Load + preprocess throughput (sequences/s): parsing ISLR parquet vs the preprocessed cache,
//! and building augmented training batches.
//!
//! `cargo bench -p data --bench loading`

use std::sync::Arc;

use criterion::{criterion_group, Criterion, Throughput};
use data::dataset::{LoadOptions, SignDataset};
use data::loader::{EpochLoader, ItemBatcher, LoaderConfig};
use data::preprocess::{PreprocessConfig, Preprocessor};
use data::synth::{generate, SynthConfig};

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = SynthConfig { classes: 10, signers: 4, repetitions: 4, ..Default::default() };
    generate(dir.path(), &cfg, false).unwrap();
    let idx = data::index::open(dir.path()).unwrap();
    let n = idx.entries.len() as u64;
    let pre = Preprocessor::new(PreprocessConfig::default()).unwrap();
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);

    let mut g = c.benchmark_group("load");
    g.sample_size(10);
    g.throughput(Throughput::Elements(n));
    g.bench_function("parquet_parse_and_normalize", |b| {
        b.iter(|| SignDataset::load(&idx, &pre, &LoadOptions { threads, ..Default::default() }).unwrap())
    });
    let cache = LoadOptions { threads, cache_dir: Some(dir.path().join("cache")), ..Default::default() };
    SignDataset::load(&idx, &pre, &cache).unwrap();
    g.bench_function("cached", |b| b.iter(|| SignDataset::load(&idx, &pre, &cache).unwrap()));
    g.finish();

    let ds = Arc::new(SignDataset::load(&idx, &pre, &cache).unwrap());
    let aug = data::augment::Augmenter::new(Default::default(), pre.mirror_of_kept(543));
    let batcher = ItemBatcher { preprocessor: Arc::new(pre.clone()), augmenter: Some(Arc::new(aug)), seed: 0 };
    let all: Vec<usize> = (0..ds.items.len()).collect();
    let mut g = c.benchmark_group("batches");
    g.sample_size(10);
    g.throughput(Throughput::Elements(n));
    for workers in [1, threads] {
        let lc = LoaderConfig { batch_size: 64, shuffle: true, drop_last: false, seed: 0, workers, prefetch: 4 };
        g.bench_function(format!("augmented_epoch_{workers}_workers"), |b| {
            b.iter(|| EpochLoader::start(ds.clone(), batcher.clone(), &all, &lc, 0, 0).count())
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
device::bench_main!(benches);
