//! SignFlow's CubeCL kernels: ops the CPU runs as host loops (`models::kernels`: the causal
//! depthwise conv and its gradients, SiLU, BatchNorm's statistics, backward, running
//! statistics and inference, the ECA gate, attention; a conv block's SiLU and conv as one op,
//! and in inference its SiLU, conv and norm as one kernel) and the optimizer's gradient
//! gather, as
//! one kernel launch each (and the optimizer's parameter views, as none) on Burn's CubeCL
//! backends (CUDA and WGPU) instead of the chains of tensor ops their reference formulations
//! take (padding, `cat`, transposes, separate reductions, one slice write per tensor).
//!
//! Each entry point takes its `Dispatch` float tensors by value and, when it does not apply (a
//! CPU tensor, inputs on different backends or of different dtypes (BatchNorm takes
//! half-precision rows beside f32 parameters), a device without the dtype or the shared memory
//! the kernel needs, or `SIGNFLOW_GPU_KERNELS=reference`), gives them back untouched ([`Ran`]);
//! the caller then runs the reference ops. Taken by value, an input whose last handle the
//! caller gave is freed by the op itself instead of by a drop operation queued later in Burn's
//! fusion stream (host work like any other operation). A device that lacks what a kernel needs
//! is named in a one-line warning, once per op; before their first use on a device the kernels
//! run a self-test there ([`check`]), and stand down on that device if one of them does not
//! compile or gives other values. On a CubeCL device the kernel is queued as a custom operation
//! of Burn's fusion stream ([`fusion`]), so it runs in order with the fused tensor ops around it
//! and costs no host wait.
//!
//! The kernels ([`kernels`]) read strided inputs, write contiguous outputs and sum in f32.

#![warn(missing_docs)]
// An entry point that declines gives its inputs back in its `Err` (a few handles, moved once);
// boxing them would allocate on every call of a CPU tensor, which always declines.
#![allow(clippy::result_large_err)]

mod check;
mod fusion;
mod kernels;

use std::sync::{Mutex, OnceLock};

use burn::tensor::{DType, Shape, TensorMetadata};
use burn_cubecl::fusion::FusionCubeRuntime;
use burn_cubecl::CubeRuntime;
use burn_dispatch::{BackendTensor, DispatchTensor, DispatchTensorKind};
use burn_fusion::FusionTensor;

/// The environment variable that selects the reference tensor ops instead of these kernels on
/// every device (`reference`); unset or `cube`, the kernels run where they apply.
pub const SWITCH: &str = "SIGNFLOW_GPU_KERNELS";

/// Whether the kernels are switched on ([`SWITCH`]), read once per process.
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| match std::env::var(SWITCH) {
        Ok(v) if v.trim() == "reference" => false,
        Ok(v) if v.trim() == "cube" || v.trim().is_empty() => true,
        Ok(v) => {
            eprintln!("warning: {SWITCH}={v:?} is neither `cube` nor `reference`; using the CubeCL kernels");
            true
        }
        Err(_) => true,
    })
}

/// An entry point's result: its outputs, or, when the op does not apply (see the crate docs),
/// its `N` inputs given back untouched for the caller's reference ops.
pub type Ran<T, const N: usize> = Result<T, [DispatchTensor; N]>;

/// Whether the kernels run on `x`'s device in its dtype: a float tensor of a CubeCL device that
/// can run them and where they passed their self-test. Layers with a formulation built on the
/// kernels ask this before taking it (an op may still decline its own shapes).
pub fn available(x: &DispatchTensor) -> bool {
    if !enabled() {
        return false;
    }
    let device = <burn::Dispatch as burn::tensor::ops::FloatTensorOps<burn::Dispatch>>::float_device(x);
    let dtype = x.dtype();
    let props_ok =
        device_runs::<cubecl::wgpu::WgpuRuntime>(x, dtype) || device_runs::<cubecl::cuda::CudaRuntime>(x, dtype);
    props_ok && check::verdict(&device, dtype).is_ok()
}

/// Causal depthwise convolution over the frames of each sample: `x [B * T, C]` (each sample's
/// `frames` consecutive rows) and `w [C, 1, K]` (a depthwise `Conv1d`'s weight) -> `[B * T, C]`
/// (see `models::kernels::Kernels::causal_dwconv`). Rows and taps are read in these shapes, so
/// no reshape is queued around the op.
pub fn causal_dwconv(x: DispatchTensor, w: DispatchTensor, frames: usize) -> Ran<DispatchTensor, 2> {
    conv("causal_dwconv", x, w, kernels::Conv { frames, silu: false })
}

/// Gradients of [`causal_dwconv`] with respect to `x` and `w` (in their shapes).
pub fn causal_dwconv_backward(
    x: DispatchTensor,
    w: DispatchTensor,
    grad: DispatchTensor,
    frames: usize,
) -> Ran<(DispatchTensor, DispatchTensor), 3> {
    conv_backward("causal_dwconv_backward", x, w, grad, kernels::Conv { frames, silu: false })
}

/// [`causal_dwconv`] of SiLU of `h`, in one launch and one operation of Burn's fusion stream
/// where the two ops take two of each, and without SiLU's output in memory (a conv block in
/// training; see `models::kernels::Kernels::silu_dwconv`).
pub fn silu_dwconv(h: DispatchTensor, w: DispatchTensor, frames: usize) -> Ran<DispatchTensor, 2> {
    conv("silu_dwconv", h, w, kernels::Conv { frames, silu: true })
}

/// Gradients of [`silu_dwconv`] with respect to `h` and `w`, from `h`, `w` and the output
/// gradient `grad`: two launches, where the conv's and SiLU's backward take three.
pub fn silu_dwconv_backward(
    h: DispatchTensor,
    w: DispatchTensor,
    grad: DispatchTensor,
    frames: usize,
) -> Ran<(DispatchTensor, DispatchTensor), 3> {
    conv_backward("silu_dwconv_backward", h, w, grad, kernels::Conv { frames, silu: true })
}

