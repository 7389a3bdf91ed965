//! The CubeCL kernels and their launchers on CubeCL tensors. One kernel per op, so each op is
//! one launch where its formulation in Burn tensor ops (`models::kernels::reference`) is several:
//! padding, concatenation, transposes, reductions and a `cat` of the statistics.
//!
//! Inputs may be strided (every read goes through the input's strides); outputs are new
//! contiguous tensors. Sums accumulate in f32 whatever the element type, so f16 and bf16 inputs
//! lose no precision in the reductions.

use burn::tensor::{DType, Shape};
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeRuntime;
use burn_dispatch::cube_ops::CubeFloatOps;
use cubecl::prelude::*;
use cubecl::zspace::metadata::Metadata;
use cubecl::{calculate_cube_count_elemwise, CubeCount, CubeDim};

/// Channels per cube in the per-channel reductions (adjacent units read adjacent channels, so
/// a row's reads coalesce).
pub(crate) const CHANNEL_LANES: u32 = 32;
/// Row lanes per cube in the per-channel reductions: each unit sums every `lanes`-th row, then
/// the cube adds the lanes in shared memory. As many as the device runs units per cube, between
/// these bounds ([`row_lanes`]).
const MIN_ROW_LANES: u32 = 8;
const MAX_ROW_LANES: u32 = 32;
/// Units per cube the reduction kernels need at least (WebGPU's default limit is 256).
pub(crate) const MIN_UNITS_PER_CUBE: u32 = CHANNEL_LANES * MIN_ROW_LANES;
/// Shared memory the reduction kernels need at least, in bytes (two f32 per unit).
pub(crate) const MIN_SHARED_BYTES: usize = 2 * MIN_UNITS_PER_CUBE as usize * 4;

/// A hash of this file's source, a compile-time argument of every kernel: cubecl's persistent
/// CUDA cache keys a compiled kernel by its name and arguments, not its code, so a kernel changed
/// in a new SignFlow build gets a new key instead of the old build's binary.
const REVISION: u64 = fnv1a(include_bytes!("kernels.rs"));

const fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    let mut i = 0;
    while i < bytes.len() {
        hash = (hash ^ bytes[i] as u64).wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    hash
}

/// The row lanes of the reduction kernels on `client`'s device: the most its cubes hold (32 on
/// CUDA, where a cube runs 1,024 units; 8 where WebGPU's 256 is the limit).
fn row_lanes<R: CubeRuntime>(client: &cubecl::client::ComputeClient<R>) -> u32 {
    let hw = &client.properties().hardware;
    let by_units = hw.max_units_per_cube / CHANNEL_LANES;
    let by_shared = (hw.max_shared_memory_size / (2 * CHANNEL_LANES as usize * 4)) as u32;
    by_units.min(by_shared).clamp(MIN_ROW_LANES, MAX_ROW_LANES)
}

/// The depthwise conv's taps over time for each output element of a contiguous `[B, T, C]`
/// output, with `s = K - 1 - j`: causal, `out[b, t, c] = sum_j w[c, j] * input[b, t - s, c]`
/// (the forward pass); anti-causal, `out[b, t, c] = sum_j w[c, j] * input[b, t + s, c]` (the
/// input gradient, from the output gradient). Frames outside the sequence count as zero. With
/// `silu` (causal only) the conv is over SiLU of `input`, computed as it is read.
#[cube(launch)]
fn dwconv_taps_kernel<F: Float>(
    input: &Tensor<F>,
    w: &Tensor<F>,
    out: &mut Tensor<F>,
    #[comptime] anti_causal: bool,
    #[comptime] silu: bool,
    #[comptime] _revision: u64,
    #[define(F)] _dtype: StorageType,
) {
    if ABSOLUTE_POS >= out.len() {
        terminate!();
    }
    out[ABSOLUTE_POS] = F::cast_from(dwconv_taps::<F>(input, w, out.shape(1), out.shape(2), anti_causal, silu));
}

/// The input gradient of the causal conv over SiLU of `h` ([`dwconv_taps_kernel`] with
/// `silu`): the anti-causal taps over the output gradient `g`, times SiLU's derivative at `h`
/// (`s * (1 + h * (1 - s))`, `s = sigmoid(h)`), in f32 with nothing rounded in between. `g`
/// and `h` are `[B, T, C]` (strided), `out` contiguous `[B, T, C]`.
#[cube(launch)]
fn dwconv_silu_grad_kernel<F: Float>(
    g: &Tensor<F>,
    w: &Tensor<F>,
    h: &Tensor<F>,
    out: &mut Tensor<F>,
    #[comptime] _revision: u64,
    #[define(F)] _dtype: StorageType,
) {
    if ABSOLUTE_POS >= out.len() {
        terminate!();
    }
    let (frames, channels) = (out.shape(1), out.shape(2));
    let acc = dwconv_taps::<F>(g, w, frames, channels, true, false);
    let c = ABSOLUTE_POS % channels;
    let t = (ABSOLUTE_POS / channels) % frames;
    let b = ABSOLUTE_POS / (channels * frames);
    let v = f32::cast_from(h[b * h.stride(0) + t * h.stride(1) + c * h.stride(2)]);
    out[ABSOLUTE_POS] = F::cast_from(silu_grad(v, acc));
}

/// The depthwise conv's tap sum at output element `ABSOLUTE_POS` of a contiguous `[B, T, C]`
/// output with `frames` = T and `channels` = C, over `input [B, T, C]` (strided) and `w [C, K]`,
/// in f32: causal or anti-causal as in [`dwconv_taps_kernel`]; with `silu`, the causal sum
/// takes each input through SiLU first (a conv block's inference).
#[cube]
fn dwconv_taps<F: Float>(
    input: &Tensor<F>,
    w: &Tensor<F>,
    frames: usize,
    channels: usize,
    #[comptime] anti_causal: bool,
    #[comptime] silu: bool,
) -> f32 {
    let taps = w.shape(1);
    let c = ABSOLUTE_POS % channels;
    let t = (ABSOLUTE_POS / channels) % frames;
    let b = ABSOLUTE_POS / (channels * frames);
    let base = b * input.stride(0) + c * input.stride(2);
    let mut acc = 0.0f32;
    for j in 0..taps {
        let shift = taps - 1 - j;
        let wv = f32::cast_from(w[c * w.stride(0) + j * w.stride(1)]);
        if anti_causal {
            if t + shift < frames {
                acc += wv * f32::cast_from(input[base + (t + shift) * input.stride(1)]);
            }
        } else if t >= shift {
            let mut v = f32::cast_from(input[base + (t - shift) * input.stride(1)]);
            if silu {
                v = silu_of(v);
            }
            acc += wv * v;
        }
    }
    acc
}

/// This unit's place in a per-channel reduction cube: its channel, its row lane and its column
/// (the channel within the cube's block).
#[cube]
fn reduction_unit() -> (usize, usize, usize) {
    let col = UNIT_POS_X as usize;
    (CUBE_POS_X as usize * CUBE_DIM_X as usize + col, UNIT_POS_Y as usize, col)
}

/// The sum over the cube's row lanes of column `col` of the partial sums in `partial` from
/// `base` (one per unit, lane-major).
#[cube]
fn lane_sum(partial: &SharedMemory<f32>, base: usize, col: usize) -> f32 {
    let width = CUBE_DIM_X as usize;
    let mut total = 0.0f32;
    for l in 0..CUBE_DIM_Y as usize {
        total += partial[base + l * width + col];
    }
    total
}

/// `gw[c, j] = sum over b, t of x[b, t + j + 1 - K, c] * g[b, t, c]`: one cube per
/// (channel block, tap), its row lanes summing strided rows, then added in shared memory. With
/// `silu` the conv's input is SiLU of `x`, computed as it is read.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn dwconv_weight_grad_kernel<F: Float>(
    x: &Tensor<F>,
    g: &Tensor<F>,
    gw: &mut Tensor<F>,
    #[comptime] units: u32,
    #[comptime] silu: bool,
    #[comptime] _revision: u64,
    #[define(F)] _dtype: StorageType,
) {
    let channels = x.shape(2);
    let frames = x.shape(1);
    let rows = x.shape(0) * frames;
    let taps = gw.shape(1);
    let (width, lanes) = (CUBE_DIM_X as usize, CUBE_DIM_Y as usize);
    let (c, lane, col) = reduction_unit();
    let j = CUBE_POS_Y as usize;
    let mut acc = 0.0f32;
    if c < channels {
        let mut r = lane;
        while r < rows {
            let b = r / frames;
            let t = r % frames;
            if t + j + 1 >= taps {
                let src = t + j + 1 - taps;
                let mut xv = f32::cast_from(x[b * x.stride(0) + src * x.stride(1) + c * x.stride(2)]);
                if silu {
                    xv = silu_of(xv);
                }
                acc += xv * f32::cast_from(g[b * g.stride(0) + t * g.stride(1) + c * g.stride(2)]);
            }
            r += lanes;
        }
    }
    let mut partial = SharedMemory::<f32>::new(units as usize);
    partial[lane * width + col] = acc;
    sync_cube();
    if lane == 0 && c < channels {
        gw[c * taps + j] = F::cast_from(lane_sum(&partial, 0, col));
    }
}

/// The mean and biased variance of this unit's channel over the rows of `x [N, C]`, computed by
/// the cube's row lanes in two passes (the mean, then the squared deviations from it) and added
/// in `partial` (one f32 per unit); every lane of a channel gets them.
#[cube]
fn column_mean_var<F: Float>(x: &Tensor<F>, partial: &mut SharedMemory<f32>) -> (f32, f32) {
    let rows = x.shape(0);
    let channels = x.shape(1);
    let (width, lanes) = (CUBE_DIM_X as usize, CUBE_DIM_Y as usize);
    let (c, lane, col) = reduction_unit();
    let mut sum = 0.0f32;
    if c < channels {
        let mut r = lane;
        while r < rows {
            sum += f32::cast_from(x[r * x.stride(0) + c * x.stride(1)]);
            r += lanes;
        }
    }
    partial[lane * width + col] = sum;
    sync_cube();
    let mean = lane_sum(partial, 0, col) / rows as f32;
    sync_cube();

    let mut squares = 0.0f32;
    if c < channels {
        let mut r = lane;
        while r < rows {
            let d = f32::cast_from(x[r * x.stride(0) + c * x.stride(1)]) - mean;
            squares += d * d;
            r += lanes;
        }
    }
    partial[lane * width + col] = squares;
    sync_cube();
    let var = lane_sum(partial, 0, col) / rows as f32;
    (mean, var)
}

