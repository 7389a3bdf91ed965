//! Automatic batch size (`training.batch_size = "auto"`, `trainer tune-batch`).
//!
//! - CPU: time full training steps (forward, backward, optimizer, in the run's precision) at
//!   power-of-two batch sizes and take the fastest in samples/s; stop at `max_batch_size`, when
//!   throughput falls clearly below the best, or when the process would use more than half of the
//!   machine's memory (projected from the measured growth).
//! - GPU: out-of-memory is not recoverable in-process in Burn 0.21 (the device thread panics),
//!   so each size is tried in a child process (`trainer __probe-batch`); sizes double until one
//!   fails, a bisection narrows the boundary, and a 10% safety margin is taken off.
//!
//! With `training.effective_batch_size`, `accumulation_steps` is set so the effective batch stays.

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::module::Module;
use burn::prelude::Backend;
use data::loader::ItemBatcher;
use models::precision::Materialize;
use models::SignModel;
use serde::Serialize;

use crate::config::ExperimentConfig;
use crate::inject::Faults;
use crate::objective::Objective;
use crate::optim::Optim;
use crate::profile::Profiler;
use crate::resolve::{ResolvedCompute, ResolvedData};
use crate::step::{train_step, StepSettings};
use crate::{Result, TrainBackend, TrainError};

/// One batch size tried.
#[derive(Debug, Clone, Serialize)]
pub struct TuneRow {
    /// Micro-batch size.
    pub batch: usize,
    /// Whether a full step ran.
    pub fits: bool,
    /// Milliseconds per step.
    pub step_ms: Option<f64>,
    /// Throughput at this size.
    pub samples_per_s: Option<f64>,
    /// Memory reading or the failure.
    pub note: String,
}

/// The search's table and choice (`batch-size.json`).
#[derive(Debug, Clone, Serialize)]
pub struct TuneReport {
    /// The device searched on.
    pub device: String,
    /// The compute precision of the timed steps.
    pub precision: String,
    /// Every size tried, in order.
    pub rows: Vec<TuneRow>,
    /// The chosen micro-batch.
    pub batch_size: usize,
    /// The accumulation that goes with it.
    pub accumulation_steps: usize,
    /// Why this size.
    pub reason: String,
}

impl TuneReport {
    /// The table printed by `tune-batch` and by a run with `batch_size = "auto"`.
    pub fn render(&self) -> String {
        let mut out = format!(
            "batch-size search on {} ({}):\n  batch  fits   step ms   samples/s  note\n",
            self.device, self.precision
        );
        for r in &self.rows {
            out += &format!(
                "  {:>5}  {:<5} {:>8}  {:>10}  {}\n",
                r.batch,
                if r.fits { "yes" } else { "no" },
                r.step_ms.map(|v| format!("{v:.1}")).unwrap_or("-".into()),
                r.samples_per_s.map(|v| format!("{v:.1}")).unwrap_or("-".into()),
                r.note
            );
        }
        out += &format!(
            "chosen: batch_size = {} x accumulation_steps = {} ({})\n",
            self.batch_size, self.accumulation_steps, self.reason
        );
        out
    }
}

/// `trainer tune-batch`: resolve device, precision and data as a run would, then search.
pub fn tune_batch(cfg: &ExperimentConfig, faults: &Faults) -> Result<TuneReport> {
    let _turn = crate::lock::turn(crate::lock::Streams::of_run(cfg));
    let compute = ResolvedCompute::resolve(cfg)?;
    let input = ResolvedData::resolve(cfg, false)?;
    search(cfg, &compute, &input, faults)
}

/// One batch-size probe (run in a child process by the GPU search): two full steps at `batch`.
/// Returns ms per step; an out-of-memory kills the process, which is the answer.
pub fn probe_batch(cfg: &ExperimentConfig, batch: usize, faults: &Faults) -> Result<f64> {
    let compute = ResolvedCompute::resolve(cfg)?;
    let input = ResolvedData::resolve(cfg, false)?;
    probe_steps(cfg, &compute, &input, batch, faults)
}

