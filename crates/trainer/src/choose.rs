//! Workload-aware device choice (`device.choose = "fastest"`): the fixed ranking puts any GPU
//! before the CPU, but for a small model or batch the CPU can win (kernel launches, transfers and,
//! on software adapters such as llvmpipe, emulation cost more than the arithmetic). Here every
//! usable kind of device (the CPU, the best CUDA GPU, the best WGPU adapter) runs a few real
//! training steps of the run's model at the run's batch shape, and the fastest is taken, with the
//! figures in the reason.

use std::time::Instant;

use crate::bench::{time_train_steps, BenchOptions};
use crate::config::ExperimentConfig;
use crate::resolve::{ResolvedCompute, ResolvedData};
use crate::Result;

/// Timed training steps per candidate (after two warm-up steps).
pub const TIMED_STEPS: usize = 3;

/// One candidate's measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The device's name.
    pub name: String,
    /// Training samples/s at the run's batch (median step).
    pub samples_per_s: f64,
    /// Seconds the measurement took (warm-up and kernel compilation included).
    pub seconds: f64,
}

/// Time every usable device on `cfg`'s model with the run's batch (32 while the batch size is
/// still `"auto"`), window and features, and return the fastest with its precision. `ranked` is
/// the fixed ranking's choice, returned as it is when it is the only usable device.
pub fn fastest(cfg: &ExperimentConfig, input: &ResolvedData, ranked: ResolvedCompute) -> Result<ResolvedCompute> {
    let (found, skipped) = device::candidates(&cfg.device.policy());
    if found.len() < 2 {
        let mut r = ranked;
        r.device.selection.reason = format!(
            "fastest: the only usable device ({})",
            if skipped.is_empty() { "no other kind".into() } else { skipped.join("; ") }
        );
        return Ok(r);
    }
    let ds = &input.data.dataset;
    let opts = BenchOptions {
        batch: cfg.training.batch_size.fixed().unwrap_or(32),
        frames: cfg.preprocess.window,
        features: ds.features,
        classes: ds.num_classes().max(2),
        steps: TIMED_STEPS,
        latency_runs: 0,
    };
    let mut timed: Vec<(ResolvedCompute, Candidate)> = Vec::new();
    for d in found {
        let precision = cfg.training.precision.resolve(&d.selection.capabilities);
        let compute = ResolvedCompute { device: d, precision, peers: Vec::new() };
        let t0 = Instant::now();
        let steps = time_train_steps(cfg, &compute, &opts)?;
        let c = Candidate {
            name: compute.device.selection.name.clone(),
            samples_per_s: opts.batch as f64 / steps.step_ms() * 1e3,
            seconds: t0.elapsed().as_secs_f64(),
        };
        device::empty_cache(compute.device());
        timed.push((compute, c));
    }
    let best = timed
        .iter()
        .enumerate()
        .max_by(|a, b| a.1 .1.samples_per_s.total_cmp(&b.1 .1.samples_per_s))
        .map_or(0, |(i, _)| i);
    let figures: Vec<(String, String)> = timed
        .iter()
        .map(|(_, c)| (c.name.clone(), format!("{:.0} samples/s ({:.1} s to measure)", c.samples_per_s, c.seconds)))
        .collect();
    let (mut compute, _) = timed.swap_remove(best);
    compute.device.selection.reason = device::candidates::fastest_reason(
        &figures,
        &format!(
            "{TIMED_STEPS} timed training steps of the {} model at batch {} x {} frames x {} features",
            cfg.model.kind(),
            opts.batch,
            opts.frames,
            opts.features
        ),
    );
    Ok(compute)
}
