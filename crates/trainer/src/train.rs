//! The training loop: it sequences epochs of optimizer steps ([`crate::step::queue_step`]),
//! validation, best-epoch tracking, checkpoints and reports. The step itself, recovery from
//! non-finite steps, reporting and export live in their own modules.
//!
//! On a GPU-class device (one process) the steps' outcomes stay on the device and are settled in
//! one read where something needs them: a log line, a checkpoint, the end of an epoch or of the
//! run. The loss-scale and recovery policies and the tallies then run step by step in order, as
//! they would after each step; with f16 the loss scale itself follows each step on the device
//! ([`crate::amp::DeviceScale`]).
//!
//! Dropout is re-seeded from (seed, step) where a run can resume (the first step of a process,
//! the first after a checkpoint or a rollback) and the data order and augmentation from (seed,
//! epoch, position), so a resumed run continues bit for bit on the CPU.

use std::cell::Cell;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use burn::module::{AutodiffModule, Module};
use burn::prelude::Backend;
use data::augment::{AugmentConfig, Augmenter};
use data::loader::{epoch_batches, DevicePrefetcher, EpochLoader, ItemBatcher, LoaderConfig, SignBatch};
use models::precision::Materialize;
use models::SignModel;

use crate::amp::{DeviceScale, LossScaler, ScaleChange};
use crate::checkpoint::{self, BestRecord, EpochRecord, ModelSignature, TrainState};
use crate::config::{ExperimentConfig, Metric};
use crate::fault::DeviceFault;
use crate::inject::Faults;
use crate::metrics::{MetricsWriter, Row};
use crate::objective::Objective;
use crate::optim::Optim;
use crate::plan::ResolvedRun;
use crate::profile::Profiler;
use crate::recovery::Recovery;
use crate::report::{fmt_duration, Console, Progress, Reporter, Summary};
use crate::resume::OpenedRun;
use crate::schedule::LrSchedule;
use crate::step::{queue_step, LossScale, PendingOutcome, StepOutcome, StepSettings};
use crate::validate::evaluate;
use crate::{Result, TrainBackend, TrainError};

type Device = device::DispatchDevice;

/// How a run starts an attempt of the loop.
#[derive(Debug, Clone)]
pub(crate) struct Start {
    /// Continue from the run directory's last checkpoint (else start, unless one exists).
    pub resume: bool,
    /// Deliberate failures.
    pub faults: Faults,
    /// The process's wall clock at the run's start (for the closing lines).
    pub wall: Instant,
}

/// One attempt at the run: start (or continue from the last checkpoint), train, finish. `at`
/// follows the (step, epoch) in progress, for the report when a step dies of a panic. Returns
/// the run directory and the summary (`None` after an injected interruption).
pub(crate) fn attempt(
    run: &ResolvedRun,
    opened: OpenedRun,
    start: &Start,
    console: &Console,
    survived: &[DeviceFault],
    at: &Cell<(usize, usize)>,
) -> Result<(PathBuf, Option<Summary>)> {
    let mut trainer = Trainer::start(run, opened, start, console, survived, at)?;
    if trainer.train()? == Ended::Interrupted {
        return Ok((trainer.run_dir, None));
    }
    let summary = trainer.finish()?;
    console.block(summary.render(&trainer.state.history, start.wall.elapsed().as_secs_f64()));
    Ok((trainer.run_dir, Some(summary)))
}

/// Running sums of loss, correct predictions and samples since `start`.
#[derive(Debug, Clone, Copy)]
struct Tally {
    start: Instant,
    /// Samples counted before `start` (an epoch continued after a resume): not in the throughput.
    carried: u64,
    loss: f64,
    /// Applied steps (the loss sum's count).
    steps: usize,
    correct: u64,
    samples: u64,
    /// Peak device memory of the sampled steps.
    memory: Option<device::MemoryStats>,
}

impl Tally {
    fn new() -> Self {
        Self { start: Instant::now(), carried: 0, loss: 0.0, steps: 0, correct: 0, samples: 0, memory: None }
    }

    /// The tally of an epoch or window continued from a checkpoint's sums.
    fn resumed(s: checkpoint::RunningSums) -> Self {
        Self {
            loss: f64::from_bits(s.loss_sum_bits),
            steps: s.steps,
            correct: s.correct,
            samples: s.samples,
            carried: s.samples,
            ..Self::new()
        }
    }

    /// The sums a checkpoint keeps.
    fn sums(&self) -> checkpoint::RunningSums {
        checkpoint::RunningSums {
            loss_sum_bits: self.loss.to_bits(),
            steps: self.steps,
            correct: self.correct,
            samples: self.samples,
        }
    }

