//! The names of everything in a run directory and in a model bundle.
//!
//! ```text
//! <run>/config.toml          the resolved experiment config (every key, after all layers and "auto")
//! <run>/labels.json          class names, index = model output
//! <run>/batch-size.json      the batch-size search, when training.batch_size = "auto"
//! <run>/metrics.csv          one row per logged step (kind=step), epoch (kind=epoch), memory reading
//! <run>/events.jsonl         notable events (skipped steps, rollbacks, resumes), one JSON object a line
//! <run>/summary.json         final figures (written at the end, atomically)
//! <run>/curves.svg           loss and accuracy curves
//! <run>/gpu.csv              GPU monitor samples (CUDA runs)
//! <run>/checkpoints/step-NNNNNNNN/{model.mpk, optim.mpk, state.json}   the last `keep_last`
//! <run>/checkpoints/best/{model.mpk, state.json}                      the best epoch so far
//! <run>/model/{model.mpk, model.json, config.toml, labels.json}       the exported bundle
//! <run>/run.lock             held (flock) by the trainer writing the run; names its pid
//! <dir>/manifest.json        in every staged directory: each file's size and CRC-32
//!
//! <cv>/fold-K/               one run directory per fold of `trainer cv`
//! <cv>/cv.json               per-fold figures, mean and spread
//! ```
//! A directory named `step-*` is always complete: checkpoints are staged under `.tmp-*` names
//! and renamed whole (see [`crate::atomic`]).

use std::path::{Path, PathBuf};

use crate::{BundleError, Result};

/// The resolved experiment config, in a run directory and in a bundle.
pub const CONFIG_FILE: &str = "config.toml";
/// Class names (JSON list), in a run directory and in a bundle.
pub const LABELS_FILE: &str = "labels.json";
/// The batch-size search report of `batch_size = "auto"`.
pub const BATCH_SIZE_FILE: &str = "batch-size.json";
/// Logged steps and epochs (CSV).
pub const METRICS_FILE: &str = "metrics.csv";
/// Notable events, one JSON object per line.
pub const EVENTS_FILE: &str = "events.jsonl";
/// Final figures of a run.
pub const SUMMARY_FILE: &str = "summary.json";
/// Loss and accuracy curves (SVG).
pub const CURVES_FILE: &str = "curves.svg";
/// GPU monitor samples.
pub const GPU_FILE: &str = "gpu.csv";
/// The directory of checkpoints.
pub const CHECKPOINTS_DIR: &str = "checkpoints";
/// The best-epoch checkpoint under [`CHECKPOINTS_DIR`].
pub const BEST_DIR: &str = "best";
/// Prefix of step checkpoints under [`CHECKPOINTS_DIR`] (`step-00000120`).
pub const STEP_DIR_PREFIX: &str = "step-";
/// The loop state in a checkpoint.
pub const STATE_FILE: &str = "state.json";
/// The exported model bundle of a run.
pub const MODEL_DIR: &str = "model";
/// The model card in a bundle.
pub const CARD_FILE: &str = "model.json";
/// Weights, in a bundle and in a checkpoint (Burn NamedMpk, full precision).
pub const WEIGHTS_FILE: &str = "model.mpk";

/// Sizes and CRC-32s of the files of a staged directory (checkpoint, bundle).
pub const MANIFEST_FILE: &str = "manifest.json";
/// The lock a trainer holds on the run directory it writes.
pub const LOCK_FILE: &str = "run.lock";
/// The optimizer state in a checkpoint (same record format as [`WEIGHTS_FILE`]).
pub const OPTIM_FILE: &str = "optim.mpk";

/// The summary of a cross-validation directory (`<dir>/fold-k/` are its runs).
pub const CV_FILE: &str = "cv.json";

/// An evaluation's report itself, in every `infer eval --out DIR`.
pub const EVAL_REPORT_FILE: &str = "eval.json";
/// An evaluation's per-class precision, recall and F1 (classification).
pub const EVAL_PER_CLASS_FILE: &str = "per_class.csv";
/// An evaluation's confusion matrix (classification).
pub const EVAL_CONFUSION_FILE: &str = "confusion.csv";
/// An evaluation's predictions, one row per evaluated sequence.
pub const EVAL_PREDICTIONS_FILE: &str = "predictions.csv";
/// The files an evaluation writes (a CTC model's report: the first and the last).
pub const EVAL_FILES: [&str; 4] = [EVAL_REPORT_FILE, EVAL_PER_CLASS_FILE, EVAL_CONFUSION_FILE, EVAL_PREDICTIONS_FILE];

/// `<run>/checkpoints`.
pub fn checkpoints_dir(run_dir: &Path) -> PathBuf {
    run_dir.join(CHECKPOINTS_DIR)
}

/// `<run>/checkpoints/step-NNNNNNNN`.
pub fn step_dir(run_dir: &Path, step: usize) -> PathBuf {
    checkpoints_dir(run_dir).join(format!("{STEP_DIR_PREFIX}{step:08}"))
}

