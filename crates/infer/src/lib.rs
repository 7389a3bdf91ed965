//! # SignFlow inference
//!
//! Load a model exported by the trainer (`<run>/model/`, format in the `bundle` crate) and
//! recognize signs:
//! - [`Predictor`]: a loaded model of either task, with what every model has (its card, reading
//!   and preparing inputs through the same preprocessing code as training: no train/serve skew);
//!   [`Predictor::into_task`] gives it typed by its task:
//!   - [`Classifier`] ([`classify`]): `predict` one sequence, `predict_batch` many, from raw
//!     landmarks or from already prepared windows;
//!   - [`Transcriber`] ([`transcribe`]): a continuous-recognition (CTC) model; `transcribe`
//!     sequences into token sequences with each token's frames and confidence;
//! - [`stream::StreamingRecognizer`]: push live frames, get sign events ([`live`]: frames as
//!   JSON lines from any front end);
//! - [`eval::evaluate`]: accuracy, per-class and per-signer figures, confusion matrix and
//!   calibration of a model on a labelled dataset.
//!
//! ```no_run
//! use infer::{Loaded, Predictor, PredictorOptions};
//! let predictor = Predictor::load("runs/default-20261122-193204".as_ref(), &PredictorOptions::default())?;
//! let sample = predictor.read_file("clip.parquet".as_ref())?;
//! match predictor.into_task() {
//!     Loaded::Classifier(c) => println!("{}", c.predict(&sample)?.best().label),
//!     Loaded::Transcriber(t) => println!("{}", t.transcribe(&sample)?.text),
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Knowing the task, load it directly: `Classifier::load(dir, &opts)?` (an error for a CTC model).
//!
//! `Predictor`, `Classifier` and `Transcriber` are `Send + Sync`: share one behind an `Arc` across threads; calls run
//! concurrently (the model is immutable; each call builds its own tensors).
#![warn(missing_docs)]

pub mod classify;
pub mod compute;
pub mod eval;
pub mod eval_ctc;
pub mod eval_stream;
pub mod held;
pub mod interop;
pub mod live;
pub mod onnx;
mod spans;
pub mod stream;
pub mod transcribe;

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::tensor::{Bool, Tensor, TensorData};
use models::precision::ComputeModel;
use serde::Serialize;

// The types of other SignFlow crates that this crate's signatures use, so an embedder needs
// no other SignFlow crate to call it.
pub use bundle::{ModelCard, TrainingSplit};
pub use classify::{Classifier, Prediction, Ranked};
pub use compute::Compute;
pub use data::preprocess::Preprocessor;
pub use data::tokens::WordList;
pub use data::{Prepared, Sample};
pub use device::{Choose, DeviceSpec, Precision, PrecisionSetting, SelectionPolicy};
pub use stream::{SignEvent, StreamConfig, StreamingRecognizer};
pub use transcribe::{TokenSpan, Transcriber, Transcript};

/// The inference backend (the run-time dispatch backend, no autodiff).
pub type Backend = device::Backend;

