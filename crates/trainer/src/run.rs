//! A run end to end, in one direction: validate the config, open the run directory, measure
//! ([`crate::measure`]), plan ([`crate::plan`]), take the run's lock, then attempts of the epoch
//! loop ([`crate::train`]) until one ends. A step that dies of a device fault is continued from
//! the last checkpoint with a smaller micro-batch. A machine with `distributed.node_rank > 0`
//! serves its peers of node 0's group instead.

use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::config::ExperimentConfig;
use crate::fault::{self, DeviceFault};
use crate::inject::Faults;
use crate::measure::{measure, Measured};
use crate::plan::{BatchSource, ResolvedRun};
use crate::report::{Console, Summary};
use crate::train::{attempt, workload, Start};
use crate::{Result, TrainError};

/// How to run (not part of the experiment config).
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The run directory; `None` = a new one under `training.out_dir`.
    pub run_dir: Option<PathBuf>,
    /// Continue the run in `run_dir` from its last complete checkpoint.
    pub resume: bool,
    /// Deliberate failures (tests and drills; only with the `fault-injection` feature).
    #[cfg(feature = "fault-injection")]
    pub faults: Faults,
}

impl RunOptions {
    /// The run's fault plan: empty unless the `fault-injection` feature gave one.
    fn faults(&self) -> Faults {
        #[cfg(feature = "fault-injection")]
        return self.faults.clone();
        #[cfg(not(feature = "fault-injection"))]
        Faults::default()
    }
}

/// What [`run`] returns.
#[derive(Debug)]
pub struct RunOutcome {
    /// The run directory.
    pub run_dir: PathBuf,
    /// `None` when the run was interrupted (an injected interruption, see [`crate::inject`]).
    pub summary: Option<Summary>,
}

/// Train one experiment end to end (or resume one). Runs in one process that draw from one of
/// Burn's random generators take turns ([`crate::lock::turn`]): a CPU run and a GPU run go side
/// by side.
///
/// A step that dies of a device fault (out of memory, device lost: panics in Burn 0.21) is
/// continued from the run's last checkpoint with half the micro-batch and twice the
/// accumulation, up to `recovery.max_device_faults` times; other panics are bugs and propagate.
pub fn run(cfg: ExperimentConfig, opts: RunOptions) -> Result<RunOutcome> {
    let _turn = crate::lock::turn(crate::lock::Streams::of_run(&cfg));
    let wall = Instant::now();
    cfg.validate().map_err(|(key, message)| crate::ConfigError {
        origin: crate::config::Origin { source: "config".into(), line: None },
        key,
        message,
    })?;
    let console = Console::new(cfg.training.progress);
    let faults = opts.faults();
    if cfg.distributed.node_rank > 0 {
        return serve_node(&cfg, &faults, &console);
    }
    let mut opened = crate::resume::open(&cfg, opts.run_dir.as_deref(), opts.resume)?;
    let Measured { compute, input, search } = measure(&cfg, opened.saved.as_ref(), &faults, &console)?;
    let mut run = crate::plan::plan(cfg, opened.saved.as_ref(), compute, input, search)?;
    for w in &run.warnings {
        eprintln!("warning: {w}");
    }
    if let BatchSource::Reduced = run.batch_source {
        console.line(format!(
            "batch: micro-batch {} x {} accumulation, kept from the run (it was reduced after a device fault)",
            run.batch_size, run.accumulation_steps
        ));
    }
    crate::resume::create(&opened)?;
    let _lock = crate::lock::RunLock::take(&opened.run_dir)?;
    if opts.resume {
        // Under the lock: what an interrupted write left is nobody's work in progress.
        bundle::atomic::clean_staging(&opened.run_dir);
        bundle::atomic::clean_staging(&bundle::layout::checkpoints_dir(&opened.run_dir));
    }
    crate::export::write_run_files(&opened.run_dir, &run)?;
    let start = Start { resume: opts.resume, faults, wall };
    let mut survived: Vec<DeviceFault> = Vec::new();
    loop {
        let run_dir = opened.run_dir.clone();
        let at = Cell::new((0, 0));
        let one = AssertUnwindSafe(|| attempt(&run, opened, &start, &console, &survived, &at));
        let payload = match std::panic::catch_unwind(one) {
            Ok(result) => return result.map(|(run_dir, summary)| RunOutcome { run_dir, summary }),
            Err(payload) => payload,
        };
        let Some((kind, message)) = fault::device_fault(&*payload) else { std::panic::resume_unwind(payload) };
        let (step, epoch) = at.get();
        let (b, k) = (run.batch_size, run.accumulation_steps);
        let (smaller, accumulation) = continue_with(&run, survived.len(), &run_dir).map_err(|advice| {
            TrainError::DeviceFault { run_dir: run_dir.clone(), step, kind, message: message.clone(), advice }
        })?;
        device::empty_cache(run.compute.device());
        run = run.with_micro_batch(smaller, accumulation);
        crate::export::write_run_files(&run_dir, &run)?;
        opened = crate::resume::open(&run.config, Some(&run_dir), true)?;
        survived.push(DeviceFault {
            step,
            epoch: epoch + 1,
            kind,
            message,
            micro_batch: [b, run.batch_size],
            accumulation_steps: [k, run.accumulation_steps],
            resumed_from_step: opened.latest.as_ref().map_or(0, |(s, _)| *s),
        });
        eprintln!("warning: {}", survived.last().map(DeviceFault::describe).unwrap_or_default());
    }
}

