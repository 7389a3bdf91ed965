//! CTC on the host: loss with its gradient, greedy and beam decoding (free and kept to a
//! lexicon of 5,000 words), in frames per second.
//!
//!     cargo bench --bench ctc -p models
//!
//! Shapes of the ASL Fingerspelling task: 60 classes (59 characters + blank), 128-frame
//! sequences, targets of 20 characters.

use std::hint::black_box;

use criterion::{criterion_group, Criterion, Throughput};

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

/// 5,000 distinct seeded words of 2 to 9 characters (classes 2..60; class 1 is the space).
fn lexicon() -> models::decode::Lexicon {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut next = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n) as usize
    };
    let mut words = std::collections::BTreeSet::new();
    while words.len() < 5000 {
        let len = 2 + next(8);
        words.insert((0..len).map(|_| 2 + next(CLASSES as u64 - 2)).collect::<Vec<usize>>());
    }
    let words: Vec<Vec<usize>> = words.into_iter().collect();
    models::decode::Lexicon::new(&words, Some(1), 0).expect("valid words")
}

fn bench(c: &mut Criterion) {
    let lp = log_probs();
    let lexicon = lexicon();
    let target: Vec<usize> = (0..20).map(|i| 1 + (i * 7) % (CLASSES - 1)).collect();
    let mut g = c.benchmark_group("ctc");
    g.throughput(Throughput::Elements(FRAMES as u64));
    g.bench_function("loss_and_gradient", |b| {
        b.iter(|| black_box(models::ctc::ctc_one(black_box(&lp), CLASSES, FRAMES, &target, 0)))
    });
    g.bench_function("greedy", |b| b.iter(|| black_box(models::decode::greedy(black_box(&lp), CLASSES, FRAMES, 0))));
    for width in [1, 8, 32] {
        g.bench_function(format!("beam_{width}"), |b| {
            b.iter(|| black_box(models::decode::beam(black_box(&lp), CLASSES, FRAMES, 0, width, None)))
        });
    }
    g.bench_function("beam_8_lexicon", |b| {
        b.iter(|| black_box(models::decode::beam(black_box(&lp), CLASSES, FRAMES, 0, 8, Some(&lexicon))))
    });
    g.finish();
}

criterion_group!(benches, bench);
device::bench_main!(benches);