/// Every way inference can fail; each names the file or input it is about.
#[derive(Debug, thiserror::Error)]
pub enum InferError {
    /// The model directory or its card.
    #[error("{path}: {message}")]
    Model {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A bundle file (missing, corrupt, another architecture).
    #[error(transparent)]
    Bundle(#[from] bundle::BundleError),
    /// Device selection.
    #[error(transparent)]
    Device(#[from] device::DeviceError),
    /// One input of a call (shape, feature count, non-finite values).
    #[error("input {index}: {message}")]
    Input {
        /// Position of the input in the call.
        index: usize,
        /// What is wrong and what was expected.
        message: String,
    },
    /// A request the device or model cannot serve (e.g. bf16 where unsupported).
    #[error("{0}")]
    Unsupported(String),
    /// A dataset file or directory (the message names it).
    #[error(transparent)]
    Data(data::DataError),
    /// A sequence file that could be read but not prepared for the model.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// An evaluation that cannot run as asked (empty split, signs the model does not know, too many bad files).
    #[error("{0}")]
    Eval(String),
}

/// `Result` with [`InferError`].
pub type Result<T, E = InferError> = std::result::Result<T, E>;

/// How to load a predictor.
#[derive(Debug, Clone)]
pub struct PredictorOptions {
    /// Which device (`auto` by default).
    pub device: DeviceSpec,
    /// How `auto` chooses.
    pub policy: SelectionPolicy,
    /// How to compute: floating point at a precision (the default: the device's choice, f32 on
    /// the CPU) or the int8 eval graph on the CPU.
    pub compute: Compute,
    /// With [`Compute::Float`] on the CPU at f32, run conv-transformers through [`engine`]'s f32 eval graph (BatchNorm
    /// folded, no autodiff or tensor dispatch, large batches split over the threads: faster than
    /// Burn's forward, figures in docs/PERFORMANCE.md; logits equal to it within float
    /// rounding); elsewhere (other devices, precisions and architectures) run Burn's forward of
    /// the model with the norms beside its linear layers folded into them ([`engine::fold`]:
    /// fewer kernels on a GPU; equal within float rounding). On by default; `false` keeps Burn's
    /// forward of the model as trained, the path the trainer's evaluation takes, for results
    /// equal to it to the last bit.
    pub eval_graph: bool,
    /// Labels returned per prediction.
    pub top_k: usize,
    /// Run one forward pass at load so the first real call is not the slow one.
    pub warm_up: bool,
    /// With `device = auto`: the fixed ranking, or `Fastest`: time batch-1 forwards of this model
    /// on each usable kind of device and take the one with the lowest median latency.
    pub choose: device::Choose,
}

impl Default for PredictorOptions {
    fn default() -> Self {
        Self {
            device: DeviceSpec::Auto,
            policy: SelectionPolicy::default(),
            compute: Compute::default(),
            eval_graph: true,
            top_k: 5,
            warm_up: true,
            choose: device::Choose::Ranked,
        }
    }
}

/// A loaded model of either task as a shared handle takes it (the streaming recognizer):
/// [`Predictor`], [`Classifier`] or [`Transcriber`], behind `Arc<dyn Model>`.
pub trait Model: AsRef<Predictor> + std::fmt::Debug + Send + Sync {}

impl<T: AsRef<Predictor> + std::fmt::Debug + Send + Sync> Model for T {}

impl AsRef<Predictor> for Predictor {
    fn as_ref(&self) -> &Predictor {
        self
    }
}

/// A loaded model, typed by its task ([`Predictor::into_task`]).
#[derive(Debug)]
pub enum Loaded {
    /// A classification model.
    Classifier(Classifier),
    /// A continuous-recognition (CTC) model.
    Transcriber(Transcriber),
}

impl Loaded {
    /// What every model has (card, preprocessing, device).
    pub fn predictor(&self) -> &Predictor {
        match self {
            Loaded::Classifier(c) => c,
            Loaded::Transcriber(t) => t,
        }
    }

    /// The predictor, for what takes a model of either task (the streaming recognizer,
    /// [`measure`]).
    pub fn into_predictor(self) -> Predictor {
        match self {
            Loaded::Classifier(c) => c.into_predictor(),
            Loaded::Transcriber(t) => t.into_predictor(),
        }
    }
}

/// A trained model of either task on a device: what every model has. Its outputs come from
/// [`Classifier`] or [`Transcriber`] ([`Predictor::into_task`]).
#[derive(Debug)]
pub struct Predictor {
    model: held::Held<ComputeModel<Backend>>,
    card: ModelCard,
    preprocessor: Preprocessor,
    device: device::DispatchDevice,
    device_name: String,
    device_reason: String,
    precision: Precision,
    /// The eval graph that replaces Burn's forward (f32 or int8; see
    /// [`PredictorOptions::eval_graph`] and [`PredictorOptions::int8`]).
    graph: Option<engine::EvalGraph>,
    top_k: usize,
    dir: PathBuf,
    /// A CTC model's decoder (the card's, or the lexicon given to [`Transcriber::with_lexicon`]).
    decoder: models::decode::CtcDecoder,
}

impl Predictor {
    /// Load `run_dir` (or its `model/` directory) onto the selected device.
    pub fn load(run_dir: &Path, opts: &PredictorOptions) -> Result<Self> {
        let dir = bundle::layout::find_model_dir(run_dir)?;
        if opts.device == DeviceSpec::Auto && opts.choose == device::Choose::Fastest {
            return Self::load_fastest(&dir, opts);
        }
        let selected = device::resolve(&opts.device, &opts.policy)?;
        Self::load_on(dir, selected, opts)
    }

    /// Batch-1 forwards timed per candidate device (after two warm-up passes).
    const TIMED_FORWARDS: usize = 10;

    /// `Choose::Fastest`: the model on every usable kind of device, batch-1 latency timed on
    /// each; the fastest is kept, with the figures in its reason.
    fn load_fastest(dir: &Path, opts: &PredictorOptions) -> Result<Self> {
        let (found, _skipped) = device::candidates(&opts.policy);
        let mut best: Option<(f64, Self)> = None;
        let mut figures = Vec::new();
        for selected in found {
            let p = Self::load_on(dir.to_path_buf(), selected, &PredictorOptions { warm_up: true, ..opts.clone() })?;
            let ms = p.batch1_latency_ms(Self::TIMED_FORWARDS)?;
            figures.push((p.device_name.clone(), format!("{ms:.2} ms")));
            if best.as_ref().is_none_or(|(b, _)| ms < *b) {
                best = Some((ms, p));
            }
        }
        let (_, mut p) = best.ok_or_else(|| InferError::Unsupported("no usable device".into()))?;
        p.device_reason = device::candidates::fastest_reason(
            &figures,
            &format!("median of {} batch-1 forwards of this model", Self::TIMED_FORWARDS),
        );
        Ok(p)
    }

    /// Median wall time of `runs` batch-1 forwards of a zero window, ms.
    fn batch1_latency_ms(&self, runs: usize) -> Result<f64> {
        let w = self.window();
        let input = Prepared {
            window: w,
            features: self.card.input_features,
            valid: w,
            data: vec![0.0; w * self.card.input_features],
        };
        self.run_once(std::slice::from_ref(&input))?;
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t0 = std::time::Instant::now();
            self.run_once(std::slice::from_ref(&input))?;
            times.push(t0.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        Ok(times[times.len() / 2])
    }

    fn load_on(dir: PathBuf, selected: device::SelectedDevice, opts: &PredictorOptions) -> Result<Self> {
        let (setting, int8) = match opts.compute {
            Compute::Float(p) => (p, false),
            Compute::Int8 => (PrecisionSetting::F32, true),
        };
        let resolved = setting.resolve(&selected.selection.capabilities);
        if resolved.warning.is_some() {
            let caps = &selected.selection.capabilities;
            return Err(InferError::Unsupported(format!(
                "{} is not supported on {}; use f32{}",
                setting,
                selected.selection.name,
                if caps.supports(Precision::F16) { " or f16" } else { "" }
            )));
        }
        let precision = resolved.precision;
        if int8 && selected.selection.target != device::Target::Cpu {
            return Err(InferError::Unsupported(format!(
                "int8 inference runs on the CPU; {} was selected (use --device cpu)",
                selected.selection.name
            )));
        }
        let (card, model) = bundle::load_bundle::<Backend>(&dir, &selected.device)?;
        let preprocessor = Preprocessor::new(card.preprocess.clone()).map_err(|e| InferError::Model {
            path: dir.join(bundle::layout::CARD_FILE),
            message: format!("preprocess: {e}"),
        })?;
        let graph_weights = if int8 {
            Some(engine::Weights::Int8)
        } else {
            let f32_cpu = selected.selection.target == device::Target::Cpu && precision == Precision::F32;
            let supported = matches!(model, models::SignModel::ConvTransformer(_));
            (opts.eval_graph && f32_cpu && supported).then_some(engine::Weights::F32)
        };
        let graph = match graph_weights {
            Some(w) => Some(engine::EvalGraph::new(&model, w).map_err(|e| InferError::Model {
                path: dir.join(bundle::layout::WEIGHTS_FILE),
                message: e.to_string(),
            })?),
            None => None,
        };
        let dtype = precision.float_dtype();
        let model = held::Held::new(if opts.eval_graph {
            engine::inference_model(model, dtype)
        } else {
            ComputeModel::new(model, dtype)
        });
        let decoder = match &card.ctc {
            Some(ctc) => ctc.decoder(&card.labels).map_err(|message| InferError::Model {
                path: dir.join(bundle::layout::CARD_FILE),
                message: format!("ctc.lexicon: {message}"),
            })?,
            None => Default::default(),
        };
        let p = Self {
            decoder,
            model,
            preprocessor,
            device: selected.device,
            device_name: selected.selection.name,
            device_reason: selected.selection.reason,
            precision,
            graph,
            top_k: opts.top_k.clamp(1, card.labels.len()),
            card,
            dir,
        };
        if opts.warm_up {
            let w = p.window();
            let warm = Prepared {
                window: w,
                features: p.card.input_features,
                valid: w,
                data: vec![0.0; w * p.card.input_features],
            };
            p.run_once(&[warm])?;
        }
        Ok(p)
    }

    /// The model's whole output for `prepared` of its task (classes or decoded tokens),
    /// discarded: for warm-up and timing.
    fn run_once(&self, prepared: &[Prepared]) -> Result<()> {
        match self.card.task {
            models::Task::Classification => self.classify(prepared).map(|_| ()),
            models::Task::Ctc => self.decode(prepared).map(|_| ()),
        }
    }

    /// This model typed by its task.
    pub fn into_task(self) -> Loaded {
        match self.card.task {
            models::Task::Classification => Loaded::Classifier(Classifier(self)),
            models::Task::Ctc => Loaded::Transcriber(Transcriber(self)),
        }
    }

    /// Why this device was chosen (with the timings, for `Choose::Fastest`).
    pub fn device_reason(&self) -> &str {
        &self.device_reason
    }

    /// The model card.
    pub fn card(&self) -> &ModelCard {
        &self.card
    }

    /// Class names, index = model output.
    pub fn labels(&self) -> &[String] {
        &self.card.labels
    }

    /// The preprocessing of the model.
    pub fn preprocessor(&self) -> &Preprocessor {
        &self.preprocessor
    }

    /// Frames per model input.
    pub fn window(&self) -> usize {
        self.card.preprocess.window
    }

    /// The device's name.
    pub fn device_name(&self) -> &str {
        &self.device_name
    }

    /// The float precision of Burn's forward (f32 when an eval graph runs instead).
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// The numbers the model computes in: `int8` (the int8 eval graph) or the float precision.
    pub fn compute_name(&self) -> String {
        match &self.graph {
            Some(g) => g.weights().to_string(),
            None => self.precision.to_string(),
        }
    }

    /// Bytes of the parameters the model computes with (the int8 graph's, or Burn's at its
    /// precision).
    pub fn parameter_bytes(&self) -> usize {
        match &self.graph {
            Some(g) => g.bytes(),
            None => {
                let per = if self.precision == Precision::F32 { 4 } else { 2 };
                burn::module::Module::num_params(self.model.model()) * per
            }
        }
    }

    /// What runs the model: `eval graph` ([`engine`], f32 or int8) or `burn` (Burn's forward).
    pub fn engine_name(&self) -> &'static str {
        if self.graph.is_some() {
            "eval graph"
        } else {
            "burn"
        }
    }

    /// The bundle directory loaded.
    pub fn model_dir(&self) -> &Path {
        &self.dir
    }

    /// Preprocess one raw sample exactly as training does (without augmentation).
    pub fn prepare(&self, sample: &Sample, index: usize) -> Result<Prepared> {
        let prepared = self.preprocessor.prepare(sample, Path::new("input")).map_err(|e| InferError::Input {
            index,
            message: e.to_string().trim_start_matches("input: ").to_string(),
        })?;
        if prepared.features != self.card.input_features {
            return Err(InferError::Input {
                index,
                message: format!(
                    "gives {} features per frame after preprocessing, the model takes {} (check the landmark layout or feature count)",
                    prepared.features, self.card.input_features
                ),
            });
        }
        Ok(prepared)
    }

    /// Read one sequence file (`.parquet` in the ISLR layout, `.npy`, `.npz` or `.pose`, the
    /// latter mapped with the model's preprocessing, or a `.jsonl` recording of live frames,
    /// [`live::read_recording`]); errors name the file.
    pub fn read_file(&self, path: &Path) -> Result<Sample> {
        if live::is_recording(path) {
            return live::read_recording(path).map(Sample::Landmarks);
        }
        self.read_format(format_of(path)?, path, None)
    }

    /// Read a sequence file of a known format (`sequence`: which one of a file holding
    /// several); errors name the file.
    pub(crate) fn read_format(
        &self,
        format: data::index::Format,
        path: &Path,
        sequence: Option<i64>,
    ) -> Result<Sample> {
        data::dataset::read_sample(format, path, sequence, &self.card.preprocess).map_err(InferError::Data)
    }

    /// Read one sequence file (see [`Predictor::read_file`]) and prepare it; errors name the file.
    pub fn prepare_file(&self, path: &Path) -> Result<Prepared> {
        let sample = self.read_file(path)?;
        self.prepare(&sample, 0).map_err(|e| file_error(path, e))
    }

    /// Read a sequence file of a known format and prepare it; errors name the file.
    pub(crate) fn prepare_read(
        &self,
        format: data::index::Format,
        path: &Path,
        sequence: Option<i64>,
    ) -> Result<Prepared> {
        let sample = self.read_format(format, path, sequence)?;
        self.prepare(&sample, 0).map_err(|e| file_error(path, e))
    }

    /// Run `model` over `files` in batches of `batch`, reading and preparing the next batch on
    /// worker threads meanwhile; `on_result` gets every file in order with its output or the
    /// error that names it. An error of `model` itself ends the call.
    pub(crate) fn map_files<T>(
        &self,
        files: &[PathBuf],
        batch: usize,
        model: impl Fn(&[Prepared]) -> Result<Vec<T>>,
        mut on_result: impl FnMut(&Path, Result<T>),
    ) -> Result<()> {
        prepare_ahead(
            files.len(),
            batch,
            |i| self.prepare_file(&files[i]),
            |chunk| {
                let (windows, outcomes) = take_windows(chunk);
                let mut outputs = model(&windows)?.into_iter();
                for (i, error) in outcomes {
                    let result = match error {
                        None => Ok(outputs.next().expect("one output per prepared window")),
                        Some(e) => Err(e),
                    };
                    on_result(&files[i], result);
                }
                Ok(())
            },
        )
        .map(|_| ())
    }

    /// One host read of a `[batch, classes]` tensor, split into rows.
    pub(crate) fn rows(&self, t: Tensor<Backend, 2>) -> Vec<Vec<f32>> {
        let values: Vec<f32> = t.into_data().iter::<f32>().collect();
        values.chunks(self.card.labels.len()).map(<[f32]>::to_vec).collect()
    }

    /// Validate `prepared` (non-empty) and run the model: logits `[batch, classes]` in f32.
    pub(crate) fn forward_checked(&self, prepared: &[Prepared]) -> Result<Tensor<Backend, 2>> {
        if self.card.task != models::Task::Classification {
            return Err(InferError::Unsupported(format!(
                "{} is a continuous-recognition (CTC) model: it outputs token sequences, use `transcribe` (CLI: `infer predict` prints them)",
                self.dir.display()
            )));
        }
        if let Some(graph) = &self.graph {
            let logits = self.run_graph(prepared, |x, valid, w| graph.logits(x, valid, w))?;
            let shape = [prepared.len(), self.card.labels.len()];
            return Ok(Tensor::from_data(TensorData::new(logits, shape), &self.device));
        }
        let (x, m) = self.input_tensors(prepared)?;
        self.model.try_forward(x, m).map_err(|e| InferError::Input { index: 0, message: e.to_string() })
    }

    /// Check `prepared` and run the eval graph on it (`run(inputs, valid frames, window)`).
    pub(crate) fn run_graph(
        &self,
        prepared: &[Prepared],
        run: impl FnOnce(&[f32], &[usize], usize) -> std::result::Result<Vec<f32>, engine::EngineError>,
    ) -> Result<Vec<f32>> {
        self.check_prepared(prepared)?;
        let inputs: Vec<f32> = prepared.iter().flat_map(|p| p.data.iter().copied()).collect();
        let valid: Vec<usize> = prepared.iter().map(|p| p.valid).collect();
        run(&inputs, &valid, self.window()).map_err(|e| InferError::Input { index: 0, message: e.to_string() })
    }

    /// Check `prepared` against the model and put it on the device: inputs `[batch, window,
    /// features]` and the padding mask `[batch, window]`.
    pub(crate) fn input_tensors(
        &self,
        prepared: &[Prepared],
    ) -> Result<(Tensor<Backend, 3>, Tensor<Backend, 2, Bool>)> {
        self.check_prepared(prepared)?;
        let (w, f) = (self.window(), self.card.input_features);
        let b = prepared.len();
        let mut inputs = Vec::with_capacity(b * w * f);
        let mut mask = Vec::with_capacity(b * w);
        for p in prepared {
            inputs.extend_from_slice(&p.data);
            mask.extend(p.pad_mask());
        }
        let x = Tensor::<Backend, 3>::from_data(TensorData::new(inputs, [b, w, f]), &self.device);
        let m = Tensor::<Backend, 2, Bool>::from_data(TensorData::new(mask, [b, w]), &self.device);
        Ok((x, m))
    }

    /// An error naming the first prepared window that does not fit the model (shape, valid
    /// frames, a non-finite value).
    fn check_prepared(&self, prepared: &[Prepared]) -> Result<()> {
        let (w, f) = (self.window(), self.card.input_features);
        for (i, p) in prepared.iter().enumerate() {
            if p.window != w || p.features != f || p.data.len() != w * f {
                return Err(InferError::Input {
                    index: i,
                    message: format!(
                        "prepared window is {} frames x {} features ({} values), the model takes {w} x {f}",
                        p.window,
                        p.features,
                        p.data.len()
                    ),
                });
            }
            if p.valid == 0 || p.valid > w {
                return Err(InferError::Input {
                    index: i,
                    message: format!("has {} valid frames; expected 1..={w}", p.valid),
                });
            }
            if let Some(bad) = p.data.iter().position(|v| !v.is_finite()) {
                return Err(InferError::Input {
                    index: i,
                    message: format!("value {bad} is not finite ({}); prepared windows must be NaN-free", p.data[bad]),
                });
            }
        }
        Ok(())
    }
}

/// The sequence files `infer` reads, for messages.
pub const SEQUENCE_EXTENSIONS: &str = ".parquet, .npy, .npz, .pose or .jsonl (a recording)";

/// Whether `path` has the extension of a sequence file `infer` reads (a dataset format or a
/// `.jsonl` recording).
pub fn is_sequence_file(path: &Path) -> bool {
    data::index::Format::from_extension(path).is_some() || live::is_recording(path)
}

/// Every sequence file ([`is_sequence_file`]) under `dir`, sorted. Directories
/// reached through a symbolic link are not entered, so a link loop cannot make the walk endless
/// (linked files are read). An error names a directory that cannot be read.
pub fn sequence_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries =
            std::fs::read_dir(&d).map_err(|e| InferError::File { path: d.clone(), message: e.to_string() })?;
        for e in entries.flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(kind) if kind.is_dir() => stack.push(p),
                Ok(_) if is_sequence_file(&p) && p.is_file() => out.push(p),
                _ => {}
            }
        }
    }
    out.sort();
    Ok(out)
}