    fn add(&mut self, o: &StepOutcome) {
        self.memory = crate::step::peak(self.memory, o.memory);
        if o.applied {
            self.loss += o.loss;
            self.steps += 1;
        }
        self.correct += o.correct;
        self.samples += o.samples;
    }

    fn mean_loss(&self) -> f64 {
        self.loss / self.steps.max(1) as f64
    }

    fn top1(&self) -> f64 {
        self.correct as f64 / self.samples.max(1) as f64
    }

    fn samples_per_s(&self) -> f64 {
        (self.samples - self.carried) as f64 / self.start.elapsed().as_secs_f64().max(1e-9)
    }
}

/// Where the step's batches come from: host batches uploaded when asked, or device-side
/// prefetch (GPU backends, `data.device_prefetch`).
enum Feed {
    Host(EpochLoader),
    Device(DevicePrefetcher<TrainBackend>),
    /// A data-parallel group: the batches' dataset indices; each peer prepares its own rows.
    Indices(std::vec::IntoIter<Vec<usize>>),
}

impl Feed {
    /// The next batch's dataset indices (a data-parallel group splits them among its peers).
    fn next_indices(&mut self) -> Option<Vec<usize>> {
        match self {
            Self::Indices(batches) => batches.next(),
            Self::Host(loader) => loader.next().map(|hb| hb.indices),
            Self::Device(_) => None,
        }
    }

    fn next(&mut self, device: &Device) -> Option<SignBatch<TrainBackend>> {
        match self {
            Self::Host(loader) => loader.next().map(|hb| hb.to_device::<TrainBackend>(device)),
            Self::Device(prefetch) => prefetch.next(),
            Self::Indices(_) => None,
        }
    }
}

/// How the epoch loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// All epochs or `max_steps` done, or early stopping.
    Finished,
    /// An injected interruption.
    Interrupted,
}

/// The loop's state between steps.
struct Trainer<'a> {
    run: &'a ResolvedRun,
    run_dir: PathBuf,
    faults: Faults,
    model: SignModel<TrainBackend>,
    optim: Optim,
    state: TrainState,
    resumed_from: Option<usize>,
    schedule: LrSchedule,
    objective: Objective,
    loader_cfg: LoaderConfig,
    batcher: ItemBatcher,
    /// Micro-batches the epoch's steps consume.
    micro_batches_per_epoch: usize,
    total_steps: usize,
    report: Reporter,
    recovery: Recovery,
    prof: Profiler,
    monitor: Option<device::GpuMonitor>,
    loop_start: Instant,
    data_wait: Duration,
    window: Tally,
    epoch: Tally,
    last_grad_norm: f64,
    /// Mean loss, top-1 and samples/s of the window as last read, shown while the current
    /// window's steps are still unsettled on the device.
    shown: (f64, f64, f64),
    stopped_early: bool,
    /// Device faults survived in this process (the injected ones fire once).
    survived: &'a [DeviceFault],
    /// The (step, epoch) in progress, read when a step dies of a panic.
    at: &'a Cell<(usize, usize)>,
    /// The data-parallel group this process leads (`[distributed]`), if any.
    group: Option<crate::dist::Group>,
    /// Re-seed dropout from (seed, step) at the next step: the first step of the process and
    /// the first after a checkpoint (the points a run resumes from) or a rollback. Only then:
    /// under Burn's fusion a re-seed makes the host wait for the device.
    reseed: bool,
    /// Steps whose outcome is still on the device, oldest first.
    unsettled: Vec<Unsettled>,
    /// Leave step outcomes on the device until a log line, checkpoint, epoch end or the end of
    /// the run needs them (a GPU-class device, one process): the host then never waits for the
    /// device in between.
    defer: bool,
    /// With `defer` and f16 loss scaling: the scale on the device, which follows every step.
    device_scale: Option<DeviceScale>,
}

/// A step queued on the device whose outcome the loop has not read yet.
struct Unsettled {
    pending: PendingOutcome,
    step: usize,
    epoch: usize,
}

