//! The 1st-place Google ISLR architecture: a stem, stages of causal depthwise Conv1D blocks with
//! efficient channel attention followed by a transformer block, masked pooling, late dropout.

use crate::kernels::Kernels;
use burn::module::Module;
use burn::nn::{Dropout, DropoutConfig, Linear, LinearConfig};
use burn::tensor::backend::Backend;
use burn::tensor::{Bool, Tensor};
use serde::{Deserialize, Serialize};

use crate::common::{linear, CausalDepthwiseConv, ChannelNorm, DropDraw, DropPath, Eca, FrameMask, SelfAttention};

/// Sizes of the conv-transformer. Defaults are the reference model (~1.78M trainable params
/// with 469 input features and 250 classes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConvTransformerConfig {
    /// Model width.
    pub dim: usize,
    /// Number of stages; each is `conv_blocks_per_stage` conv blocks then one transformer block.
    pub stages: usize,
    /// Conv blocks per stage.
    pub conv_blocks_per_stage: usize,
    /// Depthwise-conv kernel (frames).
    pub kernel: usize,
    /// Conv-block expansion factor.
    pub expand: usize,
    /// Attention heads.
    pub heads: usize,
    /// ECA channel-conv kernel.
    pub eca_kernel: usize,
    /// Drop-path probability of every residual branch.
    pub drop_path: f64,
    /// Dropout on attention weights.
    pub attention_dropout: f64,
    /// Dropout before the classifier, active only once `late_dropout_enabled` (from a set epoch).
    pub late_dropout: f64,
    /// BatchNorm running-statistics momentum.
    pub bn_momentum: f64,
}

impl Default for ConvTransformerConfig {
    fn default() -> Self {
        Self {
            dim: 192,
            stages: 2,
            conv_blocks_per_stage: 3,
            kernel: 17,
            expand: 2,
            heads: 4,
            eca_kernel: 5,
            drop_path: 0.2,
            attention_dropout: 0.2,
            late_dropout: 0.8,
            bn_momentum: 0.05,
        }
    }
}

/// Expand, causal depthwise conv, norm, ECA gate, project; residual with drop-path.
#[derive(Module, Debug)]
pub struct ConvBlock<B: Backend> {
    /// `dim -> expand x dim` with SiLU.
    pub expand: Linear<B>,
    /// Causal depthwise conv over time.
    pub dwconv: CausalDepthwiseConv<B>,
    /// BatchNorm over channels.
    pub norm: ChannelNorm<B>,
    /// Efficient channel attention gate.
    pub eca: Eca<B>,
    /// `expand x dim -> dim`.
    pub project: Linear<B>,
    /// Drop-path on the residual branch.
    pub drop_path: DropPath,
}

impl<B: Kernels> ConvBlock<B> {
    /// A block of the sizes in `c`.
    pub fn new(c: &ConvTransformerConfig, device: &B::Device) -> Self {
        let wide = c.dim * c.expand;
        Self {
            expand: LinearConfig::new(c.dim, wide).init(device),
            dwconv: CausalDepthwiseConv::new(wide, c.kernel, device),
            norm: ChannelNorm::new(wide, c.bn_momentum, device),
            eca: Eca::new(c.eca_kernel, device),
            project: LinearConfig::new(wide, c.dim).init(device),
            drop_path: DropPath { prob: c.drop_path },
        }
    }

    /// # Shapes
    /// - x: `[batch * time, dim]` (each sample's frames as consecutive rows) -> same
    pub fn forward(&self, x: Tensor<B, 2>, mask: &FrameMask<B>, drops: &DropDraw<B>) -> Tensor<B, 2> {
        let h = linear(&self.expand, x.clone());
        let h = match self.norm.inference(&h.device()) {
            // SiLU, the conv and the norm as one op (one kernel on a GPU).
            Some(norm) => crate::kernels::ops::conv_block_eval(h, self.dwconv.conv.weight.val(), mask.frames(), norm),
            None => self.norm.forward(self.dwconv.forward_silu(h, mask.frames())),
        };
        let h = self.eca.forward(h, mask);
        let h = linear(&self.project, h);
        x + self.drop_path.forward_with(h, drops)
    }
}

/// Pre-norm self-attention and feed-forward, each residual with drop-path.
#[derive(Module, Debug)]
pub struct TransformerBlock<B: Backend> {
    /// Norm before attention.
    pub norm1: ChannelNorm<B>,
    /// Masked multi-head self-attention.
    pub attention: SelfAttention<B>,
    /// Norm before the feed-forward.
    pub norm2: ChannelNorm<B>,
    /// Feed-forward `dim -> 2 dim` (SiLU).
    pub ffn_in: Linear<B>,
    /// Feed-forward `2 dim -> dim`.
    pub ffn_out: Linear<B>,
    /// Drop-path on both residual branches.
    pub drop_path: DropPath,
}

impl<B: Kernels> TransformerBlock<B> {
    /// A block of the sizes in `c`.
    pub fn new(c: &ConvTransformerConfig, device: &B::Device) -> Self {
        Self {
            norm1: ChannelNorm::new(c.dim, c.bn_momentum, device),
            attention: SelfAttention::new(c.dim, c.heads, c.attention_dropout, device),
            norm2: ChannelNorm::new(c.dim, c.bn_momentum, device),
            ffn_in: LinearConfig::new(c.dim, c.dim * c.expand).with_bias(false).init(device),
            ffn_out: LinearConfig::new(c.dim * c.expand, c.dim).with_bias(false).init(device),
            drop_path: DropPath { prob: c.drop_path },
        }
    }