/// The causal depthwise conv op `name` with settings `set`.
fn conv(name: &'static str, x: DispatchTensor, w: DispatchTensor, set: kernels::Conv) -> Ran<DispatchTensor, 2> {
    if !dwconv_shapes(&x, &w, set.frames) {
        return Err([x, w]);
    }
    let op = Op { name, bindings: 3, shared: 0, launch: Launchers::of(kernels::causal_dwconv, kernels::causal_dwconv) };
    let shape = x.shape();
    op.run([x, w], [shape], set).map(|[y]| y)
}

/// The backward op `name` of [`conv`] with settings `set`.
fn conv_backward(
    name: &'static str,
    x: DispatchTensor,
    w: DispatchTensor,
    grad: DispatchTensor,
    set: kernels::Conv,
) -> Ran<(DispatchTensor, DispatchTensor), 3> {
    if !dwconv_shapes(&x, &w, set.frames) || grad.shape() != x.shape() {
        return Err([x, w, grad]);
    }
    let launch = Launchers::of(kernels::causal_dwconv_backward, kernels::causal_dwconv_backward);
    // The SiLU form's input-gradient kernel binds `h` beside `g`, `w` and the output.
    let op = Op { name, bindings: 3 + u32::from(set.silu), shared: 0, launch };
    let shapes = [x.shape(), w.shape()];
    op.run([x, w, grad], shapes, set).map(|[gx, gw]| (gx, gw))
}

/// Whether `x [B * T, C]` holds whole samples of `frames` rows and `w` is `[C, 1, K]`.
fn dwconv_shapes(x: &DispatchTensor, w: &DispatchTensor, frames: usize) -> bool {
    let (xs, ws) = (x.shape(), w.shape());
    xs.num_dims() == 2
        && ws.num_dims() == 3
        && frames > 0
        && xs[0].is_multiple_of(frames)
        && (ws[0], ws[1]) == (xs[1], 1)
        && ws[2] > 0
}

/// SiLU, `x * sigmoid(x)`, of `x` at any rank in one launch and one operation of Burn's fusion
/// stream, where the tensor-op formulation queues five (and its gradient ten), each host work.
pub fn silu(x: DispatchTensor) -> Ran<DispatchTensor, 1> {
    let op = Op { name: "silu", bindings: 2, shared: 0, launch: Launchers::of(kernels::silu, kernels::silu) };
    let shape = x.shape();
    op.run([x], [shape], ()).map(|[y]| y)
}

/// Gradient of [`silu`] with respect to `x`, from `x` and the output gradient `grad`.
pub fn silu_backward(x: DispatchTensor, grad: DispatchTensor) -> Ran<DispatchTensor, 2> {
    if grad.shape() != x.shape() {
        return Err([x, grad]);
    }
    let launch = Launchers::of(kernels::silu_backward, kernels::silu_backward);
    let op = Op { name: "silu_backward", bindings: 3, shared: 0, launch };
    let shape = x.shape();
    op.run([x, grad], [shape], ()).map(|[gx]| gx)
}

/// The channel count of `x [.., C]` (its last axis; its leading axes are rows), if it has two
/// axes at least.
fn channels(x: &DispatchTensor) -> Option<usize> {
    let s = x.shape();
    (s.num_dims() >= 2).then(|| s[s.num_dims() - 1])
}

/// Per-channel mean and biased variance of `x [.., C]` (its leading axes are rows), stacked as
/// `[2, C]`.
pub fn channel_stats(x: DispatchTensor) -> Ran<DispatchTensor, 1> {
    let Some(c) = channels(&x) else { return Err([x]) };
    let op = Op {
        name: "channel_stats",
        bindings: 2,
        shared: 0,
        launch: Launchers::of(kernels::channel_stats, kernels::channel_stats),
    };
    op.run([x], [Shape::new([2, c])], ()).map(|[stats]| stats)
}

/// Training-mode BatchNorm of `x [.., C]` (its leading axes are rows; `y` has its shape) in one
/// launch: `(x - mean) / sqrt(var + eps) * gamma + beta` with the batch's statistics, those
/// statistics (`[2, C]`: mean, biased variance, for the backward pass), and the running `mean`,
/// `var` (`[C]`) after the batch, `running * (1 - momentum) + batch * momentum`. Takes `[x,
/// gamma, beta, mean, var]`; returns `[y, stats, new_mean, new_var]`.
pub fn channel_norm_train(inputs: [DispatchTensor; 5], eps: f64, momentum: f64) -> Ran<[DispatchTensor; 4], 5> {
    let [x, params @ ..] = &inputs;
    let Some((c, p)) = norm_params(x, params) else { return Err(inputs) };
    let outputs = vec![(x.shape(), x.dtype()), (Shape::new([2, c]), p), (Shape::new([c]), p), (Shape::new([c]), p)];
    let set = kernels::NormSettings { eps: eps as f32, weights: [(1.0 - momentum) as f32, momentum as f32] };
    let launch = Launchers::of(kernels::channel_norm_train, kernels::channel_norm_train);
    let op = Op { name: "channel_norm_train", bindings: 9, shared: 0, launch };
    op.run_typed(inputs, outputs, set).map(exactly)
}

/// Inference-mode BatchNorm of `x [.., C]` (its leading axes are rows; `y` has its shape and
/// dtype) with its running statistics in one launch and one operation of Burn's fusion stream,
/// where Burn's formulation queues ten (four reshapes and six element-wise ops): `(x - mean) /
/// sqrt(var + eps) * gamma + beta`. Takes `[x, gamma, beta, mean, var]` (`[C]` each; f32 beside
/// half-precision `x`, as [`channel_norm_train`]).
pub fn channel_norm_eval(inputs: [DispatchTensor; 5], eps: f64) -> Ran<DispatchTensor, 5> {
    let [x, params @ ..] = &inputs;
    if norm_params(x, params).is_none() {
        return Err(inputs);
    }
    let outputs = vec![(x.shape(), x.dtype())];
    let launch = Launchers::of(kernels::channel_norm_eval, kernels::channel_norm_eval);
    let op = Op { name: "channel_norm_eval", bindings: 6, shared: 0, launch };
    op.run_typed(inputs, outputs, eps as f32).map(|y| {
        let [y] = exactly(y);
        y
    })
}

