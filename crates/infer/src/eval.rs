//! Evaluate a trained model on a labelled dataset (ISLR or npy layout, as `data::index::open`
//! reads it): top-1 / top-k, balanced accuracy, macro F1, cross-entropy, calibration (ECE),
//! per-class and per-signer figures, the confusion matrix and the most frequent confusions.
//!
//! ```no_run
//! use infer::eval::{evaluate, EvalOptions, Split};
//! use infer::{Classifier, PredictorOptions};
//! let predictor = Classifier::load("runs/default-20261122-193204".as_ref(), &PredictorOptions::default())?;
//! // The trainer's validation signers, as the model card records them.
//! let split = Split::from_card(predictor.card(), true)?;
//! let report = evaluate(&predictor, "/data/asl-signs".as_ref(), &EvalOptions { split, ..Default::default() })?;
//! println!("{}", report.render());
//! report.write_dir("runs/default-20261122-193204/eval".as_ref())?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Sequences are read and preprocessed on worker threads (the same `Preprocessor::prepare` the
//! trainer's evaluation uses) one batch ahead of the model, so the device does not wait on files.
//! A file that cannot be read or prepared is reported and left out; more than
//! `max_bad_fraction` of them is an error. [`EvalReport::from_scores`] is the pure part: feed it
//! logits from any pipeline.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use bundle::{ModelCard, TrainingSplit};

use crate::{Classifier, InferError, Predictor, Result};

/// Which sequences of the dataset to evaluate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Split {
    /// Every sequence (a separate test set).
    All,
    /// The held-out signers of `data::index::split_by_group(fraction, seed)`: for the data a model
    /// was trained on, with its `data.valid_fraction` and `data.split_seed`, the trainer's
    /// validation set (unless every file of a signer failed to load in training).
    Valid {
        /// `data.valid_fraction`.
        fraction: f64,
        /// `data.split_seed`.
        seed: u64,
    },
    /// The other signers of the same split.
    Train {
        /// `data.valid_fraction`.
        fraction: f64,
        /// `data.split_seed`.
        seed: u64,
    },
    /// Fold `fold` of `data::index::fold_by_group(folds, fold, seed)`: the validation signers of
    /// a cross-validation run (`trainer cv`).
    FoldValid {
        /// K.
        folds: usize,
        /// The held-out fold.
        fold: usize,
        /// `data.split_seed`.
        seed: u64,
    },
    /// The training signers of that fold.
    FoldTrain {
        /// K.
        folds: usize,
        /// The held-out fold.
        fold: usize,
        /// `data.split_seed`.
        seed: u64,
    },
}

impl std::fmt::Display for Split {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Split::All => write!(f, "all"),
            Split::Valid { fraction, seed } => write!(f, "valid (valid_fraction {fraction}, split_seed {seed})"),
            Split::Train { fraction, seed } => write!(f, "train (valid_fraction {fraction}, split_seed {seed})"),
            Split::FoldValid { folds, fold, seed } => write!(f, "valid (fold {fold} of {folds}, split_seed {seed})"),
            Split::FoldTrain { folds, fold, seed } => {
                write!(f, "train (all but fold {fold} of {folds}, split_seed {seed})")
            }
        }
    }
}

impl Split {
    /// The held-out (`valid`) or training side of a training run's split.
    pub fn of_training(split: &TrainingSplit, valid: bool) -> Split {
        let (fraction, seed, folds, fold) = (split.valid_fraction, split.split_seed, split.folds, split.fold);
        match (folds >= 2, valid) {
            (true, true) => Split::FoldValid { folds, fold, seed },
            (true, false) => Split::FoldTrain { folds, fold, seed },
            (false, true) => Split::Valid { fraction, seed },
            (false, false) => Split::Train { fraction, seed },
        }
    }

    /// The split the model was trained with, as its model card records it: its held-out signers
    /// when `valid`, else its training signers. A cross-validation fold gives its fold.
    pub fn from_card(card: &ModelCard, valid: bool) -> Result<Split> {
        let split = card.split.as_ref().ok_or_else(|| {
            InferError::Eval(format!(
                "the model card ({}) records no training split; give the split's valid fraction and seed",
                bundle::layout::CARD_FILE
            ))
        })?;
        Ok(Self::of_training(split, valid))
    }

