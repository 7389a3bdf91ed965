//! Connectionist Temporal Classification: the loss with its closed-form gradient (Graves et al.
//! 2006, forward-backward in log space, f64 on the host), and a Burn op that puts both into the
//! autodiff graph.
//!
//! The gradient is taken with respect to the logits under a log-softmax, the quantity every
//! framework's CTC ends up propagating: `dL/dz[t, k] = y[t, k] - (1/p) sum_{s: l'(s) = k}
//! alpha_t(s) beta_t(s)`, where `y = softmax(z)` and `alpha`, `beta` are the forward and
//! backward variables over the blank-extended target `l'`. Frames past an input's length get
//! zero gradient; a target that cannot fit its frames has an infinite loss, which
//! `zero_infinity` turns into 0 with a zero gradient (PyTorch's option of the same name).

use burn::prelude::ToElement;
use burn::tensor::activation::log_softmax;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Tensor, TensorData};

/// Loss and gradient of one sequence.
#[derive(Debug, Clone, PartialEq)]
pub struct CtcOutput {
    /// `-log p(target | input)`; `+inf` when the target cannot be aligned to the frames.
    pub nll: f64,
    /// `dL/dlogits`, `[frames, classes]` (zero past the input length).
    pub grad: Vec<f32>,
}

fn log_add(a: f64, b: f64) -> f64 {
    if a == f64::NEG_INFINITY {
        return b;
    }
    if b == f64::NEG_INFINITY {
        return a;
    }
    let (hi, lo) = if a > b { (a, b) } else { (b, a) };
    hi + (lo - hi).exp().ln_1p()
}

/// The forward pass of one sequence: the blank-extended target, the frames used, the forward
/// variables `alpha` (`[t_len, ext.len()]`, log space) and `log p(target)`; `None` when the
/// target cannot fit the frames.
struct Forward {
    ext: Vec<usize>,
    t_len: usize,
    alpha: Vec<f64>,
    log_p: f64,
}

fn forward(log_probs: &[f32], classes: usize, length: usize, target: &[usize], blank: usize) -> Option<Forward> {
    let frames = log_probs.len() / classes.max(1);
    let t_len = length.min(frames);
    let lp = |t: usize, k: usize| f64::from(log_probs[t * classes + k]);
    // The blank-extended target: blank, l1, blank, l2, ..., blank.
    let ext: Vec<usize> = std::iter::once(blank).chain(target.iter().flat_map(|&l| [l, blank])).collect();
    let s_len = ext.len();
    // A label repeated back to back needs a blank between its two frames.
    let repeats = target.windows(2).filter(|w| w[0] == w[1]).count();
    if t_len == 0 || target.len() + repeats > t_len {
        return None;
    }
    let neg = f64::NEG_INFINITY;
    let mut alpha = vec![neg; t_len * s_len];
    let can_skip = |s: usize| s >= 2 && ext[s] != blank && ext[s] != ext[s - 2];
    alpha[0] = lp(0, ext[0]);
    if s_len > 1 {
        alpha[1] = lp(0, ext[1]);
    }
    for t in 1..t_len {
        for s in 0..s_len {
            let mut a = alpha[(t - 1) * s_len + s];
            if s >= 1 {
                a = log_add(a, alpha[(t - 1) * s_len + s - 1]);
            }
            if can_skip(s) {
                a = log_add(a, alpha[(t - 1) * s_len + s - 2]);
            }
            alpha[t * s_len + s] = if a == neg { neg } else { a + lp(t, ext[s]) };
        }
    }
    let last = (t_len - 1) * s_len;
    let mut log_p = alpha[last + s_len - 1];
    if s_len > 1 {
        log_p = log_add(log_p, alpha[last + s_len - 2]);
    }
    Some(Forward { ext, t_len, alpha, log_p })
}

/// `-log p(target | input)` of one sequence (as [`ctc_one`]'s `nll`, without the backward pass
/// and gradient): what validation needs.
pub fn ctc_nll(log_probs: &[f32], classes: usize, length: usize, target: &[usize], blank: usize) -> f64 {
    forward(log_probs, classes, length, target, blank).map_or(f64::INFINITY, |f| -f.log_p)
}

