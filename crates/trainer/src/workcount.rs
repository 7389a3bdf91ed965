//! `trainer bench --count`: the device work of one training step, counted exactly: kernels
//! launched (by name), kernels compiled, and the times the host waited for the device, with the
//! host time the step takes to issue. The counts depend on the code, not on the GPU, so a WGPU
//! software adapter (llvmpipe) gives a CUDA card's counts; the step is the training loop's
//! ([`crate::step::queue_step`]) with the settings of a step that does not log, its outcome
//! settled after the counted steps as the loop settles once per log interval. Inference is
//! counted too: the trained model's forward pass at batch 1 and at the bench's batch, each pass
//! as an application runs one (inputs uploaded, logits read back).
//!
//! The process must have been configured to log launches ([`device::runtime::configure`] with a
//! log file) before any device was used.

use std::time::Instant;

use burn::module::{AutodiffModule, Module};
use burn::prelude::Backend;
use burn::tensor::{Bool, Tensor, TensorData};
use device::counters::{WorkCounter, WorkCounts};
use device::thread_cpu::ThreadCpu;
use models::precision::{ComputeModel, Materialize};
use models::SignModel;
use serde::Serialize;

use crate::bench::{synthetic_batch, BenchOptions};
use crate::config::ExperimentConfig;
use crate::objective::Objective;
use crate::optim::Optim;
use crate::profile::Profiler;
use crate::resolve::ResolvedCompute;
use crate::step::{compute_gradients, queue_gradients, queue_step, settle, PendingOutcome, StepSettings};
use crate::{InnerBackend, Result, TrainBackend, TrainError};

/// Untimed steps before counting: the first compiles and tunes, the second and third may still
/// meet kernels the first did not (the optimizer's state exists from the second step on; the
/// third is the first whose inputs all come from steps like itself, their outcomes unread).
const WARM_UP: usize = 3;

/// What `trainer bench --count` reports.
#[derive(Debug, Clone, Serialize)]
pub struct CountReport {
    /// `model.kind`.
    pub model: String,
    /// The device's name.
    pub device: String,
    /// Compute precision.
    pub precision: String,
    /// Batch size.
    pub batch: usize,
    /// Frames per sequence.
    pub frames: usize,
    /// Counted steps.
    pub steps: usize,
    /// Kernels launched per step.
    pub launches_per_step: f64,
    /// The forward and backward passes' launches in one extra step split by a sync (which can
    /// cut a fusion block, so with [`Self::launches_update`] a launch more than a step).
    pub launches_forward_backward: u64,
    /// The update's launches in that step: gather, norm, clipping, finite check, optimizer.
    pub launches_update: u64,
    /// Host waits per step (reads + syncs + re-seeds).
    pub host_waits_per_step: f64,
    /// Reads of tensor data per step.
    pub reads_per_step: f64,
    /// Syncs per step.
    pub syncs_per_step: f64,
    /// Re-seeds per step.
    pub seeds_per_step: f64,
    /// Operations registered with Burn's fusion layer per step, tensor drops included: the host
    /// work that does not depend on the device, paid whether or not an operation launches.
    pub fusion_ops_per_step: f64,
    /// Of these, tensor drops.
    pub fusion_drops_per_step: f64,
    /// Fusion execution plans run per step.
    pub fusion_plans_per_step: f64,
    /// Kernels compiled in the warm-up steps (a new shape's cost).
    pub compiled_in_warm_up: u64,
    /// Kernels compiled in the counted steps (0 once every shape has been seen).
    pub compiled_in_counted: u64,
    /// Wall time of the first step, compilation and autotuning included, s.
    pub first_step_s: f64,
    /// Median host time of a counted step: until the step function returns, waits included, ms.
    pub host_ms_per_step: f64,
    /// CPU time per counted step of each of the process's threads, by thread name, most first
    /// (ms; Linux): the caller's (named after the program), Burn fusion's device thread and
    /// cubecl's compute server, whose launches a software adapter also runs. A thread waiting
    /// on cubecl's device channel is charged too (it spins, then yields, before it sleeps), so
    /// this bounds each thread's work from above: a thread charged well under the step's wall
    /// time is not the one a host-bound step waits for. Empty where not measured.
    pub thread_cpu_ms_per_step: Vec<(String, f64)>,
    /// Launches per step by kernel name, most first.
    pub kernels: Vec<(String, f64)>,
    /// The update's launches (of the extra step) by kernel name, most first.
    pub update_kernels: Vec<(String, u64)>,
    /// Inference passes of the trained model at batch 1 and at the bench's batch.
    pub inference: Vec<InferenceCount>,
}

