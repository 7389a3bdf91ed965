//! Fault injection for tests and recovery drills: NaN losses, infinite gradients, device
//! out-of-memory, a dying data-parallel peer, an interruption after N steps and a pause inside
//! checkpoint writes.
//!
//! A run's [`Faults`] plan is empty unless the `fault-injection` cargo feature is on: only then
//! can a plan be built ([`Faults::parse`]), given to a run (`RunOptions::faults`) or to the
//! `trainer` binary (`--inject KEY=VALUE`). The feature is off in the product build and on in
//! the workspace's test build (the trainer's dev-dependency on itself) and in the drill scripts'
//! builds. No plan is part of an experiment config, so none reaches a run directory, a
//! checkpoint or a bundle, and a user's config cannot inject a failure.

use std::time::Duration;

use crate::fault::DeviceFault;

/// A run's plan of deliberate failures (empty: none; always empty without the
/// `fault-injection` feature).
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "fault-injection", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "fault-injection", serde(deny_unknown_fields, default))]
pub struct Faults {
    /// Optimizer steps (0-based) whose loss is replaced by NaN.
    nan_loss_steps: Vec<usize>,
    /// Optimizer steps whose first gradient tensor is multiplied by infinity.
    inf_grad_steps: Vec<usize>,
    /// Optimizer steps that die of an injected device out-of-memory while the micro-batch is
    /// larger than `oom_fits_micro_batch`.
    oom_at_steps: Vec<usize>,
    /// The largest micro-batch that fits: larger ones die of an injected out-of-memory at the
    /// `oom_at_steps` and in every GPU batch-size probe (unset: each of those steps fails once,
    /// at the micro-batch it first runs with; 0: nothing fits).
    #[cfg_attr(feature = "fault-injection", serde(skip_serializing_if = "Option::is_none"))]
    oom_fits_micro_batch: Option<usize>,
    /// In a data-parallel group, the last peer dies (panics) when it receives this step
    /// (counted from the group's start).
    #[cfg_attr(feature = "fault-injection", serde(skip_serializing_if = "Option::is_none"))]
    peer_dies_at_step: Option<usize>,
    /// The run returns after this many optimizer steps as if interrupted (after any checkpoint
    /// due at that step); its summary is `None`.
    #[cfg_attr(feature = "fault-injection", serde(skip_serializing_if = "Option::is_none"))]
    interrupt_after_steps: Option<usize>,
    /// A pause (ms) inside every checkpoint write, between the weights and the state, so a
    /// drill can kill the process mid-write.
    checkpoint_pause_ms: u64,
}

/// The faults of one optimizer step, handed to [`crate::step`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepFaults {
    /// Replace the loss by NaN.
    pub nan_loss: bool,
    /// Multiply the first gradient tensor by infinity.
    pub inf_grad: bool,
    /// Die of an out-of-memory panic after the first forward pass.
    pub oom: bool,
}

impl Faults {
    /// The faults of optimizer `step` at micro-batch `micro_batch`, given the device faults the
    /// run `survived` so far (an out-of-memory without `oom_fits_micro_batch` fires once).
    pub fn at_step(&self, step: usize, micro_batch: usize, survived: &[DeviceFault]) -> StepFaults {
        let oom = self.oom_at_steps.contains(&step)
            && match self.oom_fits_micro_batch {
                Some(fits) => micro_batch > fits,
                None => !survived.iter().any(|f| f.step == step),
            };
        StepFaults { nan_loss: self.nan_loss_steps.contains(&step), inf_grad: self.inf_grad_steps.contains(&step), oom }
    }

    /// Whether a GPU batch-size probe at `batch` dies of an injected out-of-memory.
    pub fn probe_fails(&self, batch: usize) -> bool {
        self.oom_fits_micro_batch.is_some_and(|fits| batch > fits)
    }

    /// The step at which peer `rank` of a group of `peers` dies (only the last one does).
    pub fn peer_death(&self, rank: usize, peers: usize) -> Option<usize> {
        self.peer_dies_at_step.filter(|_| rank + 1 == peers)
    }

