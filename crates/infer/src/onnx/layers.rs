//! Burn layers as ONNX nodes in eval form: weights read from the module, every BatchNorm folded
//! into the product before or after it, no dropout. Activations are `[batch, frames, channels]`.

use burn::module::Param;
use burn::nn::{BatchNorm, Linear};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

use engine::graph::norm;

use super::graph::{Attr, Builder};

/// A tensor's values on the host, row-major.
pub fn host<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    t.into_data().iter::<f32>().collect()
}

fn param<B: Backend, const D: usize>(p: &Param<Tensor<B, D>>) -> Vec<f32> {
    host(p.val())
}

/// A linear layer's weight `[in, out]`, sizes and bias.
pub struct Dense {
    /// Row-major `[inputs, outputs]`.
    pub w: Vec<f32>,
    /// Inputs.
    pub k: usize,
    /// Outputs.
    pub n: usize,
    /// Bias, if any.
    pub bias: Option<Vec<f32>>,
}

impl Dense {
    /// A Burn `Linear`'s weights (`x W + b`).
    pub fn of<B: Backend>(l: &Linear<B>) -> Self {
        let [k, n] = l.weight.dims();
        Self { w: param(&l.weight), k, n, bias: l.bias.as_ref().map(param) }
    }

    /// `l` after a BatchNorm (`x s + h`): rows scaled by `s`, bias `h W + b`.
    pub fn after_norm<B: Backend>(bn: &BatchNorm<B>, l: &Linear<B>) -> Self {
        let mut d = Self::of(l);
        let (s, h) = norm(bn);
        let mut b: Vec<f64> = d.bias.take().map_or(vec![0.0; d.n], |b| b.iter().map(|&v| v as f64).collect());
        for (i, row) in d.w.chunks_mut(d.n).enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                b[j] += h[i] as f64 * *v as f64;
                *v *= s[i];
            }
        }
        d.bias = Some(b.into_iter().map(|v| v as f32).collect());
        d
    }

    /// `l` then a BatchNorm: columns scaled by `s`, bias `b s + h`.
    pub fn then_norm<B: Backend>(l: &Linear<B>, bn: &BatchNorm<B>) -> Self {
        let mut d = Self::of(l);
        let (s, h) = norm(bn);
        d.w.chunks_mut(d.n).for_each(|row| row.iter_mut().zip(&s).for_each(|(w, s)| *w *= s));
        d.bias = Some((0..d.n).map(|j| d.bias.as_ref().map_or(0.0, |b| b[j]) * s[j] + h[j]).collect());
        d
    }

    /// `x W + b` in `g`.
    pub fn apply(self, g: &mut Builder, x: &str) -> String {
        let w = g.f32s("weight", &[self.k, self.n], self.w);
        let y = g.op("MatMul", &[x, &w], vec![]);
        match self.bias {
            Some(b) => {
                let b = g.f32s("bias", &[self.n], b);
                g.op("Add", &[&y, &b], vec![])
            }
            None => y,
        }
    }
}

/// `x * sigmoid(x)`.
pub fn silu(g: &mut Builder, x: &str) -> String {
    let s = g.op("Sigmoid", &[x], vec![]);
    g.op("Mul", &[x, &s], vec![])
}

/// The padding mask's forms, built once from the graph input `valid` (`[batch]` int64 frames of
/// each sequence) and the frame count of `x`.
pub struct Mask {
    /// `[batch, 1, frames]`: `1 / count` on valid frames, 0 on padding (masked means).
    pub mean_weights: String,
    /// `[batch, 1, 1, frames]`: -1e4 on padded keys, 0 elsewhere (attention).
    pub key_bias: String,
}

