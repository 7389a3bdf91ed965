//! Continuous recognition: a CTC model's per-frame token scores decoded into token sequences.
//!
//! A [`Transcriber`] is a [`Predictor`] whose model is a CTC model (the card's task is `ctc`); it
//! dereferences to the predictor for what every model has. A classifier is a
//! [`crate::Classifier`]; asking one type for the other's output does not compile.
//!
//! The decoder is the one in the model card (`[ctc] decoder`, `beam_width` and lexicon of
//! training; [`Transcriber::with_lexicon`] replaces the lexicon): greedy, or prefix beam search
//! with its labelling placed on the frames by the most probable alignment
//! ([`models::decode::align`]). Every token comes with the frames it occupies and its
//! mean probability there.
//!
//! Frames are those of the model's input window: a sequence's non-empty frames, resampled to
//! the window when longer than it (`preprocess.long_sequences = "resize"`, which CTC training
//! requires). The streaming recognizer feeds windows no longer than the model's, so its spans
//! are in the frame numbers pushed.
//!
//! ```no_run
//! use infer::{PredictorOptions, Transcriber};
//! let transcriber = Transcriber::load("runs/ctc-20261124-180000".as_ref(), &PredictorOptions::default())?;
//! let sample = transcriber.read_file("sentence.npy".as_ref())?;
//! let transcript = transcriber.transcribe(&sample)?;
//! println!("{}", transcript.text);
//! for t in &transcript.tokens {
//!     println!("{} frames {}-{} ({:.2})", t.label, t.start, t.end, t.confidence);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bundle::CtcCard;
use burn::tensor::{Tensor, TensorData};
use data::tokens::{WordList, BLANK};
use data::{Prepared, Sample};
use models::decode::CtcDecoder;
use serde::Serialize;

use crate::{InferError, Predictor, PredictorOptions, Result};

/// One decoded token.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TokenSpan {
    /// The token (a character or a gloss).
    pub label: String,
    /// Its class index (model output; 0 is the blank and never appears).
    pub index: usize,
    /// First frame of the input window it occupies.
    pub start: usize,
    /// Last frame it occupies.
    pub end: usize,
    /// Its mean probability over those frames.
    pub confidence: f32,
}

/// The token sequence of one input.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transcript {
    /// The tokens joined: characters as they are, glosses with spaces.
    pub text: String,
    /// The tokens in order.
    pub tokens: Vec<TokenSpan>,
}

impl Transcript {
    /// The class indices of the tokens.
    pub fn indices(&self) -> Vec<usize> {
        self.tokens.iter().map(|t| t.index).collect()
    }
}

/// A continuous-recognition (CTC) model on a device: see the module docs. `Send + Sync`, like
/// [`Predictor`].
#[derive(Debug)]
pub struct Transcriber(pub(crate) Predictor);

impl Transcriber {
    /// Load `run_dir` (or its `model/` directory); an error naming it when its model is not a
    /// CTC model.
    pub fn load(run_dir: &Path, opts: &PredictorOptions) -> Result<Self> {
        Self::try_from(Predictor::load(run_dir, opts)?)
    }

    /// The predictor, for what takes any model (the streaming recognizer, [`crate::measure`]).
    pub fn into_predictor(self) -> Predictor {
        self.0
    }

    /// Per-frame log-probabilities (log-softmax over classes, f32) of each prepared window,
    /// `[window, classes]` row-major, with the window's valid frames.
    pub fn frame_log_probs(&self, prepared: &[Prepared]) -> Result<Vec<(Vec<f32>, usize)>> {
        self.0.ctc_frame_log_probs(prepared)
    }

    /// The CTC decoder transcripts use: the card's decoder and beam width, with the card's
    /// lexicon or the one given to [`Transcriber::with_lexicon`].
    pub fn decoder(&self) -> &CtcDecoder {
        &self.0.decoder
    }

    /// This transcriber with beam search constrained to transcripts made of `words`
    /// (whitespace-separated words spelled in the model's tokens; see [`models::lexicon`])
    /// instead of the card's lexicon; `None` decodes without a lexicon. Chosen when the
    /// transcriber is made, before it is shared (it takes it by value). An error for a word the
    /// model cannot spell (naming the word and its line).
    pub fn with_lexicon(mut self, words: Option<&WordList>) -> Result<Self> {
        let unit = self.0.ctc_card()?.unit;
        let lexicon = words
            .map(|w| bundle::build_lexicon(w, unit, self.labels()))
            .transpose()
            .map_err(InferError::Unsupported)?;
        self.0.decoder.lexicon = lexicon.map(Arc::new);
        Ok(self)
    }

    /// Decode already prepared windows (see [`Predictor::prepare`]).
    pub fn transcribe_prepared(&self, prepared: &[Prepared]) -> Result<Vec<Transcript>> {
        self.0.decode(prepared)
    }

