//! SignFlow's preprocessing of raw landmarks (`data::preprocess`) as batched ONNX nodes, so an
//! exported model takes what MediaPipe gives: `[batch, frames, points, 3]` with NaN for a
//! missing landmark, and each sequence's frame count.
//!
//! Step by step as `Preprocessor::prepare` does it for one sequence: the reference point's mean
//! over the sequence (finite values), landmark selection, infinities as missing, frames past a
//! sequence's length or with every kept landmark missing dropped (a stable `TopK` puts the kept
//! frames first), centring and scaling by the std of the kept coordinates, coordinate choice,
//! fitting to the window (linear resampling with the host's integer positions, or a centred
//! crop), the first and second time differences, and non-finite values as 0. A sequence with no
//! frame left fills 0 frames (`infer` refuses such a file).

use data::preprocess::{Coords, LongSequences, Preprocessor};

use super::graph::{Attr, Builder};
use super::layers::frames_within;

/// The model's inputs made from raw landmarks: `features` `[batch, window, input_features]`
/// and `valid` `[batch]` (int64 frames each sequence filled).
pub struct Prepared {
    /// The features tensor's name.
    pub features: String,
    /// The valid-frames tensor's name.
    pub valid: String,
}

/// Nodes from `landmarks` (`[batch, frames, points, 3]` f32) and `lengths` (`[batch]` int64) to
/// the model input, for `points` landmarks per frame.
pub fn prepare(g: &mut Builder, pre: &Preprocessor, points: usize, landmarks: &str, lengths: &str) -> Prepared {
    let cfg = &pre.config;
    let dims = if cfg.coords == Coords::Xy { 2 } else { 3 };
    let (frames, t_row, in_seq) = frames_within(g, landmarks, lengths);
    let in_seq4 = g.unsqueeze(&in_seq, &[2, 3]);
    let nan = g.scalar(f32::NAN);

    let reference = (cfg.normalize && points > cfg.reference_point).then(|| {
        let index = g.i64_scalar(cfg.reference_point as i64);
        let r = g.op("Gather", &[landmarks, &index], vec![Attr::Int("axis", 2)]); // [B, T, 3]
        let present = g.unsqueeze(&in_seq, &[2]);
        let finite = finite(g, &r);
        let finite = g.op("And", &[&finite, &present], vec![]);
        nan_mean(g, &r, &finite, &[1], 0.5) // [B, 1, 3]
    });

    let indices = pre.kept_indices(points);
    let mut sel = if indices.iter().copied().eq(0..points) {
        landmarks.to_string()
    } else {
        let idx = g.i64s(&indices.iter().map(|&i| i as i64).collect::<Vec<_>>());
        g.op("Gather", &[landmarks, &idx], vec![Attr::Int("axis", 2)]) // [B, T, K, 3]
    };
    let inf = g.op("IsInf", &[&sel], vec![]);
    let outside = g.op("Not", &[&in_seq4], vec![]);
    let missing = g.op("Or", &[&inf, &outside], vec![]);
    sel = g.op("Where", &[&missing, &nan, &sel], vec![]);

    let keep = if cfg.drop_empty_frames {
        let isnan = g.op("IsNaN", &[&sel], vec![]);
        let present = g.op("Not", &[&isnan], vec![]);
        let present = g.op("Cast", &[&present], vec![Attr::Int("to", 1)]);
        let any = g.op("ReduceMax", &[&present], vec![Attr::Ints("axes", vec![2, 3]), Attr::Int("keepdims", 0)]);
        let zero = g.scalar(0.0);
        g.op("Greater", &[&any, &zero], vec![])
    } else {
        in_seq
    };

    if cfg.normalize {
        let reference = reference.unwrap_or_else(|| {
            let isnan = g.op("IsNaN", &[&sel], vec![]);
            let present = g.op("Not", &[&isnan], vec![]);
            let m = nan_mean(g, &sel, &present, &[1, 2], 0.0); // [B, 1, 1, 3]
            let axis = g.i64s(&[1]);
            g.op("Squeeze", &[&m, &axis], vec![])
        });
        let reference = g.unsqueeze(&reference, &[1]); // [B, 1, 1, 3]
        sel = g.op("Sub", &[&sel, &reference], vec![]);
        sel = scale_by_std(g, &sel, dims);
    }

    let width = (indices.len() * dims) as i64;
    let coords = if dims == 3 { sel } else { g.slice(&sel, 0, 2, 3) };
    let flat_shape = g.i64s(&[0, 0, width]);
    let flat = g.op("Reshape", &[&coords, &flat_shape], vec![]); // [B, T, width]

    // Kept frames first, in order: sort by frame number plus a large key for dropped frames.
    let keepf = g.op("Cast", &[&keep], vec![Attr::Int("to", 1)]);
    let order = {
        let tf = g.op("Cast", &[&t_row], vec![Attr::Int("to", 1)]);
        let (one, big) = (g.scalar(1.0), g.scalar(1e7));
        let dropped = g.op("Sub", &[&one, &keepf], vec![]);
        let penalty = g.op("Mul", &[&dropped, &big], vec![]);
        let key = g.op("Add", &[&tf, &penalty], vec![]);
        let attrs = vec![Attr::Int("axis", 1), Attr::Int("largest", 0), Attr::Int("sorted", 1)];
        g.op_outputs("TopK", &[&key, &frames], attrs, 2).remove(1) // [B, T]
    };
    let axis1 = g.i64s(&[1]);
    let kept = g.op("ReduceSum", &[&keepf, &axis1], vec![Attr::Int("keepdims", 0)]);
    let kept = g.op("Cast", &[&kept], vec![Attr::Int("to", 7)]); // [B]

    let window = cfg.window as i64;
    let (fitted, valid) = fit_window(g, &flat, &order, &kept, &frames, window, cfg.long_sequences);
    let features = time_differences(g, &fitted, &valid, window, cfg.time_differences);
    let bad = finite(g, &features);
    let zero = g.scalar(0.0);
    let features = g.op("Where", &[&bad, &features, &zero], vec![]);
    Prepared { features, valid }
}

