//! Evaluation of a continuous-recognition (CTC) model on a labelled continuous dataset (the npy
//! layout with a `tokens` column): the CTC loss, both decoders' error rates (normalized
//! Levenshtein score, token and word error rates, exact sequences), figures per signer, and every
//! sequence's reference and hypothesis.
//!
//! ```no_run
//! use infer::eval::{EvalOptions, Split};
//! use infer::{PredictorOptions, Transcriber};
//! let predictor = Transcriber::load("runs/ctc-20261124-180000".as_ref(), &PredictorOptions::default())?;
//! let split = Split::from_card(predictor.card(), true)?;
//! let report = infer::eval_ctc::evaluate(&predictor, "/data/sentences".as_ref(), &EvalOptions { split, ..Default::default() })?;
//! print!("{}", report.render());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use data::tokens::BLANK;
use models::decode::{CtcTally, Decoder, ErrorCounts, Scores};
use serde::Serialize;

use crate::eval::{self, EvalOptions, SkippedFile, Split};
use crate::{InferError, Result, Transcriber};

/// One evaluated sequence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SequenceResult {
    /// Its file.
    pub path: PathBuf,
    /// Its signer.
    pub group: String,
    /// The labelled text.
    pub reference: String,
    /// The configured decoder's text.
    pub hypothesis: String,
    /// Token edit distance between the two.
    pub edits: usize,
}

/// Scores of one signer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupScores {
    /// The signer.
    pub group: String,
    /// Its sequences.
    pub n: usize,
    /// The configured decoder's scores on them.
    pub scores: Scores,
}

/// Everything `infer eval` reports on a CTC model.
#[derive(Debug, Clone, Serialize)]
pub struct CtcEvalReport {
    /// The model directory.
    pub model_dir: PathBuf,
    /// The dataset root.
    pub data: PathBuf,
    /// Which sequences.
    pub split: Split,
    /// Device and compute precision.
    pub device: String,
    /// Compute precision (`f32`, `f16`, `bf16`, `int8`).
    pub precision: String,
    /// What ran the model: `eval graph` or `burn` ([`Predictor::engine_name`]).
    pub engine: String,
    /// Sequences evaluated.
    pub n: usize,
    /// Signers among them.
    pub groups: usize,
    /// Mean CTC loss per target token (as in training's validation).
    pub loss: f64,
    /// The decoder of `hypothesis` and `per_group` (the model card's).
    pub decoder: Decoder,
    /// Beam width of the beam scores.
    pub beam_width: usize,
    /// Words of the lexicon beam search kept to (0: none).
    pub lexicon_words: usize,
    /// Greedy decoding's scores.
    pub greedy: Scores,
    /// Beam search's scores.
    pub beam: Scores,
    /// Per signer, sorted by name.
    pub per_group: Vec<GroupScores>,
    /// Per sequence, in dataset order.
    pub sequences: Vec<SequenceResult>,
    /// Files that could not be read or prepared.
    pub skipped: Vec<SkippedFile>,
    /// Wall time.
    pub seconds: f64,
}

impl CtcEvalReport {
    /// The configured decoder's scores.
    pub fn chosen(&self) -> &Scores {
        self.decoder.pick(&self.greedy, &self.beam)
    }

    /// A human-readable summary.
    pub fn render(&self) -> String {
        let mut out = format!(
            "{} sequences of {} signers ({}), {} {} ({})\n",
            self.n, self.groups, self.split, self.device, self.precision, self.engine
        );
        out += &format!("CTC loss {:.4} per token\n", self.loss);
        let beam = match self.lexicon_words {
            0 => format!("beam (width {})", self.beam_width),
            n => format!("beam (width {}, lexicon of {n} words)", self.beam_width),
        };
        for (name, s) in [("greedy", &self.greedy), (&*beam, &self.beam)] {
            out += &format!(
                "{name:<16} NLD {:.4}  CER {:.4}  WER {:.4}  exact {:.3}\n",
                s.nld, s.cer, s.wer, s.sequence_accuracy
            );
        }
        out += &format!("per signer ({} decoding): ", self.decoder.name());
        let per: Vec<String> =
            self.per_group.iter().map(|g| format!("{} CER {:.3} (n={})", g.group, g.scores.cer, g.n)).collect();
        out += &per.join(", ");
        out.push('\n');
        let mut worst: Vec<&SequenceResult> = self.sequences.iter().filter(|s| s.edits > 0).collect();
        worst.sort_by(|a, b| b.edits.cmp(&a.edits).then(a.path.cmp(&b.path)));
        for s in worst.iter().take(5) {
            out +=
                &format!("  {}: \"{}\" -> \"{}\" ({} edits)\n", s.path.display(), s.reference, s.hypothesis, s.edits);
        }
        if !self.skipped.is_empty() {
            out += &format!("{} files skipped\n", self.skipped.len());
        }
        out
    }