impl<'a> Trainer<'a> {
    /// Build the model and optimizer (restored from the last checkpoint when resuming) and open
    /// the run's outputs.
    fn start(
        run: &'a ResolvedRun,
        opened: OpenedRun,
        start: &Start,
        console: &Console,
        survived: &'a [DeviceFault],
        at: &'a Cell<(usize, usize)>,
    ) -> Result<Self> {
        let cfg = &run.config;
        let t = &cfg.training;
        let device = run.compute.device();
        let ds = &run.input.data.dataset;
        let EpochPlan { loader_cfg, batches_per_epoch, steps_per_epoch, total_steps } = EpochPlan::of(run)?;
        let batcher = batcher_for(cfg, &run.input);

        // Seeded init, materialized before any clone (see models::precision).
        TrainBackend::seed(device, t.seed);
        let model: SignModel<TrainBackend> =
            cfg.model.init::<TrainBackend>(ds.features, ds.num_classes(), device).map(&mut Materialize);
        let optim = Optim::new(&cfg.optimizer);
        let signature = ModelSignature::of(cfg, &model);
        let (model, optim, mut state, resumed_from, skipped) =
            restore_or_new(&opened, start.resume, model, optim, signature, device, console)?;
        adopt_micro_batch(&mut state, run.batch_size, &opened.run_dir)?;
        let new: Vec<DeviceFault> = survived.iter().filter(|f| !state.device_faults.contains(f)).cloned().collect();
        state.device_faults.extend(new);
        let recovering = survived.last();
        let metrics =
            MetricsWriter::open(&opened.run_dir, resumed_from.or((start.resume || recovering.is_some()).then_some(0)))?;
        let mut report = Reporter { metrics, progress: Progress::new(t.progress, total_steps, state.step) };
        report_start(&mut report, state.epoch + 1, recovering, &skipped, resumed_from)?;
        console.block(start_lines(run, &model, total_steps));
        let group = match cfg.distributed.is_group() {
            true => Some(start_group(run, &batcher, &model, &mut report, state.step, &start.faults, console)?),
            false => None,
        };
        let f16 = run.compute.precision.precision == device::Precision::F16;
        if state.scaler.enabled != f16 {
            state.scaler = LossScaler::new(f16, &cfg.amp);
        }
        let monitor = gpu_monitor(device, &opened.run_dir)?;
        let (epoch_sums, window_sums) = (state.epoch_sums, state.window_sums);
        let defer = run.compute.on_gpu() && group.is_none();
        let device_scale = (defer && state.scaler.enabled).then(|| DeviceScale::new(&state.scaler, device));
        Ok(Self {
            recovery: Recovery::new(&cfg.recovery, &model, &optim, state.step),
            schedule: LrSchedule::new(&cfg.schedule, cfg.optimizer.lr, steps_per_epoch, total_steps),
            objective: Objective::new(cfg.task, t.label_smoothing, device),
            prof: Profiler::new(t.profile),
            run,
            run_dir: opened.run_dir,
            faults: start.faults.clone(),
            model,
            optim,
            state,
            resumed_from,
            loader_cfg,
            batcher,
            micro_batches_per_epoch: (steps_per_epoch * run.accumulation_steps).min(batches_per_epoch),
            total_steps,
            report,
            monitor,
            loop_start: Instant::now(),
            data_wait: Duration::ZERO,
            window: Tally::resumed(window_sums),
            epoch: Tally::resumed(epoch_sums),
            last_grad_norm: 0.0,
            shown: (f64::NAN, f64::NAN, f64::NAN),
            stopped_early: false,
            survived,
            at,
            defer,
            device_scale,
            group,
            reseed: true,
            unsettled: Vec::new(),
        })
    }

    /// Epochs until done, early stopping or an injected interruption.
    fn train(&mut self) -> Result<Ended> {
        let t = &self.run.config.training;
        let mut ended = Ended::Finished;
        while self.state.epoch < t.epochs && self.state.step < self.total_steps {
            if self.run_epoch()? == Ended::Interrupted {
                ended = Ended::Interrupted;
                break;
            }
            if self.end_epoch()? {
                break;
            }
            if self.interrupted(self.state.step) {
                ended = Ended::Interrupted;
                break;
            }
        }
        self.report.progress.finish();
        Ok(ended)
    }

    /// The optimizer steps of the current epoch (from `batch_in_epoch` when resuming mid-epoch).
    fn run_epoch(&mut self) -> Result<Ended> {
        let run = self.run;
        let epoch = self.state.epoch;
        self.model.set_late_dropout(epoch >= run.config.training.late_dropout_epoch);
        let data = &run.input.data;
        let device = run.compute.device();
        let mut loader = if self.group.is_some() {
            let batches = epoch_batches(&data.train, &self.loader_cfg, epoch);
            Feed::Indices(batches.into_iter().skip(self.state.batch_in_epoch).collect::<Vec<_>>().into_iter())
        } else {
            let loader = EpochLoader::start(
                data.dataset.clone(),
                self.batcher.clone(),
                &data.train,
                &self.loader_cfg,
                epoch,
                self.state.batch_in_epoch,
            );
            match run.config.data.device_prefetch && run.compute.on_gpu() {
                true => Feed::Device(DevicePrefetcher::start(loader, device.clone())),
                false => Feed::Host(loader),
            }
        };
        let usable = self.micro_batches_per_epoch;
        if self.state.batch_in_epoch == 0 {
            self.epoch = Tally::new();
        }
        while self.state.batch_in_epoch < usable && self.state.step < self.total_steps {
            let step_start = Instant::now();
            let (samples, lr) = self.step(&mut loader)?;
            let epoch_ends = self.state.batch_in_epoch >= usable;
            self.after_step(samples, lr, epoch_ends)?;
            self.prof.end_step(step_start);
            if self.interrupted(self.state.step) && !epoch_ends {
                return Ok(Ended::Interrupted);
            }
        }
        Ok(Ended::Finished)
    }