/// `<run>/checkpoints/best`.
pub fn best_dir(run_dir: &Path) -> PathBuf {
    checkpoints_dir(run_dir).join(BEST_DIR)
}

/// The step of a `step-NNNNNNNN` directory name.
pub fn parse_step_dir(name: &str) -> Option<usize> {
    name.strip_prefix(STEP_DIR_PREFIX)?.parse().ok()
}

/// Whether `dir` already holds (part of) a training run.
pub fn holds_run(dir: &Path) -> bool {
    checkpoints_dir(dir).exists() || dir.join(METRICS_FILE).exists()
}

/// The names in directory `dir`, sorted; none when it does not exist. A file at `dir` is an error.
pub fn entries(dir: &Path) -> Result<Vec<String>> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(BundleError::io(dir, e)),
        Ok(m) if !m.is_dir() => {
            return Err(BundleError::Invalid { path: dir.into(), message: "exists and is not a directory".into() })
        }
        Ok(_) => {}
    }
    let mut names = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| BundleError::io(dir, e))? {
        names.push(e.map_err(|e| BundleError::io(dir, e))?.file_name().to_string_lossy().to_string());
    }
    names.sort();
    Ok(names)
}

/// The first five of `names`, comma-separated, with `, ...` when there are more (for messages).
pub fn first_names<S: AsRef<str>>(names: &[S]) -> String {
    let shown: Vec<&str> = names.iter().take(5).map(AsRef::as_ref).collect();
    format!("{}{}", shown.join(", "), if names.len() > 5 { ", ..." } else { "" })
}

/// Refuse `dir` for new output (a run, a bundle) unless it does not exist or is empty: SignFlow
/// never writes into, overwrites or removes a directory of someone else's files. `what` says
/// what the directory was to become ("a new run"), `hint` what to do about a directory of ours.
pub fn check_new_dir(dir: &Path, what: &str, hint: &str) -> Result<()> {
    let names = entries(dir)?;
    if names.is_empty() {
        return Ok(());
    }
    Err(BundleError::Invalid {
        path: dir.into(),
        message: format!(
            "is not empty ({}): {what} needs a new or empty directory, and SignFlow leaves the files there as they are{hint}",
            first_names(&names)
        ),
    })
}

/// The bundle a user means by `path`: a bundle directory itself, or a run directory with an
/// exported `model/`. The error says what `path` is instead (missing, an unfinished run, other).
pub fn find_model_dir(path: &Path) -> Result<PathBuf> {
    if path.join(CARD_FILE).is_file() {
        return Ok(path.to_path_buf());
    }
    if path.join(MODEL_DIR).join(CARD_FILE).is_file() {
        return Ok(path.join(MODEL_DIR));
    }
    let message = if !path.exists() {
        "does not exist".to_string()
    } else if checkpoints_dir(path).is_dir() {
        format!(
            "is a run directory without an exported {MODEL_DIR}/ (the run did not finish; resume it with `trainer --resume`)"
        )
    } else {
        format!("is not a SignFlow model: expected {CARD_FILE} or {MODEL_DIR}/{CARD_FILE} in it")
    };
    Err(BundleError::Invalid { path: path.into(), message })
}

/// A new run directory `<out_dir>/<name>-<UTC yyyymmdd-hhmmss>`, made unique with a suffix.
pub fn new_run_dir(out_dir: &Path, name: &str) -> PathBuf {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    let stamp = format!("{y:04}{m:02}{d:02}-{:02}{:02}{:02}", rem / 3600, rem % 3600 / 60, rem % 60);
    let base = out_dir.join(format!("{name}-{stamp}"));
    let mut dir = base.clone();
    let mut k = 1;
    while dir.exists() {
        k += 1;
        dir = PathBuf::from(format!("{}-{k}", base.display()));
    }
    dir
}

/// Days since 1970-01-01 -> (year, month, day) (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_414), (2025, 11, 22));
    }

    #[test]
    fn step_directories_round_trip_and_model_dirs_resolve() {
        let run = Path::new("/r");
        assert_eq!(step_dir(run, 120), Path::new("/r/checkpoints/step-00000120"));
        assert_eq!(parse_step_dir("step-00000120"), Some(120));
        assert_eq!(parse_step_dir("best"), None);
        let tmp = tempfile::tempdir().unwrap();
        let e = find_model_dir(&tmp.path().join("nope")).unwrap_err().to_string();
        assert!(e.ends_with("does not exist"), "{e}");
        std::fs::create_dir_all(checkpoints_dir(tmp.path())).unwrap();
        let e = find_model_dir(tmp.path()).unwrap_err().to_string();
        assert!(e.contains("run directory without an exported model/"), "{e}");
        std::fs::create_dir_all(tmp.path().join(MODEL_DIR)).unwrap();
        std::fs::write(tmp.path().join(MODEL_DIR).join(CARD_FILE), "{}").unwrap();
        assert_eq!(find_model_dir(tmp.path()).unwrap(), tmp.path().join(MODEL_DIR));
        assert_eq!(find_model_dir(&tmp.path().join(MODEL_DIR)).unwrap(), tmp.path().join(MODEL_DIR));
    }
}
