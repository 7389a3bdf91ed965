//! SignFlow models and data in burn-train's Learner: real burn-train runs on the CPU backend,
//! scored against SignFlow's own evaluation (the trainer's validation, `infer`).

use std::path::PathBuf;
use std::sync::Arc;

use bundle::ModelCard;
use burn::optim::AdamWConfig;
use burn_train::metric::{AccuracyMetric, LossMetric};
use burn_train::{InferenceStep, Learner, SupervisedTraining};
use data::dataset::{LoadOptions, OnError, SignDataset};
use data::loader::ItemBatcher;
use data::preprocess::{PreprocessConfig, Preprocessor};
use data::synth::SynthConfig;
use device::{DeviceSpec, DispatchDevice, Target};
use learn::{LearnError, LoaderSettings, ProgressRenderer, SignClassifier};
use models::conv_transformer::ConvTransformerConfig;
use models::decode::{CtcDecoder, DecodeConfig};
use models::ModelConfig;

type B = device::TrainBackend;

const VALID_FRACTION: f64 = 0.25;

struct Fixture {
    dir: tempfile::TempDir,
    root: PathBuf,
    preprocess: PreprocessConfig,
    pre: Arc<Preprocessor>,
    ds: Arc<SignDataset>,
    train: Vec<usize>,
    valid: Vec<usize>,
}

/// 4 signs x 4 signers x 3 recordings of SignFlow's synthetic data; one signer held out.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("data");
    let synth = SynthConfig {
        classes: 4,
        signers: 4,
        repetitions: 3,
        min_frames: 12,
        max_frames: 24,
        seed: 3,
        ..SynthConfig::default()
    };
    data::synth::generate(&root, &synth, false).unwrap();
    let preprocess = PreprocessConfig { window: 16, ..PreprocessConfig::default() };
    let pre = Arc::new(Preprocessor::new(preprocess.clone()).unwrap());
    let opts =
        LoadOptions { on_error: OnError::Fail, max_bad_fraction: 0.0, cache_dir: None, threads: 2, progress: false };
    let ds = Arc::new(SignDataset::load(&data::index::open(&root).unwrap(), &pre, &opts).unwrap());
    let (train, valid) = ds.split_by_group(VALID_FRACTION, 0);
    assert!(!train.is_empty() && !valid.is_empty());
    Fixture { dir, root, preprocess, pre, ds, train, valid }
}

fn cpu() -> DispatchDevice {
    device::dispatch_device(&Target::Cpu).unwrap()
}

fn tiny() -> ModelConfig {
    ModelConfig::ConvTransformer(ConvTransformerConfig {
        dim: 16,
        stages: 1,
        conv_blocks_per_stage: 1,
        kernel: 5,
        heads: 2,
        drop_path: 0.0,
        attention_dropout: 0.0,
        late_dropout: 0.0,
        ..ConvTransformerConfig::default()
    })
}

fn rows(t: burn::tensor::Tensor<device::Backend, 2>) -> Vec<Vec<f32>> {
    let classes = t.dims()[1];
    let v: Vec<f32> = t.into_data().iter::<f32>().collect();
    v.chunks(classes).map(<[f32]>::to_vec).collect()
}

fn argmax(row: &[f32]) -> usize {
    row.iter().enumerate().fold(0, |best, (i, &v)| if v > row[best] { i } else { best })
}

fn max_abs_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).flat_map(|(x, y)| x.iter().zip(y).map(|(p, q)| (p - q).abs())).fold(0.0, f32::max)
}

