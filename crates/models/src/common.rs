//! Building blocks shared by the architectures: masked pooling, drop-path, causal depthwise
//! convolution, multi-head self-attention with a padding mask, channels-last BatchNorm.

use burn::module::Module;
use burn::nn::conv::{Conv1d, Conv1dConfig};
use burn::nn::{BatchNorm, BatchNormConfig, Dropout, DropoutConfig, Linear, LinearConfig, PaddingConfig1d};
use burn::tensor::activation::softmax;
use burn::tensor::backend::Backend;
use burn::tensor::{Bool, DType, Distribution, FloatDType, Tensor};

/// A boolean mask as 0/1 floats in `dtype`, so it can meet half-precision activations (Burn has
/// no autocast: mixing f32 and f16 operands panics).
pub fn mask_to<B: Backend, const D: usize>(mask: Tensor<B, D, Bool>, dtype: DType) -> Tensor<B, D> {
    mask.cast(FloatDType::from(dtype))
}

/// Mean over valid (non-pad) frames.
///
/// # Shapes
/// - x: `[batch, time, channels]`, pad_mask: `[batch, time]` (true = pad)
/// - output: `[batch, channels]`
pub fn masked_mean<B: Backend>(x: Tensor<B, 3>, pad_mask: Tensor<B, 2, Bool>) -> Tensor<B, 2> {
    let valid = mask_to(pad_mask.bool_not(), x.dtype()).unsqueeze_dim::<3>(2); // [B, T, 1]
    let count = valid.clone().sum_dim(1).clamp_min(1.0); // [B, 1, 1]
    (x * valid).sum_dim(1).div(count).squeeze_dim::<2>(1)
}

/// Stochastic depth: during training, drop the whole residual branch of a sample with
/// probability `prob` and scale the kept ones by `1 / (1 - prob)`. Identity at inference.
#[derive(Module, Debug, Clone)]
pub struct DropPath {
    pub prob: f64,
}

impl DropPath {
    /// # Shapes
    /// - x: `[batch, ...]`
    pub fn forward<B: Backend, const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, D> {
        if self.prob <= 0.0 || !B::ad_enabled(&x.device()) {
            return x;
        }
        let mut shape = [1usize; D];
        shape[0] = x.dims()[0];
        let keep = 1.0 - self.prob;
        let mask = Tensor::<B, D>::random(shape, Distribution::Bernoulli(keep), &x.device()).cast(x.dtype());
        x * mask.div_scalar(keep)
    }
}

/// BatchNorm over the channel axis of a channels-last tensor, applied as `[batch * time, C]`
/// (no transpose: strided views are slow in Burn's CPU backends).
#[derive(Module, Debug)]
pub struct ChannelNorm<B: Backend> {
    pub bn: BatchNorm<B>,
}

impl<B: Backend> ChannelNorm<B> {
    pub fn new(channels: usize, momentum: f64, device: &B::Device) -> Self {
        Self { bn: BatchNormConfig::new(channels).with_momentum(momentum).init(device) }
    }

    /// # Shapes
    /// - x: `[batch, time, channels]` -> same
    ///
    /// Half-precision input is normalized in f32 (BatchNorm statistics and running state stay
    /// f32, the usual mixed-precision practice) and cast back.
    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let [b, t, c] = x.dims();
        let dtype = x.dtype();
        if dtype == DType::F32 {
            return self.bn.forward(x.reshape([b * t, c])).reshape([b, t, c]);
        }
        self.bn.forward(x.reshape([b * t, c]).cast(FloatDType::F32)).reshape([b, t, c]).cast(dtype)
    }
}

/// Causal depthwise 1-D convolution: output frame `t` sees input frames `t-k+1 ..= t` only, so
/// padding appended after a sequence never changes its outputs.
#[derive(Module, Debug)]
pub struct CausalDepthwiseConv<B: Backend> {
    pub conv: Conv1d<B>,
    pub kernel: usize,
}