/// Per-channel mean and biased variance of `x [N, C]` into `stats [2, C]`.
#[cube(launch)]
fn channel_stats_kernel<F: Float>(
    x: &Tensor<F>,
    stats: &mut Tensor<F>,
    #[comptime] units: u32,
    #[comptime] _revision: u64,
    #[define(F)] _dtype: StorageType,
) {
    let channels = x.shape(1);
    let (c, lane, _) = reduction_unit();
    let mut partial = SharedMemory::<f32>::new(units as usize);
    let (mean, var) = column_mean_var::<F>(x, &mut partial);
    if lane == 0 && c < channels {
        stats[c] = F::cast_from(mean);
        stats[channels + c] = F::cast_from(var);
    }
}

/// Training-mode BatchNorm of `x [N, C]` in one launch: the batch statistics (into `stats [2,
/// C]`), `y = (x - mean) / sqrt(var + eps) * gamma + beta`, and the running statistics after the
/// batch, `running * keep + batch * take` (into `new_mean`, `new_var`). Each cube owns a block
/// of channels over all rows, so no other cube's sums are needed. The activations (`F`) and the
/// parameters and statistics (`P`) may differ: half-precision activations with f32 parameters,
/// as mixed precision keeps them.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn channel_norm_train_kernel<F: Float, P: Float>(
    x: &Tensor<F>,
    gamma: &Tensor<P>,
    beta: &Tensor<P>,
    mean: &Tensor<P>,
    var: &Tensor<P>,
    y: &mut Tensor<F>,
    stats: &mut Tensor<P>,
    new_mean: &mut Tensor<P>,
    new_var: &mut Tensor<P>,
    eps: f32,
    keep: f32,
    take: f32,
    #[comptime] units: u32,
    #[comptime] _revision: u64,
    #[define(F, P)] _dtypes: [StorageType; 2],
) {
    let rows = x.shape(0);
    let channels = x.shape(1);
    let lanes = CUBE_DIM_Y as usize;
    let (c, lane, _) = reduction_unit();
    let mut partial = SharedMemory::<f32>::new(units as usize);
    let (batch_mean, batch_var) = column_mean_var::<F>(x, &mut partial);
    if c < channels {
        let scale = f32::cast_from(gamma[c * gamma.stride(0)]) / f32::sqrt(batch_var + eps);
        let shift = f32::cast_from(beta[c * beta.stride(0)]);
        let mut r = lane;
        while r < rows {
            let xv = f32::cast_from(x[r * x.stride(0) + c * x.stride(1)]);
            y[r * channels + c] = F::cast_from((xv - batch_mean) * scale + shift);
            r += lanes;
        }
        if lane == 0 {
            stats[c] = P::cast_from(batch_mean);
            stats[channels + c] = P::cast_from(batch_var);
            new_mean[c] = P::cast_from(f32::cast_from(mean[c * mean.stride(0)]) * keep + batch_mean * take);
            new_var[c] = P::cast_from(f32::cast_from(var[c * var.stride(0)]) * keep + batch_var * take);
        }
    }
}

/// BatchNorm's parameters beside a training batch: epsilon and the running-statistics weights
/// `(1 - momentum, momentum)`.
#[derive(Clone, Debug)]
pub(crate) struct NormSettings {
    /// Added to the variance.
    pub eps: f32,
    /// `1 - momentum`, `momentum`.
    pub weights: [f32; 2],
}

/// Training-mode BatchNorm of `x [.., C]` (its leading axes are the rows) with `gamma`, `beta`
/// and the running `mean`, `var`: the output (`x`'s shape and dtype), the batch statistics `[2,
/// C]` and the new running mean and variance (in the parameters' dtype).
pub(crate) fn channel_norm_train<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, set: &NormSettings) -> Vec<CubeTensor<R>> {
    let [x, gamma, beta, mean, var] = take(inputs);
    let y = empty(&x, x.meta.shape().clone());
    let x = as_rows(x);
    let [_, channels] = dims::<R, 2>(&x);
    let stats = empty(&gamma, Shape::new([2, channels]));
    let new_mean = empty(&gamma, Shape::new([channels]));
    let new_var = empty(&gamma, Shape::new([channels]));
    let (count, cube_dim, units) = per_channel(&y.client, channels, 1);
    let dtypes = [storage(x.dtype), storage(gamma.dtype)];
    channel_norm_train_kernel::launch::<R>(
        &y.client,
        count,
        cube_dim,
        x.into_tensor_arg(),
        gamma.into_tensor_arg(),
        beta.into_tensor_arg(),
        mean.into_tensor_arg(),
        var.into_tensor_arg(),
        y.clone().into_tensor_arg(),
        stats.clone().into_tensor_arg(),
        new_mean.clone().into_tensor_arg(),
        new_var.clone().into_tensor_arg(),
        set.eps,
        set.weights[0],
        set.weights[1],
        units,
        REVISION,
        dtypes,
    );
    vec![y, stats, new_mean, new_var]
}

/// Training-mode BatchNorm backward for `x [N, C]` with `stats [2, C]` and `gamma [C]`: the
/// sums `sum_g` and `sum_gx = sum(g * xhat)` per channel (one pass, added in shared memory), then
/// `gx = (g - sum_g / N - xhat * sum_gx / N) * gamma / sqrt(var + eps)` in a second pass;
/// `ggamma = sum_gx`, `gbeta = sum_g`. Activations and their gradients in `F`, the statistics,
/// `gamma` and its and `beta`'s gradients in `P` (as [`channel_norm_train_kernel`]).
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn channel_norm_backward_kernel<F: Float, P: Float>(
    x: &Tensor<F>,
    stats: &Tensor<P>,
    gamma: &Tensor<P>,
    g: &Tensor<F>,
    gx: &mut Tensor<F>,
    ggamma: &mut Tensor<P>,
    gbeta: &mut Tensor<P>,
    eps: f32,
    #[comptime] units: u32,
    #[comptime] _revision: u64,
    #[define(F, P)] _dtypes: [StorageType; 2],
) {
    let rows = x.shape(0);
    let channels = x.shape(1);
    let (width, lanes) = (CUBE_DIM_X as usize, CUBE_DIM_Y as usize);
    let (c, lane, col) = reduction_unit();
    let half = width * lanes;
    let mut partial = SharedMemory::<f32>::new(2 * units as usize);

    let mut mean = 0.0f32;
    let mut inv = 0.0f32;
    let mut scale = 0.0f32;
    let mut sum_g = 0.0f32;
    let mut sum_gx = 0.0f32;
    if c < channels {
        mean = f32::cast_from(stats[c * stats.stride(1)]);
        let var = f32::cast_from(stats[stats.stride(0) + c * stats.stride(1)]);
        inv = 1.0f32 / f32::sqrt(var + eps);
        scale = inv * f32::cast_from(gamma[c * gamma.stride(0)]);
        let mut r = lane;
        while r < rows {
            let gv = f32::cast_from(g[r * g.stride(0) + c * g.stride(1)]);
            let xhat = (f32::cast_from(x[r * x.stride(0) + c * x.stride(1)]) - mean) * inv;
            sum_g += gv;
            sum_gx += gv * xhat;
            r += lanes;
        }
    }
    partial[lane * width + col] = sum_g;
    partial[half + lane * width + col] = sum_gx;
    sync_cube();
    let total_g = lane_sum(&partial, 0, col);
    let total_gx = lane_sum(&partial, half, col);
    if c < channels {
        let n = rows as f32;
        let mean_g = total_g / n;
        let mean_gx = total_gx / n;
        let mut r = lane;
        while r < rows {
            let gv = f32::cast_from(g[r * g.stride(0) + c * g.stride(1)]);
            let xhat = (f32::cast_from(x[r * x.stride(0) + c * x.stride(1)]) - mean) * inv;
            gx[r * channels + c] = F::cast_from((gv - mean_g - xhat * mean_gx) * scale);
            r += lanes;
        }
        if lane == 0 {
            ggamma[c] = P::cast_from(total_gx);
            gbeta[c] = P::cast_from(total_g);
        }
    }
}

/// BatchNorm's running statistics after a batch: `running * keep + batch * take` for the mean and
/// the variance, the batch's from `stats [2, C]`.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn running_stats_kernel<F: Float>(
    stats: &Tensor<F>,
    mean: &Tensor<F>,
    var: &Tensor<F>,
    new_mean: &mut Tensor<F>,
    new_var: &mut Tensor<F>,
    keep: f32,
    take: f32,
    #[comptime] _revision: u64,
    #[define(F)] _dtype: StorageType,
) {
    let c = ABSOLUTE_POS;
    if c >= new_mean.len() {
        terminate!();
    }
    let batch_mean = f32::cast_from(stats[c * stats.stride(1)]);
    let batch_var = f32::cast_from(stats[stats.stride(0) + c * stats.stride(1)]);
    new_mean[c] = F::cast_from(f32::cast_from(mean[c * mean.stride(0)]) * keep + batch_mean * take);
    new_var[c] = F::cast_from(f32::cast_from(var[c * var.stride(0)]) * keep + batch_var * take);
}

/// BatchNorm's running mean and variance after a batch with statistics `stats`; `weights` is
/// `(1 - momentum, momentum)`.
pub(crate) fn running_stats<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, weights: &[f32; 2]) -> Vec<CubeTensor<R>> {
    let [stats, mean, var] = take(inputs);
    let channels = mean.meta.shape()[0];
    let new_mean = empty(&mean, Shape::new([channels]));
    let new_var = empty(&mean, Shape::new([channels]));
    let cube_dim = CubeDim::new(&mean.client, channels);
    let count = calculate_cube_count_elemwise(&mean.client, channels, cube_dim);
    let dtype = storage(mean.dtype);
    running_stats_kernel::launch::<R>(
        &new_mean.client,
        count,
        cube_dim,
        stats.into_tensor_arg(),
        mean.into_tensor_arg(),
        var.into_tensor_arg(),
        new_mean.clone().into_tensor_arg(),
        new_var.clone().into_tensor_arg(),
        weights[0],
        weights[1],
        REVISION,
        dtype,
    );
    vec![new_mean, new_var]
}

