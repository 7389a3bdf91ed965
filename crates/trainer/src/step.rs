//! One optimizer step over K micro-batches: the single definition of a training step that the
//! training loop, the batch-size search, `trainer bench` and the criterion benches all call.
//!
//! Per step: for each micro-batch, the mixed-precision forward ([`ComputeModel`]: weights and
//! inputs cast to the compute dtype, logits back in f32), the task's loss in f32
//! ([`Objective`]), the backward pass of `loss x scale / K`, and the gradients summed onto the
//! f32 masters; then global-norm clipping, unscaling and the optimizer update where the loss and
//! gradients are finite, and the step's outcome (loss, correct count, global gradient norm). A
//! step whose loss or gradients are not finite leaves the model and optimizer untouched; what to
//! do about it is the caller's policy ([`crate::recovery`], [`crate::amp::LossScaler`]).
//!
//! Host reads: on the CPU the outcome is read before the update (one read per step). On a
//! GPU-class device the finiteness decision and the clipping factor stay on the device, and the
//! outcome is a [`PendingOutcome`]: [`train_step`] reads it at once, [`queue_step`] leaves it
//! for [`settle`], which reads the outcomes of many steps in one wait (the training loop does so
//! once per log interval). CTC also reads each micro-batch's log-probabilities, as its loss runs
//! on the host.

use std::time::Instant;

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::prelude::Backend;
use burn::tensor::{Bool, FloatDType, Tensor, Transaction};
use data::index::{fnv1a, FNV_OFFSET};
use data::loader::SignBatch;
use models::precision::{ComputeModel, Precast};
use models::SignModel;

pub use crate::amp::LossScale;
use crate::inject::StepFaults;
use crate::objective::Objective;
use crate::optim::{finite_step, Optim, StepCheck};
use crate::profile::{Phase, Profiler};
use crate::{InnerBackend, Result, TrainBackend};

type Device = device::DispatchDevice;

/// Everything about one step that is not the model, the optimizer or the data.
#[derive(Debug, Clone)]
pub struct StepSettings {
    /// The compute dtype of the forward and backward passes (`F32` = no casts).
    pub compute: FloatDType,
    /// Micro-batches whose gradients are averaged into this step.
    pub micro_batches: usize,
    /// The loss is multiplied by this before the backward pass (f16 loss scaling; 1 otherwise).
    pub loss_scale: LossScale,
    /// Learning rate of this step.
    pub lr: f64,
    /// Clip the global gradient norm to this (0 = off).
    pub clip_grad_norm: f64,
    /// `Some((seed, step))`: re-seed the backend once, before the step's first micro-batch, from
    /// (seed, step). The loop does it where a run can resume (its first step, the first after a
    /// checkpoint), so dropout masks are the same when a run is resumed.
    pub dropout_seed: Option<(u64, u64)>,
    /// Injected faults.
    pub faults: StepFaults,
    /// Read the device's memory pool after each forward pass (when activations are live) into
    /// [`StepOutcome::memory`]; this waits for the device, so the loop does it on some steps.
    pub sample_memory: bool,
}

impl StepSettings {
    /// The step that speed measurements time (`tune`, `bench`, the criterion bench): one
    /// micro-batch at a small fixed LR, no loss scaling, no re-seeding, no faults.
    pub fn timing(compute: FloatDType, clip_grad_norm: f64) -> Self {
        Self {
            compute,
            micro_batches: 1,
            loss_scale: LossScale::Host(1.0),
            lr: 1e-4,
            clip_grad_norm,
            dropout_seed: None,
            faults: StepFaults::default(),
            sample_memory: false,
        }
    }
}

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepOutcome {
    /// Mean loss over the micro-batches (unscaled).
    pub loss: f64,
    /// Correct arg-max predictions over the step's samples.
    pub correct: u64,
    /// Samples in the step.
    pub samples: u64,
    /// Global L2 norm of the unscaled gradients, before clipping.
    pub grad_norm: f64,
    /// Loss and gradients were finite, so the update was applied.
    pub applied: bool,
    /// The loss scale the step used (1 without f16 loss scaling).
    pub loss_scale: f64,
    /// Peak pool figures after the forward passes (`sample_memory` on a GPU backend).
    pub memory: Option<device::MemoryStats>,
}

