//! Train a SignFlow model with burn-train's `Learner` instead of SignFlow's trainer, then serve it
//! with `infer`.
//!
//! ```bash
//! cargo run --release -p learn --example burn_train_learner                 # 10 epochs, CPU/GPU auto
//! cargo run --release -p learn --example burn_train_learner -- --epochs 8 --out runs/burn-train
//! cargo run --release -p learn --features tui --example burn_train_learner  # burn-train's dashboard
//! ```
//!
//! It generates SignFlow's built-in synthetic signs (8 signs x 6 signers) into `<out>/data`,
//! holds 2 signers out, trains a small conv-transformer with burn-train (`SupervisedTraining`:
//! loss and accuracy metrics, checkpoints and logs in `<out>/burn-train`), reports the metrics,
//! exports the weights as a SignFlow bundle (`<out>/model`) and evaluates that bundle on the
//! held-out signers with `infer`, as `infer eval --split valid` would.

use std::error::Error;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use bundle::{ModelCard, TrainingSplit};
use burn::optim::lr_scheduler::cosine::CosineAnnealingLrSchedulerConfig;
use burn::optim::AdamWConfig;
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn_train::metric::{AccuracyMetric, LossMetric};
use burn_train::{Learner, LearnerSummary, SupervisedTraining};
use data::dataset::{LoadOptions, OnError, SignDataset};
use data::preprocess::{PreprocessConfig, Preprocessor};
use data::synth::SynthConfig;
use device::{DeviceSpec, SelectionPolicy};
use learn::{LoaderSettings, ProgressRenderer, SignClassifier};
use models::conv_transformer::ConvTransformerConfig;
use models::ModelConfig;

/// Autodiff over Burn's run-time backend dispatch (CUDA, WGPU or the CPU).
type B = device::TrainBackend;

const VALID_FRACTION: f64 = 0.34;
const SPLIT_SEED: u64 = 0;

struct Args {
    epochs: usize,
    out: PathBuf,
    device: DeviceSpec,
}

impl Args {
    fn parse() -> Result<Self, String> {
        let mut args = Self { epochs: 10, out: PathBuf::from("runs/burn-train-example"), device: DeviceSpec::Auto };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let mut value = || it.next().ok_or(format!("{flag} needs a value"));
            match flag.as_str() {
                "--epochs" => {
                    let v = value()?;
                    args.epochs = v
                        .parse()
                        .ok()
                        .filter(|&e| e > 0)
                        .ok_or(format!("--epochs {v}: expected a whole number >= 1"))?;
                }
                "--out" => args.out = PathBuf::from(value()?),
                "--device" => {
                    let v = value()?;
                    args.device = v.parse().map_err(|e| format!("--device {v}: {e}"))?;
                }
                other => {
                    return Err(format!("unknown argument {other}; expected --epochs N, --out DIR, --device SPEC"))
                }
            }
        }
        Ok(args)
    }
}

