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
use cubecl::prelude::*;
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
/// output, with `s = K - 1 - j`: causal, `out[b, t, c] = sum_j w[j, c] * input[b, t - s, c]`
/// (the forward pass); anti-causal, `out[b, t, c] = sum_j w[j, c] * input[b, t + s, c]` (the
/// input gradient, from the output gradient). Frames outside the sequence count as zero.
#[cube(launch)]
fn dwconv_taps_kernel<F: Float>(
    input: &Tensor<F>,
    w: &Tensor<F>,
    out: &mut Tensor<F>,
    #[comptime] anti_causal: bool,
    #[comptime] _revision: u64,
    #[define(F)] _dtype: StorageType,
) {
    if ABSOLUTE_POS >= out.len() {
        terminate!();
    }
    let channels = out.shape(2);
    let frames = out.shape(1);
    let taps = w.shape(0);
    let c = ABSOLUTE_POS % channels;
    let t = (ABSOLUTE_POS / channels) % frames;
    let b = ABSOLUTE_POS / (channels * frames);
    let base = b * input.stride(0) + c * input.stride(2);
    let mut acc = 0.0f32;
    for j in 0..taps {
        let shift = taps - 1 - j;
        let wv = f32::cast_from(w[j * w.stride(0) + c * w.stride(1)]);
        if anti_causal {
            if t + shift < frames {
                acc += wv * f32::cast_from(input[base + (t + shift) * input.stride(1)]);
            }
        } else if t >= shift {
            acc += wv * f32::cast_from(input[base + (t - shift) * input.stride(1)]);
        }
    }
    out[ABSOLUTE_POS] = F::cast_from(acc);
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

/// `gw[j, c] = sum over b, t of x[b, t + j + 1 - K, c] * g[b, t, c]`: one cube per
/// (channel block, tap), its row lanes summing strided rows, then added in shared memory.
#[cube(launch)]
fn dwconv_weight_grad_kernel<F: Float>(
    x: &Tensor<F>,
    g: &Tensor<F>,
    gw: &mut Tensor<F>,
    #[comptime] units: u32,
    #[comptime] _revision: u64,
    #[define(F)] _dtype: StorageType,
) {
    let channels = x.shape(2);
    let frames = x.shape(1);
    let rows = x.shape(0) * frames;
    let taps = gw.shape(0);
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
                let xv = f32::cast_from(x[b * x.stride(0) + src * x.stride(1) + c * x.stride(2)]);
                acc += xv * f32::cast_from(g[b * g.stride(0) + t * g.stride(1) + c * g.stride(2)]);
            }
            r += lanes;
        }
    }
    let mut partial = SharedMemory::<f32>::new(units as usize);
    partial[lane * width + col] = acc;
    sync_cube();
    if lane == 0 && c < channels {
        gw[j * channels + c] = F::cast_from(lane_sum(&partial, 0, col));
    }
}

/// Per-channel mean and biased variance of `x [N, C]` into `stats [2, C]` (two passes: the
/// mean, then the squared deviations from it).
#[cube(launch)]
fn channel_stats_kernel<F: Float>(
    x: &Tensor<F>,
    stats: &mut Tensor<F>,
    #[comptime] units: u32,
    #[comptime] _revision: u64,
    #[define(F)] _dtype: StorageType,
) {
    let rows = x.shape(0);
    let channels = x.shape(1);
    let (width, lanes) = (CUBE_DIM_X as usize, CUBE_DIM_Y as usize);
    let (c, lane, col) = reduction_unit();
    let mut partial = SharedMemory::<f32>::new(units as usize);

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
    let mean = lane_sum(&partial, 0, col) / rows as f32;
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
    if lane == 0 && c < channels {
        stats[c] = F::cast_from(mean);
        stats[channels + c] = F::cast_from(lane_sum(&partial, 0, col) / rows as f32);
    }
}

/// Training-mode BatchNorm backward for `x [N, C]` with `stats [2, C]` and `gamma [C]`: the
/// sums `sum_g` and `sum_gx = sum(g * xhat)` per channel (one pass, added in shared memory), then
/// `gx = (g - sum_g / N - xhat * sum_gx / N) * gamma / sqrt(var + eps)` in a second pass;
/// `ggamma = sum_gx`, `gbeta = sum_g`.
#[cube(launch)]
fn channel_norm_backward_kernel<F: Float>(
    x: &Tensor<F>,
    stats: &Tensor<F>,
    gamma: &Tensor<F>,
    g: &Tensor<F>,
    gx: &mut Tensor<F>,
    ggamma: &mut Tensor<F>,
    gbeta: &mut Tensor<F>,
    eps: f32,
    #[comptime] units: u32,
    #[comptime] _revision: u64,
    #[define(F)] _dtype: StorageType,
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
            ggamma[c] = F::cast_from(total_gx);
            gbeta[c] = F::cast_from(total_g);
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

/// Where [`view`] cuts its tensor: the first element and the shape.
#[derive(Clone, Debug)]
pub(crate) struct Window {
    /// Offset of the view's first element in the 1-D input.
    pub start: usize,
    /// The view's shape (contiguous).
    pub shape: Shape,
}

/// `window.shape` elements of a contiguous 1-D tensor from `window.start`, as a view of its
/// memory: no kernel, no copy, where the start is at the device's memory alignment (Burn's own
/// slice makes a view only when the end is aligned too, and copies otherwise); else a copy.
pub(crate) fn view<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, window: &Window) -> Vec<CubeTensor<R>> {
    let [flat] = take(inputs);
    let len = flat.meta.shape()[0];
    let count = window.shape.num_elements();
    let elem = flat.dtype.size() as u64;
    let start = window.start as u64 * elem;
    if flat.is_contiguous() && start.is_multiple_of(flat.client.properties().memory.alignment) {
        let end = (len - window.start - count) as u64 * elem;
        let handle = flat.handle.clone().offset_start(start).offset_end(end);
        return vec![CubeTensor::new_contiguous(flat.client, flat.device, window.shape.clone(), handle, flat.dtype)];
    }
    let copy = burn_cubecl::kernel::slice(flat, &[window.start..window.start + count]);
    vec![burn_cubecl::ops::reshape(burn_cubecl::kernel::into_contiguous(copy), window.shape.clone())]
}