/// The gradients of one step's data (one device's share of it in a data-parallel group), summed
/// over its micro-batches, before clipping, unscaling and the update.
pub struct StepGradients {
    /// `d(sum_k weight_k x loss_k x loss_scale) / d(param)` for every parameter that got one.
    pub grads: GradientsParams,
    /// `sum_k weight_k x loss_k` (unscaled; f32 on the device).
    pub loss: Tensor<InnerBackend, 1>,
    /// Correct arg-max predictions (as a float, on the device).
    pub correct: Tensor<InnerBackend, 1>,
    /// Samples the gradients were computed on.
    pub samples: u64,
    /// Peak pool figures after the forward passes (`sample_memory` on a GPU backend).
    pub memory: Option<device::MemoryStats>,
}

impl std::fmt::Debug for StepGradients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepGradients").field("params", &self.grads.len()).field("samples", &self.samples).finish()
    }
}

/// A step's outcome as the step left it: read on the CPU, still on the device on a GPU-class
/// backend, where reading it waits for the step to finish. [`settle`] reads any number of them
/// at once.
pub struct PendingOutcome {
    state: Pending,
}

// One value per step, read once: boxing the larger variant would only add an allocation.
#[allow(clippy::large_enum_variant)]
enum Pending {
    Read(StepOutcome),
    Queued {
        /// Loss, correct count and squared gradient norm (scaled), `[1]` each, on the device.
        loss: Tensor<InnerBackend, 1>,
        correct: Tensor<InnerBackend, 1>,
        norm2: Tensor<InnerBackend, 1>,
        loss_scale: LossScale,
        samples: u64,
        memory: Option<device::MemoryStats>,
    },
}

impl From<StepOutcome> for PendingOutcome {
    fn from(outcome: StepOutcome) -> Self {
        Self { state: Pending::Read(outcome) }
    }
}

impl PendingOutcome {
    /// Whether the step's update applied, as the device decided it (`None`: already read).
    pub fn applied_on_device(&self) -> Option<Tensor<InnerBackend, 1, Bool>> {
        match &self.state {
            Pending::Read(_) => None,
            Pending::Queued { loss, norm2, .. } => Some(finite_step(loss, norm2)),
        }
    }

    /// Samples in the step (known without reading the device).
    pub fn samples(&self) -> u64 {
        match &self.state {
            Pending::Read(o) => o.samples,
            Pending::Queued { samples, .. } => *samples,
        }
    }
}

impl std::fmt::Debug for PendingOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.state {
            Pending::Read(o) => f.debug_tuple("Read").field(o).finish(),
            Pending::Queued { samples, .. } => f.debug_struct("Queued").field("samples", samples).finish(),
        }
    }
}

/// The outcomes of `pending` steps, in order, read from the device in one wait, and `optim` told
/// how many of them it skipped ([`Optim::settle`]). Every step given to `optim` since it was
/// last settled must be among them.
pub fn settle(pending: Vec<PendingOutcome>, optim: &mut Optim) -> Vec<StepOutcome> {
    let mut tx = Transaction::default();
    let mut queued = 0;
    for p in &pending {
        if let Pending::Queued { loss, correct, norm2, loss_scale, .. } = &p.state {
            tx = tx.register(loss.clone()).register(correct.clone()).register(norm2.clone());
            if let LossScale::Device(scale) = loss_scale {
                tx = tx.register(scale.clone());
            }
            queued += 1;
        }
    }
    let read = if queued > 0 { tx.execute() } else { Vec::new() };
    let mut values = read.iter().map(|d| d.iter::<f64>().next().unwrap_or(f64::NAN));
    let mut next = || values.next().unwrap_or(f64::NAN);
    let outcomes: Vec<StepOutcome> = pending
        .into_iter()
        .map(|p| match p.state {
            Pending::Read(o) => o,
            Pending::Queued { loss_scale, samples, memory, .. } => {
                let (loss, correct, norm2) = (next(), next().round() as u64, next());
                let loss_scale = match loss_scale {
                    LossScale::Host(s) => s,
                    LossScale::Device(_) => next(),
                };
                let applied = loss.is_finite() && norm2.is_finite();
                let grad_norm = norm2.sqrt() / loss_scale;
                StepOutcome { loss, correct, samples, grad_norm, applied, loss_scale, memory }
            }
        })
        .collect();
    if queued > 0 {
        optim.settle(outcomes.iter().filter(|o| !o.applied).count() as u64);
    }
    outcomes
}

