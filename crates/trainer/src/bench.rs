//! `trainer bench`: training-step and inference speed of the configured model on random data of
//! a fixed shape, phase by phase, the Burn half of the side-by-side comparison with PyTorch
//! (`benches/reference/compare.py`; the PyTorch half is `benches/reference/reference_model.py`,
//! which prints the same fields).
//!
//! The model, optimizer and precision come from the resolved experiment config, so the same
//! command measures any architecture; the shape (batch, frames, features, classes) comes from
//! flags because it must match the other side exactly.

use std::time::Instant;

use burn::module::{AutodiffModule, Module};
use burn::prelude::Backend;
use burn::tensor::{Bool, Distribution, Int, Tensor, TensorData};
use data::loader::SignBatch;
use models::precision::Materialize;
use models::SignModel;
use serde::Serialize;

use crate::config::ExperimentConfig;
use crate::objective::Objective;
use crate::optim::Optim;
use crate::profile::{Phase, Profiler};
use crate::resolve::ResolvedCompute;
use crate::step::{queue_step, settle, train_step, StepSettings};
use crate::{InnerBackend, Result, TrainBackend};

/// The shape and repetitions of `trainer bench`.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Sequences per training step and per batch inference.
    pub batch: usize,
    /// Frames per sequence.
    pub frames: usize,
    /// Features per frame.
    pub features: usize,
    /// Classes of the classifier.
    pub classes: usize,
    /// Timed training steps (after two warm-up steps).
    pub steps: usize,
    /// Timed batch-1 forward passes (after ten warm-up passes).
    pub latency_runs: usize,
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self { batch: 64, frames: 64, features: 469, classes: 250, steps: 10, latency_runs: 100 }
    }
}

impl BenchOptions {
    /// Every dimension of the shape is positive.
    pub fn check(&self) -> Result<()> {
        if self.batch == 0 || self.frames == 0 || self.features == 0 || self.classes == 0 {
            return Err(crate::TrainError::Invalid(format!(
                "bench shape must be positive, got batch {} frames {} features {} classes {}",
                self.batch, self.frames, self.features, self.classes
            )));
        }
        Ok(())
    }
}

/// Field names match `reference_model.py`'s JSON.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// Which framework and backend measured this.
    pub framework: String,
    /// The device's name.
    pub device: String,
    /// Compute precision.
    pub precision: String,
    /// `model.kind`.
    pub model: String,
    /// Trainable parameters.
    pub trainable_params: usize,
    /// Batch size.
    pub batch: usize,
    /// Frames per sequence.
    pub frames: usize,
    /// Features per frame.
    pub features: usize,
    /// Classes.
    pub classes: usize,
    /// Median training step (forward + backward + optimizer), ms.
    pub train_step_ms: f64,
    /// Median forward phase (with the loss), ms.
    pub forward_ms: f64,
    /// Median backward phase, ms.
    pub backward_ms: f64,
    /// Median optimizer phase (finite check, gradient norm, clipping, update), ms.
    pub optimizer_ms: f64,
    /// Training throughput at the median step.
    pub train_samples_per_s: f64,
    /// Training throughput of the same number of steps run back to back as the training loop
    /// runs them: no wait between phases or steps, the outcomes read once at the end.
    pub train_pipelined_samples_per_s: f64,
    /// Batch-1 inference latency, median, ms.
    pub infer_b1_p50_ms: f64,
    /// Batch-1 inference latency, 90th percentile, ms.
    pub infer_b1_p90_ms: f64,
    /// Median whole-batch inference, ms.
    pub infer_batch_ms: f64,
    /// Whole-batch inference throughput.
    pub infer_batch_samples_per_s: f64,
    /// The same inference through the eval graph ([`engine`]) in f32 and int8: conv-transformers
    /// on the CPU only (absent otherwise).
    #[serde(flatten)]
    pub graph: Option<GraphFigures>,
}

/// Batch-1 latency and batch throughput of the eval graph, f32 and int8 (fields match
/// `reference_model.py`'s, whose int8 is PyTorch's dynamic quantization of every `nn.Linear`).
#[derive(Debug, Clone, Serialize)]
pub struct GraphFigures {
    /// f32 eval graph (BatchNorm folded), batch-1 median, ms.
    pub graph_f32_b1_p50_ms: f64,
    /// f32 eval graph, whole-batch throughput.
    pub graph_f32_batch_samples_per_s: f64,
    /// int8 eval graph, batch-1 median, ms.
    pub int8_b1_p50_ms: f64,
    /// int8 eval graph, batch-1 90th percentile, ms.
    pub int8_b1_p90_ms: f64,
    /// int8 eval graph, whole-batch throughput.
    pub int8_batch_samples_per_s: f64,
    /// Bytes of parameters of the f32 graph.
    pub graph_f32_bytes: usize,
    /// Bytes of parameters of the int8 graph.
    pub int8_bytes: usize,
}

