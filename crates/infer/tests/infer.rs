//! Inference tests on a model trained here by the real trainer: agreement with the trainer's own
//! evaluation, half precision, streaming, and every bad-input error.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use data::{LandmarkSequence, Prepared, Sample};
use device::Precision;
use infer::{Predictor, PredictorOptions, StreamConfig, StreamingRecognizer};
use trainer::config::{ConfigBuilder, ExperimentConfig};

struct Trained {
    _tmp: tempfile::TempDir,
    run_dir: PathBuf,
    cfg: ExperimentConfig,
    summary: trainer::train::Summary,
}

/// One model for the whole test binary: the built-in default experiment (small conv-transformer,
/// 32-frame windows) on 6 signs x 6 signers x 4 repetitions, 2 signers held out.
fn trained() -> &'static Trained {
    static CELL: OnceLock<Trained> = OnceLock::new();
    CELL.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let mut b = ConfigBuilder::new();
        for s in [
            format!("data.synthetic_dir={}", tmp.path().join("synth").display()),
            format!("data.cache_dir={}", tmp.path().join("cache").display()),
            "training.progress=off".into(),
            "device.device=cpu".into(),
            "training.epochs=15".into(),
            "synthetic.classes=6".into(),
            "synthetic.signers=6".into(),
            "synthetic.repetitions=4".into(),
            "data.valid_fraction=0.34".into(),
            "training.batch_size=16".into(),
        ] {
            b.add_set(&s).unwrap();
        }
        let cfg = b.build().unwrap();
        let run_dir = tmp.path().join("run");
        let out =
            trainer::run(cfg.clone(), trainer::RunOptions { run_dir: Some(run_dir.clone()), ..Default::default() })
                .unwrap();
        Trained { _tmp: tmp, run_dir, cfg, summary: out.summary.unwrap() }
    })
}

fn cpu(precision: Option<Precision>) -> PredictorOptions {
    PredictorOptions { device: device::DeviceSpec::Cpu, precision, ..Default::default() }
}

/// The held-out sequences, read from their files, with labels.
fn validation_files(t: &Trained) -> (Vec<Sample>, Vec<usize>, Vec<usize>) {
    let pre = Arc::new(data::preprocess::Preprocessor::new(t.cfg.preprocess.clone()).unwrap());
    let prepared = trainer::train::prepare_data(&t.cfg, &pre, false).unwrap();
    let samples = prepared
        .valid
        .iter()
        .map(|&i| data::dataset::read_sample(data::index::Format::Islr, &prepared.dataset.items[i].path).unwrap())
        .collect();
    let labels = prepared.valid.iter().map(|&i| prepared.dataset.items[i].label).collect();
    (samples, labels, prepared.valid)
}

#[test]
fn predictions_equal_the_trainers_evaluation() {
    let t = trained();
    let predictor = Predictor::load(&t.run_dir, &cpu(None)).unwrap();
    let (samples, labels, valid) = validation_files(t);
    let preds = predictor.predict_batch(&samples).unwrap();

    // The trainer's own evaluation of the exported weights on the same split.
    let dev = device::dispatch_device(&device::Target::Cpu).unwrap();
    let (_, model) = models::bundle::load_bundle::<device::Backend>(&t.run_dir.join("model"), &dev).unwrap();
    let pre = Arc::new(data::preprocess::Preprocessor::new(t.cfg.preprocess.clone()).unwrap());
    let prepared = trainer::train::prepare_data(&t.cfg, &pre, false).unwrap();
    let eval = trainer::train::evaluate(&model, &prepared.dataset, &pre, &valid, 8, 1, &dev);

    let ours: Vec<usize> = preds.iter().map(|p| p.best().index).collect();
    assert_eq!(ours, eval.predictions, "infer (raw files -> both preprocessing stages) vs trainer (cached stage 1)");
    let top1 = ours.iter().zip(&labels).filter(|(a, b)| a == b).count() as f64 / labels.len() as f64;
    assert!((top1 - eval.top1).abs() < 1e-12);
    assert_eq!(Some(top1), t.summary.best.as_ref().and_then(|b| (b.metric == "valid_top1").then_some(b.value)));
    assert!(top1 > 0.6, "the test model should have learned (chance 0.167): {top1}");
    for p in &preds {
        let sum: f32 = p.top.iter().map(|r| r.probability).sum();
        assert!(sum <= 1.0 + 1e-5 && p.top.windows(2).all(|w| w[0].probability >= w[1].probability));
        assert_eq!(p.top.len(), 5);
    }
    // Same answers when shared across threads.
    let shared = Arc::new(predictor);
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let (p, s) = (shared.clone(), samples.clone());
            std::thread::spawn(move || p.predict_batch(&s).unwrap().iter().map(|x| x.best().index).collect::<Vec<_>>())
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), ours);
    }
}

