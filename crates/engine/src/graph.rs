//! The conv-transformer as an eval-only graph on host memory: every BatchNorm folded into the
//! layer before or after it, no autodiff, no dropout, dense layers in f32 or int8.
//!
//! Folding (eval BatchNorm is `x * s + h` per channel, `s = gamma / sqrt(var + eps)`,
//! `h = beta - mean * s`):
//! - stem, then norm: the stem's columns scaled by `s`, bias `h`;
//! - depthwise conv, then norm: the taps scaled by `s`, shift `h` added per frame;
//! - norm, then q/k/v (and norm, then the feed-forward input): the weight's rows scaled by `s`,
//!   bias `h W` (+ the layer's own bias).

use burn::module::Param;
use burn::nn::{BatchNorm, Linear};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use rayon::prelude::*;

use crate::act;
use crate::dense::{matmul_bt, matmul_into, Dense, Weights};
use crate::EngineError;
use models::conv_transformer::{ConvBlock, ConvTransformer, TransformerBlock};
use models::SignModel;

/// Key bias of padded frames in attention (as the training graph: `mask * -1e4`).
const PAD_BIAS: f32 = -1e4;

/// A conv-transformer ready for inference on the CPU.
#[derive(Debug, Clone)]
pub struct EvalGraph {
    stem: Dense,
    conv_blocks: Vec<EvalConvBlock>,
    transformer_blocks: Vec<EvalTransformerBlock>,
    per_stage: usize,
    top: Dense,
    classifier: Dense,
    features: usize,
    classes: usize,
    weights: Weights,
}

/// One [`ConvBlock`] of the eval graph, built from the module's weights: expand + SiLU, the
/// causal depthwise conv with its BatchNorm folded in, the ECA gate, project, residual. The
/// graph is these blocks in the module tree's order; each equals Burn's eval forward of its
/// block within float rounding (tested block by block).
#[derive(Debug, Clone)]
pub struct EvalConvBlock {
    expand: Dense,
    /// `[kernel, channels]`, norm scale folded in.
    taps: Vec<f32>,
    /// Norm shift per channel.
    shift: Vec<f32>,
    kernel: usize,
    /// ECA's channel-conv taps.
    eca: Vec<f32>,
    project: Dense,
}

/// One [`TransformerBlock`] of the eval graph, built from the module's weights: both
/// BatchNorms folded into the q/k/v and feed-forward input products, masked multi-head
/// attention, the feed-forward with SiLU, both residuals (tested against Burn's eval forward of
/// its block, like [`EvalConvBlock`]).
#[derive(Debug, Clone)]
pub struct EvalTransformerBlock {
    qkv: Dense,
    proj: Dense,
    ffn_in: Dense,
    ffn_out: Dense,
    heads: usize,
}

fn host<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    t.into_data().iter::<f32>().collect()
}

fn param<B: Backend, const D: usize>(p: &Param<Tensor<B, D>>) -> Vec<f32> {
    host(p.val())
}

/// A `Linear`'s weight `[in, out]`, its sizes and bias.
fn linear<B: Backend>(l: &Linear<B>) -> (Vec<f32>, usize, usize, Option<Vec<f32>>) {
    let [k, n] = l.weight.dims();
    (param(&l.weight), k, n, l.bias.as_ref().map(param))
}

/// Eval BatchNorm as `(scale, shift)` per channel (`x * scale + shift`), the one folding of a
/// norm every eval form uses (this graph, the int8 graph, the ONNX export).
pub fn norm<B: Backend>(bn: &BatchNorm<B>) -> (Vec<f32>, Vec<f32>) {
    let (gamma, beta) = (param(&bn.gamma), param(&bn.beta));
    let (mean, var) = (host(bn.running_mean.value()), host(bn.running_var.value()));
    let scale: Vec<f32> =
        gamma.iter().zip(&var).map(|(g, v)| (*g as f64 / (*v as f64 + bn.epsilon).sqrt()) as f32).collect();
    let shift = beta.iter().zip(&mean).zip(&scale).map(|((b, m), s)| b - m * s).collect();
    (scale, shift)
}

/// A `Linear` with a norm folded in, on the host: weight `[k, n]` row-major and its bias.
pub(crate) struct FoldedLinear {
    pub(crate) w: Vec<f32>,
    pub(crate) k: usize,
    pub(crate) n: usize,
    pub(crate) bias: Vec<f32>,
}

impl FoldedLinear {
    /// Norm after a linear: columns scaled, bias `b * s + h`.
    pub(crate) fn after<B: Backend>(l: &Linear<B>, bn: &BatchNorm<B>) -> Self {
        let (mut w, k, n, bias) = linear(l);
        let (s, h) = norm(bn);
        w.chunks_mut(n).for_each(|row| row.iter_mut().zip(&s).for_each(|(w, s)| *w *= s));
        let bias = (0..n).map(|j| bias.as_ref().map_or(0.0, |b| b[j]) * s[j] + h[j]).collect();
        Self { w, k, n, bias }
    }

