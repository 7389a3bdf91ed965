//! The plan: a pure function from an experiment config, the run being resumed and what
//! [`crate::measure`] found to the [`ResolvedRun`] that trains (no device, file or clock), so
//! the rules that shape a run are unit tests. Nothing changes a run after it is planned; the run
//! directory's `config.toml` is [`ResolvedRun::config`].

use crate::config::{BatchSize, ExperimentConfig, TrainingConfig};
use crate::resolve::{ResolvedCompute, ResolvedData};
use crate::tune::TuneReport;
use crate::{Result, TrainError};

/// Where the micro-batch size of a run came from.
#[derive(Debug, Clone)]
pub enum BatchSource {
    /// `training.batch_size` was a number.
    Config,
    /// `"auto"`, searched now.
    Searched(TuneReport),
    /// Kept from a resumed run's `config.toml`: its first `"auto"` search.
    Saved,
    /// Kept from a resumed run's `config.toml`: a micro-batch reduced after a device fault
    /// (same effective batch).
    Reduced,
}

/// A run resolved once; never mutated afterwards.
#[derive(Debug, Clone)]
pub struct ResolvedRun {
    /// The config with every `"auto"` batch setting replaced by its value (written as the run's
    /// `config.toml`).
    pub config: ExperimentConfig,
    /// Device and precision.
    pub compute: ResolvedCompute,
    /// Preprocessing and data.
    pub input: ResolvedData,
    /// Micro-batch size.
    pub batch_size: usize,
    /// Micro-batches per optimizer step.
    pub accumulation_steps: usize,
    /// Where the batch size came from.
    pub batch_source: BatchSource,
    /// What makes this run unlikely to train well, and what to change
    /// ([`crate::shape::shape_warnings`]);
    /// printed at the start and kept in `summary.json`.
    pub warnings: Vec<String>,
}

impl ResolvedRun {
    /// The same run with another micro-batch size and accumulation (after a device fault).
    pub fn with_micro_batch(&self, batch_size: usize, accumulation_steps: usize) -> Self {
        let mut config = self.config.clone();
        config.training.batch_size = BatchSize::Fixed(batch_size);
        config.training.accumulation_steps = accumulation_steps;
        Self { config, batch_size, accumulation_steps, ..self.clone() }
    }
}

/// The micro-batch, accumulation and their source when they are known without measuring: a
/// number in the config, or a resumed run's (its `"auto"` result, or its micro-batch reduced
/// after a device fault, kept while the effective batch is the config's). `None`: `"auto"` in a
/// new run, which the batch-size search decides.
pub fn known_batch(t: &TrainingConfig, saved: Option<&ExperimentConfig>) -> Option<(usize, usize, BatchSource)> {
    let saved = saved.and_then(|s| Some((s.training.batch_size.fixed()?, s.training.accumulation_steps)));
    match (t.batch_size, saved) {
        (BatchSize::Fixed(b), Some((sb, sk))) if sb < b && sb * sk == b * t.accumulation_steps => {
            Some((sb, sk, BatchSource::Reduced))
        }
        (BatchSize::Fixed(b), _) => Some((b, t.accumulation_steps, BatchSource::Config)),
        (BatchSize::Auto, Some((b, accumulation))) => Some((b, accumulation, BatchSource::Saved)),
        (BatchSize::Auto, None) => None,
    }
}

/// The run of `cfg` (resuming `saved`, when given) on the device and data measured, with the
/// batch-size `search` when one ran ([`crate::measure::Measured`]). An error only when the batch
/// needs the search and none ran.
pub fn plan(
    cfg: ExperimentConfig,
    saved: Option<&ExperimentConfig>,
    compute: ResolvedCompute,
    input: ResolvedData,
    search: Option<TuneReport>,
) -> Result<ResolvedRun> {
    let (batch_size, accumulation_steps, batch_source) = match (known_batch(&cfg.training, saved), search) {
        (Some(known), _) => known,
        (None, Some(report)) => (report.batch_size, report.accumulation_steps, BatchSource::Searched(report)),
        (None, None) => {
            return Err(TrainError::Invalid("training.batch_size = \"auto\" needs the batch-size search".into()))
        }
    };
    let config = ExperimentConfig {
        training: TrainingConfig {
            batch_size: BatchSize::Fixed(batch_size),
            accumulation_steps,
            ..cfg.training.clone()
        },
        ..cfg
    };
    let warnings = crate::shape::shape_warnings(&config, input.data.train.len(), batch_size, accumulation_steps);
    Ok(ResolvedRun { config, compute, input, batch_size, accumulation_steps, batch_source, warnings })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn training(batch: BatchSize, accumulation: usize) -> TrainingConfig {
        TrainingConfig { batch_size: batch, accumulation_steps: accumulation, ..ExperimentConfig::default().training }
    }

    fn saved(batch: usize, accumulation: usize) -> ExperimentConfig {
        ExperimentConfig { training: training(BatchSize::Fixed(batch), accumulation), ..Default::default() }
    }

    #[test]
    fn the_batch_comes_from_the_config_a_resumed_run_or_the_search() {
        let known = |t: &TrainingConfig, s: Option<&ExperimentConfig>| {
            known_batch(t, s).map(|(b, k, source)| (b, k, format!("{source:?}")))
        };
        let fixed = training(BatchSize::Fixed(32), 2);
        assert_eq!(known(&fixed, None), Some((32, 2, "Config".into())));
        // A resumed run reduced after a device fault keeps its micro-batch (same effective batch)...
        assert_eq!(known(&fixed, Some(&saved(8, 8))), Some((8, 8, "Reduced".into())));
        // ... but not when the config now asks for another effective batch.
        assert_eq!(known(&fixed, Some(&saved(8, 4))), Some((32, 2, "Config".into())));
        let auto = training(BatchSize::Auto, 1);
        assert_eq!(known(&auto, Some(&saved(24, 1))), Some((24, 1, "Saved".into())));
        assert_eq!(known(&auto, None), None);
    }
}