/// A conv block's middle in inference: SiLU of `h [B * T, C]` (each sample's `frames`
/// consecutive rows), the causal depthwise convolution with `w [C, 1, K]` ([`causal_dwconv`])
/// and BatchNorm with its running statistics ([`channel_norm_eval`]), in one launch and one
/// operation of Burn's fusion stream where the three ops take three of each, and neither
/// intermediate is written to memory (nor rounded: the kernel works in f32). Takes `[h, w,
/// gamma, beta, mean, var]`: `w` in `h`'s dtype, the norm's four `[C]` vectors in it or in f32
/// beside half-precision `h`.
pub fn conv_block_eval(inputs: [DispatchTensor; 6], frames: usize, eps: f64) -> Ran<DispatchTensor, 6> {
    let [h, w, params @ ..] = &inputs;
    if !dwconv_shapes(h, w, frames) || w.dtype() != h.dtype() || norm_params(h, params).is_none() {
        return Err(inputs);
    }
    let outputs = vec![(h.shape(), h.dtype())];
    let launch = Launchers::of(kernels::conv_block_eval, kernels::conv_block_eval);
    let op = Op { name: "conv_block_eval", bindings: 7, shared: 0, launch };
    op.run_typed(inputs, outputs, (frames, eps as f32)).map(|y| {
        let [y] = exactly(y);
        y
    })
}

/// The channel count `C` of `x [.., C]` and the dtype of BatchNorm's `params` (`[C]` each)
/// beside it ([`norm_param_dtype`]), or `None` when they do not fit the kernels.
fn norm_params(x: &DispatchTensor, params: &[DispatchTensor]) -> Option<(usize, DType)> {
    let c = channels(x)?;
    let per_channel = params.iter().all(|t| t.shape().num_dims() == 1 && t.shape()[0] == c);
    let dtypes: Vec<DType> = params.iter().map(|t| t.dtype()).collect();
    norm_param_dtype(x.dtype(), &dtypes).filter(|_| per_channel).map(|p| (c, p))
}

/// The dtype of BatchNorm's parameters and statistics (of dtypes `params`) beside activations
/// of dtype `x`: `x` itself, or f32 beside half precision (mixed precision keeps BatchNorm in
/// f32).
fn norm_param_dtype(x: DType, params: &[DType]) -> Option<DType> {
    let p = *params.first()?;
    let mixed_ok = p == x || (p == DType::F32 && matches!(x, DType::F16 | DType::BF16));
    (mixed_ok && params.iter().all(|&t| t == p)).then_some(p)
}

/// Gradients of training-mode BatchNorm (`x [.., C]` with its leading axes as rows, normalized
/// with `stats` from [`channel_stats`], scaled by `gamma [C]`) with respect to `x`, `gamma` and
/// `beta`, from `[x, stats, gamma, grad]`; `eps` is the epsilon added to the variance.
pub fn channel_norm_backward(inputs: [DispatchTensor; 4], eps: f64) -> Ran<[DispatchTensor; 3], 4> {
    let [x, stats, gamma, grad] = &inputs;
    let (Some(c), Some(p)) = (channels(x), norm_param_dtype(x.dtype(), &[stats.dtype(), gamma.dtype()])) else {
        return Err(inputs);
    };
    if grad.shape() != x.shape() || grad.dtype() != x.dtype() {
        return Err(inputs);
    }
    let outputs = vec![(x.shape(), x.dtype()), (Shape::new([c]), p), (Shape::new([c]), p)];
    let launch = Launchers::of(kernels::channel_norm_backward, kernels::channel_norm_backward);
    let op = Op { name: "channel_norm_backward", bindings: 7, shared: 0, launch };
    op.run_typed(inputs, outputs, eps as f32).map(exactly)
}

/// BatchNorm's running mean and variance `[C]` after a batch with statistics `stats [2, C]`:
/// `running * (1 - momentum) + batch * momentum`.
pub fn running_stats(
    stats: DispatchTensor,
    mean: DispatchTensor,
    var: DispatchTensor,
    momentum: f64,
) -> Ran<(DispatchTensor, DispatchTensor), 3> {
    let channels = mean.shape()[0];
    let launch = Launchers::of(kernels::running_stats, kernels::running_stats);
    let op = Op { name: "running_stats", bindings: 5, shared: 0, launch };
    let weights = [(1.0 - momentum) as f32, momentum as f32];
    let shapes = [Shape::new([channels]), Shape::new([channels])];
    op.run([stats, mean, var], shapes, weights).map(|[m, v]| (m, v))
}

/// Efficient channel attention of `x [B * T, C]` (each sample's `T` consecutive rows; see
/// `models::common::Eca`): the time average with `weights [B, 1, T]`, its convolution over
/// channels with `w [1, 1, K]` (`K` odd, zero padding `K / 2`), a sigmoid gate per (sample,
/// channel), and `x * gate`. Declined beyond [`kernels::ECA_MAX_CHANNELS`] channels.
pub fn eca(x: DispatchTensor, weights: DispatchTensor, w: DispatchTensor) -> Ran<DispatchTensor, 3> {
    let Some(shared) = eca_shapes(&x, &weights, &w) else { return Err([x, weights, w]) };
    let op = Op { name: "eca", bindings: 4, shared, launch: Launchers::of(kernels::eca, kernels::eca) };
    let shape = x.shape();
    op.run([x, weights, w], [shape], ()).map(|[y]| y)
}