    /// Norm before a linear: rows scaled, bias `h W + b`.
    pub(crate) fn before<B: Backend>(bn: &BatchNorm<B>, l: &Linear<B>) -> Self {
        let (mut w, k, n, bias) = linear(l);
        let (s, h) = norm(bn);
        let mut b: Vec<f64> = bias.map_or(vec![0.0; n], |b| b.iter().map(|v| *v as f64).collect());
        for (i, row) in w.chunks_mut(n).enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                b[j] += h[i] as f64 * *v as f64;
                *v *= s[i];
            }
        }
        Self { w, k, n, bias: b.into_iter().map(|v| v as f32).collect() }
    }

    fn dense(self, weights: Weights) -> Dense {
        Dense::new(self.w, self.k, self.n, Some(self.bias), weights)
    }
}

fn plain<B: Backend>(l: &Linear<B>, weights: Weights) -> Dense {
    let (w, k, n, bias) = linear(l);
    Dense::new(w, k, n, bias, weights)
}

impl EvalConvBlock {
    /// The eval form of `b`, its dense layers stored as `weights` says.
    pub fn new<B: Backend>(b: &ConvBlock<B>, weights: Weights) -> Self {
        let [c, _, kernel] = b.dwconv.conv.weight.dims();
        let w = param(&b.dwconv.conv.weight); // [c, 1, kernel]
        let (s, shift) = norm(&b.norm.bn);
        let mut taps = vec![0.0f32; kernel * c];
        for ch in 0..c {
            for j in 0..kernel {
                taps[j * c + ch] = w[ch * kernel + j] * s[ch];
            }
        }
        Self {
            expand: plain(&b.expand, weights),
            taps,
            shift,
            kernel,
            eca: param(&b.eca.conv.weight),
            project: plain(&b.project, weights),
        }
    }

    /// The block applied in place to `x`, `[batch, t, dim]` row-major (`batch = valid.len()`),
    /// sequence `b` holding `valid[b]` frames followed by padding.
    pub fn forward(&self, x: &mut [f32], valid: &[usize], t: usize) {
        let rows = valid.len() * t;
        let mut e = self.expand.forward(x, rows);
        silu(&mut e);
        let c = self.expand.outputs();
        let mut h = self.dwconv(&e, t, c);
        self.eca_gate(&mut h, valid, t, c);
        self.project.forward_add(&h, rows, x);
    }

    /// Causal depthwise conv with the norm folded in: frame `ti` sees frames `ti-k+1 ..= ti`.
    fn dwconv(&self, x: &[f32], t: usize, c: usize) -> Vec<f32> {
        let k = self.kernel;
        models::par::fill_rows(x.len(), c, |row, o| {
            let (bi, ti) = (row / t, row % t);
            let first = (k - 1).saturating_sub(ti);
            let src = (bi * t + ti + first + 1 - k) * c;
            dwconv_frame(o, &self.shift, &self.taps[first * c..], &x[src..src + (k - first) * c]);
        })
    }

    /// ECA: sigmoid of a channel conv over the valid frames' mean, multiplied into every frame.
    fn eca_gate(&self, h: &mut [f32], valid: &[usize], t: usize, c: usize) {
        let k = self.eca.len();
        let half = k / 2;
        h.par_chunks_mut(t * c).zip(valid).for_each(|(seq, &n)| {
            let mean = valid_mean(seq, n, c);
            let mut gate: Vec<f32> = (0..c)
                .map(|ch| {
                    (0..k)
                        .filter_map(|j| (ch + j).checked_sub(half).filter(|&i| i < c).map(|i| self.eca[j] * mean[i]))
                        .sum()
                })
                .collect();
            act::sigmoid(&mut gate);
            for frame in seq.chunks_mut(c) {
                frame.iter_mut().zip(&gate).for_each(|(v, g)| *v *= g);
            }
        });
    }
}

impl EvalTransformerBlock {
    /// The eval form of `b`, its dense layers stored as `weights` says.
    pub fn new<B: Backend>(b: &TransformerBlock<B>, weights: Weights) -> Self {
        Self {
            qkv: FoldedLinear::before(&b.norm1.bn, &b.attention.qkv).dense(weights),
            proj: plain(&b.attention.proj, weights),
            ffn_in: FoldedLinear::before(&b.norm2.bn, &b.ffn_in).dense(weights),
            ffn_out: plain(&b.ffn_out, weights),
            heads: b.attention.heads,
        }
    }

