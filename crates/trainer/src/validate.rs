//! Validation: a model (no autodiff, f32) scored on held-out sequences, per task.
//!
//! - classification: mean cross-entropy (no label smoothing), top-1, top-5, the arg-max class
//!   of every sequence;
//! - CTC: the CTC loss (mean per target token, as in training), and both decoders' error rates
//!   ([`models::decode::Scores`]: normalized Levenshtein, token and word error rates, sequence
//!   accuracy); `top1` is the sequence accuracy of the configured decoder (`[ctc] decoder`).

use std::sync::Arc;

use burn::tensor::FloatDType;
use data::dataset::SignDataset;
use data::loader::{EpochLoader, ItemBatcher, LoaderConfig};
use data::preprocess::Preprocessor;
use data::tokens::BLANK;
use models::decode::{CtcDecoder, CtcTally, Decoder, Scores};
use models::precision::ComputeModel;
use models::SignModel;
use serde::{Deserialize, Serialize};

use crate::InnerBackend;

type Device = device::DispatchDevice;

/// Validation figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// Classification: mean cross-entropy (no label smoothing). CTC: mean CTC loss per target
    /// token (sequences whose target cannot fit their frames count 0, as in training).
    pub loss: f64,
    /// Classification: top-1 accuracy. CTC: sequence accuracy of the configured decoder.
    pub top1: f64,
    /// Top-5 accuracy (classification).
    pub top5: Option<f64>,
    /// Arg-max class per evaluated item, in `indices` order (classification).
    pub predictions: Vec<usize>,
    /// Decoding scores (CTC).
    pub sequences: Option<SequenceScores>,
}

/// Both CTC decoders' scores on a set.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SequenceScores {
    /// Greedy decoding.
    pub greedy: Scores,
    /// Prefix beam search with `[ctc] beam_width`.
    pub beam: Scores,
    /// The configured decoder (the one `valid_top1` and `valid_cer` follow).
    pub decoder: Decoder,
}

impl SequenceScores {
    /// The configured decoder's scores.
    pub fn chosen(&self) -> &Scores {
        self.decoder.pick(&self.greedy, &self.beam)
    }
}

/// Evaluate `model` on `indices` of `ds` (batched as in training, without augmentation); a
/// continuous dataset is scored as CTC, beam search being `decoder`'s (width and lexicon).
#[allow(clippy::too_many_arguments)]
pub fn evaluate(
    model: &SignModel<InnerBackend>,
    ds: &Arc<SignDataset>,
    pre: &Arc<Preprocessor>,
    indices: &[usize],
    batch_size: usize,
    workers: usize,
    decoder: &CtcDecoder,
    device: &Device,
) -> Evaluation {
    let batcher = ItemBatcher { preprocessor: pre.clone(), augmenter: None, seed: 0 };
    let cfg = LoaderConfig { batch_size, shuffle: false, drop_last: false, seed: 0, workers, prefetch: 2 };
    let compute = ComputeModel::new(model.clone(), FloatDType::F32);
    let batches = EpochLoader::start(ds.clone(), batcher, indices, &cfg, 0, 0);
    match ds.continuous {
        None => {
            let mut tally = ClassTally::default();
            for hb in batches {
                let batch = hb.to_device::<InnerBackend>(device);
                let logits = compute.forward(batch.inputs, batch.pad_mask);
                let classes = logits.dims()[1];
                let values: Vec<f32> = logits.into_data().iter::<f32>().collect();
                for (row, &label) in values.chunks(classes).zip(&hb.labels) {
                    tally.add(row, label as usize);
                }
            }
            tally.finish()
        }
        Some(unit) => {
            let separator = data::tokens::word_separator(unit, &ds.labels);
            let mut tally = CtcTally::default();
            for hb in batches {
                let lengths = hb.lengths();
                let batch = hb.to_device::<InnerBackend>(device);
                let logits = compute.forward_frames(batch.inputs, batch.pad_mask);
                let [_, frames, classes] = logits.dims();
                let log_probs = models::ctc::host_log_probs(logits);
                for (b, target) in hb.targets.iter().enumerate() {
                    let lp = &log_probs[b * frames * classes..(b + 1) * frames * classes];
                    tally.add(lp, classes, lengths[b], target, BLANK, separator, decoder);
                }
            }
            ctc_evaluation(&tally, decoder.config.decoder)
        }
    }
}

/// Running sums of classification validation.
#[derive(Debug, Default)]
struct ClassTally {
    loss: f64,
    top1: usize,
    top5: usize,
    predictions: Vec<usize>,
}

impl ClassTally {
    fn add(&mut self, row: &[f32], label: usize) {
        let target = row[label];
        let max = row.iter().copied().fold(f32::MIN, f32::max);
        let lse = row.iter().map(|&v| ((v - max) as f64).exp()).sum::<f64>().ln() + max as f64;
        self.loss += lse - target as f64;
        let rank = row.iter().filter(|&&v| v > target).count();
        self.top1 += usize::from(rank == 0);
        self.top5 += usize::from(rank < 5);
        self.predictions.push(row.iter().enumerate().fold(0, |b, (i, &v)| if v > row[b] { i } else { b }));
    }

    fn finish(self) -> Evaluation {
        let n = self.predictions.len().max(1) as f64;
        Evaluation {
            loss: self.loss / n,
            top1: self.top1 as f64 / n,
            top5: Some(self.top5 as f64 / n),
            predictions: self.predictions,
            sequences: None,
        }
    }
}

/// The figures of a finished CTC tally, `decoder` being the configured one.
fn ctc_evaluation(tally: &CtcTally, decoder: Decoder) -> Evaluation {
    let scores = SequenceScores { greedy: tally.greedy.scores(), beam: tally.beam.scores(), decoder };
    Evaluation {
        loss: tally.mean_loss(),
        top1: scores.chosen().sequence_accuracy,
        top5: None,
        predictions: Vec::new(),
        sequences: Some(scores),
    }
}