/// The work of one inference pass: the inputs and padding mask uploaded, the forward pass in
/// the compute precision, the logits read back (an application's `predict`).
#[derive(Debug, Clone, Serialize)]
pub struct InferenceCount {
    /// Sequences per pass.
    pub batch: usize,
    /// Kernels launched per pass.
    pub launches: f64,
    /// Operations registered with Burn's fusion layer per pass, tensor drops included.
    pub fusion_ops: f64,
    /// Of these, tensor drops.
    pub fusion_drops: f64,
    /// Fusion execution plans run per pass.
    pub fusion_plans: f64,
    /// Host waits per pass (the logits' read is one).
    pub host_waits: f64,
    /// Kernels compiled in the counted passes (0 once the warm-up met every shape).
    pub compiled_in_counted: u64,
    /// Median host time of a pass, the read included, ms.
    pub host_ms: f64,
    /// Launches per pass by kernel name, most first.
    pub kernels: Vec<(String, f64)>,
}

impl CountReport {
    /// The report as printed.
    pub fn render(&self) -> String {
        let mut s = format!(
            "{} on {} ({}), batch {} x {} frames, {} counted steps\n\
             per step: {:.0} kernel launches ({} forward and backward + {} update in one more step split by a sync), {:.0} host waits \
             ({:.0} reads, {:.0} syncs, {:.0} re-seeds), host time {:.1} ms\n\
             fusion: {:.0} operations registered ({:.0} of them tensor drops), {:.0} plans run\n\
             kernels compiled: {} in the {} warm-up steps (first step {:.1} s), {} in the counted steps\n",
            self.model,
            self.device,
            self.precision,
            self.batch,
            self.frames,
            self.steps,
            self.launches_per_step,
            self.launches_forward_backward,
            self.launches_update,
            self.host_waits_per_step,
            self.reads_per_step,
            self.syncs_per_step,
            self.seeds_per_step,
            self.host_ms_per_step,
            self.fusion_ops_per_step,
            self.fusion_drops_per_step,
            self.fusion_plans_per_step,
            self.compiled_in_warm_up,
            WARM_UP,
            self.first_step_s,
            self.compiled_in_counted,
        );
        if !self.thread_cpu_ms_per_step.is_empty() {
            let threads: Vec<String> = self
                .thread_cpu_ms_per_step
                .iter()
                .filter(|(_, ms)| *ms >= 0.01)
                .take(6)
                .map(|(name, ms)| format!("{name} {ms:.2}"))
                .collect();
            s.push_str(&format!("host CPU per step by thread, ms: {}\n", threads.join(", ")));
        }
        s.push_str("most launched kernels (per step):\n");
        for (name, n) in self.kernels.iter().take(12) {
            s.push_str(&format!("  {n:>7.1}  {name}\n"));
        }
        for i in &self.inference {
            s.push_str(&format!(
                "inference, batch {}: {:.0} kernel launches, {:.0} fusion operations ({:.0} drops, {:.0} plans), \
                 {:.0} host waits, {} compiled when counting, host time {:.1} ms per pass\n",
                i.batch,
                i.launches,
                i.fusion_ops,
                i.fusion_drops,
                i.fusion_plans,
                i.host_waits,
                i.compiled_in_counted,
                i.host_ms
            ));
        }
        s
    }
}

