//! Signer-independent K-fold cross-validation (`trainer cv --folds K`): K runs of one experiment,
//! run `k` holding out fold `k` of the signers (`data.folds = K`, `data.fold = k`; every signer
//! is held out exactly once), then the mean and spread of their validation figures.
//!
//! ```text
//! <dir>/fold-0/ ... fold-<K-1>/     complete run directories (each with model/, summary.json)
//! <dir>/cv.json                     per-fold figures, mean and sample standard deviation
//! ```
//! Running the same command on the same `--out` again continues: finished folds (with a
//! `summary.json`) are read back, an interrupted fold resumes from its last checkpoint (its
//! config must be unchanged, as for `trainer --resume`), missing folds are trained.

use std::path::{Path, PathBuf};

use serde::Serialize;

use bundle::layout;

use crate::config::{DataConfig, ExperimentConfig};
use crate::{Result, RunOptions, TrainError};

/// The validation figures of one fold's exported (best) weights.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FoldResult {
    /// Fold index (0-based).
    pub fold: usize,
    /// The fold's run directory.
    pub run_dir: PathBuf,
    /// Signers held out.
    pub valid_groups: usize,
    /// Sequences held out.
    pub valid_samples: usize,
    /// Training sequences.
    pub train_samples: usize,
    /// Validation top-1 of the exported weights.
    pub valid_top1: Option<f64>,
    /// Validation loss of the exported weights.
    pub valid_loss: Option<f64>,
    /// CTC: validation token error rate of the exported weights (configured decoder).
    pub valid_cer: Option<f64>,
    /// Read back from an earlier invocation instead of trained now.
    pub reused: bool,
}

/// Mean and sample standard deviation (n - 1) over the folds that have a value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    /// Mean.
    pub mean: f64,
    /// Sample standard deviation (0 for one value).
    pub std: f64,
    /// Values.
    pub n: usize,
}

impl Spread {
    /// The spread of `values`; `None` when there are none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Spread> {
        let v: Vec<f64> = values.into_iter().collect();
        if v.is_empty() {
            return None;
        }
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        let std = if n > 1 { (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt() } else { 0.0 };
        Some(Spread { mean, std, n })
    }
}

/// `cv.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CvSummary {
    /// The experiment's name.
    pub name: String,
    /// The cross-validation directory.
    pub dir: PathBuf,
    /// K.
    pub folds: usize,
    /// `data.split_seed`.
    pub split_seed: u64,
    /// Each fold's figures.
    pub per_fold: Vec<FoldResult>,
    /// Validation top-1 over the folds.
    pub valid_top1: Option<Spread>,
    /// Validation loss over the folds.
    pub valid_loss: Option<Spread>,
    /// CTC: validation token error rate over the folds.
    pub valid_cer: Option<Spread>,
}

impl CvSummary {
    /// The table printed by `trainer cv`.
    pub fn render(&self) -> String {
        let mut s = format!("{}-fold cross-validation by signer ({}):\n", self.folds, self.dir.display());
        let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.4}"));
        for f in &self.per_fold {
            s += &format!(
                "  fold {}: {} held-out signers, {} sequences (train {}): top-1 {}  loss {}{}{}\n",
                f.fold,
                f.valid_groups,
                f.valid_samples,
                f.train_samples,
                opt(f.valid_top1),
                opt(f.valid_loss),
                f.valid_cer.map_or(String::new(), |c| format!("  CER {c:.4}")),
                if f.reused { "  (done earlier)" } else { "" }
            );
        }
        if let Some(t) = self.valid_top1 {
            s += &format!("validation top-1 {:.4} +- {:.4} (mean +- sample std over {} folds)\n", t.mean, t.std, t.n);
        }
        if let Some(l) = self.valid_loss {
            s += &format!("validation loss  {:.4} +- {:.4}\n", l.mean, l.std);
        }
        if let Some(c) = self.valid_cer {
            s += &format!("validation CER   {:.4} +- {:.4}\n", c.mean, c.std);
        }
        s
    }
}

