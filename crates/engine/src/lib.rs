//! An eval-only CPU graph of the conv-transformer, for inference: every BatchNorm folded into a
//! neighbouring layer, no autodiff or dropout, activations in host memory between layers, and
//! the dense layers in f32 or in int8 ([`q8`]: weights per output column, activations per row
//! at run time, i32 sums; AVX2 or AVX-512 VNNI kernels where the CPU has them).
//!
//! Built from a trained model's weights ([`EvalGraph::new`]); `infer` runs it for
//! `--precision int8`. The graph is built from the module tree block by block
//! ([`EvalConvBlock`], [`EvalTransformerBlock`]); each block's f32 form equals Burn's eval
//! forward of that block, and the whole graph Burn's forward of the model, within float rounding
//! (tested), so the int8 figures measure quantization alone.
//!
//! [`fold`] folds the same norms into the Burn model itself: the model `infer` runs on a
//! device.

#![warn(missing_docs)]

pub mod act;
pub mod dense;
pub mod fold;
pub mod graph;
pub mod q8;

pub use dense::Weights;
pub use fold::{fold_norms, inference_model};
pub use graph::{EvalConvBlock, EvalGraph, EvalTransformerBlock};

/// What the eval graph cannot do.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The architecture has no eval graph.
    #[error("the eval graph (int8 inference) supports the conv-transformer; this model is a {0}")]
    Unsupported(String),
    /// Inputs that do not match the model.
    #[error("{0}")]
    Shape(String),
}
