//! Project-side kernels for the ops where Burn 0.21's own formulation is the bottleneck on the CPU
//! (see docs/PERFORMANCE.md for the measurements behind each one):
//!
//! - causal depthwise convolution, channels-last (`[B, T, C]`, kernel `[C, K]`): Burn's `conv1d`
//!   needs channels-first, so the transposes around it went through the CPU backend's strided
//!   copy, and its backward runs a generic transposed convolution;
//! - channel normalization in training mode (BatchNorm over the rows of `[N, C]`): Burn's
//!   `BatchNorm` transposes to compute its statistics and differentiates through them op by op
//!   (about 40x the cost of the forward pass).
//!
//! Every op has a closed-form backward registered with Burn's autodiff ([`Kernels`] for
//! `Autodiff<B>`), so backward costs about as much as forward. On a host-resident backend (Flex,
//! or `Dispatch` on a Flex device) with f32 data the work runs in plain Rust loops over
//! contiguous rows, split over threads with rayon; everywhere else (CUDA, wgpu, half precision)
//! it runs as ordinary Burn tensor ops ([`reference`]), so every device gets the same math.
//! Tests check both paths against Burn's own autodiff of the straightforward formulation.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::Autodiff;
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, Tensor, TensorData, TensorPrimitive};

/// BatchNorm's epsilon (Burn's `BatchNormConfig` default, PyTorch's too).
pub const NORM_EPS: f64 = 1e-5;

fn wrap<B: Backend, const D: usize>(t: FloatTensor<B>) -> Tensor<B, D> {
    Tensor::from_primitive(TensorPrimitive::Float(t))
}

fn unwrap<B: Backend, const D: usize>(t: Tensor<B, D>) -> FloatTensor<B> {
    t.into_primitive().tensor()
}

/// Backends that can run SignFlow's custom ops. Every method has a default that is correct on
/// any backend; a backend opts into the host loops with [`Kernels::host_resident`].
pub trait Kernels: Backend {
    /// Whether tensors on `device` live in host memory (the CPU backends), so the host loops apply.
    fn host_resident(_device: &burn::tensor::ops::Device<Self>) -> bool {
        false
    }

    /// The values of a contiguous host-resident f32 tensor, borrowed in place (`None` for any
    /// other tensor): host loops read a tensor that is still held elsewhere, such as an input
    /// saved for the backward pass, without copying it out.
    fn host_f32(_tensor: &FloatTensor<Self>) -> Option<&[f32]> {
        None
    }

    /// Causal depthwise convolution over the frames of each sample: `y[b, t, c] = sum_k w[c, 0,
    /// k] * x[b, t - K + 1 + k, c]` (frames before the start are zero), with `x` as rows (each
    /// sample's `frames` rows in order) like the linear layers around it, so no reshape is
    /// queued between them. `w` is the depthwise `Conv1d`'s own weight, so its gradient is in
    /// the parameter's shape and the optimizer reads it without a copy.
    ///
    /// # Shapes
    /// - x: `[batch * frames, channels]`, w: `[channels, 1, kernel]` -> like x
    fn causal_dwconv(x: FloatTensor<Self>, w: FloatTensor<Self>, frames: usize) -> FloatTensor<Self> {
        portable::causal_dwconv::<Self>(x, w, frames)
    }

    /// Gradients of [`Kernels::causal_dwconv`] with respect to `x` and `w` (in their shapes).
    fn causal_dwconv_backward(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        frames: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        portable::causal_dwconv_backward::<Self>(x, w, grad, frames)
    }

    /// [`Kernels::causal_dwconv`] of [`Kernels::silu`] of `h`: a conv block's middle in
    /// training. A GPU backend runs it as one kernel that computes SiLU as it reads `h` and
    /// keeps no SiLU output for the backward pass (which takes SiLU's derivative in the input
    /// gradient's kernel): one launch fewer each way than the two ops. Layers take it where the
    /// GPU kernels run ([`Kernels::fused_kernels`]); on the host they keep the two ops, whose
    /// loops keep SiLU's output rather than compute it again in the backward pass.
    ///
    /// # Shapes
    /// - h: `[batch * frames, channels]`, w: `[channels, 1, kernel]` -> like h
    fn silu_dwconv(h: FloatTensor<Self>, w: FloatTensor<Self>, frames: usize) -> FloatTensor<Self> {
        portable::silu_dwconv::<Self>(h, w, frames)
    }

    /// Gradients of [`Kernels::silu_dwconv`] with respect to `h` and `w` (in their shapes).
    fn silu_dwconv_backward(
        h: FloatTensor<Self>,
        w: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        frames: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        portable::silu_dwconv_backward::<Self>(h, w, grad, frames)
    }

    /// SiLU, `x * sigmoid(x)`, in one pass (Burn composes it from several single-threaded passes).
    fn silu<const D: usize>(x: FloatTensor<Self>) -> FloatTensor<Self> {
        portable::silu::<Self, D>(x)
    }

    /// Gradient of [`Kernels::silu`]: `grad * s * (1 + x * (1 - s))` with `s = sigmoid(x)`.
    fn silu_backward<const D: usize>(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        portable::silu_backward::<Self, D>(x, grad)
    }

    /// `x * gate` with one gate per (sample, channel) shared by all its frames (ECA), `x` as
    /// rows (each sample's frames in order): Flex has no fast path for a `[B, 1, C]` broadcast
    /// and walks it element by element.
    ///
    /// # Shapes
    /// - x: `[batch * time, channels]`, gate: `[batch, channels]` -> like x
    fn scale_channels(x: FloatTensor<Self>, gate: FloatTensor<Self>) -> FloatTensor<Self> {
        let (x, g) = (wrap::<Self, 2>(x), wrap::<Self, 2>(gate));
        let ([rows, c], b) = (x.dims(), g.dims()[0]);
        if host_ok(&x) && host_ok(&g) {
            let device = x.device();
            let out = host::scale_channels(host_data(x).f32(), host_data(g).f32(), b, rows / b, c);
            return host_tensor::<Self, _>(out, [rows, c], &device);
        }
        unwrap(reference::scale_channels(x.reshape([b, rows / b, c]), g).reshape([rows, c]))
    }

    /// Gradients of [`Kernels::scale_channels`] with respect to `x` and `gate`.
    fn scale_channels_backward(
        x: FloatTensor<Self>,
        gate: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (x, g, gr) = (wrap::<Self, 2>(x), wrap::<Self, 2>(gate), wrap::<Self, 2>(grad));
        let ([rows, c], b) = (x.dims(), g.dims()[0]);
        let t = rows / b;
        if host_ok(&x) && host_ok(&g) && host_ok(&gr) {
            let device = x.device();
            let (xd, gd, grd) = (host_data(x), host_data(g), host_data(gr));
            let gx = host::scale_channels(grd.f32(), gd.f32(), b, t, c);
            let gg = host::channel_dot(grd.f32(), xd.f32(), b, t, c);
            return (host_tensor::<Self, _>(gx, [rows, c], &device), host_tensor::<Self, _>(gg, [b, c], &device));
        }
        let (x, gr) = (x.reshape([b, t, c]), gr.reshape([b, t, c]));
        let gx = reference::scale_channels(gr.clone(), g).reshape([rows, c]);
        let gg: Tensor<Self, 2> = (gr * x).sum_dim(1).squeeze_dim(1);
        (unwrap(gx), unwrap(gg))
    }

    /// Attention softmax over keys with an additive per-key bias (the padding mask):
    /// `softmax(scores + bias[b, None, None, :], dim = 3)`. The bias is a constant.
    ///
    /// # Shapes
    /// - scores: `[batch, heads, query, key]`, bias: `[batch, key]` -> like scores
    fn key_biased_softmax(scores: FloatTensor<Self>, bias: FloatTensor<Self>) -> FloatTensor<Self> {
        portable::key_biased_softmax::<Self>(scores, bias)
    }