/// The frame positions of `x` (`[batch, frames, ...]`) against each sequence's length: the
/// frame count `[1]`, the positions `[1, frames]` and whether each frame is inside its sequence
/// `[batch, frames]` (bool; `lengths` is `[batch]` int64).
pub fn frames_within(g: &mut Builder, x: &str, lengths: &str) -> (String, String, String) {
    let shape = g.op("Shape", &[x], vec![]);
    let frames = g.slice(&shape, 1, 2, 0); // [1]
    let (zero, one) = (g.i64_scalar(0), g.i64_scalar(1));
    let last = g.op("Squeeze", &[&frames], vec![]);
    let range = g.op("Range", &[&zero, &last, &one], vec![]);
    let positions = g.unsqueeze(&range, &[0]); // [1, T]
    let lengths = g.unsqueeze(lengths, &[1]); // [B, 1]
    let inside = g.op("Less", &[&positions, &lengths], vec![]); // [B, T]
    (frames, positions, inside)
}

impl Mask {
    /// The mask of `x` (`[batch, frames, _]`) with `valid` frames per sequence.
    pub fn new(g: &mut Builder, x: &str, valid: &str) -> Self {
        let (_, _, is_valid) = frames_within(g, x, valid);
        let axis1 = g.i64s(&[1]);
        let validf = g.op("Cast", &[&is_valid], vec![Attr::Int("to", 1)]);
        let count = g.op("ReduceSum", &[&validf, &axis1], vec![Attr::Int("keepdims", 1)]);
        let (one_f, pad_bias, axes12) = (g.scalar(1.0), g.scalar(-1e4), g.i64s(&[1, 2]));
        let count = g.op("Max", &[&count, &one_f], vec![]);
        let weights = g.op("Div", &[&validf, &count], vec![]);
        let mean_weights = g.op("Unsqueeze", &[&weights, &axis1], vec![]);
        let pad = g.op("Sub", &[&one_f, &validf], vec![]);
        let bias = g.op("Mul", &[&pad, &pad_bias], vec![]);
        let key_bias = g.op("Unsqueeze", &[&bias, &axes12], vec![]);
        Self { mean_weights, key_bias }
    }

    /// Mean of `x` (`[batch, frames, channels]`) over each sequence's valid frames:
    /// `[batch, channels]`.
    pub fn mean(&self, g: &mut Builder, x: &str) -> String {
        let m = g.op("MatMul", &[&self.mean_weights, x], vec![]); // [B, 1, C]
        let axis1 = g.i64s(&[1]);
        g.op("Squeeze", &[&m, &axis1], vec![])
    }
}

/// Multi-head self-attention from q, k, v (`[batch, frames, dim]` each) with the key bias:
/// `[batch, frames, dim]`, heads side by side.
pub fn attention(g: &mut Builder, q: &str, k: &str, v: &str, heads: usize, dim: usize, mask: &Mask) -> String {
    let hd = dim / heads;
    let split = g.i64s(&[0, 0, heads as i64, hd as i64]);
    let heads_of = |g: &mut Builder, x: &str, perm: Vec<i64>| {
        let r = g.op("Reshape", &[x, &split], vec![]);
        g.op("Transpose", &[&r], vec![Attr::Ints("perm", perm)])
    };
    let q = heads_of(g, q, vec![0, 2, 1, 3]); // [B, H, T, hd]
    let kt = heads_of(g, k, vec![0, 2, 3, 1]); // [B, H, hd, T]
    let v = heads_of(g, v, vec![0, 2, 1, 3]);
    let scores = g.op("MatMul", &[&q, &kt], vec![]);
    let scale = g.scalar(1.0 / (hd as f32).sqrt());
    let scores = g.op("Mul", &[&scores, &scale], vec![]);
    let scores = g.op("Add", &[&scores, &mask.key_bias], vec![]);
    let attn = g.op("Softmax", &[&scores], vec![Attr::Int("axis", -1)]);
    let out = g.op("MatMul", &[&attn, &v], vec![]); // [B, H, T, hd]
    let out = g.op("Transpose", &[&out], vec![Attr::Ints("perm", vec![0, 2, 1, 3])]);
    let merged = g.i64s(&[0, 0, dim as i64]);
    g.op("Reshape", &[&out, &merged], vec![])
}

/// The last axis of `x` cut into `parts` equal pieces.
pub fn split_last(g: &mut Builder, x: &str, parts: usize, size: usize) -> Vec<String> {
    (0..parts).map(|i| g.slice(x, (i * size) as i64, ((i + 1) * size) as i64, 2)).collect()
}
