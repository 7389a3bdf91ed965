//! The kernels' self-test on a device, once per device and dtype in a process, before their first
//! use there: each kernel runs on small inputs whose results are known exactly (in f16 and bf16
//! too) and is read back. A kernel that does not compile, fails to launch or gives other values
//! there makes every kernel of this crate stand down on that device and dtype (the callers run
//! the reference ops), with one warning that names the kernel and what went wrong. Launch and
//! compilation errors surface at the read, so none of them panics in the middle of a step.

use std::cell::Cell;
use std::sync::Mutex;

use burn::tensor::{DType, FloatDType, Tensor, TensorData, TensorMetadata, TensorPrimitive};
use burn::{Dispatch, DispatchDevice};

thread_local! {
    /// Set while the self-test runs on this thread, so its own calls run the kernels unchecked.
    static CHECKING: Cell<bool> = const { Cell::new(false) };
}

/// The self-test's verdict for `device` and `dtype`: run on the first call, remembered after.
pub(crate) fn verdict(device: &DispatchDevice, dtype: DType) -> Result<(), String> {
    if CHECKING.with(Cell::get) {
        return Ok(());
    }
    /// Per device (its `Debug` text) and dtype, the verdict found.
    type Verdicts = Vec<(String, DType, Result<(), String>)>;
    static DONE: Mutex<Verdicts> = Mutex::new(Vec::new());
    let key = format!("{device:?}");
    let mut done = DONE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, _, verdict)) = done.iter().find(|(k, d, _)| *k == key && *d == dtype) {
        return verdict.clone();
    }
    CHECKING.with(|c| c.set(true));
    let verdict = self_test(device, dtype);
    CHECKING.with(|c| c.set(false));
    if let Err(why) = &verdict {
        eprintln!("warning: SignFlow's GPU kernels run as reference tensor ops on {key} ({dtype:?}): {why}");
    }
    done.push((key, dtype, verdict.clone()));
    verdict
}

fn tensor<const D: usize>(
    values: Vec<f32>,
    shape: [usize; D],
    device: &DispatchDevice,
    dtype: DType,
) -> Tensor<Dispatch, D> {
    Tensor::<Dispatch, D>::from_data(TensorData::new(values, shape), device).cast(FloatDType::from(dtype))
}

fn prim<const D: usize>(t: &Tensor<Dispatch, D>) -> burn_dispatch::DispatchTensor {
    t.clone().into_primitive().tensor()
}

/// A kernel's output read back from the device.
fn read(kernel: &str, got: Option<burn_dispatch::DispatchTensor>) -> Result<Vec<f32>, String> {
    let got = got.ok_or_else(|| format!("{kernel} did not run"))?;
    let n = got.shape().num_elements();
    let data = Tensor::<Dispatch, 1>::from_primitive(TensorPrimitive::Float(got))
        .reshape([n])
        .try_into_data()
        .map_err(|e| format!("{kernel} failed: {e:?}"))?;
    data.convert::<f32>().to_vec().map_err(|e| format!("{kernel}: {e:?}"))
}

/// A kernel's outputs, each `None` where it did not run (for [`expect`]).
fn outputs<const O: usize, const N: usize>(
    ran: crate::Ran<[burn_dispatch::DispatchTensor; O], N>,
) -> [Option<burn_dispatch::DispatchTensor>; O] {
    ran.map_or_else(|_| std::array::from_fn(|_| None), |o| o.map(Some))
}

/// `got` read back from the device and compared with `want` (exact values; half precision
/// rounds none of them).
fn expect(kernel: &str, got: Option<burn_dispatch::DispatchTensor>, want: &[f32]) -> Result<(), String> {
    let got = read(kernel, got)?;
    if got.len() != want.len() {
        return Err(format!("{kernel} gave {} values where {} are right", got.len(), want.len()));
    }
    match got.iter().zip(want).position(|(g, w)| (g - w).abs() > 1e-3 * w.abs().max(1.0)) {
        None => Ok(()),
        Some(i) => Err(format!("{kernel} gave {} at {i} where {} is right", got[i], want[i])),
    }
}

