//! # SignFlow models
//!
//! Sign-language architectures, all `forward(x [B, T, F], pad_mask [B, T]) -> logits [B, C]`
//! with `pad_mask` true on padding frames, all invariant to padding appended after a sequence,
//! and all with a per-frame head for continuous recognition (`forward_frames -> [B, T, C]`, the
//! same classifier at every frame, no pooling, no temporal stride; [`ctc`], [`decode`]):
//! - [`conv_transformer`]: the 1st-place Google ISLR design (causal depthwise conv + ECA +
//!   transformer blocks, drop-path, late dropout); 1,784,152 trainable parameters at reference size
//!   (1,790,680 counting BatchNorm running statistics, as Keras and `Module::num_params` do);
//! - [`transformer`]: embedding + sinusoidal positions + Burn's `TransformerEncoder`;
//! - [`gru`]: a bidirectional GRU that masks its backward direction properly.
//!
//! [`ModelConfig`] is a tagged enum (`kind = "conv_transformer"`) so experiments switch
//! architecture in TOML; input feature and class counts come from the data. No IO here.
//!
//! ```no_run
//! use burn::tensor::{Bool, Tensor};
//! type B = burn::backend::Flex;
//! let device = Default::default();
//! let model = models::ModelConfig::default().init::<B>(708, 250, &device);
//! let x = Tensor::<B, 3>::zeros([2, 64, 708], &device);
//! let pad = Tensor::<B, 2, Bool>::from_data(burn::tensor::TensorData::new(vec![false; 128], [2, 64]), &device);
//! let logits = model.try_forward(x, pad)?; // [2, 250]
//! # Ok::<(), models::ModelError>(())
//! ```
#![warn(missing_docs)]

pub mod common;
pub mod conv_transformer;
pub mod ctc;
pub mod decode;
pub mod gru;
pub mod host_gemm;
pub mod kernels;
pub mod lexicon;
pub mod par;
pub mod precision;
pub mod simd;
pub mod transformer;

use crate::kernels::Kernels;
use burn::module::Module;
use burn::tensor::backend::Backend;
use burn::tensor::{Bool, Tensor};
use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use conv_transformer::{ConvTransformer, ConvTransformerConfig};
pub use gru::{GruModelConfig, SignGru};
pub use transformer::{SignTransformer, TransformerConfig};

/// A bad model input or config.
#[derive(Debug, Error, PartialEq)]
pub enum ModelError {
    /// The input's feature count is not the model's.
    #[error("model input has {found} features per frame, the model expects {expected}")]
    Features {
        /// The model's.
        expected: usize,
        /// The input's.
        found: usize,
    },
    /// The pad mask does not match the input.
    #[error("pad mask has shape {found:?}, expected [batch, time] = {expected:?} to match the input")]
    MaskShape {
        /// `[batch, time]` of the input.
        expected: [usize; 2],
        /// The mask's shape.
        found: [usize; 2],
    },
    /// More frames than the model supports.
    #[error("input has {found} frames, more than this model supports ({max})")]
    TooLong {
        /// The model's limit.
        max: usize,
        /// The input's frames.
        found: usize,
    },
    /// No sequences or no frames.
    #[error("input is empty (batch {batch}, frames {frames})")]
    Empty {
        /// Sequences.
        batch: usize,
        /// Frames.
        frames: usize,
    },
    /// A config value out of range.
    #[error("model config `{key}`: {message}")]
    Config {
        /// The dotted key.
        key: String,
        /// What was expected.
        message: String,
    },
}

/// What a model is trained to output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    /// One sign per sequence: pooled logits `[batch, classes]`, cross-entropy.
    #[default]
    Classification,
    /// Continuous recognition: per-frame logits `[batch, time, classes]` (class 0 the blank),
    /// CTC loss, greedy or beam decoding ([`ctc`], [`decode`]).
    Ctc,
}

/// The most frames a transformer's positional table may cover: the longest timescale of Burn's
/// sinusoidal encoding, which refuses (panics on) a longer table.
pub const MAX_FRAMES_LIMIT: usize = 10_000;

/// The `[model]` section of experiment configs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ModelConfig {
    /// The 1st-place ISLR conv-transformer.
    ConvTransformer(ConvTransformerConfig),
    /// The transformer-encoder baseline.
    Transformer(TransformerConfig),
    /// The bidirectional-GRU baseline.
    Gru(GruModelConfig),
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self::ConvTransformer(ConvTransformerConfig::default())
    }
}

