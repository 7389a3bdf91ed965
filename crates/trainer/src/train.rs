//! The training loop.
//!
//! Per optimizer step: `accumulation_steps` micro-batches (forward, f32 loss with label
//! smoothing, backward of loss / N, gradients summed), then ONE host read (loss, correct count,
//! squared global gradient norm), optional global-norm clipping, and the optimizer update with the
//! LR of this step. A step whose loss or gradients are not finite is skipped and logged. Dropout
//! is re-seeded from (seed, step, micro-batch) so a resumed run draws the same masks.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use burn::module::{AutodiffModule, Module, ModuleVisitor, Param};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::prelude::Backend;
use burn::tensor::{FloatDType, Int, Tensor, Transaction};
use data::augment::Augmenter;
use data::dataset::{LoadOptions, SignDataset};
use data::index::{fnv1a, FNV_OFFSET};
use data::loader::{epoch_batches, EpochLoader, HostBatch, ItemBatcher, LoaderConfig};
use data::preprocess::Preprocessor;
use indicatif::{ProgressBar, ProgressStyle};
use models::precision::Materialize;
use models::SignModel;
use serde::Serialize;

use crate::amp::{LossScaler, ScaleChange};
use crate::checkpoint::{self, BestRecord, EpochRecord, ModelSignature, TrainState};
use crate::config::{BatchSize, ExperimentConfig, Metric, ProgressMode};
use crate::metrics::{MetricsWriter, Row};
use crate::optim::Optim;
use crate::rundir;
use crate::schedule::LrSchedule;
use crate::{InnerBackend, Result, TrainBackend, TrainError};
use models::bundle::ModelCard;

type Device = device::DispatchDevice;

/// How to run (not part of the experiment config).
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The run directory; `None` = a new one under `training.out_dir`.
    pub run_dir: Option<PathBuf>,
    /// Continue the run in `run_dir` from its last complete checkpoint.
    pub resume: bool,
    /// Return after this many optimizer steps as if interrupted (after any checkpoint due at
    /// that step). For tests of resume.
    pub stop_after_steps: Option<usize>,
}

/// Final figures of a run (`summary.json`).
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub name: String,
    pub run_dir: PathBuf,
    pub device: String,
    pub device_reason: String,
    pub model: String,
    /// The dataset root (`data.path`, or the generated synthetic dataset).
    pub data_root: PathBuf,
    pub trainable_params: usize,
    pub input_features: usize,
    pub classes: usize,
    pub train_samples: usize,
    pub valid_samples: usize,
    pub train_groups: usize,
    pub valid_groups: usize,
    pub chance_top1: f64,
    pub epochs_run: usize,
    pub steps: usize,
    pub batch_size: usize,
    pub accumulation_steps: usize,
    pub effective_batch_size: usize,
    pub samples_seen: u64,
    pub train_seconds: f64,
    pub samples_per_s: f64,
    /// Share of the training loop's wall time spent waiting for the data loader.
    pub data_wait_share: f64,
    pub skipped_steps: usize,
    pub rollbacks: usize,
    pub lr_scale: f64,
    pub loss_scale: Option<f64>,
    pub loss_scale_backoffs: usize,
    pub precision: String,
    pub precision_reason: String,
    /// Distinct dtypes of the master weights at the end (always `["F32"]`).
    pub master_dtypes: Vec<String>,
    pub profile: Option<ProfileReport>,
    pub gpu: Option<device::MonitorSummary>,
    pub stopped_early: bool,
    pub resumed_from_step: Option<usize>,
    pub last: Option<EpochRecord>,
    pub best: Option<BestRecord>,
    pub exported_model: PathBuf,
}

#[derive(Debug)]
pub struct RunOutcome {
    pub run_dir: PathBuf,
    /// `None` when the run was stopped by `stop_after_steps`.
    pub summary: Option<Summary>,
}

/// Loaded data split by group.
#[derive(Debug, Clone)]
pub struct PreparedData {
    pub root: PathBuf,
    pub dataset: Arc<SignDataset>,
    pub train: Vec<usize>,
    pub valid: Vec<usize>,
}

/// The dataset root: `data.path`, or the `[synthetic]` dataset (generated once per setting).
pub fn dataset_root(cfg: &ExperimentConfig, progress: bool) -> Result<PathBuf> {
    if let Some(p) = cfg.data_path() {
        return Ok(p);
    }
    let key = serde_json::to_string(&cfg.synthetic).unwrap_or_default();
    let root = PathBuf::from(&cfg.data.synthetic_dir).join(format!("synth-{:016x}", fnv1a(FNV_OFFSET, key.as_bytes())));
    if !root.join("train.csv").is_file() {
        println!(
            "generating a synthetic sign dataset ({} classes x {} signers x {} repetitions) in {}",
            cfg.synthetic.classes,
            cfg.synthetic.signers,
            cfg.synthetic.repetitions,
            root.display()
        );
        data::synth::generate(&root, &cfg.synthetic, progress)?;
    }
    Ok(root)
}

/// Open, load (through the preprocessed cache) and split the data.
pub fn prepare_data(cfg: &ExperimentConfig, pre: &Preprocessor, progress: bool) -> Result<PreparedData> {
    let root = dataset_root(cfg, progress)?;
    let index = data::index::open(&root)?;
    let opts = LoadOptions {
        on_error: cfg.data.on_error,
        max_bad_fraction: cfg.data.max_bad_fraction,
        cache_dir: (!cfg.data.cache_dir.is_empty()).then(|| PathBuf::from(&cfg.data.cache_dir)),
        threads: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        progress,
    };
    let ds = SignDataset::load(&index, pre, &opts)?;
    for (path, why) in &ds.skipped {
        eprintln!("warning: skipped {}: {why}", path.display());
    }
    let (train, valid) = if cfg.data.folds >= 2 {
        let groups = data::index::count_groups(&ds.groups());
        if groups < cfg.data.folds {
            return Err(TrainError::Invalid(format!(
                "data.folds = {} but {} has {groups} signers (groups); each fold needs at least one",
                cfg.data.folds,
                root.display()
            )));
        }
        ds.fold_by_group(cfg.data.folds, cfg.data.fold, cfg.data.split_seed)
    } else {
        ds.split_by_group(cfg.data.valid_fraction, cfg.data.split_seed)
    };
    Ok(PreparedData { root, dataset: Arc::new(ds), train, valid })
}

