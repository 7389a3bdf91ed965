//! ONNX export, the library side of `infer export-onnx`: a trained model in eval form
//! (BatchNorm folded, dropout off) as an ONNX graph with dynamic batch and frame axes, run by
//! onnxruntime (Python, C, the browser's onnxruntime-web) with no SignFlow code.
//!
//! The graph takes the model's input features, `features` `[batch, frames, input_features]`
//! (f32: what SignFlow's preprocessing makes of a recording, `infer`'s prepared windows) and
//! `valid` `[batch]` (int64: the real frames of each sequence, the rest padding), and gives a
//! classifier's `logits` and `probabilities` `[batch, classes]` or a CTC model's per-frame
//! `log_probs` `[batch, frames, classes]` (class 0 the blank). The model card (labels,
//! preprocessing, task, decoder settings) is in the file's metadata under [`CARD_METADATA`].
//!
//! The protobuf messages are `onnx-rs`'s (no dependencies of its own, encoder checked against
//! the `onnx` package's checker); [`graph::Builder`] owns names and weights while a graph grows.

pub mod conv_transformer;
pub mod graph;
pub mod gru;
pub mod layers;
pub mod transformer;

use std::path::Path;

use bundle::ModelCard;
use burn::tensor::backend::Backend;
use models::{SignModel, Task};

use crate::{InferError, Result};
use graph::{Attr, Builder, Dim, Io};
use layers::{Dense, Mask};

/// Metadata key holding the model card as JSON (the same document as `model.json`).
pub const CARD_METADATA: &str = "signflow_model_card";

/// The graph of `model` (with `card`'s task) as ONNX protobuf bytes.
pub fn to_onnx<B: Backend>(model: &SignModel<B>, card: &ModelCard) -> Result<Vec<u8>> {
    let mut g = Builder::default();
    let mask = Mask::new(&mut g, "features", "valid");
    let (hidden, head) = match model {
        SignModel::ConvTransformer(m) => (conv_transformer::encode(&mut g, m, "features", &mask), &m.classifier),
        SignModel::Transformer(m) => (transformer::encode(&mut g, m, "features", &mask)?, &m.classifier),
        SignModel::Gru(m) => (gru::encode(&mut g, m, "features", "valid")?, &m.classifier),
    };
    let classes = card.labels.len() as i64;
    let features = card.input_features as i64;
    let outputs = match card.task {
        Task::Classification => {
            let pooled = mask.mean(&mut g, &hidden);
            let logits = Dense::of(head).apply(&mut g, &pooled);
            g.op_named("logits", "Identity", &[&logits], vec![]);
            g.op_named("probabilities", "Softmax", &[&logits], vec![Attr::Int("axis", -1)]);
            let io = |name: &str| Io {
                name: name.into(),
                float: true,
                dims: vec![Dim::Named("batch"), Dim::Fixed(classes)],
            };
            vec![io("logits"), io("probabilities")]
        }
        Task::Ctc => {
            let logits = Dense::of(head).apply(&mut g, &hidden);
            g.op_named("log_probs", "LogSoftmax", &[&logits], vec![Attr::Int("axis", -1)]);
            vec![Io {
                name: "log_probs".into(),
                float: true,
                dims: vec![Dim::Named("batch"), Dim::Named("frames"), Dim::Fixed(classes)],
            }]
        }
    };
    let inputs = [
        Io {
            name: "features".into(),
            float: true,
            dims: vec![Dim::Named("batch"), Dim::Named("frames"), Dim::Fixed(features)],
        },
        Io { name: "valid".into(), float: false, dims: vec![Dim::Named("batch")] },
    ];
    let card_json = serde_json::to_string(card).map_err(|e| InferError::Unsupported(e.to_string()))?;
    let metadata = [(CARD_METADATA.to_string(), card_json)];
    Ok(g.encode(card.model.kind(), &inputs, &outputs, &metadata))
}

/// Write the model in `model` (a run or model directory) to `out` as ONNX; returns its card.
/// `out` must not exist (nothing is overwritten); a model the exporter cannot express is an
/// error and leaves no file.
#[inline(never)]
pub fn export_onnx(model: &Path, out: &Path) -> Result<ModelCard> {
    if std::fs::symlink_metadata(out).is_ok() {
        return Err(InferError::Model {
            path: out.into(),
            message: "exists; infer does not overwrite files: remove it or choose another --out".into(),
        });
    }
    let dir = bundle::layout::find_model_dir(model)?;
    let (card, m) = bundle::load_bundle::<crate::Backend>(&dir, &crate::interop::cpu()?)?;
    let bytes = to_onnx(&m, &card)?;
    bundle::atomic::write_atomic(out, &bytes)?;
    Ok(card)
}
