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
    // On GPU-class devices a short last batch is a new shape (kernels compiled and tuned again):
    // it is padded to the full batch with copies of its first row, whose outputs are not read.
    let pad_to = crate::on_gpu(device).then_some(batch_size);
    let on_device = |hb: &data::loader::HostBatch| match pad_to {
        Some(rows) if hb.batch < rows => padded(hb, rows).to_device::<InnerBackend>(device),
        _ => hb.to_device::<InnerBackend>(device),
    };
    match ds.continuous {
        None => {
            let mut tally = ClassTally::default();
            for hb in batches {
                let batch = on_device(&hb);
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
                let batch = on_device(&hb);
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

/// `hb` with `rows` rows: its own, then copies of its first (the same shape as a full batch).
fn padded(hb: &data::loader::HostBatch, rows: usize) -> data::loader::HostBatch {
    let extra = rows.saturating_sub(hb.batch);
    if extra == 0 || hb.batch == 0 {
        return hb.clone();
    }
    let (frame_len, mask_len) = (hb.window * hb.features, hb.window);
    let mut out = hb.clone();
    for _ in 0..extra {
        out.inputs.extend_from_within(..frame_len);
        out.pad_mask.extend_from_within(..mask_len);
        out.labels.extend(hb.labels.first().copied());
        out.targets.extend(hb.targets.first().cloned());
        out.indices.extend(hb.indices.first().copied());
    }
    out.batch = rows;
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_batch_is_padded_with_copies_of_its_first_row() {
        let hb = data::loader::HostBatch {
            batch: 2,
            window: 2,
            features: 1,
            inputs: vec![1.0, 2.0, 3.0, 4.0],
            pad_mask: vec![false, true, false, false],
            labels: vec![7, 8],
            targets: Vec::new(),
            indices: vec![10, 11],
        };
        let p = padded(&hb, 4);
        assert_eq!(p.batch, 4);
        assert_eq!(p.inputs, vec![1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 1.0, 2.0]);
        assert_eq!(p.pad_mask, vec![false, true, false, false, false, true, false, true]);
        assert_eq!((p.labels, p.indices), (vec![7, 8, 7, 7], vec![10, 11, 10, 10]));
        assert_eq!(padded(&hb, 2), hb);
    }
}
