//! What a run tells people while it trains and when it ends: live progress (a bar on a terminal,
//! plain lines otherwise), events (`events.jsonl`), the console lines, and `summary.json`.

use std::io::IsTerminal;
use std::path::PathBuf;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::checkpoint::{BestRecord, EpochRecord};
use crate::config::ProgressMode;
use crate::metrics::MetricsWriter;
use crate::profile::ProfileReport;
use crate::Result;

/// Live progress: a bar on a terminal, plain lines otherwise.
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
    plain: bool,
}

/// Where a run's human-readable lines go (device, precision, batch, resume, the closing
/// summary): stdout, or nowhere with `training.progress = "off"`. Also says whether loading
/// draws progress bars.
#[derive(Debug, Clone, Copy)]
pub struct Console {
    lines: bool,
    bars: bool,
}

impl Console {
    /// The console of a progress mode.
    pub fn new(mode: ProgressMode) -> Self {
        Self { lines: mode != ProgressMode::Off, bars: Progress::kinds(mode).0 }
    }

    /// Print `text` as a line.
    pub fn line(&self, text: impl std::fmt::Display) {
        if self.lines {
            println!("{text}");
        }
    }

    /// Print `text`, which ends its own lines (a table, a summary).
    pub fn block(&self, text: impl std::fmt::Display) {
        if self.lines {
            print!("{text}");
        }
    }

    /// Whether long loading work draws an indicatif bar.
    pub fn bars(&self) -> bool {
        self.bars
    }
}

impl Progress {
    /// (live bar, plain lines) for a mode: `auto` is a bar on a terminal, lines otherwise.
    pub fn kinds(mode: ProgressMode) -> (bool, bool) {
        let terminal = std::io::stdout().is_terminal();
        match mode {
            ProgressMode::Off => (false, false),
            ProgressMode::Plain => (false, true),
            ProgressMode::Bar => (true, false),
            ProgressMode::Auto => (terminal, !terminal),
        }
    }

