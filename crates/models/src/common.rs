//! Building blocks shared by the architectures: masked pooling, drop-path, causal depthwise
//! convolution, multi-head self-attention with a padding mask, channels-last BatchNorm.

use burn::module::Module;
use burn::nn::conv::{Conv1d, Conv1dConfig};
use burn::nn::{BatchNorm, BatchNormConfig, Dropout, DropoutConfig, Linear, LinearConfig, PaddingConfig1d};
use burn::tensor::backend::Backend;
use burn::tensor::{Bool, DType, Distribution, FloatDType, Tensor};

use crate::kernels::Kernels;

/// `on` where `mask` is true and `off` elsewhere, as floats in `dtype` (so they can meet
/// half-precision activations: Burn has no autocast, and mixing f32 and f16 operands panics).
///
/// Built from zeros and a masked fill, both fusion ops, so on GPU-class backends it joins the
/// element-wise ops around it in one kernel. A bool-to-float cast or a `bool_not` is no fusion op
/// in Burn 0.21: it runs as a kernel of its own, and so does every op queued after it in the same
/// block (one launch each). `Tensor::full` is no better under autodiff: it uploads the filled data.
pub fn mask_values<B: Backend, const D: usize>(
    mask: Tensor<B, D, Bool>,
    on: f64,
    off: f64,
    dtype: DType,
) -> Tensor<B, D> {
    let zeros = Tensor::zeros(mask.shape(), (&mask.device(), dtype));
    let base = if off == 0.0 { zeros } else { zeros.add_scalar(off) };
    base.mask_fill(mask, on)
}

/// A `Linear` applied to the rows of `x` through [`Kernels::dense`] (on the host: no
/// zero-filled buffers, bias and its gradient on every thread).
///
/// # Shapes
/// - x: `[rows, in]` -> `[rows, out]`
pub fn linear<B: Kernels>(linear: &Linear<B>, x: Tensor<B, 2>) -> Tensor<B, 2> {
    crate::kernels::ops::linear(x, linear.weight.val(), linear.bias.as_ref().map(|b| b.val()))
}

/// A `Linear` applied to `[batch, time, in]` as one `[batch * time, in]` matrix product: Burn
/// differentiates a 3-D `linear` into per-sample weight gradients summed over the batch (64
/// small products and a reduction); flattened, the weight gradient is a single product.
///
/// # Shapes
/// - x: `[batch, time, in]` -> `[batch, time, out]`
pub fn linear_rows<B: Kernels>(layer: &Linear<B>, x: Tensor<B, 3>) -> Tensor<B, 3> {
    let [b, t, c] = x.dims();
    let y = linear(layer, x.reshape([b * t, c]));
    let out = y.dims()[1];
    y.reshape([b, t, out])
}

/// A batch's padding mask in the forms the layers take, built once per forward pass: each form
/// costs a few kernel launches on a GPU backend, and the conv-transformer's blocks use them at
/// every block.
#[derive(Clone, Debug)]
pub struct FrameMask<B: Backend> {
    /// `[batch, 1, time]`: `1 / count` on a sample's valid frames, 0 on padding.
    pub mean_weights: Tensor<B, 3>,
    /// `[batch, time]`: -1e4 on padded frames, 0 elsewhere (attention's key bias).
    pub key_bias: Tensor<B, 2>,
}

impl<B: Backend> FrameMask<B> {
    /// The forms of `pad_mask` (`[batch, time]`, true = pad) in the activations' `dtype`.
    pub fn new(pad_mask: Tensor<B, 2, Bool>, dtype: DType) -> Self {
        let [b, t] = pad_mask.dims();
        let valid = mask_values(pad_mask, 0.0, 1.0, dtype); // [B, T]
        let count = valid.clone().sum_dim(1).clamp_min(1.0);
        // [B, T]: -1e4 on padded frames, from `valid` rather than the mask (fused with the division).
        let key_bias = valid.clone().sub_scalar(1.0).mul_scalar(1e4);
        let mean_weights = (valid / count).reshape([b, 1, t]);
        Self { mean_weights, key_bias }
    }