/// CTC of one sequence from log-probabilities `log_probs` (`[frames, classes]`, row-major, each row a
/// log-softmax) of which the first `length` frames are real; `target` holds class indices, none of
/// them `blank`.
pub fn ctc_one(log_probs: &[f32], classes: usize, length: usize, target: &[usize], blank: usize) -> CtcOutput {
    let frames = log_probs.len() / classes.max(1);
    let mut grad = vec![0f32; frames * classes];
    let neg = f64::NEG_INFINITY;
    let Some(Forward { ext, t_len, alpha, log_p }) = forward(log_probs, classes, length, target, blank) else {
        return CtcOutput { nll: f64::INFINITY, grad };
    };
    if log_p == neg {
        return CtcOutput { nll: f64::INFINITY, grad };
    }
    let lp = |t: usize, k: usize| f64::from(log_probs[t * classes + k]);
    let s_len = ext.len();
    let last = (t_len - 1) * s_len;
    let mut beta = vec![neg; t_len * s_len];
    beta[last + s_len - 1] = lp(t_len - 1, ext[s_len - 1]);
    if s_len > 1 {
        beta[last + s_len - 2] = lp(t_len - 1, ext[s_len - 2]);
    }
    for t in (0..t_len - 1).rev() {
        for s in 0..s_len {
            let mut b = beta[(t + 1) * s_len + s];
            if s + 1 < s_len {
                b = log_add(b, beta[(t + 1) * s_len + s + 1]);
            }
            if s + 2 < s_len && ext[s] != blank && ext[s] != ext[s + 2] {
                b = log_add(b, beta[(t + 1) * s_len + s + 2]);
            }
            beta[t * s_len + s] = if b == neg { neg } else { b + lp(t, ext[s]) };
        }
    }
    // alpha and beta both include y_t(l'_s): their product over y_t counts it once.
    let mut occupancy = vec![neg; classes];
    for t in 0..t_len {
        occupancy.iter_mut().for_each(|o| *o = neg);
        for s in 0..s_len {
            let ab = alpha[t * s_len + s] + beta[t * s_len + s];
            occupancy[ext[s]] = log_add(occupancy[ext[s]], ab);
        }
        for k in 0..classes {
            let y = lp(t, k).exp();
            let post = if occupancy[k] == neg { 0.0 } else { (occupancy[k] - lp(t, k) - log_p).exp() };
            grad[t * classes + k] = (y - post) as f32;
        }
    }
    CtcOutput { nll: -log_p, grad }
}

/// The log-softmax over classes of `[batch, frames, classes]` logits, in f32, read to the host
/// (row-major): what the CTC loss and the decoders take.
pub fn host_log_probs<B: Backend>(logits: Tensor<B, 3>) -> Vec<f32> {
    let log_probs = log_softmax(logits.cast(burn::tensor::DType::F32), 2);
    log_probs.into_data().convert::<f32>().to_vec().expect("f32 data")
}

/// How per-sequence losses become one number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduction {
    /// Mean over the batch of `nll / target length` (PyTorch's `reduction="mean"`).
    MeanPerToken,
    /// Sum over the batch.
    Sum,
}

/// CTC loss of a batch of logits `[batch, frames, classes]` (log-softmax is applied here), in
/// f32 whatever the logits' dtype, with the closed-form gradient: the returned scalar's backward
/// gives exactly [`ctc_one`]'s gradients (scaled by the reduction). Also returns each sequence's
/// `nll` (`+inf` where its target cannot be aligned; those count 0 when `zero_infinity`).
pub fn ctc_loss<B: AutodiffBackend>(
    logits: Tensor<B, 3>,
    lengths: &[usize],
    targets: &[Vec<usize>],
    blank: usize,
    reduction: Reduction,
    zero_infinity: bool,
) -> (Tensor<B, 1>, Vec<f64>) {
    let (loss, nll, _) = ctc_loss_with_log_probs(logits, lengths, targets, blank, reduction, zero_infinity);
    (loss, nll)
}