/// The probe's work: two timed steps at `batch` (an injected out-of-memory first, when the
/// fault plan says this size does not fit).
fn probe_steps(
    cfg: &ExperimentConfig,
    compute: &ResolvedCompute,
    input: &ResolvedData,
    batch: usize,
    faults: &Faults,
) -> Result<f64> {
    if faults.probe_fails(batch) {
        crate::inject::raise_injected_oom(batch);
    }
    time_steps(cfg, compute, input, batch, 2)
}

/// The batch-size search for the resolved device: measured throughput on the CPU, probes on
/// GPUs (in child processes of the trainer binary when one is found, see [`probe_program`]).
pub fn search(
    cfg: &ExperimentConfig,
    compute: &ResolvedCompute,
    input: &ResolvedData,
    faults: &Faults,
) -> Result<TuneReport> {
    if !compute.on_gpu() {
        return tune_cpu(cfg, compute, input);
    }
    let prober = match probe_program() {
        Some(exe) => Prober::Child(exe),
        None => Prober::InProcess,
    };
    tune_gpu(cfg, &prober, compute, input, faults)
}

/// The program whose hidden `__probe-batch` command runs GPU probes in a child process: this
/// process when it is the `trainer` binary; else `SIGNFLOW_TRAINER_BIN`; else a `trainer`
/// binary next to this executable or one directory up (test binaries live in
/// `target/<profile>/deps`); else `trainer` on `PATH`. `None` when there is none, as for an
/// application that embeds the trainer as a library without shipping the binary.
pub fn probe_program() -> Option<PathBuf> {
    let name = format!("trainer{}", std::env::consts::EXE_SUFFIX);
    let exe = std::env::current_exe().ok();
    if let Some(exe) = &exe {
        if exe.file_name().is_some_and(|n| n == name.as_str()) {
            return Some(exe.clone());
        }
    }
    if let Some(p) = std::env::var_os("SIGNFLOW_TRAINER_BIN").map(PathBuf::from).filter(|p| p.is_file()) {
        return Some(p);
    }
    let near = exe.iter().flat_map(|e| e.ancestors().skip(1).take(2).map(|d| d.join(&name)).collect::<Vec<_>>());
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).map(|d| d.join(&name)).collect::<Vec<_>>());
    near.chain(on_path).find(|p| p.is_file())
}

/// How a GPU batch-size probe runs.
#[derive(Debug, Clone)]
pub enum Prober {
    /// `exe __probe-batch` in a child process: an out-of-memory, even one that aborts the
    /// runtime, only ends the child.
    Child(PathBuf),
    /// In this process, catching the out-of-memory panic; a fault that aborts the runtime would
    /// end the process, so this is the fallback when no trainer binary is found.
    InProcess,
}

/// One probe in this process, a device fault caught: (fits, ms per step, note).
fn probe_in_process(
    cfg: &ExperimentConfig,
    compute: &ResolvedCompute,
    input: &ResolvedData,
    b: usize,
    faults: &Faults,
) -> (bool, Option<f64>, String) {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| probe_steps(cfg, compute, input, b, faults))) {
        Ok(Ok(ms)) => (true, Some(ms), "in process".to_string()),
        Ok(Err(e)) => (false, None, format!("failed: {e}")),
        Err(payload) => {
            let Some((_, message)) = crate::fault::device_fault(&*payload) else { std::panic::resume_unwind(payload) };
            device::empty_cache(compute.device());
            (false, None, format!("failed: {message}"))
        }
    }
}

/// One probe in a child process: (fits, ms per step, note).
fn probe_child(exe: &Path, config: &Path, b: usize, faults: &Faults) -> (bool, Option<f64>, String) {
    let out = std::process::Command::new(exe)
        .arg("__probe-batch")
        .arg("--config")
        .arg(config)
        .arg("--probe-batch")
        .arg(b.to_string())
        .args(faults.to_args())
        .output();
    match out {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout).to_string();
            let ms = text.split_whitespace().nth(1).and_then(|v| v.parse::<f64>().ok());
            (true, ms, String::new())
        }
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").to_string();
            (false, None, format!("failed ({}): {}", o.status, last.chars().take(120).collect::<String>()))
        }
        Err(e) => (false, None, format!("could not start the probe {}: {e}", exe.display())),
    }
}