/// The batch-size search for the selected device: measured throughput on the CPU, child-process
/// probes on GPUs (see [`crate::tune`]).
fn search_batch_size(
    cfg: &ExperimentConfig,
    ds: &Arc<SignDataset>,
    train: &[usize],
    pre: &Arc<Preprocessor>,
    selected: &device::SelectedDevice,
    precision: device::Precision,
) -> Result<crate::tune::TuneReport> {
    let name = &selected.selection.name;
    if device::backend_name(&selected.device) == "cpu" {
        crate::tune::tune_cpu(cfg, ds, train, pre, &selected.device, precision, name)
    } else {
        let exe = std::env::current_exe().map_err(|e| TrainError::io("current executable", e))?;
        crate::tune::tune_gpu(cfg, &exe, name, precision, train.len())
    }
}

/// Device, precision, preprocessing and data, resolved as a run would (for the batch tools).
fn resolve_for_tuning(
    cfg: &ExperimentConfig,
) -> Result<(device::SelectedDevice, device::Precision, Arc<Preprocessor>, PreparedData)> {
    let selected = device::resolve(&cfg.device.device, &cfg.device.policy())?;
    let rp = crate::amp::resolve_precision(cfg.training.precision, &selected.selection.capabilities);
    let pre = Arc::new(Preprocessor::new(cfg.preprocess.clone())?);
    let prepared = prepare_data(cfg, &pre, false)?;
    Ok((selected, rp.precision, pre, prepared))
}

/// `trainer tune-batch`: resolve device, precision and data as a run would, then search.
pub fn tune_batch(cfg: &ExperimentConfig) -> Result<crate::tune::TuneReport> {
    let _turn = run_lock();
    let (selected, precision, pre, prepared) = resolve_for_tuning(cfg)?;
    search_batch_size(cfg, &prepared.dataset, &prepared.train, &pre, &selected, precision)
}

/// One batch-size probe (run in a child process by the GPU search): two full steps at `batch`.
/// Returns ms per step; an out-of-memory kills the process, which is the answer.
pub fn probe_batch(cfg: &ExperimentConfig, batch: usize) -> Result<f64> {
    let (selected, precision, pre, prepared) = resolve_for_tuning(cfg)?;
    crate::tune::time_steps(cfg, &prepared.dataset, &prepared.train, &pre, &selected.device, precision, batch, 2)
}

/// Validation figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    pub loss: f64,
    pub top1: f64,
    pub top5: f64,
    /// Arg-max class per evaluated item, in `indices` order.
    pub predictions: Vec<usize>,
}

/// Evaluate `model` (no autodiff) on `indices`: mean cross-entropy (no smoothing), top-1, top-5.
pub fn evaluate(
    model: &SignModel<InnerBackend>,
    ds: &Arc<SignDataset>,
    pre: &Arc<Preprocessor>,
    indices: &[usize],
    batch_size: usize,
    workers: usize,
    device: &Device,
) -> Evaluation {
    let batcher = ItemBatcher { preprocessor: pre.clone(), augmenter: None, seed: 0 };
    let cfg = LoaderConfig { batch_size, shuffle: false, drop_last: false, seed: 0, workers, prefetch: 2 };
    let (mut loss, mut top1, mut top5, mut n) = (0.0, 0usize, 0usize, 0usize);
    let mut predictions = Vec::with_capacity(indices.len());
    for hb in EpochLoader::start(ds.clone(), batcher, indices, &cfg, 0, 0) {
        let batch = hb.to_device::<InnerBackend>(device);
        let logits = model.forward(batch.inputs, batch.pad_mask);
        let classes = logits.dims()[1];
        let values: Vec<f32> = logits.into_data().iter::<f32>().collect();
        for (row, &label) in values.chunks(classes).zip(&hb.labels) {
            let label = label as usize;
            let target = row[label];
            let max = row.iter().copied().fold(f32::MIN, f32::max);
            let lse = row.iter().map(|&v| ((v - max) as f64).exp()).sum::<f64>().ln() + max as f64;
            loss += lse - target as f64;
            let rank = row.iter().filter(|&&v| v > target).count();
            top1 += usize::from(rank == 0);
            top5 += usize::from(rank < 5);
            let argmax = row.iter().enumerate().fold(0, |b, (i, &v)| if v > row[b] { i } else { b });
            predictions.push(argmax);
            n += 1;
        }
    }
    let n = n.max(1) as f64;
    Evaluation { loss: loss / n, top1: top1 as f64 / n, top5: top5 as f64 / n, predictions }
}

/// Sums squared gradient norms (lazily, on the device).
struct GradNorm<'a> {
    grads: &'a GradientsParams,
    total: Option<Tensor<InnerBackend, 1>>,
}

impl ModuleVisitor<TrainBackend> for GradNorm<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<TrainBackend, D>>) {
        if let Some(g) = self.grads.get::<InnerBackend, D>(param.id) {
            let s = g.powi_scalar(2).sum();
            self.total = Some(match self.total.take() {
                Some(t) => t + s,
                None => s,
            });
        }
    }
}

/// Multiplies every gradient by a factor.
struct ScaleGrads<'a> {
    grads: &'a mut GradientsParams,
    factor: f64,
}

impl ModuleVisitor<TrainBackend> for ScaleGrads<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<TrainBackend, D>>) {
        if let Some(g) = self.grads.remove::<InnerBackend, D>(param.id) {
            self.grads.register(param.id, g.mul_scalar(self.factor));
        }
    }
}

/// The left/right mirror table of the kept landmarks (identity for feature data).
fn mirror_table(ds: &SignDataset, pre: &Preprocessor) -> Vec<usize> {
    match ds.items.first().map(|i| &i.sample) {
        Some(data::Sample::Landmarks(seq)) => {
            let full = data::layout::NUM_LANDMARKS;
            if pre.kept_points(full) == seq.points {
                pre.mirror_of_kept(full)
            } else {
                pre.mirror_of_kept(seq.points)
            }
        }
        _ => Vec::new(),
    }
}

/// Fault injection: multiplies the first gradient tensor by infinity.
struct CorruptFirst<'a> {
    grads: &'a mut GradientsParams,
    done: bool,
}

