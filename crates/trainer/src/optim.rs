//! The optimizers the config can name (AdamW, SGD with momentum), written for a step that never
//! waits for the device: the update takes the gradient factor (unscaling and global-norm
//! clipping) and whether to apply the step at all as tensors on the device, so a non-finite step
//! is skipped there, and each parameter's whole update (moments, bias correction, decay) is one
//! chain of element-wise ops that Burn's fusion runs as one kernel.
//!
//! The arithmetic is Burn's `AdamW` and `Sgd` (burn-optim 0.21), which a test checks step by step;
//! the state is saved in their record format, so checkpoints written by either load in both.

use std::collections::HashMap;
use std::path::Path;

use burn::module::{Module, ModuleMapper, Param, ParamId};
use burn::optim::momentum::{MomentumState, MomentumStateItem};
use burn::optim::record::{AdaptorRecord, AdaptorRecordV1};
use burn::optim::{AdamW, AdamWState, AdaptiveMomentumState, GradientsParams, Sgd, SgdState};
use burn::record::{FullPrecisionSettings, Record};
use burn::tensor::{Bool, Tensor};
use models::SignModel;

use crate::config::{OptimizerConfig, OptimizerKind};
use crate::{InnerBackend, Result, TrainBackend, TrainError};

type M = SignModel<TrainBackend>;
type T1 = Tensor<InnerBackend, 1>;
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

/// One parameter's state, flattened: AdamW's two moments, or SGD's velocity (`m`).
#[derive(Clone)]
struct Slot {
    m: T1,
    v: Option<T1>,
    shape: Vec<usize>,
}

/// The optimizer of a run, with f32 state.
#[derive(Clone)]
pub struct Optim {
    rule: Rule,
    slots: HashMap<ParamId, Slot>,
    /// Steps given so far, less those the host knows were skipped (AdamW's bias correction).
    applied: u64,
    /// How many of the steps given with `keep` since the host last settled them were skipped,
    /// counted on the device (`[1]`); `None` when none is unsettled. The bias correction of a
    /// step takes them out on the device, so the loop need not read each step's outcome.
    unsettled_skips: Option<T1>,
}

impl std::fmt::Debug for Optim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Optim").field("rule", &self.rule).field("params", &self.slots.len()).finish()
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
        Self { rule, slots: HashMap::new(), applied: 0, unsettled_skips: None }
    }

    /// Apply `grads` to `model` with learning rate `lr`, every gradient multiplied by `factor`
    /// (`[1]`; none: 1). `keep` (`[1]`, on the device) decides there whether the step applies:
    /// where it is false, model and state stay as they were (the gradients may then be
    /// non-finite), and the caller reports how many such steps were skipped with
    /// [`Optim::settle`], now or some steps later; until then the device counts them and later
    /// steps' bias corrections leave them out. Without `keep` the step applies (the caller knows
    /// it is finite). Nothing is read back to the host.
    pub fn step(
        &mut self,
        lr: f64,
        model: M,
        grads: GradientsParams,
        factor: Option<T1>,
        keep: Option<Tensor<InnerBackend, 1, Bool>>,
    ) -> M {
        self.applied += 1;
        let t = self.applied as i32;
        // Skips counted on the device so far (none when the last step was settled); this step's
        // own skip is added for the steps after it. The same ops every step: compiled once.
        let skips = keep.as_ref().map(|k| {
            let before = self.unsettled_skips.take().unwrap_or_else(|| Tensor::zeros([1], &k.device()));
            let now = before.clone() + k.clone().float().neg().add_scalar(1.0);
            self.unsettled_skips = Some(now);
            before
        });
        let corrections = match self.rule {
            // As burn-optim computes them: in f32 on the host.
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
        };
        let mut mapper = Update { rule: self.rule, lr, slots: &mut self.slots, grads, factor, keep, corrections };
        model.map(&mut mapper)
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
                for (id, slot) in &self.slots {
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
                    record.insert(*id, rec);
                }
                bundle::weights::write_record::<TrainBackend, _>(record, path)?;
            }
            Rule::Sgd { .. } => {
                let mut record = SgdRecord::new();
                for (id, slot) in &self.slots {
                    let rec = by_rank!(slot.shape.len(), D => {
                        let velocity = shaped::<D>(slot.m.clone(), &slot.shape);
                        AdaptorRecord::from_state(SgdState { momentum: Some(MomentumState::new(velocity)) })
                    })
                    .ok_or_else(|| rank_error(path))?;
                    record.insert(*id, rec);
                }
                bundle::weights::write_record::<TrainBackend, _>(record, path)?;
            }
        }
        Ok(())
    }

    /// Load the state saved by [`Optim::save`] (or by Burn's own `AdamW`/`Sgd`, as checkpoints
    /// written before this optimizer existed): the optimizer kind must match.
    pub fn load(self, path: &Path, device: &device::DispatchDevice) -> Result<Self> {
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
        Ok(Self { rule: self.rule, slots, applied: time as u64, unsettled_skips: None })
    }
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
        let n = shape.iter().product::<usize>();
        ((m.time, m.moment_1.reshape([n]), m.moment_2.reshape([n])), shape)
    }
    Some(match rec {
        AdaptorRecordV1::Rank1(s) => flat(s),
        AdaptorRecordV1::Rank2(s) => flat(s),
        AdaptorRecordV1::Rank3(s) => flat(s),
        AdaptorRecordV1::Rank4(s) => flat(s),
        _ => return None,
    })
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
        let n = shape.iter().product::<usize>();
        Some((velocity.reshape([n]), shape))
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

