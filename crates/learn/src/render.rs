//! [`ProgressRenderer`]: burn-train's progress and metrics as a progress bar and one line per
//! epoch, for logs, CI and terminals without burn-train's dashboard. (burn-train's own fallback,
//! when its `tui` feature is off or stdout is not a terminal, prints a debug line per iteration
//! and no metric values.)

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use burn_train::metric::{MetricAttributes, MetricDefinition, MetricId};
use burn_train::renderer::{
    EvaluationName, EvaluationProgress, MetricState, MetricsRenderer, MetricsRendererEvaluation,
    MetricsRendererTraining, ProgressType, TrainingProgress,
};
use burn_train::LearnerSummary;
use indicatif::{ProgressBar, ProgressStyle};

/// The epoch means of one epoch: metric name -> mean over the epoch's items (each batch
/// weighted by its size), for the training and the validation split.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EpochMeans {
    /// 1-based epoch.
    pub epoch: usize,
    /// Training split.
    pub train: BTreeMap<String, f64>,
    /// Validation split.
    pub valid: BTreeMap<String, f64>,
}

/// Weighted sums of one split's metrics in the current epoch.
#[derive(Debug, Default)]
struct Sums(BTreeMap<String, (f64, usize)>);

impl Sums {
    fn add(&mut self, name: &str, value: f64, count: usize) {
        let e = self.0.entry(name.to_string()).or_insert((0.0, 0));
        e.0 += value * count as f64;
        e.1 += count;
    }

    fn means(&self) -> BTreeMap<String, f64> {
        self.0.iter().filter(|(_, (_, n))| *n > 0).map(|(k, (s, n))| (k.clone(), s / *n as f64)).collect()
    }
}

/// A burn-train renderer: a progress bar (indicatif, on stderr, hidden when it is not a
/// terminal) over each epoch's training and validation batches, and after each epoch one line
/// on stdout with the epoch means of every numeric metric, e.g.
/// `epoch 2/3  train Loss 1.873 Accuracy 41.67%  valid Loss 2.011 Accuracy 35.00%`.
/// [`ProgressRenderer::history`] hands out the same means for code. At the end it prints
/// burn-train's summary table when the training was asked for one (`.summary()`).
#[derive(Debug)]
pub struct ProgressRenderer {
    names: HashMap<MetricId, (String, String)>,
    epoch: usize,
    epochs: usize,
    train: Sums,
    valid: Sums,
    bar: Option<(bool, ProgressBar)>,
    /// Metric updates of the item about to be rendered: burn-train hands an item's metrics
    /// before its progress, so they are added once the progress says which epoch it belongs to.
    pending: Vec<(bool, String, f64, usize)>,
    history: Arc<Mutex<Vec<EpochMeans>>>,
}

impl Default for ProgressRenderer {
    fn default() -> Self {
        Self::new()
    }
}

