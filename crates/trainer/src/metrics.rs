//! `metrics.csv` (append-only, flushed per row, written and read with the `csv` crate), the
//! same scalars as TensorBoard event files ([`crate::tensorboard`]), and `events.jsonl`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::amp::LossScaler;
use crate::checkpoint::EpochRecord;
use crate::{Result, TrainError};

/// The CSV header of `metrics.csv`.
pub const HEADER: &str = "kind,epoch,step,samples,loss,top1,lr,grad_norm,samples_per_s,valid_loss,valid_top1,valid_top5,elapsed_s,loss_scale,mem_in_use_mib,mem_reserved_mib,valid_cer,valid_greedy_cer,valid_nld";
const COLUMNS: usize = 19;
/// Rows of files written before the CTC columns were added (read back on resume).
const COLUMNS_WITHOUT_CTC: usize = 16;

/// One row; `None` leaves the cell empty.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    /// `step`, `epoch` or `memory`.
    pub kind: &'static str,
    /// Epoch (1-based).
    pub epoch: usize,
    /// Optimizer steps done.
    pub step: usize,
    /// Training samples processed.
    pub samples: u64,
    /// Mean training loss (over the logging window or the epoch).
    pub loss: Option<f64>,
    /// Training top-1.
    pub top1: Option<f64>,
    /// Learning rate.
    pub lr: Option<f64>,
    /// Global gradient norm of the last step (unscaled, before clipping).
    pub grad_norm: Option<f64>,
    /// Training throughput.
    pub samples_per_s: Option<f64>,
    /// Validation loss (epoch rows).
    pub valid_loss: Option<f64>,
    /// Validation top-1 (epoch rows).
    pub valid_top1: Option<f64>,
    /// Validation top-5 (epoch rows).
    pub valid_top5: Option<f64>,
    /// Training time over resumes, seconds.
    pub elapsed_s: f64,
    /// The f16 loss scale.
    pub loss_scale: Option<f64>,
    /// Device memory in use after emptying the cache (memory rows).
    pub mem_in_use_mib: Option<f64>,
    /// Device memory reserved by the pool (memory rows).
    pub mem_reserved_mib: Option<f64>,
    /// Validation token error rate of the configured CTC decoder (CTC epoch rows).
    pub valid_cer: Option<f64>,
    /// Validation token error rate of greedy decoding (CTC epoch rows).
    pub valid_greedy_cer: Option<f64>,
    /// Validation normalized Levenshtein score of the configured decoder (CTC epoch rows).
    pub valid_nld: Option<f64>,
}

fn cell(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.6}")).unwrap_or_default()
}

impl Row {
    /// The `kind=epoch` row of an epoch: its record, the samples seen so far, the last step's
    /// gradient norm and the loss scale.
    pub fn epoch(record: &EpochRecord, samples: u64, grad_norm: f64, scaler: &LossScaler) -> Self {
        Self {
            kind: "epoch",
            epoch: record.epoch,
            step: record.step,
            samples,
            loss: Some(record.train_loss),
            top1: Some(record.train_top1),
            lr: Some(record.lr),
            grad_norm: Some(grad_norm),
            samples_per_s: Some(record.samples_per_s),
            valid_loss: record.valid_loss,
            valid_top1: record.valid_top1,
            valid_top5: record.valid_top5,
            elapsed_s: record.elapsed_s,
            loss_scale: scaler.enabled.then_some(scaler.scale),
            mem_in_use_mib: record.peak_mem_in_use_mib,
            mem_reserved_mib: record.peak_mem_reserved_mib,
            valid_cer: record.valid_sequences.map(|s| s.chosen().cer),
            valid_greedy_cer: record.valid_sequences.map(|s| s.greedy.cer),
            valid_nld: record.valid_sequences.map(|s| s.chosen().nld),
        }
    }

    /// The CSV cells, in [`HEADER`] order.
    fn cells(&self) -> [String; COLUMNS] {
        [
            self.kind.to_string(),
            self.epoch.to_string(),
            self.step.to_string(),
            self.samples.to_string(),
            cell(self.loss),
            cell(self.top1),
            self.lr.map(|x| format!("{x:.6e}")).unwrap_or_default(),
            cell(self.grad_norm),
            self.samples_per_s.map(|x| format!("{x:.1}")).unwrap_or_default(),
            cell(self.valid_loss),
            cell(self.valid_top1),
            cell(self.valid_top5),
            format!("{:.3}", self.elapsed_s),
            self.loss_scale.map(|x| format!("{x}")).unwrap_or_default(),
            self.mem_in_use_mib.map(|x| format!("{x:.1}")).unwrap_or_default(),
            self.mem_reserved_mib.map(|x| format!("{x:.1}")).unwrap_or_default(),
            cell(self.valid_cer),
            cell(self.valid_greedy_cer),
            cell(self.valid_nld),
        ]
    }

    /// The TensorBoard scalars of this row: `train/*` for step rows, `epoch/*` and `valid/*` for
    /// epoch rows, `memory/*` for memory rows; `lr`, `grad_norm`, `loss_scale` where present.
    pub fn scalars(&self) -> Vec<(&'static str, f64)> {
        let fields: Vec<(&'static str, Option<f64>)> = match self.kind {
            "epoch" => vec![
                ("epoch/train_loss", self.loss),
                ("epoch/train_top1", self.top1),
                ("valid/loss", self.valid_loss),
                ("valid/top1", self.valid_top1),
                ("valid/top5", self.valid_top5),
                ("valid/cer", self.valid_cer),
                ("valid/greedy_cer", self.valid_greedy_cer),
                ("valid/nld", self.valid_nld),
                ("epoch/samples_per_s", self.samples_per_s),
                ("memory/peak_in_use_mib", self.mem_in_use_mib),
                ("memory/peak_reserved_mib", self.mem_reserved_mib),
            ],
            "memory" => {
                vec![("memory/in_use_mib", self.mem_in_use_mib), ("memory/reserved_mib", self.mem_reserved_mib)]
            }
            _ => vec![
                ("train/loss", self.loss),
                ("train/top1", self.top1),
                ("lr", self.lr),
                ("grad_norm", self.grad_norm),
                ("train/samples_per_s", self.samples_per_s),
                ("loss_scale", self.loss_scale),
            ],
        };
        fields.into_iter().filter_map(|(t, v)| v.map(|v| (t, v))).collect()
    }
}