/// Count the work of `opts.steps` training steps of `cfg`'s model on random data of `opts`'s
/// shape, after [`WARM_UP`] steps, on `compute`'s device (a WGPU or CUDA one: the CPU launches
/// no kernels).
pub fn count(
    cfg: &ExperimentConfig,
    compute: &ResolvedCompute,
    opts: &BenchOptions,
    counter: &WorkCounter,
) -> Result<CountReport> {
    if compute.device.selection.target == device::Target::Cpu {
        return Err(TrainError::Invalid(
            "--count counts GPU kernels: pick a WGPU or CUDA device (--device wgpu or cuda)".into(),
        ));
    }
    opts.check()?;
    // The model's init is seeded from Burn's process-wide generator, and the counts are the
    // process's: nothing else may run meanwhile.
    let _guard = crate::lock::run_lock();
    let device = compute.device();
    let precision = compute.precision.precision;
    let read = || counter.read().map_err(|e| TrainError::Invalid(format!("reading the kernel launch log: {e}")));
    TrainBackend::seed(device, cfg.training.seed);
    let model: SignModel<TrainBackend> =
        cfg.model.init::<TrainBackend>(opts.features, opts.classes, device).map(&mut Materialize);
    let mut optim = Optim::new(&cfg.optimizer);
    let objective = Objective::new(models::Task::Classification, 0.0, device);
    let batch = synthetic_batch(opts.batch, opts.frames, opts.features, opts.classes, device);
    // A loop step that does not log or checkpoint: no re-seed, no memory sampling.
    let base = StepSettings::timing(precision.float_dtype(), cfg.optimizer.clip_grad_norm);
    device::memory::sync(device);
    let start = read()?;
    let Steps { model, pending, warm, after, first_step_s, mut host_ms, thread_cpu } =
        run_steps(device, model, &mut optim, &objective, &base, &batch, opts.steps, cfg.training.seed, &read)?;
    let counted = after.clone() - warm.clone();
    let (model, split, forward_backward, update) =
        split_step(device, model, &mut optim, &objective, &base, &batch, &read)?;
    // The read the loop makes once per log interval.
    let _ = settle(pending.into_iter().chain([split]).collect(), &mut optim);
    let infer = engine::inference_model(model.valid(), precision.float_dtype());
    let inputs = batch.inputs.inner().into_data();
    let mut batches = vec![1, opts.batch];
    batches.dedup();
    let inference = batches
        .into_iter()
        .map(|b| count_inference(device, &infer, &inputs, b, opts, &read))
        .collect::<Result<Vec<_>>>()?;
    let warm = warm - start;
    let n = opts.steps.max(1) as f64;
    // The syncs this function makes itself (one after the counted steps) are not the step's.
    let own_syncs = 1;
    let per = |v: u64| v as f64 / n;
    host_ms.sort_by(f64::total_cmp);
    Ok(CountReport {
        model: cfg.model.kind().to_string(),
        device: compute.device.selection.name.clone(),
        precision: precision.to_string(),
        batch: opts.batch,
        frames: opts.frames,
        steps: opts.steps,
        launches_per_step: per(counted.launches),
        host_waits_per_step: per(counted.host_waits().saturating_sub(own_syncs)),
        reads_per_step: per(counted.reads),
        syncs_per_step: per(counted.syncs.saturating_sub(own_syncs)),
        seeds_per_step: per(counted.seeds),
        fusion_ops_per_step: per(counted.operations),
        fusion_drops_per_step: per(counted.drops),
        fusion_plans_per_step: per(counted.plans),
        compiled_in_warm_up: warm.compilations,
        compiled_in_counted: counted.compilations,
        first_step_s,
        host_ms_per_step: host_ms.get(host_ms.len() / 2).copied().unwrap_or(f64::NAN),
        thread_cpu_ms_per_step: thread_cpu.into_iter().map(|(name, d)| (name, d.as_secs_f64() * 1e3 / n)).collect(),
        launches_forward_backward: forward_backward.launches,
        launches_update: update.launches,
        update_kernels: update.top_kernels(usize::MAX).into_iter().map(|(k, c)| (k.to_string(), c)).collect(),
        kernels: counted.top_kernels(usize::MAX).into_iter().map(|(k, c)| (k.to_string(), per(c))).collect(),
        inference,
    })
}

/// Untimed inference passes before counting (the first compiles and tunes).
const INFER_WARM_UP: usize = 2;

