//! Dynamic loss scaling for f16 mixed precision (which precision a run uses is
//! `device::PrecisionSetting::resolve`).
//!
//! Burn 0.21 has no autocast. The loop keeps f32 master weights and optimizer state, runs the
//! forward and backward passes on a cast copy of the weights (`models::precision::cast_for_compute`,
//! same `ParamId`s, so gradients land on the f32 masters as f32) with inputs cast to the compute
//! dtype, and computes the loss and softmax in f32.

use serde::{Deserialize, Serialize};

use crate::config::AmpConfig;

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