/// burn-train's `Learner` trains a SignFlow model through `SignClassifier` (TrainStep /
/// InferenceStep on `SignBatch`, `ClassificationOutput` for burn-train's metrics): the training
/// loss falls over 4 epochs, and the trained weights score the same through burn-train's
/// validation, the trainer's evaluation, and `infer` on the exported bundle.
#[test]
fn burn_train_learner_trains_a_sign_model_whose_logits_match_signflow_evaluation() {
    let f = fixture();
    let device = cpu();
    let config = tiny();
    <B as burn::tensor::backend::Backend>::seed(&device, 7);
    let model = SignClassifier::new(config.init::<B>(f.ds.features, f.ds.labels.len(), &device), 0.0);
    let settings = LoaderSettings { batch_size: 6, workers: 2, seed: 1, augment: None };
    let loaders = learn::loaders::<B>(&f.ds, &f.pre, &f.train, &f.valid, &settings, &device).unwrap();
    assert_eq!(loaders.train.num_items(), f.train.len());
    assert_eq!(loaders.valid.num_items(), f.valid.len());

    let renderer = ProgressRenderer::new();
    let history = renderer.history();
    let artifacts = f.dir.path().join("burn-train");
    let epochs = 4;
    let result = SupervisedTraining::new(&artifacts, loaders.train, loaders.valid)
        .metrics((AccuracyMetric::new(), LossMetric::new()))
        .renderer(renderer)
        .with_application_logger(None)
        .num_epochs(epochs)
        .launch(Learner::new(model, AdamWConfig::new().init(), 5e-3));

    // The renderer saw every epoch of both splits; the training loss fell.
    let history = history.lock().unwrap().clone();
    assert_eq!(history.iter().map(|h| h.epoch).collect::<Vec<_>>(), (1..=epochs).collect::<Vec<_>>());
    let train_loss: Vec<f64> = history.iter().map(|h| h.train["Loss"]).collect();
    assert!(train_loss.iter().all(|l| l.is_finite() && *l > 0.0), "{train_loss:?}");
    assert!(
        train_loss[epochs - 1] < 0.8 * train_loss[0],
        "training loss should fall by 20% in {epochs} epochs: {train_loss:?}"
    );
    // burn-train's own metric log agrees with what the renderer was handed.
    // (Equal batches: burn-train's per-epoch mean of batch values is the renderer's item mean.)
    assert_eq!(f.train.len() % settings.batch_size, 0);
    let summary = burn_train::LearnerSummary::new(&artifacts, &["Loss", "Accuracy"]).unwrap();
    assert_eq!(summary.epochs, epochs);
    let logged_loss: Vec<f64> =
        summary.metrics.train.iter().find(|m| m.name == "Loss").unwrap().entries.iter().map(|e| e.value).collect();
    assert_eq!(logged_loss.len(), epochs);
    for (logged, shown) in logged_loss.iter().zip(&train_loss) {
        assert!((logged - shown).abs() < 1e-6, "burn-train logged {logged_loss:?}, the renderer {train_loss:?}");
    }
    let logged = summary.metrics.valid.iter().find(|m| m.name == "Accuracy").unwrap();
    let last_valid_acc = history[epochs - 1].valid["Accuracy"];
    assert!((logged.entries.last().unwrap().value - last_valid_acc).abs() < 1e-6);

    // burn-train's inference step on the trained weights, over the validation split in order.
    let model = result.model;
    // (One worker thread: Burn's multi-worker loader yields batches as they are ready.)
    let in_order = LoaderSettings { workers: 0, ..settings.clone() };
    let valid_loader = learn::loaders::<B>(&f.ds, &f.pre, &f.train, &f.valid, &in_order, &device).unwrap().valid;
    let (mut logits, mut labels) = (Vec::new(), Vec::new());
    for batch in valid_loader.iter() {
        let out = InferenceStep::step(&model, batch);
        labels.extend(out.targets.into_data().convert::<i64>().to_vec::<i64>().unwrap());
        logits.extend(rows(out.output));
    }
    let want: Vec<i64> = f.valid.iter().map(|&i| f.ds.items[i].label as i64).collect();
    assert_eq!(labels, want, "validation batches come in split order");
    let correct = logits.iter().zip(&labels).filter(|(r, &l)| argmax(r) == l as usize).count();
    let top1 = correct as f64 / labels.len() as f64;
    let mean_ce = logits
        .iter()
        .zip(&labels)
        .map(|(r, &l)| {
            let m = r.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
            let lse = m + r.iter().map(|&v| (v as f64 - m).exp()).sum::<f64>().ln();
            lse - r[l as usize] as f64
        })
        .sum::<f64>()
        / labels.len() as f64;
    assert!(
        (top1 * 100.0 - last_valid_acc).abs() < 1e-9,
        "burn-train's validation accuracy {last_valid_acc}% vs {top1}"
    );

    // SignFlow's trainer scores the same weights the same.
    let decoder = CtcDecoder { config: DecodeConfig::default(), lexicon: None };
    let eval = trainer::validate::evaluate(&model.model, &f.ds, &f.pre, &f.valid, 5, 1, &decoder, &device);
    assert_eq!(eval.predictions, logits.iter().map(|r| argmax(r)).collect::<Vec<_>>());
    assert!((eval.top1 - top1).abs() < 1e-12, "trainer top-1 {} vs {top1}", eval.top1);
    assert!((eval.loss - mean_ce).abs() < 1e-5, "trainer loss {} vs {mean_ce}", eval.loss);

    // Exported as a SignFlow bundle, `infer` loads it and computes the same logits: Burn's forward
    // to float rounding, the CPU eval graph (BatchNorm folded) within 1e-4.
    let card = ModelCard::for_dataset(&model.model, config.clone(), f.preprocess.clone(), &f.ds, &f.train);
    let bundle_dir = bundle::save_bundle(&f.dir.path().join("model"), &model.model, &card, "# test\n").unwrap();
    let batcher = ItemBatcher { preprocessor: f.pre.clone(), augmenter: None, seed: 0 };
    let prepared: Vec<_> = f.valid.iter().map(|&i| batcher.prepare(&f.ds.items[i], 0, i)).collect();
    for eval_graph in [false, true] {
        let opts =
            infer::PredictorOptions { device: DeviceSpec::Cpu, eval_graph, warm_up: false, ..Default::default() };
        let predictor = infer::Classifier::load(&bundle_dir, &opts).unwrap();
        let served = predictor.logits(&prepared).unwrap();
        let diff = max_abs_diff(&served, &logits);
        let tol = if eval_graph { 1e-4 } else { 1e-5 };
        assert!(diff < tol, "infer ({}) logits differ from the learner's by {diff}", predictor.engine_name());
    }
    // ... and `infer eval` on the held-out signers' files gives the trainer's figures.
    let predictor = infer::Classifier::load(
        &bundle_dir,
        &infer::PredictorOptions { device: DeviceSpec::Cpu, eval_graph: false, ..Default::default() },
    )
    .unwrap();
    let opts = infer::eval::EvalOptions {
        split: infer::eval::Split::Valid { fraction: VALID_FRACTION, seed: 0 },
        ..Default::default()
    };
    let report = infer::eval::evaluate(&predictor, &f.root, &opts).unwrap();
    assert_eq!(report.n, f.valid.len());
    assert!((report.top1 - top1).abs() < 1e-12, "infer top-1 {} vs {top1}", report.top1);
    assert!((report.loss - mean_ce).abs() < 1e-5, "infer eval loss {} vs {mean_ce}", report.loss);
}