/// Parts written per launch of [`assemble_kernel`].
pub(crate) const GROUP: usize = 8;

/// `part`'s element at flat position `pos` if the part (at `offset`, `len` long) covers it, else
/// `value`.
#[cube]
fn pick<F: Float>(part: &Tensor<F>, pos: usize, offset: usize, len: usize, value: F) -> F {
    let mut out = value;
    if pos >= offset && pos < offset + len {
        out = part[(pos - offset) * part.stride(0)];
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

/// One flat buffer of `layout.len` elements with each 1-D part at its offset and zeros
/// elsewhere, in one launch per [`GROUP`] parts (a part's launch also writes the zeros between
/// it and the next part, the first's those before it).
pub(crate) fn assemble<R: CubeRuntime>(parts: Vec<CubeTensor<R>>, layout: &Layout) -> Vec<CubeTensor<R>> {
    let flat = empty(&parts[0], Shape::new([layout.len]));
    let dtype = storage(flat.dtype);
    let lens: Vec<usize> = parts.iter().map(|p| p.meta.shape()[0]).collect();
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

fn dims<R: CubeRuntime, const D: usize>(t: &CubeTensor<R>) -> [usize; D] {
    let shape = t.meta.shape();
    core::array::from_fn(|i| shape[i])
}

/// One unit per output element.
fn elementwise<R: CubeRuntime>(out: &CubeTensor<R>) -> (CubeCount, CubeDim) {
    let n = dims::<R, 3>(out).iter().product();
    let cube_dim = CubeDim::new(&out.client, n);
    (calculate_cube_count_elemwise(&out.client, n, cube_dim), cube_dim)
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

/// Causal depthwise convolution: `x [B, T, C]`, `w [K, C]` -> `[B, T, C]`.
pub(crate) fn causal_dwconv<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, _: &()) -> Vec<CubeTensor<R>> {
    let [x, w] = take(inputs);
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
        REVISION,
        dtype,
    );
    vec![y]
}

/// Gradients of [`causal_dwconv`] with respect to `x` and `w`, from `x`, `w` and the output
/// gradient.
pub(crate) fn causal_dwconv_backward<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, _: &()) -> Vec<CubeTensor<R>> {
    let [x, w, g] = take(inputs);
    let [_, _, channels] = dims::<R, 3>(&x);
    let [taps, _] = dims::<R, 2>(&w);
    let dtype = storage(x.dtype);
    let gx = empty(&x, Shape::new(dims::<R, 3>(&x)));
    let gw = empty(&x, Shape::new([taps, channels]));
    let (count, cube_dim) = elementwise(&gx);
    dwconv_taps_kernel::launch::<R>(
        &gx.client,
        count,
        cube_dim,
        g.clone().into_tensor_arg(),
        w.into_tensor_arg(),
        gx.clone().into_tensor_arg(),
        true,
        REVISION,
        dtype,
    );
    let (count, cube_dim, units) = per_channel(&gw.client, channels, taps);
    dwconv_weight_grad_kernel::launch::<R>(
        &gw.client,
        count,
        cube_dim,
        x.into_tensor_arg(),
        g.into_tensor_arg(),
        gw.clone().into_tensor_arg(),
        units,
        REVISION,
        dtype,
    );
    vec![gx, gw]
}

/// Per-channel mean and biased variance of `x [N, C]`, as `[2, C]`.
pub(crate) fn channel_stats<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, _: &()) -> Vec<CubeTensor<R>> {
    let [x] = take(inputs);
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

/// Gradients of training-mode BatchNorm with respect to `x`, `gamma` and `beta`, from `x`,
/// its statistics, `gamma` and the output gradient; `eps` is BatchNorm's epsilon.
pub(crate) fn channel_norm_backward<R: CubeRuntime>(inputs: Vec<CubeTensor<R>>, eps: &f32) -> Vec<CubeTensor<R>> {
    let [x, stats, gamma, g] = take(inputs);
    let [rows, channels] = dims::<R, 2>(&x);
    let gx = empty(&x, Shape::new([rows, channels]));
    let ggamma = empty(&x, Shape::new([channels]));
    let gbeta = empty(&x, Shape::new([channels]));
    let (count, cube_dim, units) = per_channel(&gx.client, channels, 1);
    let dtype = storage(x.dtype);
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
        dtype,
    );
    vec![gx, ggamma, gbeta]
}
