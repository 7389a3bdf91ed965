//! Opening a run directory: a new run needs a new or empty directory (it refuses one that holds a
//! run, or anyone's files); a resume reads
//! the run's saved config, refuses a config that would change the model, its input or the data
//! order, and finds the newest complete checkpoint.

use std::path::{Path, PathBuf};

use bundle::layout;

use crate::config::{BatchSize, ExperimentConfig};
use crate::{Result, TrainError};

/// A run directory ready for a run.
#[derive(Debug)]
pub struct OpenedRun {
    /// The directory (created).
    pub run_dir: PathBuf,
    /// The run's saved `config.toml`, when resuming.
    pub saved: Option<ExperimentConfig>,
    /// The newest complete checkpoint (step, directory), when resuming.
    pub latest: Option<(usize, PathBuf)>,
}

/// Open the run directory `run_dir` (`None`: a new one under `training.out_dir`), to continue
/// it with `resume` (a new one is created by [`create`] once the run has resolved, so a run
/// that cannot start leaves no directory behind).
pub fn open(cfg: &ExperimentConfig, run_dir: Option<&Path>, resume: bool) -> Result<OpenedRun> {
    let run_dir = match (run_dir, resume) {
        (Some(d), _) => d.to_path_buf(),
        (None, true) => return Err(TrainError::Invalid("resume needs the run directory".into())),
        (None, false) => layout::new_run_dir(Path::new(&cfg.training.out_dir), &cfg.name),
    };
    let (saved, latest) = if resume {
        let saved = read_saved_config(&run_dir)?;
        check_resume_compatible(&run_dir, &saved, cfg)?;
        (Some(saved), crate::checkpoint::list(&run_dir).pop())
    } else {
        if layout::holds_run(&run_dir) {
            return Err(TrainError::Invalid(format!(
                "{} already holds a run; continue it with --resume {0} or choose another --out",
                run_dir.display()
            )));
        }
        layout::check_new_dir(&run_dir, "a new run", "; choose another --out")?;
        (None, None)
    };
    Ok(OpenedRun { run_dir, saved, latest })
}

/// Create the run directory.
pub fn create(opened: &OpenedRun) -> Result<()> {
    std::fs::create_dir_all(&opened.run_dir).map_err(|e| TrainError::io(&opened.run_dir, e))
}

/// The resolved config a run directory was trained with.
pub fn read_saved_config(run_dir: &Path) -> Result<ExperimentConfig> {
    ExperimentConfig::from_file(&run_dir.join(layout::CONFIG_FILE)).map_err(|e| TrainError::Resume {
        path: run_dir.into(),
        message: format!("no usable {} ({e})", layout::CONFIG_FILE),
    })
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

/// Refuse to continue the run in `run_dir` (trained with `saved`) under `now` when what fixes
/// the model's shapes or the data order changed. The micro-batch may change if the effective
/// batch (`batch_size x accumulation_steps`) stays; a `batch_size = "auto"` request accepts the
/// size the run resolved (resolution keeps it).
pub fn check_resume_compatible(run_dir: &Path, saved: &ExperimentConfig, now: &ExperimentConfig) -> Result<()> {
    let to_value = |c: &ExperimentConfig| toml::Value::try_from(c).expect("configs serialize");
    let (a, b) = (to_value(saved), to_value(now));
    let mut diffs = Vec::new();
    for section in ["model", "preprocess", "data", "synthetic"] {
        if let (Some(x), Some(y)) = (a.get(section), b.get(section)) {
            diff_keys(x, y, section, &mut diffs);
        }
    }
    // The data order depends on the effective batch, not on how it is split into micro-batches
    // (a run that survived a device fault continues with a smaller micro-batch).
    let effective = |c: &ExperimentConfig| c.training.batch_size.fixed().map(|b| b * c.training.accumulation_steps);
    if now.training.batch_size != BatchSize::Auto && effective(saved) != effective(now) {
        diffs.push(format!(
            "training.batch_size x training.accumulation_steps = {:?} x {} in the run, {:?} x {} now",
            saved.training.batch_size,
            saved.training.accumulation_steps,
            now.training.batch_size,
            now.training.accumulation_steps
        ));
    }
    for key in ["seed", "drop_last"] {
        let (x, y) = (a["training"].get(key), b["training"].get(key));
        if x != y {
            diffs.push(format!("training.{key} = {:?} in the run, {:?} now", x, y));
        }
    }
    // Only the data location and how it is loaded may change.
    let movable = ["data.path", "data.cache_dir", "data.workers", "data.device_prefetch"];
    diffs.retain(|d| !movable.iter().any(|m| d.starts_with(m)));
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