    /// Gradient of a softmax over the last axis from its output `y`: `y * (grad - sum(grad * y))`.
    fn softmax_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        portable::softmax_backward::<Self>(y, grad)
    }

    /// [`Kernels::key_biased_softmax`] and its copy with dropout of probability `prob` in one
    /// kernel, where the backend has one (`None` elsewhere): the mask is a hash of each element's
    /// index and a seed made of `seeds` (four whole numbers below 2048 in the scores' dtype,
    /// drawn on the device, so no host read), as [`dropout_mask`] makes it on the host.
    fn softmax_dropout(
        _scores: FloatTensor<Self>,
        _bias: FloatTensor<Self>,
        _seeds: FloatTensor<Self>,
        _prob: f64,
    ) -> Option<(FloatTensor<Self>, FloatTensor<Self>)> {
        None
    }

    /// Gradient of [`Kernels::softmax_dropout`] with respect to the scores, from the softmax
    /// `y`, the dropped-out copy `out` and its gradient: `grad * out - y * sum_keys(grad * out)`.
    fn softmax_dropout_backward(
        y: FloatTensor<Self>,
        out: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        portable::softmax_dropout_backward::<Self>(y, out, grad)
    }

    /// Dropout (probability `prob`) on [`Kernels::key_biased_softmax`]'s output, the attention
    /// weights. Only autodiff backends drop anything: without autodiff (inference) this is the
    /// softmax, as with Burn's `Dropout`. For autodiff over a host-resident f32 backend it is one
    /// fused op whose keep mask is a counter-based hash of `seed` and the element's index
    /// ([`dropout_mask`]): regenerated in the backward pass instead of stored, and drawn in
    /// parallel instead of element by element from one generator. `seed: None` draws the seed
    /// from the backend's random stream (`Backend::seed` makes it repeatable). On a device with
    /// the GPU kernels ([`Kernels::fused_kernels`]) it is one kernel with the same kind of mask,
    /// its seed drawn from the backend's stream on the device ([`Kernels::softmax_dropout`];
    /// `seed` unused). Elsewhere it is Burn's `Dropout` after the softmax (its own random stream;
    /// `seed` unused).
    ///
    /// # Shapes
    /// - scores: `[batch, heads, query, key]`, bias: `[batch, key]` -> like scores
    fn key_biased_softmax_dropout(
        scores: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        prob: f64,
        seed: Option<u64>,
    ) -> FloatTensor<Self> {
        let _ = (prob, seed);
        Self::key_biased_softmax(scores, bias)
    }

    /// `[batch, time, heads * head_dim]` -> `[batch, heads, time, head_dim]`, contiguous (the
    /// attention head split; Burn's `swap_dims` + `reshape` copies element by element on Flex).
    fn split_heads(x: FloatTensor<Self>, heads: usize) -> FloatTensor<Self> {
        let x = wrap::<Self, 3>(x);
        let [b, t, d] = x.dims();
        if host_ok(&x) && heads > 0 && d % heads == 0 {
            let device = x.device();
            let out = host::permute_0213(host_data(x).f32(), b, t, heads, d / heads);
            return host_tensor::<Self, _>(out, [b, heads, t, d / heads], &device);
        }
        unwrap(reference::split_heads(x, heads))
    }

    /// Inverse of [`Kernels::split_heads`]: `[batch, heads, time, head_dim]` -> `[batch, time, heads * head_dim]`.
    fn merge_heads(x: FloatTensor<Self>) -> FloatTensor<Self> {
        let x = wrap::<Self, 4>(x);
        let [b, h, t, hd] = x.dims();
        if host_ok(&x) {
            let device = x.device();
            let out = host::permute_0213(host_data(x).f32(), b, h, t, hd);
            return host_tensor::<Self, _>(out, [b, t, h * hd], &device);
        }
        unwrap(reference::merge_heads(x))
    }

    /// `[batch, rows, cols]` -> `[batch, cols, rows]`, contiguous; its own inverse. The attention
    /// keys go through it (transposed before the head split) instead of a transposed view: the
    /// view's gradient reached the head merge as a strided tensor, which Flex copied element by
    /// element on one thread.
    fn transpose_rows(x: FloatTensor<Self>) -> FloatTensor<Self> {
        let x = wrap::<Self, 3>(x);
        let [b, r, c] = x.dims();
        if host_ok(&x) {
            let device = x.device();
            let out = host::transpose_blocks(host_data(x).f32(), b, r, c);
            return host_tensor::<Self, _>(out, [b, c, r], &device);
        }
        unwrap(x.swap_dims(1, 2))
    }

    /// A linear layer, `x w (+ bias)` for the rows of `x`: Burn's `linear` on a 2-D input (named
    /// `dense` because every backend already has a `ModuleOps::linear`). On the host the bias is
    /// written first and the product accumulated onto it, with no zero-filled buffers
    /// ([`crate::host_gemm`]); its backward skips the gradients nobody asked for.
    ///
    /// # Shapes
    /// - x: `[rows, in]`, w: `[in, out]`, bias: `[out]` -> `[rows, out]`
    fn dense(x: FloatTensor<Self>, w: FloatTensor<Self>, bias: Option<FloatTensor<Self>>) -> FloatTensor<Self> {
        let (x, w, bias) = (wrap::<Self, 2>(x), wrap::<Self, 2>(w), bias.map(wrap::<Self, 1>));
        let [n, k] = x.dims();
        let m = w.dims()[1];
        if host_ok(&x) && host_ok(&w) && bias.as_ref().is_none_or(host_ok) && w.dims()[0] == k {
            let device = x.device();
            let (xd, wd, bd) = (host_data(x), host_data(w), bias.map(host_data));
            let out = crate::host_gemm::linear(xd.f32(), wd.f32(), bd.as_ref().map(HostData::f32), n, k, m);
            return host_tensor::<Self, _>(out, [n, m], &device);
        }
        unwrap(burn::tensor::module::linear(x, w, bias))
    }

    /// Gradients of [`Kernels::dense`] with respect to `x`, `w` and the bias, each computed only
    /// where `wanted` (in that order) asks for it.
    fn dense_backward(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        wanted: [bool; 3],
    ) -> [Option<FloatTensor<Self>>; 3] {
        portable::dense_backward::<Self>(x, w, grad, wanted)
    }

    /// For each window `(start, shape)`, `shape` elements of the contiguous 1-D `flat` from
    /// `start`, as a view of its memory where the backend can (`cube::views` on CUDA and WGPU,
    /// where `start` is at the memory alignment: all windows in one operation of Burn's fusion
    /// stream), else a copy. Not differentiable: for constants such as masks, and the
    /// half-precision copy of the weights (whose gradients go through [`Kernels::precast`]).
    fn views(flat: FloatTensor<Self>, windows: &[(usize, burn::tensor::Shape)]) -> Vec<FloatTensor<Self>> {
        portable::views::<Self>(flat, windows)
    }

    /// Drops `tensors`; on a CubeCL device all of them in one operation of Burn's fusion stream
    /// (`cube::release`), where dropping each queues one (a step's half-precision weights).
    fn release(tensors: Vec<FloatTensor<Self>>) {
        drop(tensors);
    }

    /// `x` in another dtype from values cast elsewhere: `cast` (`x`'s shape, e.g. a view of one
    /// cast of the optimizer's whole flat buffer) is the result, and under autodiff `x` gets its
    /// gradient in `cast`'s dtype, not cast back (the optimizer gathers it into f32). For a
    /// half-precision compute copy this replaces a cast kernel per parameter each way.
    fn precast(x: FloatTensor<Self>, cast: FloatTensor<Self>) -> FloatTensor<Self> {
        drop(x);
        cast
    }

    /// Whether `x`'s device runs SignFlow's GPU kernels (the `cube` crate: `Dispatch` on a CUDA
    /// or WGPU device that passed their self-test). Layers then take the formulations built on
    /// them ([`Kernels::eca`], the attention ops below); elsewhere they keep the ops the host
    /// loops serve.
    fn fused_kernels(_x: &FloatTensor<Self>) -> bool {
        false
    }

    /// Efficient channel attention: the time average of `x` with `weights` (1 / count on a
    /// sample's valid frames), its `K`-tap convolution over the channel axis with `w` (zero
    /// padding `K / 2`, `K` odd), a sigmoid gate per (sample, channel), and `x * gate`.
    ///
    /// `x` is rows (each sample's frames in order), like the layers around it.
    ///
    /// # Shapes
    /// - x: `[batch * time, channels]`, weights: `[batch, 1, time]`, w: `[1, 1, K]` -> like x
    fn eca(x: FloatTensor<Self>, weights: FloatTensor<Self>, w: FloatTensor<Self>) -> FloatTensor<Self> {
        portable::eca::<Self>(x, weights, w)
    }

    /// Gradients of [`Kernels::eca`] with respect to `x` and `w` (`weights` is a constant).
    fn eca_backward(
        x: FloatTensor<Self>,
        weights: FloatTensor<Self>,
        w: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        portable::eca_backward::<Self>(x, weights, w, grad)
    }

    /// Attention scores from one fused projection `qkv` (queries, keys and values side by side,
    /// each `heads` blocks of `D / heads` columns), scaled by `1 / sqrt(D / heads)`.
    ///
    /// # Shapes
    /// - qkv: `[batch * time, 3 D]` -> `[batch, heads, time, time]`
    fn attention_scores(qkv: FloatTensor<Self>, batch: usize, heads: usize) -> FloatTensor<Self> {
        unwrap(reference::attention_scores(wrap::<Self, 2>(qkv), batch, heads))
    }

    /// Gradient of [`Kernels::attention_scores`] with respect to `qkv` (zero in the value
    /// columns), from the scores' gradient `grad [batch, heads, time, time]`.
    fn attention_scores_backward(qkv: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        unwrap(reference::attention_scores_backward(wrap::<Self, 2>(qkv), wrap(grad)))
    }

    /// The attention weights applied to the values in `qkv`, heads merged.
    ///
    /// # Shapes
    /// - attn: `[batch, heads, time, time]`, qkv: `[batch * time, 3 D]` -> `[batch * time, D]`
    fn attention_values(attn: FloatTensor<Self>, qkv: FloatTensor<Self>) -> FloatTensor<Self> {
        unwrap(reference::attention_values(wrap::<Self, 4>(attn), wrap(qkv)))
    }

    /// Gradients of [`Kernels::attention_values`] with respect to `attn` and `qkv` (zero outside
    /// the value columns), from the output gradient `grad [batch * time, D]`.
    fn attention_values_backward(
        attn: FloatTensor<Self>,
        qkv: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (ga, gq) = reference::attention_values_backward(wrap::<Self, 4>(attn), wrap(qkv), wrap(grad));
        (unwrap(ga), unwrap(gq))
    }

    /// Per-channel mean and biased variance over the rows of `x` (`[rows, C]` -> `[2, C]`).
    /// Not differentiable on its own: [`Kernels::channel_norm`]'s backward accounts for it.
    fn channel_stats(x: FloatTensor<Self>) -> FloatTensor<Self> {
        portable::channel_stats::<Self>(x)
    }

    /// Training-mode BatchNorm of `[rows, C]` with the statistics `stats` (`[2, C]`, from
    /// [`Kernels::channel_stats`] of the same `x`): `(x - mean) / sqrt(var + eps) * gamma + beta`.
    fn channel_norm(
        x: FloatTensor<Self>,
        stats: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let (x, s) = (wrap::<Self, 2>(x), wrap::<Self, 2>(stats));
        let (g, bt) = (wrap::<Self, 1>(gamma), wrap::<Self, 1>(beta));
        if host_ok(&x) && host_ok(&s) && host_ok(&g) && host_ok(&bt) {
            let ([n, c], device) = (x.dims(), x.device());
            let (xd, sd, gd, bd) = (host_data(x), host_data(s), host_data(g), host_data(bt));
            let out = host::normalize(xd.f32(), sd.f32(), gd.f32(), bd.f32(), n, c);
            return host_tensor::<Self, _>(out, [n, c], &device);
        }
        unwrap(reference::channel_norm(x, s, g, bt))
    }

    /// Training-mode BatchNorm of `[.., C]` (its leading axes are the rows; `y` has its shape,
    /// so a `[batch, time, C]` activation needs no reshape) and the running statistics after the
    /// batch in one kernel, where the backend has one (`None` elsewhere): `[y, stats, new_mean,
    /// new_var]`, as [`Kernels::channel_stats`], [`Kernels::channel_norm`] and
    /// [`Kernels::running_stats`] give them (`running`: the running mean and variance, `[C]`
    /// each). Its backward ([`Kernels::channel_norm_backward`]) gets `x` at that shape too.
    /// Half-precision `x` may come with f32 parameters (mixed precision): `y` is then in `x`'s
    /// dtype and the statistics in f32, normalized in f32 either way.
    fn channel_norm_fused(
        _x: FloatTensor<Self>,
        _gamma: FloatTensor<Self>,
        _beta: FloatTensor<Self>,
        _running: (FloatTensor<Self>, FloatTensor<Self>),
        _momentum: f64,
    ) -> Option<[FloatTensor<Self>; 4]> {
        None
    }

    /// Gradients of training-mode BatchNorm (through the batch statistics) with respect to `x`
    /// (`[rows, C]`, or any `[.., C]` after [`Kernels::channel_norm_fused`]), `gamma` and `beta`.
    fn channel_norm_backward(
        x: FloatTensor<Self>,
        stats: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        portable::channel_norm_backward::<Self>(x, stats, gamma, grad)
    }

    /// BatchNorm's running mean and variance (`[C]` each) after a training batch whose statistics
    /// are `stats` ([`Kernels::channel_stats`]): `running * (1 - momentum) + batch * momentum`, as
    /// Burn's `BatchNorm` updates them. Not differentiable (running statistics are state).
    fn running_stats(
        stats: FloatTensor<Self>,
        mean: FloatTensor<Self>,
        var: FloatTensor<Self>,
        momentum: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        portable::running_stats::<Self>(stats, mean, var, momentum)
    }

    /// Inference-mode BatchNorm of the rows of `x` with its running statistics, `(x - mean) /
    /// sqrt(var + eps) * gamma + beta` ([`NORM_EPS`]), Burn's `BatchNorm` formulation and order
    /// of operations. Half-precision `x` beside f32 parameters is normalized in f32 and given
    /// back in its dtype.
    ///
    /// # Shapes
    /// - x: `[rows, C]`, gamma, beta, mean, var: `[C]` -> like x
    fn channel_norm_eval(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        mean: FloatTensor<Self>,
        var: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        portable::channel_norm_eval::<Self>(x, gamma, beta, mean, var)
    }

    /// A conv block's middle in inference: [`Kernels::silu`] of `h`, [`Kernels::causal_dwconv`]
    /// with `w` and [`Kernels::channel_norm_eval`] with `norm` (`[gamma, beta, mean, var]`), as
    /// one op; a GPU backend runs it as one kernel that writes neither intermediate (in f32
    /// throughout, so half-precision results round once where the three ops round three times).
    ///
    /// # Shapes
    /// - h: `[batch * frames, channels]`, w: `[channels, 1, kernel]`, norm: `[channels]` each -> like h
    fn conv_block_eval(
        h: FloatTensor<Self>,
        w: FloatTensor<Self>,
        frames: usize,
        norm: [FloatTensor<Self>; 4],
    ) -> FloatTensor<Self> {
        portable::conv_block_eval::<Self>(h, w, frames, norm)
    }
}

/// The default bodies of the [`Kernels`] ops that a backend may replace with its own kernels
/// (`Dispatch` on a CubeCL device runs the `cube` crate's), kept callable as its fallback: the
/// host loops on host-resident f32 data, else the [`reference`] ops.
mod portable {
    use super::*;

    pub(super) fn views<B: Kernels>(
        flat: FloatTensor<B>,
        windows: &[(usize, burn::tensor::Shape)],
    ) -> Vec<FloatTensor<B>> {
        let flat = wrap::<B, 1>(flat);
        let view = |(start, shape): &(usize, burn::tensor::Shape)| {
            let part = flat.clone().narrow(0, *start, shape.num_elements());
            B::float_reshape(unwrap(part), shape.clone())
        };
        windows.iter().map(view).collect()
    }

    pub(super) fn dense_backward<B: Kernels>(
        x: FloatTensor<B>,
        w: FloatTensor<B>,
        grad: FloatTensor<B>,
        wanted: [bool; 3],
    ) -> [Option<FloatTensor<B>>; 3] {
        let (x, w, g) = (wrap::<B, 2>(x), wrap::<B, 2>(w), wrap::<B, 2>(grad));
        let ([n, k], m) = (x.dims(), w.dims()[1]);
        if host_ok(&x) && host_ok(&w) && host_ok(&g) {
            let device = x.device();
            let (xd, wd, gd) = (host_data(x), host_data(w), host_data(g));
            let gx = wanted[0].then(|| crate::host_gemm::linear_grad_x(gd.f32(), wd.f32(), n, k, m));
            let gw = wanted[1].then(|| crate::host_gemm::linear_grad_w(xd.f32(), gd.f32(), n, k, m));
            let gb = wanted[2].then(|| crate::host_gemm::linear_grad_bias(gd.f32(), n, m));
            return [
                gx.map(|v| host_tensor::<B, _>(v, [n, k], &device)),
                gw.map(|v| host_tensor::<B, _>(v, [k, m], &device)),
                gb.map(|v| host_tensor::<B, _>(v, [m], &device)),
            ];
        }
        let (x, w, g) = (unwrap(x), unwrap(w), unwrap(g));
        [
            wanted[0].then(|| B::linear_x_backward(w, g.clone())),
            wanted[1].then(|| B::linear_weight_backward(x, g.clone())),
            wanted[2].then(|| B::linear_bias_backward(g)),
        ]
    }

    pub(super) fn silu<B: Kernels, const D: usize>(x: FloatTensor<B>) -> FloatTensor<B> {
        let x = wrap::<B, D>(x);
        if host_ok(&x) {
            let (dims, device) = (x.dims(), x.device());
            let out = host::silu(host_data(x).f32());
            return host_tensor::<B, _>(out, dims, &device);
        }
        unwrap(reference::silu(x))
    }

    pub(super) fn silu_backward<B: Kernels, const D: usize>(x: FloatTensor<B>, grad: FloatTensor<B>) -> FloatTensor<B> {
        let (x, g) = (wrap::<B, D>(x), wrap::<B, D>(grad));
        if host_ok(&x) && host_ok(&g) {
            let (dims, device) = (x.dims(), x.device());
            let out = host::silu_backward(host_data(x).f32(), host_data(g).f32());
            return host_tensor::<B, _>(out, dims, &device);
        }
        unwrap(reference::silu_backward(x, g))
    }