fn main() -> ExitCode {
    device::keep_freed_memory();
    device::quiet_headless_env();
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    let args = Args::parse()?;
    let selected = device::resolve(&args.device, &SelectionPolicy::default())?;
    println!("device: {} ({})", selected.selection.name, selected.selection.reason);
    let device = selected.device;

    // Data: SignFlow's synthetic signs, stage-1 preprocessed, split by signer.
    let root = args.out.join("data");
    if !root.join(data::index::ISLR_CSV).is_file() {
        let synth = SynthConfig { classes: 8, signers: 6, repetitions: 4, ..SynthConfig::default() };
        data::synth::generate(&root, &synth, true)?;
    }
    let preprocess = PreprocessConfig { window: 32, ..PreprocessConfig::default() };
    let pre = Arc::new(Preprocessor::new(preprocess.clone())?);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let opts = LoadOptions { on_error: OnError::Fail, max_bad_fraction: 0.0, cache_dir: None, threads, progress: true };
    let ds = Arc::new(SignDataset::load(&data::index::open(&root)?, &pre, &opts)?);
    let (train, valid) = ds.split_by_group(VALID_FRACTION, SPLIT_SEED);
    println!(
        "data: {} sequences of {} signs, {} for training, {} held out (signers {:?})",
        ds.items.len(),
        ds.labels.len(),
        train.len(),
        valid.len(),
        ds.group_names(&valid)
    );

    // A SignFlow model as burn-train's training step.
    let config = ModelConfig::ConvTransformer(ConvTransformerConfig {
        dim: 48,
        stages: 1,
        conv_blocks_per_stage: 2,
        kernel: 9,
        heads: 4,
        drop_path: 0.0,
        attention_dropout: 0.1,
        late_dropout: 0.0,
        ..ConvTransformerConfig::default()
    });
    let model = SignClassifier::new(config.init::<B>(ds.features, ds.labels.len(), &device), 0.1);

    // burn-train: SignFlow's loaders, AdamW, cosine decay, loss and accuracy, checkpoints.
    let settings = LoaderSettings { batch_size: 16, seed: 1, ..LoaderSettings::default() };
    let loaders = learn::loaders::<B>(&ds, &pre, &train, &valid, &settings, &device)?;
    let iterations = args.epochs * train.len().div_ceil(settings.batch_size);
    let lr = CosineAnnealingLrSchedulerConfig::new(3e-3, iterations).init()?;
    let optim = AdamWConfig::new().with_weight_decay(0.01).init();
    let artifacts = args.out.join("burn-train");
    let mut training = SupervisedTraining::new(&artifacts, loaders.train, loaders.valid)
        .metrics((AccuracyMetric::new(), LossMetric::new()))
        .with_file_checkpointer(NamedMpkFileRecorder::<FullPrecisionSettings>::new())
        .num_epochs(args.epochs);
    // burn-train's dashboard when it is built in and stdout is a terminal; epoch lines otherwise.
    let dashboard = cfg!(feature = "tui") && std::io::IsTerminal::is_terminal(&std::io::stdout());
    if !dashboard {
        training = training.renderer(ProgressRenderer::new());
    }
    let result = training.launch(Learner::new(model, optim, lr));
    let trained = result.model;
    drop(result.renderer); // the dashboard leaves the terminal here

    // burn-train's record of the run (its metric logs), then the weights as a SignFlow bundle.
    let summary = LearnerSummary::new(&artifacts, &["Accuracy", "Loss"])?;
    print!("{summary}");
    let last = |name: &str| {
        let m = summary.metrics.valid.iter().find(|m| m.name == name)?;
        m.entries.last().map(|e| e.value)
    };
    let model = trained.into_model();
    let mut card = ModelCard::for_dataset(&model, config.clone(), preprocess.clone(), &ds, &train);
    card.split = Some(TrainingSplit {
        valid_fraction: VALID_FRACTION,
        split_seed: SPLIT_SEED,
        folds: 0,
        fold: 0,
        valid_groups: ds.group_names(&valid),
    });
    card.epoch = summary.epochs;
    card.step = iterations;
    card.valid_top1 = last("Accuracy").map(|a| a / 100.0);
    card.valid_loss = last("Loss");
    let record = format!("# trained with burn-train's Learner (examples/burn_train_learner.rs)\n# model: {config:?}\n");
    let bundle = bundle::save_bundle(&args.out.join("model"), &model, &card, &record)?;
    println!("exported {}", bundle.display());

    // infer serves it: the held-out signers, scored by infer's evaluation.
    let predictor = infer::Classifier::load(&bundle, &infer::PredictorOptions::default())?;
    let eval_opts = infer::eval::EvalOptions {
        split: infer::eval::Split::Valid { fraction: VALID_FRACTION, seed: SPLIT_SEED },
        ..Default::default()
    };
    let report = infer::eval::evaluate(&predictor, &root, &eval_opts)?;
    println!(
        "infer ({}, {}): held-out top-1 {:.3} on {} sequences (burn-train's last validation accuracy {})",
        predictor.device_name(),
        predictor.engine_name(),
        report.top1,
        report.n,
        card.valid_top1.map_or("-".into(), |a| format!("{a:.3}"))
    );
    Ok(())
}