    /// One optimizer step, queued; its outcome joins the unsettled ones. Returns the step's
    /// samples and its LR.
    fn step(&mut self, loader: &mut Feed) -> Result<(u64, f64)> {
        let run = self.run;
        let cfg = &run.config;
        let device = run.compute.device();
        let step = self.state.step;
        let epoch = self.state.epoch;
        self.at.set((step, epoch));
        let left = self.micro_batches_per_epoch.saturating_sub(self.state.batch_in_epoch);
        let micro_batches = run.accumulation_steps.min(left).max(1);
        let lr = self.schedule.lr(step) * self.state.lr_scale;
        let loss_scale = match &self.device_scale {
            Some(d) => LossScale::Device(d.scale.clone()),
            None => LossScale::Host(self.state.scaler.scale),
        };
        let settings = StepSettings {
            compute: run.compute.precision.precision.float_dtype(),
            micro_batches,
            loss_scale,
            lr,
            clip_grad_norm: cfg.optimizer.clip_grad_norm,
            dropout_seed: self.reseed.then_some((cfg.training.seed, step as u64)),
            faults: self.faults.at_step(step, run.batch_size, self.survived),
            sample_memory: run.compute.on_gpu()
                && (step.is_multiple_of(cfg.training.log_every) || self.state.batch_in_epoch == 0),
        };
        self.reseed = false;
        let data_wait = &mut self.data_wait;
        let model = self.model.clone();
        let ended = || TrainError::Invalid(format!("the data loader ended early in epoch {}", epoch + 1));
        let (model, pending) = match &mut self.group {
            None => queue_step(device, model, &mut self.optim, &self.objective, &settings, &mut self.prof, |_| {
                let t0 = Instant::now();
                let batch = loader.next(device).ok_or_else(ended)?;
                *data_wait += t0.elapsed();
                Ok(batch)
            })?,
            Some(group) => {
                let t0 = Instant::now();
                let micro =
                    (0..micro_batches).map(|_| loader.next_indices().ok_or_else(ended)).collect::<Result<Vec<_>>>()?;
                *data_wait += t0.elapsed();
                let (model, outcome, events) =
                    group.step(model, &mut self.optim, &self.objective, &settings, &mut self.prof, epoch, &micro)?;
                for (kind, detail) in events {
                    self.report.event(step, epoch + 1, kind, detail)?;
                }
                (model, PendingOutcome::from(outcome))
            }
        };
        self.model = model;
        self.state.batch_in_epoch += micro_batches;
        let samples = pending.samples();
        if let (Some(scale), Some(applied)) = (&mut self.device_scale, pending.applied_on_device()) {
            scale.update(applied, &cfg.amp);
        }
        self.unsettled.push(Unsettled { pending, step, epoch });
        if !self.defer {
            self.settle()?;
        }
        Ok((samples, lr))
    }

    /// Read the outcomes of the unsettled steps (one wait), then, step by step, the loss-scale
    /// and recovery policies and the running tallies.
    fn settle(&mut self) -> Result<()> {
        let units = std::mem::take(&mut self.unsettled);
        let Some(last_step) = units.last().map(|u| u.step) else { return Ok(()) };
        let (pending, units): (Vec<_>, Vec<_>) = units.into_iter().map(|u| (u.pending, (u.step, u.epoch))).unzip();
        let outcomes = crate::step::settle(pending, &mut self.optim);
        for (outcome, (step, epoch)) in outcomes.iter().zip(units) {
            self.policies(outcome, step, epoch, last_step)?;
            self.last_grad_norm = outcome.grad_norm;
            self.window.add(outcome);
            self.epoch.add(outcome);
        }
        // The host's scaler has replayed the same rules (and a rollback may have restored it):
        // the device's copy continues from it.
        if self.device_scale.is_some() {
            self.device_scale = Some(DeviceScale::new(&self.state.scaler, self.run.compute.device()));
        }
        Ok(())
    }

