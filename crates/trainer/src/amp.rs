//! Dynamic loss scaling for f16 mixed precision (which precision a run uses is
//! `device::PrecisionSetting::resolve`).
//!
//! Burn 0.21 has no autocast. The loop keeps f32 master weights and optimizer state, runs the
//! forward and backward passes on a cast copy of the weights (same `ParamId`s, so gradients land
//! on the f32 masters: cast back to f32 per parameter with `models::precision::cast_for_compute`,
//! or left in the compute dtype for the optimizer's gather with a `Precast` copy on GPU-class
//! devices) with inputs cast to the compute dtype, and computes the loss and softmax in f32.

use burn::tensor::{Bool, Tensor};
use serde::{Deserialize, Serialize};

use crate::config::AmpConfig;
use crate::InnerBackend;

type T1 = Tensor<InnerBackend, 1>;

/// Dynamic loss scaling (f16 only; a disabled scaler always has scale 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LossScaler {
    /// Whether scaling is on (f16 compute).
    pub enabled: bool,
    /// The current loss scale (1 when disabled).
    pub scale: f64,
    /// Finite steps since the last change.
    pub good_steps: usize,
    /// Times the scale was cut after an overflow.
    pub backoffs: usize,
    /// Times the scale grew after a run of finite steps.
    pub growths: usize,
}

/// What a scaler update did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ScaleChange {
    /// The scale stayed.
    None,
    /// The scale grew to this value.
    Grew(f64),
    /// Gradients overflowed; the scale was cut to this value.
    BackedOff(f64),
}

impl LossScaler {
    /// A scaler starting at `amp.init_scale` when `enabled`, else a scale of 1 that never changes.
    pub fn new(enabled: bool, cfg: &AmpConfig) -> Self {
        Self { enabled, scale: if enabled { cfg.init_scale } else { 1.0 }, good_steps: 0, backoffs: 0, growths: 0 }
    }

    /// Record one step's outcome (finite gradients or not).
    pub fn update(&mut self, finite: bool, cfg: &AmpConfig) -> ScaleChange {
        if !self.enabled {
            return ScaleChange::None;
        }
        if finite {
            self.good_steps += 1;
            if self.good_steps >= cfg.growth_interval {
                self.good_steps = 0;
                self.scale = (self.scale * cfg.growth_factor).min(f64::from(f32::MAX) / 2.0);
                self.growths += 1;
                return ScaleChange::Grew(self.scale);
            }
            ScaleChange::None
        } else {
            self.good_steps = 0;
            self.scale = (self.scale * cfg.backoff_factor).max(cfg.min_scale);
            self.backoffs += 1;
            ScaleChange::BackedOff(self.scale)
        }
    }

    /// Whether the scale has hit its floor (overflow is then not the scale's fault).
    pub fn at_floor(&self, cfg: &AmpConfig) -> bool {
        self.scale <= cfg.min_scale
    }
}

/// The factor the loss is multiplied by before the backward pass (f16 loss scaling; 1 otherwise).
#[derive(Debug, Clone)]
pub enum LossScale {
    /// Known on the host.
    Host(f64),
    /// A `[1]` tensor on the device ([`crate::amp::DeviceScale`]), for a loop that does not read
    /// each step's outcome.
    Device(Tensor<InnerBackend, 1>),
}

impl LossScale {
    /// The value (reading a device scale waits for the device).
    pub fn value(&self) -> f64 {
        match self {
            LossScale::Host(s) => *s,
            LossScale::Device(t) => t.clone().into_data().iter::<f64>().next().unwrap_or(f64::NAN),
        }
    }

    /// `t / scale`, on the device.
    pub(crate) fn unscale(&self, t: Tensor<InnerBackend, 1>) -> Tensor<InnerBackend, 1> {
        match self {
            LossScale::Host(s) => t.div_scalar(*s),
            LossScale::Device(d) => t.div(d.clone()),
        }
    }
}

/// The loss scale on the device, for a loop that reads step outcomes only once per log interval:
/// after each step it changes by [`LossScaler::update`]'s rules from whether the step applied
/// (decided on the device), so the next step is scaled without a host wait. The host replays
/// the same rules when it reads the outcomes (for the events and counters) and then sets this
/// copy from its own ([`DeviceScale::new`]), so the two cannot drift apart.
#[derive(Debug, Clone)]
pub struct DeviceScale {
    /// The scale of the next step, `[1]`.
    pub scale: T1,
    /// Finite steps since the last change, `[1]` (a whole number as f32).
    pub good_steps: T1,
}

impl DeviceScale {
    /// `scaler`'s state, uploaded (no wait).
    pub fn new(scaler: &LossScaler, device: &device::DispatchDevice) -> Self {
        Self {
            scale: Tensor::from_floats([scaler.scale as f32], device),
            good_steps: Tensor::from_floats([scaler.good_steps as f32], device),
        }
    }

    /// One step's outcome: `applied` (`[1]`) tells whether its loss and gradients were finite.
    /// Element-wise ops only, which the fusion joins.
    pub fn update(&mut self, applied: Tensor<InnerBackend, 1, Bool>, cfg: &AmpConfig) {
        let good = self.good_steps.clone().add_scalar(1.0);
        let grow = good.clone().greater_equal_elem(cfg.growth_interval as f64);
        let grown = self.scale.clone().mul_scalar(cfg.growth_factor).clamp_max(f64::from(f32::MAX) / 2.0);
        let backed_off = self.scale.clone().mul_scalar(cfg.backoff_factor).clamp_min(cfg.min_scale);
        let finite_scale = self.scale.clone().mask_where(grow.clone(), grown);
        self.scale = backed_off.mask_where(applied.clone(), finite_scale);
        // Zero where the scale grew or the step was dropped (no `bool_not`: it would not fuse).
        let kept = good.mask_fill(grow, 0.0);
        self.good_steps = kept.zeros_like().mask_where(applied, kept);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaler_backs_off_and_grows() {
        let cfg = AmpConfig {
            init_scale: 1024.0,
            growth_factor: 2.0,
            growth_interval: 3,
            backoff_factor: 0.5,
            min_scale: 1.0,
        };
        let mut s = LossScaler::new(true, &cfg);
        assert_eq!(s.update(false, &cfg), ScaleChange::BackedOff(512.0));
        assert_eq!(s.update(true, &cfg), ScaleChange::None);
        assert_eq!(s.update(true, &cfg), ScaleChange::None);
        assert_eq!(s.update(true, &cfg), ScaleChange::Grew(1024.0));
        assert_eq!((s.backoffs, s.growths), (1, 1));
        let mut off = LossScaler::new(false, &cfg);
        assert_eq!((off.update(false, &cfg), off.scale), (ScaleChange::None, 1.0));
    }
}
