//! The optimizers the config can name (AdamW, SGD with momentum), written for a step that never
//! waits for the device and launches few kernels: the state of all trainable parameters lives in
//! one flat f32 buffer each (moments, velocity, the parameters themselves, segments aligned so the
//! model's parameters are views of the flat buffer on the GPU backends); [`Optim::gather`] puts a
//! step's gradients into the same layout, so the gradient norm is two reductions and the whole
//! update a handful of element-wise kernels whatever the number of parameter tensors. The
//! gradient factor (unscaling and global-norm clipping) and whether to apply the step at all are
//! tensors on the device, so a non-finite step is skipped there.
//!
//! The arithmetic is Burn's `AdamW` and `Sgd` (burn-optim 0.21), which a test checks step by step;
//! the state is saved per parameter in their record format, so checkpoints written by either load
//! in both. One difference: a parameter that gets no gradient in a step keeps its value and state,
//! as in Burn, but AdamW's bias correction still counts that step for it (Burn counts steps per
//! parameter); SignFlow's models give every trainable parameter a gradient in every step.

use std::collections::HashMap;
use std::path::Path;

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::optim::momentum::{MomentumState, MomentumStateItem};
use burn::optim::record::{AdaptorRecord, AdaptorRecordV1};
use burn::optim::{AdamW, AdamWState, AdaptiveMomentumState, GradientsParams, Sgd, SgdState};
use burn::record::{FullPrecisionSettings, Record};
use burn::tensor::ops::{FloatTensor, FloatTensorOps};
use burn::tensor::{Bool, DType, FloatDType, Shape, Tensor, TensorMetadata, TensorPrimitive};
use models::common::mask_values;
use models::precision::Precast;
use models::SignModel;

use crate::amp::LossScale;
use crate::config::{OptimizerConfig, OptimizerKind};
use crate::{InnerBackend, Result, TrainBackend, TrainError};

type M = SignModel<TrainBackend>;
type T1 = Tensor<InnerBackend, 1>;
/// A tensor of any rank bound for the flat layout at an offset: its primitive, read row-major.
type Part = (usize, FloatTensor<InnerBackend>);
type AdamWRecord = hashbrown::HashMap<ParamId, AdaptorRecord<AdamW, TrainBackend>>;
type SgdRecord = hashbrown::HashMap<ParamId, AdaptorRecord<Sgd<InnerBackend>, TrainBackend>>;

/// `$body` with `const $d: usize` bound to `$rank` (1 to 4), or `None` for another rank.
macro_rules! by_rank {
    ($rank:expr, $d:ident => $body:expr) => {
        match $rank {
            1 => {
                const $d: usize = 1;
                Some($body)
            }
            2 => {
                const $d: usize = 2;
                Some($body)
            }
            3 => {
                const $d: usize = 3;
                Some($body)
            }
            4 => {
                const $d: usize = 4;
                Some($body)
            }
            _ => None,
        }
    };
}

/// The update rule and its constants.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rule {
    AdamW { beta1: f64, beta2: f64, epsilon: f64, weight_decay: f64 },
    Sgd { momentum: f64, nesterov: bool, weight_decay: f64 },
}

/// One parameter's state, flattened: AdamW's two moments, or SGD's velocity (`m`), as a
/// checkpoint holds it, until the first step lays it out in the flat buffers.
#[derive(Clone)]
struct Slot {
    m: T1,
    v: Option<T1>,
    shape: Vec<usize>,
}

/// Where one trainable parameter lives in the flat buffers.
#[derive(Clone, Debug, PartialEq)]
struct Segment {
    id: ParamId,
    offset: usize,
    shape: Vec<usize>,
}

impl Segment {
    fn len(&self) -> usize {
        self.shape.iter().product()
    }

    fn range(&self) -> std::ops::Range<usize> {
        self.offset..self.offset + self.len()
    }
}

/// Segment offsets are multiples of this many elements (1 KiB of f32): a slice at such an offset
/// is a view of the flat buffer on the GPU backends (their memory alignments are at most 512
/// bytes), not a copy.
const ALIGN: usize = 256;

/// The flat length is a multiple of this many rows, which the gradient norm sums first.
const NORM_ROWS: usize = 512;

/// What [`Optim::step_checked`] decides a step by, all on the device.
#[derive(Debug, Clone)]
pub struct StepCheck {
    /// The step's loss (`[1]`; only whether it is finite counts).
    pub loss: T1,
    /// The squared global norm of the gradients (`[1]`, [`FlatGrads::squared_norm`]), which
    /// carry the loss scale.
    pub norm2: T1,
    /// The loss scale the gradients carry.
    pub scale: LossScale,
    /// Clip the unscaled global norm to this (0: off).
    pub clip: f64,
}

impl StepCheck {
    /// The decisions as tensor ops (`[1]` each): the gradient's factor (unscaling, then
    /// clipping: 1 where the norm is within the limit, `clip / (norm + 1e-6)` where it is
    /// above) and whether the step applies ([`finite_step`]).
    pub fn gate(&self) -> (T1, Tensor<InnerBackend, 1, Bool>) {
        let keep = finite_step(&self.loss, &self.norm2);
        let grad_norm = self.scale.unscale(self.norm2.clone().sqrt());
        let one = Tensor::ones([1], &self.norm2.device());
        let factor = if self.clip > 0.0 {
            let over = grad_norm.clone().greater_elem(self.clip);
            let clipped = grad_norm.add_scalar(1e-6).recip().mul_scalar(self.clip);
            one.mask_where(over, clipped)
        } else {
            one
        };
        (self.scale.unscale(factor), keep)
    }
}