/// One batch of prepared inputs: (position, prepared window or the error naming the input).
pub(crate) type Chunk = Vec<(usize, Result<Prepared>)>;

/// Move a chunk's prepared windows out, in order, and keep per position its error, or `None`
/// where the next window belongs (no copy of the window data).
/// The sequence format of `path` by its extension; an error naming the file otherwise.
fn format_of(path: &Path) -> Result<data::index::Format> {
    data::index::Format::from_extension(path).ok_or_else(|| InferError::File {
        path: path.into(),
        message: format!("expected a {SEQUENCE_EXTENSIONS} file"),
    })
}

/// An input error of preparing the one sequence of `path`, as an error naming the file.
fn file_error(path: &Path, e: InferError) -> InferError {
    match e {
        InferError::Input { message, .. } => InferError::File { path: path.into(), message },
        e => e,
    }
}

pub(crate) fn take_windows(chunk: Chunk) -> (Vec<Prepared>, Vec<(usize, Option<InferError>)>) {
    let mut windows = Vec::with_capacity(chunk.len());
    let outcomes = chunk
        .into_iter()
        .map(|(i, r)| match r {
            Ok(p) => {
                windows.push(p);
                (i, None)
            }
            Err(e) => (i, Some(e)),
        })
        .collect();
    (windows, outcomes)
}