    /// The loss-scale and recovery policies after step `step`. The model in hand is that after
    /// `last_step` (a later step settled in the same read; steps that were skipped changed nothing).
    fn policies(&mut self, outcome: &StepOutcome, step: usize, epoch: usize, last_step: usize) -> Result<()> {
        let cfg = &self.run.config;
        let scale = outcome.loss_scale;
        match self.state.scaler.update(outcome.applied, &cfg.amp) {
            ScaleChange::Grew(to) => {
                self.report.event(step, epoch + 1, "loss_scale_growth", format!("loss scale {scale} -> {to}"))?
            }
            ScaleChange::BackedOff(to) => self.report.event(
                step,
                epoch + 1,
                "loss_scale_backoff",
                format!("loss scale {scale} -> {to} (gradients overflowed)"),
            )?,
            ScaleChange::None => {}
        }
        if outcome.applied {
            self.recovery.good_step(&mut self.state, &self.model, &self.optim, last_step);
        } else if let Some((model, optim)) =
            self.recovery.bad_step(&mut self.state, step, epoch, outcome, &cfg.amp, &mut self.report)?
        {
            self.model = model;
            self.optim = optim;
            self.reseed = true;
        }
        Ok(())
    }

    /// Counters, cache emptying, settling the outcomes where they are needed, the progress line,
    /// the `kind=step` row and step checkpoints.
    fn after_step(&mut self, samples: u64, lr: f64, epoch_ends: bool) -> Result<()> {
        let run = self.run;
        let t = &run.config.training;
        let epoch = self.state.epoch;
        if t.empty_cache_interval > 0 && (self.state.step + 1).is_multiple_of(t.empty_cache_interval) {
            self.empty_cache(samples)?;
        }
        self.state.step += 1;
        self.state.samples += samples;
        let step = self.state.step;
        let log_now = step.is_multiple_of(t.log_every) || step == self.total_steps;
        let checkpoint_due =
            checkpoint::step_checkpoint_due(&run.config.checkpoint, run.compute.on_gpu(), step, epoch_ends);
        let stopping = self.interrupted(step);
        if log_now || checkpoint_due || epoch_ends || stopping {
            self.settle()?;
        }
        if self.window.samples > 0 {
            self.shown = (self.window.mean_loss(), self.window.top1(), self.window.samples_per_s());
        }
        let (loss, top1, sps) = self.shown;
        let done = (step - self.resumed_from.unwrap_or(0)) as f64;
        let eta = self.loop_start.elapsed().as_secs_f64() / done.max(1.0) * (self.total_steps - step) as f64;
        // Before the first read on a GPU-class device nothing is known yet.
        let figures = match top1.is_nan() {
            true => "loss and accuracy read at the first log step".to_string(),
            false => format!("loss {loss:.4} acc {top1:.3}"),
        };
        let speed = if sps.is_nan() { String::new() } else { format!(" {sps:.0} samples/s") };
        let msg = format!(
            "epoch {}/{} step {}/{} {figures} lr {:.2e}{speed} eta {}",
            epoch + 1,
            t.epochs,
            step,
            self.total_steps,
            lr,
            fmt_duration(eta)
        );
        self.report.progress.step(step, &msg, log_now);
        if log_now {
            self.report.metrics.write(&Row {
                kind: "step",
                epoch: epoch + 1,
                step,
                samples: self.state.samples,
                loss: Some(self.window.mean_loss()),
                top1: Some(self.window.top1()),
                lr: Some(lr),
                grad_norm: Some(self.last_grad_norm),
                samples_per_s: Some(sps),
                elapsed_s: self.elapsed_s(),
                loss_scale: self.state.scaler.enabled.then_some(self.state.scaler.scale),
                ..Row::default()
            })?;
            self.window = Tally::new();
        }
        if checkpoint_due {
            self.save_checkpoint()?;
        }
        Ok(())
    }

    /// Empty the device's memory pool and log its figures (`kind=memory`).
    fn empty_cache(&mut self, step_samples: u64) -> Result<()> {
        let device = self.run.compute.device();
        device::empty_cache(device);
        if let Some(m) = device::memory_stats(device) {
            self.report.metrics.write(&Row {
                kind: "memory",
                epoch: self.state.epoch + 1,
                step: self.state.step + 1,
                samples: self.state.samples + step_samples,
                mem_in_use_mib: Some(m.bytes_in_use as f64 / 1048576.0),
                mem_reserved_mib: Some(m.bytes_reserved as f64 / 1048576.0),
                elapsed_s: self.elapsed_s(),
                ..Row::default()
            })?;
        }
        Ok(())
    }

    /// Training time over resumes.
    fn elapsed_s(&self) -> f64 {
        self.state.elapsed_s + self.loop_start.elapsed().as_secs_f64()
    }

    /// The state as a checkpoint stores it (elapsed time up to now).
    fn state_now(&self) -> TrainState {
        let epoch_sums = match self.state.batch_in_epoch {
            0 => checkpoint::RunningSums::default(),
            _ => self.epoch.sums(),
        };
        TrainState { elapsed_s: self.elapsed_s(), epoch_sums, window_sums: self.window.sums(), ..self.state.clone() }
    }

