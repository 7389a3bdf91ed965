//! `infer`: classify sign sequences with a trained SignFlow model.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use bundle::TrainingSplit;
use clap::{Args, Parser, Subcommand, ValueEnum};
use device::{DeviceSpec, PrecisionSetting};
use infer::eval::{EvalOptions, Split};
use infer::{Compute, Loaded, Predictor, PredictorOptions, StreamConfig, StreamingRecognizer};

#[derive(Parser)]
#[command(name = "infer", version, about = "Classify sign-language landmark sequences with a trained SignFlow model")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Clone)]
struct ModelArgs {
    /// Run directory (uses its model/) or a model directory.
    #[arg(long)]
    model: PathBuf,
    /// auto, cpu, cuda, cuda:N, wgpu, wgpu:N
    #[arg(long, default_value = "auto")]
    device: DeviceSpec,
    /// With --device auto: ranked (CUDA, then WGPU, then CPU) or fastest (time batch-1 forwards
    /// of the model on each usable kind and take the quickest).
    #[arg(long, default_value = "ranked")]
    choose: device::Choose,
    /// Let --choose fastest try software Vulkan adapters (llvmpipe).
    #[arg(long)]
    allow_software_wgpu: bool,
    /// CTC models: keep beam search to transcripts of the words of this file (whitespace-
    /// separated words spelled in the model's tokens) instead of the model card's lexicon.
    #[arg(long, conflicts_with = "no_lexicon")]
    lexicon: Option<PathBuf>,
    /// CTC models: decode without the model card's lexicon.
    #[arg(long)]
    no_lexicon: bool,
    /// Run Burn's forward of the model as trained (the trainer's evaluation path, equal to it to
    /// the last bit) instead of its eval form: on the CPU at f32 the eval graph, elsewhere Burn's
    /// forward with BatchNorm folded into the linear layers beside it (both equal within float
    /// rounding and faster).
    #[arg(long)]
    burn_forward: bool,
}

/// The streaming recognizer's settings. Every default is `StreamConfig::default()`'s, so the
/// CLI and the library agree.
#[derive(Args, Clone)]
struct StreamArgs {
    /// Evaluate every this many frames.
    #[arg(long, default_value_t = StreamConfig::default().hop)]
    hop: usize,
    /// Classifiers: smoothed probability a sign needs to be reported.
    #[arg(long, default_value_t = StreamConfig::default().threshold)]
    threshold: f32,
    /// CTC models: mean probability a token needs to be reported (0 = every decoded token).
    #[arg(long, default_value_t = StreamConfig::default().token_threshold)]
    token_threshold: f32,
    /// Frames per evaluation (0 = the median training sequence for classifiers, the model's
    /// window for CTC models).
    #[arg(long, default_value_t = StreamConfig::default().window_frames)]
    window: usize,
    /// Frames with both hands out of view that end a sign (0 = no segmentation at pauses).
    #[arg(long, default_value_t = StreamConfig::default().boundary_frames)]
    boundary_frames: usize,
    /// Classifiers: the longest stretch between two pauses classified whole, as one sign (0 =
    /// 1.25 times the window); a longer one is split into signs by span decoding as it goes (and
    /// still classified whole at the pause, up to twice the window, if no sign was split off).
    #[arg(long, default_value_t = StreamConfig::default().segment_frames)]
    segment_frames: usize,
    /// Classifiers: probability a whole segment's top class, or a sign span decoding found,
    /// needs to be reported as a sign.
    #[arg(long, default_value_t = StreamConfig::default().segment_threshold)]
    segment_threshold: f32,
    /// Classifiers, span decoding: log-probability each sign costs (a prior for fewer, whole
    /// signs; 0 = none).
    #[arg(long, default_value_t = StreamConfig::default().sign_cost)]
    sign_cost: f32,
}

impl StreamArgs {
    fn config(&self) -> StreamConfig {
        StreamConfig {
            hop: self.hop,
            threshold: self.threshold,
            token_threshold: self.token_threshold,
            window_frames: self.window,
            boundary_frames: self.boundary_frames,
            segment_frames: self.segment_frames,
            segment_threshold: self.segment_threshold,
            sign_cost: self.sign_cost,
            ..Default::default()
        }
    }
}