    /// # Shapes
    /// - x: `[batch * time, dim]` (each sample's frames as consecutive rows) -> same
    pub fn forward(&self, x: Tensor<B, 2>, mask: &FrameMask<B>, drops: &DropDraw<B>) -> Tensor<B, 2> {
        let h = self.attention.forward(self.norm1.forward(x.clone()), mask);
        let x = x + self.drop_path.forward_with(h, drops);
        let h = linear(&self.ffn_out, crate::kernels::ops::silu(linear(&self.ffn_in, self.norm2.forward(x.clone()))));
        x + self.drop_path.forward_with(h, drops)
    }
}

/// The 1st-place ISLR conv-transformer.
#[derive(Module, Debug)]
pub struct ConvTransformer<B: Backend> {
    /// Input features -> `dim`.
    pub stem: Linear<B>,
    /// Norm after the stem.
    pub stem_norm: ChannelNorm<B>,
    /// Every stage's conv blocks, in order.
    pub conv_blocks: Vec<ConvBlock<B>>,
    /// One transformer block per stage.
    pub transformer_blocks: Vec<TransformerBlock<B>>,
    /// Conv blocks per stage (to interleave the two lists).
    pub conv_blocks_per_stage: usize,
    /// `dim -> 2 dim` before pooling.
    pub top: Linear<B>,
    /// Dropout before the classifier, once enabled.
    pub late_dropout: Dropout,
    /// Whether late dropout is on (from `training.late_dropout_epoch`).
    pub late_dropout_enabled: bool,
    /// Pooled features -> class logits.
    pub classifier: Linear<B>,
}

impl ConvTransformerConfig {
    /// The model for `input_features` per frame and `classes` classes.
    pub fn init<B: Kernels>(&self, input_features: usize, classes: usize, device: &B::Device) -> ConvTransformer<B> {
        ConvTransformer {
            stem: LinearConfig::new(input_features, self.dim).with_bias(false).init(device),
            stem_norm: ChannelNorm::new(self.dim, self.bn_momentum, device),
            conv_blocks: (0..self.stages * self.conv_blocks_per_stage).map(|_| ConvBlock::new(self, device)).collect(),
            transformer_blocks: (0..self.stages).map(|_| TransformerBlock::new(self, device)).collect(),
            conv_blocks_per_stage: self.conv_blocks_per_stage,
            top: LinearConfig::new(self.dim, self.dim * 2).init(device),
            late_dropout: DropoutConfig::new(self.late_dropout).init(),
            late_dropout_enabled: false,
            classifier: LinearConfig::new(self.dim * 2, classes).init(device),
        }
    }
}

impl<B: Kernels> ConvTransformer<B> {
    /// # Shapes
    /// - x: `[batch, time, features]`, pad_mask: `[batch, time]` (true = pad)
    /// - output: logits `[batch, classes]`
    pub fn forward(&self, x: Tensor<B, 3>, pad_mask: Tensor<B, 2, Bool>) -> Tensor<B, 2> {
        let (h, mask) = self.encode(x, pad_mask);
        let [rows, c] = h.dims();
        let b = mask.batch();
        let pooled = mask.mean(h.reshape([b, rows / b, c]));
        let pooled = if self.late_dropout_enabled { self.late_dropout.forward(pooled) } else { pooled };
        crate::common::linear(&self.classifier, pooled)
    }

    /// The per-frame head: `top` and the classifier on every frame (no pooling, stride 1; late
    /// dropout per frame once enabled).
    ///
    /// # Shapes
    /// - x: `[batch, time, features]`, pad_mask: `[batch, time]` (true = pad)
    /// - output: logits `[batch, time, classes]`
    pub fn forward_frames(&self, x: Tensor<B, 3>, pad_mask: Tensor<B, 2, Bool>) -> Tensor<B, 3> {
        let [b, t, _] = x.dims();
        let (h, _) = self.encode(x, pad_mask);
        let h = if self.late_dropout_enabled { self.late_dropout.forward(h) } else { h };
        let logits = linear(&self.classifier, h);
        let classes = logits.dims()[1];
        logits.reshape([b, t, classes])
    }

    /// Stem, stages and `top`: `[batch, time, features] -> [batch * time, 2 dim]` (the blocks
    /// work on rows, so the linear layers between them queue no reshapes), and the padding
    /// mask's forms (in the activations' dtype) the blocks used.
    fn encode(&self, x: Tensor<B, 3>, pad_mask: Tensor<B, 2, Bool>) -> (Tensor<B, 2>, FrameMask<B>) {
        let [b, t, f] = x.dims();
        let mut x = self.stem_norm.forward(linear(&self.stem, x.reshape([b * t, f])));
        let mask = FrameMask::new(pad_mask, x.dtype());
        // One residual branch per conv block, two per transformer block.
        let prob = self.conv_blocks.first().map_or(0.0, |b| b.drop_path.prob);
        let branches = self.conv_blocks.len() + 2 * self.transformer_blocks.len();
        let drops = DropDraw::new(prob, branches, &x, &mask);
        for (stage, transformer) in self.transformer_blocks.iter().enumerate() {
            let start = stage * self.conv_blocks_per_stage;
            for block in &self.conv_blocks[start..start + self.conv_blocks_per_stage] {
                x = block.forward(x, &mask, &drops);
            }
            x = transformer.forward(x, &mask, &drops);
        }
        (linear(&self.top, x), mask)
    }
}
