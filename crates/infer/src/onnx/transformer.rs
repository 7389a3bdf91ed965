//! The transformer baseline as ONNX nodes: embedding plus the sinusoid table's first `frames`
//! rows, then each pre- or post-norm encoder layer (`LayerNormalization`, masked multi-head
//! attention, the feed-forward with exact GELU), as `models::transformer::encoder_layer` runs it.

use burn::nn::activation::Activation;
use burn::nn::transformer::{TransformerEncoderConfig, TransformerEncoderLayer};
use burn::nn::LayerNorm;
use burn::tensor::backend::Backend;
use models::transformer::SignTransformer;

use super::graph::{Attr, Builder};
use super::layers::{attention, host, Dense, Mask};
use crate::{InferError, Result};

/// `[batch, frames, features]` -> `[batch, frames, dim]`.
pub fn encode<B: Backend>(g: &mut Builder, m: &SignTransformer<B>, x: &str, mask: &Mask) -> Result<String> {
    let h = Dense::of(&m.embed).apply(g, x);
    let [_, max, dim] = m.positions.sinusoids.dims();
    let table = g.f32s("positions", &[1, max, dim], host(m.positions.sinusoids.clone()));
    let shape = g.op("Shape", &[x], vec![]);
    let frames = g.slice(&shape, 1, 2, 0); // [1]
    let (zero, one) = (g.i64s(&[0]), g.i64s(&[1]));
    let rows = g.op("Slice", &[&table, &zero, &frames, &one], vec![]); // the first `frames` rows
    let mut h = g.op("Add", &[&h, &rows], vec![]);
    for layer in &m.encoder.layers {
        h = encoder_layer(g, layer, &h, mask)?;
    }
    Ok(h)
}

fn layer_norm<B: Backend>(g: &mut Builder, n: &LayerNorm<B>, x: &str) -> String {
    // Burn keeps the epsilon private; the models build their encoders with the default.
    let eps = TransformerEncoderConfig::new(1, 1, 1, 1).layer_norm_eps as f32;
    let c = n.gamma.dims()[0];
    let gamma = g.f32s("ln_gamma", &[c], host(n.gamma.val()));
    let beta = g.f32s("ln_beta", &[c], n.beta.as_ref().map_or(vec![0.0; c], |b| host(b.val())));
    g.op("LayerNormalization", &[x, &gamma, &beta], vec![Attr::Int("axis", -1), Attr::Float("epsilon", eps)])
}

fn encoder_layer<B: Backend>(g: &mut Builder, l: &TransformerEncoderLayer<B>, x: &str, mask: &Mask) -> Result<String> {
    let attn_in = if l.norm_first { layer_norm(g, &l.norm_2, x) } else { x.to_string() };
    let (dim, heads) = (l.mha.output.weight.dims()[1], l.mha.n_heads);
    let q = Dense::of(&l.mha.query).apply(g, &attn_in);
    let k = Dense::of(&l.mha.key).apply(g, &attn_in);
    let v = Dense::of(&l.mha.value).apply(g, &attn_in);
    let a = attention(g, &q, &k, &v, heads, dim, mask);
    let a = Dense::of(&l.mha.output).apply(g, &a);
    let mut x = g.op("Add", &[x, &a], vec![]);
    let ff_in = if l.norm_first {
        layer_norm(g, &l.norm_1, &x)
    } else {
        x = layer_norm(g, &l.norm_1, &x);
        x.clone()
    };
    let inner = Dense::of(&l.pwff.linear_inner).apply(g, &ff_in);
    let act = match &l.pwff.activation {
        Activation::Gelu(_) => gelu(g, &inner),
        Activation::Relu(_) => g.op("Relu", &[&inner], vec![]),
        other => {
            return Err(InferError::Unsupported(format!(
                "cannot export the feed-forward activation {other:?} to ONNX (Gelu and Relu can be)"
            )))
        }
    };
    let f = Dense::of(&l.pwff.linear_outer).apply(g, &act);
    let x = g.op("Add", &[&x, &f], vec![]);
    Ok(if l.norm_first { x } else { layer_norm(g, &l.norm_2, &x) })
}

/// Exact GELU, `x (1 + erf(x / sqrt 2)) / 2` (opset 17 has no `Gelu`).
fn gelu(g: &mut Builder, x: &str) -> String {
    let (inv_sqrt2, one, half) = (g.scalar(std::f32::consts::FRAC_1_SQRT_2), g.scalar(1.0), g.scalar(0.5));
    let s = g.op("Mul", &[x, &inv_sqrt2], vec![]);
    let e = g.op("Erf", &[&s], vec![]);
    let e = g.op("Add", &[&e, &one], vec![]);
    let h = g.op("Mul", &[x, &half], vec![]);
    g.op("Mul", &[&h, &e], vec![])
}