    /// Whether an injected interruption ends the run at `step`.
    fn interrupted(&self, step: usize) -> bool {
        self.faults.interrupt_after().is_some_and(|s| step >= s)
    }

    fn save_checkpoint(&mut self) -> Result<()> {
        let keep = self.run.config.checkpoint.keep_last;
        checkpoint::save(&self.run_dir, &self.model, &self.optim, &self.state_now(), keep, &self.faults)?;
        self.reseed = true;
        Ok(())
    }

    /// Validate, record the epoch, track the best, checkpoint. Returns whether to stop early.
    fn end_epoch(&mut self) -> Result<bool> {
        let run = self.run;
        let t = &run.config.training;
        let data = &run.input.data;
        let epoch = self.state.epoch;
        let lr = self.schedule.lr(self.state.step.saturating_sub(1));
        let (train_loss, train_top1) = (self.epoch.mean_loss(), self.epoch.top1());
        let eval = (!data.valid.is_empty()).then(|| {
            let model = self.model.valid();
            let pre = &run.input.preprocessor;
            let workers = run.config.data.workers;
            let decoder = &run.input.decoder;
            evaluate(&model, &data.dataset, pre, &data.valid, run.batch_size, workers, decoder, run.compute.device())
        });
        let record = EpochRecord {
            epoch: epoch + 1,
            step: self.state.step,
            train_loss,
            train_top1,
            valid_loss: eval.as_ref().map(|e| e.loss),
            valid_top1: eval.as_ref().map(|e| e.top1),
            valid_top5: eval.as_ref().and_then(|e| e.top5),
            valid_sequences: eval.as_ref().and_then(|e| e.sequences),
            lr,
            samples_per_s: self.epoch.samples_per_s(),
            elapsed_s: self.elapsed_s(),
            peak_mem_in_use_mib: self.epoch.memory.map(|m| m.bytes_in_use as f64 / 1048576.0),
            peak_mem_reserved_mib: self.epoch.memory.map(|m| m.bytes_reserved as f64 / 1048576.0),
        };
        self.report.metrics.write(&Row::epoch(&record, self.state.samples, self.last_grad_norm, &self.state.scaler))?;
        let metric = if eval.is_none() { Metric::ValidLoss } else { t.early_stopping.metric };
        let value = match &eval {
            Some(e) => metric.value(e),
            // No validation split: the training loss decides.
            None => train_loss,
        };
        let improved = match &self.state.best {
            None => value.is_finite(),
            Some(b) => metric.improves(value, b.value, t.early_stopping.min_delta),
        };
        let mut line =
            format!("epoch {}/{}: train loss {:.4} top-1 {:.3}", epoch + 1, t.epochs, train_loss, train_top1);
        if let Some(e) = &eval {
            line += &format!(" | valid {}", crate::report::describe_evaluation(e));
        }
        line += &format!(" | {:.0} samples/s", record.samples_per_s);
        self.state.history.push(record);
        self.state.epoch += 1;
        self.state.batch_in_epoch = 0;
        if improved {
            let name = if eval.is_none() { "train_loss" } else { metric.name() };
            self.state.best = Some(BestRecord { epoch: epoch + 1, step: self.state.step, metric: name.into(), value });
            self.state.epochs_since_best = 0;
            line += " (best)";
        } else {
            self.state.epochs_since_best += 1;
        }
        self.report.progress.println(&line);
        if improved {
            checkpoint::save_best(&self.run_dir, &self.model, &self.state_now())?;
        }
        self.save_checkpoint()?;
        let patience = t.early_stopping.patience;
        if patience > 0 && self.state.epochs_since_best >= patience {
            self.stopped_early = true;
            self.report.progress.println(&format!(
                "early stop: no {} improvement for {} epochs",
                metric.name(),
                self.state.epochs_since_best
            ));
            return Ok(true);
        }
        Ok(false)
    }

    /// Export the best weights and write `summary.json` and `curves.svg`.
    fn finish(&mut self) -> Result<Summary> {
        let loop_s = self.loop_start.elapsed().as_secs_f64();
        let group = self.group.as_ref().map(|g| g.summary());
        if let Some(g) = self.group.take() {
            g.finish()?;
        }
        let gpu = self.monitor.take().map(|m| m.stop());
        let exported_model = crate::export::export_model(&self.run_dir, &self.model, &self.state, self.run)?;
        let effective_batch = self.run.batch_size * self.run.accumulation_steps;
        let profile = self
            .prof
            .enabled
            .then(|| self.prof.report(effective_batch, gpu.as_ref().and_then(|g| g.mean_utilization())));
        let summary = crate::export::summary(crate::export::SummaryParts {
            run: self.run,
            run_dir: &self.run_dir,
            model: &self.model,
            state: &self.state,
            loop_s,
            data_wait_s: self.data_wait.as_secs_f64(),
            profile,
            gpu,
            stopped_early: self.stopped_early,
            resumed_from: self.resumed_from,
            exported_model,
            group,
        });
        crate::export::write_summary(&self.run_dir, &summary)?;
        Ok(summary)
    }
}

