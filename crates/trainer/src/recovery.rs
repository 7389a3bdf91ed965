//! The policy for steps whose loss or gradients are not finite (`[recovery]`): skip the step;
//! after `max_consecutive_bad` in a row, roll back to the last in-memory snapshot (weights and
//! optimizer) and cut the LR; after `max_rollbacks`, abort with a report. f16 overflow while the
//! loss scale can still shrink is the scaler's business and does not count as bad.

use models::SignModel;

use crate::checkpoint::TrainState;
use crate::config::{AmpConfig, RecoveryConfig};
use crate::optim::Optim;
use crate::report::Reporter;
use crate::step::StepOutcome;
use crate::{Result, TrainBackend, TrainError};

/// Weights and optimizer state to continue from after a rollback.
pub type Restored = (SignModel<TrainBackend>, Optim);

/// Snapshots and the log of what recovery did.
#[derive(Debug)]
pub struct Recovery {
    cfg: RecoveryConfig,
    /// (weights, optimizer, the step they continue at).
    snapshot: (SignModel<TrainBackend>, Optim, usize),
    good_since_snapshot: usize,
    log: Vec<String>,
}

impl Recovery {
    /// Start with a snapshot of the weights the run starts (or resumes) from at `step`.
    pub fn new(cfg: &RecoveryConfig, model: &SignModel<TrainBackend>, optim: &Optim, step: usize) -> Self {
        Self {
            cfg: cfg.clone(),
            snapshot: (model.clone(), optim.clone(), step),
            good_since_snapshot: 0,
            log: Vec::new(),
        }
    }

    /// After step `step` was applied: reset the bad-step count and take a snapshot when due.
    pub fn good_step(&mut self, state: &mut TrainState, model: &SignModel<TrainBackend>, optim: &Optim, step: usize) {
        state.consecutive_bad = 0;
        self.good_since_snapshot += 1;
        if self.good_since_snapshot >= self.cfg.snapshot_every {
            self.snapshot = (model.clone(), optim.clone(), step + 1);
            self.good_since_snapshot = 0;
        }
    }

    /// After step `step` (of 0-based `epoch`) was skipped: log it and, when too many were bad in
    /// a row, return the snapshot to roll back to (the LR is cut in `state`), or abort the run.
    pub fn bad_step(
        &mut self,
        state: &mut TrainState,
        step: usize,
        epoch: usize,
        outcome: &StepOutcome,
        amp: &AmpConfig,
        report: &mut Reporter,
    ) -> Result<Option<Restored>> {
        let epoch = epoch + 1;
        state.skipped_steps += 1;
        let cause = if outcome.loss.is_finite() {
            format!("gradient norm is {}", outcome.grad_norm)
        } else {
            format!("loss is {}", outcome.loss)
        };
        let overflow_only = outcome.loss.is_finite() && state.scaler.enabled && !state.scaler.at_floor(amp);
        if !overflow_only {
            state.consecutive_bad += 1;
        }
        let detail = format!("step skipped: {cause} ({} bad in a row)", state.consecutive_bad);
        self.log.push(format!("step {step}: {detail}"));
        report.warn(step, epoch, "skipped_step", detail.clone(), &format!("warning: step {step} {detail}"))?;
        if state.consecutive_bad < self.cfg.max_consecutive_bad {
            return Ok(None);
        }
        if state.rollbacks >= self.cfg.max_rollbacks {
            let summary = format!(
                "{} non-finite steps in a row after {} rollbacks (LR scale {}); recovery log: {}",
                state.consecutive_bad,
                state.rollbacks,
                state.lr_scale,
                self.log.join("; ")
            );
            report.event(step, epoch, "abort", summary.clone())?;
            report.progress.finish();
            return Err(TrainError::Diverged(summary));
        }
        state.lr_scale *= self.cfg.lr_cut;
        state.rollbacks += 1;
        state.consecutive_bad = 0;
        let detail = format!(
            "rolled back to the weights of step {}, LR scale now {}, continuing after the offending batch",
            self.snapshot.2, state.lr_scale
        );
        self.log.push(format!("step {step}: {detail}"));
        report.warn(step, epoch, "rollback", detail.clone(), &format!("warning: {detail}"))?;
        Ok(Some((self.snapshot.0.clone(), self.snapshot.1.clone())))
    }
}