/// The work of `opts.steps` inference passes of `model` at batch `batch` (the first `batch`
/// sequences of `inputs`, `[opts.batch, frames, features]` on the host, the last frame of all
/// but the first sequence padding, as in training), after [`INFER_WARM_UP`] passes.
fn count_inference(
    device: &device::DispatchDevice,
    model: &ComputeModel<InnerBackend>,
    inputs: &TensorData,
    batch: usize,
    opts: &BenchOptions,
    read: &dyn Fn() -> Result<WorkCounts>,
) -> Result<InferenceCount> {
    let per_sample = opts.frames * opts.features;
    let values: Vec<f32> = inputs.iter::<f32>().take(batch * per_sample).collect();
    let mask = crate::bench::pad_mask_host(batch, opts.frames);
    let pass = || {
        let x = Tensor::<InnerBackend, 3>::from_data(
            TensorData::new(values.clone(), [batch, opts.frames, opts.features]),
            device,
        );
        let m = Tensor::<InnerBackend, 2, Bool>::from_data(TensorData::new(mask.clone(), [batch, opts.frames]), device);
        let _ = model.forward(x, m).into_data();
    };
    (0..INFER_WARM_UP).for_each(|_| pass());
    device::memory::sync(device);
    let before = read()?;
    let mut host_ms = Vec::with_capacity(opts.steps);
    for _ in 0..opts.steps.max(1) {
        let t0 = Instant::now();
        pass();
        host_ms.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    device::memory::sync(device);
    let counted = read()? - before;
    let n = opts.steps.max(1) as f64;
    host_ms.sort_by(f64::total_cmp);
    Ok(InferenceCount {
        batch,
        launches: counted.launches as f64 / n,
        fusion_ops: counted.operations as f64 / n,
        fusion_drops: counted.drops as f64 / n,
        fusion_plans: counted.plans as f64 / n,
        // The sync after the counted passes is this function's, not a pass's.
        host_waits: counted.host_waits().saturating_sub(1) as f64 / n,
        compiled_in_counted: counted.compilations,
        host_ms: host_ms[host_ms.len() / 2],
        kernels: counted.top_kernels(usize::MAX).into_iter().map(|(k, c)| (k.to_string(), c as f64 / n)).collect(),
    })
}

/// The work of one more step queued as the counted ones are (its outcome left unread after
/// theirs), split by a sync where the update begins: (the model after it, its outcome, forward
/// and backward, update). The sync ends the forward pass's last fusion block early, so the two
/// parts can add up to a launch more than a step.
fn split_step(
    device: &device::DispatchDevice,
    model: SignModel<TrainBackend>,
    optim: &mut Optim,
    objective: &Objective,
    settings: &StepSettings,
    batch: &data::loader::SignBatch<TrainBackend>,
    read: &dyn Fn() -> Result<WorkCounts>,
) -> Result<(SignModel<TrainBackend>, PendingOutcome, WorkCounts, WorkCounts)> {
    let mut prof = Profiler::new(false);
    let before = read()?;
    let precast = crate::step::precast(device, &model, optim, settings);
    let grads =
        compute_gradients(device, &model, precast, objective, settings, &[1.0], &mut prof, |_| Ok(batch.clone()))?;
    device::memory::sync(device);
    let mid = read()?;
    let (model, outcome) = queue_gradients(device, model, optim, settings, grads, &mut prof);
    device::memory::sync(device);
    let end = read()?;
    Ok((model, outcome, mid.clone() - before, end - mid))
}

/// What the warm-up and the counted steps left.
struct Steps {
    /// The model after them.
    model: SignModel<TrainBackend>,
    /// Their outcomes, unread.
    pending: Vec<PendingOutcome>,
    /// The counters after the warm-up.
    warm: WorkCounts,
    /// The counters after the counted steps.
    after: WorkCounts,
    /// The first step's wall time (compilation included).
    first_step_s: f64,
    /// The host time each counted step took to issue (ms).
    host_ms: Vec<f64>,
    /// CPU time of each thread (by name) over the counted steps, until the device finished them.
    thread_cpu: Vec<(String, std::time::Duration)>,
}

/// [`WARM_UP`] steps, then `steps` counted ones, queued as the loop queues them (seeded at the
/// first step only, as the loop seeds after a checkpoint only; nothing read in between).
#[allow(clippy::too_many_arguments)]
fn run_steps(
    device: &device::DispatchDevice,
    mut model: SignModel<TrainBackend>,
    optim: &mut Optim,
    objective: &Objective,
    base: &StepSettings,
    batch: &data::loader::SignBatch<TrainBackend>,
    steps: usize,
    seed: u64,
    read: &dyn Fn() -> Result<WorkCounts>,
) -> Result<Steps> {
    let mut first_step_s = 0.0;
    let mut host_ms = Vec::with_capacity(steps);
    let mut warm = WorkCounts::default();
    let mut pending = Vec::with_capacity(WARM_UP + steps);
    let mut cpu_warm = ThreadCpu::default();
    for i in 0..WARM_UP + steps {
        let t0 = Instant::now();
        let mut prof = Profiler::new(false);
        let settings = StepSettings { dropout_seed: (i == 0).then_some((seed, 0)), ..base.clone() };
        let (next, outcome) = queue_step(device, model, optim, objective, &settings, &mut prof, |_| Ok(batch.clone()))?;
        model = next;
        pending.push(outcome);
        let issued = t0.elapsed().as_secs_f64();
        if i >= WARM_UP {
            host_ms.push(issued * 1e3);
        }
        if i == 0 {
            device::memory::sync(device);
            first_step_s = t0.elapsed().as_secs_f64();
        }
        if i + 1 == WARM_UP {
            device::memory::sync(device);
            warm = read()?;
            cpu_warm = ThreadCpu::now();
        }
    }
    device::memory::sync(device);
    let thread_cpu = ThreadCpu::now().since(&cpu_warm);
    let after = read()?;
    Ok(Steps { model, pending, warm, after, first_step_s, host_ms, thread_cpu })
}