    pub(super) fn key_biased_softmax<B: Kernels>(scores: FloatTensor<B>, bias: FloatTensor<B>) -> FloatTensor<B> {
        let (s, bias) = (wrap::<B, 4>(scores), wrap::<B, 2>(bias));
        if host_ok(&s) && host_ok(&bias) {
            let ([b, h, q, k], device) = (s.dims(), s.device());
            let out = host::key_biased_softmax(host_data(s).f32(), host_data(bias).f32(), b, h * q, k);
            return host_tensor::<B, _>(out, [b, h, q, k], &device);
        }
        unwrap(reference::key_biased_softmax(s, bias))
    }

    pub(super) fn softmax_dropout_backward<B: Kernels>(
        y: FloatTensor<B>,
        out: FloatTensor<B>,
        grad: FloatTensor<B>,
    ) -> FloatTensor<B> {
        let kept = wrap::<B, 4>(grad) * wrap::<B, 4>(out);
        unwrap(kept.clone() - wrap::<B, 4>(y) * kept.sum_dim(3))
    }

    pub(super) fn softmax_backward<B: Kernels>(y: FloatTensor<B>, grad: FloatTensor<B>) -> FloatTensor<B> {
        let (y, g) = (wrap::<B, 4>(y), wrap::<B, 4>(grad));
        if host_ok(&y) && host_ok(&g) {
            let ([b, h, q, k], device) = (y.dims(), y.device());
            let out = host::softmax_backward(host_data(y).f32(), host_data(g).f32(), b * h * q, k);
            return host_tensor::<B, _>(out, [b, h, q, k], &device);
        }
        let dot = (g.clone() * y.clone()).sum_dim(3);
        unwrap(y * (g - dot))
    }

    pub(super) fn causal_dwconv<B: Kernels>(x: FloatTensor<B>, w: FloatTensor<B>, frames: usize) -> FloatTensor<B> {
        let (x, w) = (wrap::<B, 2>(x), wrap::<B, 3>(w));
        let ([rows, c], k, device) = (x.dims(), w.dims()[2], x.device());
        let b = rows / frames;
        if host_ok(&x) && host_ok(&w) {
            // The host loops take the taps as [K, C] rows (one multiply-add per tap and frame).
            let taps = host::transpose_blocks(host_data(w).f32(), 1, c, k);
            let out = host::dwconv_forward(host_data(x).f32(), &taps, b, frames, c, k);
            return host_tensor::<B, _>(out, [rows, c], &device);
        }
        unwrap(reference::causal_dwconv(x.reshape([b, frames, c]), w.reshape([c, k])).reshape([rows, c]))
    }

    pub(super) fn causal_dwconv_backward<B: Kernels>(
        x: FloatTensor<B>,
        w: FloatTensor<B>,
        grad: FloatTensor<B>,
        frames: usize,
    ) -> (FloatTensor<B>, FloatTensor<B>) {
        let (x, w, g) = (wrap::<B, 2>(x), wrap::<B, 3>(w), wrap::<B, 2>(grad));
        let ([rows, c], k, device) = (x.dims(), w.dims()[2], x.device());
        let b = rows / frames;
        if host_ok(&x) && host_ok(&w) && host_ok(&g) {
            let (xd, wd, gd) = (host_data(x), host::transpose_blocks(host_data(w).f32(), 1, c, k), host_data(g));
            let (gx, gw) = host::dwconv_backward(xd.f32(), &wd, gd.f32(), b, frames, c, k);
            let gw = host::transpose_blocks(&gw, 1, k, c);
            return (host_tensor::<B, _>(gx, [rows, c], &device), host_tensor::<B, _>(gw, [c, 1, k], &device));
        }
        let (x, w, g) = (x.reshape([b, frames, c]), w.reshape([c, k]), g.reshape([b, frames, c]));
        let (gx, gw) = reference::causal_dwconv_backward(x, w, g);
        (unwrap(gx.reshape([rows, c])), unwrap(gw.reshape([c, 1, k])))
    }

    /// [`reference::eca`] of rows (`x [B * T, C]`, `T` from `weights [B, 1, T]`).
    pub(super) fn eca<B: Kernels>(x: FloatTensor<B>, weights: FloatTensor<B>, w: FloatTensor<B>) -> FloatTensor<B> {
        let (x, weights) = (wrap::<B, 2>(x), wrap::<B, 3>(weights));
        let ([rows, c], [b, _, t]) = (x.dims(), weights.dims());
        unwrap(reference::eca(x.reshape([b, t, c]), weights, wrap(w)).reshape([rows, c]))
    }

    /// [`reference::eca_backward`] of rows.
    pub(super) fn eca_backward<B: Kernels>(
        x: FloatTensor<B>,
        weights: FloatTensor<B>,
        w: FloatTensor<B>,
        grad: FloatTensor<B>,
    ) -> (FloatTensor<B>, FloatTensor<B>) {
        let (x, weights, g) = (wrap::<B, 2>(x), wrap::<B, 3>(weights), wrap::<B, 2>(grad));
        let ([rows, c], [b, _, t]) = (x.dims(), weights.dims());
        let (gx, gw) = reference::eca_backward(x.reshape([b, t, c]), weights, wrap(w), g.reshape([b, t, c]));
        (unwrap(gx.reshape([rows, c])), unwrap(gw))
    }

    pub(super) fn channel_stats<B: Kernels>(x: FloatTensor<B>) -> FloatTensor<B> {
        let x = wrap::<B, 2>(x);
        if host_ok(&x) {
            let ([n, c], device) = (x.dims(), x.device());
            let out = host::stats(host_data(x).f32(), n, c);
            return host_tensor::<B, _>(out, [2, c], &device);
        }
        unwrap(reference::channel_stats(x))
    }

    pub(super) fn channel_norm_backward<B: Kernels>(
        x: FloatTensor<B>,
        stats: FloatTensor<B>,
        gamma: FloatTensor<B>,
        grad: FloatTensor<B>,
    ) -> (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>) {
        let (x, s) = (wrap::<B, 2>(x), wrap::<B, 2>(stats));
        let (g, gr) = (wrap::<B, 1>(gamma), wrap::<B, 2>(grad));
        if host_ok(&x) && host_ok(&s) && host_ok(&g) && host_ok(&gr) {
            let ([n, c], device) = (x.dims(), x.device());
            let (xd, sd, gd, grd) = (host_data(x), host_data(s), host_data(g), host_data(gr));
            let (gx, gg, gb) = host::normalize_backward(xd.f32(), sd.f32(), gd.f32(), grd.f32(), n, c);
            return (
                host_tensor::<B, _>(gx, [n, c], &device),
                host_tensor::<B, _>(gg, [c], &device),
                host_tensor::<B, _>(gb, [c], &device),
            );
        }
        let (gx, gg, gb) = reference::channel_norm_backward(x, s, g, gr);
        (unwrap(gx), unwrap(gg), unwrap(gb))
    }

    pub(super) fn running_stats<B: Kernels>(
        stats: FloatTensor<B>,
        mean: FloatTensor<B>,
        var: FloatTensor<B>,
        momentum: f64,
    ) -> (FloatTensor<B>, FloatTensor<B>) {
        let (m, v) = reference::running_stats(wrap::<B, 2>(stats), wrap::<B, 1>(mean), wrap::<B, 1>(var), momentum);
        (unwrap(m), unwrap(v))
    }

    pub(super) fn channel_norm_eval<B: Kernels>(
        x: FloatTensor<B>,
        gamma: FloatTensor<B>,
        beta: FloatTensor<B>,
        mean: FloatTensor<B>,
        var: FloatTensor<B>,
    ) -> FloatTensor<B> {
        let x = wrap::<B, 2>(x);
        let (dtype, param) = (x.dtype(), burn::tensor::TensorMetadata::dtype(&gamma));
        let x = if dtype == param { x } else { x.cast(burn::tensor::FloatDType::from(param)) };
        let y = reference::channel_norm_eval(x, wrap(gamma), wrap(beta), wrap(mean), wrap(var));
        unwrap(if dtype == param { y } else { y.cast(burn::tensor::FloatDType::from(dtype)) })
    }

    /// The backend's own two ops in turn.
    pub(super) fn silu_dwconv<B: Kernels>(h: FloatTensor<B>, w: FloatTensor<B>, frames: usize) -> FloatTensor<B> {
        B::causal_dwconv(B::silu::<2>(h), w, frames)
    }

    /// The two ops' gradients in turn, SiLU's output computed again.
    pub(super) fn silu_dwconv_backward<B: Kernels>(
        h: FloatTensor<B>,
        w: FloatTensor<B>,
        grad: FloatTensor<B>,
        frames: usize,
    ) -> (FloatTensor<B>, FloatTensor<B>) {
        let (gs, gw) = B::causal_dwconv_backward(B::silu::<2>(h.clone()), w, grad, frames);
        (B::silu_backward::<2>(h, gs), gw)
    }

    /// The backend's own three ops in turn.
    pub(super) fn conv_block_eval<B: Kernels>(
        h: FloatTensor<B>,
        w: FloatTensor<B>,
        frames: usize,
        norm: [FloatTensor<B>; 4],
    ) -> FloatTensor<B> {
        let [gamma, beta, mean, var] = norm;
        B::channel_norm_eval(B::causal_dwconv(B::silu::<2>(h), w, frames), gamma, beta, mean, var)
    }
}

fn host_ok<B: Kernels, const D: usize>(t: &Tensor<B, D>) -> bool {
    B::host_resident(&t.device()) && t.dtype() == DType::F32
}

/// A host-resident f32 tensor's values for a host loop ([`HostData::f32`]). A contiguous tensor
/// is held and read in place ([`Kernels::host_f32`]), shared or not: no copy, also for inputs
/// saved for a backward step. Any other (a strided view) is copied out once by `into_data`.
enum HostData<B: Kernels> {
    /// Read in place.
    Held(FloatTensor<B>),
    /// Copied out.
    Copied(TensorData),
}

impl<B: Kernels> HostData<B> {
    fn f32(&self) -> &[f32] {
        match self {
            HostData::Held(t) => B::host_f32(t).expect("host_data checked the tensor reads in place"),
            HostData::Copied(d) => d.as_slice::<f32>().expect("host_ok checked the dtype is f32"),
        }
    }
}

fn host_data<B: Kernels, const D: usize>(t: Tensor<B, D>) -> HostData<B> {
    let t = unwrap(t);
    if B::host_f32(&t).is_some() {
        HostData::Held(t)
    } else {
        // Host-resident: a memory copy, never a device transfer.
        HostData::Copied(wrap::<B, D>(t).into_data())
    }
}

/// A contiguous f32 Flex tensor's values, in place.
fn flex_f32(t: &FloatTensor<burn::backend::Flex>) -> Option<&[f32]> {
    if t.dtype() != DType::F32 {
        return None;
    }
    let (start, end) = t.layout().contiguous_offsets()?;
    t.storage::<f32>().get(start..end)
}

/// A host loop's result as a float tensor of `shape` on `device` (the reverse of [`host_data`]).
fn host_tensor<B: Backend, const D: usize>(values: Vec<f32>, shape: [usize; D], device: &B::Device) -> FloatTensor<B> {
    unwrap(Tensor::<B, D>::from_data(TensorData::new(values, shape), device))
}

/// The multiplier of each of `len` elements under dropout with probability `prob` and mask seed
/// `seed`: `1 / (1 - prob)` where kept, 0 where dropped. Element `i` is kept when a 32-bit hash
/// of `(seed, i)` falls below `(1 - prob) * 2^32`; the hash is a bijection of `i` for a given
/// seed, so masks of one seed never repeat within 2^32 elements. The mask of
/// [`Kernels::key_biased_softmax_dropout`], element `i` counted over the whole `[B, H, Q, K]`
/// tensor in row-major order.
pub fn dropout_mask(seed: u64, len: usize, prob: f64) -> Vec<f32> {
    let keep = host::Keep::new(seed, prob);
    (0..len).map(|i| keep.factor(i as u32)).collect()
}

/// A mask seed from the backend's random stream: three 30-bit draws (they fit any integer
/// dtype the backend uses by default, i32 included), folded into 64 bits.
fn draw_seed<B: Backend>(device: &B::Device) -> u64 {
    let draws = Tensor::<B, 1, burn::tensor::Int>::random(
        [3],
        burn::tensor::Distribution::Uniform(0.0, (1u64 << 30) as f64),
        device,
    )
    .into_data();
    draws.iter::<i64>().fold(0u64, |acc, v| (acc << 30) ^ (v as u64 & ((1 << 30) - 1)))
}

/// Host path of [`Kernels::key_biased_softmax_dropout`]: the softmax (kept for the backward
/// pass) and its dropped-out copy.
fn host_softmax_dropout<B: Kernels>(
    scores: FloatTensor<B>,
    bias: FloatTensor<B>,
    prob: f64,
    seed: u64,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let (s, bias) = (wrap::<B, 4>(scores), wrap::<B, 2>(bias));
    let ([b, h, q, k], device) = (s.dims(), s.device());
    let y = host::key_biased_softmax(host_data(s).f32(), host_data(bias).f32(), b, h * q, k);
    let out = host::dropout(&y, k, host::Keep::new(seed, prob));
    (host_tensor::<B, 4>(y, [b, h, q, k], &device), host_tensor::<B, 4>(out, [b, h, q, k], &device))
}