    /// Decode one raw sequence (landmarks or per-frame features) into tokens.
    pub fn transcribe(&self, sample: &Sample) -> Result<Transcript> {
        Ok(self.transcribe_batch(std::slice::from_ref(sample))?.remove(0))
    }

    /// Decode many raw sequences in one batch.
    pub fn transcribe_batch(&self, samples: &[Sample]) -> Result<Vec<Transcript>> {
        let prepared = samples.iter().enumerate().map(|(i, s)| self.prepare(s, i)).collect::<Result<Vec<_>>>()?;
        self.transcribe_prepared(&prepared)
    }

    /// Decode files in batches of `batch`, reading the next batch while the model runs (as
    /// [`crate::Classifier::predict_files`]); `on_result` gets every file in order.
    pub fn transcribe_files(
        &self,
        files: &[PathBuf],
        batch: usize,
        mut on_result: impl FnMut(&Path, Result<Transcript>),
    ) -> Result<()> {
        self.transcribe_files_dyn(files, batch, &mut on_result)
    }

    /// [`Transcriber::transcribe_files`] with the callback behind `dyn` (compiled once, here; see
    /// [`crate::Classifier::predict_files`]).
    #[inline(never)]
    fn transcribe_files_dyn(
        &self,
        files: &[PathBuf],
        batch: usize,
        on_result: &mut dyn FnMut(&Path, Result<Transcript>),
    ) -> Result<()> {
        self.0.map_files(files, batch, |windows| self.0.decode(windows), on_result)
    }
}

impl TryFrom<Predictor> for Transcriber {
    type Error = InferError;

    /// The predictor as a transcriber; an error naming its directory when it is a classifier.
    fn try_from(predictor: Predictor) -> Result<Self> {
        predictor.ctc_card()?;
        Ok(Self(predictor))
    }
}

impl AsRef<Predictor> for Transcriber {
    fn as_ref(&self) -> &Predictor {
        &self.0
    }
}

impl Deref for Transcriber {
    type Target = Predictor;

    fn deref(&self) -> &Predictor {
        &self.0
    }
}

impl Predictor {
    /// The CTC section of the card; an error for a classification model.
    pub(crate) fn ctc_card(&self) -> Result<&CtcCard> {
        self.card.ctc.as_ref().ok_or_else(|| {
            InferError::Unsupported(format!(
                "{} is a sign classifier: it outputs one class per sequence; load it as a `Classifier` (CLI: `infer predict` prints its classes)",
                self.dir.display()
            ))
        })
    }

    /// Per-frame log-probabilities of a CTC model (see [`Transcriber::frame_log_probs`]).
    pub(crate) fn ctc_frame_log_probs(&self, prepared: &[Prepared]) -> Result<Vec<(Vec<f32>, usize)>> {
        self.ctc_card()?;
        if prepared.is_empty() {
            return Ok(Vec::new());
        }
        let per = self.window() * self.card.labels.len();
        let logits = if let Some(graph) = &self.graph {
            let logits = self.run_graph(prepared, |x, valid, w| graph.frame_logits(x, valid, w))?;
            let shape = [prepared.len(), self.window(), self.card.labels.len()];
            Tensor::from_data(TensorData::new(logits, shape), &self.device)
        } else {
            let (x, m) = self.input_tensors(prepared)?;
            self.model.try_forward_frames(x, m).map_err(|e| InferError::Input { index: 0, message: e.to_string() })?
        };
        let all = models::ctc::host_log_probs(logits);
        Ok(prepared.iter().enumerate().map(|(i, p)| (all[i * per..(i + 1) * per].to_vec(), p.valid)).collect())
    }

    /// Decode one window's log-probabilities with the predictor's decoder.
    pub(crate) fn decode_frames(&self, log_probs: &[f32], valid: usize) -> Result<Transcript> {
        let ctc = self.ctc_card()?;
        let labels = &self.card.labels;
        let tokens = self.decoder.decode(log_probs, labels.len(), valid, BLANK);
        Ok(Transcript {
            text: data::tokens::join(ctc.unit, tokens.iter().map(|t| labels[t.index].as_str())),
            tokens: tokens
                .into_iter()
                .map(|t| TokenSpan {
                    label: labels[t.index].clone(),
                    index: t.index,
                    start: t.start,
                    end: t.end,
                    confidence: t.confidence,
                })
                .collect(),
        })
    }

    /// Decode prepared windows of a CTC model.
    pub(crate) fn decode(&self, prepared: &[Prepared]) -> Result<Vec<Transcript>> {
        self.ctc_frame_log_probs(prepared)?.iter().map(|(lp, valid)| self.decode_frames(lp, *valid)).collect()
    }
}