    /// The step after which the run returns as if interrupted.
    pub fn interrupt_after(&self) -> Option<usize> {
        self.interrupt_after_steps
    }

    /// The plan as `--inject KEY=VALUE` arguments for a child `trainer` process (none without
    /// the feature).
    pub fn to_args(&self) -> Vec<String> {
        #[cfg(feature = "fault-injection")]
        {
            let table = toml::Table::try_from(self).expect("fault plans serialize");
            let default = toml::Table::try_from(Self::default()).expect("fault plans serialize");
            table
                .iter()
                .filter(|(k, v)| default.get(k.as_str()) != Some(v))
                .flat_map(|(k, v)| ["--inject".to_string(), format!("{k}={v}")])
                .collect()
        }
        #[cfg(not(feature = "fault-injection"))]
        Vec::new()
    }

    /// Sleep inside a checkpoint write when the plan says so.
    pub fn checkpoint_pause(&self) {
        if self.checkpoint_pause_ms > 0 {
            std::thread::sleep(Duration::from_millis(self.checkpoint_pause_ms));
        }
    }
}

#[cfg(feature = "fault-injection")]
impl Faults {
    /// A plan from `key=value` items, values in TOML (`oom_at_steps=[5]`,
    /// `checkpoint_pause_ms=400`); the keys are this struct's fields. An unknown key or a value
    /// of the wrong type is an error naming the item.
    pub fn parse<S: AsRef<str>>(items: &[S]) -> Result<Self, String> {
        let mut table = toml::Table::new();
        for item in items {
            let item = item.as_ref();
            let parsed: toml::Table = toml::from_str(item)
                .map_err(|e| format!("fault `{item}`: expected KEY=VALUE with a TOML value ({e})"))?;
            table.extend(parsed);
        }
        let given: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
        table.try_into().map_err(|e| format!("faults `{}`: {}", given.join(" "), e.message()))
    }
}

/// The panic an injected out-of-memory raises (worded like cubecl's, so it is classified the
/// same way as a real one).
pub fn raise_injected_oom(micro_batch: usize) -> ! {
    panic!("An out-of-memory error happened during launch (injected, micro-batch {micro_batch})")
}

#[cfg(all(test, feature = "fault-injection"))]
mod tests {
    use super::*;
    use crate::fault::FaultKind;

    #[test]
    fn an_injected_oom_fires_once_or_above_the_size_that_fits() {
        let faults = Faults::parse(&["oom_at_steps=[3]"]).unwrap();
        assert!(!faults.at_step(2, 32, &[]).oom);
        assert!(faults.at_step(3, 32, &[]).oom);
        let survived = DeviceFault {
            step: 3,
            epoch: 1,
            kind: FaultKind::OutOfMemory,
            message: String::new(),
            micro_batch: [32, 16],
            accumulation_steps: [1, 2],
            resumed_from_step: 0,
        };
        assert!(!faults.at_step(3, 16, &[survived]).oom);
        let never_fits = Faults::parse(&["oom_at_steps=[3]", "oom_fits_micro_batch=0"]).unwrap();
        assert!(never_fits.at_step(3, 1, &[]).oom && never_fits.probe_fails(1));
    }

    #[test]
    fn plans_parse_from_items_and_travel_as_arguments() {
        let plan = Faults::parse(&["nan_loss_steps=[4, 9]", "peer_dies_at_step=2", "checkpoint_pause_ms=400"]).unwrap();
        assert_eq!(plan.nan_loss_steps, [4, 9]);
        assert_eq!((plan.peer_death(1, 2), plan.peer_death(0, 2)), (Some(2), None));
        let args = plan.to_args();
        let items: Vec<&String> = args.iter().skip(1).step_by(2).collect();
        assert_eq!(Faults::parse(&items).unwrap(), plan);
        assert!(Faults::default().to_args().is_empty());
        let e = Faults::parse(&["nan_loss=[1]"]).unwrap_err();
        assert!(e.contains("unknown field `nan_loss`"), "{e}");
        let e = Faults::parse(&["oom_at_steps"]).unwrap_err();
        assert!(e.contains("fault `oom_at_steps`: expected KEY=VALUE"), "{e}");
    }
}