    /// Progress over `total_steps` optimizer steps, `start` of them already done.
    pub fn new(mode: ProgressMode, total_steps: usize, start: usize) -> Self {
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

    /// Show step `step` with `msg`; plain mode prints the line only when `log_line`.
    pub fn step(&self, step: usize, msg: &str, log_line: bool) {
        if let Some(b) = &self.bar {
            b.set_position(step as u64);
            b.set_message(msg.to_string());
        } else if self.plain && log_line {
            println!("{msg}");
        }
    }

    /// Print a line above the bar (or as a plain line).
    pub fn println(&self, line: &str) {
        match &self.bar {
            Some(b) => b.println(line),
            None if self.plain => println!("{line}"),
            None => {}
        }
    }

    /// Remove the bar.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// Validation figures on one line: `loss .. top-1 .. top-5 ..`, or for CTC the loss, both
/// decoders' token error rates, and the chosen decoder's normalized Levenshtein score, word
/// error rate and share of exact sequences.
pub fn describe_evaluation(e: &crate::validate::Evaluation) -> String {
    match (&e.sequences, e.top5) {
        (Some(s), _) => {
            let c = s.chosen();
            format!(
                "loss {:.4} CER beam {:.3} greedy {:.3} | {}: NLD {:.3} WER {:.3} exact {:.3}",
                e.loss,
                s.beam.cer,
                s.greedy.cer,
                s.decoder.name(),
                c.nld,
                c.wer,
                c.sequence_accuracy
            )
        }
        (None, Some(top5)) => format!("loss {:.4} top-1 {:.3} top-5 {top5:.3}", e.loss, e.top1),
        (None, None) => format!("loss {:.4} top-1 {:.3}", e.loss, e.top1),
    }
}

/// `1m05s`, `2h03m`.
pub fn fmt_duration(s: f64) -> String {
    let s = s.max(0.0) as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

/// One line of `events.jsonl`.
#[derive(Debug, Serialize)]
struct Event<'a> {
    step: usize,
    epoch: usize,
    kind: &'a str,
    detail: String,
}

/// The run's outputs while it trains: `metrics.csv`, `events.jsonl` and the progress display.
#[derive(Debug)]
pub struct Reporter {
    /// `metrics.csv` and `events.jsonl`.
    pub metrics: MetricsWriter,
    /// The live display.
    pub progress: Progress,
}

impl Reporter {
    /// Append an event of `kind` at (step, 1-based epoch) to `events.jsonl`.
    pub fn event(&mut self, step: usize, epoch: usize, kind: &str, detail: String) -> Result<()> {
        self.metrics.event(&Event { step, epoch, kind, detail })
    }

    /// An event that is also shown as a warning line.
    pub fn warn(&mut self, step: usize, epoch: usize, kind: &str, detail: String, line: &str) -> Result<()> {
        self.progress.println(line);
        self.event(step, epoch, kind, detail)
    }
}

/// Final figures of a run (`summary.json`).
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// `name` of the config.
    pub name: String,
    /// The run directory.
    pub run_dir: PathBuf,
    /// The selected device.
    pub device: String,
    /// Why it was selected.
    pub device_reason: String,
    /// `model.kind`.
    pub model: String,
    /// `classification` or `ctc`.
    pub task: models::Task,
    /// The dataset root (`data.path`, or the generated synthetic dataset).
    pub data_root: PathBuf,
    /// Trainable parameters.
    pub trainable_params: usize,
    /// Features per frame.
    pub input_features: usize,
    /// Classes.
    pub classes: usize,
    /// Training sequences.
    pub train_samples: usize,
    /// Validation sequences.
    pub valid_samples: usize,
    /// Training signers.
    pub train_groups: usize,
    /// Validation signers (never seen in training).
    pub valid_groups: usize,
    /// 1 / classes.
    pub chance_top1: f64,
    /// Epochs completed.
    pub epochs_run: usize,
    /// Optimizer steps taken.
    pub steps: usize,
    /// Micro-batch size (after "auto").
    pub batch_size: usize,
    /// Micro-batches per optimizer step.
    pub accumulation_steps: usize,
    /// `batch_size` x `accumulation_steps`.
    pub effective_batch_size: usize,
    /// Training samples processed, over resumes.
    pub samples_seen: u64,
    /// Training time over resumes.
    pub train_seconds: f64,
    /// Mean of the epochs' training throughput.
    pub samples_per_s: f64,
    /// Share of the training loop's wall time spent waiting for the data loader.
    pub data_wait_share: f64,
    /// Steps skipped for non-finite loss or gradients.
    pub skipped_steps: usize,
    /// Rollbacks to a snapshot.
    pub rollbacks: usize,
    /// Multiplier on the scheduled LR after rollbacks.
    pub lr_scale: f64,
    /// The f16 loss scale at the end (`None` without f16).
    pub loss_scale: Option<f64>,
    /// Loss-scale backoffs.
    pub loss_scale_backoffs: usize,
    /// Compute precision used.
    pub precision: String,
    /// Why.
    pub precision_reason: String,
    /// Distinct dtypes of the master weights at the end (always `["F32"]`).
    pub master_dtypes: Vec<String>,
    /// Step profile (with `--profile`).
    pub profile: Option<ProfileReport>,
    /// GPU monitor summary (CUDA).
    pub gpu: Option<device::MonitorSummary>,
    /// Early stopping ended the run.
    pub stopped_early: bool,
    /// The step this process resumed from.
    pub resumed_from_step: Option<usize>,
    /// The last epoch's figures.
    pub last: Option<EpochRecord>,
    /// The best epoch.
    pub best: Option<BestRecord>,
    /// The exported model bundle.
    pub exported_model: PathBuf,
    /// [`bundle::weights::fingerprint`] of the final weights: equal for two runs exactly when
    /// their weights are equal bit for bit (compare an interrupted run with an uninterrupted one).
    #[serde(default)]
    pub final_weights_fingerprint: String,
    /// Peak device memory over the run's epochs, MiB: `[in use, reserved]` (GPU backends).
    pub peak_memory_mib: Option<[f64; 2]>,
    /// Device faults (out of memory, device lost) the run survived, in order.
    pub device_faults: Vec<crate::fault::DeviceFault>,
    /// What made the run unlikely to train well, with what to change (`crate::shape::shape_warnings`).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The data-parallel group, when the run had several peers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distributed: Option<crate::dist::GroupSummary>,
}

impl Summary {
    /// The closing lines of a run; `wall_s` is this process's wall time.
    pub fn render(&self, history: &[EpochRecord], wall_s: f64) -> String {
        let mut out = String::new();
        if let Some(b) = &self.best {
            let best = history.iter().find(|h| h.epoch == b.epoch);
            match (best.and_then(|h| h.valid_sequences), best.and_then(|h| h.valid_top1)) {
                (Some(s), _) => {
                    out += &format!(
                        "best epoch {}: validation on {} unseen signers: {} decoding CER {:.3} (NLD {:.3}, WER {:.3}, exact {:.3}); greedy CER {:.3}\n",
                        b.epoch,
                        self.valid_groups,
                        s.decoder.name(),
                        s.chosen().cer,
                        s.chosen().nld,
                        s.chosen().wer,
                        s.chosen().sequence_accuracy,
                        s.greedy.cer
                    )
                }
                (None, Some(a)) => {
                    out += &format!(
                        "best epoch {}: validation top-1 {:.3} on {} unseen signers (chance {:.3})\n",
                        b.epoch, a, self.valid_groups, self.chance_top1
                    )
                }
                (None, None) => out += &format!("best epoch {}: {} {:.4}\n", b.epoch, b.metric, b.value),
            }
        }
        if let Some(p) = &self.profile {
            out += &p.render();
        }
        if let Some(g) = &self.gpu {
            for gs in &g.gpus {
                out += &format!(
                    "GPU {} {}: utilization mean {:.0}% (max {:.0}%), memory max {:.0} MiB, temperature max {:.0} C, power mean {:.0} W (gpu.csv)\n",
                    gs.gpu, gs.name, gs.utilization_pct.mean, gs.utilization_pct.max, gs.memory_used_mib.max, gs.temperature_c.max, gs.power_w.mean
                );
            }
        }
        if self.skipped_steps > 0 || self.rollbacks > 0 {
            out += &format!(
                "recovery: {} skipped steps, {} rollbacks, LR scale {} (events.jsonl)\n",
                self.skipped_steps, self.rollbacks, self.lr_scale
            );
        }
        for f in &self.device_faults {
            out += &format!("recovered: {}\n", f.describe());
        }
        if let Some([in_use, reserved]) = self.peak_memory_mib {
            out += &format!("device memory peak: {in_use:.1} MiB in use, {reserved:.1} MiB reserved\n");
        }
        if self.valid_samples > 0 && self.task == models::Task::Classification {
            out += &format!(
                "per-class figures and confusion matrix: cargo run --release -p infer -- eval --model {} --data {} --split valid\n",
                self.run_dir.display(),
                self.data_root.display()
            );
        }
        out += &format!(
            "done in {} ({} steps, {:.0} samples/s, data wait {:.1}%); run directory {}\n",
            fmt_duration(wall_s),
            self.steps,
            self.samples_per_s,
            100.0 * self.data_wait_share,
            self.run_dir.display()
        );
        out
    }
}