impl ProgressRenderer {
    /// A renderer with an empty history.
    pub fn new() -> Self {
        Self {
            names: HashMap::new(),
            epoch: 0,
            epochs: 0,
            train: Sums::default(),
            valid: Sums::default(),
            bar: None,
            pending: Vec::new(),
            history: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// The epochs' means so far, shared: keep a clone before handing the renderer to
    /// burn-train, read it after `launch` returns.
    pub fn history(&self) -> Arc<Mutex<Vec<EpochMeans>>> {
        self.history.clone()
    }

    fn record(&mut self, split_train: bool, state: MetricState) {
        let MetricState::Numeric(entry, value) = state else { return };
        let Some((name, _)) = self.names.get(&entry.metric_id) else { return };
        let (value, count) = match value {
            burn_train::metric::NumericEntry::Value(v) => (v, 1),
            burn_train::metric::NumericEntry::Aggregated { aggregated_value, count } => (aggregated_value, count),
        };
        if !value.is_finite() {
            return;
        }
        self.pending.push((split_train, name.clone(), value, count));
    }

    /// Add the pending metric updates to the current epoch's sums.
    fn flush(&mut self) {
        for (split_train, name, value, count) in std::mem::take(&mut self.pending) {
            let sums = if split_train { &mut self.train } else { &mut self.valid };
            sums.add(&name, value, count);
        }
    }

    /// Close the finished epoch: its line and its history entry.
    fn end_epoch(&mut self) {
        if let Some((_, bar)) = self.bar.take() {
            bar.finish_and_clear();
        }
        if self.epoch == 0 {
            return;
        }
        let means = EpochMeans { epoch: self.epoch, train: self.train.means(), valid: self.valid.means() };
        self.train = Sums::default();
        self.valid = Sums::default();
        let unit = |name: &str| self.names.values().find(|(n, _)| n == name).map(|(_, u)| u.as_str()).unwrap_or("");
        let fmt = |m: &BTreeMap<String, f64>| {
            m.iter().map(|(k, v)| format!("{k} {v:.3}{}", unit(k))).collect::<Vec<_>>().join(" ")
        };
        let mut line = format!("epoch {}/{}", means.epoch, self.epochs);
        if !means.train.is_empty() {
            line.push_str(&format!("  train {}", fmt(&means.train)));
        }
        if !means.valid.is_empty() {
            line.push_str(&format!("  valid {}", fmt(&means.valid)));
        }
        println!("{line}");
        if let Ok(mut h) = self.history.lock() {
            h.push(means);
        }
    }

    /// Move the bar of `split_train` to `item`, starting a new epoch or split when it changes.
    fn show(&mut self, split_train: bool, item: &TrainingProgress) {
        let epoch = item.global_progress.items_processed;
        if epoch != self.epoch {
            self.end_epoch();
            self.epoch = epoch;
            self.epochs = item.global_progress.items_total;
        }
        self.flush();
        let Some(progress) = &item.progress else { return };
        let fresh = !matches!(&self.bar, Some((t, _)) if *t == split_train);
        if fresh {
            if let Some((_, bar)) = self.bar.take() {
                bar.finish_and_clear();
            }
            let bar = ProgressBar::new(progress.items_total as u64);
            let style = ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} items {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
            bar.set_style(style);
            let split = if split_train { "train" } else { "valid" };
            bar.set_prefix(format!("epoch {}/{} {split}", self.epoch, self.epochs));
            self.bar = Some((split_train, bar));
        }
        if let Some((_, bar)) = &self.bar {
            bar.set_length(progress.items_total as u64);
            bar.set_position(progress.items_processed as u64);
            let sums = if split_train { &self.train } else { &self.valid };
            if let Some(loss) = sums.means().get("Loss") {
                bar.set_message(format!("loss {loss:.3}"));
            }
        }
    }
}

impl MetricsRendererTraining for ProgressRenderer {
    fn update_train(&mut self, state: MetricState) {
        self.record(true, state);
    }

    fn update_valid(&mut self, state: MetricState) {
        self.record(false, state);
    }

    fn render_train(&mut self, item: TrainingProgress, _progress_indicators: Vec<ProgressType>) {
        self.show(true, &item);
    }

    fn render_valid(&mut self, item: TrainingProgress, _progress_indicators: Vec<ProgressType>) {
        self.show(false, &item);
    }

    fn on_train_end(&mut self, summary: Option<LearnerSummary>) -> Result<(), Box<dyn core::error::Error>> {
        self.flush();
        self.end_epoch();
        self.epoch = 0;
        if let Some(summary) = summary {
            println!("{summary}");
        }
        Ok(())
    }
}

impl MetricsRendererEvaluation for ProgressRenderer {
    fn update_test(&mut self, _name: EvaluationName, state: MetricState) {
        self.record(false, state);
    }

    fn render_test(&mut self, item: EvaluationProgress, _progress_indicators: Vec<ProgressType>) {
        self.show(false, &TrainingProgress::from(&item));
    }

    fn on_test_end(&mut self, summary: Option<LearnerSummary>) -> Result<(), Box<dyn core::error::Error>> {
        self.on_train_end(summary)
    }
}

impl MetricsRenderer for ProgressRenderer {
    fn manual_close(&mut self) {
        if let Some((_, bar)) = self.bar.take() {
            bar.finish_and_clear();
        }
    }

    fn register_metric(&mut self, definition: MetricDefinition) {
        let unit = match &definition.attributes {
            MetricAttributes::Numeric(a) => a.unit.clone().unwrap_or_default(),
            MetricAttributes::None => String::new(),
        };
        self.names.insert(definition.metric_id, (definition.name, unit));
    }
}