impl BenchReport {
    /// The report as printed by `trainer bench`.
    pub fn render(&self) -> String {
        format!(
            "{} on {} ({}), {} with {} trainable parameters\n\
             shape: batch {} x {} frames x {} features, {} classes\n\
             train step   {:>9.1} ms  ({:.1} samples/s): forward {:.1} ms, backward {:.1} ms, optimizer {:.1} ms\n\
             train steps back to back  {:.1} samples/s\n\
             infer batch 1  p50 {}, p90 {}\n\
             infer batch {}  {:.1} ms ({:.1} samples/s)\n{}",
            self.framework,
            self.device,
            self.precision,
            self.model,
            self.trainable_params,
            self.batch,
            self.frames,
            self.features,
            self.classes,
            self.train_step_ms,
            self.train_samples_per_s,
            self.forward_ms,
            self.backward_ms,
            self.optimizer_ms,
            self.train_pipelined_samples_per_s,
            ms(self.infer_b1_p50_ms),
            ms(self.infer_b1_p90_ms),
            self.batch,
            self.infer_batch_ms,
            self.infer_batch_samples_per_s,
            self.graph.as_ref().map_or(String::new(), |g| format!(
                "eval graph f32   batch 1 p50 {}, batch {} {:.1} samples/s ({:.2} MB of parameters)\n\
                 eval graph int8  batch 1 p50 {} (p90 {}), batch {} {:.1} samples/s ({:.2} MB of parameters)\n",
                ms(g.graph_f32_b1_p50_ms),
                self.batch,
                g.graph_f32_batch_samples_per_s,
                g.graph_f32_bytes as f64 / 1e6,
                ms(g.int8_b1_p50_ms),
                ms(g.int8_b1_p90_ms),
                self.batch,
                g.int8_batch_samples_per_s,
                g.int8_bytes as f64 / 1e6,
            )),
        )
    }
}

/// Sample `b` has `b % 24` padded frames (at most `frames - 1`): the padding pattern of the
/// PyTorch side and of the criterion benches.
pub fn pad_mask_host(batch: usize, frames: usize) -> Vec<bool> {
    let mut m = vec![false; batch * frames];
    for b in 0..batch {
        let n = (b % 24).min(frames - 1);
        for t in frames - n..frames {
            m[b * frames + t] = true;
        }
    }
    m
}

/// The bench's synthetic classification batch on `device`: `[batch, frames, features]` normal
/// inputs, [`pad_mask_host`]'s padding with its valid lengths, sample `i` labelled `i % classes`.
/// One definition for `trainer bench` and the criterion benches, so both time the same step.
pub fn synthetic_batch(
    batch: usize,
    frames: usize,
    features: usize,
    classes: usize,
    device: &device::DispatchDevice,
) -> SignBatch<TrainBackend> {
    let inputs = Tensor::<TrainBackend, 3>::random([batch, frames, features], Distribution::Normal(0.0, 1.0), device);
    let mask_host = pad_mask_host(batch, frames);
    let lengths = data::loader::valid_lengths(&mask_host, frames);
    let pad_mask = Tensor::<TrainBackend, 2, Bool>::from_data(TensorData::new(mask_host, [batch, frames]), device);
    let labels_host: Vec<i64> = (0..batch as i64).map(|i| i % classes.max(1) as i64).collect();
    let labels = Tensor::<TrainBackend, 1, Int>::from_data(TensorData::new(labels_host, [batch]), device);
    SignBatch { inputs, pad_mask, labels, targets: Vec::new(), lengths }
}

/// Untimed batch-1 passes before the timed ones.
const LATENCY_WARM_UP: usize = 10;
/// Untimed whole-batch passes, then timed ones.
const BATCH_WARM_UP: usize = 1;
const BATCH_RUNS: usize = 4;

