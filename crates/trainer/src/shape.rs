//! The shape of a run (its optimizer steps, its micro-batch rows) and what in it keeps a model
//! from training: pure functions of the config and the training split's size, used by the plan
//! (warnings) and the CPU batch-size search (a cap for small datasets).

use crate::config::{ExperimentConfig, TrainingConfig};

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

    #[test]
    fn a_run_too_short_to_train_is_told_what_to_change() {
        // 40 training recordings (UEA BasicMotions), 12 epochs of batch 32 (the last partial
        // batch dropped): 12 steps in all.
        let mut cfg = ExperimentConfig::default();
        cfg.training.epochs = 12;
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
        let mut smoke = cfg.clone();
        smoke.training.max_steps = 6;
        assert!(shape_warnings(&smoke, 40, 32, 1).is_empty());
    }
}
