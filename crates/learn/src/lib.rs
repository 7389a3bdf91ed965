//! SignFlow models and data in Burn's own training stack, burn-train 0.21.
//!
//! SignFlow trains with its own loop (`trainer`: mixed precision, averaged accumulation,
//! global-norm clipping, NaN recovery, exact resume, several devices). A Burn user who already
//! writes `Learner` code takes SignFlow's models and data into it with this crate:
//!
//! - [`SignClassifier`]: any [`models::SignModel`] with its cross-entropy loss, implementing
//!   burn-train's `TrainStep` and `InferenceStep` for [`data::loader::SignBatch`] with a
//!   `ClassificationOutput` (loss, logits, targets), so burn-train's loss/accuracy metrics,
//!   checkpointer, early stopping and renderers (its TUI dashboard with the `tui` feature) work.
//! - [`loaders`]: Burn `DataLoader`s over a [`data::dataset::SignDataset`] split, batched by
//!   SignFlow's `ItemBatcher` (the trainer's preprocessing and augmentation).
//! - [`ProgressRenderer`]: a burn-train renderer for logs and terminals without the dashboard: a
//!   progress bar per epoch and one line of epoch means per epoch.
//!
//! The trained model is saved for `infer` as any SignFlow model is: `bundle::ModelCard::for_dataset`
//! and `bundle::save_bundle`. `examples/burn_train_learner.rs` puts them together;
//! docs/GUIDE.md compares both paths.

#![warn(missing_docs)]

pub mod loaders;
pub mod render;
pub mod step;

pub use loaders::{loaders, LoaderSettings, Loaders};
pub use render::ProgressRenderer;
pub use step::SignClassifier;

/// What can go wrong around a burn-train run (the run itself reports through burn-train).
#[derive(Debug, thiserror::Error)]
pub enum LearnError {
    /// Data that cannot feed the model.
    #[error("{0}")]
    Invalid(String),
}

/// Result of this crate.
pub type Result<T> = std::result::Result<T, LearnError>;