/// Gradients of [`eca`] with respect to `x` and `w`.
pub fn eca_backward(
    x: DispatchTensor,
    weights: DispatchTensor,
    w: DispatchTensor,
    grad: DispatchTensor,
) -> Ran<(DispatchTensor, DispatchTensor), 4> {
    let shared = eca_shapes(&x, &weights, &w).filter(|_| grad.shape() == x.shape());
    let Some(shared) = shared else { return Err([x, weights, w, grad]) };
    let launch = Launchers::of(kernels::eca_backward, kernels::eca_backward);
    let op = Op { name: "eca_backward", bindings: 6, shared, launch };
    let shapes = [x.shape(), w.shape()];
    op.run([x, weights, w, grad], shapes, ()).map(|[gx, gw]| (gx, gw))
}

/// The shared memory the ECA kernels need for these inputs, if their shapes are ECA's.
fn eca_shapes(x: &DispatchTensor, weights: &DispatchTensor, w: &DispatchTensor) -> Option<usize> {
    let (xs, ms, ws) = (x.shape(), weights.shape(), w.shape());
    let ok = xs.num_dims() == 2
        && ms.num_dims() == 3
        && ws.num_dims() == 3
        && ms[1] == 1
        && ms[0] * ms[2] == xs[0]
        && (ws[0], ws[1]) == (1, 1)
        && ws[2] % 2 == 1
        && xs[1] <= kernels::ECA_MAX_CHANNELS;
    ok.then(|| kernels::eca_shared_bytes(xs[1]))
}

/// Attention scores `[B, H, T, T]` from the fused projection `qkv [B * T, 3 D]` (queries, keys
/// and values side by side, each `heads` blocks of `D / heads` columns), scaled by
/// `1 / sqrt(D / heads)`.
pub fn attention_scores(qkv: DispatchTensor, batch: usize, heads: usize) -> Ran<DispatchTensor, 1> {
    let Some([rows, width]) = qkv_shape(&qkv) else { return Err([qkv]) };
    let dim = width / 3;
    if batch == 0 || heads == 0 || rows % batch != 0 || dim % heads != 0 {
        return Err([qkv]);
    }
    let frames = rows / batch;
    let split = kernels::Heads { batch, heads, scale: (1.0 / ((dim / heads) as f64).sqrt()) as f32 };
    let launch = Launchers::of(kernels::attention_scores, kernels::attention_scores);
    let op = Op { name: "attention_scores", bindings: 2, shared: 0, launch };
    op.run([qkv], [Shape::new([batch, heads, frames, frames])], split).map(|[scores]| scores)
}

/// Gradient of [`attention_scores`] with respect to `qkv`, from the scores' gradient `grad [B,
/// H, T, T]`: `[B * T, 3 D]`, zero in the value columns.
pub fn attention_scores_backward(qkv: DispatchTensor, grad: DispatchTensor) -> Ran<DispatchTensor, 2> {
    let g = grad.shape();
    let fits = |[rows, width]: [usize; 2]| {
        g.num_dims() == 4 && g[0] * g[2] == rows && g[2] == g[3] && g[1] > 0 && (width / 3) % g[1] == 0
    };
    let Some([_, width]) = qkv_shape(&qkv).filter(|s| fits(*s)) else { return Err([qkv, grad]) };
    let scale = (1.0 / ((width / 3 / g[1]) as f64).sqrt()) as f32;
    let launch = Launchers::of(kernels::attention_scores_backward, kernels::attention_scores_backward);
    let op = Op { name: "attention_scores_backward", bindings: 3, shared: 0, launch };
    let shape = qkv.shape();
    op.run([qkv, grad], [shape], scale).map(|[out]| out)
}

/// The attention output `[B * T, D]`, heads merged: the weights `attn [B, H, T, T]` applied to
/// the values in `qkv [B * T, 3 D]`.
pub fn attention_values(attn: DispatchTensor, qkv: DispatchTensor) -> Ran<DispatchTensor, 2> {
    let Some([rows, width]) = values_shapes(&attn, &qkv) else { return Err([attn, qkv]) };
    let launch = Launchers::of(kernels::attention_values, kernels::attention_values);
    let op = Op { name: "attention_values", bindings: 3, shared: 0, launch };
    op.run([attn, qkv], [Shape::new([rows, width / 3])], ()).map(|[out]| out)
}

/// Gradients of [`attention_values`] with respect to `attn` and `qkv` (zero outside the value
/// columns), from the output gradient `grad [B * T, D]`.
pub fn attention_values_backward(
    attn: DispatchTensor,
    qkv: DispatchTensor,
    grad: DispatchTensor,
) -> Ran<(DispatchTensor, DispatchTensor), 3> {
    let fits = |[rows, width]: [usize; 2]| grad.shape().dims::<2>() == [rows, width / 3];
    if !values_shapes(&attn, &qkv).is_some_and(fits) {
        return Err([attn, qkv, grad]);
    }
    let launch = Launchers::of(kernels::attention_values_backward, kernels::attention_values_backward);
    let op = Op { name: "attention_values_backward", bindings: 6, shared: 0, launch };
    let shapes = [attn.shape(), qkv.shape()];
    op.run([attn, qkv, grad], shapes, ()).map(|[gattn, gqkv]| (gattn, gqkv))
}