/// A CSV line of `cells` (quoted where a cell needs it).
fn csv_line(cells: &[String]) -> Vec<u8> {
    let mut w = csv::WriterBuilder::new().from_writer(Vec::new());
    w.write_record(cells).expect("writing to memory");
    w.into_inner().expect("flushing to memory")
}

/// The rows of a `metrics.csv` text: (line number, cells) of every well-formed data row.
fn parse(text: &str) -> Vec<(usize, csv::StringRecord)> {
    let mut r = csv::ReaderBuilder::new().flexible(true).from_reader(text.as_bytes());
    r.records()
        .filter_map(|rec| rec.ok())
        .filter(|rec| rec.len() == COLUMNS || rec.len() == COLUMNS_WITHOUT_CTC)
        .map(|rec| (rec.position().map(|p| p.line() as usize).unwrap_or(0), rec))
        .collect()
}

/// Appends rows to `metrics.csv` and events to `events.jsonl`.
#[derive(Debug)]
pub struct MetricsWriter {
    path: PathBuf,
    file: File,
    events_path: PathBuf,
    events: File,
    tensorboard: crate::tensorboard::EventWriter,
}

impl MetricsWriter {
    /// Open the run's metrics. When resuming at optimizer step `resume_step`, rows logged after
    /// it by the interrupted process (and a torn last line) are dropped first, so the file reads
    /// as one uninterrupted run.
    pub fn open(run_dir: &Path, resume_step: Option<usize>) -> Result<Self> {
        let path = run_dir.join(bundle::layout::METRICS_FILE);
        match resume_step {
            Some(step) if path.is_file() => {
                let text = std::fs::read_to_string(&path).map_err(|e| TrainError::io(&path, e))?;
                let mut kept = format!("{HEADER}\n").into_bytes();
                for (_, rec) in parse(&text) {
                    if rec.get(2).and_then(|s| s.parse::<usize>().ok()).is_some_and(|s| s <= step) {
                        let mut cells: Vec<String> = rec.iter().map(String::from).collect();
                        cells.resize(COLUMNS, String::new());
                        kept.extend(csv_line(&cells));
                    }
                }
                bundle::atomic::write_atomic(&path, &kept)?;
            }
            _ => bundle::atomic::write_atomic(&path, format!("{HEADER}\n").as_bytes())?,
        }
        let file = OpenOptions::new().append(true).open(&path).map_err(|e| TrainError::io(&path, e))?;
        let events_path = run_dir.join(bundle::layout::EVENTS_FILE);
        let events = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&events_path)
            .map_err(|e| TrainError::io(&events_path, e))?;
        let tensorboard = crate::tensorboard::EventWriter::create(run_dir, resume_step)?;
        Ok(Self { path, file, events_path, events, tensorboard })
    }

    /// Append one row (flushed) and its scalars to the TensorBoard event file.
    pub fn write(&mut self, row: &Row) -> Result<()> {
        self.file.write_all(&csv_line(&row.cells())).map_err(|e| TrainError::io(&self.path, e))?;
        self.file.flush().map_err(|e| TrainError::io(&self.path, e))?;
        self.tensorboard.scalars(row.step, &row.scalars())
    }

    /// Append an event (`{"step":..,"kind":..,...}`) to `events.jsonl`.
    pub fn event<T: Serialize>(&mut self, event: &T) -> Result<()> {
        let mut line = serde_json::to_string(event).map_err(|e| TrainError::io(&self.events_path, e))?;
        line.push('\n');
        self.events.write_all(line.as_bytes()).map_err(|e| TrainError::io(&self.events_path, e))
    }
}

/// Parse `metrics.csv` back (for the curves plot and tests): (kind, step, loss, top1, valid_loss,
/// valid_top1) per row.
pub fn read_rows(path: &Path) -> Result<Vec<Row>> {
    let text = std::fs::read_to_string(path).map_err(|e| TrainError::io(path, e))?;
    let num = |s: &str| s.parse::<f64>().ok();
    let mut rows = Vec::new();
    for (_, rec) in parse(&text) {
        let mut c: Vec<&str> = rec.iter().collect();
        c.resize(COLUMNS, "");
        rows.push(Row {
            kind: match c[0] {
                "epoch" => "epoch",
                "memory" => "memory",
                _ => "step",
            },
            epoch: c[1].parse().unwrap_or(0),
            step: c[2].parse().unwrap_or(0),
            samples: c[3].parse().unwrap_or(0),
            loss: num(c[4]),
            top1: num(c[5]),
            lr: num(c[6]),
            grad_norm: num(c[7]),
            samples_per_s: num(c[8]),
            valid_loss: num(c[9]),
            valid_top1: num(c[10]),
            valid_top5: num(c[11]),
            elapsed_s: num(c[12]).unwrap_or(0.0),
            loss_scale: num(c[13]),
            mem_in_use_mib: num(c[14]),
            mem_reserved_mib: num(c[15]),
            valid_cer: num(c[16]),
            valid_greedy_cer: num(c[17]),
            valid_nld: num(c[18]),
        });
    }
    Ok(rows)
}