/// Whether a step's loss and squared gradient norm are both finite, on the device: `|loss| +
/// norm2 < inf` is false for a NaN or an infinity in either (`norm2 >= 0`). One fused
/// comparison, where `is_finite` runs seven unfused kernels.
pub fn finite_step(loss: &T1, norm2: &T1) -> Tensor<InnerBackend, 1, Bool> {
    loss.clone().abs().add(norm2.clone()).lower_elem(f64::INFINITY)
}

/// How a step is told whether it applies and by what its gradient is multiplied.
// One per step, moved: boxing the larger variant would only add an allocation.
#[allow(clippy::large_enum_variant)]
enum Gate {
    /// As given ([`Optim::step`]).
    Given { factor: Option<T1>, keep: Option<Tensor<InnerBackend, 1, Bool>> },
    /// Decided on the device ([`Optim::step_checked`]).
    Check(StepCheck),
}

/// A step's gradients in the optimizer's flat layout ([`Optim::gather`]).
pub struct FlatGrads {
    /// Zeros in the padding and where a parameter got no gradient.
    values: T1,
    missing: Vec<Segment>,
    seen: Seen,
}

impl FlatGrads {
    /// `sum(g^2)` as `[1]` on the device, in two reductions along one axis each (Burn's fusion
    /// joins the square with the first): [`NORM_ROWS`] partial sums, then their sum. Full-length
    /// reductions above ~786k elements are wrong on WGPU in Burn 0.21, and the rows stay well
    /// below that up to ~400M parameters.
    pub fn squared_norm(&self) -> T1 {
        let n = self.values.dims()[0];
        if n > 1 << 18 {
            self.values.clone().reshape([NORM_ROWS, n / NORM_ROWS]).square().sum_dim(1).sum_dim(0).reshape([1])
        } else {
            self.values.clone().square().sum_dim(0)
        }
    }
}

/// The state of every trainable parameter in one flat f32 buffer each, in the model's visiting
/// order, and the parameter values the last step gave the model (which holds views of them).
#[derive(Clone)]
struct Flat {
    segments: Vec<Segment>,
    /// Elements, padding included: a multiple of [`NORM_ROWS`] (and so of [`ALIGN`]); the
    /// padding stays 0 in every buffer.
    len: usize,
    params: T1,
    /// The autodiff node of each parameter of the model the last step returned: the same nodes
    /// in the next step's model mean its parameters are still the views of `params`.
    nodes: Vec<u64>,
    /// AdamW's first moment or SGD's velocity (none for SGD without momentum).
    m: Option<T1>,
    /// AdamW's second moment.
    v: Option<T1>,
}

impl Flat {
    /// Each parameter's state as a slot of its own (views of the flat buffers; none for SGD
    /// without momentum, which keeps no state).
    fn per_parameter(&self) -> Vec<(ParamId, Slot)> {
        let Some(m) = &self.m else { return Vec::new() };
        self.segments
            .iter()
            .map(|seg| {
                let cut = |t: &T1| t.clone().slice(seg.range());
                (seg.id, Slot { m: cut(m), v: self.v.as_ref().map(cut), shape: seg.shape.clone() })
            })
            .collect()
    }
}

/// The optimizer of a run, with f32 state in flat buffers: each step gathers the gradients into
/// one buffer and updates every parameter in a handful of element-wise kernels, however many
/// parameter tensors the model has.
#[derive(Clone)]
pub struct Optim {
    rule: Rule,
    flat: Option<Flat>,
    /// State read from a checkpoint and not laid out yet (or of parameters the model lacks).
    loaded: HashMap<ParamId, Slot>,
    /// Steps given so far, less those the host knows were skipped (AdamW's bias correction).
    applied: u64,
    /// How many of the steps given with `keep` since the host last settled them were skipped,
    /// counted on the device (`[1]`); `None` when none is unsettled. The bias correction of a
    /// step takes them out on the device, so the loop need not read each step's outcome.
    unsettled_skips: Option<T1>,
    /// The last host loss scale [`Optim::fused`] uploaded, with its `[1]` tensor, reused while
    /// the scale and device are unchanged (an f32 run's scale is 1 throughout): an upload is
    /// an operation of Burn's fusion stream each step.
    host_scale: Option<(f32, T1)>,
}

impl std::fmt::Debug for Optim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let params = self.flat.as_ref().map_or(0, |f| f.segments.len()) + self.loaded.len();
        f.debug_struct("Optim").field("rule", &self.rule).field("params", &params).finish()
    }
}

impl Optim {
    /// The optimizer `cfg` names, with no state yet.
    pub fn new(cfg: &OptimizerConfig) -> Self {
        let rule = match cfg.kind {
            OptimizerKind::Adamw => Rule::AdamW {
                beta1: f64::from(cfg.beta1 as f32),
                beta2: f64::from(cfg.beta2 as f32),
                epsilon: f64::from(cfg.epsilon as f32),
                weight_decay: f64::from(cfg.weight_decay as f32),
            },
            OptimizerKind::Sgd => Rule::Sgd {
                momentum: cfg.momentum,
                nesterov: cfg.nesterov,
                weight_decay: f64::from(cfg.weight_decay as f32),
            },
        };
        Self { rule, flat: None, loaded: HashMap::new(), applied: 0, unsettled_skips: None, host_scale: None }
    }

