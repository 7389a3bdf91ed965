//! [`SignClassifier`]: a SignFlow model as a burn-train training and inference step.

use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn_train::{ClassificationOutput, InferenceStep, TrainOutput, TrainStep};
use data::loader::SignBatch;
use models::kernels::Kernels;
use models::SignModel;

/// A [`SignModel`] with the loss SignFlow's trainer gives classification (cross-entropy on the
/// pooled logits, optional label smoothing), as a Burn module that burn-train's `Learner`
/// trains: `TrainStep` (forward, loss, backward) and `InferenceStep` (forward, loss) for a
/// [`SignBatch`], both returning a `ClassificationOutput` (loss, logits `[batch, classes]`,
/// targets), which burn-train's loss, accuracy, top-k, precision/recall and AUROC metrics take.
///
/// The forward is the model's own ([`SignModel::forward`], f32), the same SignFlow's evaluation
/// and `infer` (with Burn's forward) run, so the logits of the trained weights are the same
/// through both. The wrapper adds no parameters: [`SignClassifier::into_model`] gives the
/// model back for `bundle::save_bundle`.
///
/// Batches must come from a dataset whose feature count the model was built for (as
/// [`crate::loaders`] and SignFlow's loaders make them); a classification dataset, not a
/// continuous (CTC) one.
#[derive(Module, Debug)]
pub struct SignClassifier<B: Backend> {
    /// The SignFlow model.
    pub model: SignModel<B>,
    /// Label smoothing of the cross-entropy, in [0, 1) (0 = none), as `training.label_smoothing`.
    pub label_smoothing: f32,
}

impl<B: Kernels> SignClassifier<B> {
    /// Wrap `model`; `label_smoothing` outside [0, 1) is taken as 0.
    pub fn new(model: SignModel<B>, label_smoothing: f32) -> Self {
        let label_smoothing = if (0.0..1.0).contains(&label_smoothing) { label_smoothing } else { 0.0 };
        Self { model, label_smoothing }
    }

    /// The wrapped model.
    pub fn into_model(self) -> SignModel<B> {
        self.model
    }

    /// Logits, loss and targets of a batch: what both steps return. The loss is the mean
    /// cross-entropy of the batch (a scalar on the autodiff graph when `B` has one).
    pub fn forward_classification(&self, batch: SignBatch<B>) -> ClassificationOutput<B> {
        let logits = self.model.forward(batch.inputs, batch.pad_mask);
        let smoothing = (self.label_smoothing > 0.0).then_some(self.label_smoothing);
        let loss = CrossEntropyLossConfig::new()
            .with_smoothing(smoothing)
            .init(&logits.device())
            .forward(logits.clone(), batch.labels.clone());
        ClassificationOutput::new(loss, logits, batch.labels)
    }
}

impl<B: AutodiffBackend + Kernels> TrainStep for SignClassifier<B> {
    type Input = SignBatch<B>;
    type Output = ClassificationOutput<B>;

    fn step(&self, batch: SignBatch<B>) -> TrainOutput<ClassificationOutput<B>> {
        let item = self.forward_classification(batch);
        let grads = item.loss.backward();
        TrainOutput::new(self, grads, item)
    }
}

impl<B: Kernels> InferenceStep for SignClassifier<B> {
    type Input = SignBatch<B>;
    type Output = ClassificationOutput<B>;

    fn step(&self, batch: SignBatch<B>) -> ClassificationOutput<B> {
        self.forward_classification(batch)
    }
}