/// Wall time of each of `runs` calls of `f`, ms, after `warm_up` untimed calls.
fn timed_runs(warm_up: usize, runs: usize, mut f: impl FnMut()) -> Vec<f64> {
    (0..warm_up).for_each(|_| f());
    (0..runs)
        .map(|_| {
            let t0 = Instant::now();
            f();
            t0.elapsed().as_secs_f64() * 1e3
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[v.len() / 2]
}

/// A latency for the report: `2.71 ms`, or "not measured" (`--latency-runs 0` leaves no runs, and
/// [`percentile`] of none is NaN).
fn ms(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.2} ms")
    } else {
        "not measured".into()
    }
}

fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[((p / 100.0 * (v.len() - 1) as f64).round() as usize).min(v.len() - 1)]
}

/// What [`time_train_steps`] measured, with the trained model and the random batch.
pub struct TimedSteps {
    /// The model after the steps.
    pub model: SignModel<TrainBackend>,
    /// The random inputs `[batch, frames, features]`.
    pub inputs: Tensor<TrainBackend, 3>,
    /// Their padding mask.
    pub pad_mask: Tensor<TrainBackend, 2, Bool>,
    /// Forward phase of each timed step, ms.
    pub forward_ms: Vec<f64>,
    /// Backward phase of each timed step, ms.
    pub backward_ms: Vec<f64>,
    /// Optimizer phase of each timed step, ms.
    pub optimizer_ms: Vec<f64>,
    /// Mean step of as many steps again run back to back, their outcomes read at the end, ms.
    pub pipelined_ms: f64,
}

impl TimedSteps {
    /// Median whole step, ms.
    pub fn step_ms(&self) -> f64 {
        let total = self.forward_ms.iter().zip(&self.backward_ms).zip(&self.optimizer_ms);
        median(total.map(|((a, b), c)| a + b + c).collect())
    }
}

impl std::fmt::Debug for TimedSteps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimedSteps").field("step_ms", &self.step_ms()).finish()
    }
}

/// Two warm-up and `opts.steps` timed training steps of `cfg`'s model (the one shared step) on
/// random data of `opts`'s shape, on `compute`'s device and precision, each phase timed to the
/// end of its device work; then `opts.steps` more run back to back, as the training loop runs
/// them. The caller holds the run lock (the model's init is seeded from Burn's process-wide
/// generator).
pub fn time_train_steps(cfg: &ExperimentConfig, compute: &ResolvedCompute, opts: &BenchOptions) -> Result<TimedSteps> {
    let device = compute.device();
    let precision = compute.precision.precision;
    let (b, t, f) = (opts.batch, opts.frames, opts.features);
    TrainBackend::seed(device, cfg.training.seed);
    let mut model: SignModel<TrainBackend> =
        cfg.model.init::<TrainBackend>(f, opts.classes, device).map(&mut Materialize);
    let mut optim = Optim::new(&cfg.optimizer);
    let objective = Objective::new(models::Task::Classification, 0.0, device);
    let batch = synthetic_batch(b, t, f, opts.classes, device);
    let settings = StepSettings::timing(precision.float_dtype(), cfg.optimizer.clip_grad_norm);
    let (mut fwd, mut bwd, mut opt) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..opts.steps + 2 {
        device::memory::sync(device);
        let mut prof = Profiler::new(true);
        let (next, _) = train_step(device, model, &mut optim, &objective, &settings, &mut prof, |_| Ok(batch.clone()))?;
        model = next;
        if i >= 2 {
            fwd.push(prof.ms(Phase::Forward));
            bwd.push(prof.ms(Phase::Backward));
            opt.push(prof.ms(Phase::Optimizer));
        }
    }
    device::memory::sync(device);
    let t0 = Instant::now();
    let mut pending = Vec::with_capacity(opts.steps);
    let mut prof = Profiler::new(false);
    for _ in 0..opts.steps {
        let (next, outcome) =
            queue_step(device, model, &mut optim, &objective, &settings, &mut prof, |_| Ok(batch.clone()))?;
        model = next;
        pending.push(outcome);
    }
    let _ = settle(pending, &mut optim);
    device::memory::sync(device);
    let pipelined_ms = t0.elapsed().as_secs_f64() * 1e3 / opts.steps.max(1) as f64;
    Ok(TimedSteps {
        model,
        inputs: batch.inputs,
        pad_mask: batch.pad_mask,
        forward_ms: fwd,
        backward_ms: bwd,
        optimizer_ms: opt,
        pipelined_ms,
    })
}

