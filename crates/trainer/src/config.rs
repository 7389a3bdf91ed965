//! Experiment configuration: TOML sections, layering and errors that name file, key and line.
//!
//! Layers, lowest first: the built-in default (`configs/default.toml`, compiled in) -> `--config
//! FILE` (repeatable) -> `--set a.b=value` (repeatable) -> flags (`--device`, `--epochs`, ...).
//! Tables merge key by key; a layer that changes `model.kind` replaces the whole `[model]` table
//! (keys of one architecture mean nothing to another). The merged table is deserialized once, as
//! `bundle::config_v1::ConfigV1` (the file format, which also says what a left-out key means), and
//! converted ([`crate::config_format`]); every error is traced back to the layer and line that set
//! the offending key.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use bundle::config_v1::ConfigV1;
use data::augment::AugmentConfig;
use data::dataset::OnError;
use data::preprocess::PreprocessConfig;
use data::sentences::SentenceConfig;
use data::synth::SynthConfig;
use device::{DeviceSpec, PrecisionSetting, SelectionPolicy};
use models::decode::DecodeConfig;
use models::{ModelConfig, Task};
use serde::Serialize;
use toml::{Table, Value};

/// The built-in default experiment, identical to `configs/default.toml`.
pub const DEFAULT_TOML: &str = include_str!("../../../configs/default.toml");

/// The version of the experiment config schema this trainer writes (`config_version` in every
/// run directory's and bundle's `config.toml`). A file without the key is version 1; a file of a
/// later version is refused with a message saying so, not misread.
pub const CONFIG_VERSION: u32 = bundle::config_v1::VERSION;

/// A whole experiment.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(into = "ConfigV1")]
pub struct ExperimentConfig {
    /// The schema version of the file ([`CONFIG_VERSION`]; user configs may leave it out).
    pub config_version: u32,
    /// Run name; run directories are `<training.out_dir>/<name>-<UTC time>`.
    pub name: String,
    /// `classification` (one sign per sequence) or `ctc` (continuous recognition: token
    /// sequences, per-frame head, CTC loss).
    pub task: Task,
    /// `[data]`.
    pub data: DataConfig,
    /// `[synthetic]`: the built-in dataset when `data.path` is empty.
    pub synthetic: SynthConfig,
    /// `[sentences]`: how the built-in continuous dataset strings `[synthetic]` signs together
    /// (`task = "ctc"` with an empty `data.path`).
    pub sentences: SentenceConfig,
    /// `[ctc]`: decoding of `task = "ctc"`.
    pub ctc: DecodeConfig,
    /// `[preprocess]`.
    pub preprocess: PreprocessConfig,
    /// `[augment]`.
    pub augment: AugmentConfig,
    /// `[model]`, tagged by `kind`.
    pub model: ModelConfig,
    /// `[optimizer]`.
    pub optimizer: OptimizerConfig,
    /// `[schedule]`.
    pub schedule: ScheduleConfig,
    /// `[training]`.
    pub training: TrainingConfig,
    /// `[checkpoint]`.
    pub checkpoint: CheckpointConfig,
    /// `[device]`.
    pub device: DeviceConfig,
    /// `[amp]`.
    pub amp: AmpConfig,
    /// `[recovery]`.
    pub recovery: RecoveryConfig,
    /// `[distributed]`: several devices and machines.
    pub distributed: crate::dist::config::DistributedConfig,
}

/// Version 1's meaning of an empty file (`bundle::config_v1`); the product starts from
/// [`DEFAULT_TOML`] over it.
impl Default for ExperimentConfig {
    fn default() -> Self {
        ConfigV1::default().try_into().expect("version 1's defaults are a valid config")
    }
}

