//! A bidirectional GRU baseline that respects padding. Burn's RNNs take no sequence lengths, so
//! the backward direction runs a forward GRU over each sequence reversed *within its own length*
//! (an on-device gather, no host sync) and the result is reversed back.

use crate::kernels::Kernels;
use burn::module::Module;
use burn::nn::gru::{Gru, GruConfig};
use burn::nn::{Dropout, DropoutConfig, Linear, LinearConfig};
use burn::tensor::backend::Backend;
use burn::tensor::{Bool, FloatDType, Int, Tensor};
use serde::{Deserialize, Serialize};

use crate::common::{linear_rows, masked_mean};

/// The bidirectional GRU baseline's sizes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GruModelConfig {
    /// Hidden size of each direction.
    pub hidden: usize,
    /// Dropout before the classifier.
    pub dropout: f64,
}

impl Default for GruModelConfig {
    fn default() -> Self {
        Self { hidden: 192, dropout: 0.2 }
    }
}

/// Linear embedding, a GRU each way (the backward one over each sequence reversed within its length), masked mean, classifier.
#[derive(Module, Debug)]
pub struct SignGru<B: Backend> {
    /// Input features -> hidden.
    pub embed: Linear<B>,
    /// GRU over time.
    pub forward_gru: Gru<B>,
    /// GRU over time reversed.
    pub backward_gru: Gru<B>,
    /// Dropout before the classifier.
    pub dropout: Dropout,
    /// `2 hidden -> classes`.
    pub classifier: Linear<B>,
}

impl GruModelConfig {
    /// The model for `input_features` per frame and `classes` classes.
    pub fn init<B: Kernels>(&self, input_features: usize, classes: usize, device: &B::Device) -> SignGru<B> {
        SignGru {
            embed: LinearConfig::new(input_features, self.hidden).init(device),
            forward_gru: GruConfig::new(self.hidden, self.hidden, true).init(device),
            backward_gru: GruConfig::new(self.hidden, self.hidden, true).init(device),
            dropout: DropoutConfig::new(self.dropout).init(),
            classifier: LinearConfig::new(2 * self.hidden, classes).init(device),
        }
    }
}

/// Per-sample time indices that reverse the valid frames and leave padding in place:
/// `t -> len - 1 - t` for `t < len`, else `t`.
///
/// # Shapes
/// - pad_mask: `[batch, time]` -> `[batch, time]`
pub fn reverse_within_length<B: Kernels>(pad_mask: Tensor<B, 2, Bool>) -> Tensor<B, 2, Int> {
    let [b, t] = pad_mask.dims();
    let device = pad_mask.device();
    let valid = pad_mask.bool_not().int();
    let len = valid.clone().sum_dim(1); // [B, 1]
    let time = Tensor::<B, 1, Int>::arange(0..t as i64, &device).reshape([1, t]).expand([b, t]);
    let reversed = len.expand([b, t]) - time.clone() - 1;
    reversed.mask_where(valid.equal_elem(0), time)
}

impl<B: Kernels> SignGru<B> {
    /// # Shapes
    /// - x: `[batch, time, features]`, pad_mask: `[batch, time]` (true = pad)
    /// - output: logits `[batch, classes]`
    pub fn forward(&self, x: Tensor<B, 3>, pad_mask: Tensor<B, 2, Bool>) -> Tensor<B, 2> {
        let h = self.encode(x, pad_mask.clone());
        crate::common::linear(&self.classifier, self.dropout.forward(masked_mean(h, pad_mask)))
    }

    /// The per-frame head: the classifier on both directions' states at every frame (no
    /// pooling, stride 1).
    ///
    /// # Shapes
    /// - x: `[batch, time, features]`, pad_mask: `[batch, time]` (true = pad)
    /// - output: logits `[batch, time, classes]`
    pub fn forward_frames(&self, x: Tensor<B, 3>, pad_mask: Tensor<B, 2, Bool>) -> Tensor<B, 3> {
        let h = self.encode(x, pad_mask);
        linear_rows(&self.classifier, self.dropout.forward(h))
    }

    /// Embedding and both GRU directions: `[batch, time, features] -> [batch, time, 2 hidden]`.
    fn encode(&self, x: Tensor<B, 3>, pad_mask: Tensor<B, 2, Bool>) -> Tensor<B, 3> {
        let h = self.embed.forward(x);
        let dtype = h.dtype();
        // The recurrence runs in f32 (GRU weights stay f32 under mixed precision, see
        // `precision::KEEP_F32`); the result is cast back to the compute dtype.
        let h = h.cast(FloatDType::F32);
        let [b, t, c] = h.dims();
        let fwd = self.forward_gru.forward(h.clone(), None);
        let index = reverse_within_length(pad_mask.clone()).reshape([b, t, 1]).expand([b, t, c]);
        let bwd = self.backward_gru.forward(h.gather(1, index.clone()), None).gather(1, index);
        Tensor::cat(vec![fwd, bwd], 2).cast(dtype)
    }
}