    /// `grads` in this optimizer's flat layout for `model`'s trainable parameters (laid out at
    /// the first call, with the state of a loaded checkpoint): one buffer, so the gradient norm
    /// and the update run over all parameters at once.
    pub fn gather(&mut self, model: &M, grads: GradientsParams) -> FlatGrads {
        let device = model.devices().into_iter().next().expect("a model lives on a device");
        let seen = Seen::of(model);
        let flat = self.lay_out(&seen, &device);
        let (values, missing) = gather_grads(model, grads, &flat);
        self.flat = Some(flat);
        FlatGrads { values, missing, seen }
    }

    /// `model`'s trainable parameters cast to `dtype` in one kernel, for
    /// [`models::precision::ComputeModel::with_precast`]: `None` before the first step has laid
    /// them out, or when `model`'s parameters are not the views of this optimizer's buffer.
    pub fn precast(&self, model: &M, dtype: FloatDType) -> Option<Precast<TrainBackend>> {
        let flat = self.flat.as_ref()?;
        if flat.nodes != Seen::of(model).nodes {
            return None;
        }
        let cast = Tensor::from_inner(flat.params.clone().cast(dtype));
        Some(Precast { flat: cast, offsets: flat.segments.iter().map(|s| s.offset).collect() })
    }

    /// Apply `grads` (from [`Optim::gather`] for this `model`) with learning rate `lr`, every
    /// gradient multiplied by `factor` (`[1]`; none: 1). `keep` (`[1]`, on the device) decides
    /// there whether the step applies: where it is false, model and state stay as they were (the
    /// gradients may then be non-finite), and the caller reports how many such steps were
    /// skipped with [`Optim::settle`], now or some steps later; until then the device counts them
    /// and later steps' bias corrections leave them out. Without `keep` the step applies (the
    /// caller knows it is finite). Nothing is read back to the host. The model comes back with
    /// its trainable parameters as views of one flat buffer.
    pub fn step(
        &mut self,
        lr: f64,
        model: M,
        grads: FlatGrads,
        factor: Option<T1>,
        keep: Option<Tensor<InnerBackend, 1, Bool>>,
    ) -> M {
        self.step_gated(lr, model, grads, Gate::Given { factor, keep })
    }

    /// [`Optim::step`] with the step's decisions made on the device from `check`: it applies
    /// where the loss and the squared gradient norm are finite, with the gradient unscaled and
    /// clipped (`check.clip`); else it is skipped as a false `keep` skips it (the caller settles
    /// it later). AdamW on a CubeCL device makes the decisions inside its update kernel
    /// (`cube::adamw`: one operation where the tensor ops queue some fifty on one-element
    /// tensors); elsewhere they are tensor ops ([`StepCheck::gate`]). Nothing is read back.
    pub fn step_checked(&mut self, lr: f64, model: M, grads: FlatGrads, check: StepCheck) -> M {
        self.step_gated(lr, model, grads, Gate::Check(check))
    }

    fn step_gated(&mut self, lr: f64, model: M, grads: FlatGrads, gate: Gate) -> M {
        self.applied += 1;
        let t = self.applied as i32;
        let device = model.devices().into_iter().next().expect("a model lives on a device");
        let FlatGrads { values: g, missing, seen } = grads;
        let mut flat = self.lay_out(&seen, &device);
        let params = if flat.nodes == seen.nodes { flat.params.clone() } else { gather_params(&model, &flat) };
        // The moments move into the update, so the one that reads them last frees them.
        let state = [flat.m.take(), flat.v.take()];
        let (new_params, m, v) = match self.fused(lr, t, gate, [params, g], state, &missing) {
            Ok(updated) => updated,
            Err((gate, [params, g], [m0, v0])) => {
                let (factor, keep) = match gate {
                    Gate::Given { factor, keep } => (factor, keep),
                    Gate::Check(check) => {
                        let (factor, keep) = check.gate();
                        (Some(factor), Some(keep))
                    }
                };
                let has_grad = Self::has_grad(&flat, &missing, &device);
                let corrections = self.corrections(t, keep.as_ref());
                let update = Update { rule: self.rule, lr, factor, keep, has_grad, corrections };
                update.apply(params, g, m0, v0)
            }
        };
        let views = all_views(&new_params, &flat.segments);
        let segments = flat.segments.iter();
        let mut load = LoadViews { flat: &new_params, segments, views, nodes: Vec::new(), old: Vec::new() };
        let model = model.map(&mut load);
        cube::release(load.old);
        let nodes = load.nodes;
        self.flat = Some(Flat { params: new_params, nodes, m, v, ..flat });
        model
    }