#[test]
fn half_precision_agrees_with_f32() {
    let t = trained();
    let (samples, _, _) = validation_files(t);
    let f32p = Predictor::load(&t.run_dir, &cpu(None)).unwrap().predict_batch(&samples).unwrap();
    for p in [Precision::F16, Precision::Bf16] {
        let predictor = Predictor::load(&t.run_dir, &cpu(Some(p))).unwrap();
        assert_eq!(predictor.precision(), p);
        let half = predictor.predict_batch(&samples).unwrap();
        let agree = half.iter().zip(&f32p).filter(|(a, b)| a.best().index == b.best().index).count();
        let rate = agree as f64 / samples.len() as f64;
        let max_dp = half
            .iter()
            .zip(&f32p)
            .map(|(a, b)| {
                (a.best().probability - b.top.iter().find(|r| r.index == a.best().index).map_or(0.0, |r| r.probability))
                    .abs()
            })
            .fold(0f32, f32::max);
        eprintln!(
            "{p}: top-1 agreement with f32 {agree}/{} = {rate:.3}, max |dp| of the top class {max_dp:.4}",
            samples.len()
        );
        assert!(rate >= 0.95, "{p}: top-1 agreement {rate}");
        assert!(max_dp < 0.05, "{p}: probabilities differ by {max_dp}");
    }
}

fn frames_of(seq: &LandmarkSequence) -> Vec<Vec<[f32; 3]>> {
    (0..seq.frames()).map(|t| (0..seq.points).map(|p| seq.at(t, p)).collect()).collect()
}

#[test]
fn streaming_emits_concatenated_signs_in_order() {
    let t = trained();
    let predictor = Arc::new(Predictor::load(&t.run_dir, &cpu(None)).unwrap());
    // Three signs by a signer the model never saw, back to back, then the hands drop out of view.
    // The test is about the recognizer, not the model: it uses three signs the model gets right
    // in isolation (confidence >= 0.8), in an order that is not the class order.
    let signer = 77;
    let mut good: Vec<usize> = (0..t.cfg.synthetic.classes)
        .filter(|&c| {
            let p = predictor
                .predict(&Sample::Landmarks(data::synth::generate_sequence(&t.cfg.synthetic, c, signer, 0)))
                .unwrap();
            p.best().index == c && p.best().probability >= 0.8
        })
        .collect();
    assert!(good.len() >= 3, "the model recognizes too few isolated signs of signer {signer}: {good:?}");
    good.truncate(3);
    let classes = [good[2], good[0], good[1]];
    // Between signs the hands drop out of view for a moment (10 frames), as between clips.
    let pause = |last: &Vec<[f32; 3]>, n: usize| {
        let mut rest = last.clone();
        for hand in data::layout::named_subset("hands").unwrap() {
            rest[hand] = [f32::NAN; 3];
        }
        std::iter::repeat_n(rest, n)
    };
    let mut frames: Vec<Vec<[f32; 3]>> = Vec::new();
    for &c in &classes {
        frames.extend(frames_of(&data::synth::generate_sequence(&t.cfg.synthetic, c, signer, 0)));
        let p = pause(frames.last().unwrap(), if c == classes[2] { 16 } else { 10 });
        frames.extend(p);
    }
    let mut rec = StreamingRecognizer::new(predictor.clone(), StreamConfig::default()).unwrap();
    let mut events = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        // A gap in frame numbers (a dropped camera frame) is fine.
        let id = if i > 10 { i as i64 + 1 } else { i as i64 };
        events.extend(rec.push(id, f).unwrap());
    }
    events.extend(rec.finish().unwrap());
    let got: Vec<usize> = events.iter().map(|e| e.index).collect();
    eprintln!("events: {events:?}");
    // Exactly the signs, in order: the pauses end each sign, so no window straddles two signs
    // (before segmentation a straddling window was reported as a third sign: [3, 2, 1, 2]).
    assert_eq!(got, classes.to_vec(), "events {events:?}");
    // Without segmentation the straddling windows are back: the pause rule is what removes them,
    // and the signs are still found in order.
    let mut rec =
        StreamingRecognizer::new(predictor.clone(), StreamConfig { boundary_frames: 0, ..Default::default() }).unwrap();
    let mut plain = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        plain.extend(rec.push(i as i64, f).unwrap());
    }
    plain.extend(rec.finish().unwrap());
    let plain: Vec<usize> = plain.iter().map(|e| e.index).collect();
    eprintln!("without segmentation: {plain:?}");
    let mut it = plain.iter();
    assert!(classes.iter().all(|c| it.any(|g| g == c)), "expected signs {classes:?} in order, got {plain:?}");
    assert!(events.windows(2).all(|w| w[0].end_frame <= w[1].end_frame && w[0].start_frame < w[1].start_frame));
    assert!(events.iter().all(|e| e.confidence >= 0.6 && e.label == predictor.labels()[e.index]));

    // Bad stream input.
    let mut rec = StreamingRecognizer::new(predictor.clone(), StreamConfig::default()).unwrap();
    rec.push(5, &frames[0]).unwrap();
    let e = rec.push(5, &frames[1]).unwrap_err().to_string();
    assert!(e.contains("frame numbers must increase: 5 after 5"), "{e}");
    let e = rec.push(6, &frames[1][..100]).unwrap_err().to_string();
    assert!(e.contains("frame 6 has 100 landmarks, earlier frames had 543"), "{e}");
    let e = StreamingRecognizer::new(predictor, StreamConfig { hop: 0, ..Default::default() }).unwrap_err().to_string();
    assert!(e.contains("hop, smoothing, min_hops >= 1"), "{e}");
}

