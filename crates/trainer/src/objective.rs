//! What a training step minimises, per task: the one place that turns a batch into a loss and a
//! count of correct predictions.
//!
//! - classification: pooled logits, cross-entropy (with label smoothing), correct = arg-max
//!   equals the label;
//! - CTC: per-frame logits, CTC loss in f32 (closed-form gradient, mean over each sequence's
//!   target length, impossible alignments counted 0), correct = the greedy decoding equals the
//!   whole target sequence.

use burn::nn::loss::{CrossEntropyLoss, CrossEntropyLossConfig};
use burn::tensor::{DType, Tensor, TensorData};
use data::loader::SignBatch;
use data::tokens::BLANK;
use models::common::mask_values;
use models::ctc::{ctc_loss_with_log_probs, Reduction};
use models::precision::ComputeModel;
use models::Task;

use crate::{InnerBackend, TrainBackend};

type Device = device::DispatchDevice;

/// A task's loss.
#[derive(Debug)]
pub enum Objective {
    /// Cross-entropy on pooled logits (boxed: the loss module is far larger than the other variant).
    Classification(Box<CrossEntropyLoss<TrainBackend>>),
    /// CTC on per-frame logits.
    Ctc,
}

impl Objective {
    /// The objective of `task` (`label_smoothing` applies to classification).
    pub fn new(task: Task, label_smoothing: f64, device: &Device) -> Self {
        match task {
            Task::Classification => Self::Classification(Box::new(
                CrossEntropyLossConfig::new()
                    .with_smoothing((label_smoothing > 0.0).then_some(label_smoothing as f32))
                    .init::<TrainBackend>(device),
            )),
            Task::Ctc => Self::Ctc,
        }
    }

    /// The loss of `batch` (a scalar on the autodiff graph, f32) and the number of correct
    /// predictions (on the device, as a float).
    pub fn forward(
        &self,
        compute: &ComputeModel<TrainBackend>,
        batch: SignBatch<TrainBackend>,
    ) -> (Tensor<TrainBackend, 1>, Tensor<InnerBackend, 1>) {
        match self {
            Self::Classification(loss_fn) => {
                let n = batch.labels.dims()[0];
                let logits = compute.forward(batch.inputs, batch.pad_mask);
                let loss = loss_fn.forward(logits.clone(), batch.labels.clone());
                let hits = logits.argmax(1).reshape([n]).equal(batch.labels).inner();
                (loss, mask_values(hits, 1.0, 0.0, DType::F32).sum())
            }
            Self::Ctc => {
                let device = batch.inputs.device();
                let logits = compute.forward_frames(batch.inputs, batch.pad_mask);
                let [_, frames, classes] = logits.dims();
                let (loss, _, log_probs) = ctc_loss_with_log_probs(
                    logits,
                    &batch.lengths,
                    &batch.targets,
                    BLANK,
                    Reduction::MeanPerToken,
                    true,
                );
                let per = frames * classes;
                let correct = batch
                    .targets
                    .iter()
                    .enumerate()
                    .filter(|(b, target)| {
                        let lp = &log_probs[b * per..(b + 1) * per];
                        let decoded = models::decode::greedy(lp, classes, batch.lengths[*b], BLANK);
                        decoded.iter().map(|d| d.index).eq(target.iter().copied())
                    })
                    .count();
                let correct = Tensor::<InnerBackend, 1>::from_data(TensorData::new(vec![correct as f32], [1]), &device);
                (loss, correct)
            }
        }
    }
}
