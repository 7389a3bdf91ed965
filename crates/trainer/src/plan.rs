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
    /// What makes this run unlikely to train well, and what to change ([`shape_warnings`]);
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
    let warnings = shape_warnings(&config, input.data.train.len(), batch_size, accumulation_steps);
    Ok(ResolvedRun { config, compute, input, batch_size, accumulation_steps, batch_source, warnings })
}

/// Fewer optimizer steps than this in a whole run are too few to train a model from scratch.
pub const MIN_STEPS: usize = 100;
/// BatchNorm's batch statistics over fewer rows than this are too noisy.
pub const MIN_NORM_ROWS: usize = 8;

/// Optimizer steps of a run of `epochs` over `n` training sequences in micro-batches of
/// `batch`, `accumulation` per step (`training.max_steps` and `drop_last` as in `t`).
pub fn total_steps(t: &TrainingConfig, n: usize, batch: usize, accumulation: usize) -> usize {
    let (b, k) = (batch.max(1), accumulation.max(1));
    let batches = if t.drop_last { n / b } else { n.div_ceil(b) };
    let per_epoch = if t.drop_last { batches / k } else { batches.div_ceil(k) };
    match t.max_steps {
        0 => per_epoch * t.epochs,
        max => (per_epoch * t.epochs).min(max),
    }
}

/// What in the shape of a run keeps it from training, each with what to change: too few
/// optimizer steps in all ([`MIN_STEPS`]), or BatchNorm over micro-batches of fewer than
/// [`MIN_NORM_ROWS`] rows (models with BatchNorm: the conv-transformer).
pub fn shape_warnings(cfg: &ExperimentConfig, train: usize, batch: usize, accumulation: usize) -> Vec<String> {
    let t = &cfg.training;
    let mut out = Vec::new();
    let steps = total_steps(t, train, batch, accumulation);
    if steps < MIN_STEPS && t.max_steps == 0 {
        let per_epoch = total_steps(&TrainingConfig { epochs: 1, ..t.clone() }, train, batch, accumulation).max(1);
        let epochs = MIN_STEPS.div_ceil(per_epoch);
        // The largest micro-batch of at least MIN_NORM_ROWS rows that reaches MIN_STEPS, or
        // that smallest batch with more epochs.
        let steps_at = |b: usize| total_steps(t, train, b, accumulation);
        let smaller = match (MIN_NORM_ROWS..batch).rev().find(|&b| steps_at(b) >= MIN_STEPS) {
            Some(b) => format!("training.batch_size = {b} ({} steps) or ", steps_at(b)),
            None if MIN_NORM_ROWS < batch && steps_at(MIN_NORM_ROWS) > 0 => {
                let per_epoch = steps_at(MIN_NORM_ROWS).div_ceil(t.epochs.max(1)).max(1);
                format!(
                    "training.batch_size = {MIN_NORM_ROWS} with training.epochs = {}, or ",
                    MIN_STEPS.div_ceil(per_epoch)
                )
            }
            None => String::new(),
        };
        out.push(format!(
            "this run makes {steps} optimizer steps in all ({} epochs over {train} training sequences in steps of {batch} x {accumulation}): too few to train a model; use {smaller}training.epochs = {epochs}",
            t.epochs,
        ));
    }
    if matches!(cfg.model, models::ModelConfig::ConvTransformer(_)) && batch < MIN_NORM_ROWS {
        out.push(format!(
            "BatchNorm normalizes over micro-batches of {batch} rows, fewer than {MIN_NORM_ROWS}: its statistics are too noisy; use training.batch_size >= {MIN_NORM_ROWS} (training.accumulation_steps keeps a larger effective batch)"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn training(batch: BatchSize, accumulation: usize) -> TrainingConfig {
        TrainingConfig { batch_size: batch, accumulation_steps: accumulation, ..Default::default() }
    }

    fn saved(batch: usize, accumulation: usize) -> ExperimentConfig {
        ExperimentConfig { training: training(BatchSize::Fixed(batch), accumulation), ..Default::default() }
    }

    #[test]
    fn a_run_too_short_to_train_is_told_what_to_change() {
        // 40 training recordings (UEA BasicMotions), 12 epochs of batch 32 (the last partial
        // batch dropped): 12 steps in all.
        let cfg =
            ExperimentConfig { training: TrainingConfig { epochs: 12, ..Default::default() }, ..Default::default() };
        let w = shape_warnings(&cfg, 40, 32, 1);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("makes 12 optimizer steps"), "{}", w[0]);
        // Batch 8 gives 5 x 12 = 60 steps, still short: with 20 epochs it gets there.
        assert!(
            w[0].contains("use training.batch_size = 8 with training.epochs = 20, or training.epochs = 100"),
            "{}",
            w[0]
        );
        // 100 recordings: batch 11 gives 9 x 12 = 108 steps.
        let w = shape_warnings(&cfg, 100, 32, 1);
        assert!(w[0].contains("training.batch_size = 11 (108 steps) or training.epochs = 34"), "{}", w[0]);
        // A micro-batch of 4 rows under BatchNorm; enough steps.
        let w = shape_warnings(&cfg, 4000, 4, 1);
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("micro-batches of 4 rows"), "{}", w[0]);
        // The default run of the built-in data is fine.
        assert!(shape_warnings(&cfg, 704, 32, 1).is_empty());
        // max_steps set on purpose (a smoke run): no step warning.
        let smoke = ExperimentConfig { training: TrainingConfig { max_steps: 6, ..Default::default() }, ..cfg };
        assert!(shape_warnings(&smoke, 40, 32, 1).is_empty());
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