    /// The block applied in place to `x`, `[batch, t, dim]` row-major (`batch = valid.len()`),
    /// sequence `b` holding `valid[b]` frames followed by padding.
    pub fn forward(&self, x: &mut [f32], valid: &[usize], t: usize) {
        let rows = valid.len() * t;
        let d = self.proj.outputs();
        let qkv = self.qkv.forward(x, rows);
        let att = self.attention(&qkv, valid, t, d);
        self.proj.forward_add(&att, rows, x);
        let mut f = self.ffn_in.forward(x, rows);
        silu(&mut f);
        self.ffn_out.forward_add(&f, rows, x);
    }

    /// Multi-head attention over `[rows, 3d]` (q | k | v columns, head `h` in columns
    /// `h*hd..(h+1)*hd` of each): `[rows, d]`, heads side by side.
    fn attention(&self, qkv: &[f32], valid: &[usize], t: usize, d: usize) -> Vec<f32> {
        let heads = self.heads;
        let hd = d / heads;
        let scale = 1.0 / (hd as f32).sqrt();
        let parts: Vec<Vec<f32>> = (0..valid.len() * heads)
            .into_par_iter()
            .map(|task| {
                let (bi, h) = (task / heads, task % heads);
                let base = &qkv[bi * t * 3 * d..(bi + 1) * t * 3 * d];
                let mut scores = vec![0.0f32; t * t];
                matmul_bt(&mut scores, &base[h * hd..], 3 * d, &base[d + h * hd..], 3 * d, t, hd, t, scale);
                for row in scores.chunks_mut(t) {
                    row[valid[bi]..].iter_mut().for_each(|s| *s += PAD_BIAS);
                    act::softmax(row);
                }
                let mut out = vec![0.0f32; t * hd];
                matmul_into(&mut out, hd, &scores, t, &base[2 * d + h * hd..], 3 * d, t, t, hd);
                out
            })
            .collect();
        let mut att = vec![0.0f32; valid.len() * t * d];
        for (task, part) in parts.iter().enumerate() {
            let (bi, h) = (task / heads, task % heads);
            for (ti, src) in part.chunks(hd).enumerate() {
                let dst = (bi * t + ti) * d + h * hd;
                att[dst..dst + hd].copy_from_slice(src);
            }
        }
        att
    }
}

/// Mean of the first `n` frames (`c` channels each) of one sequence (zeros when `n` is 0, as the
/// training graph's count clamped to 1).
fn valid_mean(seq: &[f32], n: usize, c: usize) -> Vec<f32> {
    let mut mean = vec![0.0f32; c];
    for frame in seq.chunks(c).take(n) {
        mean.iter_mut().zip(frame).for_each(|(m, v)| *m += v);
    }
    let inv = 1.0 / n.max(1) as f32;
    mean.iter_mut().for_each(|m| *m *= inv);
    mean
}

models::multiversion!(
    /// One output frame of the depthwise conv: `o = shift + sum_j taps[j] * x[j]` over the
    /// channels, for the `x.len() / o.len()` frames of `x` and the matching rows of `taps`.
    fn dwconv_frame(o: &mut [f32], shift: &[f32], taps: &[f32], x: &[f32]) {
        let c = o.len();
        o.copy_from_slice(shift);
        for (w, v) in taps.chunks_exact(c).zip(x.chunks_exact(c)) {
            o.iter_mut().zip(w).zip(v).for_each(|((o, w), v)| *o += w * v);
        }
    }
);

/// `x * sigmoid(x)` in place, on rayon's threads.
fn silu(x: &mut [f32]) {
    x.par_chunks_mut(4096).for_each(act::silu);
}

impl EvalGraph {
    /// The eval graph of `model`: a conv-transformer; the other architectures are not supported.
    pub fn new<B: Backend>(model: &SignModel<B>, weights: Weights) -> Result<Self, EngineError> {
        match model {
            SignModel::ConvTransformer(m) => Ok(Self::conv_transformer(m, weights)),
            SignModel::Transformer(_) => Err(EngineError::Unsupported("transformer".into())),
            SignModel::Gru(_) => Err(EngineError::Unsupported("gru".into())),
        }
    }

    /// The eval graph of a conv-transformer.
    pub fn conv_transformer<B: Backend>(m: &ConvTransformer<B>, weights: Weights) -> Self {
        let [features, _] = m.stem.weight.dims();
        let [_, classes] = m.classifier.weight.dims();
        Self {
            stem: FoldedLinear::after(&m.stem, &m.stem_norm.bn).dense(weights),
            conv_blocks: m.conv_blocks.iter().map(|b| EvalConvBlock::new(b, weights)).collect(),
            transformer_blocks: m.transformer_blocks.iter().map(|b| EvalTransformerBlock::new(b, weights)).collect(),
            per_stage: m.conv_blocks_per_stage,
            top: plain(&m.top, weights),
            classifier: plain(&m.classifier, Weights::F32),
            features,
            classes,
            weights,
        }
    }