/// Gradient of [`host_softmax_dropout`] with respect to the scores, from the softmax `y` and the
/// gradient of the dropped output: the mask is regenerated from `seed`.
fn host_softmax_dropout_backward<B: Kernels>(
    y: FloatTensor<B>,
    grad: FloatTensor<B>,
    prob: f64,
    seed: u64,
) -> FloatTensor<B> {
    let (y, g) = (wrap::<B, 4>(y), wrap::<B, 4>(grad));
    let (dims, device) = (y.dims(), y.device());
    let out =
        host::softmax_dropout_backward(host_data(y).f32(), host_data(g).f32(), dims[3], host::Keep::new(seed, prob));
    host_tensor::<B, 4>(out, dims, &device)
}

impl Kernels for burn::backend::Flex {
    fn host_resident(_device: &burn::tensor::ops::Device<Self>) -> bool {
        true
    }

    fn host_f32(tensor: &FloatTensor<Self>) -> Option<&[f32]> {
        flex_f32(tensor)
    }
}

impl Kernels for burn::Dispatch {
    fn host_resident(device: &burn::DispatchDevice) -> bool {
        matches!(device, burn::DispatchDevice::Flex(_))
    }

    fn host_f32(tensor: &FloatTensor<Self>) -> Option<&[f32]> {
        // `as_flex_float` is SignFlow's patch of burn-dispatch (crates/vendor/burn-dispatch).
        tensor.as_flex_float().and_then(flex_f32)
    }

    // On a CubeCL device (CUDA, WGPU) these run as one kernel launch each (the `cube`
    // crate); elsewhere, or when a device cannot run a kernel, as everywhere else.

    fn causal_dwconv(x: FloatTensor<Self>, w: FloatTensor<Self>, frames: usize) -> FloatTensor<Self> {
        cube::causal_dwconv(x, w, frames).unwrap_or_else(|[x, w]| portable::causal_dwconv::<Self>(x, w, frames))
    }

    fn causal_dwconv_backward(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        frames: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        cube::causal_dwconv_backward(x, w, grad, frames)
            .unwrap_or_else(|[x, w, grad]| portable::causal_dwconv_backward::<Self>(x, w, grad, frames))
    }

    fn silu_dwconv(h: FloatTensor<Self>, w: FloatTensor<Self>, frames: usize) -> FloatTensor<Self> {
        cube::silu_dwconv(h, w, frames).unwrap_or_else(|[h, w]| portable::silu_dwconv::<Self>(h, w, frames))
    }

    fn silu_dwconv_backward(
        h: FloatTensor<Self>,
        w: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        frames: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        cube::silu_dwconv_backward(h, w, grad, frames)
            .unwrap_or_else(|[h, w, grad]| portable::silu_dwconv_backward::<Self>(h, w, grad, frames))
    }

    fn silu<const D: usize>(x: FloatTensor<Self>) -> FloatTensor<Self> {
        cube::silu(x).unwrap_or_else(|[x]| portable::silu::<Self, D>(x))
    }

    fn silu_backward<const D: usize>(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        cube::silu_backward(x, grad).unwrap_or_else(|[x, grad]| portable::silu_backward::<Self, D>(x, grad))
    }

    fn views(flat: FloatTensor<Self>, windows: &[(usize, burn::tensor::Shape)]) -> Vec<FloatTensor<Self>> {
        cube::views(flat, windows).unwrap_or_else(|[flat]| portable::views::<Self>(flat, windows))
    }

    fn release(tensors: Vec<FloatTensor<Self>>) {
        cube::release(tensors);
    }

    fn dense_backward(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        wanted: [bool; 3],
    ) -> [Option<FloatTensor<Self>>; 3] {
        cube::dense_backward(x, w, grad, wanted)
            .unwrap_or_else(|[x, w, grad]| portable::dense_backward::<Self>(x, w, grad, wanted))
    }

    fn fused_kernels(x: &FloatTensor<Self>) -> bool {
        cube::available(x)
    }

    fn key_biased_softmax(scores: FloatTensor<Self>, bias: FloatTensor<Self>) -> FloatTensor<Self> {
        // With no dropout the seeds are not read: any tensor of the scores' dtype will do.
        match cube::softmax_dropout(scores, bias.clone(), bias, 0.0) {
            Ok((y, _)) => y,
            Err([scores, bias, _]) => portable::key_biased_softmax::<Self>(scores, bias),
        }
    }

    fn softmax_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        cube::softmax_dropout_backward(y.clone(), y, grad)
            .unwrap_or_else(|[y, _, grad]| portable::softmax_backward::<Self>(y, grad))
    }

    fn softmax_dropout(
        scores: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        seeds: FloatTensor<Self>,
        prob: f64,
    ) -> Option<(FloatTensor<Self>, FloatTensor<Self>)> {
        cube::softmax_dropout(scores, bias, seeds, prob).ok()
    }

    fn softmax_dropout_backward(
        y: FloatTensor<Self>,
        out: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        cube::softmax_dropout_backward(y, out, grad)
            .unwrap_or_else(|[y, out, grad]| portable::softmax_dropout_backward::<Self>(y, out, grad))
    }

    fn eca(x: FloatTensor<Self>, weights: FloatTensor<Self>, w: FloatTensor<Self>) -> FloatTensor<Self> {
        cube::eca(x, weights, w).unwrap_or_else(|[x, weights, w]| portable::eca::<Self>(x, weights, w))
    }

    fn eca_backward(
        x: FloatTensor<Self>,
        weights: FloatTensor<Self>,
        w: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        cube::eca_backward(x, weights, w, grad)
            .unwrap_or_else(|[x, weights, w, grad]| portable::eca_backward::<Self>(x, weights, w, grad))
    }

    fn attention_scores(qkv: FloatTensor<Self>, batch: usize, heads: usize) -> FloatTensor<Self> {
        cube::attention_scores(qkv, batch, heads)
            .unwrap_or_else(|[qkv]| unwrap(reference::attention_scores::<Self>(wrap(qkv), batch, heads)))
    }

    fn attention_scores_backward(qkv: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        cube::attention_scores_backward(qkv, grad)
            .unwrap_or_else(|[qkv, grad]| unwrap(reference::attention_scores_backward::<Self>(wrap(qkv), wrap(grad))))
    }

    fn attention_values(attn: FloatTensor<Self>, qkv: FloatTensor<Self>) -> FloatTensor<Self> {
        cube::attention_values(attn, qkv)
            .unwrap_or_else(|[attn, qkv]| unwrap(reference::attention_values::<Self>(wrap(attn), wrap(qkv))))
    }

    fn attention_values_backward(
        attn: FloatTensor<Self>,
        qkv: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        cube::attention_values_backward(attn, qkv, grad).unwrap_or_else(|[attn, qkv, grad]| {
            let (ga, gq) = reference::attention_values_backward::<Self>(wrap(attn), wrap(qkv), wrap(grad));
            (unwrap(ga), unwrap(gq))
        })
    }

    fn channel_norm_fused(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        running: (FloatTensor<Self>, FloatTensor<Self>),
        momentum: f64,
    ) -> Option<[FloatTensor<Self>; 4]> {
        cube::channel_norm_train([x, gamma, beta, running.0, running.1], NORM_EPS, momentum).ok()
    }

    fn channel_stats(x: FloatTensor<Self>) -> FloatTensor<Self> {
        cube::channel_stats(x).unwrap_or_else(|[x]| portable::channel_stats::<Self>(x))
    }

    fn channel_norm_backward(
        x: FloatTensor<Self>,
        stats: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        let ran = cube::channel_norm_backward([x, stats, gamma, grad], NORM_EPS).map(|[gx, gg, gb]| (gx, gg, gb));
        ran.unwrap_or_else(|[x, stats, gamma, grad]| {
            // The fused forward hands its input over at any rank, and in half precision beside
            // f32 statistics; the reference takes rows of one dtype.
            use burn::tensor::ops::FloatTensorOps;
            use burn::tensor::TensorMetadata;
            let (shape, dtype, param) = (x.shape(), x.dtype(), stats.dtype());
            let in_param = |t| if dtype == param { t } else { Self::float_cast(t, param.into()) };
            let (x, grad) = (as_rows::<Self>(in_param(x)), as_rows::<Self>(in_param(grad)));
            let (gx, gg, gb) = portable::channel_norm_backward::<Self>(x, stats, gamma, grad);
            let gx = if dtype == param { gx } else { Self::float_cast(gx, dtype.into()) };
            (Self::float_reshape(gx, shape), gg, gb)
        })
    }

    fn running_stats(
        stats: FloatTensor<Self>,
        mean: FloatTensor<Self>,
        var: FloatTensor<Self>,
        momentum: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        cube::running_stats(stats, mean, var, momentum)
            .unwrap_or_else(|[stats, mean, var]| portable::running_stats::<Self>(stats, mean, var, momentum))
    }

    fn channel_norm_eval(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        mean: FloatTensor<Self>,
        var: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        cube::channel_norm_eval([x, gamma, beta, mean, var], NORM_EPS).unwrap_or_else(|[x, gamma, beta, mean, var]| {
            portable::channel_norm_eval::<Self>(x, gamma, beta, mean, var)
        })
    }

    fn conv_block_eval(
        h: FloatTensor<Self>,
        w: FloatTensor<Self>,
        frames: usize,
        norm: [FloatTensor<Self>; 4],
    ) -> FloatTensor<Self> {
        let [gamma, beta, mean, var] = norm;
        cube::conv_block_eval([h, w, gamma, beta, mean, var], frames, NORM_EPS).unwrap_or_else(
            |[h, w, gamma, beta, mean, var]| portable::conv_block_eval::<Self>(h, w, frames, [gamma, beta, mean, var]),
        )
    }
}

/// `x [.., C]` as `[rows, C]`.
fn as_rows<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    let shape = burn::tensor::TensorMetadata::shape(&x);
    let channels = shape[shape.num_dims() - 1];
    let rows = shape.num_elements().checked_div(channels).unwrap_or(0);
    B::float_reshape(x, burn::tensor::Shape::new([rows, channels]))
}

/// Gradients of a two-input op with respect to both inputs, from the inputs and the output gradient.
type PairBackward<B> = fn(FloatTensor<B>, FloatTensor<B>, FloatTensor<B>) -> (FloatTensor<B>, FloatTensor<B>);

/// The backward step of a two-input op whose gradients need both inputs (saved as its state).
struct PairOp<B: Backend>(PairBackward<B>);

impl<B: Backend> core::fmt::Debug for PairOp<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("PairOp")
    }
}

impl<B: Kernels> Backward<B, 2> for PairOp<B> {
    type State = (FloatTensor<B>, FloatTensor<B>);
    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [pa, pb] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let (a, b) = ops.state;
        let (ga, gb) = (self.0)(a, b, grad);
        if let Some(node) = pa {
            grads.register::<B>(node.id, ga);
        }
        if let Some(node) = pb {
            grads.register::<B>(node.id, gb);
        }
    }
}

/// Records a two-input custom op with Burn's autodiff: `forward` runs on the inner backend now,
/// `backward` later from the saved inputs.
fn pair_op<B: Kernels, C: CheckpointStrategy>(
    a: FloatTensor<Autodiff<B, C>>,
    b: FloatTensor<Autodiff<B, C>>,
    forward: fn(FloatTensor<B>, FloatTensor<B>) -> FloatTensor<B>,
    backward: PairBackward<B>,
) -> FloatTensor<Autodiff<B, C>> {
    match PairOp(backward).prepare::<C>([a.node.clone(), b.node.clone()]).compute_bound().stateful() {
        OpsKind::Tracked(prep) => {
            let out = forward(a.primitive.clone(), b.primitive.clone());
            prep.finish((a.primitive, b.primitive), out)
        }
        OpsKind::UnTracked(prep) => prep.finish(forward(a.primitive, b.primitive)),
    }
}

/// The backward step of a one-input op whose input gradient is a function of the output gradient
/// and a saved state `S`: the inverse rearrangement for the ops that only rearrange elements
/// (the head split and merge, the row transpose), the scores' backward from the saved input.
struct UnaryOp<B: Backend, S>(fn(FloatTensor<B>, S) -> FloatTensor<B>);

impl<B: Backend, S> core::fmt::Debug for UnaryOp<B, S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("UnaryOp")
    }
}

impl<B: Kernels, S: Clone + Send + core::fmt::Debug + 'static> Backward<B, 1> for UnaryOp<B, S> {
    type State = S;
    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [px] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        if let Some(node) = px {
            grads.register::<B>(node.id, (self.0)(grad, ops.state));
        }
    }
}

/// Records a one-input op with Burn's autodiff: `forward` runs on the inner backend now,
/// `inverse(grad, state)` is its backward.
fn unary_op<B: Kernels, C: CheckpointStrategy, S: Clone + Send + core::fmt::Debug + 'static>(
    x: FloatTensor<Autodiff<B, C>>,
    forward: impl FnOnce(FloatTensor<B>) -> FloatTensor<B>,
    inverse: fn(FloatTensor<B>, S) -> FloatTensor<B>,
    state: S,
) -> FloatTensor<Autodiff<B, C>> {
    match UnaryOp(inverse).prepare::<C>([x.node.clone()]).compute_bound().stateful() {
        OpsKind::Tracked(prep) => prep.finish(state, forward(x.primitive)),
        OpsKind::UnTracked(prep) => prep.finish(forward(x.primitive)),
    }
}