/// Bad input gets an error that says what was expected, never a panic.
#[test]
fn loaders_and_export_refuse_bad_input() {
    let f = fixture();
    let device = cpu();
    let ok = LoaderSettings { batch_size: 4, workers: 0, seed: 0, augment: None };
    let err = |r: learn::Result<learn::Loaders<B>>| match r {
        Err(LearnError::Invalid(m)) => m,
        Ok(_) => panic!("accepted bad input"),
    };
    let m = err(learn::loaders::<B>(&f.ds, &f.pre, &f.train, &[], &ok, &device));
    assert!(m.contains("validation split is empty"), "{m}");
    let zero = LoaderSettings { batch_size: 0, ..ok.clone() };
    let m = err(learn::loaders::<B>(&f.ds, &f.pre, &f.train, &f.valid, &zero, &device));
    assert!(m.contains("batch_size is 0"), "{m}");
    let m = err(learn::loaders::<B>(&f.ds, &f.pre, &[0, 10_000], &f.valid, &ok, &device));
    assert!(m.contains("item 10000") && m.contains(&format!("{} items", f.ds.items.len())), "{m}");

    let model = tiny().init::<device::Backend>(f.ds.features, f.ds.labels.len(), &device);
    let card = ModelCard::for_dataset(&model, tiny(), f.preprocess.clone(), &f.ds, &f.train);
    assert_eq!(card.input_features, f.ds.features);
    assert_eq!(card.median_frames, f.ds.median_frames(&f.train));
    let wrong = ModelCard { labels: vec!["a".into(), "b".into()], ..card.clone() };
    match bundle::save_bundle(&f.dir.path().join("m1"), &model, &wrong, "") {
        Err(bundle::BundleError::Invalid { message: m, .. }) => {
            assert!(m.contains("2 classes") && m.contains("4"), "{m}")
        }
        other => panic!("mismatched card accepted: {other:?}"),
    }
    // A target under a regular file cannot be created: the error names the path.
    let file = f.dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let e = bundle::save_bundle(&file.join("model"), &model, &card, "").unwrap_err();
    assert!(e.to_string().contains("a-file"), "{e}");
    assert!(!f.dir.path().join("m1").exists(), "nothing is left behind by a refused export");
}