    /// Write `eval.json` and `predictions.csv` (path, group, reference, hypothesis, edits) into
    /// `dir` (created), each atomically; [`eval::check_report_dir`] must accept `dir`.
    pub fn write_dir(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        eval::check_report_dir(dir)?;
        std::fs::create_dir_all(dir).map_err(|e| InferError::File { path: dir.into(), message: e.to_string() })?;
        let json_path = dir.join(bundle::layout::EVAL_REPORT_FILE);
        bundle::atomic::write_json(&json_path, self)?;
        let mut csv = String::from("path,group,reference,hypothesis,edits\n");
        for s in &self.sequences {
            csv += &format!(
                "{},{},{},{},{}\n",
                eval::csv_field(&s.path.display().to_string()),
                eval::csv_field(&s.group),
                eval::csv_field(&s.reference),
                eval::csv_field(&s.hypothesis),
                s.edits
            );
        }
        let csv_path = dir.join(bundle::layout::EVAL_PREDICTIONS_FILE);
        bundle::atomic::write_atomic(&csv_path, csv.as_bytes())?;
        Ok(vec![json_path, csv_path])
    }
}

/// Evaluate the CTC model of `predictor` on the continuous dataset at `data_dir`. Dataset
/// tokens are matched to the model's by name; a selected sequence with a token the model does
/// not know is an error that lists those tokens.
pub fn evaluate(predictor: &Transcriber, data_dir: &Path, opts: &EvalOptions) -> Result<CtcEvalReport> {
    let start = Instant::now();
    let ctc = predictor.ctc_card()?.clone();
    let decoder = predictor.decoder();
    let index = data::index::open(data_dir).map_err(InferError::Data)?;
    if index.continuous.is_none() {
        return Err(InferError::Eval(format!(
            "{}: one sign per sequence; a CTC model is evaluated on a continuous dataset (labels.csv with a `tokens` column)",
            data_dir.display()
        )));
    }
    let positions = eval::selected(&index, data_dir, opts)?;
    let labels = predictor.labels();
    let to_model = eval::to_model_labels(predictor, &index);
    let unknown =
        positions.iter().flat_map(|&i| index.entries[i].tokens.iter().copied()).filter(|&t| to_model[t].is_none());
    eval::check_known(predictor, data_dir, &index, unknown, "tokens are not in the model's vocabulary")?;
    let separator = data::tokens::word_separator(ctc.unit, labels);
    let classes = labels.len();
    let bar = eval::progress_bar(positions.len(), opts.progress);
    let mut tally = CtcTally::default();
    let mut per_group: BTreeMap<String, ErrorCounts> = BTreeMap::new();
    let mut sequences = Vec::with_capacity(positions.len());
    let mut skipped = Vec::new();
    let read = |k: usize| {
        let e = &index.entries[positions[k]];
        predictor.prepare_read(index.format, &e.path, e.sequence)
    };
    let outcome = crate::prepare_ahead(positions.len(), opts.batch, read, |chunk| {
        let n = chunk.len() as u64;
        let (windows, outcomes) = crate::take_windows(chunk);
        let mut frames = predictor.frame_log_probs(&windows)?.into_iter();
        for (k, error) in outcomes {
            let e = &index.entries[positions[k]];
            if let Some(err) = error {
                let reason = err.to_string();
                bar.suspend(|| eprintln!("warning: skipped {reason}"));
                skipped.push(SkippedFile { path: e.path.clone(), reason });
                continue;
            }
            let (lp, valid) = frames.next().expect("one output per prepared window");
            let target: Vec<usize> = e.tokens.iter().map(|&t| to_model[t].expect("checked above")).collect();
            let (g, b) = tally.add(&lp, classes, valid, &target, BLANK, separator, decoder);
            let chosen = ctc.decode.decoder.pick(g, b);
            per_group.entry(e.group.clone()).or_default().add(&chosen, &target, separator);
            let text = |tokens: &[usize]| data::tokens::join(ctc.unit, tokens.iter().map(|&t| labels[t].as_str()));
            sequences.push(SequenceResult {
                path: e.path.clone(),
                group: e.group.clone(),
                reference: text(&target),
                hypothesis: text(&chosen),
                edits: models::decode::levenshtein(&chosen, &target),
            });
        }
        bar.inc(n);
        Ok(())
    });
    bar.finish_and_clear();
    outcome?;
    eval::check_bad_files(&skipped, sequences.len(), positions.len(), opts.max_bad_fraction)?;
    let n = sequences.len();
    Ok(CtcEvalReport {
        model_dir: predictor.model_dir().to_path_buf(),
        data: data_dir.to_path_buf(),
        split: opts.split,
        device: predictor.device_name().to_string(),
        precision: predictor.compute_name(),
        engine: predictor.engine_name().to_string(),
        n,
        groups: per_group.len(),
        loss: tally.mean_loss(),
        decoder: ctc.decode.decoder,
        beam_width: ctc.decode.beam_width,
        lexicon_words: decoder.lexicon.as_ref().map_or(0, |l| l.len()),
        greedy: tally.greedy.scores(),
        beam: tally.beam.scores(),
        per_group: per_group
            .into_iter()
            .map(|(group, c)| GroupScores { group, n: c.sequences, scores: c.scores() })
            .collect(),
        sequences,
        skipped,
        seconds: start.elapsed().as_secs_f64(),
    })
}
