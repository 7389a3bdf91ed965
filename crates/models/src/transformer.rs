//! A plain transformer baseline: linear embedding, sinusoidal positions, Burn's
//! `TransformerEncoder` with a padding mask, masked mean pooling, classifier.

use crate::kernels::Kernels;
use burn::module::Module;
use burn::nn::transformer::{TransformerEncoder, TransformerEncoderConfig, TransformerEncoderInput};
use burn::nn::{Dropout, DropoutConfig, Linear, LinearConfig, PositionalEncoding, PositionalEncodingConfig};
use burn::tensor::backend::Backend;
use burn::tensor::{Bool, Tensor};
use serde::{Deserialize, Serialize};

use crate::common::masked_mean;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TransformerConfig {
    pub dim: usize,
    pub layers: usize,
    pub heads: usize,
    pub ff_dim: usize,
    pub dropout: f64,
    pub max_frames: usize,
}

impl Default for TransformerConfig {
    fn default() -> Self {
        Self { dim: 192, layers: 4, heads: 4, ff_dim: 384, dropout: 0.1, max_frames: 1024 }
    }
}

#[derive(Module, Debug)]
pub struct SignTransformer<B: Backend> {
    pub embed: Linear<B>,
    pub positions: PositionalEncoding<B>,
    pub encoder: TransformerEncoder<B>,
    pub dropout: Dropout,
    pub classifier: Linear<B>,
}

impl TransformerConfig {
    pub fn init<B: Kernels>(&self, input_features: usize, classes: usize, device: &B::Device) -> SignTransformer<B> {
        SignTransformer {
            embed: LinearConfig::new(input_features, self.dim).init(device),
            positions: PositionalEncodingConfig::new(self.dim).with_max_sequence_size(self.max_frames).init(device),
            encoder: TransformerEncoderConfig::new(self.dim, self.ff_dim, self.heads, self.layers)
                .with_dropout(self.dropout)
                .with_norm_first(true)
                .init(device),
            dropout: DropoutConfig::new(self.dropout).init(),
            classifier: LinearConfig::new(self.dim, classes).init(device),
        }
    }
}

impl<B: Kernels> SignTransformer<B> {
    /// # Shapes
    /// - x: `[batch, time, features]`, pad_mask: `[batch, time]` (true = pad)
    /// - output: logits `[batch, classes]`
    pub fn forward(&self, x: Tensor<B, 3>, pad_mask: Tensor<B, 2, Bool>) -> Tensor<B, 2> {
        let h = self.embed.forward(x);
        let [_, t, _] = h.dims();
        // Burn's PositionalEncoding adds its f32 table as is; cast it to the activations' dtype so
        // the model also runs in f16/bf16.
        let table = self.positions.sinusoids.clone().narrow(1, 0, t).cast(h.dtype());
        let h = h + table;
        let h = self.encoder.forward(TransformerEncoderInput::new(h).mask_pad(pad_mask.clone()));
        self.classifier.forward(self.dropout.forward(masked_mean(h, pad_mask)))
    }
}