/// Tests that need more than the quick tier builds (`cargo test --workspace --release` runs them).
mod slow {
    use std::path::PathBuf;
    use std::process::Command;

    /// `cargo test` builds the examples next to the test binaries (`<target>/release/examples`).
    fn example(name: &str) -> PathBuf {
        let exe = std::env::current_exe().unwrap();
        let dir = exe.parent().and_then(|deps| deps.parent()).unwrap().join("examples");
        let path = dir.join(name);
        assert!(
            path.is_file(),
            "{} is missing: `cargo test --workspace --release` builds it, or `cargo build --release -p learn --example {name}`",
            path.display()
        );
        path
    }

    /// The example program as a user runs it: burn-train trains, the weights are exported as a
    /// bundle, and `infer` scores the held-out signers as burn-train's last validation did.
    #[test]
    fn the_burn_train_example_trains_exports_and_serves_the_model() {
        let out = tempfile::tempdir().unwrap();
        let run = Command::new(example("burn_train_learner"))
            .args(["--device", "cpu", "--out"])
            .arg(out.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(run.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&run.stderr));
        let line = stdout.lines().find(|l| l.starts_with("infer (")).unwrap_or_else(|| panic!("{stdout}"));
        let number_after = |key: &str| -> f64 {
            let rest = &line[line.find(key).unwrap_or_else(|| panic!("{line}")) + key.len()..];
            rest.trim_start().split(|c: char| !(c.is_ascii_digit() || c == '.')).next().unwrap().parse().unwrap()
        };
        let served = number_after("held-out top-1");
        let learned = number_after("validation accuracy");
        assert_eq!(served, learned, "infer and burn-train disagree on the held-out signers: {line}");
        assert!(served >= 0.5, "8 signs (chance 0.125), the example should learn them: {line}");
        use bundle::layout::{CARD_FILE, CONFIG_FILE, LABELS_FILE, MODEL_DIR, WEIGHTS_FILE};
        for file in [WEIGHTS_FILE, CARD_FILE, LABELS_FILE, CONFIG_FILE] {
            assert!(out.path().join(MODEL_DIR).join(file).is_file(), "the exported bundle lacks {file}");
        }
    }
}