/// Softmax over the keys of `scores [B, H, Q, K] + bias [B, K]`, and its copy with dropout of
/// probability `prob` (`0 <= prob < 1`; 0: the copy is the softmax). The mask is a hash of each
/// element's index and a seed made of `seeds`: four whole numbers below 2048 in the scores'
/// dtype, drawn on the device (`prob` 0: unused, any tensor of that dtype).
pub fn softmax_dropout(
    scores: DispatchTensor,
    bias: DispatchTensor,
    seeds: DispatchTensor,
    prob: f64,
) -> Ran<(DispatchTensor, DispatchTensor), 3> {
    let (s, b) = (scores.shape(), bias.shape());
    let ok = s.num_dims() == 4 && b.num_dims() == 2 && (b[0], b[1]) == (s[0], s[3]) && s[3] > 0;
    if !ok || !(0.0..1.0).contains(&prob) || (prob > 0.0 && seeds.shape().num_elements() < 4) {
        return Err([scores, bias, seeds]);
    }
    let drop = (prob > 0.0).then(|| {
        let keep = 1.0 - prob;
        let threshold = (keep * 4_294_967_296.0).round().min(u32::MAX as f64) as u32;
        kernels::Drop { threshold, scale: (1.0 / keep) as f32 }
    });
    let launch = Launchers::of(kernels::softmax_dropout, kernels::softmax_dropout);
    let op = Op { name: "softmax_dropout", bindings: 5, shared: 0, launch };
    op.run([scores, bias, seeds], [s.clone(), s], drop).map(|[y, out]| (y, out))
}

/// Gradient of [`softmax_dropout`] with respect to the scores, from the softmax `y`, the copy
/// `out` and `out`'s gradient (for the plain softmax, `out` is `y`).
pub fn softmax_dropout_backward(
    y: DispatchTensor,
    out: DispatchTensor,
    grad: DispatchTensor,
) -> Ran<DispatchTensor, 3> {
    let s = y.shape();
    if s.num_dims() != 4 || out.shape() != s || grad.shape() != s {
        return Err([y, out, grad]);
    }
    let launch = Launchers::of(kernels::softmax_dropout_backward, kernels::softmax_dropout_backward);
    let op = Op { name: "softmax_dropout_backward", bindings: 4, shared: 0, launch };
    op.run([y, out, grad], [s], ()).map(|[gs]| gs)
}

/// `[rows, 3 D]` of a fused projection.
fn qkv_shape(qkv: &DispatchTensor) -> Option<[usize; 2]> {
    let s = qkv.shape();
    (s.num_dims() == 2 && s[1].is_multiple_of(3) && s[1] > 0).then(|| [s[0], s[1]])
}

/// `qkv`'s `[rows, 3 D]` when `attn [B, H, T, T]` matches it.
fn values_shapes(attn: &DispatchTensor, qkv: &DispatchTensor) -> Option<[usize; 2]> {
    let [rows, width] = qkv_shape(qkv)?;
    let a = attn.shape();
    let ok = a.num_dims() == 4 && a[0] * a[2] == rows && a[2] == a[3] && a[1] > 0 && (width / 3) % a[1] == 0;
    ok.then_some([rows, width])
}

/// For each window `(start, shape)`, `shape` elements of the 1-D tensor `flat` from `start`, as
/// a view of its memory where the device allows (the start at its memory alignment; the end
/// anywhere; Burn's own slice copies unless the end is aligned too), else a copy; all windows in
/// one operation of Burn's fusion stream (the optimizer's views of every parameter, the
/// half-precision copy's, a forward pass's drop-path masks).
pub fn views(flat: DispatchTensor, windows: &[(usize, Shape)]) -> Ran<Vec<DispatchTensor>, 1> {
    let len = flat.shape();
    if len.num_dims() != 1 || windows.is_empty() || windows.iter().any(|(at, s)| at + s.num_elements() > len[0]) {
        return Err([flat]);
    }
    let op = Op { name: "views", bindings: 0, shared: 0, launch: Launchers::of(kernels::views, kernels::views) };
    let shapes = windows.iter().map(|(_, s)| s.clone()).collect();
    let windows =
        windows.iter().map(|(start, shape)| kernels::Window { start: *start, shape: shape.clone() }).collect();
    op.run_vec([flat], shapes, windows)
}

/// Gradients of a dense layer `x [n, k] @ w [k, m] + bias [m]` with respect to `x`, `w` and the
/// bias, each computed only where `wanted` (in that order) asks for it, from `grad [n, m]`: the
/// two products and the column sums of Burn's own formulation (same kernels, same launches) in
/// one operation of Burn's fusion stream, where that formulation queues six (two transposes,
/// two products, a sum and a reshape).
pub fn dense_backward(
    x: DispatchTensor,
    w: DispatchTensor,
    grad: DispatchTensor,
    wanted: [bool; 3],
) -> Ran<[Option<DispatchTensor>; 3], 3> {
    let (xs, ws, gs) = (x.shape(), w.shape(), grad.shape());
    let ok = [&xs, &ws, &gs].iter().all(|s| s.num_dims() == 2)
        && xs[1] == ws[0]
        && (gs[0], gs[1]) == (xs[0], ws[1])
        && wanted.contains(&true);
    if !ok {
        return Err([x, w, grad]);
    }
    let shapes = [xs, ws, Shape::new([gs[1]])];
    let shapes = shapes.into_iter().zip(wanted).filter_map(|(s, want)| want.then_some(s)).collect();
    let launch = Launchers::of(kernels::dense_backward, kernels::dense_backward);
    let op = Op { name: "dense_backward", bindings: 3, shared: 0, launch };
    let mut grads = op.run_vec([x, w, grad], shapes, wanted)?.into_iter();
    Ok(wanted.map(|want| if want { grads.next() } else { None }))
}

/// AdamW's settings for [`adamw`] (burn-optim's names), with the step's number and clipping.
#[derive(Clone, Copy, Debug)]
pub struct AdamW {
    /// The first moment's decay.
    pub beta1: f64,
    /// The second moment's decay.
    pub beta2: f64,
    /// Added to the second moment's square root.
    pub epsilon: f64,
    /// Decoupled weight decay.
    pub weight_decay: f64,
    /// The learning rate.
    pub lr: f64,
    /// The global gradient norm the gradient is clipped to (0: no clipping).
    pub clip: f64,
    /// The step's number for the bias corrections (1 for the first), skipped steps the host
    /// knows of left out.
    pub step: i32,
}