/// Time `steps` full training steps (the run's step function, precision and optimizer) at batch
/// `b` on real (unaugmented) training items. Returns milliseconds per step after one warm-up step.
pub fn time_steps(
    cfg: &ExperimentConfig,
    compute: &ResolvedCompute,
    input: &ResolvedData,
    b: usize,
    steps: usize,
) -> Result<f64> {
    let device = compute.device();
    let ds = &input.data.dataset;
    let idx: Vec<usize> = input.data.train.iter().copied().cycle().take(b).collect();
    let batcher = ItemBatcher { preprocessor: input.preprocessor.clone(), augmenter: None, seed: 0 };
    let hb = batcher.host_batch(ds, &idx, 0);
    TrainBackend::seed(device, cfg.training.seed);
    let mut model: SignModel<TrainBackend> =
        cfg.model.init::<TrainBackend>(ds.features, ds.num_classes(), device).map(&mut Materialize);
    let mut optim = Optim::new(&cfg.optimizer);
    let objective = Objective::new(cfg.task, 0.0, device);
    let settings = StepSettings::timing(compute.precision.precision.float_dtype(), cfg.optimizer.clip_grad_norm);
    let mut prof = Profiler::new(false);
    let mut ms = 0.0;
    for i in 0..=steps {
        let start = Instant::now();
        let (next, _) =
            train_step(device, model, &mut optim, &objective, &settings, &mut prof, |_| Ok(hb.to_device(device)))?;
        model = next;
        device::memory::sync(device);
        if i > 0 {
            ms += start.elapsed().as_secs_f64() * 1e3;
        }
    }
    Ok(ms / steps.max(1) as f64)
}

/// Powers of two from `min` up to `max` (`[max]` when `max < min`).
fn candidates(min: usize, max: usize) -> Vec<usize> {
    let mut v = Vec::new();
    let mut b = min;
    while b <= max {
        v.push(b);
        b *= 2;
    }
    if v.is_empty() {
        v.push(max.max(1));
    }
    v
}

fn with_accumulation(cfg: &ExperimentConfig, b: usize) -> usize {
    if cfg.training.effective_batch_size > 0 {
        cfg.training.effective_batch_size.div_ceil(b).max(1)
    } else {
        cfg.training.accumulation_steps
    }
}

