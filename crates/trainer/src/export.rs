//! What a run leaves behind: the files written once the run is resolved (`labels.json`,
//! `config.toml`, `batch-size.json`), the exported model bundle (best weights, model card with
//! the training split) and `summary.json` / `curves.svg` at the end. File names and the bundle
//! format are the `bundle` crate's.

use std::path::{Path, PathBuf};

use bundle::atomic::{write_atomic, write_json};
use bundle::layout;
use bundle::{ModelCard, TrainingSplit};
use burn::module::{AutodiffModule, Module, ModuleVisitor, Param};
use burn::tensor::Tensor;
use models::SignModel;

use crate::checkpoint::EpochRecord;
use crate::checkpoint::TrainState;
use crate::plan::{BatchSource, ResolvedRun};
use crate::profile::ProfileReport;
use crate::report::Summary;
use crate::{Result, TrainBackend};

/// Write the files a resolved run starts with: class names, the resolved config, and the
/// batch-size search when there was one.
pub fn write_run_files(run_dir: &Path, run: &ResolvedRun) -> Result<()> {
    write_json(&run_dir.join(layout::LABELS_FILE), &run.input.data.dataset.labels)?;
    if let BatchSource::Searched(report) = &run.batch_source {
        write_json(&run_dir.join(layout::BATCH_SIZE_FILE), report)?;
    }
    write_atomic(&run_dir.join(layout::CONFIG_FILE), run.config.to_toml().as_bytes())?;
    Ok(())
}

/// The training split of `run`, as the model card records it.
pub fn training_split(run: &ResolvedRun) -> TrainingSplit {
    let d = &run.config.data;
    TrainingSplit {
        valid_fraction: d.valid_fraction,
        split_seed: d.split_seed,
        folds: d.folds,
        fold: d.fold,
        valid_groups: run.input.data.groups(&run.input.data.valid),
    }
}

/// Export the best weights (the last ones when no epoch was tracked) into `<run>/model/`.
pub fn export_model(
    run_dir: &Path,
    model: &SignModel<TrainBackend>,
    state: &TrainState,
    run: &ResolvedRun,
) -> Result<PathBuf> {
    let device = run.compute.device();
    let best_dir = layout::best_dir(run_dir);
    let (export, exported_epoch) = match &state.best {
        Some(b) if best_dir.join(layout::WEIGHTS_FILE).is_file() => (
            {
                // Checked like a checkpoint: a damaged or replaced best/ is an error, not the export.
                bundle::manifest::verify(&best_dir, &[])?;
                bundle::weights::load_weights(model.valid(), &best_dir, device)?
            },
            state.history.iter().find(|h| h.epoch == b.epoch).cloned(),
        ),
        _ => (model.valid(), state.history.last().cloned()),
    };
    let data = &run.input.data;
    let ds = &data.dataset;
    let cfg = &run.config;
    let card = ModelCard {
        epoch: exported_epoch.as_ref().map(|h| h.epoch).unwrap_or(0),
        step: exported_epoch.as_ref().map(|h| h.step).unwrap_or(state.step),
        valid_top1: exported_epoch.as_ref().and_then(|h| h.valid_top1),
        valid_loss: exported_epoch.as_ref().and_then(|h| h.valid_loss),
        split: Some(training_split(run)),
        task: cfg.task,
        ctc: ds.continuous.map(|unit| bundle::CtcCard {
            unit,
            decode: cfg.ctc.clone(),
            valid: exported_epoch.as_ref().and_then(|h| h.valid_sequences).map(|s| *s.chosen()),
            lexicon: run.input.lexicon.as_ref().map(|w| w.words.clone()).unwrap_or_default(),
        }),
        ..ModelCard::for_dataset(model, cfg.model.clone(), cfg.preprocess.clone(), ds, &data.train)
    };
    Ok(bundle::save_bundle(&run_dir.join(layout::MODEL_DIR), &export, &card, &cfg.to_toml())?)
}

/// Distinct dtypes of a model's float parameters.
fn master_dtypes(model: &SignModel<TrainBackend>) -> Vec<String> {
    struct Dtypes(std::collections::BTreeSet<String>);
    impl ModuleVisitor<TrainBackend> for Dtypes {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<TrainBackend, D>>) {
            self.0.insert(format!("{:?}", param.val().dtype()));
        }
    }
    let mut d = Dtypes(Default::default());
    model.visit(&mut d);
    d.0.into_iter().collect()
}