    /// AdamW with the step's checks in one kernel (`cube::adamw`), where it applies: a check
    /// to make, a CubeCL device, and every parameter with a gradient. Where it does not, the
    /// gate and the buffers come back as they were.
    #[allow(clippy::type_complexity, clippy::result_large_err)]
    fn fused(
        &mut self,
        lr: f64,
        t: i32,
        gate: Gate,
        [p, g]: [T1; 2],
        [m0, v0]: [Option<T1>; 2],
        missing: &[Segment],
    ) -> std::result::Result<(T1, Option<T1>, Option<T1>), (Gate, [T1; 2], [Option<T1>; 2])> {
        let (Gate::Check(check), Rule::AdamW { beta1, beta2, epsilon, weight_decay }, true) =
            (&gate, self.rule, missing.is_empty())
        else {
            return Err((gate, [p, g], [m0, v0]));
        };
        let device = p.device();
        let scale = match &check.scale {
            LossScale::Host(s) => self.upload_scale(*s as f32, &device),
            LossScale::Device(d) => d.clone(),
        };
        let unsettled = self.unsettled_skips.is_some();
        let skips = self.unsettled_skips.take().unwrap_or_else(|| Tensor::zeros([1], &device));
        let had_state = m0.is_some();
        let m0 = m0.unwrap_or_else(|| g.zeros_like());
        let v0 = v0.unwrap_or_else(|| g.zeros_like());
        let set = cube::AdamW { beta1, beta2, epsilon, weight_decay, lr, clip: check.clip, step: t };
        let inputs = [p, g, m0, v0, check.loss.clone(), check.norm2.clone(), scale, skips].map(primitive);
        let wrap = |t| Tensor::from_primitive(TensorPrimitive::Float(t));
        match cube::adamw(inputs, set) {
            Ok([p, m, v, skips]) => {
                self.unsettled_skips = Some(wrap(skips));
                Ok((wrap(p), Some(wrap(m)), Some(wrap(v))))
            }
            Err([p, g, m0, v0, _, _, _, skips]) => {
                if unsettled {
                    self.unsettled_skips = Some(wrap(skips));
                }
                let state = if had_state { [Some(wrap(m0)), Some(wrap(v0))] } else { [None, None] };
                Err((gate, [wrap(p), wrap(g)], state))
            }
        }
    }

    /// The host loss scale `scale` as `[1]` on `device`: the last upload while it holds.
    fn upload_scale(&mut self, scale: f32, device: &device::DispatchDevice) -> T1 {
        match &self.host_scale {
            Some((s, t)) if *s == scale && t.device() == *device => t.clone(),
            _ => {
                let t = Tensor::from_floats([scale], device);
                self.host_scale = Some((scale, t.clone()));
                t
            }
        }
    }

    /// AdamW's bias corrections for step `t` as burn-optim computes them (in f32 on the host),
    /// less the skips counted on the device when the step is given `keep` (the skips so far
    /// are read, this step's own added for the steps after it: the same ops every step,
    /// compiled once); 1 for SGD.
    fn corrections(&mut self, t: i32, keep: Option<&Tensor<InnerBackend, 1, Bool>>) -> Corrections {
        let skips = keep.map(|k| {
            let before = self.unsettled_skips.take().unwrap_or_else(|| Tensor::zeros([1], &k.device()));
            let skip = mask_values(k.clone(), 0.0, 1.0, DType::F32);
            self.unsettled_skips = Some(before.clone() + skip);
            before
        });
        match self.rule {
            Rule::AdamW { beta1, beta2, .. } => {
                let c = |beta: f64| f64::from(1f32 - (beta as f32).powi(t));
                let host = (c(beta1), c(beta2));
                match &skips {
                    None => Corrections::Host(host.0, host.1),
                    Some(skips) => Corrections::Device(
                        without_skips(skips, beta1, t, host.0),
                        without_skips(skips, beta2, t, host.1),
                    ),
                }
            }
            Rule::Sgd { .. } => Corrections::Host(1.0, 1.0),
        }
    }

    /// Where a parameter has a gradient this step, as a mask over the flat buffer (none:
    /// everywhere). Parameters without one keep their values and state (as Burn's optimizers
    /// leave them); the mask is uploaded only in such a step.
    fn has_grad(
        flat: &Flat,
        missing: &[Segment],
        device: &device::DispatchDevice,
    ) -> Option<Tensor<InnerBackend, 1, Bool>> {
        (!missing.is_empty()).then(|| {
            let mut mask = vec![true; flat.len];
            for seg in missing {
                mask[seg.range()].iter_mut().for_each(|b| *b = false);
            }
            Tensor::<InnerBackend, 1, Bool>::from_data(burn::tensor::TensorData::new(mask, [flat.len]), device)
        })
    }

    /// The flat layout of `seen`'s trainable parameters, with the state this optimizer holds for
    /// them (zeros for parameters it has none of): the last step's when the parameters are the
    /// same, else laid out anew from the per-parameter state.
    fn lay_out(&mut self, seen: &Seen, device: &device::DispatchDevice) -> Flat {
        if let Some(flat) = self.flat.take() {
            let same = flat.segments.len() == seen.params.len()
                && flat.segments.iter().zip(&seen.params).all(|(s, (id, shape))| s.id == *id && &s.shape == shape);
            if same {
                return flat;
            }
            self.unflatten(flat);
        }
        let mut segments = Vec::with_capacity(seen.params.len());
        let mut len = 0;
        for (id, shape) in &seen.params {
            segments.push(Segment { id: *id, offset: len, shape: shape.clone() });
            len += shape.iter().product::<usize>().div_ceil(ALIGN) * ALIGN;
        }
        let len = len.div_ceil(NORM_ROWS) * NORM_ROWS;
        let state = |pick: &dyn Fn(&Slot) -> Option<T1>| {
            let parts: Vec<Part> = segments
                .iter()
                .filter_map(|seg| self.loaded.get(&seg.id).and_then(pick).map(|t| (seg.offset, primitive(t))))
                .collect();
            assemble(parts, len, device)
        };
        let (m, v) = match self.rule {
            Rule::AdamW { .. } => (Some(state(&|s| Some(s.m.clone()))), Some(state(&|s| s.v.clone()))),
            Rule::Sgd { momentum, .. } => ((momentum > 0.0).then(|| state(&|s| Some(s.m.clone()))), None),
        };
        for seg in &segments {
            self.loaded.remove(&seg.id);
        }
        // No model has views of these yet: the first step gathers the parameters.
        Flat { segments, len, params: Tensor::zeros([len], device), nodes: Vec::new(), m, v }
    }

