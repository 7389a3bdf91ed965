//! Step-phase profiling (`--profile`): where a training step's time goes.

use std::time::{Duration, Instant};

use serde::Serialize;

type Device = device::DispatchDevice;

/// The phases of a training step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for the data loader and copying the batch to the device.
    Data,
    /// Forward pass and loss.
    Forward,
    /// Backward pass and gradient accumulation.
    Backward,
    /// Finite check, gradient norm, clipping and the optimizer update.
    Optimizer,
}

/// Step-phase timer. Enabled, it syncs the device at each phase boundary (so asynchronous GPU
/// work is charged to the phase that queued it); disabled, it costs nothing and adds no syncs.
#[derive(Debug, Default, Clone)]
pub struct Profiler {
    /// Whether phases are timed.
    pub enabled: bool,
    /// Time per [`Phase`] (data, forward, backward, optimizer).
    pub phases: [Duration; 4],
    /// Whole-step time.
    pub total: Duration,
    /// Steps timed.
    pub steps: usize,
}

impl Profiler {
    /// A profiler that times (`enabled`) or does nothing.
    pub fn new(enabled: bool) -> Self {
        Self { enabled, ..Default::default() }
    }

    /// Charge the time since `since` to `phase` (after a device sync) and return now.
    pub fn mark(&mut self, device: &Device, phase: Phase, since: Instant) -> Instant {
        if self.enabled {
            device::memory::sync(device);
            self.phases[phase as usize] += since.elapsed();
        }
        Instant::now()
    }

    /// Milliseconds charged to `phase` so far.
    pub fn ms(&self, phase: Phase) -> f64 {
        self.phases[phase as usize].as_secs_f64() * 1e3
    }

    fn accounted(&self) -> Duration {
        self.phases.iter().sum()
    }

    /// Close a step that started at `start`.
    pub fn end_step(&mut self, start: Instant) {
        if self.enabled {
            self.total += start.elapsed();
            self.steps += 1;
        }
    }

    /// Rows of (phase, ms per step, share of step time), "other" last.
    pub fn table(&self) -> Vec<ProfileRow> {
        let steps = self.steps.max(1) as f64;
        let total = self.total.as_secs_f64().max(1e-12);
        let other = (self.total.saturating_sub(self.accounted())).as_secs_f64();
        let names = ["data wait", "forward", "backward", "optimizer"];
        let mut rows: Vec<ProfileRow> = names
            .iter()
            .zip(self.phases)
            .map(|(n, d)| ProfileRow {
                phase: (*n).into(),
                ms_per_step: d.as_secs_f64() * 1e3 / steps,
                share: d.as_secs_f64() / total,
            })
            .collect();
        rows.push(ProfileRow { phase: "other".into(), ms_per_step: other * 1e3 / steps, share: other / total });
        rows
    }

    /// The report of the steps timed so far; `effective_batch` samples per step.
    pub fn report(&self, effective_batch: usize, gpu_mean_utilization_pct: Option<f64>) -> ProfileReport {
        let ms = self.total.as_secs_f64() * 1e3 / self.steps.max(1) as f64;
        ProfileReport {
            steps: self.steps,
            ms_per_step: ms,
            samples_per_s: effective_batch as f64 * 1e3 / ms.max(1e-9),
            phases: self.table(),
            gpu_mean_utilization_pct,
        }
    }
}

/// One phase's line of a [`ProfileReport`].
#[derive(Debug, Clone, Serialize)]
pub struct ProfileRow {
    /// `data wait`, `forward`, `backward`, `optimizer` or `other`.
    pub phase: String,
    /// Mean milliseconds per step.
    pub ms_per_step: f64,
    /// Share of the step time.
    pub share: f64,
}

/// `summary.json`'s `profile` (with `--profile`).
#[derive(Debug, Clone, Serialize)]
pub struct ProfileReport {
    /// Steps timed.
    pub steps: usize,
    /// Mean step time.
    pub ms_per_step: f64,
    /// Effective-batch samples per second.
    pub samples_per_s: f64,
    /// Per-phase figures.
    pub phases: Vec<ProfileRow>,
    /// Mean GPU utilization over the run (CUDA with NVML).
    pub gpu_mean_utilization_pct: Option<f64>,
}

impl ProfileReport {
    /// The table printed at the end of a profiled run.
    pub fn render(&self) -> String {
        let mut out = format!(
            "step profile ({} steps, {:.1} ms/step, {:.1} samples/s):\n",
            self.steps, self.ms_per_step, self.samples_per_s
        );
        for r in &self.phases {
            out += &format!("  {:<10} {:>9.1} ms ({:>4.1}%)\n", r.phase, r.ms_per_step, 100.0 * r.share);
        }
        if let Some(u) = self.gpu_mean_utilization_pct {
            out += &format!("  GPU utilization (mean): {u:.0}%\n");
        }
        out
    }
}