/// Pick the batch size on the CPU by measured throughput.
pub fn tune_cpu(cfg: &ExperimentConfig, compute: &ResolvedCompute, input: &ResolvedData) -> Result<TuneReport> {
    // Not so large that the run has too few steps to train: a small dataset caps the batch
    // (down to BatchNorm's minimum rows).
    let train = input.data.train.len().max(1);
    let t = &cfg.training;
    let for_steps = (crate::shape::MIN_NORM_ROWS..=t.max_batch_size.min(train))
        .rev()
        .find(|&b| crate::shape::total_steps(t, train, b, with_accumulation(cfg, b)) >= crate::shape::MIN_STEPS)
        .unwrap_or(crate::shape::MIN_NORM_ROWS.min(train));
    let max = t.max_batch_size.min(train).min(for_steps.max(1));
    let mut rows = Vec::new();
    let mut best: Option<(usize, f64)> = None;
    let base_rss = device::host_memory().map(|m| m.process_rss_bytes);
    // From BatchNorm's fewest useful rows.
    for b in candidates(crate::shape::MIN_NORM_ROWS, max) {
        let ms = time_steps(cfg, compute, input, b, 2)?;
        let sps = b as f64 * 1e3 / ms;
        let mem = device::host_memory();
        let mut note = String::new();
        let mut stop = false;
        if let (Some(m), Some(base)) = (mem, base_rss) {
            let grown = m.process_rss_bytes.saturating_sub(base);
            note = format!("rss {:.0} MiB", m.process_rss_bytes as f64 / 1048576.0);
            // Doubling the batch roughly doubles activation memory.
            if m.process_rss_bytes + 2 * grown > m.total_bytes / 2 {
                note += "; the next size would pass half of the machine's memory";
                stop = true;
            }
        }
        rows.push(TuneRow { batch: b, fits: true, step_ms: Some(ms), samples_per_s: Some(sps), note });
        match best {
            Some((_, s)) if sps < 0.85 * s => break,
            Some((_, s)) if sps <= s => {}
            _ => best = Some((b, sps)),
        }
        if stop {
            break;
        }
    }
    let (batch_size, sps) = best.ok_or_else(|| TrainError::Invalid("no batch size could be timed".into()))?;
    Ok(TuneReport {
        device: compute.device.selection.name.clone(),
        precision: compute.precision.precision.to_string(),
        rows,
        batch_size,
        accumulation_steps: with_accumulation(cfg, batch_size),
        reason: match max < cfg.training.max_batch_size.min(train) {
            true => format!(
                "highest measured throughput up to {max}, {sps:.1} samples/s (a larger batch would give fewer than {} optimizer steps over {train} training sequences)",
                crate::shape::MIN_STEPS
            ),
            false => format!("highest measured throughput, {sps:.1} samples/s"),
        },
    })
}

/// Pick the batch size on a GPU: the largest size whose probe gets through, less a margin.
pub fn tune_gpu(
    cfg: &ExperimentConfig,
    prober: &Prober,
    compute: &ResolvedCompute,
    input: &ResolvedData,
    faults: &Faults,
) -> Result<TuneReport> {
    let device_name = &compute.device.selection.name;
    let dir = tempfile::tempdir().map_err(|e| TrainError::io(std::env::temp_dir(), e))?;
    let config = dir.path().join("probe.toml");
    bundle::atomic::write_atomic(&config, cfg.to_toml().as_bytes())?;
    let mut rows = Vec::new();
    let probe = |b: usize, rows: &mut Vec<TuneRow>| -> bool {
        let (fits, ms, note) = match prober {
            Prober::Child(exe) => probe_child(exe, &config, b, faults),
            Prober::InProcess => probe_in_process(cfg, compute, input, b, faults),
        };
        rows.push(TuneRow { batch: b, fits, step_ms: ms, samples_per_s: ms.map(|m| b as f64 * 1e3 / m), note });
        fits
    };
    let max = cfg.training.max_batch_size.min(input.data.train.len().max(1));
    let (mut ok, mut fail) = (0usize, None);
    for b in candidates(4, max) {
        if probe(b, &mut rows) {
            ok = b;
        } else {
            fail = Some(b);
            break;
        }
    }
    if ok == 0 {
        return Err(TrainError::Invalid(format!(
            "even batch {} does not fit on {device_name}:\n{}",
            rows.first().map(|r| r.batch).unwrap_or(0),
            rows.iter().map(|r| r.note.clone()).collect::<Vec<_>>().join("\n")
        )));
    }
    let mut batch_size = ok;
    if let Some(mut hi) = fail {
        let mut lo = ok;
        for _ in 0..3 {
            let mid = (lo + hi) / 2;
            if mid <= lo {
                break;
            }
            if probe(mid, &mut rows) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        // A safety margin: memory use varies with sequence content and fragmentation.
        batch_size = ((lo as f64 * 0.9) as usize / 8 * 8).max(ok.min(8)).max(1);
    }
    Ok(TuneReport {
        device: device_name.clone(),
        precision: compute.precision.precision.to_string(),
        rows,
        batch_size,
        accumulation_steps: with_accumulation(cfg, batch_size),
        reason: if fail.is_some() {
            "largest size that fits, less a 10% margin".into()
        } else {
            format!("every size up to max_batch_size / the training set ({max}) fits")
        },
    })
}