impl<B: Backend> CausalDepthwiseConv<B> {
    pub fn new(channels: usize, kernel: usize, device: &B::Device) -> Self {
        let conv = Conv1dConfig::new(channels, channels, kernel)
            .with_groups(channels)
            .with_bias(false)
            .with_padding(PaddingConfig1d::Valid)
            .init(device);
        Self { conv, kernel }
    }

    /// # Shapes
    /// - x: `[batch, channels, time]` -> same
    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let [b, c, _] = x.dims();
        let left = Tensor::zeros([b, c, self.kernel - 1], (&x.device(), x.dtype()));
        self.conv.forward(Tensor::cat(vec![left, x], 2))
    }
}

/// Efficient channel attention: a sigmoid gate per channel from a k-tap convolution over the
/// channel axis of the (masked) time average.
#[derive(Module, Debug)]
pub struct Eca<B: Backend> {
    pub conv: Conv1d<B>,
}

impl<B: Backend> Eca<B> {
    pub fn new(kernel: usize, device: &B::Device) -> Self {
        let conv = Conv1dConfig::new(1, 1, kernel)
            .with_bias(false)
            .with_padding(PaddingConfig1d::Explicit(kernel / 2, kernel / 2))
            .init(device);
        Self { conv }
    }

    /// # Shapes
    /// - x: `[batch, time, channels]`, pad_mask `[batch, time]` -> `[batch, time, channels]`
    pub fn forward(&self, x: Tensor<B, 3>, pad_mask: Tensor<B, 2, Bool>) -> Tensor<B, 3> {
        let [b, _, c] = x.dims();
        let pooled = masked_mean(x.clone(), pad_mask).reshape([b, 1, c]);
        let gate = burn::tensor::activation::sigmoid(self.conv.forward(pooled)); // [B, 1, C]
        x * gate
    }
}

/// Multi-head self-attention with a fused qkv projection (no bias) and an output projection
/// (no bias), as in the reference ISLR model. Padded keys get no attention.
#[derive(Module, Debug)]
pub struct SelfAttention<B: Backend> {
    pub qkv: Linear<B>,
    pub proj: Linear<B>,
    pub dropout: Dropout,
    pub heads: usize,
}

impl<B: Backend> SelfAttention<B> {
    pub fn new(dim: usize, heads: usize, dropout: f64, device: &B::Device) -> Self {
        Self {
            qkv: LinearConfig::new(dim, 3 * dim).with_bias(false).init(device),
            proj: LinearConfig::new(dim, dim).with_bias(false).init(device),
            dropout: DropoutConfig::new(dropout).init(),
            heads,
        }
    }

    /// # Shapes
    /// - x: `[batch, time, dim]`, pad_mask `[batch, time]` -> `[batch, time, dim]`
    pub fn forward(&self, x: Tensor<B, 3>, pad_mask: Tensor<B, 2, Bool>) -> Tensor<B, 3> {
        let [b, t, d] = x.dims();
        let h = self.heads;
        let hd = d / h;
        let qkv = self.qkv.forward(x).reshape([b, t, 3, h, hd]).permute([2, 0, 3, 1, 4]); // [3, B, H, T, hd]
        let q: Tensor<B, 4> = qkv.clone().narrow(0, 0, 1).squeeze_dim(0);
        let k: Tensor<B, 4> = qkv.clone().narrow(0, 1, 1).squeeze_dim(0);
        let v: Tensor<B, 4> = qkv.narrow(0, 2, 1).squeeze_dim(0);
        let scores = q.matmul(k.swap_dims(2, 3)).mul_scalar(1.0 / (hd as f64).sqrt()); // [B, H, T, T]
        let bias = mask_to(pad_mask, scores.dtype()).mul_scalar(-1e4).reshape([b, 1, 1, t]);
        let attn = self.dropout.forward(softmax(scores + bias, 3));
        let out = attn.matmul(v).swap_dims(1, 2).reshape([b, t, d]);
        self.proj.forward(out)
    }
}