/// Runs one optimizer step. `next_batch(k)` supplies micro-batch `k` on the device. Returns the
/// updated model (unchanged when the step was not finite) and the outcome, read at once.
pub fn train_step(
    device: &Device,
    model: SignModel<TrainBackend>,
    optim: &mut Optim,
    objective: &Objective,
    settings: &StepSettings,
    prof: &mut Profiler,
    next_batch: impl FnMut(usize) -> Result<SignBatch<TrainBackend>>,
) -> Result<(SignModel<TrainBackend>, StepOutcome)> {
    let (model, pending) = queue_step(device, model, optim, objective, settings, prof, next_batch)?;
    Ok((model, settle_one(device, pending, optim, prof)))
}

/// [`train_step`] without the wait for its outcome on a GPU-class backend: the update is queued,
/// the outcome stays on the device until [`settle`]d (with the steps after it, in one read).
pub fn queue_step(
    device: &Device,
    model: SignModel<TrainBackend>,
    optim: &mut Optim,
    objective: &Objective,
    settings: &StepSettings,
    prof: &mut Profiler,
    next_batch: impl FnMut(usize) -> Result<SignBatch<TrainBackend>>,
) -> Result<(SignModel<TrainBackend>, PendingOutcome)> {
    let k_total = settings.micro_batches.max(1);
    let weights = vec![1.0 / k_total as f64; k_total];
    let precast = precast(device, &model, optim, settings);
    let grads = compute_gradients(device, &model, precast, objective, settings, &weights, prof, next_batch)?;
    Ok(queue_gradients(device, model, optim, settings, grads, prof))
}

/// On a GPU-class device computing in half precision, the trainable parameters cast in one
/// kernel from the optimizer's flat buffer ([`Optim::precast`]); `None` elsewhere (the compute
/// copy then casts each parameter).
pub fn precast(
    device: &Device,
    model: &SignModel<TrainBackend>,
    optim: &Optim,
    settings: &StepSettings,
) -> Option<Precast<TrainBackend>> {
    if !crate::on_gpu(device) || settings.compute == FloatDType::F32 {
        return None;
    }
    optim.precast(model, settings.compute)
}

