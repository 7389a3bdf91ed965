//! Sign classification: one class ranking per sequence, from a classification model.
//!
//! A [`Classifier`] is a [`Predictor`] whose model classifies (the card's task is
//! `classification`); it dereferences to the predictor for what every model has (card,
//! preprocessing, reading and preparing files, device). A continuous-recognition model is a
//! [`crate::Transcriber`]; asking one type for the other's output does not compile.
//!
//! ```no_run
//! use infer::{Classifier, PredictorOptions};
//! let classifier = Classifier::load("runs/default-20261122-193204".as_ref(), &PredictorOptions::default())?;
//! let sample = classifier.read_file("clip.parquet".as_ref())?;
//! let prediction = classifier.predict(&sample)?;
//! println!("{} ({:.2})", prediction.best().label, prediction.best().probability);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::ops::Deref;
use std::path::{Path, PathBuf};

use data::{Prepared, Sample};
use serde::Serialize;

use crate::{InferError, Predictor, PredictorOptions, Result};

/// One ranked class.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ranked {
    /// Class name.
    pub label: String,
    /// Class index (model output).
    pub index: usize,
    /// Softmax probability.
    pub probability: f32,
}

/// The top-k classes of one input, most probable first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    /// Classes, most probable first.
    pub top: Vec<Ranked>,
}

impl Prediction {
    /// The most probable class.
    pub fn best(&self) -> &Ranked {
        &self.top[0]
    }
}

/// A classification model on a device: see the module docs. `Send + Sync`, like [`Predictor`].
#[derive(Debug)]
pub struct Classifier(pub(crate) Predictor);

impl Classifier {
    /// Load `run_dir` (or its `model/` directory); an error naming it when its model is not a
    /// classifier.
    pub fn load(run_dir: &Path, opts: &PredictorOptions) -> Result<Self> {
        Self::try_from(Predictor::load(run_dir, opts)?)
    }

    /// The predictor, for what takes any model (the streaming recognizer, [`crate::measure`]).
    pub fn into_predictor(self) -> Predictor {
        self.0
    }

    /// Classify one raw sequence (landmarks or per-frame features).
    pub fn predict(&self, sample: &Sample) -> Result<Prediction> {
        Ok(self.predict_batch(std::slice::from_ref(sample))?.remove(0))
    }

    /// Classify many raw sequences in one batch.
    pub fn predict_batch(&self, samples: &[Sample]) -> Result<Vec<Prediction>> {
        let prepared = samples.iter().enumerate().map(|(i, s)| self.prepare(s, i)).collect::<Result<Vec<_>>>()?;
        self.predict_prepared(&prepared)
    }

    /// Classify already prepared windows (`window x input_features`, e.g. from
    /// [`Predictor::prepare`] or your own pipeline).
    pub fn predict_prepared(&self, prepared: &[Prepared]) -> Result<Vec<Prediction>> {
        self.0.classify(prepared)
    }

    /// Classify files in batches of `batch`: the next batch is read and prepared on worker
    /// threads while the model runs the current one. `on_result` gets every file in order, with
    /// its prediction or the error that names it; an error of the model itself ends the call.
    pub fn predict_files(
        &self,
        files: &[PathBuf],
        batch: usize,
        mut on_result: impl FnMut(&Path, Result<Prediction>),
    ) -> Result<()> {
        self.predict_files_dyn(files, batch, &mut on_result)
    }

    /// [`Classifier::predict_files`] with the callback behind `dyn`, so that the batching, the
    /// reader threads and the model run are compiled once, in this crate, not again for each
    /// caller's closure.
    #[inline(never)]
    fn predict_files_dyn(
        &self,
        files: &[PathBuf],
        batch: usize,
        on_result: &mut dyn FnMut(&Path, Result<Prediction>),
    ) -> Result<()> {
        self.0.map_files(files, batch, |windows| self.0.classify(windows), on_result)
    }

    /// Class probabilities (softmax in f32) per prepared window.
    pub fn probabilities(&self, prepared: &[Prepared]) -> Result<Vec<Vec<f32>>> {
        self.0.class_probabilities(prepared)
    }

    /// Raw class scores (logits, in f32) per prepared window: for losses and calibration, where
    /// probabilities that round to 0 in f32 would lose information.
    pub fn logits(&self, prepared: &[Prepared]) -> Result<Vec<Vec<f32>>> {
        if prepared.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.0.rows(self.0.forward_checked(prepared)?))
    }
}

impl TryFrom<Predictor> for Classifier {
    type Error = InferError;

    /// The predictor as a classifier; an error naming its directory when it is a CTC model.
    fn try_from(predictor: Predictor) -> Result<Self> {
        match predictor.card().task {
            models::Task::Classification => Ok(Self(predictor)),
            models::Task::Ctc => Err(InferError::Unsupported(format!(
                "{} is a continuous-recognition (CTC) model: it outputs token sequences; load it as a `Transcriber` (CLI: `infer predict` prints them)",
                predictor.model_dir().display()
            ))),
        }
    }
}

impl AsRef<Predictor> for Classifier {
    fn as_ref(&self) -> &Predictor {
        &self.0
    }
}

impl Deref for Classifier {
    type Target = Predictor;

    fn deref(&self) -> &Predictor {
        &self.0
    }
}

impl Predictor {
    /// Class probabilities (softmax in f32) per prepared window of a classification model.
    pub(crate) fn class_probabilities(&self, prepared: &[Prepared]) -> Result<Vec<Vec<f32>>> {
        if prepared.is_empty() {
            return Ok(Vec::new());
        }
        let probs = burn::tensor::activation::softmax(self.forward_checked(prepared)?, 1);
        Ok(self.rows(probs))
    }

    /// The top-k ranking per prepared window of a classification model.
    pub(crate) fn classify(&self, prepared: &[Prepared]) -> Result<Vec<Prediction>> {
        Ok(self.class_probabilities(prepared)?.iter().map(|p| self.rank(p)).collect())
    }

    fn rank(&self, probs: &[f32]) -> Prediction {
        let mut order: Vec<usize> = (0..probs.len()).collect();
        order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
        let labels = self.labels();
        Prediction {
            top: order
                .into_iter()
                .take(self.top_k)
                .map(|i| Ranked { label: labels[i].clone(), index: i, probability: probs[i] })
                .collect(),
        }
    }
}
