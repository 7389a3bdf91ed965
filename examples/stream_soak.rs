//! Soak test of the streaming recognizer: push a long live stream (default 100,000 frames of
//! synthetic signs by an unseen signer, with pauses) through one `StreamingRecognizer` and print,
//! per block of frames, the process's resident memory and the push latency (p50, p99, max), so
//! memory growth or slowing down over time shows. `scripts/soak.sh` runs it.
//!
//! ```bash
//! cargo run --release -p infer --example stream_soak -- runs/demo [FRAMES] [BLOCK]
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use infer::{Predictor, PredictorOptions, StreamConfig, StreamingRecognizer};

/// Resident memory of this process, MiB (Linux; 0 elsewhere).
fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).map(str::to_owned))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|kb| kb.parse::<f64>().ok()))
        .map_or(0.0, |kb| kb / 1024.0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    device::keep_freed_memory();
    device::quiet_headless_env();
    let mut args = std::env::args().skip(1);
    let run_dir = args.next().ok_or("usage: stream_soak RUN_DIR [FRAMES] [BLOCK]")?;
    let frames: usize = args.next().map(|v| v.parse()).transpose()?.unwrap_or(100_000);
    let block: usize = args.next().map(|v| v.parse()).transpose()?.unwrap_or(10_000);
    let predictor = Arc::new(Predictor::load(run_dir.as_ref(), &PredictorOptions::default())?);
    let mut recognizer = StreamingRecognizer::new(predictor.clone(), StreamConfig::default())?;
    let synth = data::synth::SynthConfig { classes: predictor.labels().len(), ..Default::default() };
    // A fixed set of recordings, replayed in a cycle with a pause (hands out of view) after each.
    let hands = data::layout::named_subset("hands").ok_or("no `hands` landmark subset")?;
    let mut clips: Vec<Vec<Vec<[f32; 3]>>> = Vec::new();
    for class in 0..synth.classes {
        let seq = data::synth::generate_sequence(&synth, class, 99, 0);
        let mut clip: Vec<Vec<[f32; 3]>> =
            (0..seq.frames()).map(|t| (0..seq.points).map(|p| seq.at(t, p)).collect()).collect();
        let mut rest = clip.last().cloned().unwrap_or_default();
        for &h in &hands {
            rest[h] = [f32::NAN; 3];
        }
        clip.extend(std::iter::repeat_n(rest, 12));
        clips.push(clip);
    }
    let cycle: Vec<&Vec<[f32; 3]>> = clips.iter().flatten().collect();
    println!(
        "model: {} signs on {}; {frames} frames in blocks of {block}",
        predictor.labels().len(),
        predictor.device_name()
    );
    println!("{:>9} {:>9} {:>8} {:>9} {:>9} {:>9}", "frames", "rss_mib", "events", "p50_us", "p99_us", "max_us");
    let (mut events, mut lat) = (0usize, Vec::with_capacity(block));
    let start = Instant::now();
    for i in 0..frames {
        let t = Instant::now();
        events += recognizer.push(i as i64, cycle[i % cycle.len()])?.len();
        lat.push(t.elapsed());
        if (i + 1) % block == 0 || i + 1 == frames {
            lat.sort();
            let us = |q: f64| lat[((lat.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
            println!(
                "{:>9} {:>9.1} {:>8} {:>9.1} {:>9.1} {:>9.1}",
                i + 1,
                rss_mib(),
                events,
                us(0.5),
                us(0.99),
                lat.last().copied().unwrap_or(Duration::ZERO).as_secs_f64() * 1e6
            );
            lat.clear();
        }
    }
    events += recognizer.finish()?.len();
    println!("{frames} frames in {:.1} s, {events} sign events", start.elapsed().as_secs_f64());
    Ok(())
}