/// The forward and backward passes of one step: for each micro-batch `k` (`next_batch(k)`, on
/// the device), the mixed-precision forward, the f32 loss and the backward pass of
/// `loss x loss_scale x weights[k]`, summed. A micro-batch with no rows is skipped. A
/// single-device step weighs each of its K micro-batches 1/K; a data-parallel peer weighs its
/// share of micro-batch k by (its rows / the micro-batch's rows) / K, so that the sum over the
/// group is the single-device step's gradient. With `precast` ([`precast`]) the compute copy's
/// weights are views of it and its gradients arrive in the compute dtype.
#[allow(clippy::too_many_arguments)]
pub fn compute_gradients(
    device: &Device,
    model: &SignModel<TrainBackend>,
    mut precast: Option<Precast<TrainBackend>>,
    objective: &Objective,
    settings: &StepSettings,
    weights: &[f64],
    prof: &mut Profiler,
    mut next_batch: impl FnMut(usize) -> Result<SignBatch<TrainBackend>>,
) -> Result<StepGradients> {
    let mut accumulator = GradientsAccumulator::<SignModel<TrainBackend>>::new();
    let mut single: Option<GradientsParams> = None;
    let mut passes = 0usize;
    let mut losses: Vec<Tensor<InnerBackend, 1>> = Vec::with_capacity(weights.len());
    let mut corrects: Vec<Tensor<InnerBackend, 1>> = Vec::with_capacity(weights.len());
    let mut samples = 0u64;
    let mut compute: Option<ComputeModel<TrainBackend>> = None;
    let half_grads = precast.is_some();
    let mut memory: Option<device::MemoryStats> = None;
    // Once per step, not per micro-batch: under Burn's fusion a re-seed waits for the device.
    if let Some((seed, step)) = settings.dropout_seed {
        TrainBackend::seed(device, mix(seed, step));
    }
    for (k, &weight) in weights.iter().enumerate() {
        let t0 = Instant::now();
        let batch = next_batch(k)?;
        let t1 = prof.mark(device, Phase::Data, t0);
        let n = batch.labels.dims()[0];
        if n == 0 {
            continue;
        }
        // Forward/backward run on a compute-dtype copy of the f32 masters (same ParamIds), made
        // once per step and charged to the forward phase.
        let compute = compute.get_or_insert_with(|| match precast.take() {
            Some(p) => ComputeModel::with_precast(model.clone(), p),
            None => ComputeModel::new(model.clone(), settings.compute),
        });
        let (mut loss, correct) = objective.forward(compute, batch);
        if settings.faults.nan_loss {
            loss = loss.mul_scalar(f64::NAN);
        }
        losses.push(loss.clone().inner().mul_scalar(weight));
        corrects.push(correct);
        let loss = match &settings.loss_scale {
            LossScale::Host(scale) if scale * weight == 1.0 => loss,
            LossScale::Host(scale) => loss.mul_scalar(scale * weight),
            LossScale::Device(scale) => loss * Tensor::from_inner(scale.clone().mul_scalar(weight)),
        };
        let t2 = prof.mark(device, Phase::Forward, t1);
        if settings.faults.oom {
            crate::inject::raise_injected_oom(n);
        }
        if settings.sample_memory {
            memory = peak(memory, device::memory_stats(device));
        }
        let grads = GradientsParams::from_grads(loss.backward(), model);
        if passes == 0 {
            single = Some(grads);
        } else {
            // Summed in f32: a precast copy's gradients arrive in half precision.
            let summable = |g| if half_grads { in_f32(model, g) } else { g };
            if let Some(first) = single.take() {
                accumulator.accumulate(model, summable(first));
            }
            accumulator.accumulate(model, summable(grads));
        }
        passes += 1;
        prof.mark(device, Phase::Backward, t2);
        samples += n as u64;
    }
    if let Some(compute) = compute {
        compute.release();
    }
    let grads = match single {
        Some(g) => g,
        None if passes > 1 => accumulator.grads(),
        None => GradientsParams::new(),
    };
    // Added in order rather than concatenated and summed: one micro-batch costs no launch (a
    // concatenation and a sum of `[1]` tensors cost three on GPU-class devices).
    let total = |parts: Vec<Tensor<InnerBackend, 1>>| {
        parts.into_iter().reduce(|a, b| a + b).unwrap_or_else(|| Tensor::zeros([1], device))
    };
    let (loss, correct) = (total(losses), total(corrects));
    Ok(StepGradients { grads, loss, correct, samples, memory })
}

/// The rest of a step, given its gradients: the squared global gradient norm, then global-norm
/// clipping, unscaling and the optimizer update where the loss and the gradients are finite (a
/// step that is not leaves the model and optimizer untouched), and ONE host read (loss, correct
/// count, squared norm) for the outcome. On a GPU-class device the update is decided on the
/// device and queued before the read, so the host does not wait in the middle of the step; on
/// the CPU, where nothing is queued, the read comes first and the update is skipped outright.
pub fn apply_gradients(
    device: &Device,
    model: SignModel<TrainBackend>,
    optim: &mut Optim,
    settings: &StepSettings,
    step: StepGradients,
    prof: &mut Profiler,
) -> (SignModel<TrainBackend>, StepOutcome) {
    let (model, pending) = queue_gradients(device, model, optim, settings, step, prof);
    (model, settle_one(device, pending, optim, prof))
}

/// The outcome of one step, read now (charged to the optimizer phase).
fn settle_one(device: &Device, pending: PendingOutcome, optim: &mut Optim, prof: &mut Profiler) -> StepOutcome {
    let t = Instant::now();
    let outcome = settle(vec![pending], optim).pop().expect("one outcome per step");
    prof.mark(device, Phase::Optimizer, t);
    outcome
}