impl ModuleVisitor<TrainBackend> for CorruptFirst<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<TrainBackend, D>>) {
        if self.done {
            return;
        }
        if let Some(g) = self.grads.remove::<InnerBackend, D>(param.id) {
            self.grads.register(param.id, g.mul_scalar(f64::INFINITY));
            self.done = true;
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Data,
    Forward,
    Backward,
    Optimizer,
}

/// Step-phase timer. Enabled, it syncs the device at each phase boundary (so asynchronous GPU
/// work is charged to the phase that queued it); disabled, it costs nothing and adds no syncs.
#[derive(Debug, Default)]
pub struct Profiler {
    pub enabled: bool,
    /// data, forward, backward, optimizer.
    pub phases: [Duration; 4],
    pub total: Duration,
    pub steps: usize,
}

impl Profiler {
    fn mark(&mut self, device: &Device, phase: Phase, since: Instant) -> Instant {
        if self.enabled {
            device::memory::sync(device);
            self.phases[phase as usize] += since.elapsed();
        }
        Instant::now()
    }

    fn accounted(&self) -> Duration {
        self.phases.iter().sum()
    }

    fn end_step(&mut self, start: Instant) {
        if self.enabled {
            self.total += start.elapsed();
            self.steps += 1;
        }
    }

    /// Rows of (phase, ms per step, share of step time), "other" last.
    pub fn table(&self) -> Vec<ProfileRow> {
        let steps = self.steps.max(1) as f64;
        let total = self.total.as_secs_f64().max(1e-12);
        let other = (self.total.saturating_sub(self.accounted())).as_secs_f64();
        let names = ["data wait", "forward", "backward", "optimizer"];
        let mut rows: Vec<ProfileRow> = names
            .iter()
            .zip(self.phases)
            .map(|(n, d)| ProfileRow {
                phase: (*n).into(),
                ms_per_step: d.as_secs_f64() * 1e3 / steps,
                share: d.as_secs_f64() / total,
            })
            .collect();
        rows.push(ProfileRow { phase: "other".into(), ms_per_step: other * 1e3 / steps, share: other / total });
        rows
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ProfileRow {
    pub phase: String,
    pub ms_per_step: f64,
    pub share: f64,
}

/// `summary.json`'s `profile` (with `--profile`).
#[derive(Debug, Clone, Serialize)]
pub struct ProfileReport {
    pub steps: usize,
    pub ms_per_step: f64,
    pub samples_per_s: f64,
    pub phases: Vec<ProfileRow>,
    pub gpu_mean_utilization_pct: Option<f64>,
}

impl ProfileReport {
    pub fn render(&self) -> String {
        let mut out = format!(
            "step profile ({} steps, {:.1} ms/step, {:.1} samples/s):\n",
            self.steps, self.ms_per_step, self.samples_per_s
        );
        for r in &self.phases {
            out += &format!("  {:<10} {:>9.1} ms ({:>4.1}%)\n", r.phase, r.ms_per_step, 100.0 * r.share);
        }
        if let Some(u) = self.gpu_mean_utilization_pct {
            out += &format!("  GPU utilization (mean): {u:.0}%\n");
        }
        out
    }
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

fn mix(seed: u64, a: u64, b: u64) -> u64 {
    let mut h = fnv1a(FNV_OFFSET, &seed.to_le_bytes());
    h = fnv1a(h, &a.to_le_bytes());
    fnv1a(h, &b.to_le_bytes())
}

fn signature(cfg: &ExperimentConfig, model: &SignModel<TrainBackend>) -> ModelSignature {
    ModelSignature {
        kind: cfg.model.kind().into(),
        input_features: model.input_features(),
        classes: model.classes(),
        trainable_params: models::trainable_params(model),
        config: toml::to_string(&cfg.model).unwrap_or_default(),
    }
}

/// Keys whose values differ between two TOML tables (dotted), for resume errors.
fn diff_keys(a: &toml::Value, b: &toml::Value, prefix: &str, out: &mut Vec<String>) {
    match (a, b) {
        (toml::Value::Table(ta), toml::Value::Table(tb)) => {
            let keys: std::collections::BTreeSet<&String> = ta.keys().chain(tb.keys()).collect();
            for k in keys {
                let p = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                match (ta.get(k), tb.get(k)) {
                    (Some(x), Some(y)) => diff_keys(x, y, &p, out),
                    (x, y) => out.push(format!(
                        "{p} = {} in the run, {} now",
                        x.map(|v| v.to_string()).unwrap_or("(unset)".into()),
                        y.map(|v| v.to_string()).unwrap_or("(unset)".into())
                    )),
                }
            }
        }
        (x, y) if x != y => out.push(format!("{prefix} = {x} in the run, {y} now")),
        _ => {}
    }
}

/// Refuse to resume when what fixes the model's shapes or the data order changed.
pub(crate) fn check_resume_compatible(run_dir: &Path, saved: &ExperimentConfig, now: &ExperimentConfig) -> Result<()> {
    let to_value = |c: &ExperimentConfig| toml::Value::try_from(c).expect("configs serialize");
    let (a, b) = (to_value(saved), to_value(now));
    let mut diffs = Vec::new();
    for section in ["model", "preprocess", "data", "synthetic"] {
        if let (Some(x), Some(y)) = (a.get(section), b.get(section)) {
            diff_keys(x, y, section, &mut diffs);
        }
    }
    for key in ["batch_size", "accumulation_steps", "seed", "drop_last"] {
        let (x, y) = (a["training"].get(key), b["training"].get(key));
        if x != y {
            diffs.push(format!("training.{key} = {:?} in the run, {:?} now", x, y));
        }
    }
    // Only the data location may move.
    diffs.retain(|d| !d.starts_with("data.path") && !d.starts_with("data.cache_dir") && !d.starts_with("data.workers"));
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(TrainError::Resume {
            path: run_dir.into(),
            message: format!(
                "the config changes the model, its input or the data order, so the checkpoint cannot continue: {}",
                diffs.join("; ")
            ),
        })
    }
}

/// Live progress: a bar on a terminal, plain lines otherwise.
struct Progress {
    bar: Option<ProgressBar>,
    plain: bool,
}

impl Progress {
    /// (live bar, plain lines) for a mode: `auto` is a bar on a terminal, lines otherwise.
    fn kinds(mode: ProgressMode) -> (bool, bool) {
        let terminal = std::io::stdout().is_terminal();
        match mode {
            ProgressMode::Off => (false, false),
            ProgressMode::Plain => (false, true),
            ProgressMode::Bar => (true, false),
            ProgressMode::Auto => (terminal, !terminal),
        }
    }

    fn new(mode: ProgressMode, total_steps: usize, start: usize) -> Self {
        let (bar, plain) = Self::kinds(mode);
        let bar = bar.then(|| {
            let b = ProgressBar::with_draw_target(Some(total_steps as u64), indicatif::ProgressDrawTarget::stdout());
            b.set_style(
                ProgressStyle::with_template("{bar:24} {pos}/{len} steps {msg} eta {eta}").expect("valid template"),
            );
            b.set_position(start as u64);
            b.reset_eta();
            b
        });
        Self { bar, plain }
    }

    fn step(&self, step: usize, msg: &str, log_line: bool) {
        if let Some(b) = &self.bar {
            b.set_position(step as u64);
            b.set_message(msg.to_string());
        } else if self.plain && log_line {
            println!("{msg}");
        }
    }

    fn println(&self, line: &str) {
        match &self.bar {
            Some(b) => b.println(line),
            None if self.plain => println!("{line}"),
            None => {}
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

fn fmt_duration(s: f64) -> String {
    let s = s.max(0.0) as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

#[derive(Serialize)]
struct Event<'a> {
    step: usize,
    epoch: usize,
    kind: &'a str,
    detail: String,
}

/// Burn's backend RNG (model init, dropout) is process-global, so two runs at once in one
/// process would draw from one stream and neither would be reproducible. Runs (and batch-size
/// searches) in a process take turns.
static RUN_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub(crate) fn run_lock() -> std::sync::MutexGuard<'static, ()> {
    RUN_LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Train one experiment end to end (or resume one). Runs in one process are serialized (see
/// [`RUN_LOCK`]).
pub fn run(mut cfg: ExperimentConfig, opts: RunOptions) -> Result<RunOutcome> {
    let _turn = run_lock();
    let wall = Instant::now();
    cfg.validate().map_err(|(key, message)| crate::ConfigError {
        origin: crate::config::Origin { source: "config".into(), line: None },
        key,
        message,
    })?;
    let show = cfg.training.progress != ProgressMode::Off;
    let bars = Progress::kinds(cfg.training.progress).0;

    // Run directory.
    let run_dir = match (&opts.run_dir, opts.resume) {
        (Some(d), _) => d.clone(),
        (None, true) => return Err(TrainError::Invalid("resume needs the run directory".into())),
        (None, false) => rundir::new_run_dir(Path::new(&cfg.training.out_dir), &cfg.name),
    };
    let latest = if opts.resume {
        let saved_cfg = ExperimentConfig::from_file(&run_dir.join(rundir::CONFIG_FILE)).map_err(|e| {
            TrainError::Resume { path: run_dir.clone(), message: format!("no usable config.toml ({e})") }
        })?;
        check_resume_compatible(&run_dir, &saved_cfg, &cfg)?;
        rundir::clean_staging(&checkpoint::checkpoints_dir(&run_dir));
        checkpoint::list(&run_dir).pop()
    } else {
        if checkpoint::checkpoints_dir(&run_dir).exists() || run_dir.join(rundir::METRICS_FILE).exists() {
            return Err(TrainError::Invalid(format!(
                "{} already holds a run; continue it with --resume {0} or choose another --out",
                run_dir.display()
            )));
        }
        None
    };
    std::fs::create_dir_all(&run_dir).map_err(|e| TrainError::io(&run_dir, e))?;

    // Device and precision.
    let selected = device::resolve(&cfg.device.device, &cfg.device.policy())?;
    let device: Device = selected.device.clone();
    if show {
        println!("device: {} ({})", selected.selection.name, selected.selection.reason);
    }
    let rp = crate::amp::resolve_precision(cfg.training.precision, &selected.selection.capabilities);
    if let Some(w) = &rp.warning {
        eprintln!("warning: {w}");
    }
    let compute_dtype = (rp.precision != device::Precision::F32).then(|| rp.precision.float_dtype());
    if show {
        println!("precision: {} compute, f32 master weights ({})", rp.precision, rp.reason);
    }

    // Data.
    let pre = Arc::new(Preprocessor::new(cfg.preprocess.clone())?);
    let prepared = prepare_data(&cfg, &pre, bars)?;
    let ds = prepared.dataset.clone();
    rundir::write_json(&run_dir.join(rundir::LABELS_FILE), &ds.labels)?;
    let (train_idx, valid_idx) = (prepared.train.clone(), prepared.valid.clone());
    let groups = |idx: &[usize]| {
        idx.iter().map(|&i| ds.items[i].group.as_str()).collect::<std::collections::BTreeSet<_>>().len()
    };

    // Batch size ("auto" is resolved here and stored resolved, so a resume uses the same).
    if cfg.training.batch_size == BatchSize::Auto {
        let report = search_batch_size(&cfg, &ds, &train_idx, &pre, &selected, rp.precision)?;
        if show {
            print!("{}", report.render());
        }
        cfg.training.batch_size = BatchSize::Fixed(report.batch_size);
        cfg.training.accumulation_steps = report.accumulation_steps;
        rundir::write_json(&run_dir.join("batch-size.json"), &report)?;
    }
    let config_toml = cfg.to_toml();
    rundir::write_atomic(&run_dir.join(rundir::CONFIG_FILE), config_toml.as_bytes())?;
    let t = &cfg.training;
    let batch_size = t.batch_size.fixed().expect("resolved above");
    let loader_cfg = LoaderConfig {
        batch_size,
        shuffle: true,
        drop_last: t.drop_last,
        seed: t.seed,
        workers: cfg.data.workers,
        prefetch: cfg.data.prefetch,
    };
    let accum = t.accumulation_steps;
    let batches_per_epoch = epoch_batches(&train_idx, &loader_cfg, 0).len();
    let steps_per_epoch = batches_per_epoch / accum;
    if steps_per_epoch == 0 {
        return Err(TrainError::Invalid(format!(
            "the training split has {} sequences ({} batches of {}), fewer than one optimizer step needs (accumulation_steps = {accum}); lower training.batch_size or training.accumulation_steps",
            train_idx.len(),
            batches_per_epoch,
            batch_size
        )));
    }
    let mut total_steps = steps_per_epoch * t.epochs;
    if t.max_steps > 0 {
        total_steps = total_steps.min(t.max_steps);
    }
    let schedule = LrSchedule::new(&cfg.schedule, cfg.optimizer.lr, steps_per_epoch, total_steps);
    let augmenter = cfg.augment.enabled.then(|| Arc::new(Augmenter::new(cfg.augment.clone(), mirror_table(&ds, &pre))));
    let batcher = ItemBatcher { preprocessor: pre.clone(), augmenter, seed: t.seed };

    // Model and optimizer (seeded init, materialized before any clone: see models::precision).
    TrainBackend::seed(&device, t.seed);
    let mut model: SignModel<TrainBackend> =
        cfg.model.init::<TrainBackend>(ds.features, ds.num_classes(), &device).map(&mut Materialize);
    let mut optim = Optim::new(&cfg.optimizer);
    let sig = signature(&cfg, &model);
    let mut state = TrainState::new(sig.clone());
    let mut resumed_from = None;
    if let Some((step, dir)) = &latest {
        let saved = checkpoint::read_state(dir)?;
        if saved.signature != sig {
            return Err(TrainError::Resume {
                path: dir.clone(),
                message: format!(
                    "the checkpoint holds a {} model with {} inputs, {} classes and {} parameters; this config builds a {} model with {} inputs, {} classes and {} parameters",
                    saved.signature.kind, saved.signature.input_features, saved.signature.classes, saved.signature.trainable_params,
                    sig.kind, sig.input_features, sig.classes, sig.trainable_params
                ),
            });
        }
        model = models::bundle::load_weights(model, dir, &device)?;
        optim = optim.load(&dir.join("optim.mpk"), &device)?;
        state = saved;
        resumed_from = Some(*step);
        if show {
            println!(
                "resuming {} from step {step} (epoch {}, batch {})",
                run_dir.display(),
                state.epoch + 1,
                state.batch_in_epoch
            );
        }
    } else if opts.resume && show {
        println!("no complete checkpoint in {}; starting from the beginning", run_dir.display());
    }
    let mut metrics = MetricsWriter::open(&run_dir, resumed_from.or(opts.resume.then_some(0)))?;
    if let Some(step) = resumed_from {
        metrics.event(&Event {
            step,
            epoch: state.epoch + 1,
            kind: "resume",
            detail: format!("pid {}", std::process::id()),
        })?;
    }

    let trainable = models::trainable_params(&model);
    if show {
        println!(
            "model: {} with {} trainable parameters; {} inputs per frame, {} classes",
            cfg.model.kind(),
            trainable,
            ds.features,
            ds.num_classes()
        );
        println!(
            "data: {} train sequences ({} signers), {} validation ({} unseen signers); batch {} x {} accumulation = effective batch {}; {} steps",
            train_idx.len(),
            groups(&train_idx),
            valid_idx.len(),
            groups(&valid_idx),
            batch_size,
            accum,
            batch_size * accum,
            total_steps
        );
    }
    let loss_fn = CrossEntropyLossConfig::new()
        .with_smoothing((t.label_smoothing > 0.0).then_some(t.label_smoothing as f32))
        .init::<TrainBackend>(&device);

    if state.scaler.enabled != (rp.precision == device::Precision::F16) {
        state.scaler = LossScaler::new(rp.precision == device::Precision::F16, &cfg.amp);
    }
    let mut snapshot = (model.clone(), optim.clone(), state.step);
    let mut good_since_snapshot = 0usize;
    let mut recovery_log: Vec<String> = Vec::new();
    let mut prof = Profiler { enabled: t.profile, ..Default::default() };
    let monitor = (device::backend_name(&device) == "cuda")
        .then(|| device::GpuMonitor::start(Duration::from_millis(500), Some(&run_dir.join("gpu.csv"))))
        .transpose()?;
    let progress = Progress::new(cfg.training.progress, total_steps, state.step);
    let loop_start = Instant::now();
    let mut data_wait = Duration::ZERO;
    let mut window_start = Instant::now();
    let (mut window_loss, mut window_correct, mut window_samples, mut window_steps) = (0.0f64, 0u64, 0u64, 0usize);
    let mut stopped_early = false;
    let mut interrupted = false;
    let mut epoch_loss = 0.0f64;
    let mut epoch_correct = 0u64;
    let mut epoch_samples = 0u64;
    let mut epoch_steps = 0usize;
    let mut epoch_start = Instant::now();
    let mut last_grad_norm = 0.0;

    'epochs: while state.epoch < t.epochs && state.step < total_steps {
        let epoch = state.epoch;
        model.set_late_dropout(epoch >= t.late_dropout_epoch);
        let mut loader =
            EpochLoader::start(ds.clone(), batcher.clone(), &train_idx, &loader_cfg, epoch, state.batch_in_epoch);
        let usable = steps_per_epoch * accum;
        if state.batch_in_epoch == 0 {
            epoch_loss = 0.0;
            epoch_correct = 0;
            epoch_samples = 0;
            epoch_steps = 0;
            epoch_start = Instant::now();
        }
        while state.batch_in_epoch < usable && state.step < total_steps {
            let step_start = Instant::now();
            let mut accumulator = GradientsAccumulator::<SignModel<TrainBackend>>::new();
            let mut single: Option<GradientsParams> = None;
            let mut losses: Vec<Tensor<InnerBackend, 1>> = Vec::with_capacity(accum);
            let mut corrects: Vec<Tensor<InnerBackend, 1, Int>> = Vec::with_capacity(accum);
            let mut n = 0u64;
            let scale = state.scaler.scale;
            // Forward/backward run on f16/bf16 copies of the f32 masters (same ParamIds).
            let compute = match compute_dtype {
                Some(dt) => models::precision::cast_for_compute(model.clone(), dt),
                None => model.clone(),
            };
            let inject_nan = cfg.fault.nan_loss_steps.contains(&state.step);
            for k in 0..accum {
                let t0 = Instant::now();
                let hb: HostBatch = loader.next().ok_or_else(|| {
                    TrainError::Invalid(format!("the data loader ended early in epoch {}", epoch + 1))
                })?;
                data_wait += t0.elapsed();
                let batch = hb.to_device::<TrainBackend>(&device);
                let t1 = prof.mark(&device, Phase::Data, t0);
                TrainBackend::seed(&device, mix(t.seed, state.step as u64, k as u64));
                let inputs = match compute_dtype {
                    Some(dt) => batch.inputs.cast(dt),
                    None => batch.inputs,
                };
                let mut logits = compute.forward(inputs, batch.pad_mask);
                if compute_dtype.is_some() {
                    logits = logits.cast(FloatDType::F32);
                }
                // Loss and softmax in f32.
                let mut loss = loss_fn.forward(logits.clone(), batch.labels.clone());
                if inject_nan {
                    loss = loss.mul_scalar(f64::NAN);
                }
                let correct = logits.argmax(1).reshape([hb.batch]).equal(batch.labels).int().sum();
                losses.push(loss.clone().inner());
                corrects.push(correct.inner());
                let factor = scale / accum as f64;
                let loss = if factor != 1.0 { loss.mul_scalar(factor) } else { loss };
                let t2 = prof.mark(&device, Phase::Forward, t1);
                let grads = GradientsParams::from_grads(loss.backward(), &model);
                if accum == 1 {
                    single = Some(grads);
                } else {
                    accumulator.accumulate(&model, grads);
                }
                prof.mark(&device, Phase::Backward, t2);
                n += hb.batch as u64;
            }
            let t3 = Instant::now();
            state.batch_in_epoch += accum;
            let mut grads = single.unwrap_or_else(|| accumulator.grads());
            if cfg.fault.inf_grad_steps.contains(&state.step) {
                model.visit(&mut CorruptFirst { grads: &mut grads, done: false });
            }
            let mut norm = GradNorm { grads: &grads, total: None };
            model.visit(&mut norm);
            let norm2 = norm.total.unwrap_or_else(|| Tensor::zeros([1], &device));
            // The one host read of the step: loss, correct count, squared global gradient norm.
            let read = Transaction::default()
                .register(Tensor::cat(losses, 0).sum())
                .register(Tensor::cat(corrects, 0).sum())
                .register(norm2)
                .execute();
            let first = |i: usize| read[i].iter::<f64>().next().unwrap_or(f64::NAN);
            let (loss_sum, correct, norm2) = (first(0), first(1) as u64, first(2));
            let step_loss = loss_sum / accum as f64;
            let grad_norm = norm2.sqrt() / scale;
            let lr = schedule.lr(state.step) * state.lr_scale;
            let finite = step_loss.is_finite() && norm2.is_finite();
            match state.scaler.update(finite, &cfg.amp) {
                ScaleChange::Grew(to) => metrics.event(&Event {
                    step: state.step,
                    epoch: epoch + 1,
                    kind: "loss_scale_growth",
                    detail: format!("loss scale {scale} -> {to}"),
                })?,
                ScaleChange::BackedOff(to) => metrics.event(&Event {
                    step: state.step,
                    epoch: epoch + 1,
                    kind: "loss_scale_backoff",
                    detail: format!("loss scale {scale} -> {to} (gradients overflowed)"),
                })?,
                ScaleChange::None => {}
            }
            if finite {
                let mut factor = 1.0 / scale;
                let clip = cfg.optimizer.clip_grad_norm;
                if clip > 0.0 && grad_norm > clip {
                    factor *= clip / (grad_norm + 1e-6);
                }
                if factor != 1.0 {
                    model.visit(&mut ScaleGrads { grads: &mut grads, factor });
                }
                model = optim.step(lr, model, grads);
                state.consecutive_bad = 0;
                window_loss += step_loss;
                epoch_loss += step_loss;
                window_steps += 1;
                epoch_steps += 1;
                good_since_snapshot += 1;
                if good_since_snapshot >= cfg.recovery.snapshot_every {
                    snapshot = (model.clone(), optim.clone(), state.step + 1);
                    good_since_snapshot = 0;
                }
            } else {
                state.skipped_steps += 1;
                let cause = if step_loss.is_finite() {
                    format!("gradient norm is {}", norm2.sqrt())
                } else {
                    format!("loss is {step_loss}")
                };
                // f16 overflow while the scale can still shrink is the scaler's job, not a fault.
                let overflow_only = step_loss.is_finite() && state.scaler.enabled && !state.scaler.at_floor(&cfg.amp);
                if !overflow_only {
                    state.consecutive_bad += 1;
                }
                let detail = format!("step skipped: {cause} ({} bad in a row)", state.consecutive_bad);
                recovery_log.push(format!("step {}: {detail}", state.step));
                metrics.event(&Event {
                    step: state.step,
                    epoch: epoch + 1,
                    kind: "skipped_step",
                    detail: detail.clone(),
                })?;
                progress.println(&format!("warning: step {} {detail}", state.step));
                if state.consecutive_bad >= cfg.recovery.max_consecutive_bad {
                    if state.rollbacks >= cfg.recovery.max_rollbacks {
                        let report = format!(
                            "{} non-finite steps in a row after {} rollbacks (LR scale {}); recovery log: {}",
                            state.consecutive_bad,
                            state.rollbacks,
                            state.lr_scale,
                            recovery_log.join("; ")
                        );
                        metrics.event(&Event {
                            step: state.step,
                            epoch: epoch + 1,
                            kind: "abort",
                            detail: report.clone(),
                        })?;
                        progress.finish();
                        return Err(TrainError::Diverged(report));
                    }
                    model = snapshot.0.clone();
                    optim = snapshot.1.clone();
                    state.lr_scale *= cfg.recovery.lr_cut;
                    state.rollbacks += 1;
                    state.consecutive_bad = 0;
                    let detail = format!(
                        "rolled back to the weights of step {}, LR scale now {}, continuing after the offending batch",
                        snapshot.2, state.lr_scale
                    );
                    recovery_log.push(format!("step {}: {detail}", state.step));
                    metrics.event(&Event {
                        step: state.step,
                        epoch: epoch + 1,
                        kind: "rollback",
                        detail: detail.clone(),
                    })?;
                    progress.println(&format!("warning: {detail}"));
                }
            }
            prof.mark(&device, Phase::Optimizer, t3);
            last_grad_norm = grad_norm;
            if t.empty_cache_interval > 0 && (state.step + 1).is_multiple_of(t.empty_cache_interval) {
                device::empty_cache(&device);
                if let Some(m) = device::memory_stats(&device) {
                    metrics.write(&Row {
                        kind: "memory",
                        epoch: epoch + 1,
                        step: state.step + 1,
                        samples: state.samples + n,
                        mem_in_use_mib: Some(m.bytes_in_use as f64 / 1048576.0),
                        mem_reserved_mib: Some(m.bytes_reserved as f64 / 1048576.0),
                        elapsed_s: state.elapsed_s + loop_start.elapsed().as_secs_f64(),
                        ..Row::default()
                    })?;
                }
            }
            state.step += 1;
            state.samples += n;
            window_correct += correct;
            window_samples += n;
            epoch_correct += correct;
            epoch_samples += n;

            let log_now = state.step.is_multiple_of(t.log_every) || state.step == total_steps;
            let elapsed = window_start.elapsed().as_secs_f64().max(1e-9);
            let sps = window_samples as f64 / elapsed;
            let done = (state.step - resumed_from.unwrap_or(0)) as f64;
            let eta = loop_start.elapsed().as_secs_f64() / done.max(1.0) * (total_steps - state.step) as f64;
            let msg = format!(
                "epoch {}/{} step {}/{} loss {:.4} acc {:.3} lr {:.2e} {:.0} samples/s eta {}",
                epoch + 1,
                t.epochs,
                state.step,
                total_steps,
                window_loss / window_steps.max(1) as f64,
                window_correct as f64 / window_samples.max(1) as f64,
                lr,
                sps,
                fmt_duration(eta)
            );
            progress.step(state.step, &msg, log_now);
            if log_now {
                metrics.write(&Row {
                    kind: "step",
                    epoch: epoch + 1,
                    step: state.step,
                    samples: state.samples,
                    loss: Some(window_loss / window_steps.max(1) as f64),
                    top1: Some(window_correct as f64 / window_samples.max(1) as f64),
                    lr: Some(lr),
                    grad_norm: Some(grad_norm),
                    samples_per_s: Some(sps),
                    elapsed_s: state.elapsed_s + loop_start.elapsed().as_secs_f64(),
                    loss_scale: state.scaler.enabled.then_some(state.scaler.scale),
                    ..Row::default()
                })?;
                window_start = Instant::now();
                (window_loss, window_correct, window_samples, window_steps) = (0.0, 0, 0, 0);
            }
            let ck = cfg.checkpoint.every_steps;
            let epoch_ends = state.batch_in_epoch >= usable;
            if ck > 0 && state.step.is_multiple_of(ck) && !epoch_ends {
                let mut s = state.clone();
                s.elapsed_s += loop_start.elapsed().as_secs_f64();
                checkpoint::save(&run_dir, &model, &optim, &s, cfg.checkpoint.keep_last)?;
            }
            prof.end_step(step_start);
            if opts.stop_after_steps.is_some_and(|s| state.step >= s) && !epoch_ends {
                interrupted = true;
                break 'epochs;
            }
        }
        drop(loader);

        // End of epoch (also when max_steps cut it short): validate, track the best, checkpoint.
        let lr = schedule.lr(state.step.saturating_sub(1));
        let train_loss = epoch_loss / epoch_steps.max(1) as f64;
        let train_top1 = epoch_correct as f64 / epoch_samples.max(1) as f64;
        let eval = (!valid_idx.is_empty())
            .then(|| evaluate(&model.valid(), &ds, &pre, &valid_idx, batch_size, cfg.data.workers, &device));
        let record = EpochRecord {
            epoch: epoch + 1,
            step: state.step,
            train_loss,
            train_top1,
            valid_loss: eval.as_ref().map(|e| e.loss),
            valid_top1: eval.as_ref().map(|e| e.top1),
            valid_top5: eval.as_ref().map(|e| e.top5),
            lr,
            samples_per_s: epoch_samples as f64 / epoch_start.elapsed().as_secs_f64().max(1e-9),
            elapsed_s: state.elapsed_s + loop_start.elapsed().as_secs_f64(),
        };
        metrics.write(&Row {
            kind: "epoch",
            epoch: epoch + 1,
            step: state.step,
            samples: state.samples,
            loss: Some(train_loss),
            top1: Some(train_top1),
            lr: Some(lr),
            grad_norm: Some(last_grad_norm),
            samples_per_s: Some(record.samples_per_s),
            valid_loss: record.valid_loss,
            valid_top1: record.valid_top1,
            valid_top5: record.valid_top5,
            elapsed_s: record.elapsed_s,
            loss_scale: state.scaler.enabled.then_some(state.scaler.scale),
            ..Row::default()
        })?;
        let metric = t.early_stopping.metric;
        let value = match (metric, &eval) {
            (Metric::ValidTop1, Some(e)) => e.top1,
            (Metric::ValidLoss, Some(e)) => e.loss,
            // No validation split: the training loss decides.
            (_, None) => train_loss,
        };
        let metric_kind = if eval.is_none() { Metric::ValidLoss } else { metric };
        let improved = match &state.best {
            None => value.is_finite(),
            Some(b) => metric_kind.improves(value, b.value, t.early_stopping.min_delta),
        };
        let mut line =
            format!("epoch {}/{}: train loss {:.4} top-1 {:.3}", epoch + 1, t.epochs, train_loss, train_top1);
        if let Some(e) = &eval {
            line += &format!(" | valid loss {:.4} top-1 {:.3} top-5 {:.3}", e.loss, e.top1, e.top5);
        }
        line += &format!(" | {:.0} samples/s", record.samples_per_s);
        state.history.push(record);
        state.epoch += 1;
        state.batch_in_epoch = 0;
        if improved {
            state.best = Some(BestRecord {
                epoch: epoch + 1,
                step: state.step,
                metric: if eval.is_none() { "train_loss".into() } else { metric.name().into() },
                value,
            });
            state.epochs_since_best = 0;
            line += " (best)";
        } else {
            state.epochs_since_best += 1;
        }
        progress.println(&line);
        let mut s = state.clone();
        s.elapsed_s += loop_start.elapsed().as_secs_f64();
        if improved {
            checkpoint::save_best(&run_dir, &model, &s)?;
        }
        checkpoint::save(&run_dir, &model, &optim, &s, cfg.checkpoint.keep_last)?;
        if t.early_stopping.patience > 0 && state.epochs_since_best >= t.early_stopping.patience {
            stopped_early = true;
            progress.println(&format!(
                "early stop: no {} improvement for {} epochs",
                metric_kind.name(),
                state.epochs_since_best
            ));
            break;
        }
        if opts.stop_after_steps.is_some_and(|s| state.step >= s) {
            interrupted = true;
            break;
        }
    }
    progress.finish();
    let loop_s = loop_start.elapsed().as_secs_f64();
    let gpu = monitor.map(|m| m.stop());
    if interrupted {
        return Ok(RunOutcome { run_dir, summary: None });
    }

    // Export the best weights (the last ones when nothing was tracked).
    let best_dir = checkpoint::checkpoints_dir(&run_dir).join("best");
    let (export, exported_epoch) = match &state.best {
        Some(b) if best_dir.join("model.mpk").is_file() => (
            models::bundle::load_weights(model.valid(), &best_dir, &device)?,
            state.history.iter().find(|h| h.epoch == b.epoch).cloned(),
        ),
        _ => (model.valid(), state.history.last().cloned()),
    };
    let card = ModelCard {
        epoch: exported_epoch.as_ref().map(|h| h.epoch).unwrap_or(0),
        step: exported_epoch.as_ref().map(|h| h.step).unwrap_or(state.step),
        valid_top1: exported_epoch.as_ref().and_then(|h| h.valid_top1),
        valid_loss: exported_epoch.as_ref().and_then(|h| h.valid_loss),
        median_frames: {
            let mut lens: Vec<usize> = train_idx.iter().map(|&i| ds.items[i].sample.frames()).collect();
            lens.sort_unstable();
            lens.get(lens.len() / 2).copied()
        },
        ..ModelCard::new(cfg.model.clone(), cfg.preprocess.clone(), ds.features, ds.labels.clone(), trainable)
    };
    let exported_model = rundir::export_model(&run_dir, &export, &card, &config_toml)?;

    let train_seconds = state.elapsed_s + loop_s;
    let profile = prof.enabled.then(|| {
        let ms = prof.total.as_secs_f64() * 1e3 / prof.steps.max(1) as f64;
        ProfileReport {
            steps: prof.steps,
            ms_per_step: ms,
            samples_per_s: (batch_size * accum) as f64 * 1e3 / ms.max(1e-9),
            phases: prof.table(),
            gpu_mean_utilization_pct: gpu.as_ref().and_then(|g| g.mean_utilization()),
        }
    });
    let summary = Summary {
        name: cfg.name.clone(),
        run_dir: run_dir.clone(),
        device: selected.selection.name.clone(),
        device_reason: selected.selection.reason.clone(),
        model: cfg.model.kind().into(),
        data_root: prepared.root.clone(),
        trainable_params: trainable,
        input_features: ds.features,
        classes: ds.num_classes(),
        train_samples: train_idx.len(),
        valid_samples: valid_idx.len(),
        train_groups: groups(&train_idx),
        valid_groups: groups(&valid_idx),
        chance_top1: 1.0 / ds.num_classes().max(1) as f64,
        epochs_run: state.history.len(),
        steps: state.step,
        batch_size,
        accumulation_steps: accum,
        effective_batch_size: batch_size * accum,
        samples_seen: state.samples,
        train_seconds,
        samples_per_s: state.history.iter().map(|h| h.samples_per_s).sum::<f64>() / state.history.len().max(1) as f64,
        data_wait_share: data_wait.as_secs_f64() / loop_s.max(1e-9),
        skipped_steps: state.skipped_steps,
        rollbacks: state.rollbacks,
        lr_scale: state.lr_scale,
        loss_scale: state.scaler.enabled.then_some(state.scaler.scale),
        loss_scale_backoffs: state.scaler.backoffs,
        precision: rp.precision.to_string(),
        precision_reason: rp.reason.clone(),
        master_dtypes: master_dtypes(&model),
        profile: profile.clone(),
        gpu: gpu.clone(),
        stopped_early,
        resumed_from_step: resumed_from,
        last: state.history.last().cloned(),
        best: state.best.clone(),
        exported_model,
    };
    rundir::write_json(&run_dir.join(rundir::SUMMARY_FILE), &summary)?;
    let rows = crate::metrics::read_rows(&run_dir.join(rundir::METRICS_FILE))?;
    rundir::write_atomic(&run_dir.join(rundir::CURVES_FILE), crate::plot::curves_svg(&rows).as_bytes())?;
    if show {
        if let Some(b) = &summary.best {
            let top1 = state.history.iter().find(|h| h.epoch == b.epoch).and_then(|h| h.valid_top1);
            match top1 {
                Some(a) => println!(
                    "best epoch {}: validation top-1 {:.3} on {} unseen signers (chance {:.3})",
                    b.epoch, a, summary.valid_groups, summary.chance_top1
                ),
                None => println!("best epoch {}: {} {:.4}", b.epoch, b.metric, b.value),
            }
        }
        if let Some(p) = &summary.profile {
            print!("{}", p.render());
        }
        if let Some(g) = &summary.gpu {
            for gs in &g.gpus {
                println!(
                    "GPU {} {}: utilization mean {:.0}% (max {:.0}%), memory max {:.0} MiB, temperature max {:.0} C, power mean {:.0} W (gpu.csv)",
                    gs.gpu, gs.name, gs.utilization_pct.mean, gs.utilization_pct.max, gs.memory_used_mib.max, gs.temperature_c.max, gs.power_w.mean
                );
            }
        }
        if summary.skipped_steps > 0 || summary.rollbacks > 0 {
            println!(
                "recovery: {} skipped steps, {} rollbacks, LR scale {} (events.jsonl)",
                summary.skipped_steps, summary.rollbacks, summary.lr_scale
            );
        }
        if !valid_idx.is_empty() {
            println!(
                "per-class figures and confusion matrix: cargo run --release -p infer -- eval --model {} --data {} --split valid",
                run_dir.display(),
                summary.data_root.display()
            );
        }
        println!(
            "done in {} ({} steps, {:.0} samples/s, data wait {:.1}%); run directory {}",
            fmt_duration(wall.elapsed().as_secs_f64()),
            summary.steps,
            summary.samples_per_s,
            100.0 * summary.data_wait_share,
            run_dir.display()
        );
    }
    Ok(RunOutcome { run_dir, summary: Some(summary) })
}