/// `[data]`: where sequences come from and how they are split and loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct DataConfig {
    /// Dataset root (ISLR layout or npy layout). Empty = generate the `[synthetic]` dataset.
    pub path: String,
    /// Where generated synthetic datasets are kept (one sub-directory per `[synthetic]` setting).
    pub synthetic_dir: String,
    /// Preprocessed-sequence cache directory; empty disables the cache.
    pub cache_dir: String,
    /// Share of groups (signers) held out for validation; 0 = no validation.
    pub valid_fraction: f64,
    /// Seed of the signer ranking that decides the split.
    pub split_seed: u64,
    /// K-fold cross-validation by group: 0 = off (use `valid_fraction`); K >= 2 deals the groups
    /// into K folds and holds out fold `fold` (see `trainer cv`).
    pub folds: usize,
    /// The held-out fold (0-based) when `folds` >= 2.
    pub fold: usize,
    /// What to do with a file that cannot be read.
    pub on_error: OnError,
    /// With `on_error = "skip"`, fail anyway above this share of bad files.
    pub max_bad_fraction: f64,
    /// Batch-building worker threads.
    pub workers: usize,
    /// Batches each worker keeps ready ahead of the training loop.
    pub prefetch: usize,
    /// On GPU backends, upload the next batch on a background thread while the current step
    /// computes (device-side prefetch).
    pub device_prefetch: bool,
}

/// `optimizer.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptimizerKind {
    /// AdamW with decoupled weight decay.
    Adamw,
    /// SGD with optional (Nesterov) momentum.
    Sgd,
}

/// `[optimizer]`.
#[derive(Debug, Clone, PartialEq)]
pub struct OptimizerConfig {
    /// AdamW or SGD.
    pub kind: OptimizerKind,
    /// Peak learning rate (after warm-up).
    pub lr: f64,
    /// Decoupled weight decay for AdamW (multiplied by the LR), L2 penalty for SGD.
    pub weight_decay: f64,
    /// AdamW first-moment decay.
    pub beta1: f64,
    /// AdamW second-moment decay.
    pub beta2: f64,
    /// AdamW denominator epsilon.
    pub epsilon: f64,
    /// SGD momentum (0 = none).
    pub momentum: f64,
    /// SGD Nesterov momentum.
    pub nesterov: bool,
    /// Clip the global gradient norm to this value; 0 = no clipping.
    pub clip_grad_norm: f64,
}

/// `schedule.kind`: the shape after the linear warm-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScheduleKind {
    /// Linear warm-up, then cosine decay to `min_lr` at the last optimizer step.
    Cosine,
    /// Linear warm-up, then constant.
    Constant,
    /// Linear warm-up, then multiply by `gamma` every `step_size` optimizer steps.
    Step,
}

/// `[schedule]`: the LR as a function of the optimizer step (not the micro-batch).
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleConfig {
    /// The schedule's shape.
    pub kind: ScheduleKind,
    /// Warm-up length in optimizer steps; `warmup_epochs` is used when this is 0.
    pub warmup_steps: usize,
    /// Warm-up length in epochs (when `warmup_steps` is 0).
    pub warmup_epochs: f64,
    /// The cosine schedule's final LR.
    pub min_lr: f64,
    /// Period of the `step` schedule, in optimizer steps.
    pub step_size: usize,
    /// Factor of the `step` schedule.
    pub gamma: f64,
}

/// A validation metric that decides the best epoch and early stopping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Mean validation loss (lower is better).
    ValidLoss,
    /// Validation top-1 accuracy; for CTC the sequence accuracy (higher is better).
    ValidTop1,
    /// Validation token (character) error rate of the configured decoder, CTC only (lower is
    /// better).
    ValidCer,
}

impl Metric {
    /// The name used in `summary.json` and logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::ValidLoss => "valid_loss",
            Self::ValidTop1 => "valid_top1",
            Self::ValidCer => "valid_cer",
        }
    }

    /// Whether `new` beats `best` by more than `min_delta`.
    pub fn improves(self, new: f64, best: f64, min_delta: f64) -> bool {
        match self {
            Self::ValidLoss | Self::ValidCer => new < best - min_delta,
            Self::ValidTop1 => new > best + min_delta,
        }
    }

    /// The metric's value in `eval` (`ValidCer` without decoding scores is NaN, which never
    /// improves; config validation refuses it for classification).
    pub fn value(self, eval: &crate::validate::Evaluation) -> f64 {
        match self {
            Self::ValidLoss => eval.loss,
            Self::ValidTop1 => eval.top1,
            Self::ValidCer => eval.sequences.map_or(f64::NAN, |s| s.chosen().cer),
        }
    }
}