/// Inference-mode BatchNorm of `x [N, C]` with its running statistics, one unit per element:
/// `y = (x - mean) / sqrt(var + eps) * gamma + beta` in f32, in the order of Burn's `BatchNorm`
/// inference formulation. Activations (`F`) and parameters and statistics (`P`) may differ, as
/// in [`channel_norm_train_kernel`].
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn channel_norm_eval_kernel<F: Float, P: Float>(
    x: &Tensor<F>,
    gamma: &Tensor<P>,
    beta: &Tensor<P>,
    mean: &Tensor<P>,
    var: &Tensor<P>,
    y: &mut Tensor<F>,
    eps: f32,
    #[comptime] _revision: u64,
    #[define(F, P)] _dtypes: [StorageType; 2],
) {
    if ABSOLUTE_POS >= y.len() {
        terminate!();
    }
    let channels = x.shape(1);
    let r = ABSOLUTE_POS / channels;
    let c = ABSOLUTE_POS % channels;
    let xv = f32::cast_from(x[r * x.stride(0) + c * x.stride(1)]);
    y[ABSOLUTE_POS] = F::cast_from(norm_eval::<P>(xv, c, gamma, beta, mean, var, eps));
}

/// Inference BatchNorm of the value `v` of channel `c`, in f32: `(v - mean) / sqrt(var + eps) *
/// gamma + beta`, Burn's order of operations.
#[cube]
fn norm_eval<P: Float>(
    v: f32,
    c: usize,
    gamma: &Tensor<P>,
    beta: &Tensor<P>,
    mean: &Tensor<P>,
    var: &Tensor<P>,
    eps: f32,
) -> f32 {
    let m = f32::cast_from(mean[c * mean.stride(0)]);
    let std = f32::sqrt(f32::cast_from(var[c * var.stride(0)]) + eps);
    let g = f32::cast_from(gamma[c * gamma.stride(0)]);
    let b = f32::cast_from(beta[c * beta.stride(0)]);
    (v - m) / std * g + b
}

/// Inference-mode BatchNorm of `x [.., C]` (its leading axes are the rows) with `gamma`, `beta`
/// and the running `mean`, `var` (`[C]`, in the parameters' dtype): the output in `x`'s shape
/// and dtype; `eps` is added to the variance.
pub(crate) fn channel_norm_eval<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, eps: &f32) -> Vec<CubeTensor<R>> {
    let [x, gamma, beta, mean, var] = take(inputs);
    let y = empty(&x, x.meta.shape().clone());
    let x = as_rows(x);
    let (count, cube_dim) = units_for(&y.client, y.meta.shape().num_elements());
    let dtypes = [storage(x.dtype), storage(gamma.dtype)];
    channel_norm_eval_kernel::launch::<R>(
        &y.client,
        count,
        cube_dim,
        x.into_tensor_arg(),
        gamma.into_tensor_arg(),
        beta.into_tensor_arg(),
        mean.into_tensor_arg(),
        var.into_tensor_arg(),
        y.clone().into_tensor_arg(),
        *eps,
        REVISION,
        dtypes,
    );
    vec![y]
}

/// A conv block's middle in inference, `y[b, t, c] = norm_c(sum_j w[c, j] * silu(h[b, t - s,
/// c]))` with `s = K - 1 - j` (causal: frames before the start are zero) and `norm_c` the
/// inference BatchNorm of [`channel_norm_eval_kernel`]: [`silu_kernel`], the causal
/// [`dwconv_taps_kernel`] and the norm in one pass over `h [B, T, C]` (strided), in f32
/// throughout (neither the SiLU nor the conv's sum is rounded to `F` in between). `w` is `[C,
/// K]`; `y` is contiguous `[B, T, C]`.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn conv_block_eval_kernel<F: Float, P: Float>(
    h: &Tensor<F>,
    w: &Tensor<F>,
    gamma: &Tensor<P>,
    beta: &Tensor<P>,
    mean: &Tensor<P>,
    var: &Tensor<P>,
    y: &mut Tensor<F>,
    eps: f32,
    #[comptime] _revision: u64,
    #[define(F, P)] _dtypes: [StorageType; 2],
) {
    if ABSOLUTE_POS >= y.len() {
        terminate!();
    }
    let channels = y.shape(2);
    let acc = dwconv_taps::<F>(h, w, y.shape(1), channels, false, true);
    y[ABSOLUTE_POS] = F::cast_from(norm_eval::<P>(acc, ABSOLUTE_POS % channels, gamma, beta, mean, var, eps));
}

/// A conv block's SiLU, causal depthwise conv and inference BatchNorm in one launch: `h [B * T,
/// C]` (`frames` = T per sample), the depthwise weight `w [C, 1, K]` in `h`'s dtype, then
/// `gamma`, `beta` and the running `mean`, `var` (`[C]`, in the parameters' dtype); `eps` is
/// added to the variance. The output has `h`'s shape and dtype.
pub(crate) fn conv_block_eval<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, set: &(usize, f32)) -> Vec<CubeTensor<R>> {
    let [h, w, gamma, beta, mean, var] = take(inputs);
    let (frames, eps) = *set;
    let (h, w) = (as_frames(h, frames), as_taps(w));
    let y = empty(&h, Shape::new(dims::<R, 3>(&h)));
    let (count, cube_dim) = elementwise(&y);
    let dtypes = [storage(h.dtype), storage(gamma.dtype)];
    conv_block_eval_kernel::launch::<R>(
        &y.client,
        count,
        cube_dim,
        h.into_tensor_arg(),
        w.into_tensor_arg(),
        gamma.into_tensor_arg(),
        beta.into_tensor_arg(),
        mean.into_tensor_arg(),
        var.into_tensor_arg(),
        y.clone().into_tensor_arg(),
        eps,
        REVISION,
        dtypes,
    );
    vec![as_rows(y)]
}

/// Channels the ECA kernels hold per sample in shared memory at most (four f32 arrays of this
/// many, 16 KiB: WebGPU's guaranteed shared memory per cube).
pub(crate) const ECA_MAX_CHANNELS: usize = 1024;

/// Shared memory the ECA backward kernel needs for `channels` channels, in bytes.
pub(crate) fn eca_shared_bytes(channels: usize) -> usize {
    4 * eca_capacity(channels) as usize * 4
}

/// The per-sample arrays' length in the ECA kernels: `channels` rounded up to a power of two
/// (a compile-time size; one compiled kernel per power of two).
fn eca_capacity(channels: usize) -> u32 {
    channels.next_power_of_two().max(32) as u32
}

/// `sum_t weights[b, 0, t] * x[b, t, c]` for each channel `c` of sample `b` handled by this
/// unit, into `pooled`; with `grad`, also `sum_t grad[b, t, c] * x[b, t, c]` into `dots`.
#[cube]
fn eca_pool<F: Float>(
    x: &Tensor<F>,
    weights: &Tensor<F>,
    grad: &Tensor<F>,
    pooled: &mut SharedMemory<f32>,
    dots: &mut SharedMemory<f32>,
    #[comptime] with_grad: bool,
) {
    let b = CUBE_POS_X as usize;
    let (frames, channels) = (x.shape(1), x.shape(2));
    let mut c = UNIT_POS_X as usize;
    while c < channels {
        let mut sum = 0.0f32;
        let mut dot = 0.0f32;
        for t in 0..frames {
            let xv = f32::cast_from(x[b * x.stride(0) + t * x.stride(1) + c * x.stride(2)]);
            sum += f32::cast_from(weights[b * weights.stride(0) + t * weights.stride(2)]) * xv;
            if with_grad {
                dot += f32::cast_from(grad[b * grad.stride(0) + t * grad.stride(1) + c * grad.stride(2)]) * xv;
            }
        }
        pooled[c] = sum;
        if with_grad {
            dots[c] = dot;
        }
        c += CUBE_DIM_X as usize;
    }
}

/// The ECA gate's pre-activation at channel `c`: the `K`-tap convolution of `pooled` over the
/// channel axis, zero-padded by `K / 2` on both sides (`sum_j w[j] * pooled[c + j - K / 2]`).
#[cube]
fn eca_conv<F: Float>(pooled: &SharedMemory<f32>, w: &Tensor<F>, c: usize, channels: usize) -> f32 {
    let taps = w.shape(2);
    let pad = taps / 2;
    let mut z = 0.0f32;
    for j in 0..taps {
        let at = c + j;
        if at >= pad && at - pad < channels {
            z += f32::cast_from(w[j * w.stride(2)]) * pooled[at - pad];
        }
    }
    z
}

#[cube]
fn sigmoid(z: f32) -> f32 {
    1.0f32 / (1.0f32 + f32::exp(0.0f32 - z))
}

/// SiLU, `v * sigmoid(v)`.
#[cube]
fn silu_of(v: f32) -> f32 {
    v * sigmoid(v)
}

/// The gradient `g` through SiLU at `v`: `g * s * (1 + v * (1 - s))` with `s = sigmoid(v)`.
#[cube]
fn silu_grad(v: f32, g: f32) -> f32 {
    let s = sigmoid(v);
    g * s * (1.0f32 + v * (1.0f32 - s))
}

/// Where element `pos` (in row-major order) of a `[rows, C]` tensor is, through its strides.
#[cube]
fn row_major<F: Float>(t: &Tensor<F>, pos: usize) -> usize {
    let width = t.shape(1);
    (pos / width) * t.stride(0) + (pos % width) * t.stride(1)
}

/// SiLU, `x * sigmoid(x)`, of each element of `x [rows, C]` (in f32) into a contiguous `out`.
#[cube(launch)]
fn silu_kernel<F: Float>(
    x: &Tensor<F>,
    out: &mut Tensor<F>,
    #[comptime] _revision: u64,
    #[define(F)] _dtype: StorageType,
) {
    if ABSOLUTE_POS >= out.len() {
        terminate!();
    }
    let v = f32::cast_from(x[row_major(x, ABSOLUTE_POS)]);
    out[ABSOLUTE_POS] = F::cast_from(silu_of(v));
}

/// SiLU's gradient, `grad * s * (1 + x * (1 - s))` with `s = sigmoid(x)`, of `x` and `grad`
/// (`[rows, C]` each, in f32) into a contiguous `out`.
#[cube(launch)]
fn silu_backward_kernel<F: Float>(
    x: &Tensor<F>,
    grad: &Tensor<F>,
    out: &mut Tensor<F>,
    #[comptime] _revision: u64,
    #[define(F)] _dtype: StorageType,
) {
    if ABSOLUTE_POS >= out.len() {
        terminate!();
    }
    let v = f32::cast_from(x[row_major(x, ABSOLUTE_POS)]);
    out[ABSOLUTE_POS] = F::cast_from(silu_grad(v, f32::cast_from(grad[row_major(grad, ABSOLUTE_POS)])));
}