#[derive(Subcommand)]
enum Command {
    /// Classify a sequence file (.parquet in the ISLR layout, .npy, .npz, .pose, or a .jsonl
    /// recording of live frames) or every such file under a directory; a continuous-recognition (CTC) model prints each file's token
    /// sequence with every token's frames and confidence.
    Predict {
        #[command(flatten)]
        model: ModelArgs,
        #[arg(long)]
        input: PathBuf,
        #[arg(long, default_value_t = 5)]
        top_k: usize,
        /// auto (the device's choice: f32 on the CPU), f32, f16, bf16, or int8 (the int8 eval
        /// graph on the CPU; conv-transformers).
        #[arg(long, default_value = "auto")]
        precision: Compute,
        /// Sequences per forward pass.
        #[arg(long, default_value_t = 32)]
        batch: usize,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Run the streaming recognizer over live frames (`--input -`: JSON lines on stdin, one frame
    /// each; see the `infer::live` docs) or replay a recording (.parquet, .npy, .npz, .pose,
    /// .jsonl) frame by frame, printing each sign event as it ends.
    Stream {
        #[command(flatten)]
        model: ModelArgs,
        #[arg(long)]
        input: PathBuf,
        #[command(flatten)]
        stream: StreamArgs,
        /// `--input -`: the longest JSON line read; a longer one is skipped as a bad frame.
        #[arg(long, default_value_t = infer::live::DEFAULT_MAX_LINE_BYTES)]
        max_line_bytes: usize,
        /// auto (the device's choice: f32 on the CPU), f32, f16, bf16, or int8 (the int8 eval
        /// graph on the CPU; conv-transformers).
        #[arg(long, default_value = "auto")]
        precision: Compute,
        #[arg(long)]
        json: bool,
    },
    /// Turn a dataset's isolated clips into takes for `eval-stream`: each signer's clips (by
    /// default the signers the model's training held out) joined into recordings of --signs
    /// signs with --pause-frames hands-down frames between them, each with its annotation file.
    MakeTakes {
        /// Run directory or model directory: its card names the held-out signers and the
        /// preprocessing that reads the clips (`.pose` components).
        #[arg(long)]
        model: PathBuf,
        /// Dataset root (ISLR, npy/npz or .pose layout, 543-point landmarks).
        #[arg(long)]
        data: PathBuf,
        /// Output directory (created; must be new or empty).
        #[arg(long)]
        to: PathBuf,
        /// Whose clips: valid (the signers the model's training held out), train or all.
        #[arg(long, value_enum, default_value_t = SplitKind::Valid)]
        split: SplitKind,
        #[command(flatten)]
        resplit: SplitOverride,
        /// Signs per take.
        #[arg(long, default_value_t = data::takes::TakeConfig::default().signs)]
        signs: usize,
        /// Frames with the hands out of view between two signs (0: the clips butt-joined).
        #[arg(long, default_value_t = data::takes::TakeConfig::default().pause_frames)]
        pause_frames: usize,
        /// Seed of the order of each signer's clips.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Score live recognition per sign event: stream continuous recordings ("takes", each with a
    /// NAME.events.csv of `label,start_frame,end_frame` lines beside it) through the streaming
    /// recognizer and report precision, recall and F1 of the sign events, missed, false and
    /// wrong-label events, and the latency from the end of each sign to its report.
    EvalStream {
        #[command(flatten)]
        model: ModelArgs,
        /// A take, or a directory searched for takes (recordings with an annotation file).
        #[arg(long)]
        input: PathBuf,
        #[command(flatten)]
        stream: StreamArgs,
        /// Frames per second of the recordings (latencies in ms).
        #[arg(long, default_value_t = 30.0)]
        fps: f64,
        /// auto (the device's choice: f32 on the CPU), f32, f16, bf16, or int8 (the int8 eval
        /// graph on the CPU; conv-transformers).
        #[arg(long, default_value = "auto")]
        precision: Compute,
        /// The whole report as JSON (every take's events and references with their outcome).
        #[arg(long)]
        json: bool,
    },
    /// Evaluate on a labelled dataset (ISLR or npy layout): top-1/top-k, balanced accuracy, macro F1,
    /// loss, calibration, per class and per signer, confusion matrix; for a CTC model on a
    /// continuous dataset, the CTC loss and greedy and beam error rates (NLD, CER, WER) overall
    /// and per signer.
    Eval {
        #[command(flatten)]
        model: ModelArgs,
        /// Dataset root: train.csv + sign_to_prediction_index_map.json + parquet files, or labels.csv + npy files.
        #[arg(long)]
        data: PathBuf,
        /// Which sequences: all, valid (the signers the model's training run held out) or train.
        #[arg(long, value_enum, default_value_t = SplitKind::All)]
        split: SplitKind,
        #[command(flatten)]
        resplit: SplitOverride,
        /// Sequences per forward pass.
        #[arg(long, default_value_t = 32)]
        batch: usize,
        /// The k of top-k accuracy.
        #[arg(long, default_value_t = 5)]
        top_k: usize,
        /// auto (the device's choice: f32 on the CPU), f32, f16, bf16, or int8 (the int8 eval
        /// graph on the CPU; conv-transformers).
        #[arg(long, default_value = "auto")]
        precision: Compute,
        /// Fail when more than this share of the selected files cannot be read.
        #[arg(long, default_value_t = 0.05)]
        max_bad_fraction: f64,
        /// Write eval.json, per_class.csv, confusion.csv and predictions.csv into this directory.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print the report (eval.json) to stdout instead of the summary.
        #[arg(long)]
        json: bool,
    },
    /// Write a model's weights as safetensors with PyTorch parameter names and layouts (the
    /// conv-transformer loads into benches/reference/reference_model.py as is); the model card
    /// travels in the file's metadata.
    ExportSafetensors {
        /// Run directory (uses its model/) or a model directory.
        #[arg(long)]
        model: PathBuf,
        /// The .safetensors file to write.
        #[arg(long)]
        out: PathBuf,
    },
    /// Write a model as ONNX (eval form: BatchNorm folded, dropout off) with dynamic batch and
    /// frame axes, for onnxruntime in Python, C or the browser: inputs raw `landmarks` [batch,
    /// frames, 543, 3] and `lengths` [batch] with the preprocessing inside the graph (or, with
    /// `--input features`, `features` and `valid`); outputs `logits` and `probabilities`
    /// (classifiers) or `log_probs` [batch, frames, classes] (CTC); the model card in the
    /// file's metadata.
    ExportOnnx {
        /// Run directory (uses its model/) or a model directory.
        #[arg(long)]
        model: PathBuf,
        /// The .onnx file to write (must not exist).
        #[arg(long)]
        out: PathBuf,
        /// What the graph takes: `landmarks` (raw, preprocessing inside the graph) or
        /// `features` (the model's input features).
        #[arg(long, default_value = "landmarks")]
        input: infer::onnx::GraphInput,
    },
    /// Make a SignFlow model directory from a PyTorch state_dict (`torch.save(model.state_dict())`)
    /// of the same architecture; the architecture, preprocessing and labels come from --card.
    ImportTorch {
        /// The .pt/.pth file.
        #[arg(long)]
        weights: PathBuf,
        /// A model.json, or a run or model directory holding one.
        #[arg(long)]
        card: PathBuf,
        /// The model directory to write (replaced atomically if it exists).
        #[arg(long)]
        out: PathBuf,
    },
    /// Raw f32 outputs of prepared windows, for checking against another framework: reads an
    /// .npz with `x` [batch, frames, features] (the model's window and features) and optionally
    /// `valid` [batch] (real frames of each window, the rest padding), writes an .npy: a
    /// classifier's logits [batch, classes], a CTC model's per-frame log-probabilities [batch,
    /// frames, classes].
    Logits {
        #[command(flatten)]
        model: ModelArgs,
        #[arg(long)]
        input: PathBuf,
        #[arg(long)]
        out: PathBuf,
    },
    /// Latency (p50/p95/p99) and throughput per batch size and precision.
    Bench {
        #[command(flatten)]
        model: ModelArgs,
        /// Comma-separated batch sizes.
        #[arg(long, default_value = "1,8,64", value_delimiter = ',')]
        batch: Vec<usize>,
        /// Comma-separated precisions (auto, f32, f16, bf16, int8).
        #[arg(long, default_value = "auto", value_delimiter = ',')]
        precision: Vec<Compute>,
        #[arg(long, default_value_t = 50)]
        runs: usize,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Clone, Copy, PartialEq, ValueEnum)]
enum SplitKind {
    All,
    Valid,
    Train,
}

/// Another valid/train split than the one the model card records.
#[derive(Args, Clone)]
struct SplitOverride {
    /// For valid/train: the held-out share of signers (default: the training split recorded in
    /// the model card).
    #[arg(long)]
    valid_fraction: Option<f64>,
    /// For valid/train: the split seed (default: the training split recorded in the model card).
    #[arg(long)]
    split_seed: Option<u64>,
}

/// The split to evaluate: explicit fraction/seed where given, the rest from the training split
/// the model card records.
fn resolve_split(kind: SplitKind, card: &bundle::ModelCard, resplit: SplitOverride) -> Result<Split> {
    let SplitOverride { valid_fraction, split_seed } = resplit;
    if kind == SplitKind::All {
        if valid_fraction.is_some() || split_seed.is_some() {
            bail!("--valid-fraction and --split-seed choose a valid/train split; add --split valid or --split train");
        }
        return Ok(Split::All);
    }
    if let Some(f) = valid_fraction {
        if !(f > 0.0 && f < 1.0) {
            bail!("--valid-fraction {f}: expected a share of signers in (0, 1)");
        }
    }
    let valid = kind == SplitKind::Valid;
    let recorded = || {
        card.split.clone().ok_or_else(|| {
            anyhow::anyhow!("the model card records no training split; give --valid-fraction and --split-seed")
        })
    };
    let split = match (valid_fraction, split_seed) {
        (Some(fraction), Some(seed)) => fraction_split(fraction, seed),
        (None, None) => recorded()?,
        // One override: a fraction split, the other value from the training run.
        (f, s) => {
            let t = recorded()?;
            fraction_split(f.unwrap_or(t.valid_fraction), s.unwrap_or(t.split_seed))
        }
    };
    if split.folds == 0 && split.valid_fraction == 0.0 {
        bail!(
            "the model was trained with data.valid_fraction = 0 (no held-out signers); use --split all or give --valid-fraction"
        );
    }
    Ok(Split::of_training(&split, valid))
}

/// A held-out-fraction split (no folds, held-out signers not known in advance).
fn fraction_split(valid_fraction: f64, split_seed: u64) -> TrainingSplit {
    TrainingSplit { valid_fraction, split_seed, folds: 0, fold: 0, valid_groups: Vec::new() }
}

fn main() -> ExitCode {
    // First, before any thread starts: tensor buffers are reused instead of faulted in again.
    device::keep_freed_memory();
    device::quiet_headless_env();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    // Before any device is used: cubecl's caches in the per-user directory the trainer uses.
    if let Some(w) = &device::runtime::configure(None, None).warning {
        w.lines().for_each(|line| eprintln!("warning: {line}"));
    }
    // Third-party decoders' panics on a damaged file (Burn's weights, parquet pages) become errors
    // naming the file (`data::guard`): no panic trace.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !data::guard::decoding() {
            default_hook(info);
        }
    }));
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The model of `--model` computing as `--precision` (an [`infer::Compute`]) says, typed by its
/// task, with the lexicon of `--lexicon` / `--no-lexicon` (CTC models only).
fn load(m: &ModelArgs, compute: Compute, top_k: usize) -> Result<Loaded> {
    let policy = device::SelectionPolicy { allow_software_wgpu: m.allow_software_wgpu, ..Default::default() };
    let opts = PredictorOptions {
        device: m.device,
        compute,
        eval_graph: !m.burn_forward,
        top_k,
        choose: m.choose,
        policy,
        ..Default::default()
    };
    let predictor = Predictor::load(&m.model, &opts)?;
    if m.choose == device::Choose::Fastest {
        eprintln!("device: {} ({})", predictor.device_name(), predictor.device_reason());
    }
    let relexicon = m.lexicon.is_some() || m.no_lexicon;
    Ok(match predictor.into_task() {
        Loaded::Transcriber(t) if relexicon => {
            let words = m.lexicon.as_deref().map(data::tokens::WordList::read).transpose()?;
            Loaded::Transcriber(t.with_lexicon(words.as_ref())?)
        }
        Loaded::Classifier(c) if relexicon => bail!(
            "{} is a sign classifier: --lexicon and --no-lexicon apply to continuous-recognition (CTC) models",
            c.model_dir().display()
        ),
        loaded => loaded,
    })
}

