//! The run directory and the exported model that `infer` loads.
//!
//! ```text
//! <run>/config.toml          resolved experiment config (every key, after all layers)
//! <run>/labels.json          class names, index = model output
//! <run>/metrics.csv          one row per logged step (kind=step) and per epoch (kind=epoch)
//! <run>/events.jsonl         notable events (skipped steps, resumes), one JSON object per line
//! <run>/summary.json         final figures (written at the end, atomically)
//! <run>/curves.svg           loss and accuracy curves
//! <run>/checkpoints/step-NNNNNNNN/{model.mpk, optim.mpk, state.json}   last `keep_last`
//! <run>/checkpoints/best/{model.mpk, state.json}                      best epoch so far
//! <run>/model/{model.mpk, model.json, config.toml, labels.json}       the exported model
//!                                                 (format: `models::bundle`)
//! ```
//! Every file is written to a temporary name and renamed; checkpoint directories are built under
//! `.tmp-*` names and renamed whole, so a directory named `step-*` is always complete.

use std::path::{Path, PathBuf};

use models::bundle::ModelCard;
use models::SignModel;
use serde::Serialize;

use crate::{Result, TrainError};

pub const CONFIG_FILE: &str = "config.toml";
pub const LABELS_FILE: &str = "labels.json";
pub const METRICS_FILE: &str = "metrics.csv";
pub const EVENTS_FILE: &str = "events.jsonl";
pub const SUMMARY_FILE: &str = "summary.json";
pub const CURVES_FILE: &str = "curves.svg";
pub const CHECKPOINTS_DIR: &str = "checkpoints";
pub const MODEL_DIR: &str = "model";
/// Write bytes atomically (temp file in the same directory + rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    data::write_atomic(path, bytes).map_err(TrainError::from)
}

pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| TrainError::io(path, e))?;
    write_atomic(path, text.as_bytes())
}

/// A directory built under a temporary name and renamed into place when complete.
#[derive(Debug)]
pub struct StagedDir {
    pub tmp: PathBuf,
    pub target: PathBuf,
}

impl StagedDir {
    pub fn new(target: &Path) -> Result<Self> {
        let parent = target.parent().unwrap_or(Path::new("."));
        let name = target.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        let tmp = parent.join(format!(".tmp-{name}-{}", std::process::id()));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(|e| TrainError::io(&tmp, e))?;
        }
        std::fs::create_dir_all(&tmp).map_err(|e| TrainError::io(&tmp, e))?;
        Ok(Self { tmp, target: target.to_path_buf() })
    }

    /// Replace `target` with the staged directory. An existing target is moved aside first and
    /// removed after the rename, so a crash leaves either the old or the new directory.
    pub fn commit(self) -> Result<PathBuf> {
        sync_dir(&self.tmp);
        let old = self.target.with_file_name(format!(
            ".old-{}-{}",
            self.target.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default(),
            std::process::id()
        ));
        let had_old = self.target.exists();
        if had_old {
            std::fs::rename(&self.target, &old).map_err(|e| TrainError::io(&self.target, e))?;
        }
        std::fs::rename(&self.tmp, &self.target).map_err(|e| TrainError::io(&self.target, e))?;
        if had_old {
            let _ = std::fs::remove_dir_all(&old);
        }
        if let Some(parent) = self.target.parent() {
            sync_dir(parent);
        }
        Ok(self.target)
    }
}

fn sync_dir(dir: &Path) {
    if let Ok(f) = std::fs::File::open(dir) {
        let _ = f.sync_all();
    }
}

/// Export `model` with its card and config into `<run>/model/`.
pub fn export_model<B: models::kernels::Kernels>(
    run_dir: &Path,
    model: &SignModel<B>,
    card: &ModelCard,
    config_toml: &str,
) -> Result<PathBuf> {
    let staged = StagedDir::new(&run_dir.join(MODEL_DIR))?;
    models::bundle::write_bundle(&staged.tmp, model, card, config_toml)?;
    staged.commit()
}

/// Remove leftovers of interrupted writes (`.tmp-*`, `.old-*`) in `dir`.
pub fn clean_staging(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name.starts_with(".tmp-") || name.starts_with(".old-") {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// `runs/<name>-<UTC yyyymmdd-hhmmss>`, made unique with a suffix if needed.
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
    #[test]
    fn civil_dates() {
        assert_eq!(super::civil_from_days(0), (1970, 1, 1));
        assert_eq!(super::civil_from_days(20_414), (2025, 11, 22));
    }
}
