//! CTC on the host: loss with its gradient, greedy and beam decoding, in frames per second.
//!
//!     cargo bench --bench ctc -p models
//!
//! Shapes of the ASL Fingerspelling task: 60 classes (59 characters + blank), 128-frame
//! sequences, targets of 20 characters.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

const CLASSES: usize = 60;
const FRAMES: usize = 128;

/// Log-softmax rows of seeded pseudo-random logits, peaked like a trained model's.
fn log_probs() -> Vec<f32> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut out = Vec::with_capacity(FRAMES * CLASSES);
    for _ in 0..FRAMES {
        let row: Vec<f64> = (0..CLASSES)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ((x >> 11) as f64 / (1u64 << 53) as f64) * 8.0
            })
            .collect();
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let lse = m + row.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
        out.extend(row.iter().map(|v| (v - lse) as f32));
    }
    out
}

fn bench(c: &mut Criterion) {
    let lp = log_probs();
    let target: Vec<usize> = (0..20).map(|i| 1 + (i * 7) % (CLASSES - 1)).collect();
    let mut g = c.benchmark_group("ctc");
    g.throughput(Throughput::Elements(FRAMES as u64));
    g.bench_function("loss_and_gradient", |b| {
        b.iter(|| black_box(models::ctc::ctc_one(black_box(&lp), CLASSES, FRAMES, &target, 0)))
    });
    g.bench_function("greedy", |b| b.iter(|| black_box(models::decode::greedy(black_box(&lp), CLASSES, FRAMES, 0))));
    for width in [1, 8, 32] {
        g.bench_function(format!("beam_{width}"), |b| {
            b.iter(|| black_box(models::decode::beam(black_box(&lp), CLASSES, FRAMES, 0, width)))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