fn read_json(path: &Path) -> Result<serde_json::Value> {
    let text = std::fs::read_to_string(path).map_err(|e| TrainError::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| TrainError::io(path, format!("not valid JSON: {e}")))
}

/// Run (or continue) `folds`-fold cross-validation of `cfg` in `dir` (default:
/// `<training.out_dir>/<name>-cv-<UTC time>`). Writes `<dir>/cv.json`.
pub fn run_cv(cfg: &ExperimentConfig, folds: usize, dir: Option<PathBuf>) -> Result<CvSummary> {
    if !(2..=1000).contains(&folds) {
        return Err(TrainError::Invalid(format!("--folds {folds}: cross-validation needs 2..=1000 folds")));
    }
    let dir = dir.unwrap_or_else(|| layout::new_run_dir(Path::new(&cfg.training.out_dir), &format!("{}-cv", cfg.name)));
    // Continuing is allowed on what cross-validation writes (fold-N runs, cv.json); any other
    // file there is someone else's, and the directory is refused.
    let foreign: Vec<String> = layout::entries(&dir)?
        .into_iter()
        .filter(|n| n != layout::CV_FILE && n.strip_prefix("fold-").is_none_or(|k| k.parse::<usize>().is_err()))
        .collect();
    if !foreign.is_empty() {
        return Err(TrainError::Invalid(format!(
            "{}: holds files cross-validation did not write ({}); choose a new or empty --out",
            dir.display(),
            foreign.join(", ")
        )));
    }
    std::fs::create_dir_all(&dir).map_err(|e| TrainError::io(&dir, e))?;
    let mut per_fold = Vec::with_capacity(folds);
    for fold in 0..folds {
        let fold_cfg = ExperimentConfig { data: DataConfig { folds, fold, ..cfg.data.clone() }, ..cfg.clone() };
        let run_dir = dir.join(format!("fold-{fold}"));
        let summary_path = run_dir.join(layout::SUMMARY_FILE);
        let reused = summary_path.is_file();
        let resume = run_dir.join(layout::CONFIG_FILE).is_file();
        if resume {
            // A finished or interrupted fold counts only if it is this experiment's fold (same K,
            // fold, model, data and seed): exactly what a resume would accept. A `"auto"` batch
            // size keeps the fold's first resolution.
            let saved = crate::resume::read_saved_config(&run_dir)?;
            crate::resume::check_resume_compatible(&run_dir, &saved, &fold_cfg)?;
        }
        if !reused {
            if cfg.training.progress != crate::config::ProgressMode::Off {
                println!("== fold {fold} of {folds}{}", if resume { " (resuming)" } else { "" });
            }
            crate::run(fold_cfg, RunOptions { run_dir: Some(run_dir.clone()), resume, ..Default::default() })?;
        }
        let summary = read_json(&summary_path)?;
        let card = bundle::card::read_card(&run_dir.join(layout::MODEL_DIR))?;
        let count = |key: &str| summary.get(key).and_then(serde_json::Value::as_u64).unwrap_or(0) as usize;
        per_fold.push(FoldResult {
            fold,
            valid_groups: count("valid_groups"),
            valid_samples: count("valid_samples"),
            train_samples: count("train_samples"),
            valid_top1: card.valid_top1,
            valid_loss: card.valid_loss,
            valid_cer: card.ctc.as_ref().and_then(|c| c.valid).map(|v| v.cer),
            run_dir,
            reused,
        });
    }
    let summary = CvSummary {
        name: cfg.name.clone(),
        dir: dir.clone(),
        folds,
        split_seed: cfg.data.split_seed,
        valid_top1: Spread::of(per_fold.iter().filter_map(|f| f.valid_top1)),
        valid_loss: Spread::of(per_fold.iter().filter_map(|f| f.valid_loss)),
        valid_cer: Spread::of(per_fold.iter().filter_map(|f| f.valid_cer)),
        per_fold,
    };
    bundle::atomic::write_json(&dir.join(layout::CV_FILE), &summary)?;
    Ok(summary)
}