    /// Move the flat state back to per-parameter slots (the model's parameters changed).
    fn unflatten(&mut self, flat: Flat) {
        self.loaded.extend(flat.per_parameter());
    }

    /// Every parameter's state, per parameter, as a checkpoint holds it.
    fn slots(&self) -> Vec<(ParamId, Slot)> {
        let mut out: Vec<(ParamId, Slot)> = self.loaded.iter().map(|(id, s)| (*id, s.clone())).collect();
        out.extend(self.flat.iter().flat_map(Flat::per_parameter));
        out
    }

    /// The host has read the outcomes of every step given with `keep` since the last call:
    /// `skipped` of them were not applied (their loss or gradients were not finite) and do not
    /// count as steps.
    pub fn settle(&mut self, skipped: u64) {
        self.applied = self.applied.saturating_sub(skipped);
        self.unsettled_skips = None;
    }

    /// Write the state to `path`, atomically, in Burn's optimizer record format (waits for the
    /// device: call it where the loop saves a checkpoint).
    pub fn save(&self, path: &Path) -> Result<()> {
        if self.unsettled_skips.is_some() {
            return Err(TrainError::Invalid(format!(
                "{}: the optimizer was saved before the outcomes of its last steps were read (a bug: settle first)",
                path.display()
            )));
        }
        let time = self.applied as usize;
        match self.rule {
            Rule::AdamW { .. } => {
                let mut record = AdamWRecord::new();
                for (id, slot) in self.slots() {
                    let v = slot.v.clone().unwrap_or_else(|| slot.m.zeros_like());
                    let rec = by_rank!(slot.shape.len(), D => {
                        let state = AdamWState {
                            momentum: AdaptiveMomentumState {
                                time,
                                moment_1: shaped::<D>(slot.m.clone(), &slot.shape),
                                moment_2: shaped::<D>(v, &slot.shape),
                                max_moment_2: None,
                            },
                        };
                        AdaptorRecord::from_state(state)
                    })
                    .ok_or_else(|| rank_error(path))?;
                    record.insert(id, rec);
                }
                bundle::weights::write_record::<TrainBackend, _>(record, path)?;
            }
            Rule::Sgd { .. } => {
                let mut record = SgdRecord::new();
                for (id, slot) in self.slots() {
                    let rec = by_rank!(slot.shape.len(), D => {
                        let velocity = shaped::<D>(slot.m.clone(), &slot.shape);
                        AdaptorRecord::from_state(SgdState { momentum: Some(MomentumState::new(velocity)) })
                    })
                    .ok_or_else(|| rank_error(path))?;
                    record.insert(id, rec);
                }
                bundle::weights::write_record::<TrainBackend, _>(record, path)?;
            }
        }
        Ok(())
    }

    /// Load the state saved by [`Optim::save`] (or by Burn's own `AdamW`/`Sgd`, as checkpoints
    /// written before this optimizer existed): the optimizer kind must match.
    /// Every state of a parameter of `model` must have that parameter's shape (a file that does
    /// not fit is an error naming it and the parameter, before any step lays the state out).
    pub fn load(self, path: &Path, model: &M, device: &device::DispatchDevice) -> Result<Self> {
        const WHAT: &str = "optimizer state";
        let mut slots = HashMap::new();
        let mut time = 0usize;
        match self.rule {
            Rule::AdamW { .. } => {
                let record: AdamWRecord = bundle::weights::read_record(path, WHAT, device)?;
                for (id, rec) in record {
                    let AdaptorRecord::V1(v1) = rec;
                    let (momentum, shape) = adam_state(v1).ok_or_else(|| rank_error(path))?;
                    time = time.max(momentum.0);
                    slots.insert(id, Slot { m: momentum.1, v: Some(momentum.2), shape });
                }
            }
            Rule::Sgd { .. } => {
                let record: SgdRecord = bundle::weights::read_record(path, WHAT, device)?;
                for (id, rec) in record {
                    let AdaptorRecord::V1(v1) = rec;
                    if let Some((m, shape)) = sgd_velocity(v1, device).ok_or_else(|| rank_error(path))? {
                        slots.insert(id, Slot { m, v: None, shape });
                    }
                }
            }
        }
        check_shapes(path, &slots, &Seen::of(model))?;
        let applied = time as u64;
        Ok(Self { rule: self.rule, flat: None, loaded: slots, applied, unsettled_skips: None, host_scale: None })
    }
}