/// One AdamW step over the optimizer's flat f32 buffers in one launch, with the decisions of
/// the step made in it, where tensor ops queue some fifty operations: from `[p, g, m, v]` (1-D,
/// one length) and four `[1]` device scalars `[loss, norm2, scale, skips]` (the step's loss
/// and squared gradient norm, both scaled by the loss scale `scale`, and how many steps
/// before this one were skipped on the device unknown to the host), the new `[p, m, v,
/// skips]`. The step applies where the loss and the norm are finite, with the gradient
/// unscaled and clipped to `set.clip`, and the bias corrections leave out the skipped steps;
/// else every buffer stays as it was and the skip is counted. Computed in the order of
/// `trainer::optim`'s tensor ops, the reference.
pub fn adamw(inputs: [DispatchTensor; 8], set: AdamW) -> Ran<[DispatchTensor; 4], 8> {
    let len = inputs[0].shape();
    let ok = inputs.iter().all(|t| t.dtype() == DType::F32)
        && len.num_dims() == 1
        && inputs[1..4].iter().all(|t| t.shape() == len)
        && inputs[4..].iter().all(|t| t.shape().num_dims() == 1 && t.shape()[0] == 1);
    if !ok {
        return Err(inputs);
    }
    // As Burn's scalar ops: the scalar computed in f64, then taken as the tensor's f32; the
    // bias corrections as burn-optim computes them, in f32.
    let decay = if set.weight_decay == 0.0 { 1.0 } else { 1.0 - set.lr * set.weight_decay };
    let (b1, b2) = (set.beta1 as f32, set.beta2 as f32);
    let consts = kernels::AdamW {
        consts: [
            b1,
            (1.0 - set.beta1) as f32,
            b2,
            (1.0 - set.beta2) as f32,
            set.epsilon as f32,
            decay as f32,
            set.lr as f32,
            set.clip as f32,
            f32::INFINITY,
            -b1.ln(),
            -b2.ln(),
            -b1.powi(set.step),
            -b2.powi(set.step),
            1.0 - b1.powi(set.step),
            1.0 - b2.powi(set.step),
        ],
    };
    let op = Op { name: "adamw", bindings: 12, shared: 0, launch: Launchers::of(kernels::adamw, kernels::adamw) };
    let one = Shape::new([1]);
    op.run(inputs, [len.clone(), len.clone(), len, one], consts)
}

/// Frees `tensors` in one operation of Burn's fusion stream where dropping them queues one drop
/// operation each (the optimizer's views of last step's parameters). A tensor held elsewhere
/// too is only read; off a CubeCL device the tensors are dropped as usual.
pub fn release(tensors: Vec<DispatchTensor>) {
    let op = Op { name: "release", bindings: 0, shared: 0, launch: Launchers::of(kernels::release, kernels::release) };
    drop(op.run_typed(tensors, Vec::new(), ()));
}

/// One 1-D buffer of `len` elements with each part's elements (row-major, any rank) written at
/// its offset (offsets ascending, parts not overlapping) and zeros elsewhere: the optimizer's
/// flat gradient, in one launch per eight parts where writing each part into a zeroed buffer
/// takes one per part. Parts keep their shapes: flattening each first would queue one more
/// operation per part in Burn's fusion stream. Declined, the parts come back as they were.
pub fn assemble(
    parts: Vec<(usize, DispatchTensor)>,
    len: usize,
) -> Result<DispatchTensor, Vec<(usize, DispatchTensor)>> {
    let numel = |t: &DispatchTensor| t.shape().num_elements();
    let ordered = parts.windows(2).all(|w| w[0].0 + numel(&w[0].1) <= w[1].0);
    let fits = parts.last().is_some_and(|(at, t)| at + numel(t) <= len);
    if !ordered || !fits {
        return Err(parts);
    }
    let offsets: Vec<usize> = parts.iter().map(|(at, _)| *at).collect();
    let layout = kernels::Layout { offsets: offsets.clone(), len };
    let tensors: Vec<DispatchTensor> = parts.into_iter().map(|(_, t)| t).collect();
    let bindings = kernels::GROUP as u32 + 1;
    let op = Op { name: "assemble", bindings, shared: 0, launch: Launchers::of(kernels::assemble, kernels::assemble) };
    match op.run_vec(tensors, vec![Shape::new([len])], layout) {
        Ok(flat) => {
            let [flat] = exactly(flat);
            Ok(flat)
        }
        Err(tensors) => Err(offsets.into_iter().zip(tensors).collect()),
    }
}

/// One op: its name (in warnings and the fusion stream), the storage buffers a launch of its
/// kernels binds, and its launcher for each CubeCL runtime `Dispatch` is built with.
struct Op<P> {
    name: &'static str,
    bindings: u32,
    /// Shared memory per cube its kernels need beyond [`kernels::MIN_SHARED_BYTES`], in bytes.
    shared: usize,
    launch: Launchers<P>,
}

struct Launchers<P> {
    wgpu: fusion::Launch<cubecl::wgpu::WgpuRuntime, P>,
    cuda: fusion::Launch<cubecl::cuda::CudaRuntime, P>,
}

impl<P> Launchers<P> {
    /// The same generic launcher, instantiated per runtime (pass it twice).
    fn of(
        wgpu: fusion::Launch<cubecl::wgpu::WgpuRuntime, P>,
        cuda: fusion::Launch<cubecl::cuda::CudaRuntime, P>,
    ) -> Self {
        Self { wgpu, cuda }
    }
}