impl ModelConfig {
    /// The `kind` name (`conv_transformer`, `transformer`, `gru`).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::ConvTransformer(_) => "conv_transformer",
            Self::Transformer(_) => "transformer",
            Self::Gru(_) => "gru",
        }
    }

    /// Values serde cannot check; errors name the key.
    pub fn validate(&self) -> Result<(), ModelError> {
        let err = |key: &str, message: String| Err(ModelError::Config { key: format!("model.{key}"), message });
        let prob = |key: &str, p: f64| {
            if (0.0..1.0).contains(&p) {
                Ok(())
            } else {
                err(key, format!("must be in [0, 1), got {p}"))
            }
        };
        match self {
            Self::ConvTransformer(c) => {
                if c.dim == 0 || c.heads == 0 || c.dim % c.heads != 0 {
                    return err("heads", format!("dim ({}) must be a positive multiple of heads ({})", c.dim, c.heads));
                }
                if c.kernel == 0 || c.eca_kernel % 2 == 0 {
                    return err(
                        "eca_kernel",
                        format!("kernel must be >= 1 and eca_kernel odd, got {} and {}", c.kernel, c.eca_kernel),
                    );
                }
                if c.stages == 0 || c.expand == 0 {
                    return err("stages", "stages and expand must be at least 1".into());
                }
                prob("drop_path", c.drop_path)?;
                prob("attention_dropout", c.attention_dropout)?;
                prob("late_dropout", c.late_dropout)
            }
            Self::Transformer(c) => {
                if c.dim == 0 || c.heads == 0 || c.dim % c.heads != 0 {
                    return err("heads", format!("dim ({}) must be a positive multiple of heads ({})", c.dim, c.heads));
                }
                if c.dim % 2 != 0 {
                    return err("dim", format!("must be even (the sinusoidal positional encoding), got {}", c.dim));
                }
                if c.layers == 0 || c.ff_dim == 0 || c.max_frames == 0 {
                    return err("layers", "layers, ff_dim and max_frames must be at least 1".into());
                }
                if c.max_frames > MAX_FRAMES_LIMIT {
                    return err("max_frames", format!("{} is above the limit of {MAX_FRAMES_LIMIT}", c.max_frames));
                }
                prob("dropout", c.dropout)
            }
            Self::Gru(c) => {
                if c.hidden == 0 {
                    return err("hidden", "must be at least 1".into());
                }
                prob("dropout", c.dropout)
            }
        }
    }

    /// A lower bound on the trainable parameters of the model for `input_features` and
    /// `classes` (the largest weight matrices only), computed without building it: a model card
    /// whose sizes were damaged can be refused before a multi-terabyte allocation.
    pub fn min_params(&self, input_features: usize, classes: usize) -> u128 {
        let [i, k] = [input_features, classes].map(|v| v as u128);
        match self {
            Self::ConvTransformer(c) => {
                let [d, s, b, kernel, e] =
                    [c.dim, c.stages, c.conv_blocks_per_stage, c.kernel, c.expand].map(|v| v as u128);
                // stem, top, classifier; per conv block an expansion matrix and a depthwise
                // kernel; per stage an attention projection.
                i * d + 2 * d * d + 2 * d * k + s * b * (e * d * d + kernel * d) + s * d * d
            }
            Self::Transformer(c) => {
                let [d, l, f] = [c.dim, c.layers, c.ff_dim].map(|v| v as u128);
                i * d + l * (d * d + 2 * d * f) + d * k
            }
            Self::Gru(c) => {
                let h = c.hidden as u128;
                // The embedding, both directions' input and hidden matrices of three gates over
                // the embedded frames, the classifier over both directions.
                i * h + 12 * h * h + 2 * h * k
            }
        }
    }

    /// The model for `input_features` per frame and `classes` classes.
    pub fn init<B: Kernels>(&self, input_features: usize, classes: usize, device: &B::Device) -> SignModel<B> {
        match self {
            Self::ConvTransformer(c) => SignModel::ConvTransformer(c.init(input_features, classes, device)),
            Self::Transformer(c) => SignModel::Transformer(c.init(input_features, classes, device)),
            Self::Gru(c) => SignModel::Gru(c.init(input_features, classes, device)),
        }
    }
}