/// [`ctc_loss`], also returning the host copy of the log-probabilities (`[batch, frames,
/// classes]`, row-major) it computed the loss from, so a caller can decode without a second
/// read from the device.
pub fn ctc_loss_with_log_probs<B: AutodiffBackend>(
    logits: Tensor<B, 3>,
    lengths: &[usize],
    targets: &[Vec<usize>],
    blank: usize,
    reduction: Reduction,
    zero_infinity: bool,
) -> (Tensor<B, 1>, Vec<f64>, Vec<f32>) {
    let [batch, frames, classes] = logits.dims();
    let device = logits.device();
    let logits = logits.cast(burn::tensor::DType::F32);
    let host = host_log_probs(logits.clone().detach());
    let per = frames * classes;
    let outputs: Vec<CtcOutput> =
        (0..batch).map(|b| ctc_one(&host[b * per..(b + 1) * per], classes, lengths[b], &targets[b], blank)).collect();
    let mut total = 0f64;
    let mut grad = vec![0f32; batch * per];
    for (b, out) in outputs.iter().enumerate() {
        let weight = match reduction {
            Reduction::MeanPerToken => 1.0 / (batch as f64 * targets[b].len().max(1) as f64),
            Reduction::Sum => 1.0,
        };
        if out.nll.is_infinite() {
            if zero_infinity {
                continue;
            }
            total = f64::INFINITY;
            continue;
        }
        total += out.nll * weight;
        for (g, v) in grad[b * per..(b + 1) * per].iter_mut().zip(&out.grad) {
            *g = (*v as f64 * weight) as f32;
        }
    }
    let g = Tensor::<B, 3>::from_data(TensorData::new(grad, [batch, frames, classes]), &device);
    // sum(logits * g) has gradient g; shifting it by a constant to the loss value keeps that.
    let surrogate = (logits * g).sum();
    let offset = total as f32 - surrogate.clone().detach().into_scalar().to_f32();
    (surrogate.add_scalar(offset), outputs.iter().map(|o| o.nll).collect(), host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_softmax_rows(z: &[f64], classes: usize) -> Vec<f32> {
        z.chunks(classes)
            .flat_map(|row| {
                let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let lse = m + row.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
                row.iter().map(move |v| (v - lse) as f32).collect::<Vec<_>>()
            })
            .collect()
    }

    /// -log p by enumerating every alignment (frames^classes paths), for tiny cases.
    fn brute_force(lp: &[f32], classes: usize, frames: usize, target: &[usize], blank: usize) -> f64 {
        let mut total = 0f64;
        let mut path = vec![0usize; frames];
        loop {
            // Collapse: merge repeats, drop blanks.
            let mut out = Vec::new();
            let mut prev = None;
            for &k in &path {
                if Some(k) != prev && k != blank {
                    out.push(k);
                }
                prev = Some(k);
            }
            if out == target {
                total += path.iter().enumerate().map(|(t, &k)| f64::from(lp[t * classes + k])).sum::<f64>().exp();
            }
            let mut i = 0;
            loop {
                if i == frames {
                    return -total.ln();
                }
                path[i] += 1;
                if path[i] < classes {
                    break;
                }
                path[i] = 0;
                i += 1;
            }
        }
    }

    #[test]
    fn hand_computed_cases() {
        // Uniform over 2 classes (blank 0, a 1), 2 frames, target [a]: paths "aa", "_a", "a_" -> 3/4.
        let lp = vec![(0.5f32).ln(); 4];
        let out = ctc_one(&lp, 2, 2, &[1], 0);
        assert!((out.nll - (-(0.75f64).ln())).abs() < 1e-7, "{}", out.nll);
        // Target [a, a] needs "a_a": 3 frames, probability 1/8.
        let lp = vec![(0.5f32).ln(); 6];
        assert!((ctc_one(&lp, 2, 3, &[1, 1], 0).nll - 8f64.ln()).abs() < 1e-6);
        // ... and cannot fit in 2 frames.
        assert!(ctc_one(&lp[..4], 2, 2, &[1, 1], 0).nll.is_infinite());
        // Empty target: all blanks, (1/2)^3.
        assert!((ctc_one(&lp, 2, 3, &[], 0).nll - 8f64.ln()).abs() < 1e-6);
    }

    #[test]
    fn loss_equals_brute_force_and_gradient_equals_finite_differences() {
        let (classes, frames) = (3, 5);
        let mut x = 0x2545F4914F6CDD1Du64;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0
        };
        let z: Vec<f64> = (0..frames * classes).map(|_| rnd()).collect();
        for target in [vec![1], vec![1, 2], vec![2, 2], vec![1, 2, 1], vec![]] {
            let lp = log_softmax_rows(&z, classes);
            let out = ctc_one(&lp, classes, frames, &target, 0);
            let exact = brute_force(&lp, classes, frames, &target, 0);
            assert!((out.nll - exact).abs() < 1e-5, "{target:?}: {} vs {exact}", out.nll);
            assert_eq!(ctc_nll(&lp, classes, frames, &target, 0), out.nll, "forward-only loss");
            // d nll / d z by central differences through the log-softmax.
            for i in 0..frames * classes {
                let h = 1e-4;
                let mut zp = z.clone();
                zp[i] += h;
                let mut zm = z.clone();
                zm[i] -= h;
                let fp = ctc_one(&log_softmax_rows(&zp, classes), classes, frames, &target, 0).nll;
                let fm = ctc_one(&log_softmax_rows(&zm, classes), classes, frames, &target, 0).nll;
                let numeric = (fp - fm) / (2.0 * h);
                assert!(
                    (f64::from(out.grad[i]) - numeric).abs() < 2e-3,
                    "{target:?} [{i}]: {} vs {numeric}",
                    out.grad[i]
                );
            }
        }
    }

    #[test]
    fn frames_past_the_length_do_not_matter() {
        let classes = 4;
        let z: Vec<f64> = (0..8 * classes).map(|i| ((i * 37 % 11) as f64) * 0.3 - 1.5).collect();
        let lp = log_softmax_rows(&z, classes);
        let short = ctc_one(&lp[..5 * classes], classes, 5, &[1, 3], 0);
        let padded = ctc_one(&lp, classes, 5, &[1, 3], 0);
        assert_eq!(short.nll, padded.nll);
        assert_eq!(&padded.grad[..5 * classes], &short.grad[..]);
        assert!(padded.grad[5 * classes..].iter().all(|&g| g == 0.0));
    }
}