impl<P: fusion::Params> Op<P> {
    /// Runs the op as a fusion custom op when every input is a float tensor of one CubeCL
    /// device, of one dtype the kernels can run on there; gives the inputs back otherwise. `O`
    /// outputs of `shapes`, in the inputs' dtype.
    fn run<const N: usize, const O: usize>(
        &self,
        inputs: [DispatchTensor; N],
        shapes: [Shape; O],
        params: P,
    ) -> Result<[DispatchTensor; O], [DispatchTensor; N]> {
        Ok(exactly(self.run_vec(inputs, shapes.into(), params)?))
    }

    /// [`Op::run`] with any number of inputs, and as many outputs as `shapes`.
    fn run_vec<I: Inputs>(&self, inputs: I, shapes: Vec<Shape>, params: P) -> Result<Vec<DispatchTensor>, I> {
        let Some(dtype) = inputs.as_ref().first().map(|t| t.dtype()) else { return Err(inputs) };
        if inputs.as_ref().iter().any(|t| t.dtype() != dtype) {
            return Err(inputs);
        }
        self.run_typed(inputs, shapes.into_iter().map(|s| (s, dtype)).collect(), params)
    }

    /// [`Op::run_vec`] for inputs of more than one dtype, with each output's shape and dtype.
    ///
    /// The inputs are consumed: one this call holds the only handle to is freed by the op
    /// itself, where a borrowed one would cost a later drop operation in the fusion stream.
    fn run_typed<I: Inputs>(
        &self,
        inputs: I,
        outputs: Vec<(Shape, DType)>,
        params: P,
    ) -> Result<Vec<DispatchTensor>, I> {
        if !enabled() || inputs.as_ref().is_empty() {
            return Err(inputs);
        }
        if self.runs_on::<cubecl::wgpu::WgpuRuntime>(inputs.as_ref()) {
            return Ok(self.queue(inputs, outputs, self.launch.wgpu, params));
        }
        if self.runs_on::<cubecl::cuda::CudaRuntime>(inputs.as_ref()) {
            return Ok(self.queue(inputs, outputs, self.launch.cuda, params));
        }
        Err(inputs)
    }

    /// Queues the op on `inputs`, every one a fusion tensor of runtime `R` ([`Op::runs_on`]).
    fn queue<R: Runtime, I: Inputs>(
        &self,
        inputs: I,
        outputs: Vec<(Shape, DType)>,
        launch: fusion::Launch<R, P>,
        params: P,
    ) -> Vec<DispatchTensor> {
        let mut props = None;
        let tensors = inputs
            .into_iter()
            .map(|t| {
                let (kind, p) = t.into_kind();
                props.get_or_insert(p);
                R::take(kind).unwrap_or_else(|| unreachable!("every input was checked to be an {} tensor", R::NAME))
            })
            .collect();
        let props = props.unwrap_or_else(|| unreachable!("`run_typed` has an input"));
        let results = fusion::register(self.name, tensors, outputs, launch, params);
        results.into_iter().map(|t| props.wrap(R::give(t))).collect()
    }

    /// Whether every one of `inputs` is a fusion tensor of runtime `R`, all on one device that
    /// can run the op on their dtypes.
    fn runs_on<R: Runtime>(&self, inputs: &[DispatchTensor]) -> bool {
        let Some(tensors) = inputs.iter().map(|t| R::find(t.kind())).collect::<Option<Vec<_>>>() else { return false };
        let first = tensors[0];
        if tensors.iter().any(|t| t.client.device() != first.client.device()) {
            return false;
        }
        let device = <burn::Dispatch as burn::tensor::ops::FloatTensorOps<burn::Dispatch>>::float_device(&inputs[0]);
        let client = R::client(first.client.device());
        let mut dtypes: Vec<DType> = Vec::new();
        for t in inputs {
            if !dtypes.contains(&t.dtype()) {
                dtypes.push(t.dtype());
            }
        }
        dtypes.iter().all(|&dtype| match runnable(client.properties(), dtype, self.bindings, self.shared) {
            Ok(()) => check::verdict(&device, dtype).is_ok(),
            Err(why) => {
                warn_once(self.name, &why);
                false
            }
        })
    }
}

/// What an op takes its inputs as: a list it can read, and then consume.
trait Inputs: AsRef<[DispatchTensor]> + IntoIterator<Item = DispatchTensor> {}
impl<I: AsRef<[DispatchTensor]> + IntoIterator<Item = DispatchTensor>> Inputs for I {}

/// `O` outputs as an array (an op registers exactly as many as it was given shapes).
fn exactly<const O: usize>(outputs: Vec<DispatchTensor>) -> [DispatchTensor; O] {
    outputs.try_into().unwrap_or_else(|_| unreachable!("one output per shape"))
}

/// A CubeCL runtime behind a `Dispatch` handle: how its fusion tensor is found in, taken out of
/// and put into a handle's backend tensor.
trait Runtime: CubeRuntime {
    /// The backend's name, for messages.
    const NAME: &'static str;
    fn find(kind: &DispatchTensorKind) -> Option<&FusionTensor<FusionCubeRuntime<Self>>>;
    fn take(kind: DispatchTensorKind) -> Option<FusionTensor<FusionCubeRuntime<Self>>>;
    fn give(t: FusionTensor<FusionCubeRuntime<Self>>) -> DispatchTensorKind;
}

impl Runtime for cubecl::wgpu::WgpuRuntime {
    const NAME: &'static str = "WGPU";
    fn find(kind: &DispatchTensorKind) -> Option<&FusionTensor<FusionCubeRuntime<Self>>> {
        match kind {
            DispatchTensorKind::Wgpu(BackendTensor::Float(t)) => Some(t),
            _ => None,
        }
    }
    fn take(kind: DispatchTensorKind) -> Option<FusionTensor<FusionCubeRuntime<Self>>> {
        match kind {
            DispatchTensorKind::Wgpu(BackendTensor::Float(t)) => Some(t),
            _ => None,
        }
    }
    fn give(t: FusionTensor<FusionCubeRuntime<Self>>) -> DispatchTensorKind {
        DispatchTensorKind::Wgpu(BackendTensor::Float(t))
    }
}