/// Any SignFlow architecture, chosen at run time.
// One model exists per process; boxing the variants would only add indirection to `Module` code.
#[allow(clippy::large_enum_variant)]
#[derive(Module, Debug)]
pub enum SignModel<B: Backend> {
    /// A conv-transformer.
    ConvTransformer(ConvTransformer<B>),
    /// A transformer baseline.
    Transformer(SignTransformer<B>),
    /// A GRU baseline.
    Gru(SignGru<B>),
}

impl<B: Kernels> SignModel<B> {
    /// # Shapes
    /// - x: `[batch, time, features]`, pad_mask: `[batch, time]` (true = pad)
    /// - output: logits `[batch, classes]`
    ///
    /// Panics on shapes the model cannot take; use [`SignModel::try_forward`] on user input.
    pub fn forward(&self, x: Tensor<B, 3>, pad_mask: Tensor<B, 2, Bool>) -> Tensor<B, 2> {
        match self {
            Self::ConvTransformer(m) => m.forward(x, pad_mask),
            Self::Transformer(m) => m.forward(x, pad_mask),
            Self::Gru(m) => m.forward(x, pad_mask),
        }
    }

    /// Per-frame logits for continuous recognition (CTC): every architecture's encoder with its
    /// classifier applied at each frame instead of after pooling. No temporal stride: output frame
    /// `t` is input frame `t`, and frames before a sequence's padding do not depend on it.
    ///
    /// # Shapes
    /// - x: `[batch, time, features]`, pad_mask: `[batch, time]` (true = pad)
    /// - output: logits `[batch, time, classes]`
    pub fn forward_frames(&self, x: Tensor<B, 3>, pad_mask: Tensor<B, 2, Bool>) -> Tensor<B, 3> {
        match self {
            Self::ConvTransformer(m) => m.forward_frames(x, pad_mask),
            Self::Transformer(m) => m.forward_frames(x, pad_mask),
            Self::Gru(m) => m.forward_frames(x, pad_mask),
        }
    }

    /// [`SignModel::forward`] after checking the shapes (no device work).
    pub fn try_forward(&self, x: Tensor<B, 3>, pad_mask: Tensor<B, 2, Bool>) -> Result<Tensor<B, 2>, ModelError> {
        self.check_input(x.dims(), pad_mask.dims())?;
        Ok(self.forward(x, pad_mask))
    }

    /// Check an input of shape `x` with a mask of shape `mask` (no device work).
    pub fn check_input(&self, x: [usize; 3], mask: [usize; 2]) -> Result<(), ModelError> {
        let [b, t, f] = x;
        if b == 0 || t == 0 {
            return Err(ModelError::Empty { batch: b, frames: t });
        }
        if f != self.input_features() {
            return Err(ModelError::Features { expected: self.input_features(), found: f });
        }
        if mask != [b, t] {
            return Err(ModelError::MaskShape { expected: [b, t], found: mask });
        }
        if let Self::Transformer(m) = self {
            let max = m.positions.sinusoids.dims()[1];
            if t > max {
                return Err(ModelError::TooLong { max, found: t });
            }
        }
        Ok(())
    }

    /// Features per frame the model takes.
    pub fn input_features(&self) -> usize {
        match self {
            Self::ConvTransformer(m) => m.stem.weight.dims()[0],
            Self::Transformer(m) => m.embed.weight.dims()[0],
            Self::Gru(m) => m.embed.weight.dims()[0],
        }
    }

    /// Classes (logits per sequence).
    pub fn classes(&self) -> usize {
        match self {
            Self::ConvTransformer(m) => m.classifier.weight.dims()[1],
            Self::Transformer(m) => m.classifier.weight.dims()[1],
            Self::Gru(m) => m.classifier.weight.dims()[1],
        }
    }

    /// Switch the conv-transformer's late dropout on or off (no-op for other models).
    pub fn set_late_dropout(&mut self, enabled: bool) {
        if let Self::ConvTransformer(m) = self {
            m.late_dropout_enabled = enabled;
        }
    }
}

/// Trainable parameters. Burn's `num_params` also counts BatchNorm running statistics (the
/// Keras-style total); this leaves them out.
pub fn trainable_params<B: Kernels, M: Module<B>>(model: &M) -> usize {
    let mut counter = precision::TrainableCount::default();
    model.visit(&mut counter);
    counter.count
}