    /// The batch size.
    pub fn batch(&self) -> usize {
        self.mean_weights.dims()[0]
    }

    /// Frames per sample.
    pub fn frames(&self) -> usize {
        self.mean_weights.dims()[2]
    }

    /// Mean of `x` over each sample's valid frames.
    ///
    /// # Shapes
    /// - x: `[batch, time, channels]` -> `[batch, channels]`
    pub fn mean(&self, x: Tensor<B, 3>) -> Tensor<B, 2> {
        let [b, _, c] = x.dims();
        // Weights 1/count on valid frames as a [B, 1, T] row: one batched product [B, 1, T] x
        // [B, T, C] (forward and backward stay contiguous, unlike a broadcast multiply and a
        // middle-axis sum).
        self.mean_weights.clone().matmul(x).reshape([b, c])
    }
}

/// Mean over valid (non-pad) frames ([`FrameMask::mean`] of a mask built for this one call).
///
/// # Shapes
/// - x: `[batch, time, channels]`, pad_mask: `[batch, time]` (true = pad)
/// - output: `[batch, channels]`
pub fn masked_mean<B: Backend>(x: Tensor<B, 3>, pad_mask: Tensor<B, 2, Bool>) -> Tensor<B, 2> {
    FrameMask::new(pad_mask, x.dtype()).mean(x)
}

/// Stochastic depth: during training, drop the whole residual branch of a sample with
/// probability `prob` and scale the kept ones by `1 / (1 - prob)`. Identity at inference.
#[derive(Module, Debug, Clone)]
pub struct DropPath {
    /// Probability of dropping a sample's branch.
    pub prob: f64,
}

impl DropPath {
    /// # Shapes
    /// - x: `[batch * frames, channels]` (each sample's frames as consecutive rows) -> same
    pub fn forward<B: Kernels>(&self, x: Tensor<B, 2>, frames: usize) -> Tensor<B, 2> {
        if self.prob <= 0.0 || !B::ad_enabled(&x.device()) {
            return x;
        }
        let [rows, c] = x.dims();
        let batch = rows / frames.max(1);
        let keep = 1.0 - self.prob;
        let mask = Tensor::<B, 3>::random([batch, 1, 1], Distribution::Bernoulli(keep), &x.device()).cast(x.dtype());
        (x.reshape([batch, frames, c]) * mask.div_scalar(keep)).reshape([rows, c])
    }

    /// [`DropPath::forward`] with the mask from `draw` where it has one.
    pub fn forward_with<B: Kernels>(&self, x: Tensor<B, 2>, draw: &DropDraw<B>) -> Tensor<B, 2> {
        if self.prob <= 0.0 || !B::ad_enabled(&x.device()) {
            return x;
        }
        match draw.take(self.prob) {
            Some(mask) => x * mask,
            None => self.forward(x, draw.frames),
        }
    }
}

/// The drop-path masks of one forward pass. On a device with the GPU kernels
/// ([`crate::kernels::ops::fused_kernels`]) in training, every branch's mask is drawn in one
/// launch, spread over its rows in one more and handed out as a view (a draw per branch is a
/// launch each there); elsewhere each [`DropPath`] draws its own.
#[derive(Debug)]
pub struct DropDraw<B: Backend> {
    /// The branches' masks over the rows (`[batch * frames, 1]`: `0` or `1 / keep`, the same for
    /// all rows of a sample) not yet handed out, in order: views of one buffer, made by one
    /// operation.
    masks: core::cell::RefCell<std::vec::IntoIter<Tensor<B, 2>>>,
    prob: f64,
    frames: usize,
}

/// Elements per block of [`DropDraw`]'s buffer are a multiple of this, so every block starts at
/// the device's memory alignment (at most 512 bytes; 256 f16 or f32 elements are at least that).
const DROP_ROW_ALIGN: usize = 256;

