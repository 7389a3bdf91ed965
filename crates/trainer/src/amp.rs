//! Mixed precision: which compute dtype a run uses, and dynamic loss scaling for f16.
//!
//! Burn 0.21 has no autocast. The loop keeps f32 master weights and optimizer state, runs the
//! forward and backward passes on a cast copy of the weights (`models::precision::cast_for_compute`,
//! same `ParamId`s, so gradients land on the f32 masters as f32) with inputs cast to the compute
//! dtype, and computes the loss and softmax in f32.

use device::{Capabilities, Precision};
use serde::{Deserialize, Serialize};

use crate::config::{AmpConfig, PrecisionSetting};

/// The precision a run uses and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedPrecision {
    pub precision: Precision,
    pub reason: String,
    /// Set when the request could not be honoured.
    pub warning: Option<String>,
}

/// Resolve the `training.precision` setting against what the device supports.
pub fn resolve_precision(setting: PrecisionSetting, caps: &Capabilities) -> ResolvedPrecision {
    let ok = |p: Precision, reason: String| ResolvedPrecision { precision: p, reason, warning: None };
    match setting {
        PrecisionSetting::Auto => ok(caps.amp, format!("auto: {}", caps.amp_reason)),
        PrecisionSetting::F32 => ok(Precision::F32, "requested".into()),
        PrecisionSetting::Bf16 if caps.supports(Precision::Bf16) => ok(Precision::Bf16, "requested".into()),
        PrecisionSetting::Bf16 if caps.supports(Precision::F16) => ResolvedPrecision {
            precision: Precision::F16,
            reason: "bf16 requested, not supported here".into(),
            warning: Some("bf16 is not supported on this device; falling back to f16 with loss scaling".into()),
        },
        PrecisionSetting::F16 if caps.supports(Precision::F16) => ok(Precision::F16, "requested".into()),
        PrecisionSetting::Bf16 | PrecisionSetting::F16 => ResolvedPrecision {
            precision: Precision::F32,
            reason: "half precision requested, not supported here".into(),
            warning: Some("neither f16 nor bf16 is supported on this device; training in f32".into()),
        },
    }
}

/// Dynamic loss scaling (f16 only; a disabled scaler always has scale 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LossScaler {
    pub enabled: bool,
    pub scale: f64,
    /// Finite steps since the last change.
    pub good_steps: usize,
    pub backoffs: usize,
    pub growths: usize,
}

/// What a scaler update did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ScaleChange {
    None,
    Grew(f64),
    BackedOff(f64),
}

impl LossScaler {
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

    fn caps(f16: bool, bf16: bool, amp: Precision) -> Capabilities {
        Capabilities {
            dtypes: vec![
                device::DtypeSupport { dtype: Precision::F32, usable: true, fast: true },
                device::DtypeSupport { dtype: Precision::F16, usable: f16, fast: f16 },
                device::DtypeSupport { dtype: Precision::Bf16, usable: bf16, fast: bf16 },
            ],
            amp,
            amp_reason: "test".into(),
        }
    }

    #[test]
    fn bf16_falls_back_to_f16_with_a_warning() {
        let r = resolve_precision(PrecisionSetting::Bf16, &caps(true, false, Precision::F16));
        assert_eq!(r.precision, Precision::F16);
        assert!(r.warning.unwrap().contains("falling back to f16"));
        let r = resolve_precision(PrecisionSetting::F16, &caps(false, false, Precision::F32));
        assert_eq!(r.precision, Precision::F32);
        assert!(r.warning.is_some());
        let r = resolve_precision(PrecisionSetting::Auto, &caps(true, true, Precision::Bf16));
        assert_eq!((r.precision, r.warning), (Precision::Bf16, None));
    }

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
