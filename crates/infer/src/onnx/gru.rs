//! The bidirectional GRU baseline as ONNX nodes: the embedding, then one bidirectional `GRU`
//! (`linear_before_reset = 1`, Burn's `reset_after`) whose `sequence_lens` makes the backward
//! direction run each sequence reversed within its own length, as `models::gru` does with its
//! gather.

use burn::nn::activation::Activation;
use burn::nn::gru::Gru;
use burn::tensor::backend::Backend;
use models::gru::SignGru;

use super::graph::{Attr, Builder};
use super::layers::Dense;
use crate::{InferError, Result};

/// `[batch, frames, features]` -> `[batch, frames, 2 hidden]` (forward | backward).
pub fn encode<B: Backend>(g: &mut Builder, m: &SignGru<B>, x: &str, valid: &str) -> Result<String> {
    let h = Dense::of(&m.embed).apply(g, x);
    let hidden = m.forward_gru.d_hidden;
    let input = m.embed.weight.dims()[1];
    let (mut w, mut r, mut b) = (Vec::new(), Vec::new(), Vec::new());
    for gru in [&m.forward_gru, &m.backward_gru] {
        let (wd, rd, bd) = direction(gru)?;
        w.extend(wd);
        r.extend(rd);
        b.extend(bd);
    }
    let w = g.f32s("gru_w", &[2, 3 * hidden, input], w);
    let r = g.f32s("gru_r", &[2, 3 * hidden, hidden], r);
    let b = g.f32s("gru_b", &[2, 6 * hidden], b);
    let lens = g.op("Cast", &[valid], vec![Attr::Int("to", 6)]); // int32
    let t = g.op("Transpose", &[&h], vec![Attr::Ints("perm", vec![1, 0, 2])]); // [T, B, H]
    let attrs = vec![
        Attr::Int("hidden_size", hidden as i64),
        Attr::Str("direction", "bidirectional"),
        Attr::Int("linear_before_reset", 1),
    ];
    let y = g.op("GRU", &[&t, &w, &r, &b, &lens], attrs); // [T, 2, B, H]
    let y = g.op("Transpose", &[&y], vec![Attr::Ints("perm", vec![2, 0, 1, 3])]); // [B, T, 2, H]
    let merged = g.i64s(&[0, 0, 2 * hidden as i64]);
    Ok(g.op("Reshape", &[&y, &merged], vec![]))
}

/// One direction's `W` `[3 hidden, input]`, `R` `[3 hidden, hidden]` and `B` `[6 hidden]` in
/// ONNX's gate order (update, reset, new).
fn direction<B: Backend>(gru: &Gru<B>) -> Result<(Vec<f32>, Vec<f32>, Vec<f32>)> {
    let standard = matches!(gru.gate_activation, Activation::Sigmoid(_))
        && matches!(gru.hidden_activation, Activation::Tanh(_))
        && gru.reset_after
        && gru.clip.is_none();
    if !standard {
        return Err(InferError::Unsupported(
            "cannot export this GRU to ONNX: only sigmoid gates, a tanh candidate, reset after the product and no clipping map onto ONNX's GRU".into(),
        ));
    }
    let (mut w, mut r, mut wb, mut rb) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for gate in [&gru.update_gate, &gru.reset_gate, &gru.new_gate] {
        for (linear, weights, bias) in
            [(&gate.input_transform, &mut w, &mut wb), (&gate.hidden_transform, &mut r, &mut rb)]
        {
            let d = Dense::of(linear); // [in, out]
            for j in 0..d.n {
                weights.extend((0..d.k).map(|i| d.w[i * d.n + j]));
            }
            bias.extend(d.bias.unwrap_or_else(|| vec![0.0; d.n]));
        }
    }
    wb.extend(rb);
    Ok((w, r, wb))
}