    /// Entry positions of `index` in this split, in index order.
    pub fn positions(&self, index: &data::index::DatasetIndex) -> Vec<usize> {
        match *self {
            Split::All => (0..index.entries.len()).collect(),
            Split::Valid { fraction, seed } => index.split_by_group(fraction, seed).1,
            Split::Train { fraction, seed } => index.split_by_group(fraction, seed).0,
            Split::FoldValid { folds, fold, seed } => index.fold_by_group(folds, fold, seed).1,
            Split::FoldTrain { folds, fold, seed } => index.fold_by_group(folds, fold, seed).0,
        }
    }
}

/// How to run an evaluation.
#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// Which sequences.
    pub split: Split,
    /// Sequences per forward pass.
    pub batch: usize,
    /// The `k` of top-k accuracy (clamped to the class count).
    pub top_k: usize,
    /// Fail when more than this share of the selected files cannot be read or prepared.
    pub max_bad_fraction: f64,
    /// Draw a progress bar on stderr.
    pub progress: bool,
}

impl Default for EvalOptions {
    fn default() -> Self {
        Self { split: Split::All, batch: 32, top_k: 5, max_bad_fraction: 0.05, progress: false }
    }
}

/// One evaluated sequence: where it came from, its true class (model index) and the model's logits.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    /// The sequence file.
    pub path: PathBuf,
    /// Its group (signer).
    pub group: String,
    /// True class (model label index).
    pub label: usize,
    /// The model's logits.
    pub logits: Vec<f32>,
}

/// Figures of one class (model label order).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassStats {
    /// Class name.
    pub label: String,
    /// Sequences of this class.
    pub support: usize,
    /// Sequences predicted as this class.
    pub predicted: usize,
    /// Sequences of the class predicted correctly.
    pub correct: usize,
    /// correct / predicted (0 when never predicted).
    pub precision: f64,
    /// correct / support; `None` when the class has no sequences here.
    pub recall: Option<f64>,
    /// Harmonic mean of precision and recall (0 when both are 0); `None` without support.
    pub f1: Option<f64>,
}

/// Top-1 of one group (signer).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupStats {
    /// Group (signer).
    pub group: String,
    /// Sequences evaluated.
    pub n: usize,
    /// Predicted correctly.
    pub correct: usize,
    /// Top-1 accuracy.
    pub top1: f64,
}

/// A (true, predicted) pair off the diagonal and how often it happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Confusion {
    /// True class.
    pub label: String,
    /// Predicted class.
    pub predicted: String,
    /// How often.
    pub count: usize,
}

/// The outcome for one sequence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ItemResult {
    /// The sequence file.
    pub path: PathBuf,
    /// Its group (signer).
    pub group: String,
    /// True class.
    pub label: String,
    /// Predicted class.
    pub predicted: String,
    /// Probability of the predicted class.
    pub confidence: f64,
    /// Probability the model gave the true class.
    pub label_probability: f64,
    /// Whether the prediction is right.
    pub correct: bool,
}

/// A file that was left out, with the reason (which names the file).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SkippedFile {
    /// The file.
    pub path: PathBuf,
    /// Why it was left out.
    pub reason: String,
}

/// Calibration bins (equal width over the confidence of the predicted class).
pub const ECE_BINS: usize = 15;

// The report's file names are `bundle::layout`'s `EVAL_*` (every on-disk name is defined there).
use bundle::layout::{EVAL_CONFUSION_FILE, EVAL_FILES, EVAL_PER_CLASS_FILE, EVAL_PREDICTIONS_FILE, EVAL_REPORT_FILE};

/// The largest `eval.json` read to recognise an earlier report.
const MAX_REPORT_BYTES: u64 = 256 << 20;