/// BatchNorm of half-precision rows `x` (8 rows alternating 0 and 1, as in [`self_test`]) with
/// f32 parameters and statistics, as mixed precision runs it: `want` is the output, and with the
/// gradient `ones` the gradients are 0, 0 and 8.
fn mixed_norm(
    device: &DispatchDevice,
    x: &burn_dispatch::DispatchTensor,
    ones: &burn_dispatch::DispatchTensor,
    want: &[f32],
) -> Result<(), String> {
    let c = x.shape()[1];
    let f32s = |v: f32| prim(&tensor(vec![v; c], [c], device, DType::F32));
    let (one, zero) = (f32s(1.0), f32s(0.0));
    let fused = crate::channel_norm_train([x.clone(), one.clone(), zero, one.clone(), one.clone()], 1e-5, 0.5);
    let [y, stats, mean, _] = fused.map_err(|_| "the mixed-precision channel norm did not run")?;
    if stats.dtype() != DType::F32 || y.dtype() != x.dtype() {
        return Err(format!(
            "the mixed-precision channel norm gave {:?} statistics, {:?} output",
            stats.dtype(),
            y.dtype()
        ));
    }
    expect("mixed-precision channel norm", Some(y), want)?;
    expect("mixed-precision running mean", Some(mean), &vec![0.75; c])?;
    let [gx, gg, gb] = outputs(crate::channel_norm_backward([x.clone(), stats, one, ones.clone()], 1e-5));
    expect("mixed-precision channel norm input gradient", gx, &vec![0.0; 8 * c])?;
    expect("mixed-precision channel norm gamma gradient", gg, &vec![0.0; c])?;
    expect("mixed-precision channel norm beta gradient", gb, &vec![8.0; c])
}