fn copy_model(t: &Trained, to: &Path) -> PathBuf {
    let dir = to.join("model");
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["model.json", "model.mpk", "config.toml", "labels.json"] {
        std::fs::copy(t.run_dir.join("model").join(f), dir.join(f)).unwrap();
    }
    dir
}

fn load_err(path: &Path) -> String {
    Predictor::load(path, &cpu(None)).unwrap_err().to_string()
}

#[test]
fn bad_models_and_inputs_are_errors() {
    let t = trained();
    let tmp = tempfile::tempdir().unwrap();
    let e = load_err(&tmp.path().join("nope"));
    assert!(e.ends_with("nope: does not exist"), "{e}");
    let e = load_err(tmp.path());
    assert!(e.contains("is not a SignFlow model: expected model.json or model/model.json in it"), "{e}");

    let edit_card = |name: &str, f: &dyn Fn(&mut serde_json::Value)| {
        let dir = copy_model(t, &tmp.path().join(name));
        let mut card: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("model.json")).unwrap()).unwrap();
        f(&mut card);
        std::fs::write(dir.join("model.json"), card.to_string()).unwrap();
        dir
    };
    let e = load_err(&edit_card("format", &|c| c["format"] = "pytorch".into()));
    assert!(e.contains("`format` is \"pytorch\", expected \"signflow-model\""), "{e}");
    let e = load_err(&edit_card("version", &|c| c["format_version"] = 7.into()));
    assert!(e.contains("`format_version` is 7; this SignFlow reads version 1"), "{e}");
    let e = load_err(&edit_card("arch", &|c| c["model"]["dim"] = 48.into()));
    assert!(e.contains("model.mpk: cannot load the weights"), "{e}");
    let e = load_err(&edit_card("labels", &|c| c["labels"] = serde_json::json!(["only"])));
    assert!(e.contains("needs at least 2 labels"), "{e}");
    let e = load_err(&edit_card("kind", &|c| c["model"]["kind"] = "lstm".into()));
    assert!(e.contains("invalid model card") && e.contains("lstm"), "{e}");

    let corrupt = copy_model(t, &tmp.path().join("corrupt"));
    let bytes = std::fs::read(corrupt.join("model.mpk")).unwrap();
    std::fs::write(corrupt.join("model.mpk"), &bytes[..bytes.len() / 3]).unwrap();
    let e = load_err(&corrupt);
    assert!(e.contains("model.mpk: cannot load the weights"), "{e}");
    let missing = copy_model(t, &tmp.path().join("missing"));
    std::fs::remove_file(missing.join("model.mpk")).unwrap();
    let e = load_err(&missing);
    assert!(e.contains("model.mpk: the weights file is missing"), "{e}");

    // Inputs.
    let p = Predictor::load(&t.run_dir, &cpu(None)).unwrap();
    let seq = data::synth::generate_sequence(&t.cfg.synthetic, 1, 0, 0);
    let ok = Sample::Landmarks(seq.clone());
    let few_points = Sample::Landmarks(seq.select(&(0..100).collect::<Vec<_>>()));
    let e = p.predict_batch(&[ok.clone(), few_points]).unwrap_err().to_string();
    assert!(e.starts_with("input 1: ") && e.contains("has 100 landmarks per frame"), "{e}");
    let e = p.predict(&Sample::Landmarks(LandmarkSequence::empty(10, 543))).unwrap_err().to_string();
    assert!(e.contains("empty sequence"), "{e}");
    let e = p.predict(&Sample::Landmarks(LandmarkSequence::empty(0, 543))).unwrap_err().to_string();
    assert!(e.contains("empty sequence"), "{e}");
    let features = Sample::Features(data::FeatureSequence { features: 12, data: vec![0.5; 12 * 20] });
    let e = p.predict(&features).unwrap_err().to_string();
    assert!(e.contains("36 features per frame after preprocessing, the model takes 708"), "{e}");
    let w = p.window();
    let wrong = Prepared { window: w, features: 10, valid: w, data: vec![0.0; w * 10] };
    let e = p.predict_prepared(&[wrong]).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "prepared window is {w} frames x 10 features ({} values), the model takes {w} x 708",
            w * 10
        )),
        "{e}"
    );
    let mut nan = p.prepare(&ok, 0).unwrap();
    nan.data[5] = f32::NAN;
    let e = p.predict_prepared(&[nan]).unwrap_err().to_string();
    assert!(e.contains("value 5 is not finite"), "{e}");
    assert!(matches!(p.predict_prepared(&[]), Ok(v) if v.is_empty()));
    // The good input still works after the errors.
    assert_eq!(p.predict(&ok).unwrap().top.len(), 5);
    assert!(p.prepare(&ok, 0).is_ok());
}