/// One AdamW step over flat f32 buffers, each element on its own unit, that first decides on
/// the device, from the step's `loss[0]` and squared gradient norm `norm2[0]` (both scaled by
/// the loss scale `scale[0]`), whether it applies and by what the gradient is multiplied: it
/// applies where `|loss| + norm2 < limit` (infinity: false for a NaN or an infinity in either);
/// the factor is `clip / (norm + 1e-6)` where the unscaled norm is above `clip` (0: no
/// clipping), else 1, over the scale. The bias corrections leave out the `skips[0]` unsettled
/// skipped steps before this one (the host's corrections while there are none). Then the moments and the
/// decayed parameter minus the step, in the order of the tensor-op chain it replaces
/// (`trainer::optim`); a skipped step writes every input back as it was (a selection: a
/// non-finite step leaks nothing) and `new_skips[0]` counts it.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn adamw_kernel(
    p: &Tensor<f32>,
    g: &Tensor<f32>,
    m: &Tensor<f32>,
    v: &Tensor<f32>,
    loss: &Tensor<f32>,
    norm2: &Tensor<f32>,
    scale: &Tensor<f32>,
    skips: &Tensor<f32>,
    new_p: &mut Tensor<f32>,
    new_m: &mut Tensor<f32>,
    new_v: &mut Tensor<f32>,
    new_skips: &mut Tensor<f32>,
    consts: Sequence<f32>,
    #[comptime] _revision: u64,
) {
    let i = ABSOLUTE_POS;
    if i >= new_p.len() {
        terminate!();
    }
    let beta1 = consts[0];
    let take1 = consts[1];
    let beta2 = consts[2];
    let take2 = consts[3];
    let epsilon = consts[4];
    let decay = consts[5];
    let lr = consts[6];
    let clip = consts[7];
    let limit = consts[8];
    let n2 = norm2[0];
    let s = scale[0];
    let applies = f32::abs(loss[0]) + n2 < limit;
    let norm = f32::sqrt(n2) / s;
    let mut factor = 1.0f32;
    if clip > 0.0 && norm > clip {
        factor = clip * (1.0f32 / (norm + 1e-6f32));
    }
    factor /= s;
    let k = skips[0];
    let mut c1 = consts[13];
    let mut c2 = consts[14];
    if k > 0.0 {
        c1 = f32::exp(k * consts[9]) * consts[11] + 1.0f32;
        c2 = f32::exp(k * consts[10]) * consts[12] + 1.0f32;
    }
    if i == 0 {
        let mut skipped = 1.0f32;
        if applies {
            skipped = 0.0f32;
        }
        new_skips[0] = k + skipped;
    }
    let gi = g[i] * factor;
    let m1 = m[i] * beta1 + gi * take1;
    let v1 = v[i] * beta2 + gi * gi * take2;
    let delta = m1 / c1 / (f32::sqrt(v1 / c2) + epsilon);
    let p1 = p[i] * decay - delta * lr;
    if applies {
        new_p[i] = p1;
        new_m[i] = m1;
        new_v[i] = v1;
    } else {
        new_p[i] = p[i];
        new_m[i] = m[i];
        new_v[i] = v[i];
    }
}

/// Efficient channel attention for `x [B, T, C]`, one cube per sample: the masked time average
/// (`weights [B, 1, T]`, 1 / count on valid frames), its `K`-tap convolution over channels
/// (`w [1, 1, K]`), a sigmoid gate, and `y = x * gate`.
#[cube(launch)]
fn eca_kernel<F: Float>(
    x: &Tensor<F>,
    weights: &Tensor<F>,
    w: &Tensor<F>,
    y: &mut Tensor<F>,
    #[comptime] capacity: u32,
    #[comptime] _revision: u64,
    #[define(F)] _dtype: StorageType,
) {
    let b = CUBE_POS_X as usize;
    let (frames, channels) = (x.shape(1), x.shape(2));
    let units = CUBE_DIM_X as usize;
    let mut pooled = SharedMemory::<f32>::new(capacity as usize);
    let mut gate = SharedMemory::<f32>::new(capacity as usize);
    eca_pool::<F>(x, weights, x, &mut pooled, &mut gate, false);
    sync_cube();
    let mut c = UNIT_POS_X as usize;
    while c < channels {
        gate[c] = sigmoid(eca_conv::<F>(&pooled, w, c, channels));
        c += units;
    }
    sync_cube();
    let n = frames * channels;
    let mut i = UNIT_POS_X as usize;
    while i < n {
        let (t, ch) = (i / channels, i % channels);
        let xv = f32::cast_from(x[b * x.stride(0) + t * x.stride(1) + ch * x.stride(2)]);
        y[b * n + i] = F::cast_from(xv * gate[ch]);
        i += units;
    }
}

/// Gradients of [`eca_kernel`] for one sample per cube: `gx = grad * gate + weights * dpooled`,
/// where `dz = sum_t(grad * x) * gate * (1 - gate)` goes back through the channel convolution to
/// `dpooled`; the sample's share of the kernel's gradient, `sum_c dz[c] * pooled[c + j - K / 2]`,
/// into row `b` of `gw_parts [B, K]`.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn eca_backward_kernel<F: Float>(
    x: &Tensor<F>,
    weights: &Tensor<F>,
    w: &Tensor<F>,
    grad: &Tensor<F>,
    gx: &mut Tensor<F>,
    gw_parts: &mut Tensor<f32>,
    #[comptime] capacity: u32,
    #[comptime] _revision: u64,
    #[define(F)] _dtype: StorageType,
) {
    let b = CUBE_POS_X as usize;
    let (frames, channels) = (x.shape(1), x.shape(2));
    let taps = w.shape(2);
    let pad = taps / 2;
    let units = CUBE_DIM_X as usize;
    let u = UNIT_POS_X as usize;
    let mut pooled = SharedMemory::<f32>::new(capacity as usize);
    let mut dz = SharedMemory::<f32>::new(capacity as usize);
    let mut gate = SharedMemory::<f32>::new(capacity as usize);
    let mut dpooled = SharedMemory::<f32>::new(capacity as usize);
    eca_pool::<F>(x, weights, grad, &mut pooled, &mut dz, true);
    sync_cube();
    let mut c = u;
    while c < channels {
        let s = sigmoid(eca_conv::<F>(&pooled, w, c, channels));
        gate[c] = s;
        dz[c] = dz[c] * s * (1.0f32 - s);
        c += units;
    }
    sync_cube();
    c = u;
    while c < channels {
        // The transposed convolution: sum_j w[j] * dz[c - j + K / 2].
        let mut acc = 0.0f32;
        for j in 0..taps {
            let at = c + pad;
            if at >= j && at - j < channels {
                acc += f32::cast_from(w[j * w.stride(2)]) * dz[at - j];
            }
        }
        dpooled[c] = acc;
        c += units;
    }
    if u < taps {
        let mut acc = 0.0f32;
        for k in 0..channels {
            let at = k + u;
            if at >= pad && at - pad < channels {
                acc += dz[k] * pooled[at - pad];
            }
        }
        gw_parts[b * taps + u] = acc;
    }
    sync_cube();
    let n = frames * channels;
    let mut i = u;
    while i < n {
        let (t, ch) = (i / channels, i % channels);
        let g = f32::cast_from(grad[b * grad.stride(0) + t * grad.stride(1) + ch * grad.stride(2)]);
        let m = f32::cast_from(weights[b * weights.stride(0) + t * weights.stride(2)]);
        gx[b * n + i] = F::cast_from(g * gate[ch] + m * dpooled[ch]);
        i += units;
    }
}

/// `out[k] = sum_b parts[b, k]` (the samples' shares of the ECA kernel's gradient).
#[cube(launch)]
fn sum_rows_kernel<F: Float>(
    parts: &Tensor<f32>,
    out: &mut Tensor<F>,
    #[comptime] _revision: u64,
    #[define(F)] _dtype: StorageType,
) {
    let (rows, cols) = (parts.shape(0), parts.shape(1));
    let k = ABSOLUTE_POS;
    if k >= cols {
        terminate!();
    }
    let mut acc = 0.0f32;
    for r in 0..rows {
        acc += parts[r * cols + k];
    }
    out[k] = F::cast_from(acc);
}

/// Units per cube of the per-sample ECA kernels: 256 (WebGPU's limit), fewer where a cube holds
/// fewer.
fn per_sample<R: CubeRuntime>(client: &cubecl::client::ComputeClient<R>, samples: usize) -> (CubeCount, CubeDim) {
    let units = client.properties().hardware.max_units_per_cube.min(256);
    (CubeCount::Static(samples as u32, 1, 1), CubeDim::new_1d(units))
}

/// ECA: `x [B * T, C]`, `weights [B, 1, T]`, `w [1, 1, K]` -> `[B * T, C]`.
pub(crate) fn eca<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, _: &()) -> Vec<CubeTensor<R>> {
    let [x, weights, w] = take(inputs);
    let x = as_frames(x, dims::<R, 3>(&weights)[2]);
    let [b, t, c] = dims::<R, 3>(&x);
    let y = empty(&x, Shape::new([b, t, c]));
    let (count, cube_dim) = per_sample(&y.client, b);
    let dtype = storage(y.dtype);
    eca_kernel::launch::<R>(
        &y.client,
        count,
        cube_dim,
        x.into_tensor_arg(),
        weights.into_tensor_arg(),
        w.into_tensor_arg(),
        y.clone().into_tensor_arg(),
        eca_capacity(c),
        REVISION,
        dtype,
    );
    vec![as_rows(y)]
}

/// Gradients of [`eca`] with respect to `x` and `w`, from `x`, `weights`, `w` and the output
/// gradient: two launches (the per-sample kernel, then the sum of the samples' kernel gradients).
pub(crate) fn eca_backward<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, _: &()) -> Vec<CubeTensor<R>> {
    let [x, weights, w, g] = take(inputs);
    let frames = dims::<R, 3>(&weights)[2];
    let (x, g) = (as_frames(x, frames), as_frames(g, frames));
    let [b, t, c] = dims::<R, 3>(&x);
    let taps = dims::<R, 3>(&w)[2];
    let dtype = storage(x.dtype);
    let gx = empty(&x, Shape::new([b, t, c]));
    let parts = empty_device_contiguous_dtype(x.client.clone(), x.device.clone(), Shape::new([b, taps]), DType::F32);
    let gw = empty(&x, Shape::new([1, 1, taps]));
    let (count, cube_dim) = per_sample(&gx.client, b);
    eca_backward_kernel::launch::<R>(
        &gx.client,
        count,
        cube_dim,
        x.into_tensor_arg(),
        weights.into_tensor_arg(),
        w.into_tensor_arg(),
        g.into_tensor_arg(),
        gx.clone().into_tensor_arg(),
        parts.clone().into_tensor_arg(),
        eca_capacity(c),
        REVISION,
        dtype,
    );
    let (count, cube_dim) = units_for(&gw.client, taps);
    sum_rows_kernel::launch::<R>(
        &gw.client,
        count,
        cube_dim,
        parts.into_tensor_arg(),
        gw.clone().into_tensor_arg(),
        REVISION,
        dtype,
    );
    vec![as_rows(gx), gw]
}