/// What [`summary`] is built from.
#[derive(Debug)]
pub struct SummaryParts<'a> {
    /// The resolved run.
    pub run: &'a ResolvedRun,
    /// Its directory.
    pub run_dir: &'a Path,
    /// The final weights.
    pub model: &'a SignModel<TrainBackend>,
    /// The final loop state.
    pub state: &'a TrainState,
    /// Wall time of this process's epoch loop.
    pub loop_s: f64,
    /// Time of it spent waiting for the data loader.
    pub data_wait_s: f64,
    /// The step profile, when one was taken.
    pub profile: Option<ProfileReport>,
    /// The GPU monitor's summary.
    pub gpu: Option<device::MonitorSummary>,
    /// Early stopping ended the run.
    pub stopped_early: bool,
    /// The step this process resumed from.
    pub resumed_from: Option<usize>,
    /// The exported bundle.
    pub exported_model: PathBuf,
    /// The data-parallel group, if any.
    pub group: Option<crate::dist::GroupSummary>,
}

/// The run's final figures.
pub fn summary(p: SummaryParts<'_>) -> Summary {
    let (run, state) = (p.run, p.state);
    let data = &run.input.data;
    let ds = &data.dataset;
    let history = &state.history;
    Summary {
        name: run.config.name.clone(),
        run_dir: p.run_dir.to_path_buf(),
        device: run.compute.device.selection.name.clone(),
        device_reason: run.compute.device.selection.reason.clone(),
        model: run.config.model.kind().into(),
        task: run.config.task,
        data_root: data.root.clone(),
        trainable_params: models::trainable_params(p.model),
        input_features: ds.features,
        classes: ds.num_classes(),
        train_samples: data.train.len(),
        valid_samples: data.valid.len(),
        train_groups: data.groups(&data.train).len(),
        valid_groups: data.groups(&data.valid).len(),
        chance_top1: 1.0 / ds.num_classes().max(1) as f64,
        epochs_run: history.len(),
        steps: state.step,
        batch_size: run.batch_size,
        accumulation_steps: run.accumulation_steps,
        effective_batch_size: run.batch_size * run.accumulation_steps,
        samples_seen: state.samples,
        train_seconds: state.elapsed_s + p.loop_s,
        samples_per_s: history.iter().map(|h| h.samples_per_s).sum::<f64>() / history.len().max(1) as f64,
        data_wait_share: p.data_wait_s / p.loop_s.max(1e-9),
        skipped_steps: state.skipped_steps,
        rollbacks: state.rollbacks,
        lr_scale: state.lr_scale,
        loss_scale: state.scaler.enabled.then_some(state.scaler.scale),
        loss_scale_backoffs: state.scaler.backoffs,
        precision: run.compute.precision.precision.to_string(),
        precision_reason: run.compute.precision.reason.clone(),
        master_dtypes: master_dtypes(p.model),
        profile: p.profile,
        gpu: p.gpu,
        stopped_early: p.stopped_early,
        resumed_from_step: p.resumed_from,
        last: history.last().cloned(),
        best: state.best.clone(),
        exported_model: p.exported_model,
        final_weights_fingerprint: bundle::weights::fingerprint(p.model),
        peak_memory_mib: peak_memory(history),
        device_faults: state.device_faults.clone(),
        warnings: run.warnings.clone(),
        distributed: p.group,
    }
}

/// The largest per-epoch peaks, `[in use, reserved]` in MiB, when any epoch has them.
fn peak_memory(history: &[EpochRecord]) -> Option<[f64; 2]> {
    let max = |f: fn(&EpochRecord) -> Option<f64>| history.iter().filter_map(f).reduce(f64::max);
    Some([max(|h| h.peak_mem_in_use_mib)?, max(|h| h.peak_mem_reserved_mib)?])
}

/// Write `summary.json` and redraw `curves.svg` from `metrics.csv`.
pub fn write_summary(run_dir: &Path, summary: &Summary) -> Result<()> {
    write_json(&run_dir.join(layout::SUMMARY_FILE), summary)?;
    let rows = crate::metrics::read_rows(&run_dir.join(layout::METRICS_FILE))?;
    write_atomic(&run_dir.join(layout::CURVES_FILE), crate::plot::curves_svg(&rows).as_bytes())?;
    Ok(())
}