/// Each slot of a parameter in `seen` has its shape, its moments as many elements.
fn check_shapes(path: &Path, slots: &HashMap<ParamId, Slot>, seen: &Seen) -> Result<()> {
    for (id, shape) in &seen.params {
        let Some(slot) = slots.get(id) else { continue };
        let n: usize = shape.iter().product();
        let lengths = [Some(&slot.m), slot.v.as_ref()].into_iter().flatten().map(|t| t.dims()[0]);
        if &slot.shape != shape || lengths.into_iter().any(|len| len != n) {
            return Err(TrainError::Invalid(format!(
                "{}: the optimizer state of parameter {id} has shape {:?}; the model's parameter is {:?}",
                path.display(),
                slot.shape,
                shape
            )));
        }
    }
    Ok(())
}

fn shaped<const D: usize>(flat: T1, shape: &[usize]) -> Tensor<InnerBackend, D> {
    let mut dims = [0usize; D];
    dims.copy_from_slice(shape);
    flat.reshape(dims)
}

fn rank_error(path: &Path) -> TrainError {
    TrainError::Invalid(format!(
        "{}: optimizer state of a parameter of rank 0 or above 4 (ranks 1 to 4 are supported)",
        path.display()
    ))
}

/// (time, first moment, second moment) flattened, and the shape.
fn adam_state(rec: AdaptorRecordV1<AdamW, InnerBackend>) -> Option<((usize, T1, T1), Vec<usize>)> {
    fn flat<const D: usize>(s: AdamWState<InnerBackend, D>) -> ((usize, T1, T1), Vec<usize>) {
        let m = s.momentum;
        let shape = m.moment_1.dims().to_vec();
        // Each moment flattened by its own size (a damaged file may disagree; checked later).
        ((m.time, flatten(m.moment_1), flatten(m.moment_2)), shape)
    }
    Some(match rec {
        AdaptorRecordV1::Rank1(s) => flat(s),
        AdaptorRecordV1::Rank2(s) => flat(s),
        AdaptorRecordV1::Rank3(s) => flat(s),
        AdaptorRecordV1::Rank4(s) => flat(s),
        _ => return None,
    })
}

/// `t` as one axis. Burn's `reshape` reads a 0 in the target shape as "keep that axis", so a
/// tensor without elements (a damaged file's `[16, 0]`) becomes an empty tensor instead of a
/// panic; its length then fails the shape check, which names the file and the parameter.
fn flatten<const D: usize>(t: Tensor<InnerBackend, D>) -> T1 {
    let n = t.shape().num_elements();
    if n == 0 {
        T1::empty([0], &t.device())
    } else {
        t.reshape([n])
    }
}

/// SGD's velocity flattened with its shape (`Some(None)`: SGD without momentum keeps none).
fn sgd_velocity(
    rec: AdaptorRecordV1<Sgd<InnerBackend>, InnerBackend>,
    device: &device::DispatchDevice,
) -> Option<Option<(T1, Vec<usize>)>> {
    fn flat<const D: usize>(s: SgdState<InnerBackend, D>, device: &device::DispatchDevice) -> Option<(T1, Vec<usize>)> {
        // The velocity field is private to burn-optim; its record item is not.
        let item: MomentumStateItem<InnerBackend, D, FullPrecisionSettings> = s.momentum?.into_item();
        let velocity = Tensor::<InnerBackend, D>::from_item(item.velocity, device);
        let shape = velocity.dims().to_vec();
        Some((flatten(velocity), shape))
    }
    Some(match rec {
        AdaptorRecordV1::Rank1(s) => flat(s, device),
        AdaptorRecordV1::Rank2(s) => flat(s, device),
        AdaptorRecordV1::Rank3(s) => flat(s, device),
        AdaptorRecordV1::Rank4(s) => flat(s, device),
        _ => return None,
    })
}

/// AdamW's bias corrections `1 - beta^t` of a step.
// One short-lived value per step: boxing the larger variant would only add an allocation.
#[allow(clippy::large_enum_variant)]
enum Corrections {
    /// Known on the host (no step is unsettled).
    Host(f64, f64),
    /// `[1]` tensors on the device, with the unsettled skipped steps taken out of `t`.
    Device(T1, T1),
}

/// `1 - beta^(t - skips)` on the device: exactly `host` (`1 - beta^t` as the host computes it)
/// while no unsettled step was skipped (`host + (x - host) x 0`), else `1 - beta^t x beta^-skips`
/// (equal within rounding). Element-wise float ops only, which the fusion joins into one kernel.
fn without_skips(skips: &T1, beta: f64, t: i32, host: f64) -> T1 {
    let beta = beta as f32;
    let shifted =
        skips.clone().mul_scalar(-f64::from(beta.ln())).exp().mul_scalar(-f64::from(beta.powi(t))).add_scalar(1.0);
    // 0 without skips, else 1 (skips are whole numbers): s / (s + 1e-30).
    let any = skips.clone().div(skips.clone().add_scalar(1e-30));
    shifted.sub_scalar(host).mul(any).add_scalar(host)
}

/// The update of the flat buffers as tensor ops.
struct Update {
    rule: Rule,
    lr: f64,
    factor: Option<T1>,
    keep: Option<Tensor<InnerBackend, 1, Bool>>,
    /// Where a parameter has a gradient this step (none: everywhere).
    has_grad: Option<Tensor<InnerBackend, 1, Bool>>,
    /// AdamW's bias corrections 1 - beta^t of this step.
    corrections: Corrections,
}