fn collect_inputs(input: &Path) -> Result<Vec<PathBuf>> {
    if input.is_file() {
        if !infer::is_sequence_file(input) {
            bail!("{}: expected a {} file", input.display(), infer::SEQUENCE_EXTENSIONS);
        }
        return Ok(vec![input.to_path_buf()]);
    }
    if !input.is_dir() {
        bail!("{}: no such file or directory", input.display());
    }
    let out = infer::sequence_files(input)?;
    if out.is_empty() {
        bail!("{}: no {} files in it", input.display(), infer::SEQUENCE_EXTENSIONS);
    }
    Ok(out)
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Predict { model, input, top_k, precision, batch, json } => {
            let loaded = load(&model, precision, top_k)?;
            let files = collect_inputs(&input)?;
            let bar = if files.len() > batch && !json {
                indicatif::ProgressBar::new(files.len() as u64)
            } else {
                indicatif::ProgressBar::hidden()
            };
            let mut failed = 0;
            // Each result as (JSON line, text line), or the error naming the file.
            let mut show = |f: &Path, result: infer::Result<(serde_json::Value, String)>| {
                match result {
                    Ok((value, text)) => bar.suspend(|| {
                        if json {
                            println!("{value}");
                        } else {
                            println!("{}: {text}", f.display());
                        }
                    }),
                    Err(e) => {
                        failed += 1;
                        bar.suspend(|| eprintln!("error: {e}"));
                    }
                }
                bar.inc(1);
            };
            match loaded {
                Loaded::Classifier(c) => c.predict_files(&files, batch, |f, result| {
                    show(
                        f,
                        result.map(|p| {
                            let tops: Vec<String> =
                                p.top.iter().map(|r| format!("{} {:.3}", r.label, r.probability)).collect();
                            (serde_json::json!({ "path": f, "top": p.top }), tops.join(" | "))
                        }),
                    )
                })?,
                Loaded::Transcriber(t) => t.transcribe_files(&files, batch, |f, result| {
                    show(
                        f,
                        result.map(|t| {
                            let spans: Vec<String> = t
                                .tokens
                                .iter()
                                .map(|k| format!("{} [{}-{}] {:.2}", k.label, k.start, k.end, k.confidence))
                                .collect();
                            let text = format!("\"{}\" ({})", t.text, spans.join(", "));
                            (serde_json::json!({ "path": f, "text": t.text, "tokens": t.tokens }), text)
                        }),
                    )
                })?,
            }
            bar.finish_and_clear();
            if failed > 0 {
                eprintln!("{failed} of {} inputs could not be classified", files.len());
                return Ok(ExitCode::from(1));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Stream { model, input, stream, max_line_bytes, precision, json } => {
            let predictor = Arc::new(load(&model, precision, 5)?.into_predictor());
            let mut rec = StreamingRecognizer::new(predictor.clone(), stream.config())?;
            let print = |e: &infer::SignEvent| -> Result<()> {
                if json {
                    println!("{}", serde_json::to_string(e)?);
                } else {
                    println!("frames {:>5}-{:<5} {} ({:.2})", e.start_frame, e.end_frame, e.label, e.confidence);
                }
                // Live consumers read events as they happen.
                std::io::Write::flush(&mut std::io::stdout())?;
                Ok(())
            };
            let mut count = 0usize;
            let mut bad = 0usize;
            if input.as_os_str() == "-" {
                // Live: JSON lines on stdin, events printed as each sign ends; a bad line is
                // named and skipped.
                for line in infer::live::frame_lines(std::io::stdin().lock(), max_line_bytes) {
                    match line.context("reading stdin")? {
                        (_, Ok(f)) => {
                            for e in rec.push(f.frame, &f.points)? {
                                print(&e)?;
                                count += 1;
                            }
                        }
                        (n, Err(e)) => {
                            bad += 1;
                            let e = match e {
                                infer::live::BadLine::TooLong { len, max } => {
                                    format!("{len} bytes, over --max-line-bytes {max}")
                                }
                                other => other.to_string(),
                            };
                            eprintln!("error: stdin line {n}: {e} (frame skipped)");
                        }
                    }
                }
            } else {
                let sample = predictor.read_file(&input)?;
                let data::Sample::Landmarks(seq) = sample else {
                    bail!("{}: not a landmark recording ([frames, landmarks, 3])", input.display())
                };
                for t in 0..seq.frames() {
                    let frame: Vec<[f32; 3]> = (0..seq.points).map(|p| seq.at(t, p)).collect();
                    for e in rec.push(i64::from(seq.frame_ids[t]), &frame)? {
                        print(&e)?;
                        count += 1;
                    }
                }
            }
            for e in rec.finish()? {
                print(&e)?;
                count += 1;
            }
            if count == 0 && !json {
                println!("no sign recognized");
            }
            if bad > 0 {
                eprintln!("{bad} input lines could not be read");
                return Ok(ExitCode::from(1));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::MakeTakes { model, data, to, split, resplit, signs, pause_frames, seed } => {
            bundle::layout::check_new_dir(&to, "the takes", "; choose another --to")?;
            let card = bundle::card::read_card(&bundle::layout::find_model_dir(&model)?)?;
            let split = resolve_split(split, &card, resplit)?;
            let index = data::index::open(&data)?;
            if index.continuous.is_some() {
                bail!("{}: a continuous dataset; make-takes joins isolated sign clips", data.display());
            }
            let positions = split.positions(&index);
            if positions.is_empty() {
                bail!("{}: no sequence in split {split}", data.display());
            }
            let take = data::takes::TakeConfig { signs, pause_frames, ..Default::default() };
            let (written, skipped) =
                data::takes::takes_from_dataset(&index, &positions, &card.preprocess, &take, seed, &to)?;
            for reason in &skipped {
                eprintln!("warning: skipped {reason}");
            }
            if written.is_empty() {
                bail!("{}: none of the {} clips of split {split} could be read", data.display(), positions.len());
            }
            println!(
                "wrote {} takes of up to {signs} signs ({} clips, {} skipped) to {}",
                written.len(),
                positions.len() - skipped.len(),
                skipped.len(),
                to.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::EvalStream { model, input, stream, fps, precision, json } => {
            let takes = infer::eval_stream::find_takes(&input)?;
            let predictor = Arc::new(load(&model, precision, 5)?.into_predictor());
            let opts = infer::eval_stream::StreamEvalOptions { stream: stream.config(), fps };
            let bar =
                if json { indicatif::ProgressBar::hidden() } else { indicatif::ProgressBar::new(takes.len() as u64) };
            let mut per_take = Vec::with_capacity(takes.len());
            for take in &takes {
                per_take.extend(
                    infer::eval_stream::evaluate(predictor.clone(), std::slice::from_ref(take), &opts)?.per_take,
                );
                bar.inc(1);
            }
            bar.finish_and_clear();
            let report = infer::eval_stream::StreamEvalReport::from_takes(per_take, fps);
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", report.render());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Eval { model, data, split, resplit, batch, top_k, precision, max_bad_fraction, out, json } => {
            if !(0.0..=1.0).contains(&max_bad_fraction) {
                bail!("--max-bad-fraction {max_bad_fraction}: expected a share in [0, 1]");
            }
            if batch == 0 || top_k == 0 {
                bail!("--batch and --top-k must be at least 1");
            }
            if let Some(dir) = &out {
                // Before the evaluation, not after it: a refused --out costs no time.
                infer::eval::check_report_dir(dir)?;
            }
            let loaded = load(&model, precision, top_k)?;
            let split = resolve_split(split, loaded.predictor().card(), resplit)?;
            let opts = EvalOptions { split, batch, top_k, max_bad_fraction, progress: !json };
            let (pretty, rendered, written) = match &loaded {
                Loaded::Classifier(c) => {
                    let report = infer::eval::evaluate(c, &data, &opts)?;
                    let written = out.as_deref().map(|dir| report.write_dir(dir)).transpose()?;
                    (serde_json::to_string_pretty(&report)?, report.render(), written)
                }
                Loaded::Transcriber(t) => {
                    let report = infer::eval_ctc::evaluate(t, &data, &opts)?;
                    let written = out.as_deref().map(|dir| report.write_dir(dir)).transpose()?;
                    (serde_json::to_string_pretty(&report)?, report.render(), written)
                }
            };
            if json {
                println!("{pretty}");
            } else {
                print!("{rendered}");
            }
            if let (Some(dir), Some(written)) = (out, written) {
                if !json {
                    let names: Vec<String> = written
                        .iter()
                        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                        .collect();
                    println!("wrote {}/{{{}}}", dir.display(), names.join(", "));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::ExportSafetensors { model, out } => {
            let card = infer::interop::export_safetensors(&model, &out)?;
            println!("wrote {} ({} parameters, {} classes)", out.display(), card.trainable_params, card.labels.len());
            Ok(ExitCode::SUCCESS)
        }
        Command::ExportOnnx { model, out, input } => {
            let card = infer::onnx::export_onnx(&model, &out, input)?;
            println!(
                "wrote {} ({} model, {:?}, {} classes, ONNX opset {})",
                out.display(),
                card.model.kind(),
                card.task,
                card.labels.len(),
                infer::onnx::graph::OPSET
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::ImportTorch { weights, card, out } => {
            let card_dir = if card.is_file() {
                card.parent().map(Path::to_path_buf).unwrap_or_default()
            } else {
                bundle::layout::find_model_dir(&card)?
            };
            let model_card = bundle::card::read_card(&card_dir)?;
            infer::interop::import_torch(&model_card, &weights, &out)?;
            println!(
                "wrote {} ({} model, {} classes)",
                out.display(),
                model_card.model.kind(),
                model_card.labels.len()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Logits { model, input, out } => {
            if std::fs::symlink_metadata(&out).is_ok() {
                bail!("{}: exists; infer does not overwrite files: remove it or choose another --out", out.display());
            }
            let loaded = load(&model, Compute::Float(PrecisionSetting::F32), 1)?;
            let arrays = data::npy::read_npz_arrays(&input)?;
            let get = |name: &str| arrays.iter().find(|(n, _)| n == name).map(|(_, a)| a);
            let Some(x) = get("x") else { bail!("{}: no array `x` in the archive", input.display()) };
            let [b, t, f] = x.shape[..] else {
                bail!("{}: `x` has shape {:?}; expected [batch, frames, features]", input.display(), x.shape)
            };
            let valid = match get("valid") {
                Some(v) if v.data.len() == b => v.data.iter().map(|&n| (n.max(0.0) as usize).min(t)).collect(),
                Some(v) => bail!("{}: `valid` has {} values for a batch of {b}", input.display(), v.data.len()),
                None => vec![t; b],
            };
            let windows: Vec<data::Prepared> = (0..b)
                .map(|i| data::Prepared {
                    window: t,
                    features: f,
                    valid: valid[i],
                    data: x.data[i * t * f..(i + 1) * t * f].to_vec(),
                })
                .collect();
            let (shape, values, device) = match loaded {
                Loaded::Classifier(c) => {
                    let logits = c.logits(&windows)?;
                    let classes = logits.first().map_or(0, Vec::len);
                    (vec![b, classes], logits.concat(), c.into_predictor().device_name().to_string())
                }
                Loaded::Transcriber(tr) => {
                    let frames = tr.frame_log_probs(&windows)?;
                    let classes = frames.first().map_or(0, |(v, _)| v.len() / t.max(1));
                    let values = frames.into_iter().flat_map(|(v, _)| v).collect();
                    (vec![b, t, classes], values, tr.into_predictor().device_name().to_string())
                }
            };
            data::npy::write_npy(&out, &shape, &values)?;
            println!(
                "wrote {} ({shape:?} {}, {device})",
                out.display(),
                if shape.len() == 2 { "logits" } else { "log-probabilities" }
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench { model, batch, precision, runs, json } => {
            let mut rows = Vec::new();
            for p in precision {
                let predictor = load(&model, p, 5)?.into_predictor();
                let (w, f) = (predictor.window(), predictor.card().input_features);
                // Timing does not depend on the values; a fixed pseudo-random window.
                let mut x = 0x9E37_79B9u32;
                let data: Vec<f32> = (0..w * f)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 17;
                        x ^= x << 5;
                        (x as f32 / u32::MAX as f32) - 0.5
                    })
                    .collect();
                let window = data::Prepared { window: w, features: f, valid: w, data };
                for &b in &batch {
                    let s = infer::measure(&predictor, &window, b, runs)?;
                    if !json {
                        println!(
                            "{:<5} batch {:>4}: p50 {:>8.2} ms  p95 {:>8.2} ms  p99 {:>8.2} ms  {:>9.1} samples/s  ({}, {}, {} frames x {} features, parameters {:.2} MB)",
                            s.precision,
                            s.batch,
                            s.p50_ms,
                            s.p95_ms,
                            s.p99_ms,
                            s.samples_per_s,
                            predictor.device_name(),
                            s.engine,
                            w,
                            f,
                            s.parameter_bytes as f64 / 1e6
                        );
                    }
                    rows.push(s);
                }
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