/// Refuse `dir` for an evaluation report unless it is new, empty, or holds only an earlier report
/// (nothing but [`EVAL_FILES`], with an `eval.json` that reads as one): a report never
/// overwrites files of someone else's that happen to share its names.
pub fn check_report_dir(dir: &Path) -> Result<()> {
    let names = bundle::layout::entries(dir)?;
    if names.is_empty() {
        return Ok(());
    }
    let refuse = |why: String| {
        Err(InferError::File {
            path: dir.into(),
            message: format!(
                "{why}: an evaluation report needs a new or empty directory, or one with only an earlier report in it, and SignFlow leaves the files there as they are"
            ),
        })
    };
    let foreign: Vec<&String> = names.iter().filter(|n| !EVAL_FILES.contains(&n.as_str())).collect();
    if !foreign.is_empty() {
        return refuse(format!(
            "holds files that are not an evaluation report ({})",
            bundle::layout::first_names(&foreign)
        ));
    }
    let json = dir.join(EVAL_REPORT_FILE);
    let earlier = std::fs::symlink_metadata(&json)
        .ok()
        .filter(|m| m.is_file() && m.len() <= MAX_REPORT_BYTES)
        .and_then(|_| std::fs::read(&json).ok())
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .is_some_and(|v| ["model_dir", "data", "split", "n", "engine"].iter().all(|k| v.get(k).is_some()));
    if !earlier {
        return refuse(format!(
            "holds {} without an {} that reads as an evaluation report",
            bundle::layout::first_names(&names),
            EVAL_REPORT_FILE
        ));
    }
    Ok(())
}

/// Everything an evaluation measured. `eval.json` is this struct without `predictions`
/// (those go to `predictions.csv`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvalReport {
    /// The model's bundle directory.
    pub model_dir: PathBuf,
    /// The dataset root.
    pub data: PathBuf,
    /// Which sequences.
    pub split: Split,
    /// The device.
    pub device: String,
    /// Compute precision (`f32`, `f16`, `bf16`, `int8`).
    pub precision: String,
    /// What ran the model: `eval graph` or `burn` ([`Predictor::engine_name`]).
    pub engine: String,
    /// Model labels; confusion rows and columns are in this order.
    pub labels: Vec<String>,
    /// Sequences evaluated.
    pub n: usize,
    /// Groups (signers) among them.
    pub groups: usize,
    /// Top-1 accuracy.
    pub top1: f64,
    /// The k of top-k.
    pub top_k: usize,
    /// Top-k accuracy.
    pub top_k_accuracy: f64,
    /// Mean recall over the classes that have sequences here.
    pub balanced_accuracy: f64,
    /// Mean F1 over the classes that have sequences here.
    pub macro_f1: f64,
    /// Mean cross-entropy of the true class (nats, no label smoothing), from f64 log-softmax.
    pub loss: f64,
    /// Expected calibration error over [`ECE_BINS`] confidence bins.
    pub ece: f64,
    /// Mean confidence of the predicted class.
    pub mean_confidence: f64,
    /// Per-class figures, in model label order.
    pub per_class: Vec<ClassStats>,
    /// Per-group figures.
    pub per_group: Vec<GroupStats>,
    /// Most frequent off-diagonal pairs, most frequent first (at most 20).
    pub top_confusions: Vec<Confusion>,
    /// `confusion[true][predicted]` counts.
    pub confusion: Vec<Vec<usize>>,
    /// Files left out, with the reason.
    pub skipped: Vec<SkippedFile>,
    /// Wall time of the evaluation.
    pub seconds: f64,
    /// Throughput.
    pub sequences_per_s: f64,
    /// Share of `seconds` the model waited for files to be read and prepared (the first batch
    /// always waits; near 0 after it means the reading keeps up).
    pub data_wait_share: f64,
    /// Per-sequence results, in dataset order.
    #[serde(skip)]
    pub predictions: Vec<ItemResult>,
}