/// Attention scores from the fused projection `qkv [B * T, 3 D]` (columns: queries, keys,
/// values, each `heads` blocks of `D / heads`): `scores [B, H, T, T]`, `scores[b, h, i, j] =
/// scale * sum_d q[b T + i, h hd + d] * k[b T + j, h hd + d]`; one unit per score.
#[cube(launch)]
fn attention_scores_kernel<F: Float>(
    qkv: &Tensor<F>,
    scores: &mut Tensor<F>,
    scale: f32,
    #[comptime] _revision: u64,
    #[define(F)] _dtype: StorageType,
) {
    if ABSOLUTE_POS >= scores.len() {
        terminate!();
    }
    let (heads, frames) = (scores.shape(1), scores.shape(2));
    let dim = qkv.shape(1) / 3;
    let hd = dim / heads;
    let j = ABSOLUTE_POS % frames;
    let i = (ABSOLUTE_POS / frames) % frames;
    let h = (ABSOLUTE_POS / (frames * frames)) % heads;
    let b = ABSOLUTE_POS / (frames * frames * heads);
    let (rs, cs) = (qkv.stride(0), qkv.stride(1));
    let q0 = (b * frames + i) * rs + h * hd * cs;
    let k0 = (b * frames + j) * rs + (dim + h * hd) * cs;
    let mut acc = 0.0f32;
    for d in 0..hd {
        acc += f32::cast_from(qkv[q0 + d * cs]) * f32::cast_from(qkv[k0 + d * cs]);
    }
    scores[ABSOLUTE_POS] = F::cast_from(acc * scale);
}

/// Gradient of [`attention_scores_kernel`] with respect to `qkv`, from the scores' gradient
/// `grad [B, H, T, T]`: `scale * grad k` in the query columns, `scale * grad^T q` in the key
/// columns, zeros in the value columns; one unit per element of `out [B * T, 3 D]`.
#[cube(launch)]
fn attention_scores_backward_kernel<F: Float>(
    qkv: &Tensor<F>,
    grad: &Tensor<F>,
    out: &mut Tensor<F>,
    scale: f32,
    #[comptime] _revision: u64,
    #[define(F)] _dtype: StorageType,
) {
    if ABSOLUTE_POS >= out.len() {
        terminate!();
    }
    let width = out.shape(1);
    let dim = width / 3;
    let (heads, frames) = (grad.shape(1), grad.shape(2));
    let hd = dim / heads;
    let col = ABSOLUTE_POS % width;
    let row = ABSOLUTE_POS / width;
    let (b, t) = (row / frames, row % frames);
    let (rs, cs) = (qkv.stride(0), qkv.stride(1));
    let mut acc = 0.0f32;
    if col < 2 * dim {
        let within = col % dim;
        let h = within / hd;
        // Queries pair with the keys (grad's rows are this frame), keys with the queries
        // (grad's columns are).
        let mut other = dim + within;
        let mut along = grad.stride(3);
        let mut at = b * grad.stride(0) + h * grad.stride(1) + t * grad.stride(2);
        if col >= dim {
            other = within;
            along = grad.stride(2);
            at = b * grad.stride(0) + h * grad.stride(1) + t * grad.stride(3);
        }
        for s in 0..frames {
            acc += f32::cast_from(grad[at + s * along]) * f32::cast_from(qkv[(b * frames + s) * rs + other * cs]);
        }
        acc *= scale;
    }
    out[ABSOLUTE_POS] = F::cast_from(acc);
}

/// Attention output with the heads merged: `out [B * T, D]`, `out[b T + i, h hd + d] = sum_j
/// attn[b, h, i, j] * v[b T + j, h hd + d]`, the values read from `qkv [B * T, 3 D]`.
#[cube(launch)]
fn attention_values_kernel<F: Float>(
    attn: &Tensor<F>,
    qkv: &Tensor<F>,
    out: &mut Tensor<F>,
    #[comptime] _revision: u64,
    #[define(F)] _dtype: StorageType,
) {
    if ABSOLUTE_POS >= out.len() {
        terminate!();
    }
    let dim = out.shape(1);
    let (heads, frames) = (attn.shape(1), attn.shape(2));
    let hd = dim / heads;
    let col = ABSOLUTE_POS % dim;
    let row = ABSOLUTE_POS / dim;
    let (b, i, h) = (row / frames, row % frames, col / hd);
    let (rs, cs) = (qkv.stride(0), qkv.stride(1));
    let a0 = b * attn.stride(0) + h * attn.stride(1) + i * attn.stride(2);
    let mut acc = 0.0f32;
    for j in 0..frames {
        acc += f32::cast_from(attn[a0 + j * attn.stride(3)])
            * f32::cast_from(qkv[(b * frames + j) * rs + (2 * dim + col) * cs]);
    }
    out[ABSOLUTE_POS] = F::cast_from(acc);
}

/// Gradients of [`attention_values_kernel`] from the output gradient `grad [B * T, D]`:
/// `gattn[b, h, i, j] = sum_d grad[b T + i, h hd + d] * v[b T + j, h hd + d]`, and `gqkv
/// [B * T, 3 D]` with `sum_i attn[b, h, i, j] * grad[b T + i, h hd + d]` in the value columns,
/// zeros in the others. One unit per element of the larger output, writing both.
#[cube(launch)]
fn attention_values_backward_kernel<F: Float>(
    attn: &Tensor<F>,
    qkv: &Tensor<F>,
    grad: &Tensor<F>,
    gattn: &mut Tensor<F>,
    gqkv: &mut Tensor<F>,
    #[comptime] _revision: u64,
    #[define(F)] _dtype: StorageType,
) {
    let dim = grad.shape(1);
    let (heads, frames) = (attn.shape(1), attn.shape(2));
    let hd = dim / heads;
    let (rs, cs) = (qkv.stride(0), qkv.stride(1));
    let (g0, g1) = (grad.stride(0), grad.stride(1));
    if ABSOLUTE_POS < gattn.len() {
        let j = ABSOLUTE_POS % frames;
        let i = (ABSOLUTE_POS / frames) % frames;
        let h = (ABSOLUTE_POS / (frames * frames)) % heads;
        let b = ABSOLUTE_POS / (frames * frames * heads);
        let mut acc = 0.0f32;
        for d in 0..hd {
            let c = h * hd + d;
            acc += f32::cast_from(grad[(b * frames + i) * g0 + c * g1])
                * f32::cast_from(qkv[(b * frames + j) * rs + (2 * dim + c) * cs]);
        }
        gattn[ABSOLUTE_POS] = F::cast_from(acc);
    }
    if ABSOLUTE_POS < gqkv.len() {
        let width = 3 * dim;
        let col = ABSOLUTE_POS % width;
        let row = ABSOLUTE_POS / width;
        let (b, j) = (row / frames, row % frames);
        let mut acc = 0.0f32;
        if col >= 2 * dim {
            let c = col - 2 * dim;
            let h = c / hd;
            let a0 = b * attn.stride(0) + h * attn.stride(1) + j * attn.stride(3);
            for i in 0..frames {
                acc += f32::cast_from(attn[a0 + i * attn.stride(2)])
                    * f32::cast_from(grad[(b * frames + i) * g0 + c * g1]);
            }
        }
        gqkv[ABSOLUTE_POS] = F::cast_from(acc);
    }
}

/// How [`attention_scores`] splits its input: samples, heads and the scale of the scores.
#[derive(Clone, Debug)]
pub(crate) struct Heads {
    /// Samples in the batch (`B`; the input has `B * T` rows).
    pub batch: usize,
    /// Attention heads.
    pub heads: usize,
    /// The factor on every score (`1 / sqrt(head_dim)`).
    pub scale: f32,
}

/// Attention scores `[B, H, T, T]` from the fused projection `qkv [B * T, 3 D]`.
pub(crate) fn attention_scores<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, split: &Heads) -> Vec<CubeTensor<R>> {
    let [qkv] = take(inputs);
    let [rows, _] = dims::<R, 2>(&qkv);
    let frames = rows / split.batch;
    let scores = empty(&qkv, Shape::new([split.batch, split.heads, frames, frames]));
    let (count, cube_dim) = units_for(&scores.client, scores.meta.shape().num_elements());
    let dtype = storage(qkv.dtype);
    attention_scores_kernel::launch::<R>(
        &scores.client,
        count,
        cube_dim,
        qkv.into_tensor_arg(),
        scores.clone().into_tensor_arg(),
        split.scale,
        REVISION,
        dtype,
    );
    vec![scores]
}

/// Gradient of [`attention_scores`] with respect to `qkv`, from `qkv` and the scores' gradient.
pub(crate) fn attention_scores_backward<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, scale: &f32) -> Vec<CubeTensor<R>> {
    let [qkv, grad] = take(inputs);
    let out = empty(&qkv, Shape::new(dims::<R, 2>(&qkv)));
    let (count, cube_dim) = units_for(&out.client, out.meta.shape().num_elements());
    let dtype = storage(qkv.dtype);
    attention_scores_backward_kernel::launch::<R>(
        &out.client,
        count,
        cube_dim,
        qkv.into_tensor_arg(),
        grad.into_tensor_arg(),
        out.clone().into_tensor_arg(),
        *scale,
        REVISION,
        dtype,
    );
    vec![out]
}

/// The attention output `[B * T, D]` (heads merged) from the weights `attn [B, H, T, T]` and
/// the values in `qkv [B * T, 3 D]`.
pub(crate) fn attention_values<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, _: &()) -> Vec<CubeTensor<R>> {
    let [attn, qkv] = take(inputs);
    let [rows, width] = dims::<R, 2>(&qkv);
    let out = empty(&qkv, Shape::new([rows, width / 3]));
    let (count, cube_dim) = units_for(&out.client, rows * (width / 3));
    let dtype = storage(qkv.dtype);
    attention_values_kernel::launch::<R>(
        &out.client,
        count,
        cube_dim,
        attn.into_tensor_arg(),
        qkv.into_tensor_arg(),
        out.clone().into_tensor_arg(),
        REVISION,
        dtype,
    );
    vec![out]
}