impl Runtime for cubecl::cuda::CudaRuntime {
    const NAME: &'static str = "CUDA";
    fn find(kind: &DispatchTensorKind) -> Option<&FusionTensor<FusionCubeRuntime<Self>>> {
        match kind {
            DispatchTensorKind::Cuda(BackendTensor::Float(t)) => Some(t),
            _ => None,
        }
    }
    fn take(kind: DispatchTensorKind) -> Option<FusionTensor<FusionCubeRuntime<Self>>> {
        match kind {
            DispatchTensorKind::Cuda(BackendTensor::Float(t)) => Some(t),
            _ => None,
        }
    }
    fn give(t: FusionTensor<FusionCubeRuntime<Self>>) -> DispatchTensorKind {
        DispatchTensorKind::Cuda(BackendTensor::Float(t))
    }
}

/// Whether a device with `props` can run a kernel on `dtype` that binds `bindings` storage
/// buffers; the reason when it cannot.
fn runnable(props: &cubecl::ir::DeviceProperties, dtype: DType, bindings: u32, shared: usize) -> Result<(), String> {
    if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16) {
        return Err(format!("no kernel for {dtype:?} tensors"));
    }
    let storage: cubecl::ir::StorageType = dtype.into();
    if !props.supports_type(storage) {
        return Err(format!("the device has no {dtype:?} type in kernels"));
    }
    let hw = &props.hardware;
    if hw.max_units_per_cube < kernels::MIN_UNITS_PER_CUBE {
        return Err(format!(
            "the device runs {} units per cube, the kernels need {}",
            hw.max_units_per_cube,
            kernels::MIN_UNITS_PER_CUBE
        ));
    }
    let need = kernels::MIN_SHARED_BYTES.max(shared);
    if hw.max_shared_memory_size < need {
        return Err(format!(
            "the device has {} bytes of shared memory per cube, the kernel needs {need}",
            hw.max_shared_memory_size
        ));
    }
    // One more for the metadata (shapes and strides) cubecl binds beside the tensors.
    if hw.max_bindings < bindings + 1 {
        return Err(format!(
            "the device binds {} buffers per kernel, this one needs {}",
            hw.max_bindings,
            bindings + 1
        ));
    }
    Ok(())
}

/// Whether `x` is a fusion tensor of runtime `R` on a device that can run the kernels on
/// `dtype` at all (the per-op needs aside).
fn device_runs<R: Runtime>(x: &DispatchTensor, dtype: DType) -> bool {
    R::find(x.kind()).is_some_and(|t| runnable(R::client(t.client.device()).properties(), dtype, 0, 0).is_ok())
}

/// Prints "warning: ..." the first time `op` cannot run for `why`.
fn warn_once(op: &str, why: &str) {
    static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let key = format!("{op}: {why}");
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if !seen.contains(&key) {
        eprintln!("warning: GPU kernel {op} runs as reference tensor ops: {why}");
        seen.push(key);
    }
}

#[cfg(test)]
mod tests {
    use crate::kernels::row_stride;

    /// A kernel reads a tensor `[.., C]` in place as rows when its leading axes collapse into one
    /// (contiguous, or with its rows padded as CUDA's allocator lays out a new tensor whose rows
    /// are not a multiple of 512 bytes); a transposed leading axis does not, and is copied.
    #[test]
    fn row_stride_reads_contiguous_and_padded_rows_and_refuses_transposed_leading_axes() {
        assert_eq!(row_stride(&[3, 4], &[4, 1]), Some(4));
        assert_eq!(row_stride(&[2, 3, 4], &[12, 4, 1]), Some(4));
        // [rows, 192] f32 on CUDA: 768-byte rows padded to 1024.
        assert_eq!(row_stride(&[64, 192], &[256, 1]), Some(256));
        assert_eq!(row_stride(&[8, 16, 192], &[4096, 256, 1]), Some(256));
        // A 2-D tensor is rows whatever its strides (a transposed matrix too).
        assert_eq!(row_stride(&[4, 3], &[1, 4]), Some(1));
        // Axes of one element have no say; a single row steps by its width.
        assert_eq!(row_stride(&[2, 1, 4], &[9, 77, 1]), Some(9));
        assert_eq!(row_stride(&[1, 1, 5], &[3, 3, 1]), Some(5));
        assert_eq!(row_stride(&[7], &[1]), Some(7));
        // [B, T, C] seen through a transpose of [B, C, T]: the frames do not follow the samples.
        assert_eq!(row_stride(&[2, 5, 3], &[15, 1, 5]), None);
        // Padded rows whose outer axis skips more than its rows span.
        assert_eq!(row_stride(&[2, 3, 4], &[40, 8, 1]), None);
        assert_eq!(row_stride(&[], &[]), None);
    }

    /// cubecl's persistent caches key a compiled kernel by its type, launch settings and
    /// compile-time arguments, not its code: every launched kernel takes the hash of its source
    /// file (`kernels::REVISION`) as one, so a changed kernel is compiled again, never served
    /// from an older build's PTX or SPIR-V.
    #[test]
    fn every_launched_kernel_takes_the_source_revision() {
        let source = include_str!("kernels.rs");
        let mut kernels = 0;
        for (at, _) in source.match_indices("#[cube(launch)]") {
            let rest = &source[at..];
            let name = rest.split("fn ").nth(1).and_then(|s| s.split(['<', '(']).next()).unwrap_or("?");
            let signature = &rest[..rest.find(") {").expect("a kernel's signature ends with `) {`")];
            assert!(
                signature.contains("#[comptime] _revision: u64"),
                "kernel `{name}` lacks `#[comptime] _revision: u64`"
            );
            kernels += 1;
        }
        assert!(kernels >= 20, "found {kernels} launched kernels in kernels.rs");
    }
}