/// How training shows progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// A live bar on a terminal, plain lines otherwise.
    Auto,
    /// Always a live bar.
    Bar,
    /// Plain lines every `log_every` steps and per epoch.
    Plain,
    /// Nothing but warnings and errors.
    Off,
}

/// `[training]`.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainingConfig {
    /// Epochs to train.
    pub epochs: usize,
    /// Micro-batch size (what one forward pass sees), or "auto" (see `trainer tune-batch`).
    pub batch_size: BatchSize,
    /// With `batch_size = "auto"`: keep this effective batch by setting `accumulation_steps`
    /// (0 = use `accumulation_steps` as given).
    pub effective_batch_size: usize,
    /// Largest micro-batch `auto` tries.
    pub max_batch_size: usize,
    /// Compute precision: "auto" asks the device (bf16 where fast, f16 on older GPUs, f32 on
    /// the CPU), or "f32" / "f16" / "bf16". Master weights and optimizer state stay f32.
    pub precision: PrecisionSetting,
    /// Every N optimizer steps empty the device's memory cache and log memory statistics (0 = never).
    pub empty_cache_interval: usize,
    /// Time each step's phases with device syncs and report them (costs the syncs).
    pub profile: bool,
    /// Micro-batches averaged into one optimizer step; effective batch = batch_size x this.
    pub accumulation_steps: usize,
    /// Cross-entropy label smoothing.
    pub label_smoothing: f64,
    /// Seeds model init, data order, augmentation and dropout.
    pub seed: u64,
    /// Drop an incomplete last batch of each epoch.
    pub drop_last: bool,
    /// Stop after this many optimizer steps (0 = no limit), e.g. for a quick throughput run.
    pub max_steps: usize,
    /// Epoch from which the conv-transformer's late dropout is on.
    pub late_dropout_epoch: usize,
    /// Log a metrics row every N optimizer steps.
    pub log_every: usize,
    /// `[training.early_stopping]`.
    pub early_stopping: EarlyStopping,
    /// Progress display.
    pub progress: ProgressMode,
    /// Parent directory of run directories.
    pub out_dir: String,
}

/// A micro-batch size or "auto".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchSize {
    /// Searched at the start of a run (see `trainer tune-batch`).
    Auto,
    /// This many sequences.
    Fixed(usize),
}

impl BatchSize {
    /// The fixed size (`auto` must be resolved before training).
    pub fn fixed(self) -> Option<usize> {
        match self {
            Self::Fixed(n) => Some(n),
            Self::Auto => None,
        }
    }
}

/// `[amp]`: dynamic loss scaling for f16 (bf16 and f32 need none).
#[derive(Debug, Clone, PartialEq)]
pub struct AmpConfig {
    /// The loss scale a run starts with.
    pub init_scale: f64,
    /// Multiply the scale by this after `growth_interval` finite steps in a row.
    pub growth_factor: f64,
    /// Finite steps in a row before the scale grows.
    pub growth_interval: usize,
    /// Multiply the scale by this when gradients overflow (the step is skipped).
    pub backoff_factor: f64,
    /// The scale's floor.
    pub min_scale: f64,
}

/// `[recovery]`: what happens when a step's loss or gradients are not finite. Every event goes
/// to `events.jsonl`, the log and `summary.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveryConfig {
    /// Bad steps in a row that are skipped before rolling back to the last good snapshot.
    pub max_consecutive_bad: usize,
    /// Rollbacks before the run aborts with a report.
    pub max_rollbacks: usize,
    /// LR multiplier applied at each rollback.
    pub lr_cut: f64,
    /// Take an in-memory snapshot (weights + optimizer) every N good steps.
    pub snapshot_every: usize,
    /// Device out-of-memory errors (or other device faults) a run survives: each continues from
    /// the last checkpoint with half the micro-batch and twice the accumulation (0 = none).
    pub max_device_faults: usize,
}