impl Update {
    /// `new` where the step applies, `old` where it does not (a selection: a non-finite `new`
    /// does not leak into `old`).
    fn pick(&self, new: T1, old: T1) -> T1 {
        let new = match &self.has_grad {
            Some(has) => old.clone().mask_where(has.clone(), new),
            None => new,
        };
        match &self.keep {
            Some(keep) => old.mask_where(keep.clone(), new),
            None => new,
        }
    }

    /// The gradient times the factor.
    fn scaled(&self, g: T1) -> T1 {
        match &self.factor {
            Some(f) => g * f.clone(),
            None => g,
        }
    }

    /// The new parameters `p` and state `(m, v)` given the gradient `g`, all flat.
    fn apply(self, p: T1, g: T1, m0: Option<T1>, v0: Option<T1>) -> (T1, Option<T1>, Option<T1>) {
        let lr = self.lr;
        match self.rule {
            Rule::AdamW { beta1, beta2, epsilon, weight_decay } => {
                let m0 = m0.unwrap_or_else(|| g.zeros_like());
                let v0 = v0.unwrap_or_else(|| g.zeros_like());
                let g = self.scaled(g);
                let m = m0.clone().mul_scalar(beta1).add(g.clone().mul_scalar(1.0 - beta1));
                let v = v0.clone().mul_scalar(beta2).add(g.square().mul_scalar(1.0 - beta2));
                let (m_hat, v_hat) = match &self.corrections {
                    Corrections::Host(c1, c2) => (m.clone().div_scalar(*c1), v.clone().div_scalar(*c2)),
                    Corrections::Device(c1, c2) => (m.clone().div(c1.clone()), v.clone().div(c2.clone())),
                };
                let delta = m_hat.div(v_hat.sqrt().add_scalar(epsilon));
                let decayed =
                    if weight_decay == 0.0 { p.clone() } else { p.clone().mul_scalar(1.0 - lr * weight_decay) };
                let new_p = decayed - delta.mul_scalar(lr);
                let m = self.pick(m, m0);
                let v = self.pick(v, v0);
                (self.pick(new_p, p), Some(m), Some(v))
            }
            Rule::Sgd { momentum, nesterov, weight_decay } => {
                let g = self.scaled(g);
                let g = if weight_decay == 0.0 { g } else { p.clone().mul_scalar(weight_decay).add(g) };
                let (step, m) = if momentum > 0.0 {
                    // Burn's first velocity is the gradient itself: a zero velocity gives it.
                    let v0 = m0.unwrap_or_else(|| g.zeros_like());
                    let v = g.clone().add(v0.clone().mul_scalar(momentum));
                    let step = if nesterov { v.clone().mul_scalar(momentum).add(g) } else { v.clone() };
                    (step, Some(self.pick(v, v0)))
                } else {
                    (g, None)
                };
                let new_p = p.clone() - step.mul_scalar(lr);
                (self.pick(new_p, p), m, None)
            }
        }
    }
}

/// The trainable parameters of a model, in visiting order: ids, shapes and autodiff nodes.
struct Seen {
    params: Vec<(ParamId, Vec<usize>)>,
    nodes: Vec<u64>,
}

impl Seen {
    fn of(model: &M) -> Self {
        let mut seen = Seen { params: Vec::new(), nodes: Vec::new() };
        model.visit(&mut seen);
        seen
    }
}

impl ModuleVisitor<TrainBackend> for Seen {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<TrainBackend, D>>) {
        let t = param.val();
        if t.is_require_grad() {
            self.params.push((param.id, t.dims().to_vec()));
            self.nodes.push(node_of(t));
        }
    }
}

/// The autodiff graph node of a tensor: a new one for every tensor made to require gradients,
/// so it tells whether a parameter is still the one a step put in the model.
fn node_of<const D: usize>(t: Tensor<TrainBackend, D>) -> u64 {
    match t.into_primitive() {
        TensorPrimitive::Float(t) => t.node.id.value,
        TensorPrimitive::QFloat(_) => u64::MAX,
    }
}

/// Zeros of length `len` with each `(offset, values)` written at its offset (offsets ascending).
/// On a CubeCL device one kernel writes eight parts and the zeros around them per launch
/// (`cube::assemble`); other GPU backends write each part into the buffer in place (one launch
/// per part, none for the padding); Burn's CPU backend copies the whole destination for every
/// slice write, so there the parts and zero padding are concatenated in one pass instead.
fn assemble(parts: Vec<Part>, len: usize, device: &device::DispatchDevice) -> T1 {
    // Half-precision gradients (of a precast compute copy) beside f32 ones (BatchNorm's): each
    // dtype's parts laid out apart, then joined in f32 (a cast and an add: two launches).
    let (half, full): (Vec<_>, Vec<_>) = parts.into_iter().partition(|(_, t)| t.dtype() != DType::F32);
    match (half.is_empty(), full.is_empty()) {
        (true, _) => assemble_one(full, len, device),
        (false, true) => assemble_one(half, len, device).cast(FloatDType::F32),
        (false, false) => assemble_one(half, len, device).cast(FloatDType::F32) + assemble_one(full, len, device),
    }
}