/// The micro-batch and accumulation a run continues with after a device fault (at most half the
/// micro-batch, the same effective batch), or why it cannot continue: what to do instead.
fn continue_with(run: &ResolvedRun, survived: usize, run_dir: &Path) -> std::result::Result<(usize, usize), String> {
    let (b, k) = (run.batch_size, run.accumulation_steps);
    let limit = run.config.recovery.max_device_faults;
    if run.config.distributed.nodes > 1 {
        return Err(format!(
            "The group spans {} machines, whose peers cannot change the micro-batch together: lower training.batch_size and continue with --resume {}",
            run.config.distributed.nodes,
            run_dir.display()
        ));
    }
    let Some(smaller) = crate::resolve::smaller_micro_batch(b, k) else {
        return Err(format!(
            "It failed at micro-batch 1, so a smaller batch cannot help: use a device with more memory, a smaller model or shorter sequences (preprocess.max_frames); the checkpoints in {} are intact",
            run_dir.display()
        ));
    };
    if survived >= limit {
        return Err(format!(
            "recovery.max_device_faults = {limit} reached (micro-batch now {b}); the checkpoints are intact: lower training.batch_size and continue with --resume {}",
            run_dir.display()
        ));
    }
    Ok(smaller)
}

/// A process with `distributed.node_rank > 0`: its peers compute their shares of the steps that
/// node 0 leads, until node 0 ends the run. Nothing is written here.
fn serve_node(cfg: &ExperimentConfig, faults: &Faults, console: &Console) -> Result<RunOutcome> {
    let input = crate::resolve::ResolvedData::resolve(cfg, console.bars())?;
    let devices = crate::dist::local_devices(cfg)?;
    let devices =
        if devices.is_empty() { vec![device::resolve(&cfg.device.device, &cfg.device.policy())?] } else { devices };
    let names: Vec<&str> = devices.iter().map(|d| d.selection.name.as_str()).collect();
    console.line(format!(
        "node {} of {}: {} peer(s) on {}; waiting for node 0 at {}",
        cfg.distributed.node_rank,
        cfg.distributed.nodes,
        devices.len(),
        names.join(", "),
        cfg.distributed.orchestrator
    ));
    crate::dist::serve_node(cfg, workload(cfg, &input, faults), &devices)?;
    console.line(format!("node {}: node 0 ended the run", cfg.distributed.node_rank));
    Ok(RunOutcome { run_dir: PathBuf::from(&cfg.training.out_dir), summary: None })
}