impl<B: Kernels> DropDraw<B> {
    /// Masks for up to `branches` residual branches over the rows of activations like `like`
    /// (`[batch * frames, C]`, the activations' dtype) for the batch `mask` describes, dropping a
    /// branch with probability `prob`.
    pub fn new(prob: f64, branches: usize, like: &Tensor<B, 2>, mask: &FrameMask<B>) -> Self {
        let (batch, frames) = (mask.batch(), mask.frames());
        // Samples per block, rounded up so a block's rows fill whole alignment units.
        let per_unit = DROP_ROW_ALIGN / gcd(frames.max(1), DROP_ROW_ALIGN);
        let samples = batch.div_ceil(per_unit) * per_unit;
        let stride = samples * frames;
        let device = like.device();
        let at_once = prob > 0.0 && branches > 0 && B::ad_enabled(&device) && crate::kernels::ops::fused_kernels(like);
        let masks = if at_once {
            let keep = 1.0 - prob;
            let draws =
                Tensor::<B, 3>::random([branches, samples, 1], Distribution::Bernoulli(keep), (&device, like.dtype()))
                    .div_scalar(keep);
            let spread = Tensor::<B, 3>::zeros([branches, samples, frames], (&device, like.dtype())) + draws;
            let windows: Vec<_> = (0..branches).map(|i| (i * stride, [batch * frames, 1])).collect();
            crate::kernels::ops::views(spread.reshape([branches * stride]), &windows)
        } else {
            Vec::new()
        };
        Self { masks: core::cell::RefCell::new(masks.into_iter()), prob, frames }
    }

    /// The next branch's mask, `[batch * frames, 1]`, if this draw has one for `prob`.
    fn take(&self, prob: f64) -> Option<Tensor<B, 2>> {
        if prob != self.prob {
            return None;
        }
        self.masks.borrow_mut().next()
    }
}

/// The greatest common divisor of `a` and `b`.
fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// BatchNorm over the channel axis of rows `[batch * time, C]` (channels last: no transpose,
/// strided views are slow in Burn's CPU backends).
#[derive(Module, Debug)]
pub struct ChannelNorm<B: Backend> {
    /// Burn's BatchNorm, whose parameters and running statistics this layer uses.
    pub bn: BatchNorm<B>,
    /// Folded into a neighbouring linear layer's weights for inference (`engine::fold`): the
    /// layer is then the identity. Not part of the record (a folded model is never saved), so
    /// a loaded norm is never folded.
    pub folded: bool,
}

impl<B: Kernels> ChannelNorm<B> {
    /// A norm over `channels` with running-statistics momentum `momentum`.
    pub fn new(channels: usize, momentum: f64, device: &B::Device) -> Self {
        Self { bn: BatchNormConfig::new(channels).with_momentum(momentum).init(device), folded: false }
    }

    /// # Shapes
    /// - x: `[rows, channels]` -> same
    ///
    /// Training mode runs [`crate::kernels`]' BatchNorm (closed-form backward) and updates the
    /// running statistics exactly as Burn's `BatchNorm` does (biased batch variance, `momentum`);
    /// inference normalizes with the running statistics as Burn's does, on a GPU backend in one
    /// kernel ([`crate::kernels::Kernels::channel_norm_eval`]).
    /// Half-precision input is normalized in f32 (BatchNorm statistics and running state stay
    /// f32, the usual mixed-precision practice): the GPU kernels read it beside the f32
    /// parameters as it is and write the output in its dtype; elsewhere it is cast to f32 and
    /// back.
    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        if self.folded {
            return x;
        }
        let dtype = x.dtype();
        let to_f32 = |x: Tensor<B, 2>| if dtype == DType::F32 { x } else { x.cast(FloatDType::F32) };
        let back = |y: Tensor<B, 2>| if dtype == DType::F32 { y } else { y.cast(dtype) };
        let device = x.device();
        if self.bn.epsilon != crate::kernels::NORM_EPS {
            return back(self.bn.forward(to_f32(x)));
        }
        if let Some([gamma, beta, mean, var]) = self.inference(&device) {
            return crate::kernels::ops::channel_norm_eval(x, gamma, beta, mean, var);
        }
        let running_mean = self.bn.running_mean.value_sync().to_device(&device);
        let running_var = self.bn.running_var.value_sync().to_device(&device);
        let (gamma, beta, momentum) = (self.bn.gamma.val(), self.bn.beta.val(), self.bn.momentum);
        let running = (running_mean.clone(), running_var.clone());
        let fused = crate::kernels::ops::channel_norm_fused(x.clone(), gamma.clone(), beta.clone(), running, momentum);
        let (y, mean, var) = fused.unwrap_or_else(|| {
            let (y, stats) = crate::kernels::ops::channel_norm_train(to_f32(x), gamma, beta);
            let (mean, var) = crate::kernels::ops::running_stats(stats.detach(), running_mean, running_var, momentum);
            (back(y), mean, var)
        });
        self.bn.running_mean.update(mean.detach());
        self.bn.running_var.update(var.detach());
        y
    }
}