/// What [`restore_or_new`] starts from: model, optimizer and loop state, the step they were
/// checkpointed at (`None`: fresh), and the newer checkpoints that could not be read.
type Resumed = (SignModel<TrainBackend>, Optim, TrainState, Option<usize>, Vec<checkpoint::Skipped>);

/// The model, optimizer and state of the last checkpoint when there is one, else the fresh ones
/// given (with a line on `console` saying which).
fn restore_or_new(
    opened: &OpenedRun,
    resume: bool,
    model: SignModel<TrainBackend>,
    optim: Optim,
    signature: ModelSignature,
    device: &Device,
    console: &Console,
) -> Result<Resumed> {
    if !resume && opened.latest.is_none() {
        return Ok((model, optim, TrainState::new(signature), None, Vec::new()));
    }
    let (restored, skipped) = checkpoint::restore_newest(&opened.run_dir, &model, &optim, &signature, device)?;
    for s in &skipped {
        eprintln!("warning: passing over checkpoint {}: {}", s.dir.display(), s.reason);
    }
    Ok(match restored {
        Some((step, (model, optim, state))) => {
            console.line(format!(
                "resuming {} from step {step} (epoch {}, batch {})",
                opened.run_dir.display(),
                state.epoch + 1,
                state.batch_in_epoch
            ));
            (model, optim, state, Some(step), skipped)
        }
        None => {
            console
                .line(format!("no complete checkpoint in {}; starting from the beginning", opened.run_dir.display()));
            (model, optim, TrainState::new(signature), None, skipped)
        }
    })
}

/// NVML sampling into the run's `gpu.csv` while a CUDA run trains.
fn gpu_monitor(device: &Device, run_dir: &std::path::Path) -> Result<Option<device::GpuMonitor>> {
    if device::backend_name(device) != "cuda" {
        return Ok(None);
    }
    Ok(Some(device::GpuMonitor::start(Duration::from_millis(500), Some(&run_dir.join(bundle::layout::GPU_FILE)))?))
}

/// Augmentation and preprocessing of the training batches of `cfg`, keyed by (epoch, index):
/// the leader's loader and every data-parallel peer build the same one.
fn batcher_for(cfg: &ExperimentConfig, input: &crate::resolve::ResolvedData) -> ItemBatcher {
    let pre = &input.preprocessor;
    let ds = &input.data.dataset;
    // CTC never crops: a crop would cut signs out of a sentence and off its labels.
    let augment = match cfg.task {
        models::Task::Ctc => AugmentConfig { crop_prob: 0.0, ..cfg.augment.clone() },
        models::Task::Classification => cfg.augment.clone(),
    };
    let augmenter = augment.enabled.then(|| Arc::new(Augmenter::new(augment, ds.mirror_table(pre))));
    ItemBatcher { preprocessor: pre.clone(), augmenter, seed: cfg.training.seed }
}

pub(crate) fn workload(
    cfg: &ExperimentConfig,
    input: &crate::resolve::ResolvedData,
    faults: &Faults,
) -> crate::dist::Workload {
    crate::dist::Workload {
        dataset: input.data.dataset.clone(),
        batcher: batcher_for(cfg, input),
        model: cfg.model.clone(),
        label_smoothing: cfg.training.label_smoothing,
        task: cfg.task,
        faults: faults.clone(),
    }
}

/// How an epoch divides into micro-batches and optimizer steps.
struct EpochPlan {
    /// The epoch loader's settings.
    loader_cfg: LoaderConfig,
    /// Micro-batches in an epoch.
    batches_per_epoch: usize,
    /// Optimizer steps in an epoch.
    steps_per_epoch: usize,
    /// Optimizer steps in the run (`training.max_steps` included).
    total_steps: usize,
}