/// [`apply_gradients`] up to the read: on a GPU-class device the update is queued and the
/// outcome left there; on the CPU it is read first (the update depends on it there).
pub fn queue_gradients(
    device: &Device,
    model: SignModel<TrainBackend>,
    optim: &mut Optim,
    settings: &StepSettings,
    step: StepGradients,
    prof: &mut Profiler,
) -> (SignModel<TrainBackend>, PendingOutcome) {
    let t3 = Instant::now();
    let StepGradients { mut grads, loss, correct, samples, memory } = step;
    if settings.faults.inf_grad {
        model.visit(&mut CorruptFirst { grads: &mut grads, done: false });
    }
    let grads = optim.gather(&model, grads);
    let norm2 = grads.squared_norm();
    let clip = settings.clip_grad_norm;
    let (model, pending) = if !crate::on_gpu(device) {
        let scale = settings.loss_scale.value();
        let read = Transaction::default().register(loss).register(correct).register(norm2).execute();
        let first = |i: usize| read[i].iter::<f64>().next().unwrap_or(f64::NAN);
        let (loss, correct, n2) = (first(0), first(1).round() as u64, first(2));
        let applied = loss.is_finite() && n2.is_finite();
        let grad_norm = n2.sqrt() / scale;
        let model = if applied {
            let clipped = if clip > 0.0 && grad_norm > clip { clip / (grad_norm + 1e-6) } else { 1.0 };
            let factor = clipped / scale;
            let factor = (factor != 1.0).then(|| Tensor::from_floats([factor as f32], device));
            optim.step(settings.lr, model, grads, factor, None)
        } else {
            model
        };
        (model, Pending::Read(StepOutcome { loss, correct, samples, grad_norm, applied, loss_scale: scale, memory }))
    } else {
        // Whether the step applies and the gradient's factor, decided on the device.
        let scale = settings.loss_scale.clone();
        let check = StepCheck { loss: loss.clone(), norm2: norm2.clone(), scale: scale.clone(), clip };
        let model = optim.step_checked(settings.lr, model, grads, check);
        (model, Pending::Queued { loss, correct, norm2, loss_scale: scale, samples, memory })
    };
    prof.mark(device, Phase::Optimizer, t3);
    (model, PendingOutcome { state: pending })
}

/// The larger in-use and reserved figures of two samples.
pub fn peak(a: Option<device::MemoryStats>, b: Option<device::MemoryStats>) -> Option<device::MemoryStats> {
    match (a, b) {
        (Some(a), Some(b)) => Some(device::MemoryStats {
            bytes_in_use: a.bytes_in_use.max(b.bytes_in_use),
            bytes_reserved: a.bytes_reserved.max(b.bytes_reserved),
            allocations: a.allocations.max(b.allocations),
        }),
        (a, b) => a.or(b),
    }
}

/// The dropout seed of step `step` (the trailing 0 keeps the seeds of run directories written
/// when every micro-batch was seeded, so they resume with the same masks).
fn mix(seed: u64, step: u64) -> u64 {
    let h = fnv1a(fnv1a(FNV_OFFSET, &seed.to_le_bytes()), &step.to_le_bytes());
    fnv1a(h, &0u64.to_le_bytes())
}

/// `grads` with every gradient in f32.
fn in_f32(model: &SignModel<TrainBackend>, grads: GradientsParams) -> GradientsParams {
    struct Cast(GradientsParams);
    impl ModuleVisitor<TrainBackend> for Cast {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<TrainBackend, D>>) {
            if let Some(g) = self.0.remove::<InnerBackend, D>(param.id) {
                self.0.register(param.id, g.cast(FloatDType::F32));
            }
        }
    }
    let mut cast = Cast(grads);
    model.visit(&mut cast);
    cast.0
}

/// Fault injection: multiplies the first gradient tensor by infinity.
struct CorruptFirst<'a> {
    grads: &'a mut GradientsParams,
    done: bool,
}

impl ModuleVisitor<TrainBackend> for CorruptFirst<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<TrainBackend, D>>) {
        if self.done {
            return;
        }
        if let Some(g) = self.grads.remove::<InnerBackend, D>(param.id) {
            self.grads.register(param.id, g.mul_scalar(f64::INFINITY));
            self.done = true;
        }
    }
}