/// [`Kernels::key_biased_softmax_dropout`] through [`Kernels::softmax_dropout`] (one kernel;
/// its seeds drawn from the backend's random stream on the device), recorded with autodiff;
/// `None` where the backend has no such kernel.
fn fused_softmax_dropout<B: Kernels, C: CheckpointStrategy>(
    scores: &FloatTensor<Autodiff<B, C>>,
    bias: &FloatTensor<Autodiff<B, C>>,
    prob: f64,
) -> Option<FloatTensor<Autodiff<B, C>>> {
    #[derive(Debug)]
    struct SoftmaxDropoutKernel;
    impl<B: Kernels> Backward<B, 1> for SoftmaxDropoutKernel {
        type State = (FloatTensor<B>, FloatTensor<B>);
        fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
            let [ps] = ops.parents;
            let grad = grads.consume::<B>(&ops.node);
            if let Some(node) = ps {
                let (y, out) = ops.state;
                grads.register::<B>(node.id, B::softmax_dropout_backward(y, out, grad));
            }
        }
    }
    use burn::tensor::TensorMetadata;
    let device = B::float_device(&scores.primitive);
    let dtype = scores.primitive.dtype();
    let seeds = Tensor::<B, 1>::random([4], burn::tensor::Distribution::Uniform(0.0, 2048.0), (&device, dtype));
    let (y, out) = B::softmax_dropout(scores.primitive.clone(), bias.primitive.clone(), unwrap(seeds), prob)?;
    // The bias (padding mask) is a constant: only `scores` is a parent.
    Some(match SoftmaxDropoutKernel.prepare::<C>([scores.node.clone()]).compute_bound().stateful() {
        OpsKind::Tracked(prep) => prep.finish((y, out.clone()), out),
        OpsKind::UnTracked(prep) => prep.finish(out),
    })
}

/// The backward step of training-mode BatchNorm: closed-form gradients with respect to `x`,
/// `gamma` and `beta` from `x`, its batch statistics and `gamma` (saved as the state).
#[derive(Debug)]
struct NormOp;

impl<B: Kernels> Backward<B, 3> for NormOp {
    type State = (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>);
    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [px, pg, pb] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let (x, stats, gamma) = ops.state;
        let (gx, gg, gb) = B::channel_norm_backward(x, stats, gamma, grad);
        if let Some(node) = px {
            grads.register::<B>(node.id, gx);
        }
        if let Some(node) = pg {
            grads.register::<B>(node.id, gg);
        }
        if let Some(node) = pb {
            grads.register::<B>(node.id, gb);
        }
    }
}

/// The backward step of [`Kernels::causal_dwconv`] (and of [`Kernels::silu_dwconv`], the conv
/// of SiLU of its input, with `silu`), with the frames per sample.
#[derive(Clone, Copy, Debug)]
struct Dwconv {
    frames: usize,
    silu: bool,
}

impl<B: Kernels> Backward<B, 2> for Dwconv {
    type State = (FloatTensor<B>, FloatTensor<B>);
    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [px, pw] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let (x, w) = ops.state;
        let (gx, gw) = if self.silu {
            B::silu_dwconv_backward(x, w, grad, self.frames)
        } else {
            B::causal_dwconv_backward(x, w, grad, self.frames)
        };
        if let Some(node) = px {
            grads.register::<B>(node.id, gx);
        }
        if let Some(node) = pw {
            grads.register::<B>(node.id, gw);
        }
    }
}

impl Dwconv {
    /// The forward op on the inner backend.
    fn forward<B: Kernels>(&self, x: FloatTensor<B>, w: FloatTensor<B>) -> FloatTensor<B> {
        if self.silu {
            B::silu_dwconv(x, w, self.frames)
        } else {
            B::causal_dwconv(x, w, self.frames)
        }
    }
}

/// The conv op `conv` under autodiff: its input and weight are kept for the backward pass.
fn dwconv_op<B: Kernels, C: CheckpointStrategy>(
    x: FloatTensor<Autodiff<B, C>>,
    w: FloatTensor<Autodiff<B, C>>,
    conv: Dwconv,
) -> FloatTensor<Autodiff<B, C>> {
    match conv.prepare::<C>([x.node.clone(), w.node.clone()]).compute_bound().stateful() {
        OpsKind::Tracked(prep) => {
            let out = conv.forward::<B>(x.primitive.clone(), w.primitive.clone());
            prep.finish((x.primitive, w.primitive), out)
        }
        OpsKind::UnTracked(prep) => prep.finish(conv.forward::<B>(x.primitive, w.primitive)),
    }
}

impl<B: Kernels, C: CheckpointStrategy> Kernels for Autodiff<B, C> {
    fn causal_dwconv(x: FloatTensor<Self>, w: FloatTensor<Self>, frames: usize) -> FloatTensor<Self> {
        dwconv_op::<B, C>(x, w, Dwconv { frames, silu: false })
    }

    fn silu_dwconv(h: FloatTensor<Self>, w: FloatTensor<Self>, frames: usize) -> FloatTensor<Self> {
        dwconv_op::<B, C>(h, w, Dwconv { frames, silu: true })
    }

    fn silu<const D: usize>(x: FloatTensor<Self>) -> FloatTensor<Self> {
        #[derive(Debug)]
        struct Silu<const D: usize>;
        impl<B: Kernels, const D: usize> Backward<B, 1> for Silu<D> {
            type State = FloatTensor<B>;
            fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
                let [px] = ops.parents;
                let grad = grads.consume::<B>(&ops.node);
                if let Some(node) = px {
                    grads.register::<B>(node.id, B::silu_backward::<D>(ops.state, grad));
                }
            }
        }
        match Silu::<D>.prepare::<C>([x.node.clone()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let out = B::silu::<D>(x.primitive.clone());
                prep.finish(x.primitive, out)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::silu::<D>(x.primitive)),
        }
    }

    fn scale_channels(x: FloatTensor<Self>, gate: FloatTensor<Self>) -> FloatTensor<Self> {
        pair_op::<B, C>(x, gate, B::scale_channels, B::scale_channels_backward)
    }

    fn key_biased_softmax(scores: FloatTensor<Self>, bias: FloatTensor<Self>) -> FloatTensor<Self> {
        #[derive(Debug)]
        struct Softmax;
        impl<B: Kernels> Backward<B, 1> for Softmax {
            type State = FloatTensor<B>;
            fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
                let [ps] = ops.parents;
                let grad = grads.consume::<B>(&ops.node);
                if let Some(node) = ps {
                    grads.register::<B>(node.id, B::softmax_backward(ops.state, grad));
                }
            }
        }
        // The bias (padding mask) is a constant: only `scores` is a parent.
        let out = B::key_biased_softmax(scores.primitive, bias.primitive);
        match Softmax.prepare::<C>([scores.node.clone()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => prep.finish(out.clone(), out),
            OpsKind::UnTracked(prep) => prep.finish(out),
        }
    }

    fn key_biased_softmax_dropout(
        scores: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        prob: f64,
        seed: Option<u64>,
    ) -> FloatTensor<Self> {
        #[derive(Debug)]
        struct SoftmaxDropout {
            prob: f64,
            seed: u64,
        }
        impl<B: Kernels> Backward<B, 1> for SoftmaxDropout {
            type State = FloatTensor<B>;
            fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
                let [ps] = ops.parents;
                let grad = grads.consume::<B>(&ops.node);
                if let Some(node) = ps {
                    let gs = host_softmax_dropout_backward::<B>(ops.state, grad, self.prob, self.seed);
                    grads.register::<B>(node.id, gs);
                }
            }
        }
        use burn::tensor::TensorMetadata;
        let device = B::float_device(&scores.primitive);
        let host =
            B::host_resident(&device) && scores.primitive.dtype() == DType::F32 && bias.primitive.dtype() == DType::F32;
        if prob > 0.0 && !host && B::fused_kernels(&scores.primitive) {
            if let Some(out) = fused_softmax_dropout::<B, C>(&scores, &bias, prob) {
                return out;
            }
        }
        if prob <= 0.0 || !host {
            let y = wrap::<Self, 4>(Self::key_biased_softmax(scores, bias));
            return unwrap(burn::nn::DropoutConfig::new(prob).init().forward(y));
        }
        let seed = seed.unwrap_or_else(|| draw_seed::<B>(&device));
        // The bias (padding mask) is a constant: only `scores` is a parent.
        let (y, out) = host_softmax_dropout::<B>(scores.primitive, bias.primitive, prob, seed);
        match (SoftmaxDropout { prob, seed }).prepare::<C>([scores.node.clone()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => prep.finish(y, out),
            OpsKind::UnTracked(prep) => prep.finish(out),
        }
    }

    fn split_heads(x: FloatTensor<Self>, heads: usize) -> FloatTensor<Self> {
        unary_op::<B, C, _>(x, |x| B::split_heads(x, heads), |grad, ()| B::merge_heads(grad), ())
    }

    fn merge_heads(x: FloatTensor<Self>) -> FloatTensor<Self> {
        let heads = wrap::<B, 4>(x.primitive.clone()).dims()[1];
        unary_op::<B, C, _>(x, B::merge_heads, B::split_heads, heads)
    }

    fn transpose_rows(x: FloatTensor<Self>) -> FloatTensor<Self> {
        unary_op::<B, C, _>(x, B::transpose_rows, |grad, ()| B::transpose_rows(grad), ())
    }

    fn dense(x: FloatTensor<Self>, w: FloatTensor<Self>, bias: Option<FloatTensor<Self>>) -> FloatTensor<Self> {
        /// The backward step, with `N` = 3 parents (input, weight, bias) or 2 (no bias).
        #[derive(Debug)]
        struct Linear<const N: usize>;
        impl<B: Kernels, const N: usize> Backward<B, N> for Linear<N> {
            type State = (FloatTensor<B>, FloatTensor<B>);
            fn backward(self, ops: Ops<Self::State, N>, grads: &mut Gradients, _: &mut Checkpointer) {
                let grad = grads.consume::<B>(&ops.node);
                let (x, w) = ops.state;
                let mut wanted = [false; 3];
                ops.parents.iter().zip(&mut wanted).for_each(|(p, want)| *want = p.is_some());
                for (parent, g) in ops.parents.into_iter().zip(B::dense_backward(x, w, grad, wanted)) {
                    if let (Some(node), Some(g)) = (parent, g) {
                        grads.register::<B>(node.id, g);
                    }
                }
            }
        }
        macro_rules! record {
            ($op:expr, $parents:expr, $bias:expr) => {
                match $op.prepare::<C>($parents).compute_bound().stateful() {
                    OpsKind::Tracked(prep) => {
                        let out = B::dense(x.primitive.clone(), w.primitive.clone(), $bias);
                        prep.finish((x.primitive, w.primitive), out)
                    }
                    OpsKind::UnTracked(prep) => prep.finish(B::dense(x.primitive, w.primitive, $bias)),
                }
            };
        }
        match bias {
            Some(b) => record!(Linear::<3>, [x.node.clone(), w.node.clone(), b.node.clone()], Some(b.primitive)),
            None => record!(Linear::<2>, [x.node.clone(), w.node.clone()], None),
        }
    }

    fn views(flat: FloatTensor<Self>, windows: &[(usize, burn::tensor::Shape)]) -> Vec<FloatTensor<Self>> {
        let from_inner = <Self as burn::tensor::backend::AutodiffBackend>::from_inner;
        B::views(flat.primitive, windows).into_iter().map(from_inner).collect()
    }

    fn release(tensors: Vec<FloatTensor<Self>>) {
        B::release(tensors.into_iter().map(|t| t.primitive).collect());
    }

    fn precast(x: FloatTensor<Self>, cast: FloatTensor<Self>) -> FloatTensor<Self> {
        unary_op::<B, C, ()>(x, move |_| cast.primitive, |grad, ()| grad, ())
    }

    fn fused_kernels(x: &FloatTensor<Self>) -> bool {
        B::fused_kernels(&x.primitive)
    }

    fn eca(x: FloatTensor<Self>, weights: FloatTensor<Self>, w: FloatTensor<Self>) -> FloatTensor<Self> {
        #[derive(Debug)]
        struct EcaOp;
        impl<B: Kernels> Backward<B, 2> for EcaOp {
            type State = (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>);
            fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
                let [px, pw] = ops.parents;
                let grad = grads.consume::<B>(&ops.node);
                let (x, weights, w) = ops.state;
                let (gx, gw) = B::eca_backward(x, weights, w, grad);
                if let Some(node) = px {
                    grads.register::<B>(node.id, gx);
                }
                if let Some(node) = pw {
                    grads.register::<B>(node.id, gw);
                }
            }
        }
        // The frame weights (padding mask) are a constant: `x` and `w` are the parents.
        let out = B::eca(x.primitive.clone(), weights.primitive.clone(), w.primitive.clone());
        match EcaOp.prepare::<C>([x.node.clone(), w.node.clone()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => prep.finish((x.primitive, weights.primitive, w.primitive), out),
            OpsKind::UnTracked(prep) => prep.finish(out),
        }
    }

    fn attention_scores(qkv: FloatTensor<Self>, batch: usize, heads: usize) -> FloatTensor<Self> {
        let forward = |qkv| B::attention_scores(qkv, batch, heads);
        unary_op::<B, C, _>(qkv.clone(), forward, |grad, qkv| B::attention_scores_backward(qkv, grad), qkv.primitive)
    }

    fn attention_values(attn: FloatTensor<Self>, qkv: FloatTensor<Self>) -> FloatTensor<Self> {
        pair_op::<B, C>(attn, qkv, B::attention_values, B::attention_values_backward)
    }

    fn channel_stats(x: FloatTensor<Self>) -> FloatTensor<Self> {
        <Self as burn::tensor::backend::AutodiffBackend>::from_inner(B::channel_stats(x.primitive))
    }

    fn running_stats(
        stats: FloatTensor<Self>,
        mean: FloatTensor<Self>,
        var: FloatTensor<Self>,
        momentum: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (m, v) = B::running_stats(stats.primitive, mean.primitive, var.primitive, momentum);
        use burn::tensor::backend::AutodiffBackend;
        (<Self as AutodiffBackend>::from_inner(m), <Self as AutodiffBackend>::from_inner(v))
    }

    fn channel_norm_fused(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        running: (FloatTensor<Self>, FloatTensor<Self>),
        momentum: f64,
    ) -> Option<[FloatTensor<Self>; 4]> {
        use burn::tensor::backend::AutodiffBackend;
        let (mean, var) = (running.0.primitive, running.1.primitive);
        let [y, stats, m, v] = B::channel_norm_fused(
            x.primitive.clone(),
            gamma.primitive.clone(),
            beta.primitive.clone(),
            (mean, var),
            momentum,
        )?;
        let parents = [x.node.clone(), gamma.node.clone(), beta.node.clone()];
        let y = match NormOp.prepare::<C>(parents).compute_bound().stateful() {
            OpsKind::Tracked(prep) => prep.finish((x.primitive, stats.clone(), gamma.primitive), y),
            OpsKind::UnTracked(prep) => prep.finish(y),
        };
        let from_inner = <Self as AutodiffBackend>::from_inner;
        Some([y, from_inner(stats), from_inner(m), from_inner(v)])
    }

    fn channel_norm(
        x: FloatTensor<Self>,
        stats: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        // `stats` is a function of `x` computed without tracking; the closed-form backward
        // includes its contribution.
        match NormOp.prepare::<C>([x.node.clone(), gamma.node.clone(), beta.node.clone()]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let out = B::channel_norm(
                    x.primitive.clone(),
                    stats.primitive.clone(),
                    gamma.primitive.clone(),
                    beta.primitive,
                );
                prep.finish((x.primitive, stats.primitive, gamma.primitive), out)
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(B::channel_norm(x.primitive, stats.primitive, gamma.primitive, beta.primitive))
            }
        }
    }
}