/// Runs every kernel once on `device` in `dtype` and checks its output.
fn self_test(device: &DispatchDevice, dtype: DType) -> Result<(), String> {
    // Causal depthwise conv of ones, batch 2 x 4 frames x 40 channels (two channel blocks),
    // 3 taps: y = min(t + 1, 3); with a gradient of ones, dx = min(4 - t, 3) and
    // dw[c, j] = 2 x (4 - 3 + 1 + j) = 4, 6, 8.
    let (b, t, c, k) = (2, 4, 40, 3);
    let x = tensor(vec![1.0; b * t * c], [b * t, c], device, dtype);
    let w = tensor(vec![1.0; c * k], [c, 1, k], device, dtype);
    let per_frame = |f: &dyn Fn(usize) -> f32| (0..b * t * c).map(|i| f((i / c) % t)).collect::<Vec<f32>>();
    expect("dwconv", crate::causal_dwconv(prim(&x), prim(&w), t).ok(), &per_frame(&|t| (t + 1).min(k) as f32))?;
    let (gx, gw) = crate::causal_dwconv_backward(prim(&x), prim(&w), prim(&x), t).ok().unzip();
    expect("dwconv input gradient", gx, &per_frame(&|f| (t - f).min(k) as f32))?;
    let want_gw: Vec<f32> = (0..c * k).map(|i| (b * (t - k + 1 + i % k)) as f32).collect();
    expect("dwconv weight gradient", gw, &want_gw)?;
    // The same over SiLU of 20 (20 and SiLU's derivative 1 to within half precision): 20 times
    // the conv's output and weight gradient, its input gradient.
    let x20 = tensor(vec![20.0; b * t * c], [b * t, c], device, dtype);
    let y = crate::silu_dwconv(prim(&x20), prim(&w), t).ok();
    expect("silu dwconv", y, &per_frame(&|t| 20.0 * (t + 1).min(k) as f32))?;
    let (gx, gw) = crate::silu_dwconv_backward(prim(&x20), prim(&w), prim(&x), t).ok().unzip();
    expect("silu dwconv input gradient", gx, &per_frame(&|f| (t - f).min(k) as f32))?;
    expect("silu dwconv weight gradient", gw, &want_gw.iter().map(|g| 20.0 * g).collect::<Vec<f32>>())?;

    // SiLU of 0, 20 and -20 (40 each): 0, 20 and 0 to within half precision; with a gradient of
    // ones, 0.5, 1 and 0.
    let x = tensor((0..3 * c).map(|i| [0.0, 20.0, -20.0][i / c]).collect(), [3, c], device, dtype);
    let per_third = |v: [f32; 3]| (0..3 * c).map(|i| v[i / c]).collect::<Vec<f32>>();
    expect("silu", crate::silu(prim(&x)).ok(), &per_third([0.0, 20.0, 0.0]))?;
    let ones = tensor(vec![1.0; 3 * c], [3, c], device, dtype);
    expect("silu gradient", crate::silu_backward(prim(&x), prim(&ones)).ok(), &per_third([0.5, 1.0, 0.0]))?;

    // A dense layer's gradients: x [4, 3] with x[i][j] = j + 1, w [3, 2] with w[j][l] = j + l +
    // 1, the output gradient g [4, 2] with g[i][l] = i + 1: dx[i][j] = (i + 1)(2j + 3), dw[j][l]
    // = 10 (j + 1), db[l] = 10.
    let x = tensor((0..12).map(|i| (i % 3 + 1) as f32).collect(), [4, 3], device, dtype);
    let w = tensor((0..6).map(|i| (i / 2 + i % 2 + 1) as f32).collect(), [3, 2], device, dtype);
    let g = tensor((0..8).map(|i| (i / 2 + 1) as f32).collect(), [4, 2], device, dtype);
    let [gx, gw, gb] = crate::dense_backward(prim(&x), prim(&w), prim(&g), [true; 3]).unwrap_or_default();
    let want_gx: Vec<f32> = (0..12).map(|i| ((i / 3 + 1) * (2 * (i % 3) + 3)) as f32).collect();
    expect("dense input gradient", gx, &want_gx)?;
    expect("dense weight gradient", gw, &[10.0, 10.0, 20.0, 20.0, 30.0, 30.0])?;
    expect("dense bias gradient", gb, &[10.0, 10.0])?;

    // BatchNorm over 8 rows alternating 0 and 1: mean 0.5, variance 0.25. With a gradient of
    // ones: dx = 0, dgamma = sum of the normalized rows = 0, dbeta = 8.
    let rows = 8;
    let x = tensor((0..rows * c).map(|i| ((i / c) % 2) as f32).collect(), [rows, c], device, dtype);
    let stats = crate::channel_stats(prim(&x)).ok();
    let want: Vec<f32> = [0.5f32, 0.25].iter().flat_map(|&v| vec![v; c]).collect();
    expect("channel stats", stats.clone(), &want)?;
    let stats = stats.ok_or("channel stats did not run")?;
    let ones = tensor(vec![1.0; rows * c], [rows, c], device, dtype);
    let gamma = tensor(vec![1.0; c], [c], device, dtype);
    let [gx, gg, gb] =
        outputs(crate::channel_norm_backward([prim(&x), stats.clone(), prim(&gamma), prim(&ones)], 1e-5));
    expect("channel norm input gradient", gx, &vec![0.0; rows * c])?;
    expect("channel norm gamma gradient", gg, &vec![0.0; c])?;
    expect("channel norm beta gradient", gb, &vec![rows as f32; c])?;
    let (mean, var) = crate::running_stats(stats, prim(&gamma), prim(&gamma), 0.5).ok().unzip();
    expect("running mean", mean, &vec![0.75; c])?;
    expect("running variance", var, &vec![0.625; c])?;
    // The same in one launch: the rows normalized to -1 and 1 (up to eps), beta 0.
    let zero = tensor(vec![0.0; c], [c], device, dtype);
    let fused = crate::channel_norm_train([prim(&x), prim(&gamma), prim(&zero), prim(&gamma), prim(&gamma)], 1e-5, 0.5);
    let [y, stats, mean, var] = fused.map_err(|_| "the fused channel norm did not run")?;
    let want: Vec<f32> = (0..rows * c).map(|i| if (i / c) % 2 == 0 { -1.0 } else { 1.0 }).collect();
    expect("fused channel norm", Some(y), &want)?;
    expect("fused channel stats", Some(stats), &[0.5f32, 0.25].iter().flat_map(|&v| vec![v; c]).collect::<Vec<_>>())?;
    expect("fused running mean", Some(mean), &vec![0.75; c])?;
    expect("fused running variance", Some(var), &vec![0.625; c])?;
    if dtype != DType::F32 {
        mixed_norm(device, &prim(&x), &prim(&ones), &want)?;
    }
    // Inference with those running statistics (mean 0.5, variance 0.25), gamma 2 and beta 1:
    // -1 and 3 (up to eps), in the parameters' dtype and, beside half precision, in f32.
    let want: Vec<f32> = (0..rows * c).map(|i| if (i / c) % 2 == 0 { -1.0 } else { 3.0 }).collect();
    let param_dtypes: &[DType] = if dtype == DType::F32 { &[DType::F32] } else { &[dtype, DType::F32] };
    for &p in param_dtypes {
        let per_channel = |v: f32| prim(&tensor(vec![v; c], [c], device, p));
        let params = [per_channel(2.0), per_channel(1.0), per_channel(0.5), per_channel(0.25)];
        let [gamma, beta, mean, var] = params;
        let y = crate::channel_norm_eval([prim(&x), gamma, beta, mean, var], 1e-5).ok();
        if let Some(y) = y.as_ref().filter(|y| y.dtype() != dtype) {
            return Err(format!("the inference channel norm gave {:?} output for {dtype:?} rows", y.dtype()));
        }
        expect("inference channel norm", y, &want)?;
    }
    // A conv block's middle in inference over 2 samples x 4 frames of 20 (SiLU: 20 to within
    // 1e-7), the 3 taps of ones: conv sums 20, 40, 60, 60; the norm with mean 20 and variance
    // 100 (gamma 1, beta 0): 0, 2, 4, 4 (up to eps).
    let h = tensor(vec![20.0; b * t * c], [b * t, c], device, dtype);
    let w = tensor(vec![1.0; c * k], [c, 1, k], device, dtype);
    let want = per_frame(&|f| [0.0, 2.0, 4.0, 4.0][f]);
    for &p in param_dtypes {
        let per_channel = |v: f32| prim(&tensor(vec![v; c], [c], device, p));
        let inputs = [prim(&h), prim(&w), per_channel(1.0), per_channel(0.0), per_channel(20.0), per_channel(100.0)];
        let y = crate::conv_block_eval(inputs, t, 1e-5).ok();
        if let Some(y) = y.as_ref().filter(|y| y.dtype() != dtype) {
            return Err(format!("the inference conv block gave {:?} output for {dtype:?} rows", y.dtype()));
        }
        expect("inference conv block", y, &want)?;
    }

    // Four parts gathered into 512 elements, row-major whatever their rank or strides: 1, 2 at
    // 0; the 2 x 2 matrix 3, 4 / 5, 6 at 256; the transpose of 7, 8 / 9, 10 at 300; the first
    // two columns of 11, 12, .. / 141, 142, .. (rows of 130: padded rows, as CUDA lays out a
    // new matrix) at 310; zeros elsewhere.
    let p1 = tensor(vec![1.0, 2.0], [2], device, dtype);
    let p2 = tensor(vec![3.0, 4.0, 5.0, 6.0], [2, 2], device, dtype);
    let p3 = tensor(vec![7.0, 8.0, 9.0, 10.0], [2, 2], device, dtype).swap_dims(0, 1);
    let p4 = tensor((0..260).map(|i| 11.0 + i as f32).collect(), [2, 130], device, dtype).narrow(1, 0, 2);
    let mut want = vec![0.0; 512];
    want[..2].copy_from_slice(&[1.0, 2.0]);
    want[256..260].copy_from_slice(&[3.0, 4.0, 5.0, 6.0]);
    want[300..304].copy_from_slice(&[7.0, 9.0, 8.0, 10.0]);
    want[310..314].copy_from_slice(&[11.0, 12.0, 141.0, 142.0]);
    let parts = vec![(0, prim(&p1)), (256, prim(&p2)), (300, prim(&p3)), (310, prim(&p4))];
    expect("assemble", crate::assemble(parts, 512).ok(), &want)?;

    // ECA of ones over 2 samples x 4 frames x 40 channels, frame weights 1/4 and a zero 3-tap
    // kernel: every gate is sigmoid(0) = 0.5, so y = 0.5. With a gradient of ones: dz = 4 x
    // 0.25 = 1 per channel, dx = 0.5 (the zero kernel passes nothing back to the average) and
    // dw[j] = 2 samples x the channels whose neighbour j - 1 exists: 78, 80, 78.
    let x = tensor(vec![1.0; b * t * c], [b * t, c], device, dtype);
    let weights = tensor(vec![0.25; b * t], [b, 1, t], device, dtype);
    let w = tensor(vec![0.0; 3], [1, 1, 3], device, dtype);
    expect("eca", crate::eca(prim(&x), prim(&weights), prim(&w)).ok(), &vec![0.5; b * t * c])?;
    let (gx, gw) = crate::eca_backward(prim(&x), prim(&weights), prim(&w), prim(&x)).ok().unzip();
    expect("eca input gradient", gx, &vec![0.5; b * t * c])?;
    expect("eca kernel gradient", gw, &[78.0, 80.0, 78.0])?;

    // Attention over 1 sample x 2 frames, 2 heads of 4: with qkv of ones every score is
    // 4 / sqrt(4) = 2; weights of 0.5 over 2 frames give outputs of 1. With gradients of ones,
    // the queries' and keys' gradients are 2 x 1 / 2 = 1 (values' 0); the weights' gradients 4,
    // the values' 2 x 0.5 = 1 (queries' and keys' 0).
    let (rows, width) = (2, 24);
    let qkv = tensor(vec![1.0; rows * width], [rows, width], device, dtype);
    expect("attention scores", crate::attention_scores(prim(&qkv), 1, 2).ok(), &[2.0; 8])?;
    let ones = tensor(vec![1.0; 8], [1, 2, 2, 2], device, dtype);
    let parts = |q: f32, v: f32| (0..rows * width).map(|i| if i % width < 16 { q } else { v }).collect::<Vec<f32>>();
    expect(
        "attention scores gradient",
        crate::attention_scores_backward(prim(&qkv), prim(&ones)).ok(),
        &parts(1.0, 0.0),
    )?;
    let attn = tensor(vec![0.5; 8], [1, 2, 2, 2], device, dtype);
    expect("attention values", crate::attention_values(prim(&attn), prim(&qkv)).ok(), &[1.0; 16])?;
    let grad = tensor(vec![1.0; 16], [rows, 8], device, dtype);
    let (ga, gqkv) = crate::attention_values_backward(prim(&attn), prim(&qkv), prim(&grad)).ok().unzip();
    expect("attention weights gradient", ga, &[4.0; 8])?;
    expect("attention values gradient", gqkv, &parts(0.0, 1.0))?;

    // Softmax of zero scores over 4 keys: 0.25 each. Half dropped: every kept weight is 0.5,
    // every other 0 (which are kept is a hash; the models' tests hold it to the host's mask).
    // Backward with the plain softmax and a gradient of 1 on the first key: 0.25 - 0.0625 there,
    // -0.0625 elsewhere.
    let zeros = tensor(vec![0.0; 8], [1, 1, 2, 4], device, dtype);
    let bias = tensor(vec![0.0; 4], [1, 4], device, dtype);
    let seeds = tensor(vec![1.0, 2.0, 3.0, 4.0], [4], device, dtype);
    let (y, out) = crate::softmax_dropout(prim(&zeros), prim(&bias), prim(&seeds), 0.5).ok().unzip();
    expect("softmax", y.clone(), &[0.25; 8])?;
    let kept = read("softmax dropout", out)?;
    if let Some(v) = kept.iter().find(|v| **v != 0.0 && **v != 0.5) {
        return Err(format!("softmax dropout gave {v} where 0 or 0.5 is right"));
    }
    let y = y.ok_or("softmax did not run")?;
    let grad = tensor((0..8).map(|i| if i % 4 == 0 { 1.0 } else { 0.0 }).collect(), [1, 1, 2, 4], device, dtype);
    let want: Vec<f32> = (0..8).map(|i| if i % 4 == 0 { 0.1875 } else { -0.0625 }).collect();
    expect("softmax gradient", crate::softmax_dropout_backward(y.clone(), y, prim(&grad)).ok(), &want)?;

    // One AdamW step (f32 buffers only): p = 1, g = 1, m = v = 0, beta1 0.5, beta2 0.75, eps 0,
    // lr 0.5, decay 0.5: m = 0.5, v = 0.25, bias corrections 0.5 and 0.25 at step 1 (or at
    // step 2 after one unsettled skip), the step 1 / 1 = 1, p = 1 x 0.75 - 0.5 = 0.25. A NaN
    // loss skips it: everything stays, and the skip is counted. Clipped to half the norm of 2,
    // the gradient is 0.5: m = 0.25, v = 0.0625, the step the same.
    if dtype == DType::F32 {
        let full = |v: f32| prim(&tensor(vec![v; 300], [300], device, dtype));
        let one = |v: f32| prim(&tensor(vec![v], [1], device, dtype));
        let set = |step: i32, clip: f64| crate::AdamW {
            beta1: 0.5,
            beta2: 0.75,
            epsilon: 0.0,
            weight_decay: 0.5,
            lr: 0.5,
            clip,
            step,
        };
        let cases = [
            (0.0, 1.0, 0.0, set(1, 0.0), [0.25, 0.5, 0.25, 0.0]),
            (0.0, 1.0, 1.0, set(2, 0.0), [0.25, 0.5, 0.25, 1.0]),
            (f32::NAN, 1.0, 0.0, set(1, 0.0), [1.0, 0.0, 0.0, 1.0]),
            (0.0, 4.0, 0.0, set(1, 1.0), [0.25, 0.25, 0.0625, 0.0]),
        ];
        for (loss, norm2, skips, set, want) in cases {
            let inputs = [full(1.0), full(1.0), full(0.0), full(0.0), one(loss), one(norm2), one(1.0), one(skips)];
            let [p, m, v, skipped] = outputs(crate::adamw(inputs, set));
            expect("adamw parameters", p, &[want[0]; 300])?;
            expect("adamw first moment", m, &[want[1]; 300])?;
            expect("adamw second moment", v, &[want[2]; 300])?;
            expect("adamw skip count", skipped, &[want[3]])?;
        }
    }

    // A 2 x 3 view from element 256 of 512 counting 0..64 over and over (exact in bf16 too),
    // the end not at an alignment.
    let flat = tensor((0..512).map(|i| (i % 64) as f32).collect(), [512], device, dtype);
    let want: Vec<f32> = (0..6).map(|i| i as f32).collect();
    let view = crate::views(prim(&flat), &[(256, burn::tensor::Shape::new([2, 3]))]).ok().and_then(|mut v| v.pop());
    expect("view", view, &want)
}