/// Prepare positions `0..n` in batches of `batch` on worker threads (rayon within a batch), one
/// batch ahead of `consume`, which runs on the calling thread in order. An error from `consume`
/// stops the reading and is returned. Returns the time the calling thread waited for batches.
pub(crate) fn prepare_ahead(
    n: usize,
    batch: usize,
    read: impl Fn(usize) -> Result<Prepared> + Sync,
    mut consume: impl FnMut(Chunk) -> Result<()>,
) -> Result<std::time::Duration> {
    use rayon::prelude::*;
    let batch = batch.max(1);
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Chunk>(1);
        let read = &read;
        s.spawn(move || {
            for start in (0..n).step_by(batch) {
                let prepared: Chunk = (start..(start + batch).min(n)).into_par_iter().map(|i| (i, read(i))).collect();
                if tx.send(prepared).is_err() {
                    break;
                }
            }
        });
        let mut waited = std::time::Duration::ZERO;
        loop {
            let t = Instant::now();
            let Ok(chunk) = rx.recv() else { break };
            waited += t.elapsed();
            consume(chunk)?;
        }
        Ok(waited)
    })
}

/// Latency figures of repeated calls.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyStats {
    /// Batch size.
    pub batch: usize,
    /// Precision ([`Predictor::compute_name`]).
    pub precision: String,
    /// What ran the model ([`Predictor::engine_name`]).
    pub engine: String,
    /// Timed runs.
    pub runs: usize,
    /// Median latency.
    pub p50_ms: f64,
    /// 95th-percentile latency.
    pub p95_ms: f64,
    /// 99th-percentile latency.
    pub p99_ms: f64,
    /// Throughput at the median.
    pub samples_per_s: f64,
    /// Bytes of the parameters computed with ([`Predictor::parameter_bytes`]).
    pub parameter_bytes: usize,
}

/// Time `runs` calls of the model's whole output (`predict_prepared`, or `transcribe_prepared` for CTC models) on `batch` copies of `window` (after 3 warm-ups).
pub fn measure(predictor: &Predictor, window: &Prepared, batch: usize, runs: usize) -> Result<LatencyStats> {
    let inputs = vec![window.clone(); batch];
    for _ in 0..3 {
        predictor.run_once(&inputs)?;
    }
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        predictor.run_once(&inputs)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    let q = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize];
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    Ok(LatencyStats {
        batch,
        precision: predictor.compute_name(),
        engine: predictor.engine_name().to_string(),
        runs: times.len(),
        p50_ms: q(0.5),
        p95_ms: q(0.95),
        p99_ms: q(0.99),
        samples_per_s: batch as f64 * 1e3 / mean,
        parameter_bytes: predictor.parameter_bytes(),
    })
}

#[cfg(test)]
mod tests {
    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn predictors_are_send_and_sync() {
        assert_send_sync::<super::Predictor>();
        assert_send_sync::<super::Classifier>();
        assert_send_sync::<super::Transcriber>();
    }
}