impl EvalReport {
    /// Compute every figure from logits. `labels` are the model's classes; each `Scored::label` and
    /// logit row must index them (checked).
    pub fn from_scores(labels: &[String], scores: &[Scored], top_k: usize) -> Result<EvalReport> {
        let c = labels.len();
        let k = top_k.clamp(1, c.max(1));
        let mut confusion = vec![vec![0usize; c]; c];
        let mut groups: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        let (mut loss, mut in_top_k, mut conf_sum) = (0.0f64, 0usize, 0.0f64);
        let mut bins = [(0usize, 0usize, 0.0f64); ECE_BINS];
        let mut predictions = Vec::with_capacity(scores.len());
        for (i, s) in scores.iter().enumerate() {
            if s.logits.len() != c || s.label >= c {
                return Err(InferError::Input {
                    index: i,
                    message: format!("{} logits for label {}; the model has {c} classes", s.logits.len(), s.label),
                });
            }
            if let Some(bad) = s.logits.iter().position(|v| !v.is_finite()) {
                return Err(InferError::Input {
                    index: i,
                    message: format!("{}: logit {bad} is {}", s.path.display(), s.logits[bad]),
                });
            }
            let row = &s.logits;
            // Arg-max with ties to the lower index (as the trainer's evaluation).
            let pred = row.iter().enumerate().fold(0, |b, (j, &v)| if v > row[b] { j } else { b });
            let max = f64::from(row[pred]);
            let lse = row.iter().map(|&v| (f64::from(v) - max).exp()).sum::<f64>().ln() + max;
            let target = f64::from(row[s.label]);
            loss += lse - target;
            let rank = row.iter().filter(|&&v| v > row[s.label]).count();
            in_top_k += usize::from(rank < k);
            let confidence = (max - lse).exp();
            conf_sum += confidence;
            let correct = pred == s.label;
            confusion[s.label][pred] += 1;
            let g = groups.entry(s.group.as_str()).or_default();
            g.0 += 1;
            g.1 += usize::from(correct);
            let bin = ((confidence * ECE_BINS as f64) as usize).min(ECE_BINS - 1);
            bins[bin].0 += 1;
            bins[bin].1 += usize::from(correct);
            bins[bin].2 += confidence;
            predictions.push(ItemResult {
                path: s.path.clone(),
                group: s.group.clone(),
                label: labels[s.label].clone(),
                predicted: labels[pred].clone(),
                confidence,
                label_probability: (target - lse).exp(),
                correct,
            });
        }
        let n = scores.len();
        let nf = n.max(1) as f64;
        let correct_total: usize = (0..c).map(|j| confusion[j][j]).sum();
        let per_class: Vec<ClassStats> = (0..c)
            .map(|j| {
                let support: usize = confusion[j].iter().sum();
                let predicted: usize = confusion.iter().map(|r| r[j]).sum();
                let correct = confusion[j][j];
                let precision = if predicted == 0 { 0.0 } else { correct as f64 / predicted as f64 };
                let recall = (support > 0).then(|| correct as f64 / support as f64);
                let f1 = recall.map(|r| if precision + r == 0.0 { 0.0 } else { 2.0 * precision * r / (precision + r) });
                ClassStats { label: labels[j].clone(), support, predicted, correct, precision, recall, f1 }
            })
            .collect();
        let present: Vec<&ClassStats> = per_class.iter().filter(|s| s.support > 0).collect();
        let mean = |f: &dyn Fn(&ClassStats) -> f64| {
            if present.is_empty() {
                0.0
            } else {
                present.iter().map(|s| f(s)).sum::<f64>() / present.len() as f64
            }
        };
        let balanced_accuracy = mean(&|s| s.recall.unwrap_or(0.0));
        let macro_f1 = mean(&|s| s.f1.unwrap_or(0.0));
        let ece = bins
            .iter()
            .filter(|b| b.0 > 0)
            .map(|&(m, ok, conf)| (ok as f64 / m as f64 - conf / m as f64).abs() * m as f64 / nf)
            .sum();
        let mut top_confusions: Vec<Confusion> = (0..c)
            .flat_map(|t| (0..c).map(move |p| (t, p)))
            .filter(|&(t, p)| t != p && confusion[t][p] > 0)
            .map(|(t, p)| Confusion { label: labels[t].clone(), predicted: labels[p].clone(), count: confusion[t][p] })
            .collect();
        top_confusions.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.label.cmp(&b.label)));
        top_confusions.truncate(20);
        let per_group: Vec<GroupStats> = groups
            .into_iter()
            .map(|(g, (m, ok))| GroupStats { group: g.to_string(), n: m, correct: ok, top1: ok as f64 / m as f64 })
            .collect();
        Ok(EvalReport {
            model_dir: PathBuf::new(),
            data: PathBuf::new(),
            split: Split::All,
            device: String::new(),
            precision: String::new(),
            engine: String::new(),
            labels: labels.to_vec(),
            n,
            groups: per_group.len(),
            top1: correct_total as f64 / nf,
            top_k: k,
            top_k_accuracy: in_top_k as f64 / nf,
            balanced_accuracy,
            macro_f1,
            loss: loss / nf,
            ece,
            mean_confidence: conf_sum / nf,
            per_class,
            per_group,
            top_confusions,
            confusion,
            skipped: Vec::new(),
            seconds: 0.0,
            sequences_per_s: 0.0,
            data_wait_share: 0.0,
            predictions,
        })
    }

    /// A human-readable summary: headline figures, weakest classes, top confusions, per signer.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "evaluated {} sequences of {} signers ({} classes; split {}) on {} ({}, {}) in {:.1} s, {:.0} sequences/s, waiting for files {:.0}%",
            self.n,
            self.groups,
            self.per_class.iter().filter(|c| c.support > 0).count(),
            self.split,
            self.device,
            self.precision,
            self.engine,
            self.seconds,
            self.sequences_per_s,
            100.0 * self.data_wait_share
        );
        if !self.skipped.is_empty() {
            let _ = writeln!(s, "left out {} unreadable files (listed in eval.json)", self.skipped.len());
        }
        let _ = writeln!(
            s,
            "top-1 {:.4}  top-{} {:.4}  balanced accuracy {:.4}  macro F1 {:.4}  loss {:.4}  ECE {:.4}  mean confidence {:.4}",
            self.top1,
            self.top_k,
            self.top_k_accuracy,
            self.balanced_accuracy,
            self.macro_f1,
            self.loss,
            self.ece,
            self.mean_confidence
        );
        let mut weakest: Vec<&ClassStats> = self.per_class.iter().filter(|c| c.support > 0).collect();
        weakest.sort_by(|a, b| a.recall.unwrap_or(0.0).total_cmp(&b.recall.unwrap_or(0.0)).then(a.label.cmp(&b.label)));
        let weak: Vec<String> = weakest
            .iter()
            .take(5)
            .filter(|c| c.recall < Some(1.0))
            .map(|c| format!("{} {}/{}", c.label, c.correct, c.support))
            .collect();
        if !weak.is_empty() {
            let _ = writeln!(s, "weakest classes (recall): {}", weak.join(", "));
        }
        if !self.top_confusions.is_empty() {
            let top: Vec<String> = self
                .top_confusions
                .iter()
                .take(5)
                .map(|c| format!("{} -> {} ({})", c.label, c.predicted, c.count))
                .collect();
            let _ = writeln!(s, "most frequent confusions: {}", top.join(", "));
        }
        let groups: Vec<String> =
            self.per_group.iter().take(12).map(|g| format!("{} {:.3} ({})", g.group, g.top1, g.n)).collect();
        let more = self.per_group.len().saturating_sub(12);
        let _ = writeln!(
            s,
            "per signer top-1: {}{}",
            groups.join(", "),
            if more > 0 { format!(", ... {more} more in per_group") } else { String::new() }
        );
        s
    }

    /// Write `eval.json`, `per_class.csv`, `confusion.csv` and `predictions.csv` into `dir`
    /// (created if needed; each file written atomically), which [`check_report_dir`] must accept.
    /// Returns the paths.
    pub fn write_dir(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        check_report_dir(dir)?;
        let mut out = Vec::new();
        let mut put = |name: &str, text: String| -> Result<()> {
            let path = dir.join(name);
            data::write_atomic(&path, text.as_bytes()).map_err(InferError::Data)?;
            out.push(path);
            Ok(())
        };
        put(EVAL_REPORT_FILE, serde_json::to_string_pretty(self).expect("report serializes") + "\n")?;
        let mut pc = String::from("label,support,predicted,correct,precision,recall,f1\n");
        for c in &self.per_class {
            let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.6}"));
            let _ = writeln!(
                pc,
                "{},{},{},{},{:.6},{},{}",
                csv_field(&c.label),
                c.support,
                c.predicted,
                c.correct,
                c.precision,
                opt(c.recall),
                opt(c.f1)
            );
        }
        put(EVAL_PER_CLASS_FILE, pc)?;
        let mut cm = String::from("label");
        for l in &self.labels {
            cm.push(',');
            cm.push_str(&csv_field(l));
        }
        cm.push('\n');
        for (l, row) in self.labels.iter().zip(&self.confusion) {
            cm.push_str(&csv_field(l));
            for v in row {
                let _ = write!(cm, ",{v}");
            }
            cm.push('\n');
        }
        put(EVAL_CONFUSION_FILE, cm)?;
        let mut pr = String::from("path,group,label,predicted,confidence,label_probability,correct\n");
        for p in &self.predictions {
            let _ = writeln!(
                pr,
                "{},{},{},{},{:.6},{:.6},{}",
                csv_field(&p.path.display().to_string()),
                csv_field(&p.group),
                csv_field(&p.label),
                csv_field(&p.predicted),
                p.confidence,
                p.label_probability,
                p.correct
            );
        }
        put(EVAL_PREDICTIONS_FILE, pr)?;
        Ok(out)
    }
}

