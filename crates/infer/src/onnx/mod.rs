//! ONNX export, the library side of `infer export-onnx`: a trained model in eval form
//! (BatchNorm folded, dropout off) as an ONNX graph with dynamic batch and frame axes, run by
//! onnxruntime (Python, C, the browser's onnxruntime-web) with no SignFlow code.
//!
//! A model trained on landmarks takes what MediaPipe gives ([`GraphInput::Landmarks`]):
//! `landmarks` `[batch, frames, points, 3]` (f32, NaN = missing; 543 points in MediaPipe
//! Holistic's order) and `lengths` `[batch]` (int64 frames of each sequence, the rest padding),
//! with SignFlow's preprocessing inside the graph ([`preprocess`]); it also gives `frames`
//! `[batch]`, the model frames each sequence filled. [`GraphInput::Features`] takes the model's
//! input features instead (`features` `[batch, frames, input_features]`, `valid` `[batch]`), for
//! models of other features or callers that prepare windows themselves. Outputs: a classifier's
//! `logits` and `probabilities` `[batch, classes]`, a CTC model's per-frame `log_probs`
//! `[batch, frames, classes]` (class 0 the blank). The model card (labels, preprocessing, task,
//! decoder settings) is in the file's metadata under [`CARD_METADATA`].
//!
//! The protobuf messages are `onnx-rs`'s (no dependencies of its own); [`graph::Builder`] owns
//! names and weights while a graph grows.

pub mod conv_transformer;
pub mod graph;
pub mod gru;
pub mod layers;
pub mod preprocess;
pub mod transformer;

use std::path::Path;

use bundle::ModelCard;
use data::layout::NUM_LANDMARKS;
use data::preprocess::Preprocessor;
use models::{SignModel, Task};

use crate::{InferError, Result};
use graph::{Attr, Builder, Dim, Io};
use layers::{Dense, Mask};

/// Metadata key holding the model card as JSON (the same document as `model.json`).
pub const CARD_METADATA: &str = "signflow_model_card";

/// What an exported graph takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphInput {
    /// Raw landmarks `landmarks` `[batch, frames, points, 3]` (f32, NaN = missing) and
    /// `lengths` `[batch]` (int64 frames of each sequence), preprocessed inside the graph.
    Landmarks,
    /// The model's input features `features` `[batch, frames, input_features]` (what SignFlow's
    /// preprocessing makes) and `valid` `[batch]` (int64 real frames, the rest padding).
    Features,
}

impl std::str::FromStr for GraphInput {
    type Err = String;

    /// `landmarks` or `features` (what `infer export-onnx --input` takes).
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "landmarks" => Ok(Self::Landmarks),
            "features" => Ok(Self::Features),
            other => Err(format!("`{other}`: expected landmarks or features")),
        }
    }
}

/// The landmarks per frame a model trained on landmarks takes: the MediaPipe Holistic layout's
/// 543 when the card's preprocessing of it gives the model's features, otherwise (no landmark
/// subset chosen) the count the features imply; `None` for a model of other features.
pub fn landmark_points(card: &ModelCard) -> Result<Option<usize>> {
    let pre = Preprocessor::new(card.preprocess.clone()).map_err(InferError::Data)?;
    if pre.output_features(true, NUM_LANDMARKS) == card.input_features {
        return Ok(Some(NUM_LANDMARKS));
    }
    let per_point = pre.output_features(true, 1);
    let points = card.input_features / per_point.max(1);
    let fits = card.preprocess.landmarks.is_empty() && points * per_point == card.input_features && points > 0;
    Ok(fits.then_some(points))
}

/// The graph of `model` (with `card`'s task) taking `input`, as ONNX protobuf bytes.
///
/// On infer's backend only, so the weight reads are compiled once, here (see [`crate::held`]).
#[inline(never)]
pub fn to_onnx(model: &SignModel<crate::Backend>, card: &ModelCard, input: GraphInput) -> Result<Vec<u8>> {
    let mut g = Builder::default();
    let (inputs, features, valid) = match input {
        GraphInput::Features => {
            let inputs = vec![
                Io {
                    name: "features".into(),
                    float: true,
                    dims: vec![Dim::Named("batch"), Dim::Named("frames"), Dim::Fixed(card.input_features as i64)],
                },
                Io { name: "valid".into(), float: false, dims: vec![Dim::Named("batch")] },
            ];
            (inputs, "features".to_string(), "valid".to_string())
        }
        GraphInput::Landmarks => {
            let Some(points) = landmark_points(card)? else {
                return Err(InferError::Unsupported(format!(
                    "the model takes {} features per frame that are not landmarks in a layout SignFlow knows; export it with --input features",
                    card.input_features
                )));
            };
            let pre = Preprocessor::new(card.preprocess.clone()).map_err(InferError::Data)?;
            let prepared = preprocess::prepare(&mut g, &pre, points, "landmarks", "lengths");
            let inputs = vec![
                Io {
                    name: "landmarks".into(),
                    float: true,
                    dims: vec![Dim::Named("batch"), Dim::Named("frames"), Dim::Fixed(points as i64), Dim::Fixed(3)],
                },
                Io { name: "lengths".into(), float: false, dims: vec![Dim::Named("batch")] },
            ];
            (inputs, prepared.features, prepared.valid)
        }
    };
    let mask = Mask::new(&mut g, &features, &valid);
    let (hidden, head) = match model {
        SignModel::ConvTransformer(m) => (conv_transformer::encode(&mut g, m, &features, &mask), &m.classifier),
        SignModel::Transformer(m) => (transformer::encode(&mut g, m, &features, &mask)?, &m.classifier),
        SignModel::Gru(m) => (gru::encode(&mut g, m, &features, &valid)?, &m.classifier),
    };
    let classes = card.labels.len() as i64;
    let mut outputs = match card.task {
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
            let frames = match input {
                GraphInput::Features => Dim::Named("frames"),
                GraphInput::Landmarks => Dim::Fixed(card.preprocess.window as i64),
            };
            vec![Io {
                name: "log_probs".into(),
                float: true,
                dims: vec![Dim::Named("batch"), frames, Dim::Fixed(classes)],
            }]
        }
    };
    if input == GraphInput::Landmarks {
        g.op_named("frames", "Identity", &[&valid], vec![]);
        outputs.push(Io { name: "frames".into(), float: false, dims: vec![Dim::Named("batch")] });
    }
    let card_json = serde_json::to_string(card).map_err(|e| InferError::Unsupported(e.to_string()))?;
    let metadata = [(CARD_METADATA.to_string(), card_json)];
    Ok(g.encode(card.model.kind(), &inputs, &outputs, &metadata))
}

/// Write the model in `model` (a run or model directory) to `out` as ONNX; returns its card.
/// `out` must not exist (nothing is overwritten); a model the exporter cannot express is an
/// error and leaves no file.
#[inline(never)]
pub fn export_onnx(model: &Path, out: &Path, input: GraphInput) -> Result<ModelCard> {
    if std::fs::symlink_metadata(out).is_ok() {
        return Err(InferError::Model {
            path: out.into(),
            message: "exists; infer does not overwrite files: remove it or choose another --out".into(),
        });
    }
    let (card, m) = crate::interop::load_model(model, &crate::interop::cpu()?)?;
    let bytes = to_onnx(&m, &card, input)?;
    bundle::atomic::write_atomic(out, &bytes)?;
    Ok(card)
}