/// Tensor-level entry points used by the layers.
pub mod ops {
    use super::*;

    /// See [`Kernels::causal_dwconv`].
    pub fn causal_dwconv<B: Kernels>(x: Tensor<B, 2>, w: Tensor<B, 3>, frames: usize) -> Tensor<B, 2> {
        wrap(B::causal_dwconv(unwrap(x), unwrap(w), frames))
    }

    /// See [`Kernels::silu_dwconv`].
    pub fn silu_dwconv<B: Kernels>(h: Tensor<B, 2>, w: Tensor<B, 3>, frames: usize) -> Tensor<B, 2> {
        wrap(B::silu_dwconv(unwrap(h), unwrap(w), frames))
    }

    /// See [`Kernels::silu`].
    pub fn silu<B: Kernels, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
        wrap(B::silu::<D>(unwrap(x)))
    }

    /// See [`Kernels::scale_channels`].
    pub fn scale_channels<B: Kernels>(x: Tensor<B, 2>, gate: Tensor<B, 2>) -> Tensor<B, 2> {
        wrap(B::scale_channels(unwrap(x), unwrap(gate)))
    }

    /// See [`Kernels::key_biased_softmax`].
    pub fn key_biased_softmax<B: Kernels>(scores: Tensor<B, 4>, bias: Tensor<B, 2>) -> Tensor<B, 4> {
        wrap(B::key_biased_softmax(unwrap(scores), unwrap(bias)))
    }

    /// See [`Kernels::key_biased_softmax_dropout`]; the mask's seed comes from the backend's
    /// random stream.
    pub fn key_biased_softmax_dropout<B: Kernels>(scores: Tensor<B, 4>, bias: Tensor<B, 2>, prob: f64) -> Tensor<B, 4> {
        wrap(B::key_biased_softmax_dropout(unwrap(scores), unwrap(bias), prob, None))
    }

    /// [`key_biased_softmax_dropout`] with the mask's seed given ([`super::dropout_mask`] of the
    /// same seed is its mask on the host).
    pub fn key_biased_softmax_dropout_seeded<B: Kernels>(
        scores: Tensor<B, 4>,
        bias: Tensor<B, 2>,
        prob: f64,
        seed: u64,
    ) -> Tensor<B, 4> {
        wrap(B::key_biased_softmax_dropout(unwrap(scores), unwrap(bias), prob, Some(seed)))
    }

    /// See [`Kernels::dense`].
    pub fn linear<B: Kernels>(x: Tensor<B, 2>, w: Tensor<B, 2>, bias: Option<Tensor<B, 1>>) -> Tensor<B, 2> {
        wrap(B::dense(unwrap(x), unwrap(w), bias.map(unwrap)))
    }

    /// See [`Kernels::split_heads`].
    pub fn split_heads<B: Kernels>(x: Tensor<B, 3>, heads: usize) -> Tensor<B, 4> {
        wrap(B::split_heads(unwrap(x), heads))
    }

    /// The attention keys `[batch, time, heads * head_dim]` as `[batch, heads, head_dim, time]`
    /// (split and transposed for `q.matmul(k)`), contiguous, through [`Kernels::transpose_rows`].
    pub fn split_heads_transposed<B: Kernels>(x: Tensor<B, 3>, heads: usize) -> Tensor<B, 4> {
        let [b, t, d] = x.dims();
        let xt: Tensor<B, 3> = wrap(B::transpose_rows(unwrap(x)));
        xt.reshape([b, heads, d / heads, t])
    }

    /// See [`Kernels::merge_heads`].
    pub fn merge_heads<B: Kernels>(x: Tensor<B, 4>) -> Tensor<B, 3> {
        wrap(B::merge_heads(unwrap(x)))
    }

    /// See [`Kernels::views`] (windows of one rank).
    pub fn views<B: Kernels, const D: usize>(flat: Tensor<B, 1>, windows: &[(usize, [usize; D])]) -> Vec<Tensor<B, D>> {
        let windows: Vec<_> = windows.iter().map(|(start, shape)| (*start, (*shape).into())).collect();
        B::views(unwrap(flat), &windows).into_iter().map(wrap).collect()
    }

    /// See [`Kernels::precast`].
    pub fn precast<B: Kernels, const D: usize>(x: Tensor<B, D>, cast: Tensor<B, D>) -> Tensor<B, D> {
        wrap(B::precast(unwrap(x), unwrap(cast)))
    }

    /// See [`Kernels::fused_kernels`].
    pub fn fused_kernels<B: Kernels, const D: usize>(x: &Tensor<B, D>) -> bool {
        B::fused_kernels(&x.clone().into_primitive().tensor())
    }

    /// See [`Kernels::eca`].
    pub fn eca<B: Kernels>(x: Tensor<B, 2>, weights: Tensor<B, 3>, w: Tensor<B, 3>) -> Tensor<B, 2> {
        wrap(B::eca(unwrap(x), unwrap(weights), unwrap(w)))
    }

    /// See [`Kernels::attention_scores`].
    pub fn attention_scores<B: Kernels>(qkv: Tensor<B, 2>, batch: usize, heads: usize) -> Tensor<B, 4> {
        wrap(B::attention_scores(unwrap(qkv), batch, heads))
    }

    /// See [`Kernels::attention_values`].
    pub fn attention_values<B: Kernels>(attn: Tensor<B, 4>, qkv: Tensor<B, 2>) -> Tensor<B, 2> {
        wrap(B::attention_values(unwrap(attn), unwrap(qkv)))
    }

    /// See [`Kernels::channel_norm_fused`]: `(y, new_mean, new_var)` where the backend runs it as
    /// one kernel, `None` elsewhere.
    pub fn channel_norm_fused<B: Kernels, const D: usize>(
        x: Tensor<B, D>,
        gamma: Tensor<B, 1>,
        beta: Tensor<B, 1>,
        running: (Tensor<B, 1>, Tensor<B, 1>),
        momentum: f64,
    ) -> Option<(Tensor<B, D>, Tensor<B, 1>, Tensor<B, 1>)> {
        let running = (unwrap(running.0), unwrap(running.1));
        let [y, _, m, v] = B::channel_norm_fused(unwrap(x), unwrap(gamma), unwrap(beta), running, momentum)?;
        Some((wrap(y), wrap(m), wrap(v)))
    }

    /// See [`Kernels::channel_norm_eval`].
    pub fn channel_norm_eval<B: Kernels>(
        x: Tensor<B, 2>,
        gamma: Tensor<B, 1>,
        beta: Tensor<B, 1>,
        mean: Tensor<B, 1>,
        var: Tensor<B, 1>,
    ) -> Tensor<B, 2> {
        wrap(B::channel_norm_eval(unwrap(x), unwrap(gamma), unwrap(beta), unwrap(mean), unwrap(var)))
    }

    /// See [`Kernels::conv_block_eval`].
    pub fn conv_block_eval<B: Kernels>(
        h: Tensor<B, 2>,
        w: Tensor<B, 3>,
        frames: usize,
        norm: [Tensor<B, 1>; 4],
    ) -> Tensor<B, 2> {
        wrap(B::conv_block_eval(unwrap(h), unwrap(w), frames, norm.map(unwrap)))
    }

    /// See [`Kernels::running_stats`].
    pub fn running_stats<B: Kernels>(
        stats: Tensor<B, 2>,
        mean: Tensor<B, 1>,
        var: Tensor<B, 1>,
        momentum: f64,
    ) -> (Tensor<B, 1>, Tensor<B, 1>) {
        let (m, v) = B::running_stats(unwrap(stats), unwrap(mean), unwrap(var), momentum);
        (wrap(m), wrap(v))
    }

    /// Training-mode BatchNorm of `[rows, C]`; returns the output and the `[2, C]` batch
    /// statistics (mean, biased variance) for the running averages.
    pub fn channel_norm_train<B: Kernels>(
        x: Tensor<B, 2>,
        gamma: Tensor<B, 1>,
        beta: Tensor<B, 1>,
    ) -> (Tensor<B, 2>, Tensor<B, 2>) {
        let stats: Tensor<B, 2> = wrap(B::channel_stats(unwrap(x.clone())));
        let y = wrap(B::channel_norm(unwrap(x), unwrap(stats.clone()), unwrap(gamma), unwrap(beta)));
        (y, stats)
    }
}

/// The straightforward formulations in Burn tensor ops: the path for non-host devices and the
/// yardstick the tests hold the custom ops to.
pub mod reference {
    use burn::tensor::module::conv1d;
    use burn::tensor::ops::ConvOptions;
    use burn::tensor::{backend::Backend, Tensor};

    use super::NORM_EPS;