/// A CSV field, quoted when it holds a comma, quote or line break.
pub(crate) fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The dataset positions `opts.split` selects; an error when it selects none.
pub(crate) fn selected(index: &data::index::DatasetIndex, data_dir: &Path, opts: &EvalOptions) -> Result<Vec<usize>> {
    let positions = opts.split.positions(index);
    if positions.is_empty() {
        return Err(InferError::Eval(format!(
            "{}: the split {} selects no sequences ({} sequences of {} signers in the dataset)",
            data_dir.display(),
            opts.split,
            index.entries.len(),
            data::index::count_groups(&index.groups())
        )));
    }
    Ok(positions)
}

/// The model's class of each of the dataset's labels, matched by name.
pub(crate) fn to_model_labels(predictor: &Predictor, index: &data::index::DatasetIndex) -> Vec<Option<usize>> {
    let by_name: HashMap<&str, usize> = predictor.labels().iter().enumerate().map(|(i, l)| (l.as_str(), i)).collect();
    index.labels.iter().map(|l| by_name.get(l.as_str()).copied()).collect()
}

/// An error listing the dataset labels in `unknown` (indices into `index.labels`), if any.
pub(crate) fn check_known(
    predictor: &Predictor,
    data_dir: &Path,
    index: &data::index::DatasetIndex,
    unknown: impl Iterator<Item = usize>,
    what: &str,
) -> Result<()> {
    let mut unknown: Vec<&str> = unknown.map(|l| index.labels[l].as_str()).collect();
    unknown.sort_unstable();
    unknown.dedup();
    if unknown.is_empty() {
        return Ok(());
    }
    let shown: Vec<String> = unknown.iter().take(8).map(|l| format!("`{l}`")).collect();
    Err(InferError::Eval(format!(
        "{}: {} of the dataset's {what} ({}): {}{}",
        data_dir.display(),
        unknown.len(),
        predictor.model_dir().join(bundle::layout::LABELS_FILE).display(),
        shown.join(", "),
        if unknown.len() > 8 { ", ..." } else { "" }
    )))
}