/// [`assemble`] for parts of one dtype (the buffer's). SignFlow's kernel takes the parts at
/// their own shapes; the other paths flatten each first.
fn assemble_one(parts: Vec<Part>, len: usize, device: &device::DispatchDevice) -> T1 {
    let dtype = parts.first().map_or(DType::F32, |(_, t)| t.dtype());
    let zeros = |n: usize| Tensor::zeros([n], (device, dtype));
    let on_gpu = crate::on_gpu(device);
    let parts = if on_gpu {
        match cube::assemble(parts, len) {
            Ok(flat) => return Tensor::from_primitive(TensorPrimitive::Float(flat)),
            Err(parts) => parts,
        }
    } else {
        parts
    };
    let parts = parts.into_iter().map(|(at, t)| (at, flat_part(t)));
    if on_gpu {
        return parts.fold(zeros(len), |flat, (at, t)| {
            let n = t.dims()[0];
            flat.slice_assign(at..at + n, t)
        });
    }
    let mut pieces = Vec::with_capacity(parts.len() * 2 + 1);
    let mut end = 0;
    for (at, t) in parts {
        if at > end {
            pieces.push(zeros(at - end));
        }
        end = at + t.dims()[0];
        pieces.push(t);
    }
    if len > end {
        pieces.push(zeros(len - end));
    }
    Tensor::cat(pieces, 0)
}

/// A tensor's primitive, as [`assemble`] takes it.
fn primitive<const D: usize>(t: Tensor<InnerBackend, D>) -> FloatTensor<InnerBackend> {
    t.into_primitive().tensor()
}

/// A part's elements as one axis.
fn flat_part(t: FloatTensor<InnerBackend>) -> T1 {
    let n = t.shape().num_elements();
    Tensor::from_primitive(TensorPrimitive::Float(InnerBackend::float_reshape(t, Shape::new([n]))))
}

/// The model's trainable parameters in the flat layout (when they are not the last step's).
fn gather_params(model: &M, flat: &Flat) -> T1 {
    struct Collect<'a> {
        segments: std::slice::Iter<'a, Segment>,
        parts: Vec<Part>,
    }
    impl ModuleVisitor<TrainBackend> for Collect<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<TrainBackend, D>>) {
            let t = param.val();
            if t.is_require_grad() {
                let seg = self.segments.next().expect("one segment per trainable parameter");
                self.parts.push((seg.offset, primitive(t.inner())));
            }
        }
    }
    let mut c = Collect { segments: flat.segments.iter(), parts: Vec::new() };
    model.visit(&mut c);
    assemble(c.parts, flat.len, &flat.params.device())
}

/// The gradients in the flat layout (zeros where a parameter has none), and the segments of
/// the parameters that have none.
fn gather_grads(model: &M, grads: GradientsParams, flat: &Flat) -> (T1, Vec<Segment>) {
    struct Collect<'a> {
        grads: GradientsParams,
        segments: std::slice::Iter<'a, Segment>,
        parts: Vec<Part>,
        missing: Vec<Segment>,
    }
    impl ModuleVisitor<TrainBackend> for Collect<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<TrainBackend, D>>) {
            if !param.val().is_require_grad() {
                return;
            }
            let seg = self.segments.next().expect("one segment per trainable parameter");
            match self.grads.remove::<InnerBackend, D>(param.id) {
                Some(g) => self.parts.push((seg.offset, primitive(g))),
                None => self.missing.push(seg.clone()),
            }
        }
    }
    let mut c = Collect { grads, segments: flat.segments.iter(), parts: Vec::new(), missing: Vec::new() };
    model.visit(&mut c);
    (assemble(c.parts, flat.len, &flat.params.device()), c.missing)
}

/// Puts views of the new flat parameters into the model, recording their autodiff nodes.
struct LoadViews<'a> {
    flat: &'a T1,
    segments: std::slice::Iter<'a, Segment>,
    /// Every segment's view, in segment order, where [`all_views`] made them.
    views: Option<std::vec::IntoIter<FloatTensor<InnerBackend>>>,
    nodes: Vec<u64>,
    /// The parameters the views replace, to be freed at once (`cube::release`).
    old: Vec<FloatTensor<InnerBackend>>,
}

/// Views of every segment of `flat` in one operation (`cube::views`; a CubeCL device, where each
/// segment's start is aligned), else `None`: one queued operation per parameter at every step
/// is host work in Burn's fusion.
fn all_views(flat: &T1, segments: &[Segment]) -> Option<std::vec::IntoIter<FloatTensor<InnerBackend>>> {
    let windows: Vec<(usize, Shape)> = segments.iter().map(|s| (s.offset, Shape::from(s.shape.clone()))).collect();
    cube::views(primitive(flat.clone()), &windows).ok().map(Vec::into_iter)
}

impl ModuleMapper<TrainBackend> for LoadViews<'_> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<TrainBackend, D>>) -> Param<Tensor<TrainBackend, D>> {
        let (id, tensor, mapper) = param.consume();
        if !tensor.is_require_grad() {
            return Param::from_mapped_value(id, tensor, mapper);
        }
        let seg = self.segments.next().expect("one segment per trainable parameter");
        let dims = tensor.dims();
        // Burn's slice is a view only when the segment's end is aligned too; `cube::views`
        // needs only each start aligned (which every segment's is) on a CubeCL device.
        let view = match self.views.as_mut().and_then(Iterator::next) {
            Some(view) => Tensor::from_primitive(TensorPrimitive::Float(view)),
            None => self.flat.clone().slice(seg.range()).reshape(dims),
        };
        self.old.push(primitive(tensor.inner()));
        let tensor = Tensor::<TrainBackend, D>::from_inner(view).require_grad();
        self.nodes.push(node_of(tensor.clone()));
        Param::from_mapped_value(id, tensor, mapper)
    }
}