    /// `1 / (1 + exp(-x))`: four element-wise ops where Burn's `sigmoid` queues eight (through
    /// a logarithm, with casts to f32 and back), and under Burn's fusion every queued op costs
    /// host time even when they all fuse into one kernel. In f16 `exp(-x)` overflows for
    /// `x < -11`, where the result is then 0 instead of < 2e-5.
    pub fn sigmoid<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
        x.neg().exp().add_scalar(1.0).recip()
    }

    /// `x * sigmoid(x)` ([`sigmoid`]).
    pub fn silu<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
        x.clone() * sigmoid(x)
    }

    /// Channels-first Burn `conv1d` with groups = channels, zero-padded on the left.
    pub fn causal_dwconv<B: Backend>(x: Tensor<B, 3>, w: Tensor<B, 2>) -> Tensor<B, 3> {
        let [b, _, c] = x.dims();
        let k = w.dims()[1];
        let x = x.swap_dims(1, 2);
        let left = Tensor::zeros([b, c, k - 1], (&x.device(), x.dtype()));
        let x = Tensor::cat(vec![left, x], 2);
        let weight = w.reshape([c, 1, k]);
        conv1d(x, weight, None, ConvOptions::new([1], [0], [1], c)).swap_dims(1, 2)
    }

    /// Closed-form gradients of [`causal_dwconv`]: `dx` is the anti-causal convolution of the
    /// output gradient with the flipped kernel; `dw[c, j] = sum over b, t of x[b, t + j - k + 1, c]
    /// x grad[b, t, c]`, computed as ONE convolution of the left-padded input with `B x C` groups
    /// whose kernels are the output gradients, then a sum over the batch (a handful of kernels
    /// on GPU backends, where a loop over the taps launched about four per tap).
    pub fn causal_dwconv_backward<B: Backend>(
        x: Tensor<B, 3>,
        w: Tensor<B, 2>,
        grad: Tensor<B, 3>,
    ) -> (Tensor<B, 3>, Tensor<B, 2>) {
        let [b, t, c] = x.dims();
        let k = w.dims()[1];
        let g = grad.swap_dims(1, 2); // [B, C, T]
        let right = Tensor::zeros([b, c, k - 1], (&g.device(), g.dtype()));
        let g_pad = Tensor::cat(vec![g.clone(), right], 2);
        let flipped = w.flip([1]).reshape([c, 1, k]);
        let gx = conv1d(g_pad, flipped, None, ConvOptions::new([1], [0], [1], c)).swap_dims(1, 2);
        let left = Tensor::zeros([b, c, k - 1], (&x.device(), x.dtype()));
        let x_pad = Tensor::cat(vec![left, x.swap_dims(1, 2)], 2).reshape([1, b * c, t + k - 1]);
        let kernels = g.reshape([b * c, 1, t]);
        let per_sample = conv1d(x_pad, kernels, None, ConvOptions::new([1], [0], [1], b * c)); // [1, B*C, k]
        let gw = per_sample.reshape([b, c, k]).sum_dim(0).reshape([c, k]);
        (gx, gw)
    }

    /// SiLU's gradient.
    pub fn silu_backward<B: Backend, const D: usize>(x: Tensor<B, D>, grad: Tensor<B, D>) -> Tensor<B, D> {
        let s = sigmoid(x.clone());
        let one_minus = s.clone().neg().add_scalar(1.0);
        grad * s * (x * one_minus).add_scalar(1.0)
    }

    /// `x [B, T, C]` times `gate [B, C]` broadcast over time.
    pub fn scale_channels<B: Backend>(x: Tensor<B, 3>, gate: Tensor<B, 2>) -> Tensor<B, 3> {
        x * gate.unsqueeze_dim(1)
    }

    /// Softmax over keys of `scores [B, H, Q, K] + bias [B, K]`.
    pub fn key_biased_softmax<B: Backend>(scores: Tensor<B, 4>, bias: Tensor<B, 2>) -> Tensor<B, 4> {
        let [b, _, _, k] = scores.dims();
        burn::tensor::activation::softmax(scores + bias.reshape([b, 1, 1, k]), 3)
    }

    /// `[B, T, H x D] -> [B, H, T, D]`.
    pub fn split_heads<B: Backend>(x: Tensor<B, 3>, heads: usize) -> Tensor<B, 4> {
        let [b, t, d] = x.dims();
        x.reshape([b, t, heads, d / heads]).swap_dims(1, 2)
    }

    /// `[B, H, T, D] -> [B, T, H x D]`.
    pub fn merge_heads<B: Backend>(x: Tensor<B, 4>) -> Tensor<B, 3> {
        let [b, h, t, hd] = x.dims();
        x.swap_dims(1, 2).reshape([b, t, h * hd])
    }

    /// Efficient channel attention: the weighted time average `weights [B, 1, T] x [B, T, C]`,
    /// Burn's `conv1d` over the channel axis (padding `K / 2`), a sigmoid gate, `x * gate`.
    pub fn eca<B: Backend>(x: Tensor<B, 3>, weights: Tensor<B, 3>, w: Tensor<B, 3>) -> Tensor<B, 3> {
        let [b, _, c] = x.dims();
        let pad = w.dims()[2] / 2;
        let pooled = weights.matmul(x.clone()); // [B, 1, C]
        let z = conv1d(pooled, w, None, ConvOptions::new([1], [pad], [1], 1)).reshape([b, c]);
        scale_channels(x, sigmoid(z))
    }

    /// Closed-form gradients of [`eca`] with respect to `x` and `w`: `dz = sum_t(grad x) s (1 -
    /// s)` for the gate `s`; `dx = grad s + weights^T (dz convolved with the flipped kernel)`;
    /// `dw[j] = sum over b, c of dz[b, c] pooled[b, c + j - K / 2]`.
    pub fn eca_backward<B: Backend>(
        x: Tensor<B, 3>,
        weights: Tensor<B, 3>,
        w: Tensor<B, 3>,
        grad: Tensor<B, 3>,
    ) -> (Tensor<B, 3>, Tensor<B, 3>) {
        let [b, _, c] = x.dims();
        let k = w.dims()[2];
        let options = || ConvOptions::new([1], [k / 2], [1], 1);
        let pooled = weights.clone().matmul(x.clone()); // [B, 1, C]
        let s = sigmoid(conv1d(pooled.clone(), w.clone(), None, options())).reshape([b, c]);
        let dot: Tensor<B, 2> = (grad.clone() * x).sum_dim(1).reshape([b, c]);
        let dz = dot * s.clone() * s.clone().neg().add_scalar(1.0);
        let dpooled = conv1d(dz.clone().reshape([b, 1, c]), w.flip([2]), None, options()); // [B, 1, C]
        let gx = scale_channels(grad, s) + weights.swap_dims(1, 2).matmul(dpooled);
        let zeros = Tensor::zeros([b, 1, k / 2], (&pooled.device(), pooled.dtype()));
        let padded = Tensor::cat(vec![zeros.clone(), pooled, zeros], 2).reshape([b, c + k - 1]);
        let taps: Vec<Tensor<B, 1>> = (0..k).map(|j| (padded.clone().narrow(1, j, c) * dz.clone()).sum()).collect();
        (gx, Tensor::cat(taps, 0).reshape([1, 1, k]))
    }

    /// Queries or keys or values (`part` 0, 1, 2) of a fused projection `[B * T, 3 D]` as
    /// `[B, H, T, D / H]`.
    fn qkv_part<B: Backend>(qkv: Tensor<B, 2>, part: usize, batch: usize, heads: usize) -> Tensor<B, 4> {
        let [rows, width] = qkv.dims();
        let d = width / 3;
        split_heads(qkv.narrow(1, part * d, d).reshape([batch, rows / batch, d]), heads)
    }

    /// Scaled dot-product scores `q k^T / sqrt(D / H)` from a fused projection `[B * T, 3 D]`.
    pub fn attention_scores<B: Backend>(qkv: Tensor<B, 2>, batch: usize, heads: usize) -> Tensor<B, 4> {
        let hd = qkv.dims()[1] / 3 / heads;
        let q = qkv_part(qkv.clone(), 0, batch, heads);
        let k = qkv_part(qkv, 1, batch, heads);
        q.matmul(k.swap_dims(2, 3)).mul_scalar(1.0 / (hd as f64).sqrt())
    }

    /// Gradient of [`attention_scores`] with respect to `qkv`: `grad k` and `grad^T q` (scaled)
    /// in the query and key columns, zeros in the value columns.
    pub fn attention_scores_backward<B: Backend>(qkv: Tensor<B, 2>, grad: Tensor<B, 4>) -> Tensor<B, 2> {
        let [batch, heads, _, _] = grad.dims();
        let [rows, width] = qkv.dims();
        let d = width / 3;
        let scale = 1.0 / ((d / heads) as f64).sqrt();
        let q = qkv_part(qkv.clone(), 0, batch, heads);
        let k = qkv_part(qkv.clone(), 1, batch, heads);
        let gq = merge_heads(grad.clone().matmul(k).mul_scalar(scale)).reshape([rows, d]);
        let gk = merge_heads(grad.swap_dims(2, 3).matmul(q).mul_scalar(scale)).reshape([rows, d]);
        Tensor::cat(vec![gq, gk, Tensor::zeros([rows, d], (&qkv.device(), qkv.dtype()))], 1)
    }

    /// `attn [B, H, T, T]` applied to the values of `qkv [B * T, 3 D]`, heads merged: `[B * T, D]`.
    pub fn attention_values<B: Backend>(attn: Tensor<B, 4>, qkv: Tensor<B, 2>) -> Tensor<B, 2> {
        let [batch, heads, _, _] = attn.dims();
        let [rows, width] = qkv.dims();
        merge_heads(attn.matmul(qkv_part(qkv, 2, batch, heads))).reshape([rows, width / 3])
    }

    /// Gradients of [`attention_values`] with respect to `attn` and `qkv` (zeros outside the
    /// value columns).
    pub fn attention_values_backward<B: Backend>(
        attn: Tensor<B, 4>,
        qkv: Tensor<B, 2>,
        grad: Tensor<B, 2>,
    ) -> (Tensor<B, 4>, Tensor<B, 2>) {
        let [batch, heads, _, _] = attn.dims();
        let [rows, width] = qkv.dims();
        let d = width / 3;
        let g = split_heads(grad.reshape([batch, rows / batch, d]), heads);
        let v = qkv_part(qkv.clone(), 2, batch, heads);
        let ga = g.clone().matmul(v.swap_dims(2, 3));
        let gv = merge_heads(attn.swap_dims(2, 3).matmul(g)).reshape([rows, d]);
        let zeros = Tensor::zeros([rows, 2 * d], (&qkv.device(), qkv.dtype()));
        (ga, Tensor::cat(vec![zeros, gv], 1))
    }

    /// Per-channel mean and biased variance of `x [N, C]`, stacked as `[2, C]`.
    pub fn channel_stats<B: Backend>(x: Tensor<B, 2>) -> Tensor<B, 2> {
        let mean = x.clone().mean_dim(0);
        let var = (x - mean.clone()).square().mean_dim(0);
        Tensor::cat(vec![mean, var], 0)
    }

    fn split<B: Backend>(stats: Tensor<B, 2>) -> (Tensor<B, 2>, Tensor<B, 2>) {
        (stats.clone().narrow(0, 0, 1), stats.narrow(0, 1, 1))
    }

    /// Normalize `x [N, C]` with `stats` from [`channel_stats`], then scale and shift.
    pub fn channel_norm<B: Backend>(
        x: Tensor<B, 2>,
        stats: Tensor<B, 2>,
        gamma: Tensor<B, 1>,
        beta: Tensor<B, 1>,
    ) -> Tensor<B, 2> {
        let (mean, var) = split(stats);
        let scale = var.add_scalar(NORM_EPS).sqrt().recip() * gamma.unsqueeze_dim(0);
        (x - mean) * scale + beta.unsqueeze_dim(0)
    }

    /// Inference-mode BatchNorm of the rows `x [N, C]` with running statistics `mean`, `var`:
    /// Burn's `BatchNorm` formulation, op for op.
    pub fn channel_norm_eval<B: Backend>(
        x: Tensor<B, 2>,
        gamma: Tensor<B, 1>,
        beta: Tensor<B, 1>,
        mean: Tensor<B, 1>,
        var: Tensor<B, 1>,
    ) -> Tensor<B, 2> {
        let c = x.dims()[1];
        let row = |t: Tensor<B, 1>| t.reshape([1, c]);
        let std = row(var).add_scalar(NORM_EPS).sqrt();
        x.sub(row(mean)).div(std).mul(row(gamma)).add(row(beta))
    }

    /// Running mean and variance after a batch with statistics `stats`, as Burn's `BatchNorm`.
    pub fn running_stats<B: Backend>(
        stats: Tensor<B, 2>,
        mean: Tensor<B, 1>,
        var: Tensor<B, 1>,
        momentum: f64,
    ) -> (Tensor<B, 1>, Tensor<B, 1>) {
        let c = mean.dims()[0];
        let (batch_mean, batch_var) = split(stats);
        let m = momentum;
        (
            mean.mul_scalar(1.0 - m).add(batch_mean.reshape([c]).mul_scalar(m)),
            var.mul_scalar(1.0 - m).add(batch_var.reshape([c]).mul_scalar(m)),
        )
    }

    /// Gradients of [`channel_norm`] with respect to `x`, `gamma` and `beta`.
    pub fn channel_norm_backward<B: Backend>(
        x: Tensor<B, 2>,
        stats: Tensor<B, 2>,
        gamma: Tensor<B, 1>,
        grad: Tensor<B, 2>,
    ) -> (Tensor<B, 2>, Tensor<B, 1>, Tensor<B, 1>) {
        let n = x.dims()[0] as f64;
        let (mean, var) = split(stats);
        let inv = var.add_scalar(NORM_EPS).sqrt().recip();
        let xhat = (x - mean) * inv.clone();
        let sum_g = grad.clone().sum_dim(0);
        let sum_gx = (grad.clone() * xhat.clone()).sum_dim(0);
        let scale = inv * gamma.unsqueeze_dim(0);
        let gx = (grad - sum_g.clone().div_scalar(n) - xhat * sum_gx.clone().div_scalar(n)) * scale;
        (gx, sum_gx.squeeze_dim(0), sum_g.squeeze_dim(0))
    }
}

/// The host loops: contiguous rows of `C` floats, rows split over rayon's threads. Row work is
/// written as slice zips so the compiler vectorizes it, and built for AVX2 and AVX-512 too
/// ([`crate::multiversion!`]).
mod host {
    use rayon::prelude::*;

    use super::NORM_EPS;
    use crate::multiversion;
    use crate::par::{fill_rows, sum_tasks, PARALLEL_ELEMS};
    use crate::simd::exp;

    multiversion!(
        /// `out += a * b` element-wise.
        fn axpy(out: &mut [f32], a: &[f32], b: &[f32]) {
            for ((o, a), b) in out.iter_mut().zip(a).zip(b) {
                *o += a * b;
            }
        }
    );

    multiversion!(
        /// `out += a * b` element-wise, accumulated in f64.
        fn axpy64(out: &mut [f64], a: &[f32], b: &[f32]) {
            for ((o, a), b) in out.iter_mut().zip(a).zip(b) {
                *o += (a * b) as f64;
            }
        }
    );

    multiversion!(
        /// `o = x * sigmoid(x)`.
        fn silu_row(o: &mut [f32], x: &[f32]) {
            for (o, v) in o.iter_mut().zip(x) {
                *o = v / (1.0 + exp(-v));
            }
        }
    );

    multiversion!(
        /// `o = g * s * (1 + x * (1 - s))` with `s = sigmoid(x)`.
        fn silu_backward_row(o: &mut [f32], x: &[f32], g: &[f32]) {
            for ((o, v), g) in o.iter_mut().zip(x).zip(g) {
                let s = 1.0 / (1.0 + exp(-v));
                *o = g * s * (1.0 + v * (1.0 - s));
            }
        }
    );

