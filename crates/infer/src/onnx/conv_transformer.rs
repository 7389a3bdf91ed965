//! The conv-transformer as ONNX nodes: the stem with its norm folded, each stage's conv blocks
//! (expand + SiLU, the causal depthwise conv as a grouped `Conv` with its norm folded, the ECA
//! gate, project, residual) and transformer block (both norms folded into the products after
//! them), then `top`. The same computation as `engine::graph::EvalGraph`.

use burn::tensor::backend::Backend;
use models::conv_transformer::{ConvBlock, ConvTransformer, TransformerBlock};

use super::graph::{Attr, Builder};
use engine::graph::norm;

use super::layers::{attention, host, silu, split_last, Dense, Mask};

/// `[batch, frames, features]` -> `[batch, frames, 2 dim]` (before pooling or the per-frame head).
pub fn encode<B: Backend>(g: &mut Builder, m: &ConvTransformer<B>, x: &str, mask: &Mask) -> String {
    let mut h = Dense::then_norm(&m.stem, &m.stem_norm.bn).apply(g, x);
    for (stage, transformer) in m.transformer_blocks.iter().enumerate() {
        let start = stage * m.conv_blocks_per_stage;
        for block in &m.conv_blocks[start..start + m.conv_blocks_per_stage] {
            h = conv_block(g, block, &h, mask);
        }
        h = transformer_block(g, transformer, &h, mask);
    }
    Dense::of(&m.top).apply(g, &h)
}

fn conv_block<B: Backend>(g: &mut Builder, b: &ConvBlock<B>, x: &str, mask: &Mask) -> String {
    let e = Dense::of(&b.expand).apply(g, x);
    let e = silu(g, &e);
    // Causal depthwise conv over time: channels-first, `kernel - 1` zeros before the first frame.
    let [channels, _, kernel] = b.dwconv.conv.weight.dims();
    let (s, shift) = norm(&b.norm.bn);
    let mut taps = host(b.dwconv.conv.weight.val()); // [c, 1, k]
    for (ch, row) in taps.chunks_mut(kernel).enumerate() {
        row.iter_mut().for_each(|w| *w *= s[ch]);
    }
    let w = g.f32s("dwconv", &[channels, 1, kernel], taps);
    let bias = g.f32s("dwconv_shift", &[channels], shift);
    let t = g.op("Transpose", &[&e], vec![Attr::Ints("perm", vec![0, 2, 1])]);
    let c = g.op(
        "Conv",
        &[&t, &w, &bias],
        vec![Attr::Int("group", channels as i64), Attr::Ints("pads", vec![kernel as i64 - 1, 0])],
    );
    let h = g.op("Transpose", &[&c], vec![Attr::Ints("perm", vec![0, 2, 1])]);
    // ECA: a channel conv over the valid frames' mean, as a sigmoid gate on every frame.
    let pooled = g.op("MatMul", &[&mask.mean_weights, &h], vec![]); // [B, 1, C]
    let [_, _, k] = b.eca.conv.weight.dims();
    let eca = g.f32s("eca", &[1, 1, k], host(b.eca.conv.weight.val()));
    let half = (k / 2) as i64;
    let gate = g.op("Conv", &[&pooled, &eca], vec![Attr::Ints("pads", vec![half, half])]);
    let gate = g.op("Sigmoid", &[&gate], vec![]);
    let h = g.op("Mul", &[&h, &gate], vec![]);
    let p = Dense::of(&b.project).apply(g, &h);
    g.op("Add", &[x, &p], vec![])
}

fn transformer_block<B: Backend>(g: &mut Builder, b: &TransformerBlock<B>, x: &str, mask: &Mask) -> String {
    let dim = b.attention.proj.weight.dims()[1];
    let qkv = Dense::after_norm(&b.norm1.bn, &b.attention.qkv).apply(g, x);
    let parts = split_last(g, &qkv, 3, dim);
    let a = attention(g, &parts[0], &parts[1], &parts[2], b.attention.heads, dim, mask);
    let a = Dense::of(&b.attention.proj).apply(g, &a);
    let x = g.op("Add", &[x, &a], vec![]);
    let f = Dense::after_norm(&b.norm2.bn, &b.ffn_in).apply(g, &x);
    let f = silu(g, &f);
    let f = Dense::of(&b.ffn_out).apply(g, &f);
    g.op("Add", &[&x, &f], vec![])
}
