//! A plain transformer baseline: linear embedding, sinusoidal positions, a pre-norm transformer
//! encoder with a padding mask, masked mean pooling, classifier.
//!
//! The weights live in Burn's `TransformerEncoder` (so saved models load unchanged), but the
//! forward pass is our own over its public layers: every linear as one `[batch * time, in]`
//! product (`linear_rows`) and the attention through [`crate::kernels`] (head split/merge and a
//! key-masked softmax with closed-form backward). Burn's own forward differentiates its 3-D
//! linears into per-sample weight gradients and copies strided head views, which made this the
//! slowest model to train. Attention dropout is applied to the attention weights (after the
//! softmax), the usual placement; Burn applies it to the scores before the softmax.

use crate::kernels::Kernels;
use burn::module::Module;
use burn::nn::attention::MultiHeadAttention;
use burn::nn::transformer::{
    PositionWiseFeedForward, TransformerEncoder, TransformerEncoderConfig, TransformerEncoderLayer,
};
use burn::nn::{Dropout, DropoutConfig, Linear, LinearConfig, PositionalEncoding, PositionalEncodingConfig};
use burn::tensor::backend::Backend;
use burn::tensor::{Bool, Tensor};
use serde::{Deserialize, Serialize};

use crate::common::{linear_rows, mask_values, masked_mean};

/// The transformer baseline's sizes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TransformerConfig {
    /// Model width.
    pub dim: usize,
    /// Encoder layers.
    pub layers: usize,
    /// Attention heads.
    pub heads: usize,
    /// Feed-forward width.
    pub ff_dim: usize,
    /// Dropout in every layer.
    pub dropout: f64,
    /// Longest input the positional encoding covers.
    pub max_frames: usize,
}

impl Default for TransformerConfig {
    fn default() -> Self {
        Self { dim: 192, layers: 4, heads: 4, ff_dim: 384, dropout: 0.1, max_frames: 1024 }
    }
}

/// Linear embedding, sinusoidal positions, a transformer encoder, masked mean, classifier.
#[derive(Module, Debug)]
pub struct SignTransformer<B: Backend> {
    /// Input features -> `dim`.
    pub embed: Linear<B>,
    /// Sinusoidal positions.
    pub positions: PositionalEncoding<B>,
    /// Burn's encoder (its weights; the forward is this crate's).
    pub encoder: TransformerEncoder<B>,
    /// Dropout before the classifier.
    pub dropout: Dropout,
    /// `dim -> classes`.
    pub classifier: Linear<B>,
}

impl TransformerConfig {
    /// The model for `input_features` per frame and `classes` classes.
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
        let h = self.encode(x, pad_mask.clone());
        crate::common::linear(&self.classifier, self.dropout.forward(masked_mean(h, pad_mask)))
    }

    /// The per-frame head: the classifier on every frame's encoding (no pooling, stride 1).
    ///
    /// # Shapes
    /// - x: `[batch, time, features]`, pad_mask: `[batch, time]` (true = pad)
    /// - output: logits `[batch, time, classes]`
    pub fn forward_frames(&self, x: Tensor<B, 3>, pad_mask: Tensor<B, 2, Bool>) -> Tensor<B, 3> {
        let h = self.encode(x, pad_mask);
        linear_rows(&self.classifier, self.dropout.forward(h))
    }

    /// Embedding, positions and the encoder layers: `[batch, time, features] -> [batch, time, dim]`.
    fn encode(&self, x: Tensor<B, 3>, pad_mask: Tensor<B, 2, Bool>) -> Tensor<B, 3> {
        let h = linear_rows(&self.embed, x);
        let [_, t, _] = h.dims();
        // Burn's PositionalEncoding adds its f32 table as is; cast it to the activations' dtype so
        // the model also runs in f16/bf16.
        let table = self.positions.sinusoids.clone().narrow(1, 0, t).cast(h.dtype());
        let mut h = h + table;
        // Padded keys get a -1e4 bias before the softmax (Burn's encoder fills them with -1e4):
        // their weight is exp(-1e4) = 0 in every float type.
        let key_bias = mask_values(pad_mask.clone(), -1e4, 0.0, h.dtype());
        for layer in &self.encoder.layers {
            h = encoder_layer(layer, h, key_bias.clone());
        }
        h
    }
}

/// One layer of Burn's `TransformerEncoderLayer`, same sub-layers and order (pre- or post-norm).
///
/// # Shapes
/// - x: `[batch, time, dim]`, key_bias `[batch, time]` -> `[batch, time, dim]`
pub fn encoder_layer<B: Kernels>(
    layer: &TransformerEncoderLayer<B>,
    x: Tensor<B, 3>,
    key_bias: Tensor<B, 2>,
) -> Tensor<B, 3> {
    let attn_in = if layer.norm_first { layer.norm_2.forward(x.clone()) } else { x.clone() };
    let mut x = x + layer.dropout.forward(self_attention(&layer.mha, attn_in, key_bias));
    let ff_in = if layer.norm_first {
        layer.norm_1.forward(x.clone())
    } else {
        x = layer.norm_1.forward(x);
        x.clone()
    };
    let x = x + layer.dropout.forward(feed_forward(&layer.pwff, ff_in));
    if layer.norm_first {
        x
    } else {
        layer.norm_2.forward(x)
    }
}

/// Burn's `MultiHeadAttention` weights as self-attention with a key bias.
fn self_attention<B: Kernels>(mha: &MultiHeadAttention<B>, x: Tensor<B, 3>, key_bias: Tensor<B, 2>) -> Tensor<B, 3> {
    use crate::kernels::ops::{key_biased_softmax_dropout, merge_heads, split_heads, split_heads_transposed};
    let heads = mha.n_heads;
    let q = split_heads(linear_rows(&mha.query, x.clone()), heads); // [B, H, T, d_k]
    let kt = split_heads_transposed(linear_rows(&mha.key, x.clone()), heads); // [B, H, d_k, T]
    let v = split_heads(linear_rows(&mha.value, x), heads);
    let scores = q.matmul(kt).mul_scalar(1.0 / (mha.d_k as f64).sqrt()); // [B, H, T, T]
    let attn = key_biased_softmax_dropout(scores, key_bias, mha.dropout.prob);
    linear_rows(&mha.output, merge_heads(attn.matmul(v)))
}

fn feed_forward<B: Kernels>(ff: &PositionWiseFeedForward<B>, x: Tensor<B, 3>) -> Tensor<B, 3> {
    let h = ff.dropout.forward(ff.activation.forward(linear_rows(&ff.linear_inner, x)));
    linear_rows(&ff.linear_outer, h)
}
