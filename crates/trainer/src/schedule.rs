//! Learning-rate schedules as pure functions of the optimizer step, so a resumed run continues
//! the curve exactly from the step stored in its checkpoint.

use crate::config::{ScheduleConfig, ScheduleKind};

/// The learning rate as a function of the optimizer step.
#[derive(Debug, Clone, PartialEq)]
pub struct LrSchedule {
    /// Shape after warm-up.
    pub kind: ScheduleKind,
    /// The LR after warm-up.
    pub peak: f64,
    /// The cosine schedule's final LR.
    pub min_lr: f64,
    /// Linear warm-up length in optimizer steps.
    pub warmup_steps: usize,
    /// Optimizer steps in the whole run.
    pub total_steps: usize,
    /// Period of the `step` schedule.
    pub step_size: usize,
    /// Factor of the `step` schedule.
    pub gamma: f64,
}

impl LrSchedule {
    /// The schedule of `cfg` peaking at `peak`, for a run of `total_steps` steps of `steps_per_epoch` per epoch.
    pub fn new(cfg: &ScheduleConfig, peak: f64, steps_per_epoch: usize, total_steps: usize) -> Self {
        let warmup_steps = if cfg.warmup_steps > 0 {
            cfg.warmup_steps
        } else {
            (cfg.warmup_epochs * steps_per_epoch as f64).round() as usize
        };
        Self {
            kind: cfg.kind,
            peak,
            min_lr: cfg.min_lr,
            warmup_steps: warmup_steps.min(total_steps.saturating_sub(1)),
            total_steps: total_steps.max(1),
            step_size: cfg.step_size.max(1),
            gamma: cfg.gamma,
        }
    }

    /// The LR used by optimizer step `step` (0-based).
    pub fn lr(&self, step: usize) -> f64 {
        if step < self.warmup_steps {
            return self.peak * (step + 1) as f64 / (self.warmup_steps + 1) as f64;
        }
        let since = step - self.warmup_steps;
        match self.kind {
            ScheduleKind::Constant => self.peak,
            ScheduleKind::Step => self.peak * self.gamma.powi((since / self.step_size) as i32),
            ScheduleKind::Cosine => {
                let span = self.total_steps.saturating_sub(self.warmup_steps + 1).max(1) as f64;
                let progress = (since as f64 / span).min(1.0);
                self.min_lr + 0.5 * (self.peak - self.min_lr) * (1.0 + (std::f64::consts::PI * progress).cos())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(kind: ScheduleKind, warmup: usize) -> ScheduleConfig {
        ScheduleConfig { kind, warmup_steps: warmup, warmup_epochs: 0.0, min_lr: 1e-5, step_size: 10, gamma: 0.5 }
    }

    #[test]
    fn cosine_warms_up_then_ends_at_min_lr() {
        let s = LrSchedule::new(&cfg(ScheduleKind::Cosine, 4), 1e-2, 10, 100);
        assert!((s.lr(0) - 2e-3).abs() < 1e-12);
        assert!((s.lr(3) - 8e-3).abs() < 1e-12);
        assert!((s.lr(4) - 1e-2).abs() < 1e-12);
        assert!((s.lr(99) - 1e-5).abs() < 1e-12);
        let mid = s.lr(4 + 95 / 2);
        assert!(mid < 6e-3 && mid > 4e-3, "{mid}");
        assert!((1..100).all(|i| i <= 4 || s.lr(i) <= s.lr(i - 1)));
    }

    #[test]
    fn step_and_constant() {
        let s = LrSchedule::new(&cfg(ScheduleKind::Step, 0), 1.0, 10, 100);
        assert_eq!((s.lr(0), s.lr(9), s.lr(10), s.lr(25)), (1.0, 1.0, 0.5, 0.25));
        let c = LrSchedule::new(&cfg(ScheduleKind::Constant, 2), 1.0, 10, 100);
        assert_eq!(c.lr(50), 1.0);
    }

    #[test]
    fn warmup_from_epochs() {
        let mut c = cfg(ScheduleKind::Constant, 0);
        c.warmup_epochs = 1.5;
        assert_eq!(LrSchedule::new(&c, 1.0, 10, 100).warmup_steps, 15);
    }
}