/// True where `x` is neither NaN nor infinite.
fn finite(g: &mut Builder, x: &str) -> String {
    let (nan, inf) = (g.op("IsNaN", &[x], vec![]), g.op("IsInf", &[x], vec![]));
    let bad = g.op("Or", &[&nan, &inf], vec![]);
    g.op("Not", &[&bad], vec![])
}

/// Mean of `x` over `axes` where `present` (kept dims), `fallback` where nothing is.
fn nan_mean(g: &mut Builder, x: &str, present: &str, axes: &[i64], fallback: f32) -> String {
    let (zero, one, fb) = (g.scalar(0.0), g.scalar(1.0), g.scalar(fallback));
    let axes = g.i64s(axes);
    let keep = vec![Attr::Int("keepdims", 1)];
    let values = g.op("Where", &[present, x, &zero], vec![]);
    let sum = g.op("ReduceSum", &[&values, &axes], keep.clone());
    let count = g.op("Cast", &[present], vec![Attr::Int("to", 1)]);
    let count = g.op("ReduceSum", &[&count, &axes], keep);
    let denom = g.op("Max", &[&count, &one], vec![]);
    let mean = g.op("Div", &[&sum, &denom], vec![]);
    let any = g.op("Greater", &[&count, &zero], vec![]);
    g.op("Where", &[&any, &mean, &fb], vec![])
}

/// Divide every coordinate of each sequence by the std of its present kept coordinates (the
/// first `dims`), when there are at least two and the std is above 1e-6.
fn scale_by_std(g: &mut Builder, sel: &str, dims: usize) -> String {
    let d = if dims == 3 { sel.to_string() } else { g.slice(sel, 0, 2, 3) };
    let isnan = g.op("IsNaN", &[&d], vec![]);
    let present = g.op("Not", &[&isnan], vec![]);
    let axes = g.i64s(&[1, 2, 3]);
    let keep = vec![Attr::Int("keepdims", 1)];
    let (zero, one, tiny) = (g.scalar(0.0), g.scalar(1.0), g.scalar(1e-6));
    let count = g.op("Cast", &[&present], vec![Attr::Int("to", 1)]);
    let count = g.op("ReduceSum", &[&count, &axes], keep.clone()); // [B, 1, 1, 1]
    let denom = g.op("Max", &[&count, &one], vec![]);
    let values = g.op("Where", &[&present, &d, &zero], vec![]);
    let sum = g.op("ReduceSum", &[&values, &axes], keep.clone());
    let mean = g.op("Div", &[&sum, &denom], vec![]);
    let dev = g.op("Sub", &[&d, &mean], vec![]);
    let dev = g.op("Where", &[&present, &dev, &zero], vec![]);
    let sq = g.op("Mul", &[&dev, &dev], vec![]);
    let var = g.op("ReduceSum", &[&sq, &axes], keep);
    let var = g.op("Div", &[&var, &denom], vec![]);
    let std = g.op("Sqrt", &[&var], vec![]);
    let enough = g.op("Greater", &[&count, &one], vec![]);
    let spread = g.op("Greater", &[&std, &tiny], vec![]);
    let apply = g.op("And", &[&enough, &spread], vec![]);
    let inv = g.op("Div", &[&one, &std], vec![]);
    let scale = g.op("Where", &[&apply, &inv, &one], vec![]);
    g.op("Mul", &[sel, &scale], vec![])
}