    multiversion!(
        /// `o = x * s + h` per channel.
        fn scale_shift(o: &mut [f32], x: &[f32], s: &[f32], h: &[f32]) {
            for (((o, v), s), h) in o.iter_mut().zip(x).zip(s).zip(h) {
                *o = v * s + h;
            }
        }
    );

    pub fn dwconv_forward(x: &[f32], w: &[f32], _b: usize, t: usize, c: usize, k: usize) -> Vec<f32> {
        fill_rows(x.len(), c, |row, o| {
            let (bi, ti) = (row / t, row % t);
            let base = bi * t;
            // Input frame ti - k + 1 + j for j in j0..k (frames before 0 are zero padding).
            for j in (k - 1).saturating_sub(ti)..k {
                let src = base + ti + j + 1 - k;
                axpy(o, &w[j * c..(j + 1) * c], &x[src * c..(src + 1) * c]);
            }
        })
    }

    pub fn dwconv_backward(
        x: &[f32],
        w: &[f32],
        g: &[f32],
        b: usize,
        t: usize,
        c: usize,
        k: usize,
    ) -> (Vec<f32>, Vec<f32>) {
        // dx[s] = sum_j w[j] * g[s + k - 1 - j] over output frames that exist.
        let gx = fill_rows(x.len(), c, |row, o| {
            let (bi, si) = (row / t, row % t);
            let base = bi * t;
            for j in (si + k).saturating_sub(t)..k {
                let dst = base + si + k - 1 - j;
                axpy(o, &w[j * c..(j + 1) * c], &g[dst * c..(dst + 1) * c]);
            }
        });
        // dw[j] = sum over (b, t) of g[t] * x[t - k + 1 + j]; per-sequence partial sums in f64.
        let gw = sum_tasks(b, k * c, x.len() * k, |bi, acc| {
            let base = bi * t;
            for ti in 0..t {
                let gr = &g[(base + ti) * c..(base + ti + 1) * c];
                for j in (k - 1).saturating_sub(ti)..k {
                    let src = base + ti + j + 1 - k;
                    axpy64(&mut acc[j * c..(j + 1) * c], gr, &x[src * c..(src + 1) * c]);
                }
            }
        });
        (gx, gw.into_iter().map(|v| v as f32).collect())
    }

    /// `y = x * sigmoid(x)`.
    pub fn silu(x: &[f32]) -> Vec<f32> {
        fill_rows(x.len(), 1024, |r, o| silu_row(o, &x[r * 1024..]))
    }

    /// `dx = g * s * (1 + x * (1 - s))` with `s = sigmoid(x)`.
    pub fn silu_backward(x: &[f32], g: &[f32]) -> Vec<f32> {
        fill_rows(x.len(), 1024, |r, o| silu_backward_row(o, &x[r * 1024..], &g[r * 1024..]))
    }

    pub fn scale_channels(x: &[f32], gate: &[f32], _b: usize, t: usize, c: usize) -> Vec<f32> {
        fill_rows(x.len(), c, |row, o| {
            let g = &gate[(row / t) * c..(row / t + 1) * c];
            for ((o, v), g) in o.iter_mut().zip(&x[row * c..(row + 1) * c]).zip(g) {
                *o = v * g;
            }
        })
    }

    /// `out[b, c] = sum_t a[b, t, c] * x[b, t, c]`.
    pub fn channel_dot(a: &[f32], x: &[f32], b: usize, t: usize, c: usize) -> Vec<f32> {
        let mut out = vec![0.0f32; b * c];
        let work = a.len();
        let per_sample = |bi: usize, o: &mut [f32]| {
            for ti in 0..t {
                let r = (bi * t + ti) * c;
                axpy(o, &a[r..r + c], &x[r..r + c]);
            }
        };
        if work < PARALLEL_ELEMS {
            out.chunks_mut(c).enumerate().for_each(|(bi, o)| per_sample(bi, o));
        } else {
            out.par_chunks_mut(c).enumerate().for_each(|(bi, o)| per_sample(bi, o));
        }
        out
    }

    /// Softmax of each row of `k` scores plus the row's sample bias (`rows_per_sample` rows per
    /// sample).
    pub fn key_biased_softmax(s: &[f32], bias: &[f32], _b: usize, rows_per_sample: usize, k: usize) -> Vec<f32> {
        fill_rows(s.len(), k, |row, o| {
            let bi = row / rows_per_sample;
            let br = &bias[bi * k..(bi + 1) * k];
            let mut max = f32::NEG_INFINITY;
            for ((o, v), bv) in o.iter_mut().zip(&s[row * k..(row + 1) * k]).zip(br) {
                *o = v + bv;
                max = max.max(*o);
            }
            crate::simd::softmax_with_max(o, max);
        })
    }

    pub fn softmax_backward(y: &[f32], g: &[f32], _rows: usize, k: usize) -> Vec<f32> {
        fill_rows(y.len(), k, |row, o| {
            let (yr, gr) = (&y[row * k..(row + 1) * k], &g[row * k..(row + 1) * k]);
            let dot = crate::simd::dot(yr, gr);
            for ((o, y), g) in o.iter_mut().zip(yr).zip(gr) {
                *o = y * (g - dot);
            }
        })
    }

    /// A dropout keep mask: element `i` is kept (times `scale`) when `hash(i) < threshold`.
    #[derive(Clone, Copy, Debug)]
    pub struct Keep {
        s0: u32,
        s1: u32,
        threshold: u32,
        scale: f32,
    }

    impl Keep {
        /// The mask of `seed` for dropout probability `prob` (`0 < prob`; `prob >= 1` drops all).
        pub fn new(seed: u64, prob: f64) -> Self {
            let keep = (1.0 - prob).clamp(0.0, 1.0);
            // keep < 1 here (callers skip prob <= 0), so the threshold fits in 32 bits.
            let threshold = (keep * 4_294_967_296.0).round().min(u32::MAX as f64) as u32;
            let scale = if keep > 0.0 { (1.0 / keep) as f32 } else { 0.0 };
            Self { s0: seed as u32, s1: (seed >> 32) as u32, threshold, scale }
        }

        /// Element `i`'s multiplier: `scale` or 0.
        #[inline(always)]
        pub fn factor(&self, i: u32) -> f32 {
            if self.hash(i) < self.threshold {
                self.scale
            } else {
                0.0
            }
        }

        /// murmur3's finalizer over the index, seeded twice: a bijection of `i` for each seed.
        #[inline(always)]
        fn hash(&self, i: u32) -> u32 {
            let fmix = |mut h: u32| {
                h ^= h >> 16;
                h = h.wrapping_mul(0x85eb_ca6b);
                h ^= h >> 13;
                h = h.wrapping_mul(0xc2b2_ae35);
                h ^ (h >> 16)
            };
            fmix(fmix(i.wrapping_mul(0x9e37_79b9) ^ self.s0) ^ self.s1)
        }
    }

    multiversion!(
        /// `o = y * mask` for the elements starting at index `first`.
        fn dropout_row(o: &mut [f32], y: &[f32], first: u32, keep: &Keep) {
            for (j, (o, y)) in o.iter_mut().zip(y).enumerate() {
                *o = y * keep.factor(first.wrapping_add(j as u32));
            }
        }
    );

    multiversion!(
        /// Gradient of `dropout(softmax)` for one row: `y * (gm - sum(gm * y))`, `gm = g * mask`.
        fn softmax_dropout_backward_row(o: &mut [f32], y: &[f32], g: &[f32], first: u32, keep: &Keep) {
            for (j, (o, g)) in o.iter_mut().zip(g).enumerate() {
                *o = g * keep.factor(first.wrapping_add(j as u32));
            }
            let dot = crate::simd::dot(o, y);
            for (o, y) in o.iter_mut().zip(y) {
                *o = y * (*o - dot);
            }
        }
    );

    /// `y` times the dropout mask, rows of `k` (element indices run over all of `y`).
    pub fn dropout(y: &[f32], k: usize, keep: Keep) -> Vec<f32> {
        fill_rows(y.len(), k, |row, o| dropout_row(o, &y[row * k..(row + 1) * k], (row * k) as u32, &keep))
    }

    /// Gradient of `dropout(softmax rows)` with respect to the scores, from the softmax `y`.
    pub fn softmax_dropout_backward(y: &[f32], g: &[f32], k: usize, keep: Keep) -> Vec<f32> {
        fill_rows(y.len(), k, |row, o| {
            let r = row * k..(row + 1) * k;
            softmax_dropout_backward_row(o, &y[r.clone()], &g[r], (row * k) as u32, &keep)
        })
    }

    /// `[a, b, c, d]` -> `[a, c, b, d]` (rows of `d` floats moved whole).
    pub fn permute_0213(x: &[f32], _a: usize, b: usize, c: usize, d: usize) -> Vec<f32> {
        // Output row (ai, ci, bi) of d floats comes from input row (ai, bi, ci).
        fill_rows(x.len(), d, |row, o| {
            let (ai, rest) = (row / (c * b), row % (c * b));
            let (ci, bi) = (rest / b, rest % b);
            let src = ((ai * b + bi) * c + ci) * d;
            o.copy_from_slice(&x[src..src + d]);
        })
    }

    /// `[a, r, c]` -> `[a, c, r]`: output row (ai, ci) of `r` floats gathers column ci of block ai.
    pub fn transpose_blocks(x: &[f32], _a: usize, r: usize, c: usize) -> Vec<f32> {
        fill_rows(x.len(), r, |row, o| {
            let (ai, ci) = (row / c, row % c);
            let block = &x[ai * r * c..(ai + 1) * r * c];
            for (ri, o) in o.iter_mut().enumerate() {
                *o = block[ri * c + ci];
            }
        })
    }

    /// Per-channel sums of `f(row)` over all rows, in f64 for stable statistics.
    fn column_sums(n: usize, c: usize, f: impl Fn(usize, &mut [f64]) + Sync + Send) -> Vec<f64> {
        let chunk = n.div_ceil(rayon::current_num_threads().max(1) * 4).max(16);
        sum_tasks(n.div_ceil(chunk), c, n * c, |ci, acc| {
            for row in ci * chunk..((ci + 1) * chunk).min(n) {
                f(row, acc);
            }
        })
    }

    pub fn stats(x: &[f32], n: usize, c: usize) -> Vec<f32> {
        let sums =
            column_sums(n, c, |r, acc| acc.iter_mut().zip(&x[r * c..(r + 1) * c]).for_each(|(a, v)| *a += *v as f64));
        let mean: Vec<f64> = sums.iter().map(|s| s / n.max(1) as f64).collect();
        let sq = column_sums(n, c, |r, acc| {
            acc.iter_mut().zip(&x[r * c..(r + 1) * c]).zip(&mean).for_each(|((a, v), m)| {
                let d = *v as f64 - m;
                *a += d * d;
            })
        });
        let mut out: Vec<f32> = mean.iter().map(|m| *m as f32).collect();
        out.extend(sq.iter().map(|s| (s / n.max(1) as f64) as f32));
        out
    }

    fn inv_std_and_scale(stats: &[f32], gamma: &[f32], c: usize) -> (Vec<f32>, Vec<f32>) {
        let inv: Vec<f32> = stats[c..2 * c].iter().map(|v| 1.0 / (*v as f64 + NORM_EPS).sqrt() as f32).collect();
        let scale: Vec<f32> = inv.iter().zip(gamma).map(|(i, g)| i * g).collect();
        (inv, scale)
    }

    pub fn normalize(x: &[f32], stats: &[f32], gamma: &[f32], beta: &[f32], _n: usize, c: usize) -> Vec<f32> {
        let mean = &stats[..c];
        let (_, scale) = inv_std_and_scale(stats, gamma, c);
        // y = x * scale + (beta - mean * scale)
        let shift: Vec<f32> = beta.iter().zip(mean).zip(&scale).map(|((b, m), s)| b - m * s).collect();
        fill_rows(x.len(), c, |row, o| scale_shift(o, &x[row * c..(row + 1) * c], &scale, &shift))
    }

    pub fn normalize_backward(
        x: &[f32],
        stats: &[f32],
        gamma: &[f32],
        g: &[f32],
        n: usize,
        c: usize,
    ) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let mean = &stats[..c];
        let (inv, scale) = inv_std_and_scale(stats, gamma, c);
        let sum_g =
            column_sums(n, c, |r, acc| acc.iter_mut().zip(&g[r * c..(r + 1) * c]).for_each(|(a, v)| *a += *v as f64));
        let sum_gx = column_sums(n, c, |r, acc| {
            let (xr, gr) = (&x[r * c..(r + 1) * c], &g[r * c..(r + 1) * c]);
            for ((((a, xv), gv), m), i) in acc.iter_mut().zip(xr).zip(gr).zip(mean).zip(&inv) {
                *a += (*gv as f64) * ((xv - m) * i) as f64;
            }
        });
        let nf = n.max(1) as f64;
        let mg: Vec<f32> = sum_g.iter().map(|s| (s / nf) as f32).collect();
        let mgx: Vec<f32> = sum_gx.iter().map(|s| (s / nf) as f32).collect();
        let gx = fill_rows(x.len(), c, |row, o| {
            let (xr, gr) = (&x[row * c..(row + 1) * c], &g[row * c..(row + 1) * c]);
            for i in 0..c {
                let xhat = (xr[i] - mean[i]) * inv[i];
                o[i] = (gr[i] - mg[i] - xhat * mgx[i]) * scale[i];
            }
        });
        (gx, sum_gx.iter().map(|v| *v as f32).collect(), sum_g.iter().map(|v| *v as f32).collect())
    }
}