impl EpochPlan {
    /// The plan of `run`; an error when the training split is too small for one step.
    fn of(run: &ResolvedRun) -> Result<Self> {
        let cfg = &run.config;
        let t = &cfg.training;
        let train = &run.input.data.train;
        let loader_cfg = LoaderConfig {
            batch_size: run.batch_size,
            shuffle: true,
            drop_last: t.drop_last,
            seed: t.seed,
            workers: cfg.data.workers,
            prefetch: cfg.data.prefetch,
        };
        let accum = run.accumulation_steps;
        let batches_per_epoch = epoch_batches(train, &loader_cfg, 0).len();
        // Without drop_last the epoch's last step takes the micro-batches that are left (fewer
        // than `accum`), so every sequence is seen and a step covers the same sequences whatever
        // the micro-batch (a run continued with half the micro-batch keeps its schedule).
        let steps_per_epoch = if t.drop_last { batches_per_epoch / accum } else { batches_per_epoch.div_ceil(accum) };
        if steps_per_epoch == 0 {
            return Err(TrainError::Invalid(format!(
                "the training split has {} sequences ({} batches of {}), fewer than one optimizer step needs (accumulation_steps = {accum}); lower training.batch_size or training.accumulation_steps",
                train.len(),
                batches_per_epoch,
                run.batch_size
            )));
        }
        let total_steps = match t.max_steps {
            0 => steps_per_epoch * t.epochs,
            max => (steps_per_epoch * t.epochs).min(max),
        };
        Ok(Self { loader_cfg, batches_per_epoch, steps_per_epoch, total_steps })
    }
}

/// The events of how an attempt starts: the device fault it recovers from, the checkpoints
/// passed over as unreadable, the step it resumes from.
fn report_start(
    report: &mut Reporter,
    epoch: usize,
    recovering: Option<&DeviceFault>,
    skipped: &[checkpoint::Skipped],
    resumed_from: Option<usize>,
) -> Result<()> {
    if let Some(f) = recovering {
        report.event(f.step, f.epoch, "device_fault", f.describe())?;
    }
    for s in skipped {
        report.event(s.step, epoch, "checkpoint_skipped", s.reason.clone())?;
    }
    if let Some(step) = resumed_from {
        report.event(step, epoch, "resume", format!("pid {}", std::process::id()))?;
    }
    Ok(())
}

/// Start the group this process leads, with its `group_start` event.
fn start_group(
    run: &ResolvedRun,
    batcher: &ItemBatcher,
    model: &SignModel<TrainBackend>,
    report: &mut Reporter,
    step: usize,
    faults: &Faults,
    console: &Console,
) -> Result<crate::dist::Group> {
    let cfg = &run.config;
    let work = crate::dist::Workload { batcher: batcher.clone(), ..workload(cfg, &run.input, faults) };
    let group = crate::dist::Group::start(
        cfg,
        &run.compute.peers,
        work,
        model,
        run.batch_size,
        run.accumulation_steps,
        run.compute.precision.precision.float_dtype(),
    )?;
    let peers: Vec<String> = group.peers().iter().map(|p| p.label()).collect();
    let rows = group.rows();
    let line = format!(
        "data-parallel: {} peers ({}), balance {:?}, rows per micro-batch {:?}",
        peers.len(),
        peers.join(", "),
        cfg.distributed.balance,
        rows
    );
    console.line(&line);
    report.event(step, 0, "group_start", line)?;
    Ok(group)
}

/// Count `state.batch_in_epoch` in micro-batches of `micro_batch` (a run continued after a
/// device fault has a smaller micro-batch than the checkpoint counted in).
fn adopt_micro_batch(state: &mut TrainState, micro_batch: usize, run_dir: &std::path::Path) -> Result<()> {
    let saved = state.micro_batch;
    if saved != 0 && saved != micro_batch {
        let consumed = state.batch_in_epoch * saved;
        if !consumed.is_multiple_of(micro_batch) {
            return Err(TrainError::Resume {
                path: run_dir.into(),
                message: format!(
                    "the checkpoint is {} micro-batches of {saved} into its epoch, which is not a whole number of micro-batches of {micro_batch}",
                    state.batch_in_epoch
                ),
            });
        }
        state.batch_in_epoch = consumed / micro_batch;
    }
    state.micro_batch = micro_batch;
    Ok(())
}

/// The model and data lines printed when training starts.
fn start_lines(run: &ResolvedRun, model: &SignModel<TrainBackend>, total_steps: usize) -> String {
    let data = &run.input.data;
    let ds = &data.dataset;
    format!(
        "model: {} with {} trainable parameters; {} inputs per frame, {} classes\n\
         data: {} train sequences ({} signers), {} validation ({} unseen signers); batch {} x {} accumulation = effective batch {}; {} steps\n",
        run.config.model.kind(),
        models::trainable_params(model),
        ds.features,
        ds.num_classes(),
        data.train.len(),
        data.groups(&data.train).len(),
        data.valid.len(),
        data.groups(&data.valid).len(),
        run.batch_size,
        run.accumulation_steps,
        run.batch_size * run.accumulation_steps,
        total_steps
    )
}