    /// How the dense layers are stored.
    pub fn weights(&self) -> Weights {
        self.weights
    }

    /// Input features per frame.
    pub fn input_features(&self) -> usize {
        self.features
    }

    /// Output classes.
    pub fn classes(&self) -> usize {
        self.classes
    }

    /// Bytes of parameters held (weights, biases, folded norms).
    pub fn bytes(&self) -> usize {
        let convs: usize = self
            .conv_blocks
            .iter()
            .map(|b| b.expand.bytes() + b.project.bytes() + 4 * (b.taps.len() + b.shift.len() + b.eca.len()))
            .sum();
        let blocks: usize = self
            .transformer_blocks
            .iter()
            .map(|b| b.qkv.bytes() + b.proj.bytes() + b.ffn_in.bytes() + b.ffn_out.bytes())
            .sum();
        self.stem.bytes() + convs + blocks + self.top.bytes() + self.classifier.bytes()
    }

    /// Class logits `[batch, classes]` of `x` (`[batch, frames, features]`), sequence `b`
    /// holding `valid[b]` frames followed by padding.
    pub fn logits(&self, x: &[f32], valid: &[usize], frames: usize) -> Result<Vec<f32>, EngineError> {
        let c = self.top.outputs();
        let pooled = self.per_part(x, valid, frames, |part, v| {
            let h = self.encode(part, v, frames);
            (0..v.len()).flat_map(|bi| valid_mean(&h[bi * frames * c..(bi + 1) * frames * c], v[bi], c)).collect()
        })?;
        Ok(self.classifier.forward(&pooled, valid.len()))
    }

    /// Per-frame logits `[batch, frames, classes]` (the CTC head).
    pub fn frame_logits(&self, x: &[f32], valid: &[usize], frames: usize) -> Result<Vec<f32>, EngineError> {
        self.per_part(x, valid, frames, |part, v| {
            self.classifier.forward(&self.encode(part, v, frames), v.len() * frames)
        })
    }

    /// `f(inputs, valid)` over parts of the batch, outputs concatenated in batch order, after the
    /// shapes are checked. A batch of at least two sequences per rayon thread is cut into one
    /// part per thread and the parts run side by side, each through the whole graph: every layer
    /// then works on one thread's rows, which stay in that core's cache, instead of every
    /// layer's product and loop being split over the threads and joined again (dozens of
    /// fork-joins per batch). Smaller batches run as one part, split within each layer.
    fn per_part(
        &self,
        x: &[f32],
        valid: &[usize],
        frames: usize,
        f: impl Fn(&[f32], &[usize]) -> Vec<f32> + Sync,
    ) -> Result<Vec<f32>, EngineError> {
        self.check(x, valid, frames)?;
        let threads = rayon::current_num_threads();
        if threads < 2 || valid.len() < 2 * threads {
            return Ok(f(x, valid));
        }
        let per = valid.len().div_ceil(threads);
        let row = frames * self.features;
        let parts: Vec<Vec<f32>> = valid
            .par_chunks(per)
            .enumerate()
            .map(|(i, v)| f(&x[i * per * row..(i * per + v.len()) * row], v))
            .collect();
        Ok(parts.concat())
    }

    /// `x` holds `[batch, frames, features]` values and no sequence more valid frames than given.
    fn check(&self, x: &[f32], valid: &[usize], frames: usize) -> Result<(), EngineError> {
        let b = valid.len();
        if x.len() != b * frames * self.features {
            return Err(EngineError::Shape(format!(
                "{} input values for {b} sequences of {frames} frames x {} features (expected {})",
                x.len(),
                self.features,
                b * frames * self.features
            )));
        }
        if let Some((i, n)) = valid.iter().enumerate().find(|(_, &n)| n > frames) {
            return Err(EngineError::Shape(format!("sequence {i} has {n} valid frames, more than the {frames} given")));
        }
        Ok(())
    }

    /// Stem, stages and `top` of checked inputs: `[batch * frames, 2 dim]`.
    fn encode(&self, x: &[f32], valid: &[usize], frames: usize) -> Vec<f32> {
        let rows = valid.len() * frames;
        let mut h = self.stem.forward(x, rows);
        for (stage, transformer) in self.transformer_blocks.iter().enumerate() {
            for block in &self.conv_blocks[stage * self.per_stage..(stage + 1) * self.per_stage] {
                block.forward(&mut h, valid, frames);
            }
            transformer.forward(&mut h, valid, frames);
        }
        self.top.forward(&h, rows)
    }
}