/// The update of every parameter that has a gradient.
struct Update<'a> {
    rule: Rule,
    lr: f64,
    slots: &'a mut HashMap<ParamId, Slot>,
    grads: GradientsParams,
    factor: Option<T1>,
    keep: Option<Tensor<InnerBackend, 1, Bool>>,
    /// AdamW's bias corrections 1 - beta^t of this step.
    corrections: Corrections,
}

impl Update<'_> {
    /// `new` where the step applies, `old` where it does not (a selection: a non-finite `new`
    /// does not leak into `old`).
    fn pick(&self, new: T1, old: T1) -> T1 {
        match &self.keep {
            Some(keep) => old.mask_where(keep.clone(), new),
            None => new,
        }
    }

    /// The new flat value of a parameter `p` with gradient `g` (both flat), updating its slot.
    fn update(&mut self, id: ParamId, p: T1, g: T1, shape: &[usize]) -> T1 {
        let g = match &self.factor {
            Some(f) => g * f.clone(),
            None => g,
        };
        let lr = self.lr;
        let slot = self.slots.remove(&id);
        match self.rule {
            Rule::AdamW { beta1, beta2, epsilon, weight_decay } => {
                let (m0, v0) = match slot {
                    Some(s) => (s.m, s.v.unwrap_or_else(|| g.zeros_like())),
                    None => (g.zeros_like(), g.zeros_like()),
                };
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
                self.slots.insert(id, Slot { m, v: Some(v), shape: shape.to_vec() });
                self.pick(new_p, p)
            }
            Rule::Sgd { momentum, nesterov, weight_decay } => {
                let g = if weight_decay == 0.0 { g } else { p.clone().mul_scalar(weight_decay).add(g) };
                let step = if momentum > 0.0 {
                    // Burn's first velocity is the gradient itself: a zero velocity gives it.
                    let v0 = slot.map(|s| s.m).unwrap_or_else(|| g.zeros_like());
                    let v = g.clone().add(v0.clone().mul_scalar(momentum));
                    let step = if nesterov { v.clone().mul_scalar(momentum).add(g) } else { v.clone() };
                    let v = self.pick(v, v0);
                    self.slots.insert(id, Slot { m: v, v: None, shape: shape.to_vec() });
                    step
                } else {
                    g
                };
                let new_p = p.clone() - step.mul_scalar(lr);
                self.pick(new_p, p)
            }
        }
    }
}

impl ModuleMapper<TrainBackend> for Update<'_> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<TrainBackend, D>>) -> Param<Tensor<TrainBackend, D>> {
        let (id, tensor, mapper) = param.consume();
        let Some(grad) = self.grads.remove::<InnerBackend, D>(id) else {
            return Param::from_mapped_value(id, tensor, mapper);
        };
        let is_require_grad = tensor.is_require_grad();
        let dims = tensor.dims();
        let n = dims.iter().product::<usize>();
        let p = tensor.inner().reshape([n]);
        let new = self.update(id, p, grad.reshape([n]), &dims).reshape(dims);
        let mut tensor = Tensor::from_inner(new);
        if is_require_grad {
            tensor = tensor.require_grad();
        }
        Param::from_mapped_value(id, tensor, mapper)
    }
}