/// Gradients of [`attention_values`] with respect to `attn` and `qkv`, from both and the output
/// gradient.
pub(crate) fn attention_values_backward<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, _: &()) -> Vec<CubeTensor<R>> {
    let [attn, qkv, grad] = take(inputs);
    let gattn = empty(&qkv, Shape::new(dims::<R, 4>(&attn)));
    let gqkv = empty(&qkv, Shape::new(dims::<R, 2>(&qkv)));
    let n = gattn.meta.shape().num_elements().max(gqkv.meta.shape().num_elements());
    let (count, cube_dim) = units_for(&gqkv.client, n);
    let dtype = storage(qkv.dtype);
    attention_values_backward_kernel::launch::<R>(
        &gqkv.client,
        count,
        cube_dim,
        attn.into_tensor_arg(),
        qkv.into_tensor_arg(),
        grad.into_tensor_arg(),
        gattn.clone().into_tensor_arg(),
        gqkv.clone().into_tensor_arg(),
        REVISION,
        dtype,
    );
    vec![gattn, gqkv]
}

/// murmur3's finalizer.
#[cube]
fn fmix(h: u32) -> u32 {
    let mut h = h ^ (h >> 16);
    h *= 0x85eb_ca6bu32;
    h ^= h >> 13;
    h *= 0xc2b2_ae35u32;
    h ^ (h >> 16)
}

/// Element `i` of the seeds as a whole number.
#[cube]
fn seed_word<F: Float>(seeds: &Tensor<F>, i: usize) -> u32 {
    u32::cast_from(f32::cast_from(seeds[i * seeds.stride(0)]))
}

/// The offset of key `j` in row `(b, h, q)` of a `[B, H, Q, K]` tensor.
#[cube]
fn row_at<F: Float>(t: &Tensor<F>, b: usize, h: usize, q: usize, j: usize) -> usize {
    b * t.stride(0) + h * t.stride(1) + q * t.stride(2) + j * t.stride(3)
}

/// Softmax over the keys of `scores [B, H, Q, K] + bias [B, K]` (one unit per row), into `y`;
/// with `dropout`, `out = y * mask` where element `i` (its flat index) is kept, times `scale`,
/// when a hash of `i` and the seed is below `threshold`. The seed is two 22-bit words made of the
/// four whole numbers below 2048 in `seeds` (drawn on the device, so no host read). Without
/// `dropout`, `out = y`.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn softmax_dropout_kernel<F: Float>(
    scores: &Tensor<F>,
    bias: &Tensor<F>,
    seeds: &Tensor<F>,
    y: &mut Tensor<F>,
    out: &mut Tensor<F>,
    threshold: u32,
    scale: f32,
    #[comptime] dropout: bool,
    #[comptime] _revision: u64,
    #[define(F)] _dtype: StorageType,
) {
    let (heads, queries, keys) = (scores.shape(1), scores.shape(2), scores.shape(3));
    let row = ABSOLUTE_POS;
    if row >= scores.shape(0) * heads * queries {
        terminate!();
    }
    let q = row % queries;
    let h = (row / queries) % heads;
    let b = row / (queries * heads);
    let base = b * scores.stride(0) + h * scores.stride(1) + q * scores.stride(2);
    let (sk, bb, bk) = (scores.stride(3), b * bias.stride(0), bias.stride(1));
    let mut top = f32::cast_from(scores[base]) + f32::cast_from(bias[bb]);
    for j in 1..keys {
        top = f32::max(top, f32::cast_from(scores[base + j * sk]) + f32::cast_from(bias[bb + j * bk]));
    }
    let mut sum = 0.0f32;
    for j in 0..keys {
        sum += f32::exp(f32::cast_from(scores[base + j * sk]) + f32::cast_from(bias[bb + j * bk]) - top);
    }
    let mut s0 = 0u32;
    let mut s1 = 0u32;
    if dropout {
        s0 = seed_word::<F>(seeds, 0) + seed_word::<F>(seeds, 1) * 2048u32;
        s1 = seed_word::<F>(seeds, 2) + seed_word::<F>(seeds, 3) * 2048u32;
    }
    for j in 0..keys {
        let p = f32::exp(f32::cast_from(scores[base + j * sk]) + f32::cast_from(bias[bb + j * bk]) - top) / sum;
        let at = row * keys + j;
        y[at] = F::cast_from(p);
        if dropout {
            let hash = fmix(fmix((u32::cast_from(at) * 0x9e37_79b9u32) ^ s0) ^ s1);
            let mut kept = 0.0f32;
            if hash < threshold {
                kept = p * scale;
            }
            out[at] = F::cast_from(kept);
        } else {
            out[at] = F::cast_from(p);
        }
    }
}

/// Gradient of [`softmax_dropout_kernel`] with respect to the scores, from the softmax `y`, the
/// dropped-out output `out` and its gradient: `grad * out - y * sum_keys(grad * out)` (with
/// `out = y`, the plain softmax's gradient). One unit per row.
#[cube(launch)]
fn softmax_dropout_backward_kernel<F: Float>(
    y: &Tensor<F>,
    out: &Tensor<F>,
    grad: &Tensor<F>,
    gs: &mut Tensor<F>,
    #[comptime] _revision: u64,
    #[define(F)] _dtype: StorageType,
) {
    let (heads, queries, keys) = (y.shape(1), y.shape(2), y.shape(3));
    let row = ABSOLUTE_POS;
    if row >= y.shape(0) * heads * queries {
        terminate!();
    }
    let q = row % queries;
    let h = (row / queries) % heads;
    let b = row / (queries * heads);
    let mut dot = 0.0f32;
    for j in 0..keys {
        dot += f32::cast_from(grad[row_at::<F>(grad, b, h, q, j)]) * f32::cast_from(out[row_at::<F>(out, b, h, q, j)]);
    }
    for j in 0..keys {
        let g = f32::cast_from(grad[row_at::<F>(grad, b, h, q, j)]) * f32::cast_from(out[row_at::<F>(out, b, h, q, j)]);
        gs[row * keys + j] = F::cast_from(g - f32::cast_from(y[row_at::<F>(y, b, h, q, j)]) * dot);
    }
}

/// Dropout on the attention weights: keep an element when its hash is below `threshold`, and
/// multiply the kept ones by `scale`; `None`: no dropout.
#[derive(Clone, Debug)]
pub(crate) struct Drop {
    /// `(1 - p) x 2^32`, rounded.
    pub threshold: u32,
    /// `1 / (1 - p)`.
    pub scale: f32,
}

/// Softmax over keys of `scores [B, H, Q, K] + bias [B, K]` and, with `drop`, its dropped-out
/// copy (the seeds are the third input); without, the copy is the softmax again.
pub(crate) fn softmax_dropout<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, drop: &Option<Drop>) -> Vec<CubeTensor<R>> {
    let [scores, bias, seeds] = take(inputs);
    let shape = Shape::new(dims::<R, 4>(&scores));
    let rows = shape[0] * shape[1] * shape[2];
    let y = empty(&scores, shape.clone());
    let out = empty(&scores, shape);
    let (count, cube_dim) = units_for(&y.client, rows);
    let dtype = storage(y.dtype);
    let (threshold, scale) = drop.as_ref().map_or((0, 1.0), |d| (d.threshold, d.scale));
    softmax_dropout_kernel::launch::<R>(
        &y.client,
        count,
        cube_dim,
        scores.into_tensor_arg(),
        bias.into_tensor_arg(),
        seeds.into_tensor_arg(),
        y.clone().into_tensor_arg(),
        out.clone().into_tensor_arg(),
        threshold,
        scale,
        drop.is_some(),
        REVISION,
        dtype,
    );
    vec![y, out]
}

/// Gradient of [`softmax_dropout`] with respect to the scores, from `y`, `out` and `out`'s
/// gradient.
pub(crate) fn softmax_dropout_backward<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, _: &()) -> Vec<CubeTensor<R>> {
    let [y, out, grad] = take(inputs);
    let shape = dims::<R, 4>(&y);
    let gs = empty(&y, Shape::new(shape));
    let (count, cube_dim) = units_for(&gs.client, shape[0] * shape[1] * shape[2]);
    let dtype = storage(y.dtype);
    softmax_dropout_backward_kernel::launch::<R>(
        &gs.client,
        count,
        cube_dim,
        y.into_tensor_arg(),
        out.into_tensor_arg(),
        grad.into_tensor_arg(),
        gs.clone().into_tensor_arg(),
        REVISION,
        dtype,
    );
    vec![gs]
}

/// Where [`views`] cuts its tensor: the first element and the shape.
#[derive(Clone, Debug)]
pub(crate) struct Window {
    /// Offset of the view's first element in the 1-D input.
    pub start: usize,
    /// The view's shape (contiguous).
    pub shape: Shape,
}

/// `window.shape` elements of a contiguous 1-D tensor from `window.start` for each window, as
/// views of its memory: no kernel, no copy, where the start is at the device's memory alignment
/// (Burn's own slice makes a view only when the end is aligned too, and copies otherwise); else a
/// copy. `&Vec`: the launcher type takes its parameters by reference.
#[allow(clippy::ptr_arg)]
pub(crate) fn views<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, windows: &Vec<Window>) -> Vec<CubeTensor<R>> {
    let [flat] = take(inputs);
    windows.iter().map(|window| view_of(&flat, window)).collect()
}

/// The gradients of a dense layer `x [n, k] @ w [k, m] + b` the op was asked for (`wanted`, in
/// the order `x`, `w`, `b`) from `[x, w, grad]`: `grad @ w^T`, `x^T @ grad` and `grad`'s column
/// sums, through Burn's own CubeCL matmul (autotuned) and reduction, the transposes as stride
/// swaps. Burn's tensor ops queue the same launches as six operations of its fusion stream. The
/// product and the sum are the dispatcher's (`CubeFloatOps`): compiled there, not here again.
pub(crate) fn dense_backward<R: CubeFloatOps>(inputs: Vec<CubeTensor<R>>, wanted: &[bool; 3]) -> Vec<CubeTensor<R>> {
    use burn::tensor::ops::FloatTensorOps;
    let swap = |t, a, b| burn_cubecl::CubeBackend::<R, f32, i32, u8>::float_swap_dims(t, a, b);
    let [x, w, grad] = take(inputs);
    let mut out = Vec::with_capacity(3);
    if wanted[0] {
        out.push(R::float_matmul(grad.clone(), swap(w, 0, 1)));
    }
    if wanted[1] {
        out.push(R::float_matmul(swap(x, 0, 1), grad.clone()));
    }
    if wanted[2] {
        let m = grad.meta.shape()[1];
        out.push(burn_cubecl::ops::reshape(R::float_sum_dim(grad, 0), Shape::new([m])));
    }
    out
}