/// `[training.early_stopping]`: also decides which epoch is "best".
#[derive(Debug, Clone, PartialEq)]
pub struct EarlyStopping {
    /// The metric that decides the best epoch.
    pub metric: Metric,
    /// Epochs without improvement before stopping; 0 = never stop early.
    pub patience: usize,
    /// Smallest change that counts as an improvement.
    pub min_delta: f64,
}

/// `[checkpoint]`.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointConfig {
    /// Also checkpoint every N optimizer steps (0 = only at epoch end, or `gpu_every_steps` on
    /// a GPU).
    pub every_steps: usize,
    /// On GPU backends (CUDA, WGPU), when `every_steps` is 0: checkpoint every N steps, so a
    /// device fault loses little work (0 = only at epoch end).
    pub gpu_every_steps: usize,
    /// Step checkpoints kept (the best model is kept besides these).
    pub keep_last: usize,
}

impl CheckpointConfig {
    /// The step-checkpoint interval, on a GPU backend or not (0 = only at epoch end).
    pub fn interval(&self, on_gpu: bool) -> usize {
        match (self.every_steps, on_gpu) {
            (0, true) => self.gpu_every_steps,
            (n, _) => n,
        }
    }
}

/// `[device]`.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceConfig {
    /// auto, cpu, cuda, cuda:N, wgpu, wgpu:N
    pub device: DeviceSpec,
    /// With `device = "auto"`: `ranked` (CUDA, then a real WGPU adapter, then the CPU) or
    /// `fastest` (time a few training steps of the run's model on each usable kind and take the
    /// fastest).
    pub choose: device::Choose,
    /// GPU name fragments or CUDA ordinals, most preferred first.
    pub prefer: Vec<String>,
    /// Skip GPUs with less free memory.
    pub min_free_memory_mib: u64,
    /// Let `auto` pick software Vulkan adapters (llvmpipe).
    pub allow_software_wgpu: bool,
}

impl DeviceConfig {
    /// The selection policy `device::resolve` takes.
    pub fn policy(&self) -> SelectionPolicy {
        SelectionPolicy {
            prefer: self.prefer.clone(),
            min_free_memory_mib: self.min_free_memory_mib,
            allow_software_wgpu: self.allow_software_wgpu,
        }
    }
}

/// Where a key's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// A file path, `built-in default`, `--set` or a flag name.
    pub source: String,
    /// Line in the file, when known.
    pub line: Option<usize>,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}, line {l}", self.source),
            None => f.write_str(&self.source),
        }
    }
}

/// A configuration error, located.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct ConfigError {
    /// Where the offending value came from.
    pub origin: Origin,
    /// Dotted key path (empty for whole-file errors such as TOML syntax).
    pub key: String,
    /// What is wrong and what was expected.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}: {}", self.origin, self.message)
        } else {
            write!(f, "{}: `{}`: {}", self.origin, self.key, self.message)
        }
    }
}

/// A flag override: key path and value.
#[derive(Debug, Clone)]
pub struct FlagOverride {
    /// The flag's name (`--epochs`), for errors.
    pub flag: &'static str,
    /// The dotted key it sets.
    pub key: &'static str,
    /// The value.
    pub value: Value,
}

/// Builds an [`ExperimentConfig`] from layers, remembering where each key came from.
#[derive(Debug, Clone)]
pub struct ConfigBuilder {
    merged: Table,
    origins: BTreeMap<String, Origin>,
}

impl Default for ConfigBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl ConfigBuilder {
    /// Starts from the built-in default.
    pub fn new() -> Self {
        let mut b = Self { merged: Table::new(), origins: BTreeMap::new() };
        b.add_toml(DEFAULT_TOML, "built-in default").expect("the built-in default config is valid TOML");
        b
    }

    /// Starts from nothing but version 1's defaults (how a resolved `config.toml` is read back).
    pub fn empty() -> Self {
        Self { merged: Table::new(), origins: BTreeMap::new() }
    }