/// The kept frames (`order` puts them first, `kept` of them) fitted to `window` rows:
/// `[batch, window, width]` and the rows filled, `min(kept, window)`.
fn fit_window(
    g: &mut Builder,
    flat: &str,
    order: &str,
    kept: &str,
    frames: &str,
    window: i64,
    mode: LongSequences,
) -> (String, String) {
    let j = g.i64s(&(0..window).collect::<Vec<_>>());
    let j = g.unsqueeze(&j, &[0]); // [1, W]
    let n = g.unsqueeze(kept, &[1]); // [B, 1]
    let w_const = g.i64_scalar(window);
    let long = g.op("Greater", &[&n, &w_const], vec![]);
    let one = g.i64_scalar(1);
    let (src0, src1, weight, exact) = match mode {
        LongSequences::Resize => {
            // pos = j (n - 1) / (W - 1) as the host computes it: integer part and remainder.
            let den = g.i64_scalar((window - 1).max(1));
            let n1 = g.op("Sub", &[&n, &one], vec![]);
            let num = g.op("Mul", &[&j, &n1], vec![]);
            let i0 = g.op("Div", &[&num, &den], vec![]);
            let back = g.op("Mul", &[&i0, &den], vec![]);
            let rem = g.op("Sub", &[&num, &back], vec![]);
            let next = g.op("Add", &[&i0, &one], vec![]);
            let i1 = g.op("Min", &[&next, &n1], vec![]);
            let remf = g.op("Cast", &[&rem], vec![Attr::Int("to", 1)]);
            let denf = g.op("Cast", &[&den], vec![Attr::Int("to", 1)]);
            let w = g.op("Div", &[&remf, &denf], vec![]);
            let zero = g.i64_scalar(0);
            let on_frame = g.op("Equal", &[&rem, &zero], vec![]);
            let short = g.op("Not", &[&long], vec![]);
            let exact = g.op("Or", &[&short, &on_frame], vec![]);
            let src0 = g.op("Where", &[&long, &i0, &j], vec![]);
            let src1 = g.op("Where", &[&long, &i1, &j], vec![]);
            (src0, src1, Some(w), Some(exact))
        }
        LongSequences::Crop => {
            let two = g.i64_scalar(2);
            let extra = g.op("Sub", &[&n, &w_const], vec![]);
            let start = g.op("Div", &[&extra, &two], vec![]);
            let shifted = g.op("Add", &[&start, &j], vec![]);
            let src = g.op("Where", &[&long, &shifted, &j], vec![]);
            (src.clone(), src, None, None)
        }
    };
    let last = g.op("Sub", &[frames, &one], vec![]);
    let rows = |g: &mut Builder, src: &str| {
        let src = g.op("Min", &[src, &last], vec![]); // [B, W], inside the input
        let original = g.op("GatherElements", &[order, &src], vec![Attr::Int("axis", 1)]);
        let idx = g.unsqueeze(&original, &[2]);
        let width = g.op("Shape", &[flat], vec![]);
        let width = g.slice(&width, 2, 3, 0);
        let ones = g.i64s(&[1, 1]);
        let target = g.op("Concat", &[&ones, &width], vec![Attr::Int("axis", 0)]);
        let idx = g.op("Expand", &[&idx, &target], vec![]);
        g.op("GatherElements", &[flat, &idx], vec![Attr::Int("axis", 1)])
    };
    let a = rows(g, &src0);
    let fitted = match (weight, exact) {
        (Some(w), Some(exact)) => {
            let b = rows(g, &src1);
            let diff = g.op("Sub", &[&b, &a], vec![]);
            let w = g.unsqueeze(&w, &[2]);
            let step = g.op("Mul", &[&diff, &w], vec![]);
            let lerp = g.op("Add", &[&a, &step], vec![]);
            let exact = g.unsqueeze(&exact, &[2]);
            g.op("Where", &[&exact, &a, &lerp], vec![])
        }
        _ => a,
    };
    let valid = g.op("Min", &[kept, &w_const], vec![]); // [B]
    (fitted, valid)
}

/// Rows past `valid` zeroed; with `diffs`, `x[t+1] - x[t]` and `x[t+2] - x[t]` appended to each
/// row (0 where `t + lag` is past `valid`).
fn time_differences(g: &mut Builder, fitted: &str, valid: &str, window: i64, diffs: bool) -> String {
    let j = g.i64s(&(0..window).collect::<Vec<_>>());
    let j = g.unsqueeze(&j, &[0]); // [1, W]
    let v = g.unsqueeze(valid, &[1]); // [B, 1]
    let zero = g.scalar(0.0);
    let inside = g.op("Less", &[&j, &v], vec![]);
    let inside = g.unsqueeze(&inside, &[2]);
    let x = g.op("Where", &[&inside, fitted, &zero], vec![]);
    if !diffs {
        return x;
    }
    let mut parts = vec![x];
    for lag in [1i64, 2] {
        let pads = g.i64s(&[0, 0, 0, 0, lag, 0]);
        let padded = g.op("Pad", &[fitted, &pads], vec![]);
        let ahead = g.slice(&padded, lag, lag + window, 1);
        let d = g.op("Sub", &[&ahead, fitted], vec![]);
        let lag_c = g.i64_scalar(lag);
        let jl = g.op("Add", &[&j, &lag_c], vec![]);
        let ok = g.op("Less", &[&jl, &v], vec![]);
        let ok = g.unsqueeze(&ok, &[2]);
        parts.push(g.op("Where", &[&ok, &d, &zero], vec![]));
    }
    let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
    g.op("Concat", &refs, vec![Attr::Int("axis", 2)])
}