/// Run the benchmark of `opts`'s shape on the device and precision `compute` resolved for `cfg`.
pub fn bench(cfg: &ExperimentConfig, compute: &ResolvedCompute, opts: &BenchOptions) -> Result<BenchReport> {
    opts.check()?;
    // Every generator's turn, not only the device's: a run beside it would share the cores it times.
    let _guard = crate::lock::run_lock();
    let device = compute.device();
    let precision = compute.precision.precision;
    let (b, t, f) = (opts.batch, opts.frames, opts.features);
    let timed = time_train_steps(cfg, compute, opts)?;
    let model = timed.model;
    let (x, mask) = (timed.inputs, timed.pad_mask);
    let trainable_params = models::trainable_params(&model);
    let (fwd, bwd, opt) = (timed.forward_ms, timed.backward_ms, timed.optimizer_ms);
    let total: Vec<f64> = fwd.iter().zip(&bwd).zip(&opt).map(|((a, b), c)| a + b + c).collect();
    let step_ms = median(total);

    let infer = engine::inference_model(model.valid(), precision.float_dtype());
    let x_inner = x.inner();
    let x1 = x_inner.clone().narrow(0, 0, 1);
    let m1 = Tensor::<InnerBackend, 2, Bool>::from_data(TensorData::new(vec![false; t], [1, t]), device);
    let lat = timed_runs(LATENCY_WARM_UP, opts.latency_runs, || {
        let _ = infer.forward(x1.clone(), m1.clone()).into_data();
    });
    let big_ms = median(timed_runs(BATCH_WARM_UP, BATCH_RUNS, || {
        let _ = infer.forward(x_inner.clone(), mask.clone().inner()).into_data();
    }));
    let graph = if compute.device.selection.target == device::Target::Cpu {
        time_graphs(infer.model(), &x_inner.to_data().iter::<f32>().collect::<Vec<_>>(), b, t, opts)
    } else {
        None
    };
    Ok(BenchReport {
        framework: format!("SignFlow (Burn 0.21, {} backend)", device::backend_name(device)),
        device: compute.device.selection.name.clone(),
        precision: precision.to_string(),
        model: cfg.model.kind().to_string(),
        trainable_params,
        batch: b,
        frames: t,
        features: f,
        classes: opts.classes,
        train_step_ms: step_ms,
        forward_ms: median(fwd),
        backward_ms: median(bwd),
        optimizer_ms: median(opt),
        train_samples_per_s: b as f64 / step_ms * 1e3,
        train_pipelined_samples_per_s: b as f64 / timed.pipelined_ms * 1e3,
        infer_b1_p50_ms: percentile(lat.clone(), 50.0),
        infer_b1_p90_ms: percentile(lat, 90.0),
        infer_batch_ms: big_ms,
        infer_batch_samples_per_s: b as f64 / big_ms * 1e3,
        graph,
    })
}

/// [`GraphFigures`] of `model` on the host inputs `x` (`[b, t, features]`, the bench's padding),
/// timed as the Burn forward is; `None` for architectures without an eval graph.
fn time_graphs(
    model: &SignModel<InnerBackend>,
    x: &[f32],
    b: usize,
    t: usize,
    opts: &BenchOptions,
) -> Option<GraphFigures> {
    let f32_graph = engine::EvalGraph::new(model, engine::Weights::F32).ok()?;
    let int8 = engine::EvalGraph::new(model, engine::Weights::Int8).ok()?;
    let valid: Vec<usize> = pad_mask_host(b, t).chunks(t).map(|m| m.iter().filter(|p| !**p).count()).collect();
    let x1 = &x[..x.len() / b.max(1)];
    let time = |g: &engine::EvalGraph| {
        let lat = timed_runs(LATENCY_WARM_UP, opts.latency_runs, || {
            let _ = g.logits(x1, &[t], t);
        });
        let big = timed_runs(BATCH_WARM_UP, BATCH_RUNS, || {
            let _ = g.logits(x, &valid, t);
        });
        (lat, b as f64 / median(big) * 1e3)
    };
    let (f32_lat, f32_rate) = time(&f32_graph);
    let (int8_lat, int8_rate) = time(&int8);
    Some(GraphFigures {
        graph_f32_b1_p50_ms: percentile(f32_lat, 50.0),
        graph_f32_batch_samples_per_s: f32_rate,
        int8_b1_p50_ms: percentile(int8_lat.clone(), 50.0),
        int8_b1_p90_ms: percentile(int8_lat, 90.0),
        int8_batch_samples_per_s: int8_rate,
        graph_f32_bytes: f32_graph.bytes(),
        int8_bytes: int8.bytes(),
    })
}