    /// Adds a TOML file layer.
    pub fn add_file(&mut self, path: &Path) -> Result<&mut Self, ConfigError> {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            origin: Origin { source: source.clone(), line: None },
            key: String::new(),
            message: format!("cannot read the config file: {e}"),
        })?;
        self.add_toml(&text, &source)
    }

    /// Adds a layer given as TOML text; `source` names it in errors.
    pub fn add_toml(&mut self, text: &str, source: &str) -> Result<&mut Self, ConfigError> {
        let table: Table = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| line_of(text, s.start));
            ConfigError {
                origin: Origin { source: source.to_string(), line },
                key: String::new(),
                message: format!("invalid TOML: {}", e.message()),
            }
        })?;
        let mut lines = BTreeMap::new();
        if let Ok(spanned) = toml::de::DeTable::parse(text) {
            key_lines(spanned.get_ref(), text, "", &mut lines);
        }
        let origins: Vec<(String, Origin)> =
            lines.into_iter().map(|(k, l)| (k, Origin { source: source.to_string(), line: Some(l) })).collect();
        self.merge_layer(table, origins);
        Ok(self)
    }

    /// Adds one `--set key.path=value` override. The value is TOML (`0.1`, `true`, `"x"`,
    /// `[1, 2]`); anything that does not parse as TOML is taken as a string.
    pub fn add_set(&mut self, assignment: &str) -> Result<&mut Self, ConfigError> {
        let origin = Origin { source: format!("--set {assignment}"), line: None };
        let Some((key, raw)) = assignment.split_once('=') else {
            return Err(ConfigError {
                origin,
                key: String::new(),
                message: "expected KEY=VALUE, e.g. --set optimizer.lr=0.002".into(),
            });
        };
        let key = key.trim();
        if key.is_empty() || key.split('.').any(|p| p.trim().is_empty()) {
            return Err(ConfigError { origin, key: key.into(), message: "empty key segment".into() });
        }
        let raw = raw.trim();
        let value = toml::from_str::<Table>(&format!("v = {raw}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| Value::String(raw.to_string()));
        self.set_value(key, value, origin);
        Ok(self)
    }

    /// Adds a flag override (highest precedence).
    pub fn add_flag(&mut self, flag: FlagOverride) -> &mut Self {
        self.set_value(flag.key, flag.value, Origin { source: flag.flag.to_string(), line: None });
        self
    }

    fn set_value(&mut self, key: &str, value: Value, origin: Origin) {
        let parts: Vec<&str> = key.split('.').map(str::trim).collect();
        let mut table = Table::new();
        let mut leaf = value;
        for part in parts[1..].iter().rev() {
            let mut t = Table::new();
            t.insert((*part).to_string(), leaf);
            leaf = Value::Table(t);
        }
        table.insert(parts[0].to_string(), leaf);
        self.merge_layer(table, vec![(parts.join("."), origin)]);
    }

    fn merge_layer(&mut self, layer: Table, origins: Vec<(String, Origin)>) {
        // A new architecture replaces the whole [model] table.
        let new_kind = layer.get("model").and_then(|m| m.get("kind")).and_then(Value::as_str);
        let old_kind = self.merged.get("model").and_then(|m| m.get("kind")).and_then(Value::as_str);
        if let (Some(new), Some(old)) = (new_kind, old_kind) {
            if new != old {
                self.merged.remove("model");
                self.origins.retain(|k, _| !(k == "model" || k.starts_with("model.")));
            }
        }
        merge(&mut self.merged, layer);
        for (k, o) in origins {
            self.origins.insert(k, o);
        }
    }

    /// The merged table (what `config.toml` in a run directory holds after resolution).
    pub fn table(&self) -> &Table {
        &self.merged
    }

    /// Where a dotted key was last set: the key itself or its nearest ancestor.
    pub fn origin_of(&self, key: &str) -> Origin {
        let mut k = key.to_string();
        loop {
            if let Some(o) = self.origins.get(&k) {
                return o.clone();
            }
            match k.rfind('.') {
                Some(i) => k.truncate(i),
                None => return Origin { source: "built-in default".into(), line: None },
            }
        }
    }

    /// Deserialize and validate the merged layers.
    pub fn build(&self) -> Result<ExperimentConfig, ConfigError> {
        let value = Value::Table(self.merged.clone());
        let doc: ConfigV1 = serde_path_to_error::deserialize(value).map_err(|e| {
            let mut key = e.path().to_string();
            let message = e.inner().to_string();
            // serde reports unknown fields at the enclosing table: name the field itself.
            let field =
                backticked_after(&message, "unknown field ").or_else(|| backticked_after(&message, "missing field "));
            if let Some(field) = field {
                if key == "." || key.is_empty() {
                    key = field;
                } else if !key.ends_with(&format!(".{field}")) && key != field {
                    key = format!("{key}.{field}");
                }
            }
            let key = key.trim_start_matches('.').to_string();
            ConfigError { origin: self.origin_of(&key), key, message: humanize(&message) }
        })?;
        let invalid = |(key, message): Invalid| ConfigError { origin: self.origin_of(&key), key, message };
        let cfg = ExperimentConfig::try_from(doc).map_err(invalid)?;
        cfg.validate().map_err(invalid)?;
        Ok(cfg)
    }
}

/// `unknown field `foo`, expected ...` -> `foo`.
fn backticked_after(message: &str, prefix: &str) -> Option<String> {
    let rest = message.split(prefix).nth(1)?;
    let rest = rest.strip_prefix('`')?;
    Some(rest.split('`').next()?.to_string())
}

/// First line only (serde_path_to_error / toml append "in `key`", which the error already says).
fn humanize(message: &str) -> String {
    message.lines().next().unwrap_or(message).trim().replace("invalid type: ", "wrong type: ")
}

fn merge(base: &mut Table, layer: Table) {
    for (k, v) in layer {
        match (base.get_mut(&k), v) {
            (Some(Value::Table(b)), Value::Table(l)) => merge(b, l),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

fn line_of(text: &str, byte: usize) -> usize {
    text[..byte.min(text.len())].bytes().filter(|&b| b == b'\n').count() + 1
}

fn key_lines(table: &toml::de::DeTable<'_>, text: &str, prefix: &str, out: &mut BTreeMap<String, usize>) {
    for (k, v) in table.iter() {
        let path = if prefix.is_empty() { k.get_ref().to_string() } else { format!("{prefix}.{}", k.get_ref()) };
        out.insert(path.clone(), line_of(text, k.span().start));
        if let Some(t) = v.get_ref().as_table() {
            key_lines(t, text, &path, out);
        }
    }
}

/// A config error found after parsing: (dotted key, message).
pub(crate) type Invalid = (String, String);

fn check(ok: bool, key: &str, message: impl FnOnce() -> String) -> Result<(), Invalid> {
    if ok {
        Ok(())
    } else {
        Err((key.to_string(), message()))
    }
}

impl ExperimentConfig {
    /// Range checks serde cannot do. Errors are (dotted key, message).
    pub fn validate(&self) -> Result<(), Invalid> {
        check((1..=CONFIG_VERSION).contains(&self.config_version), "config_version", || {
            format!(
                "is {}; this SignFlow reads config versions 1 to {CONFIG_VERSION} (the file was written by a newer SignFlow, or the key is wrong)",
                self.config_version
            )
        })?;
        check(!self.name.trim().is_empty() && !self.name.contains(['/', '\\']), "name", || {
            format!("must be a non-empty name without slashes, got {:?}", self.name)
        })?;
        self.data.validate()?;
        if self.data.path.is_empty() {
            self.synthetic.validate().map_err(config_key)?;
            if self.task == Task::Ctc {
                self.sentences.validate().map_err(config_key)?;
            }
        }
        check(
            self.task == Task::Ctc || self.training.early_stopping.metric != Metric::ValidCer,
            "training.early_stopping.metric",
            || "\"valid_cer\" needs task = \"ctc\"; use \"valid_top1\" or \"valid_loss\"".into(),
        )?;
        check(self.task == Task::Ctc || self.ctc.lexicon.is_none(), "ctc.lexicon", || {
            "a lexicon constrains CTC decoding; it needs task = \"ctc\"".into()
        })?;
        if self.task == Task::Ctc {
            self.ctc.validate()?;
            check(
                self.preprocess.long_sequences == data::preprocess::LongSequences::Resize,
                "preprocess.long_sequences",
                || {
                    "must be \"resize\" with task = \"ctc\": a crop would cut signs out of a sentence and off its labels".into()
                },
            )?;
        }
        self.preprocess.validate().map_err(config_key)?;
        self.model.validate().map_err(|e| match e {
            models::ModelError::Config { key, message } => (key, message),
            other => ("model".into(), other.to_string()),
        })?;
        self.optimizer.validate()?;
        self.schedule.validate(self.optimizer.lr)?;
        self.training.validate()?;
        self.amp.validate()?;
        self.recovery.validate()?;
        self.distributed.validate()?;
        check(
            self.device.choose == device::Choose::Ranked || self.device.device == DeviceSpec::Auto,
            "device.choose",
            || {
                format!(
                    "\"fastest\" chooses among the usable devices, so device.device must be \"auto\", got \"{}\"",
                    self.device.device
                )
            },
        )?;
        check(self.checkpoint.keep_last >= 1, "checkpoint.keep_last", || {
            "must be at least 1 (the last checkpoint is what --resume continues from)".into()
        })?;
        Ok(())
    }

    /// The resolved config as TOML (what a run directory's and a bundle's `config.toml` hold).
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("experiment configs serialize to TOML")
    }

    /// Parse a resolved `config.toml` (e.g. from a run directory).
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let mut b = ConfigBuilder::empty();
        b.add_file(path)?;
        b.build()
    }

    /// `data.path` as a path, `None` when empty (the synthetic dataset).
    pub fn data_path(&self) -> Option<PathBuf> {
        (!self.data.path.is_empty()).then(|| PathBuf::from(&self.data.path))
    }
}

fn config_key(e: data::DataError) -> Invalid {
    match e {
        data::DataError::Config { key, message } => (key, message),
        other => (String::new(), other.to_string()),
    }
}

impl DataConfig {
    /// Range checks of `[data]`.
    fn validate(&self) -> Result<(), Invalid> {
        let d = self;
        check((0.0..1.0).contains(&d.valid_fraction), "data.valid_fraction", || {
            format!("must be in [0, 1), got {}", d.valid_fraction)
        })?;
        check(d.folds != 1 && d.folds <= 1000, "data.folds", || {
            format!("must be 0 (no cross-validation) or 2..=1000 folds, got {}", d.folds)
        })?;
        check(d.folds == 0 || d.fold < d.folds, "data.fold", || {
            format!("must be a fold index in 0..{} (data.folds), got {}", d.folds, d.fold)
        })?;
        check(d.folds > 0 || d.fold == 0, "data.fold", || {
            format!("is {} but data.folds is 0 (no cross-validation); set data.folds", d.fold)
        })?;
        check((0.0..=1.0).contains(&d.max_bad_fraction), "data.max_bad_fraction", || {
            format!("must be in [0, 1], got {}", d.max_bad_fraction)
        })?;
        check((1..=64).contains(&d.workers), "data.workers", || format!("must be in 1..=64, got {}", d.workers))?;
        check(d.prefetch >= 1, "data.prefetch", || "must be at least 1".into())?;
        Ok(())
    }
}

impl OptimizerConfig {
    /// Range checks of `[optimizer]`.
    fn validate(&self) -> Result<(), Invalid> {
        let o = self;
        check(o.lr > 0.0 && o.lr.is_finite() && o.lr < 10.0, "optimizer.lr", || {
            format!("must be in (0, 10), got {}", o.lr)
        })?;
        check(o.weight_decay >= 0.0 && o.weight_decay.is_finite(), "optimizer.weight_decay", || {
            format!("must be >= 0, got {}", o.weight_decay)
        })?;
        check((0.0..1.0).contains(&o.beta1), "optimizer.beta1", || format!("must be in [0, 1), got {}", o.beta1))?;
        check((0.0..1.0).contains(&o.beta2), "optimizer.beta2", || format!("must be in [0, 1), got {}", o.beta2))?;
        check(o.epsilon > 0.0, "optimizer.epsilon", || format!("must be > 0, got {}", o.epsilon))?;
        check((0.0..1.0).contains(&o.momentum), "optimizer.momentum", || {
            format!("must be in [0, 1), got {}", o.momentum)
        })?;
        check(o.clip_grad_norm >= 0.0, "optimizer.clip_grad_norm", || {
            format!("must be >= 0 (0 = off), got {}", o.clip_grad_norm)
        })?;
        Ok(())
    }
}

impl ScheduleConfig {
    /// Range checks of `[schedule]` (`min_lr` at most the optimizer's `lr`).
    fn validate(&self, lr: f64) -> Result<(), Invalid> {
        let s = self;
        check(s.min_lr >= 0.0 && s.min_lr <= lr, "schedule.min_lr", || {
            format!("must be in [0, optimizer.lr = {}], got {}", lr, s.min_lr)
        })?;
        check(s.warmup_epochs >= 0.0, "schedule.warmup_epochs", || format!("must be >= 0, got {}", s.warmup_epochs))?;
        check(s.step_size >= 1, "schedule.step_size", || "must be at least 1".into())?;
        check(s.gamma > 0.0 && s.gamma <= 1.0, "schedule.gamma", || format!("must be in (0, 1], got {}", s.gamma))?;
        Ok(())
    }
}

impl TrainingConfig {
    /// Range checks of `[training]`.
    fn validate(&self) -> Result<(), Invalid> {
        let t = self;
        check((1..=100_000).contains(&t.epochs), "training.epochs", || {
            format!("must be in 1..=100000, got {}", t.epochs)
        })?;
        if let BatchSize::Fixed(b) = t.batch_size {
            check((1..=65_536).contains(&b), "training.batch_size", || {
                format!("must be in 1..=65536 or \"auto\", got {b}")
            })?;
        }
        check((1..=65_536).contains(&t.max_batch_size), "training.max_batch_size", || {
            format!("must be in 1..=65536, got {}", t.max_batch_size)
        })?;
        check((1..=4096).contains(&t.accumulation_steps), "training.accumulation_steps", || {
            format!("must be in 1..=4096, got {}", t.accumulation_steps)
        })?;
        check((0.0..1.0).contains(&t.label_smoothing), "training.label_smoothing", || {
            format!("must be in [0, 1), got {}", t.label_smoothing)
        })?;
        check(t.log_every >= 1, "training.log_every", || "must be at least 1".into())?;
        check(t.early_stopping.min_delta >= 0.0, "training.early_stopping.min_delta", || "must be >= 0".into())?;
        check(!t.out_dir.is_empty(), "training.out_dir", || "must not be empty".into())?;
        Ok(())
    }
}

impl AmpConfig {
    /// Range checks of `[amp]`.
    fn validate(&self) -> Result<(), Invalid> {
        let a = self;
        check(a.init_scale >= 1.0 && a.init_scale.is_finite(), "amp.init_scale", || {
            format!("must be >= 1, got {}", a.init_scale)
        })?;
        check(a.growth_factor >= 1.0, "amp.growth_factor", || format!("must be >= 1, got {}", a.growth_factor))?;
        check(a.backoff_factor > 0.0 && a.backoff_factor < 1.0, "amp.backoff_factor", || {
            format!("must be in (0, 1), got {}", a.backoff_factor)
        })?;
        check(a.growth_interval >= 1, "amp.growth_interval", || "must be at least 1".into())?;
        Ok(())
    }
}

impl RecoveryConfig {
    /// Range checks of `[recovery]`.
    fn validate(&self) -> Result<(), Invalid> {
        let r = self;
        check(r.max_consecutive_bad >= 1, "recovery.max_consecutive_bad", || "must be at least 1".into())?;
        check(r.lr_cut > 0.0 && r.lr_cut <= 1.0, "recovery.lr_cut", || format!("must be in (0, 1], got {}", r.lr_cut))?;
        check(r.snapshot_every >= 1, "recovery.snapshot_every", || "must be at least 1".into())?;
        Ok(())
    }
}