/// AdamW's constants, in f32 as Burn's scalar ops take them, in the order [`adamw_kernel`]
/// reads them: `beta1`, `1 - beta1`, `beta2`, `1 - beta2`, `epsilon`, `1 - lr * weight_decay`
/// (1 without decay), `lr`, the clipping norm (0: none), the finite limit (infinity), `-ln
/// beta1`, `-ln beta2`, `-beta1^t`, `-beta2^t`, and the host's bias corrections `1 - beta1^t`,
/// `1 - beta2^t`.
#[derive(Clone, Debug)]
pub(crate) struct AdamW {
    pub consts: [f32; 15],
}

/// One AdamW step from `[p, g, m, v, loss, norm2, scale, skips]` (flat f32 buffers, then four
/// `[1]` device scalars) -> the new `p`, `m`, `v` and `skips`.
pub(crate) fn adamw<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, set: &AdamW) -> Vec<CubeTensor<R>> {
    let [p, g, m, v, loss, norm2, scale, skips] = take(inputs);
    let [p, g, m, v] = [p, g, m, v].map(contiguous);
    let len = p.meta.shape().clone();
    let [new_p, new_m, new_v] = [0, 1, 2].map(|_| empty(&p, len.clone()));
    let new_skips = empty(&p, Shape::new([1]));
    let (count, cube_dim) = units_for(&new_p.client, len.num_elements());
    let mut consts = SequenceArg::<R, f32>::new();
    for c in set.consts {
        consts.push(c);
    }
    adamw_kernel::launch::<R>(
        &new_p.client,
        count,
        cube_dim,
        p.into_tensor_arg(),
        g.into_tensor_arg(),
        m.into_tensor_arg(),
        v.into_tensor_arg(),
        loss.into_tensor_arg(),
        norm2.into_tensor_arg(),
        scale.into_tensor_arg(),
        skips.into_tensor_arg(),
        new_p.clone().into_tensor_arg(),
        new_m.clone().into_tensor_arg(),
        new_v.clone().into_tensor_arg(),
        new_skips.clone().into_tensor_arg(),
        consts,
        REVISION,
    );
    vec![new_p, new_m, new_v, new_skips]
}

/// No launch: the inputs the op consumed (each one's last handle) are freed as they drop here.
pub(crate) fn release<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, _: &()) -> Vec<CubeTensor<R>> {
    drop(inputs);
    Vec::new()
}

/// One window of [`views`].
fn view_of<R: CubeRuntime>(flat: &CubeTensor<R>, window: &Window) -> CubeTensor<R> {
    let len = flat.meta.shape()[0];
    let count = window.shape.num_elements();
    let elem = flat.dtype.size() as u64;
    let start = window.start as u64 * elem;
    if flat.is_contiguous() && start.is_multiple_of(flat.client.properties().memory.alignment) {
        let end = (len - window.start - count) as u64 * elem;
        let handle = flat.handle.clone().offset_start(start).offset_end(end);
        return CubeTensor::new_contiguous(
            flat.client.clone(),
            flat.device.clone(),
            window.shape.clone(),
            handle,
            flat.dtype,
        );
    }
    // One range: the flat buffer has one dimension.
    #[allow(clippy::single_range_in_vec_init)]
    let copy = burn_cubecl::kernel::slice(flat.clone(), &[window.start..window.start + count]);
    burn_cubecl::ops::reshape(burn_cubecl::kernel::into_contiguous(copy), window.shape.clone())
}

/// Parts written per launch of [`assemble_kernel`].
pub(crate) const GROUP: usize = 8;

/// `part`'s element at flat position `pos` if the part (`[rows, C]` through its strides, at
/// `offset`, `len` long) covers it, else `value`.
#[cube]
fn pick<F: Float>(part: &Tensor<F>, pos: usize, offset: usize, len: usize, value: F) -> F {
    let mut out = value;
    if pos >= offset && pos < offset + len {
        out = part[row_major(part, pos - offset)];
    }
    out
}

/// Writes flat positions `start..end` of `out`: each from the part that covers it (part `i` at
/// `offsets[i]`, `lens[i]` long; a length of 0 leaves a slot unused), zero where none does.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn assemble_kernel<F: Float>(
    p0: &Tensor<F>,
    p1: &Tensor<F>,
    p2: &Tensor<F>,
    p3: &Tensor<F>,
    p4: &Tensor<F>,
    p5: &Tensor<F>,
    p6: &Tensor<F>,
    p7: &Tensor<F>,
    out: &mut Tensor<F>,
    offsets: Sequence<usize>,
    lens: Sequence<usize>,
    start: usize,
    end: usize,
    #[comptime] _revision: u64,
    #[define(F)] _dtype: StorageType,
) {
    let pos = start + ABSOLUTE_POS;
    if pos >= end {
        terminate!();
    }
    let mut v = F::new(0.0);
    v = pick::<F>(p0, pos, offsets[0], lens[0], v);
    v = pick::<F>(p1, pos, offsets[1], lens[1], v);
    v = pick::<F>(p2, pos, offsets[2], lens[2], v);
    v = pick::<F>(p3, pos, offsets[3], lens[3], v);
    v = pick::<F>(p4, pos, offsets[4], lens[4], v);
    v = pick::<F>(p5, pos, offsets[5], lens[5], v);
    v = pick::<F>(p6, pos, offsets[6], lens[6], v);
    v = pick::<F>(p7, pos, offsets[7], lens[7], v);
    out[pos] = v;
}

/// Where [`assemble`] puts its parts: each part's offset (ascending) and the flat length.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    /// Offset of each part in the flat buffer, ascending.
    pub offsets: Vec<usize>,
    /// Length of the flat buffer.
    pub len: usize,
}

/// One flat buffer of `layout.len` elements with each part's elements (row-major, whatever its
/// rank) at its offset and zeros elsewhere, in one launch per [`GROUP`] parts (a part's launch
/// also writes the zeros between it and the next part, the first's those before it). Each part
/// is read as rows ([`as_rows`]): contiguous or padded rows (CUDA lays out a new matrix with
/// its rows aligned, so most weight gradients arrive padded there) and any 2-D layout are read
/// in place; a part whose leading axes do not collapse is copied first (one launch).
pub(crate) fn assemble<R: CubeRuntime>(parts: Vec<CubeTensor<R>>, layout: &Layout) -> Vec<CubeTensor<R>> {
    let flat = empty(&parts[0], Shape::new([layout.len]));
    let dtype = storage(flat.dtype);
    let lens: Vec<usize> = parts.iter().map(|p| p.meta.shape().num_elements()).collect();
    let parts: Vec<CubeTensor<R>> = parts.into_iter().map(as_rows).collect();
    let parts: Vec<(usize, usize, CubeTensor<R>)> =
        layout.offsets.iter().zip(&lens).zip(parts).map(|((&o, &n), p)| (o, n, p)).collect();
    let groups: Vec<_> = parts.chunks(GROUP).collect();
    for (g, group) in groups.iter().enumerate() {
        let start = if g == 0 { 0 } else { group[0].0 };
        let end = groups.get(g + 1).map_or(layout.len, |next| next[0].0);
        let (mut offsets, mut lens) = (SequenceArg::<R, usize>::new(), SequenceArg::<R, usize>::new());
        let mut args = Vec::with_capacity(GROUP);
        for slot in 0..GROUP {
            let (o, n, p) = group.get(slot).unwrap_or(&group[0]);
            offsets.push(*o);
            lens.push(if slot < group.len() { *n } else { 0 });
            args.push(p.clone().into_tensor_arg());
        }
        let [a0, a1, a2, a3, a4, a5, a6, a7] = match args.try_into() {
            Ok(a) => a,
            Err(_) => unreachable!("GROUP arguments"),
        };
        let units = end - start;
        let cube_dim = CubeDim::new(&flat.client, units);
        let count = calculate_cube_count_elemwise(&flat.client, units, cube_dim);
        assemble_kernel::launch::<R>(
            &flat.client,
            count,
            cube_dim,
            a0,
            a1,
            a2,
            a3,
            a4,
            a5,
            a6,
            a7,
            flat.clone().into_tensor_arg(),
            offsets,
            lens,
            start,
            end,
            REVISION,
            dtype,
        );
    }
    vec![flat]
}

/// The inputs of an op with `N` of them (the entry points register exactly that many).
fn take<R: CubeRuntime, const N: usize>(inputs: Vec<CubeTensor<R>>) -> [CubeTensor<R>; N] {
    match inputs.try_into() {
        Ok(inputs) => inputs,
        Err(v) => unreachable!("an op registered with {N} inputs ran with {}", v.len()),
    }
}

fn empty<R: CubeRuntime>(like: &CubeTensor<R>, shape: Shape) -> CubeTensor<R> {
    empty_device_contiguous_dtype(like.client.clone(), like.device.clone(), shape, like.dtype)
}

/// `x [.., C]` as `[rows, C]`: a view whenever its leading axes collapse into one axis of rows
/// ([`row_stride`]: contiguous, or rows padded to an alignment as CUDA's allocator lays out a new
/// tensor, or any 2-D layout), a copy otherwise. Burn's own reshape copies padded rows. The
/// kernels index `[rows, C]` through its strides and write contiguous outputs, so an output of
/// `x`'s own shape needs no reshape.
fn as_rows<R: CubeRuntime>(mut x: CubeTensor<R>) -> CubeTensor<R> {
    let shape = x.meta.shape().clone();
    let channels = shape[shape.num_dims() - 1];
    let rows = shape.num_elements().checked_div(channels).unwrap_or(0);
    match row_stride(&shape, x.meta.strides()) {
        Some(stride) => {
            let channel_stride = x.meta.strides()[shape.num_dims() - 1];
            *x.meta = Metadata::new(Shape::new([rows, channels]), [stride, channel_stride]);
            x
        }
        None => burn_cubecl::ops::reshape(x, Shape::new([rows, channels])),
    }
}