/// The evaluation's progress bar on stderr (hidden unless `show`).
pub(crate) fn progress_bar(n: usize, show: bool) -> indicatif::ProgressBar {
    if !show {
        return indicatif::ProgressBar::hidden();
    }
    indicatif::ProgressBar::new(n as u64).with_style(
        indicatif::ProgressStyle::with_template("evaluating {bar:30} {pos}/{len} sequences {per_sec} eta {eta}")
            .expect("static template"),
    )
}

/// An error when nothing was evaluated or more than `max_bad_fraction` of `total` files were
/// skipped.
pub(crate) fn check_bad_files(
    skipped: &[SkippedFile],
    evaluated: usize,
    total: usize,
    max_bad_fraction: f64,
) -> Result<()> {
    if evaluated == 0 || skipped.len() as f64 > max_bad_fraction * total as f64 {
        return Err(InferError::Eval(format!(
            "{} of {total} selected files could not be evaluated (max_bad_fraction {max_bad_fraction}); first: {}",
            skipped.len(),
            skipped.first().map_or("-", |s| s.reason.as_str())
        )));
    }
    Ok(())
}

/// Evaluate `predictor` on the dataset at `data_dir` (ISLR or npy layout). Dataset labels are
/// matched to the model's by name; a selected sequence whose sign the model does not know is an
/// error that lists those signs.
pub fn evaluate(predictor: &Classifier, data_dir: &Path, opts: &EvalOptions) -> Result<EvalReport> {
    let start = Instant::now();
    let index = data::index::open(data_dir).map_err(InferError::Data)?;
    let positions = selected(&index, data_dir, opts)?;
    let model_label = to_model_labels(predictor, &index);
    let unknown = positions.iter().map(|&i| index.entries[i].label).filter(|&l| model_label[l].is_none());
    check_known(predictor, data_dir, &index, unknown, "signs are not classes of the model")?;

    let bar = progress_bar(positions.len(), opts.progress);
    let mut scores = Vec::with_capacity(positions.len());
    let mut skipped = Vec::new();
    let read = |k: usize| {
        let e = &index.entries[positions[k]];
        predictor.prepare_read(index.format, &e.path, e.sequence)
    };
    let outcome = crate::prepare_ahead(positions.len(), opts.batch, read, |chunk| {
        let n = chunk.len() as u64;
        let (windows, outcomes) = crate::take_windows(chunk);
        let mut rows = predictor.logits(&windows)?.into_iter();
        for (k, error) in outcomes {
            let e = &index.entries[positions[k]];
            match error {
                None => {
                    let label = model_label[e.label].expect("unknown labels were rejected above");
                    let logits = rows.next().expect("one logit row per prepared window");
                    scores.push(Scored { path: e.path.clone(), group: e.group.clone(), label, logits });
                }
                Some(err) => {
                    let reason = err.to_string();
                    bar.suspend(|| eprintln!("warning: skipped {reason}"));
                    skipped.push(SkippedFile { path: e.path.clone(), reason });
                }
            }
        }
        bar.inc(n);
        Ok(())
    });
    bar.finish_and_clear();
    let waited = outcome?;
    let total = positions.len();
    check_bad_files(&skipped, scores.len(), total, opts.max_bad_fraction)?;
    let mut report = EvalReport::from_scores(predictor.labels(), &scores, opts.top_k)?;
    report.model_dir = predictor.model_dir().to_path_buf();
    report.data = data_dir.to_path_buf();
    report.split = opts.split;
    report.device = predictor.device_name().to_string();
    report.precision = predictor.compute_name();
    report.engine = predictor.engine_name().to_string();
    report.skipped = skipped;
    report.seconds = start.elapsed().as_secs_f64();
    report.sequences_per_s = report.n as f64 / report.seconds.max(1e-9);
    report.data_wait_share = waited.as_secs_f64() / report.seconds.max(1e-9);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scored(label: usize, logits: &[f32], group: &str) -> Scored {
        Scored { path: format!("{group}/{label}.parquet").into(), group: group.into(), label, logits: logits.to_vec() }
    }

    #[test]
    fn figures_match_a_hand_computed_example() {
        let labels: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        // Predictions: a->a, a->b, b->b, b->b, c->a. Class c is never predicted.
        let scores = [
            scored(0, &[2.0, 0.0, 0.0], "s1"),
            scored(0, &[0.0, 1.0, 0.5], "s1"),
            scored(1, &[0.0, 3.0, 0.0], "s2"),
            scored(1, &[0.2, 0.4, 0.0], "s2"),
            scored(2, &[1.0, 0.0, 0.5], "s2"),
        ];
        let r = EvalReport::from_scores(&labels, &scores, 2).unwrap();
        assert_eq!(r.confusion, vec![vec![1, 1, 0], vec![0, 2, 0], vec![1, 0, 0]]);
        assert_eq!(r.n, 5);
        assert!((r.top1 - 0.6).abs() < 1e-12);
        // Top-2: the a->b row has a at rank 2 (0 < 0.5 < 1: rank 2, out); c's row ranks c second.
        assert!((r.top_k_accuracy - 0.8).abs() < 1e-12, "{}", r.top_k_accuracy);
        // Recalls 1/2, 1, 0 -> balanced 0.5; precisions 1/2, 2/3, 0.
        assert!((r.balanced_accuracy - 0.5).abs() < 1e-12);
        let f1 = [2.0 * 0.5 * 0.5 / 1.0, 2.0 * (2.0 / 3.0) / (2.0 / 3.0 + 1.0), 0.0];
        assert!((r.macro_f1 - f1.iter().sum::<f64>() / 3.0).abs() < 1e-12);
        assert_eq!(r.per_class[2].predicted, 0);
        assert_eq!(r.per_class[2].precision, 0.0);
        assert_eq!(r.per_class[1].precision, 2.0 / 3.0);
        // Loss: mean of lse(row) - row[label].
        let lse = |r: &[f64]| r.iter().map(|v| v.exp()).sum::<f64>().ln();
        let rows: [(&[f64], usize); 5] = [
            (&[2.0, 0.0, 0.0], 0),
            (&[0.0, 1.0, 0.5], 0),
            (&[0.0, 3.0, 0.0], 1),
            (&[0.2, 0.4, 0.0], 1),
            (&[1.0, 0.0, 0.5], 2),
        ];
        let loss = rows.iter().map(|(r, l)| lse(r) - r[*l]).sum::<f64>() / 5.0;
        assert!((r.loss - loss).abs() < 1e-6, "{} vs {loss}", r.loss);
        // ECE from the confidences, binned by hand.
        let conf: Vec<f64> =
            rows.iter().map(|(r, _)| (r.iter().copied().fold(f64::MIN, f64::max) - lse(r)).exp()).collect();
        let ok = [true, false, true, true, false];
        let mut bins: BTreeMap<usize, (f64, f64, f64)> = BTreeMap::new();
        for (c, o) in conf.iter().zip(ok) {
            let b = bins.entry(((c * 15.0) as usize).min(14)).or_default();
            b.0 += 1.0;
            b.1 += f64::from(u8::from(o));
            b.2 += c;
        }
        let ece: f64 = bins.values().map(|(m, a, c)| (a / m - c / m).abs() * m / 5.0).sum();
        assert!((r.ece - ece).abs() < 1e-9, "{} vs {ece}", r.ece);
        assert_eq!(r.per_group.len(), 2);
        assert_eq!((r.per_group[0].n, r.per_group[0].correct), (2, 1));
        assert_eq!((r.per_group[1].n, r.per_group[1].correct), (3, 2));
        assert_eq!(r.top_confusions.len(), 2);
        assert!(r.top_confusions.iter().all(|c| c.count == 1));
        assert_eq!(r.predictions[1].predicted, "b");
        assert!(!r.predictions[1].correct);
        let text = r.render();
        assert!(text.contains("top-1 0.6000  top-2 0.8000  balanced accuracy 0.5000"), "{text}");
        assert!(text.contains("weakest classes (recall): c 0/1, a 1/2"), "{text}");
    }

    #[test]
    fn bad_scores_are_errors() {
        let labels: Vec<String> = ["a", "b"].map(String::from).to_vec();
        let e = EvalReport::from_scores(&labels, &[scored(2, &[0.0, 1.0], "g")], 5).unwrap_err().to_string();
        assert!(e.contains("input 0: 2 logits for label 2; the model has 2 classes"), "{e}");
        let e = EvalReport::from_scores(&labels, &[scored(0, &[0.0, f32::NAN], "g")], 5).unwrap_err().to_string();
        assert!(e.contains("logit 1 is NaN"), "{e}");
    }

    #[test]
    fn the_training_split_comes_from_the_model_card() {
        let split = |folds, fold| TrainingSplit {
            valid_fraction: 0.25,
            split_seed: 7,
            folds,
            fold,
            valid_groups: vec!["1001".into(), "1005".into()],
        };
        assert_eq!(Split::of_training(&split(0, 0), true), Split::Valid { fraction: 0.25, seed: 7 });
        assert_eq!(Split::of_training(&split(0, 0), false), Split::Train { fraction: 0.25, seed: 7 });
        assert_eq!(Split::of_training(&split(5, 3), true), Split::FoldValid { folds: 5, fold: 3, seed: 7 });
        assert_eq!(Split::of_training(&split(5, 3), true).to_string(), "valid (fold 3 of 5, split_seed 7)");
        assert_eq!(Split::of_training(&split(5, 3), false), Split::FoldTrain { folds: 5, fold: 3, seed: 7 });
        let mut card = ModelCard::new(
            models::ModelConfig::default(),
            data::preprocess::PreprocessConfig::default(),
            10,
            vec!["a".into(), "b".into()],
            0,
        );
        let e = Split::from_card(&card, true).unwrap_err().to_string();
        assert!(e.contains("model.json) records no training split"), "{e}");
        card.split = Some(split(0, 0));
        assert_eq!(Split::from_card(&card, true).unwrap(), Split::Valid { fraction: 0.25, seed: 7 });
    }

    #[test]
    fn csv_fields_are_quoted_when_needed() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