impl<B: Backend> ChannelNorm<B> {
    /// In inference (no autodiff on `device`) and with the kernels' epsilon, the norm's
    /// `[gamma, beta, running mean, running variance]` on `device`, for an op that applies it
    /// inside its own pass; `None` where [`ChannelNorm::forward`] must run it (a folded norm
    /// too: it runs as the identity).
    pub fn inference(&self, device: &B::Device) -> Option<[Tensor<B, 1>; 4]> {
        if self.folded || B::ad_enabled(device) || self.bn.epsilon != crate::kernels::NORM_EPS {
            return None;
        }
        let (mean, var) = (self.bn.running_mean.value(), self.bn.running_var.value());
        Some([self.bn.gamma.val(), self.bn.beta.val(), mean.to_device(device), var.to_device(device)])
    }
}

/// Causal depthwise 1-D convolution over time of a channels-last sequence: output frame `t` sees
/// input frames `t-k+1 ..= t` only, so padding appended after a sequence never changes its
/// outputs. Runs [`crate::kernels`]' op (no transposes, closed-form backward); the weights stay
/// in a depthwise `Conv1d` (`[channels, 1, kernel]`) so saved models load unchanged.
#[derive(Module, Debug)]
pub struct CausalDepthwiseConv<B: Backend> {
    /// Burn's depthwise `Conv1d`, kept for its weights and record format.
    pub conv: Conv1d<B>,
    /// Kernel length (frames).
    pub kernel: usize,
}

impl<B: Kernels> CausalDepthwiseConv<B> {
    /// A causal depthwise conv over `channels` with a `kernel`-frame window.
    pub fn new(channels: usize, kernel: usize, device: &B::Device) -> Self {
        let conv = Conv1dConfig::new(channels, channels, kernel)
            .with_groups(channels)
            .with_bias(false)
            .with_padding(PaddingConfig1d::Valid)
            .init(device);
        Self { conv, kernel }
    }

    /// # Shapes
    /// - x: `[batch * frames, channels]` (each sample's frames as consecutive rows) -> same
    pub fn forward(&self, x: Tensor<B, 2>, frames: usize) -> Tensor<B, 2> {
        crate::kernels::ops::causal_dwconv(x, self.conv.weight.val(), frames)
    }

    /// The conv of SiLU of `h` (a conv block's activation and conv): one op where the GPU
    /// kernels run ([`Kernels::silu_dwconv`]), else SiLU and the conv as two (the host loops
    /// keep SiLU's output for the backward pass rather than compute it again).
    ///
    /// # Shapes
    /// - h: `[batch * frames, channels]` -> same
    pub fn forward_silu(&self, h: Tensor<B, 2>, frames: usize) -> Tensor<B, 2> {
        if crate::kernels::ops::fused_kernels(&h) {
            crate::kernels::ops::silu_dwconv(h, self.conv.weight.val(), frames)
        } else {
            self.forward(crate::kernels::ops::silu(h), frames)
        }
    }
}

/// Efficient channel attention: a sigmoid gate per channel from a k-tap convolution over the
/// channel axis of the (masked) time average.
#[derive(Module, Debug)]
pub struct Eca<B: Backend> {
    /// The 1-D conv over the channel axis.
    pub conv: Conv1d<B>,
}

impl<B: Kernels> Eca<B> {
    /// An ECA gate with a `kernel`-wide channel conv.
    pub fn new(kernel: usize, device: &B::Device) -> Self {
        let conv = Conv1dConfig::new(1, 1, kernel)
            .with_bias(false)
            .with_padding(PaddingConfig1d::Explicit(kernel / 2, kernel / 2))
            .init(device);
        Self { conv }
    }