/// The stride between consecutive rows of a tensor `[.., C]` whose leading axes, flattened in
/// row-major order, are one axis of rows in memory (each axis of more than one element steps by
/// the next one's extent times its stride), or `None` when they are not (a transposed leading
/// axis): a contiguous tensor's is `C` times the channel stride, and a tensor whose rows are
/// padded (`[.., C]` with row stride `P > C`) has `P`. Leading axes of one element have no say;
/// with no row beyond the first the stride is `C` times the channel stride.
pub(crate) fn row_stride(shape: &[usize], strides: &[usize]) -> Option<usize> {
    let rank = shape.len();
    if rank == 0 || strides.len() != rank {
        return None;
    }
    let mut rows = (0..rank - 1).rev().filter(|&i| shape[i] > 1);
    let Some(inner) = rows.next() else {
        return Some(shape[rank - 1] * strides[rank - 1]);
    };
    let mut extent = strides[inner] * shape[inner];
    for i in rows {
        // Axes between `i` and the last counted one have one element each.
        if strides[i] != extent {
            return None;
        }
        extent = strides[i] * shape[i];
    }
    Some(strides[inner])
}

fn dims<R: CubeRuntime, const D: usize>(t: &CubeTensor<R>) -> [usize; D] {
    let shape = t.meta.shape();
    core::array::from_fn(|i| shape[i])
}

/// One unit per output element.
fn elementwise<R: CubeRuntime>(out: &CubeTensor<R>) -> (CubeCount, CubeDim) {
    units_for(&out.client, dims::<R, 3>(out).iter().product())
}

/// One unit per element of `n`.
fn units_for<R: CubeRuntime>(client: &cubecl::client::ComputeClient<R>, n: usize) -> (CubeCount, CubeDim) {
    let cube_dim = CubeDim::new(client, n);
    (calculate_cube_count_elemwise(client, n, cube_dim), cube_dim)
}

/// `CHANNEL_LANES x lanes` units per cube, one cube per block of channels (times `taps`), and
/// the units per cube.
fn per_channel<R: CubeRuntime>(
    client: &cubecl::client::ComputeClient<R>,
    channels: usize,
    taps: usize,
) -> (CubeCount, CubeDim, u32) {
    let blocks = channels.div_ceil(CHANNEL_LANES as usize) as u32;
    let lanes = row_lanes(client);
    (CubeCount::Static(blocks, taps as u32, 1), CubeDim::new_2d(CHANNEL_LANES, lanes), CHANNEL_LANES * lanes)
}

fn storage(dtype: DType) -> StorageType {
    dtype.into()
}

/// `x [B * T, C]` as `[B, T, C]` for `frames` = T (a view of contiguous rows, else a copy).
fn as_frames<R: CubeRuntime>(x: CubeTensor<R>, frames: usize) -> CubeTensor<R> {
    let [rows, channels] = dims::<R, 2>(&x);
    burn_cubecl::ops::reshape(x, Shape::new([rows / frames, frames, channels]))
}

/// A depthwise `Conv1d`'s weight `[C, 1, K]` as its taps `[C, K]`.
fn as_taps<R: CubeRuntime>(w: CubeTensor<R>) -> CubeTensor<R> {
    let [c, _, k] = dims::<R, 3>(&w);
    burn_cubecl::ops::reshape(w, Shape::new([c, k]))
}

/// A causal depthwise convolution's settings: the frames per sample, and whether its input
/// goes through SiLU first (a conv block's SiLU and conv as one op in training).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Conv {
    /// Frames per sample (`T` of the rows `[B * T, C]`).
    pub frames: usize,
    /// Whether the conv is over SiLU of its input.
    pub silu: bool,
}

/// Causal depthwise convolution: `x [B * T, C]` (`frames` = T), `w [C, 1, K]` -> `[B * T, C]`,
/// over SiLU of `x` with `set.silu`.
pub(crate) fn causal_dwconv<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, set: &Conv) -> Vec<CubeTensor<R>> {
    let [x, w] = take(inputs);
    let (x, w) = (as_frames(x, set.frames), as_taps(w));
    let y = empty(&x, Shape::new(dims::<R, 3>(&x)));
    let (count, cube_dim) = elementwise(&y);
    let dtype = storage(y.dtype);
    dwconv_taps_kernel::launch::<R>(
        &y.client,
        count,
        cube_dim,
        x.into_tensor_arg(),
        w.into_tensor_arg(),
        y.clone().into_tensor_arg(),
        false,
        set.silu,
        REVISION,
        dtype,
    );
    vec![as_rows(y)]
}

/// Gradients of [`causal_dwconv`] with respect to `x` and `w` (in their shapes), from `x`, `w`
/// and the output gradient; with `set.silu`, `x`'s is through SiLU too (two launches either
/// way: the SiLU's derivative is taken in the input gradient's kernel).
pub(crate) fn causal_dwconv_backward<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, set: &Conv) -> Vec<CubeTensor<R>> {
    let [x, w, g] = take(inputs);
    let weight_shape = w.meta.shape().clone();
    let (x, w, g) = (as_frames(x, set.frames), as_taps(w), as_frames(g, set.frames));
    let [_, _, channels] = dims::<R, 3>(&x);
    let [_, taps] = dims::<R, 2>(&w);
    let dtype = storage(x.dtype);
    let gx = empty(&x, Shape::new(dims::<R, 3>(&x)));
    let gw = empty(&x, Shape::new([channels, taps]));
    let (count, cube_dim) = elementwise(&gx);
    if set.silu {
        dwconv_silu_grad_kernel::launch::<R>(
            &gx.client,
            count,
            cube_dim,
            g.clone().into_tensor_arg(),
            w.into_tensor_arg(),
            x.clone().into_tensor_arg(),
            gx.clone().into_tensor_arg(),
            REVISION,
            dtype,
        );
    } else {
        dwconv_taps_kernel::launch::<R>(
            &gx.client,
            count,
            cube_dim,
            g.clone().into_tensor_arg(),
            w.into_tensor_arg(),
            gx.clone().into_tensor_arg(),
            true,
            false,
            REVISION,
            dtype,
        );
    }
    let (count, cube_dim, units) = per_channel(&gw.client, channels, taps);
    dwconv_weight_grad_kernel::launch::<R>(
        &gw.client,
        count,
        cube_dim,
        x.into_tensor_arg(),
        g.into_tensor_arg(),
        gw.clone().into_tensor_arg(),
        units,
        set.silu,
        REVISION,
        dtype,
    );
    vec![as_rows(gx), burn_cubecl::ops::reshape(gw, weight_shape)]
}

/// `x` laid out contiguously: itself when it is, else a copy (one more launch).
fn contiguous<R: CubeRuntime>(x: CubeTensor<R>) -> CubeTensor<R> {
    if x.is_contiguous() {
        x
    } else {
        burn_cubecl::kernel::into_contiguous(x)
    }
}

/// SiLU of `x` at any rank -> `x`'s shape (read as rows, [`as_rows`]).
pub(crate) fn silu<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, _: &()) -> Vec<CubeTensor<R>> {
    let [x] = take(inputs);
    let shape = x.meta.shape().clone();
    let x = as_rows(x);
    let y = empty(&x, shape);
    let (count, cube_dim) = units_for(&y.client, y.meta.shape().num_elements());
    let dtype = storage(y.dtype);
    silu_kernel::launch::<R>(
        &y.client,
        count,
        cube_dim,
        x.into_tensor_arg(),
        y.clone().into_tensor_arg(),
        REVISION,
        dtype,
    );
    vec![y]
}

/// Gradient of [`silu`] with respect to `x`, from `x` and the output gradient (same shape; each
/// read as rows).
pub(crate) fn silu_backward<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, _: &()) -> Vec<CubeTensor<R>> {
    let [x, g] = take(inputs);
    let shape = x.meta.shape().clone();
    let (x, g) = (as_rows(x), as_rows(g));
    let gx = empty(&x, shape);
    let (count, cube_dim) = units_for(&gx.client, gx.meta.shape().num_elements());
    let dtype = storage(gx.dtype);
    silu_backward_kernel::launch::<R>(
        &gx.client,
        count,
        cube_dim,
        x.into_tensor_arg(),
        g.into_tensor_arg(),
        gx.clone().into_tensor_arg(),
        REVISION,
        dtype,
    );
    vec![gx]
}

/// Per-channel mean and biased variance of `x [.., C]` (its leading axes are the rows), as
/// `[2, C]`.
pub(crate) fn channel_stats<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, _: &()) -> Vec<CubeTensor<R>> {
    let [x] = take(inputs);
    let x = as_rows(x);
    let [_, channels] = dims::<R, 2>(&x);
    let stats = empty(&x, Shape::new([2, channels]));
    let (count, cube_dim, units) = per_channel(&stats.client, channels, 1);
    let dtype = storage(x.dtype);
    channel_stats_kernel::launch::<R>(
        &stats.client,
        count,
        cube_dim,
        x.into_tensor_arg(),
        stats.clone().into_tensor_arg(),
        units,
        REVISION,
        dtype,
    );
    vec![stats]
}

/// Gradients of training-mode BatchNorm with respect to `x [.., C]` (its leading axes are the
/// rows; the gradient has its shape), `gamma` and `beta`, from `x`, its statistics, `gamma` and
/// the output gradient; `eps` is BatchNorm's epsilon.
pub(crate) fn channel_norm_backward<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, eps: &f32) -> Vec<CubeTensor<R>> {
    let [x, stats, gamma, g] = take(inputs);
    let gx = empty(&x, x.meta.shape().clone());
    let (x, g) = (as_rows(x), as_rows(g));
    let [_, channels] = dims::<R, 2>(&x);
    let ggamma = empty(&gamma, Shape::new([channels]));
    let gbeta = empty(&gamma, Shape::new([channels]));
    let (count, cube_dim, units) = per_channel(&gx.client, channels, 1);
    let dtypes = [storage(x.dtype), storage(gamma.dtype)];
    channel_norm_backward_kernel::launch::<R>(
        &gx.client,
        count,
        cube_dim,
        x.into_tensor_arg(),
        stats.into_tensor_arg(),
        gamma.into_tensor_arg(),
        g.into_tensor_arg(),
        gx.clone().into_tensor_arg(),
        ggamma.clone().into_tensor_arg(),
        gbeta.clone().into_tensor_arg(),
        *eps,
        units,
        REVISION,
        dtypes,
    );
    vec![gx, ggamma, gbeta]
}