    /// # Shapes
    /// - x: `[batch * time, channels]` (each sample's frames as consecutive rows) -> same
    pub fn forward(&self, x: Tensor<B, 2>, mask: &FrameMask<B>) -> Tensor<B, 2> {
        if crate::kernels::ops::fused_kernels(&x) {
            return crate::kernels::ops::eca(x, mask.mean_weights.clone(), self.conv.weight.val());
        }
        let ([rows, c], b) = (x.dims(), mask.batch());
        let pooled = mask.mean(x.clone().reshape([b, rows / b, c])).reshape([b, 1, c]);
        let gate = burn::tensor::activation::sigmoid(self.conv.forward(pooled)).reshape([b, c]);
        crate::kernels::ops::scale_channels(x, gate)
    }
}

/// Multi-head self-attention with a fused qkv projection (no bias) and an output projection
/// (no bias), as in the reference ISLR model. Padded keys get no attention.
#[derive(Module, Debug)]
pub struct SelfAttention<B: Backend> {
    /// Fused query/key/value projection `[dim, 3 dim]`.
    pub qkv: Linear<B>,
    /// Output projection.
    pub proj: Linear<B>,
    /// Dropout on the attention weights.
    pub dropout: Dropout,
    /// Attention heads.
    pub heads: usize,
}

impl<B: Kernels> SelfAttention<B> {
    /// Multi-head self-attention of width `dim`.
    pub fn new(dim: usize, heads: usize, dropout: f64, device: &B::Device) -> Self {
        Self {
            qkv: LinearConfig::new(dim, 3 * dim).with_bias(false).init(device),
            proj: LinearConfig::new(dim, dim).with_bias(false).init(device),
            dropout: DropoutConfig::new(dropout).init(),
            heads,
        }
    }

    /// # Shapes
    /// - x: `[batch * time, dim]` (each sample's frames as consecutive rows) -> same
    pub fn forward(&self, x: Tensor<B, 2>, mask: &FrameMask<B>) -> Tensor<B, 2> {
        let ([b, t], d) = ([mask.batch(), mask.frames()], x.dims()[1]);
        let h = self.heads;
        if crate::kernels::ops::fused_kernels(&x) {
            // One product for q, k and v; the GPU kernels read them in place from its columns
            // and write the output with the heads merged.
            let qkv = linear(&self.qkv, x);
            let scores = crate::kernels::ops::attention_scores(qkv.clone(), b, h);
            let attn =
                crate::kernels::ops::key_biased_softmax_dropout(scores, mask.key_bias.clone(), self.dropout.prob);
            let out = crate::kernels::ops::attention_values(attn, qkv);
            return linear(&self.proj, out);
        }
        let hd = d / h;
        // q, k and v from column blocks of the fused weight (strided views, read in place by the
        // matrix product) so no activation is sliced; heads split/merged by `kernels`.
        let rows = x;
        let w = self.qkv.weight.val(); // [d, 3d]
        let bias = self.qkv.bias.as_ref().map(|b| b.val()); // [3d] (a folded norm's shift)
        let part = |i: usize| {
            let bias = bias.clone().map(|b| b.narrow(0, i * d, d));
            crate::kernels::ops::linear(rows.clone(), w.clone().narrow(1, i * d, d), bias).reshape([b, t, d])
        };
        let q = crate::kernels::ops::split_heads(part(0), h); // [B, H, T, hd]
        let kt = crate::kernels::ops::split_heads_transposed(part(1), h); // [B, H, hd, T]
        let v = crate::kernels::ops::split_heads(part(2), h);
        let scores = q.matmul(kt).mul_scalar(1.0 / (hd as f64).sqrt()); // [B, H, T, T]
        let attn = crate::kernels::ops::key_biased_softmax_dropout(scores, mask.key_bias.clone(), self.dropout.prob);
        let out = crate::kernels::ops::merge_heads(attn.matmul(v)).reshape([b * t, d]);
        linear(&self.proj, out)
    }
}
