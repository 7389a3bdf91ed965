//! Trainer tests: config layering and errors, gradient accumulation, exact resume, and a real
//! process killed (also in the middle of a checkpoint write) and resumed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use trainer::config::{BatchSize, ConfigBuilder, ExperimentConfig, FlagOverride, DEFAULT_TOML};
use trainer::dist::security::SECRET_ENV;
use trainer::inject::Faults;
use trainer::{run, RunOptions};

fn configs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs")
}

/// The smoke experiment with every path under `tmp` and no progress output.
fn smoke_builder(tmp: &Path, sets: &[&str]) -> ConfigBuilder {
    let mut b = ConfigBuilder::new();
    b.add_file(&configs_dir().join("smoke.toml")).unwrap();
    for s in [
        format!("data.synthetic_dir={}", tmp.join("synth").display()),
        format!("data.cache_dir={}", tmp.join("cache").display()),
        format!("training.out_dir={}", tmp.join("runs").display()),
        "training.progress=off".to_string(),
        "device.device=cpu".to_string(),
    ] {
        b.add_set(&s).unwrap();
    }
    for s in sets {
        b.add_set(s).unwrap();
    }
    b
}

fn smoke(tmp: &Path, sets: &[&str]) -> ExperimentConfig {
    smoke_builder(tmp, sets).build().unwrap()
}

fn exported_weights(run_dir: &Path) -> Vec<f32> {
    // Loading builds a model first, which draws from the CPU backend's process-wide generator:
    // not while another test's CPU run is drawing from it.
    let _turn = trainer::turn(trainer::Streams::HOST);
    let dev = device::dispatch_device(&device::Target::Cpu).unwrap();
    let (_, model) = bundle::load_bundle::<device::Backend>(&run_dir.join("model"), &dev).unwrap();
    bundle::weights::flat_weights(&model)
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn shipped_configs_parse_and_validate() {
    assert_eq!(DEFAULT_TOML, std::fs::read_to_string(configs_dir().join("default.toml")).unwrap());
    let default = ConfigBuilder::new().build().unwrap();
    assert_eq!(default.name, "default");
    assert_eq!(default.model.kind(), "conv_transformer");
    for name in ["default.toml", "smoke.toml", "islr-reference.toml", "ctc.toml"] {
        let mut b = ConfigBuilder::new();
        b.add_file(&configs_dir().join(name)).unwrap();
        let cfg = b.build().unwrap_or_else(|e| panic!("{name}: {e}"));
        // The resolved config round-trips through TOML (it is what run directories store).
        let mut again = ConfigBuilder::empty();
        again.add_toml(&cfg.to_toml(), name).unwrap();
        assert_eq!(again.build().unwrap(), cfg, "{name}");
    }
    let mut b = ConfigBuilder::new();
    b.add_file(&configs_dir().join("islr-reference.toml")).unwrap();
    let reference = b.build().unwrap();
    assert_eq!(reference.training.batch_size.fixed().unwrap() * reference.training.accumulation_steps, 512);
    assert_eq!(reference.model.kind(), "conv_transformer");
}

#[test]
fn layers_apply_in_order_and_remember_their_origin() {
    let tmp = tempfile::tempdir().unwrap();
    let file = write(
        tmp.path(),
        "exp.toml",
        "[training]\nepochs = 5\nbatch_size = 8\n\n[model]\nkind = \"gru\"\nhidden = 32\n",
    );
    let mut b = ConfigBuilder::new();
    b.add_file(&file).unwrap();
    let cfg = b.build().unwrap();
    assert_eq!((cfg.training.epochs, cfg.training.batch_size), (5, BatchSize::Fixed(8)));
    // A new model kind replaces the default's conv-transformer keys instead of failing on them.
    assert_eq!(cfg.model, models::ModelConfig::Gru(models::GruModelConfig { hidden: 32, ..Default::default() }));
    assert_eq!(b.origin_of("training.epochs").to_string(), format!("{}, line 2", file.display()));
    let lr_line = DEFAULT_TOML
        .lines()
        .skip_while(|l| l.trim() != "[optimizer]")
        .position(|l| l.starts_with("lr "))
        .map(|i| i + 1 + DEFAULT_TOML.lines().position(|l| l.trim() == "[optimizer]").unwrap())
        .unwrap();
    assert_eq!(b.origin_of("optimizer.lr").to_string(), format!("built-in default, line {lr_line}"));

    b.add_set("training.epochs=7").unwrap();
    b.add_set("optimizer.lr=2e-3").unwrap();
    b.add_set("name=sweep-a").unwrap();
    let cfg = b.build().unwrap();
    assert_eq!((cfg.training.epochs, cfg.optimizer.lr, cfg.name.as_str()), (7, 2e-3, "sweep-a"));

    b.add_flag(FlagOverride { flag: "--epochs", key: "training.epochs", value: toml::Value::Integer(9) });
    b.add_flag(FlagOverride { flag: "--device", key: "device.device", value: toml::Value::String("cpu".into()) });
    let cfg = b.build().unwrap();
    assert_eq!(cfg.training.epochs, 9);
    assert_eq!(cfg.device.device, device::DeviceSpec::Cpu);
    assert_eq!(cfg.training.batch_size, BatchSize::Fixed(8), "untouched keys keep the file's value");
    assert_eq!(b.origin_of("training.epochs").to_string(), "--epochs");
}

fn err_of(text: &str, sets: &[&str]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let file = write(tmp.path(), "bad.toml", text);
    let mut b = ConfigBuilder::new();
    let r = b.add_file(&file).map(|_| ()).and_then(|_| {
        for s in sets {
            b.add_set(s)?;
        }
        b.build().map(|_| ())
    });
    r.unwrap_err().to_string().replace(&file.display().to_string(), "bad.toml")
}

#[test]
fn config_errors_name_file_key_and_line() {
    let cases: &[(&str, &[&str], &[&str])] = &[
        ("[optimizer]\nlr = 0.01\nlrr = 0.02\n", &[], &["bad.toml, line 3", "`optimizer.lrr`", "unknown field `lrr`"]),
        (
            "[training]\nepochs = \"ten\"\n",
            &[],
            &["bad.toml, line 2", "`training.epochs`", "wrong type: string \"ten\""],
        ),
        ("[optimizer]\nlr = -1.0\n", &[], &["bad.toml, line 2", "`optimizer.lr`", "must be in (0, 10), got -1"]),
        ("[training\nepochs = 3\n", &[], &["bad.toml, line 1", "invalid TOML"]),
        ("[model]\nkind = \"gru\"\ndim = 64\n", &[], &["bad.toml, line 3", "`model.dim`", "unknown field `dim`"]),
        ("[optimizer]\nkind = \"adam\"\n", &[], &["bad.toml, line 2", "`optimizer.kind`", "unknown variant `adam`"]),
        ("[preprocess]\nwindow = 0\n", &[], &["bad.toml, line 2", "`preprocess.window`", "must be in 1..=4096"]),
        (
            "[model]\nheads = 5\n",
            &[],
            &["bad.toml, line 2", "`model.heads`", "dim (64) must be a positive multiple of heads (5)"],
        ),
        ("[synthetic]\nclasses = 1\n", &[], &["bad.toml, line 2", "`synthetic.classes`", "at least 2 classes"]),
        ("[device]\ndevice = \"tpu\"\n", &[], &["bad.toml, line 2", "`device.device`", "tpu"]),
        ("", &["training.epochz=3"], &["--set training.epochz=3", "`training.epochz`", "unknown field"]),
        ("", &["training.batch_size=-4"], &["--set training.batch_size=-4", "`training.batch_size`"]),
        ("", &["optimizer.lr"], &["--set optimizer.lr", "expected KEY=VALUE"]),
        ("[schedule]\nmin_lr = 0.5\n", &[], &["bad.toml, line 2", "`schedule.min_lr`", "must be in [0, optimizer.lr"]),
        (
            "name = \"x\"\nconfig_version = 2\n",
            &[],
            &["bad.toml, line 2", "`config_version`", "is 2; this SignFlow reads config versions 1 to 1"],
        ),
    ];
    for (text, sets, expected) in cases {
        let msg = err_of(text, sets);
        for e in *expected {
            assert!(msg.contains(e), "for {text:?} {sets:?}: expected {e:?} in: {msg}");
        }
    }
    let mut b = ConfigBuilder::new();
    let missing = b.add_file(Path::new("/nonexistent/exp.toml")).unwrap_err().to_string();
    assert!(missing.contains("/nonexistent/exp.toml") && missing.contains("cannot read"), "{missing}");
    let mut b = ConfigBuilder::new();
    b.add_flag(FlagOverride { flag: "--epochs", key: "training.epochs", value: toml::Value::Integer(0) });
    let flag = b.build().unwrap_err().to_string();
    assert!(flag.starts_with("--epochs: `training.epochs`: must be in 1..=100000, got 0"), "{flag}");
}

#[test]
fn accumulation_matches_one_large_batch() {
    let tmp = tempfile::tempdir().unwrap();
    let train = |name: &str, sets: &[&str]| {
        let mut all = vec!["training.epochs=2", "checkpoint.every_steps=0"];
        all.extend_from_slice(sets);
        let cfg = smoke(tmp.path(), &all);
        let out = run(cfg, RunOptions { run_dir: Some(tmp.path().join(name)), ..Default::default() }).unwrap();
        let s = out.summary.unwrap();
        (exported_weights(&out.run_dir), s)
    };
    // 24 training sequences: 6 micro-batches of 4 = 3 steps of 2 x 4, or 3 batches of 8.
    // SGD first: its update is linear in the gradient, so only float rounding may differ.
    let sgd = ["optimizer.kind=sgd", "optimizer.lr=0.05", "optimizer.momentum=0.9"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> { sgd.iter().chain(extra).copied().collect() };
    let (accum, s_accum) = train("accum", &with(&["training.batch_size=4", "training.accumulation_steps=2"]));
    let (large, s_large) = train("large", &with(&["training.batch_size=8", "training.accumulation_steps=1"]));
    let (small, _) = train("small", &with(&["training.batch_size=4", "training.accumulation_steps=1"]));
    assert_eq!((s_accum.steps, s_large.steps), (6, 6));
    assert_eq!((s_accum.effective_batch_size, s_large.effective_batch_size), (8, 8));
    let same = max_abs_diff(&accum, &large);
    let different = max_abs_diff(&small, &large);
    eprintln!("SGD: max |dw| {same:e} with accumulation, {different:e} without");
    assert!(same < 1e-6, "SGD: 2 x 4 accumulated vs one batch of 8: max |dw| = {same}");
    assert!(different > 1e-3, "SGD: batch 4 without accumulation should differ, max |dw| = {different}");
    // AdamW divides by sqrt(v), which magnifies rounding where gradients are tiny: still far
    // closer than the run without accumulation.
    let (accum, _) = train("accum-adamw", &["training.batch_size=4", "training.accumulation_steps=2"]);
    let (large, _) = train("large-adamw", &["training.batch_size=8", "training.accumulation_steps=1"]);
    let (small, _) = train("small-adamw", &["training.batch_size=4", "training.accumulation_steps=1"]);
    let (same, different) = (max_abs_diff(&accum, &large), max_abs_diff(&small, &large));
    eprintln!("AdamW: max |dw| {same:e} with accumulation, {different:e} without");
    assert!(same < 1e-4 && different > 100.0 * same, "AdamW: max |dw| {same} with accumulation, {different} without");
}

#[test]
fn resume_continues_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = smoke(tmp.path(), &[]);
    let full = run(cfg.clone(), RunOptions { run_dir: Some(tmp.path().join("full")), ..Default::default() }).unwrap();
    let summary = full.summary.unwrap();
    // 24 training sequences / batch 4 = 6 steps per epoch, 3 epochs.
    assert_eq!((summary.steps, summary.epochs_run, summary.train_samples, summary.valid_samples), (18, 3, 24, 8));
    assert_eq!((summary.train_groups, summary.valid_groups), (3, 1));
    for f in [
        "config.toml",
        "labels.json",
        "metrics.csv",
        "summary.json",
        "curves.svg",
        "model/model.mpk",
        "model/model.json",
    ] {
        assert!(full.run_dir.join(f).is_file(), "{f} missing");
    }
    let rows = trainer::metrics::read_rows(&full.run_dir.join("metrics.csv")).unwrap();
    assert_eq!(rows.iter().filter(|r| r.kind == "epoch").count(), 3);
    assert_eq!(
        rows.iter().filter(|r| r.kind == "step").map(|r| r.step).collect::<Vec<_>>(),
        [2, 4, 6, 8, 10, 12, 14, 16, 18]
    );
    assert!(rows.iter().all(|r| r.loss.is_some_and(f64::is_finite)));
    // keep_last = 2 step checkpoints, plus the best.
    let kept: Vec<usize> = trainer::checkpoint::list(&full.run_dir).into_iter().map(|(s, _)| s).collect();
    assert_eq!(kept, [15, 18]);
    assert!(full.run_dir.join("checkpoints/best/model.mpk").is_file());

    // Interrupted after step 4 (last checkpoint at step 3), then resumed.
    let dir = tmp.path().join("resumed");
    let first = run(cfg.clone(), injected(dir.clone(), &["interrupt_after_steps=4"])).unwrap();
    assert!(first.summary.is_none());
    assert_eq!(trainer::checkpoint::list(&dir).last().map(|c| c.0), Some(3));
    let second =
        run(cfg.clone(), RunOptions { run_dir: Some(dir.clone()), resume: true, ..Default::default() }).unwrap();
    let resumed = second.summary.unwrap();
    assert_eq!(resumed.resumed_from_step, Some(3));
    assert_eq!(resumed.steps, 18);
    let (a, b) = (exported_weights(&full.run_dir), exported_weights(&dir));
    assert_eq!(max_abs_diff(&a, &b), 0.0, "resumed weights differ from the uninterrupted run");
    assert_eq!(resumed.last.as_ref().unwrap().valid_loss, summary.last.as_ref().unwrap().valid_loss);
    // metrics.csv reads as one run: the rows the interrupted process wrote after step 3 are gone.
    let rows_resumed = trainer::metrics::read_rows(&dir.join("metrics.csv")).unwrap();
    assert_eq!(
        rows_resumed.iter().map(|r| (r.kind, r.step)).collect::<Vec<_>>(),
        rows.iter().map(|r| (r.kind, r.step)).collect::<Vec<_>>()
    );
    // The epoch and the logging window the interruption split report the uninterrupted run's
    // figures (their running sums travel in the checkpoint), not just the steps after the resume.
    let epoch_figures = |rows: &[trainer::metrics::Row]| {
        rows.iter().map(|r| (r.kind, r.step, r.loss, r.top1, r.valid_loss)).collect::<Vec<_>>()
    };
    assert_eq!(epoch_figures(&rows_resumed), epoch_figures(&rows));

    // TensorBoard event files hold the same scalars as metrics.csv; the resumed run's second file
    // starts with a restart marker, after which TensorBoard drops the first process's later points.
    let tb = |dir: &Path| -> Vec<(i64, String, f32)> {
        let mut points: Vec<(i64, String, f32)> = Vec::new();
        for f in trainer::tensorboard::event_files(dir) {
            let ev = trainer::tensorboard::read_events(&f).unwrap();
            assert_eq!(ev.version, "brain.Event:2");
            if let Some(&r) = ev.restarts.first() {
                points.retain(|p| p.0 < r);
            }
            points.extend(ev.scalars.into_iter().map(|s| (s.step, s.tag, s.value)));
        }
        points
    };
    let full_tb = tb(&full.run_dir);
    let losses: Vec<(i64, f32)> = full_tb.iter().filter(|p| p.1 == "train/loss").map(|p| (p.0, p.2)).collect();
    let csv_losses: Vec<(i64, f32)> =
        rows.iter().filter(|r| r.kind == "step").map(|r| (r.step as i64, r.loss.unwrap() as f32)).collect();
    assert_eq!(losses.len(), csv_losses.len());
    assert!(losses.iter().zip(&csv_losses).all(|(a, b)| a.0 == b.0 && (a.1 - b.1).abs() < 1e-5), "{losses:?}");
    assert_eq!(full_tb.iter().filter(|p| p.1 == "valid/top1").count(), 3);
    assert!(full_tb.iter().any(|p| p.1 == "lr") && full_tb.iter().any(|p| p.1 == "epoch/train_loss"));
    let files = trainer::tensorboard::event_files(&dir);
    assert_eq!(files.len(), 2);
    assert_eq!(trainer::tensorboard::read_events(&files[1]).unwrap().restarts, vec![4]);
    let key = |v: &[(i64, String, f32)]| v.iter().map(|p| (p.0, p.1.clone())).collect::<Vec<_>>();
    assert_eq!(key(&tb(&dir)), key(&full_tb));

    // A run directory is never silently reused.
    let again = run(cfg.clone(), RunOptions { run_dir: Some(dir.clone()), ..Default::default() }).unwrap_err();
    assert!(again.to_string().contains("already holds a run; continue it with --resume"), "{again}");
    // Resuming with a different model shape is refused with the differing key.
    let mut b = ConfigBuilder::new();
    b.add_file(&dir.join("config.toml")).unwrap();
    b.add_set("model.dim=32").unwrap();
    let err = run(b.build().unwrap(), RunOptions { run_dir: Some(dir.clone()), resume: true, ..Default::default() })
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot resume") && err.contains("model.dim = 16 in the run, 32 now"), "{err}");
}

#[test]
fn a_zstd_compressed_dataset_trains_to_the_same_weights_as_snappy() {
    let tmp = tempfile::tempdir().unwrap();
    let zstd = run(
        smoke(tmp.path(), &["synthetic.compression=zstd"]),
        RunOptions { run_dir: Some(tmp.path().join("zstd")), ..Default::default() },
    )
    .unwrap();
    let summary = zstd.summary.unwrap();
    assert_eq!(summary.steps, 18);
    let files: Vec<PathBuf> = files_under(&[tmp.path().join("synth")])
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    assert_eq!(files.len(), 32);
    for f in &files {
        let codecs = data::islr::codecs(f).unwrap();
        assert!(codecs.iter().all(|c| c.starts_with("ZSTD")), "{}: {codecs:?}", f.display());
    }
    // The values are the same as in the snappy files, so training is too, bit for bit.
    let snappy =
        run(smoke(tmp.path(), &[]), RunOptions { run_dir: Some(tmp.path().join("snappy")), ..Default::default() })
            .unwrap();
    assert_eq!(max_abs_diff(&exported_weights(&zstd.run_dir), &exported_weights(&snappy.run_dir)), 0.0);
}

/// The uninterrupted smoke run under `tmp/ref` and its exported weights, to compare with.
fn reference_run(tmp: &Path, sets: &[&str]) -> (trainer::RunOutcome, Vec<f32>) {
    let reference = run(smoke(tmp, sets), RunOptions { run_dir: Some(tmp.join("ref")), ..Default::default() }).unwrap();
    let weights = exported_weights(&reference.run_dir);
    (reference, weights)
}

fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn staging_step_dir(run: &Path) -> bool {
    std::fs::read_dir(run.join("checkpoints"))
        .map(|rd| rd.flatten().any(|e| e.file_name().to_string_lossy().starts_with(".tmp-step-")))
        .unwrap_or(false)
}

#[test]
fn killed_process_resumes_from_last_complete_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let sets = ["checkpoint.every_steps=2"];
    let (_, expected) = reference_run(tmp.path(), &sets);

    let config = write(tmp.path(), "exp.toml", &smoke(tmp.path(), &sets).to_toml());
    let run_dir = tmp.path().join("killed");
    let trainer_cmd = |args: &[&str], pause_ms: Option<u64>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_trainer"));
        c.args(args).stdout(Stdio::null()).stderr(Stdio::piped());
        if let Some(ms) = pause_ms {
            c.arg("--inject").arg(format!("checkpoint_pause_ms={ms}"));
        }
        c
    };
    let run_s = run_dir.display().to_string();
    let cfg_s = config.display().to_string();

    // 1. Killed while writing its first checkpoint: nothing complete exists yet.
    let mut child = trainer_cmd(&["--config", &cfg_s, "--out", &run_s], Some(400)).spawn().unwrap();
    wait_for("the first checkpoint write", Duration::from_secs(60), || staging_step_dir(&run_dir));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(trainer::checkpoint::list(&run_dir).is_empty());

    // 2. Resumed (from the start), killed in the middle of a later checkpoint write.
    let mut child = trainer_cmd(&["--resume", &run_s], Some(400)).spawn().unwrap();
    wait_for("a complete checkpoint", Duration::from_secs(60), || !trainer::checkpoint::list(&run_dir).is_empty());
    wait_for("the next checkpoint write", Duration::from_secs(60), || staging_step_dir(&run_dir));
    child.kill().unwrap();
    child.wait().unwrap();
    let last = trainer::checkpoint::list(&run_dir).last().unwrap().0;
    assert!(last >= 2, "expected a complete checkpoint, have step {last}");

    // 3. Resumed to the end: same weights as the run that was never interrupted.
    let out = trainer_cmd(&["--resume", &run_s], None).output().unwrap();
    assert!(out.status.success(), "resume failed: {}", String::from_utf8_lossy(&out.stderr));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["resumed_from_step"].as_u64(), Some(last as u64));
    assert_eq!(summary["steps"].as_u64(), Some(18));
    assert_eq!(max_abs_diff(&exported_weights(&run_dir), &expected), 0.0);
    assert!(!staging_step_dir(&run_dir), "staging directories are cleaned up");
    let events = std::fs::read_to_string(run_dir.join("events.jsonl")).unwrap();
    assert!(events.contains("\"kind\":\"resume\""), "{events}");
}

/// A real small filesystem (tmpfs) mounted at a fresh directory, when this process may mount one
/// (root in a privileged container); unmounted on drop.
struct SmallFs(PathBuf);

impl SmallFs {
    fn mount(dir: &Path, mib: usize) -> Option<Self> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Self(dir.to_path_buf()))
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Fill the filesystem of `dir` with a ballast file, leaving about `leave` bytes free.
fn fill_leaving(dir: &Path, leave: u64) -> PathBuf {
    use std::io::Write;
    let path = dir.join("ballast");
    let mut f = std::fs::File::create(&path).unwrap();
    let chunk = vec![0u8; 4096];
    while f.write_all(&chunk).is_ok() {}
    let len = f.metadata().unwrap().len();
    f.set_len(len.saturating_sub(leave)).unwrap();
    path
}

/// A command running `bin` as the user `nobody` when this process is root and that works (the
/// binary must be reachable for `nobody`); `None` otherwise.
fn unprivileged(bin: &str) -> Option<impl Fn() -> Command + '_> {
    let as_nobody = move || {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", bin]);
        c
    };
    let root = Command::new("id").arg("-u").output().ok().is_some_and(|o| o.stdout.starts_with(b"0\n"));
    let works = root && as_nobody().arg("--help").output().is_ok_and(|o| o.status.success());
    works.then_some(as_nobody)
}

fn staged_leftovers(dir: &Path) -> Vec<String> {
    [dir.to_path_buf(), dir.join("checkpoints")]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with(".tmp") || n.starts_with(".old-"))
        .collect()
}

#[test]
fn a_full_disk_corrupt_checkpoints_and_a_second_trainer_lose_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let sets = ["checkpoint.every_steps=2"];
    let (reference, expected) = reference_run(tmp.path(), &sets);
    let ref_rows = trainer::metrics::read_rows(&reference.run_dir.join("metrics.csv")).unwrap();

    // The run lives on a 4 MiB tmpfs when one can be mounted; otherwise writes over a file-size
    // limit (RLIMIT_FSIZE) fail instead, the other way a write is refused for good.
    let fs = SmallFs::mount(&tmp.path().join("small"), 4);
    let run_dir = match &fs {
        Some(fs) => fs.0.join("run"),
        None => tmp.path().join("run"),
    };
    let run_s = run_dir.display().to_string();
    let partial = run(smoke(tmp.path(), &sets), injected(run_dir.clone(), &["interrupt_after_steps=4"]));
    partial.unwrap();
    let steps = |d: &Path| trainer::checkpoint::list(d).into_iter().map(|(s, _)| s).collect::<Vec<_>>();
    assert_eq!(steps(&run_dir), [2, 4]);

    // A second trainer on the same run is refused, naming the owner; the lock holder here is this
    // test process.
    let trainer_bin = env!("CARGO_BIN_EXE_trainer");
    let lock = trainer::lock::RunLock::take(&run_dir).unwrap();
    let out = Command::new(trainer_bin).args(["--resume", &run_s]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("is in use by another trainer (pid {}", std::process::id())), "{err}");
    drop(lock);

    // The disk fills up during the next checkpoint: the error names the file and the OS reason,
    // the staged directory is gone and the earlier checkpoints are intact.
    let model_bytes = std::fs::metadata(run_dir.join("checkpoints/step-00000004/model.mpk")).unwrap().len();
    let optim_bytes = std::fs::metadata(run_dir.join("checkpoints/step-00000004/optim.mpk")).unwrap().len();
    assert!(optim_bytes > model_bytes + 8192, "optim {optim_bytes} bytes, model {model_bytes}");
    let (out, reason) = match &fs {
        Some(fs) => {
            let ballast = fill_leaving(&fs.0, model_bytes + 8192);
            let out = Command::new(trainer_bin).args(["--resume", &run_s]).output().unwrap();
            std::fs::remove_file(ballast).unwrap();
            (out, "No space left on device")
        }
        None => {
            let kib = model_bytes / 1024 + 4;
            let script = format!("trap '' XFSZ; ulimit -f {kib}; exec \"$0\" --resume \"$1\"");
            let out = Command::new("bash").args(["-c", &script, trainer_bin, &run_s]).output().unwrap();
            (out, "File too large")
        }
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&run_s) && err.contains(reason), "{err}");
    assert!(!err.contains("MessagePack") && !err.contains("panicked"), "{err}");
    assert_eq!(staged_leftovers(&run_dir), Vec::<String>::new());
    assert_eq!(steps(&run_dir), [2, 4]);
    for (_, dir) in trainer::checkpoint::list(&run_dir) {
        bundle::manifest::verify(&dir, &[]).unwrap();
    }
    // A filesystem that turned read-only: the error names the file and the OS reason.
    if let Some(fs) = &fs {
        let remount = |mode: &str| {
            let ok = Command::new("mount").args(["-o", &format!("remount,{mode}")]).arg(&fs.0).status().unwrap();
            assert!(ok.success(), "remount {mode}");
        };
        remount("ro");
        let out = Command::new(trainer_bin).args(["--resume", &run_s]).output().unwrap();
        remount("rw");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(&run_s) && err.contains("Read-only file system"), "{err}");
        assert_eq!(steps(&run_dir), [2, 4]);
    }
    // A checkpoints directory this user may not write (as root, the trainer runs as `nobody`
    // through setpriv, when the binary is reachable for it): the error names the directory.
    if let Some(as_nobody) = unprivileged(trainer_bin) {
        let chmod = |mode: &str, path: &Path| {
            assert!(Command::new("chmod").args(["-R", mode]).arg(path).status().unwrap().success());
        };
        for dir in [tmp.path().to_path_buf(), run_dir.clone()] {
            chmod("a+rwX", &dir);
        }
        chmod("go-w", &run_dir.join("checkpoints"));
        let out = as_nobody().args(["--resume", &run_s]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        eprintln!("as nobody: {}", err.trim());
        assert!(err.contains(&format!("{run_s}/checkpoints/")) && err.contains("Permission denied"), "{err}");
        assert_eq!(steps(&run_dir), [2, 4]);
        assert_eq!(staged_leftovers(&run_dir), Vec::<String>::new());
    }

    // The newest checkpoint is then corrupted (one flipped byte) and the lock left by a dead
    // trainer: the resume passes over step 4 saying why, takes the stale lock, continues from
    // step 2 and ends on the uninterrupted run's weights and figures.
    let weights = run_dir.join("checkpoints/step-00000004/model.mpk");
    let mut bytes = std::fs::read(&weights).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&weights, &bytes).unwrap();
    std::fs::write(run_dir.join("run.lock"), "999999999").unwrap();
    let resumed = run(
        smoke(tmp.path(), &sets),
        RunOptions { run_dir: Some(run_dir.clone()), resume: true, ..Default::default() },
    )
    .unwrap()
    .summary
    .unwrap();
    assert_eq!(resumed.resumed_from_step, Some(2));
    assert_eq!(max_abs_diff(&exported_weights(&run_dir), &expected), 0.0);
    let rows = trainer::metrics::read_rows(&run_dir.join("metrics.csv")).unwrap();
    let figures = |rows: &[trainer::metrics::Row]| {
        rows.iter().map(|r| (r.kind, r.step, r.loss, r.top1, r.valid_loss)).collect::<Vec<_>>()
    };
    assert_eq!(figures(&rows), figures(&ref_rows));
    let ev = events(&run_dir);
    let skipped: Vec<_> = ev.iter().filter(|e| e["kind"] == "checkpoint_skipped").collect();
    assert_eq!(skipped.len(), 1, "{ev:?}");
    let why = skipped[0]["detail"].as_str().unwrap_or_default().to_string();
    assert!(why.contains("step-00000004/model.mpk") && why.contains("corrupt"), "{ev:?}");

    // A corrupt exported bundle is a clear error in SignFlow's words: found by its manifest, and
    // without one (an older bundle) by the reader.
    let dev = device::dispatch_device(&device::Target::Cpu).unwrap();
    let bundle_dir = tmp.path().join("bundle");
    std::fs::create_dir_all(&bundle_dir).unwrap();
    for e in std::fs::read_dir(run_dir.join("model")).unwrap().flatten() {
        std::fs::copy(e.path(), bundle_dir.join(e.file_name())).unwrap();
    }
    let mpk = bundle_dir.join("model.mpk");
    let full = std::fs::read(&mpk).unwrap();
    std::fs::write(&mpk, &full[..full.len() * 2 / 3]).unwrap();
    let load = |d: &Path| {
        let _turn = trainer::turn(trainer::Streams::HOST);
        bundle::load_bundle::<device::Backend>(d, &dev).map(|_| ()).unwrap_err().to_string()
    };
    let e = load(&bundle_dir);
    assert!(e.contains("model.mpk") && e.contains("truncated or changed after it was written"), "{e}");
    std::fs::remove_file(bundle_dir.join("manifest.json")).unwrap();
    let e = load(&bundle_dir);
    assert!(e.contains("model.mpk") && e.contains("truncated"), "{e}");
    assert!(!e.contains("0.14.0"), "{e}");
    // A damaged size in model.json is refused before the model is built (dim 10^6 would ask
    // for terabytes).
    std::fs::write(&mpk, &full).unwrap();
    let card = std::fs::read_to_string(bundle_dir.join("model.json")).unwrap();
    std::fs::write(bundle_dir.join("model.json"), card.replacen("\"dim\": 16,", "\"dim\": 1000000,", 1)).unwrap();
    let e = load(&bundle_dir);
    assert!(e.contains("model.json") && e.contains("at least") && e.contains("the card is damaged"), "{e}");
}

/// Two trainers preparing the same dataset and cache at once (neither exists yet): one generates
/// while the other waits, both finish on the same data (same final weights), and no temporary
/// file is left.
#[test]
fn two_processes_preparing_the_same_dataset_at_once_are_safe() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = write(tmp.path(), "exp.toml", &smoke(tmp.path(), &["synthetic.repetitions=6"]).to_toml());
    let spawn = |name: &str| {
        Command::new(env!("CARGO_BIN_EXE_trainer"))
            .arg("--config")
            .arg(&cfg)
            .arg("--out")
            .arg(tmp.path().join(name))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn("a"), spawn("b"));
    for (name, child) in [("a", a), ("b", b)] {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let fp =
        |name: &str| summary_json(&tmp.path().join(name))["final_weights_fingerprint"].as_str().unwrap().to_string();
    assert_eq!(fp("a"), fp("b"));
    let temp: Vec<PathBuf> = files_under(&[tmp.path().join("synth"), tmp.path().join("cache")])
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(".tmp")))
        .collect();
    assert!(temp.is_empty(), "{temp:?}");
    // One generated the dataset while the other waited, so both keyed the same cache.
    let caches = std::fs::read_dir(tmp.path().join("cache")).unwrap().count();
    assert_eq!(caches, 1, "one cache file for one dataset and preprocessing");
}

/// The chaos harness (`scripts/chaos.sh`) in short: 8 `kill -9`s of the real trainer binary,
/// including during dataset generation, preprocessing and checkpoint writes, then the final
/// weights equal an uninterrupted run's bit for bit and nothing temporary is left.
#[test]
fn chaos_kills_during_generation_caching_and_checkpoints_lose_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_trainer")).parent().unwrap();
    let out = tmp.path().join("chaos");
    let run = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/chaos.sh"))
        .arg(&out)
        .env("BIN", bin)
        .env("CONFIG", configs_dir().join("smoke.toml"))
        .env("SETS", "training.epochs=12 synthetic.repetitions=6")
        .env("KILLS", "8")
        .env("EVERY", "2")
        .env("PAUSE_MS", "40")
        .env("MAX_MS", "400")
        .env("SEED", "3")
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{report}\n{}", String::from_utf8_lossy(&run.stderr));
    let md = std::fs::read_to_string(out.join("chaos.md")).unwrap();
    assert!(md.trim_end().ends_with("PASS"), "{md}");
    let kills: usize = md
        .split("| kills (kill -9) | ")
        .nth(1)
        .and_then(|r| r.split(':').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(kills >= 6, "only {kills} kills landed before the run finished:\n{md}");
    assert!(md.contains("1 during dataset generation"), "{md}");
    assert!(md.contains("| leftover temporary files | 0 |"), "{md}");
}

/// The smoke experiment on a slightly larger synthetic set that a tiny transformer learns in
/// about a second: 6 signs x 6 signers x 3 repetitions, 2 signers (36 sequences) held out.
fn learnable(tmp: &Path, sets: &[&str]) -> ExperimentConfig {
    let mut all = vec![
        "training.epochs=12",
        "synthetic.classes=6",
        "synthetic.signers=6",
        "synthetic.repetitions=3",
        "data.valid_fraction=0.34",
        "model.dim=32",
        "model.ff_dim=64",
        "training.batch_size=8",
        "checkpoint.every_steps=0",
        // Recovery is what these runs test: without the default's temporal crops this small
        // model learns in 12 epochs even at the learning rate a rollback halves.
        "augment.crop_prob=0",
    ];
    all.extend_from_slice(sets);
    smoke(tmp, &all)
}

fn train_in(tmp: &Path, name: &str, cfg: ExperimentConfig) -> trainer::report::Summary {
    train_injected(tmp, name, cfg, &[])
}

/// Options for a run in `dir` with the faults `items` injected (`trainer::inject`).
fn injected(dir: PathBuf, items: &[&str]) -> RunOptions {
    RunOptions { run_dir: Some(dir), faults: Faults::parse(items).unwrap(), ..Default::default() }
}

/// [`train_in`] with the faults `items` injected.
fn train_injected(tmp: &Path, name: &str, cfg: ExperimentConfig, items: &[&str]) -> trainer::report::Summary {
    run(cfg, injected(tmp.join(name), items)).unwrap().summary.unwrap()
}

fn events(run_dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(run_dir.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn kinds(ev: &[serde_json::Value]) -> Vec<String> {
    ev.iter().map(|e| e["kind"].as_str().unwrap().to_string()).collect()
}

#[test]
fn half_precision_learns_like_f32_with_f32_master_weights() {
    let tmp = tempfile::tempdir().unwrap();
    let f32_run = train_in(tmp.path(), "f32", learnable(tmp.path(), &["training.precision=f32"]));
    let top1 = |s: &trainer::report::Summary| s.last.as_ref().unwrap().valid_top1.unwrap();
    let vloss = |s: &trainer::report::Summary| s.last.as_ref().unwrap().valid_loss.unwrap();
    assert!(top1(&f32_run) > 0.6, "f32 should learn (chance 0.167): {}", top1(&f32_run));
    for p in ["f16", "bf16"] {
        let s = train_in(tmp.path(), p, learnable(tmp.path(), &[&format!("training.precision={p}")]));
        assert_eq!(s.precision, p);
        assert_eq!(s.master_dtypes, ["F32"], "{p}: master weights must stay f32");
        eprintln!(
            "{p}: valid top-1 {:.3} (f32 {:.3}), valid loss {:.4} (f32 {:.4})",
            top1(&s),
            top1(&f32_run),
            vloss(&s),
            vloss(&f32_run)
        );
        assert!((top1(&s) - top1(&f32_run)).abs() <= 0.1, "{p}: top-1 {} vs f32 {}", top1(&s), top1(&f32_run));
        assert!((vloss(&s) - vloss(&f32_run)).abs() <= 0.05, "{p}: loss {} vs f32 {}", vloss(&s), vloss(&f32_run));
        // The half-precision compute really happened: the numbers are close, not identical.
        assert_ne!(vloss(&s), vloss(&f32_run), "{p} gave bit-identical results to f32");
    }
}

#[test]
fn injected_nan_is_skipped_and_the_run_still_learns() {
    let tmp = tempfile::tempdir().unwrap();
    let clean = train_in(tmp.path(), "clean", learnable(tmp.path(), &[]));
    let faults = ["nan_loss_steps=[4]", "inf_grad_steps=[9]"];
    let faulty = train_injected(tmp.path(), "nan", learnable(tmp.path(), &[]), &faults);
    assert_eq!((faulty.skipped_steps, faulty.rollbacks), (2, 0));
    let ev = events(&tmp.path().join("nan"));
    assert_eq!(kinds(&ev), ["skipped_step", "skipped_step"]);
    assert_eq!((ev[0]["step"].as_u64(), ev[1]["step"].as_u64()), (Some(4), Some(9)));
    assert!(ev[0]["detail"].as_str().unwrap().contains("loss is NaN"), "{ev:?}");
    assert!(ev[1]["detail"].as_str().unwrap().contains("gradient norm is inf"), "{ev:?}");
    let (a, b) = (clean.last.unwrap().valid_top1.unwrap(), faulty.last.unwrap().valid_top1.unwrap());
    assert!(b >= a - 0.1, "with two skipped steps top-1 {b}, clean {a}");
}

#[test]
fn repeated_nan_rolls_back_cuts_the_lr_and_recovers() {
    let tmp = tempfile::tempdir().unwrap();
    let clean = train_in(tmp.path(), "clean", learnable(tmp.path(), &[]));
    let cfg = learnable(tmp.path(), &["recovery.max_consecutive_bad=3", "recovery.snapshot_every=4"]);
    let s = train_injected(tmp.path(), "rollback", cfg, &["nan_loss_steps=[10, 11, 12]"]);
    assert_eq!((s.skipped_steps, s.rollbacks, s.lr_scale), (3, 1, 0.5));
    let ev = events(&tmp.path().join("rollback"));
    assert_eq!(kinds(&ev), ["skipped_step", "skipped_step", "skipped_step", "rollback"]);
    assert!(ev[3]["detail"].as_str().unwrap().contains("rolled back to the weights of step 8"), "{ev:?}");
    let (a, b) = (clean.last.unwrap().valid_top1.unwrap(), s.last.unwrap().valid_top1.unwrap());
    eprintln!("rollback run: valid top-1 {b:.3}, clean run {a:.3}");
    assert!(b >= a - 0.1, "after a rollback top-1 {b}, clean {a}");
}

#[test]
fn endless_nan_aborts_with_a_report() {
    let tmp = tempfile::tempdir().unwrap();
    let steps: Vec<String> = (3..60).map(|s| s.to_string()).collect();
    let nan = format!("nan_loss_steps=[{}]", steps.join(","));
    let cfg = learnable(tmp.path(), &["recovery.max_consecutive_bad=2", "recovery.max_rollbacks=2"]);
    let err = run(cfg, injected(tmp.path().join("abort"), &[&nan])).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("training diverged and was aborted: 2 non-finite steps in a row after 2 rollbacks"),
        "{msg}"
    );
    assert!(msg.contains("step 3: step skipped: loss is NaN"), "{msg}");
    let ev = events(&tmp.path().join("abort"));
    assert_eq!(kinds(&ev).iter().filter(|k| *k == "rollback").count(), 2);
    assert_eq!(kinds(&ev).last().map(String::as_str), Some("abort"));
}

#[test]
fn f16_loss_scale_backs_off_on_overflow_and_grows_back() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = learnable(
        tmp.path(),
        &[
            "training.precision=f16",
            "training.epochs=2",
            "amp.init_scale=1024",
            "amp.growth_interval=4",
            "training.log_every=1",
        ],
    );
    let s = train_injected(tmp.path(), "scale", cfg, &["inf_grad_steps=[2]"]);
    assert_eq!((s.skipped_steps, s.rollbacks, s.loss_scale_backoffs), (1, 0, 1));
    let ev = events(&tmp.path().join("scale"));
    let k = kinds(&ev);
    assert_eq!(&k[..2], ["loss_scale_backoff", "skipped_step"]);
    assert!(ev[0]["detail"].as_str().unwrap().contains("1024 -> 512"), "{ev:?}");
    assert!(k[2..].iter().all(|x| x == "loss_scale_growth") && k.len() >= 3, "{k:?}");
    // The scale is in metrics.csv: 1024 for steps 1-2, 512 after the overflow, then doubling.
    let rows = trainer::metrics::read_rows(&tmp.path().join("scale/metrics.csv")).unwrap();
    let scales: Vec<f64> = rows.iter().filter(|r| r.kind == "step").map(|r| r.loss_scale.unwrap()).collect();
    assert_eq!(&scales[..7], [1024.0, 1024.0, 512.0, 512.0, 512.0, 512.0, 1024.0], "{scales:?}");
    assert_eq!(s.loss_scale, scales.last().copied());
}

#[test]
fn auto_batch_size_profile_and_tune_table() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = learnable(
        tmp.path(),
        &[
            "training.batch_size=\"auto\"",
            "training.max_batch_size=16",
            "training.effective_batch_size=16",
            "training.epochs=1",
            "training.profile=true",
        ],
    );
    // With 50 epochs a step of 16 still gives over 100 steps on this small dataset, so the
    // search tries 8 and 16 (it starts at BatchNorm's 8 rows).
    let long = ExperimentConfig {
        training: trainer::config::TrainingConfig { epochs: 50, ..cfg.training.clone() },
        ..cfg.clone()
    };
    let report = trainer::tune::tune_batch(&long, &Faults::default()).unwrap();
    assert_eq!(report.rows.iter().map(|r| r.batch).collect::<Vec<_>>(), [8, 16]);
    assert!(report.rows.iter().all(|r| r.fits && r.samples_per_s.unwrap() > 0.0));
    assert!([8, 16].contains(&report.batch_size));
    assert_eq!(report.batch_size * report.accumulation_steps, 16);
    assert!(report.render().contains("chosen: batch_size = "));

    // One epoch (3 steps) is too short whatever the batch: the search keeps 8 rows, and the run
    // says it is too short.
    let s = train_in(tmp.path(), "auto", cfg);
    assert_eq!((s.batch_size, s.effective_batch_size), (8, 16));
    assert!(s.warnings.iter().any(|w| w.contains("makes 3 optimizer steps")), "{:?}", s.warnings);
    let resolved = std::fs::read_to_string(tmp.path().join("auto/config.toml")).unwrap();
    assert!(resolved.contains(&format!("batch_size = {}", s.batch_size)), "the resolved size is stored for resume");
    assert!(tmp.path().join("auto/batch-size.json").is_file());
    let p = s.profile.expect("profile requested");
    let names: Vec<&str> = p.phases.iter().map(|r| r.phase.as_str()).collect();
    assert_eq!(names, ["data wait", "forward", "backward", "optimizer", "other"]);
    let share: f64 = p.phases.iter().map(|r| r.share).sum();
    assert!((share - 1.0).abs() < 1e-6 && p.phases[1].ms_per_step > 0.0 && p.phases[2].ms_per_step > 0.0, "{p:?}");
    assert!(p.render().contains("forward"));
}

/// A small npy dataset (48 recordings of 6 feature channels: 3 signs by 4 signers) trained with
/// the default settings, as a user with a small dataset of their own would: the run is too short
/// to train, and the console and summary.json say so with what to change; `batch_size = "auto"`
/// on the CPU keeps the batch small for the dataset.
#[test]
fn a_small_npy_dataset_is_told_its_run_is_too_short_and_auto_batch_considers_its_size() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("small");
    std::fs::create_dir_all(&root).unwrap();
    let mut csv = String::from("file,label,group\n");
    for (g, c, r) in (0..4).flat_map(|g| (0..3).flat_map(move |c| (0..4).map(move |r| (g, c, r)))) {
        let file = format!("g{g}-c{c}-r{r}.npy");
        let values: Vec<f32> = (0..20 * 6)
            .map(|i| ((i / 6) as f32 * 0.3 * (c + 1) as f32 + (i % 6) as f32 + g as f32 * 0.1 + r as f32 * 0.01).sin())
            .collect();
        data::npy::write_npy(&root.join(&file), &[20, 6], &values).unwrap();
        csv += &format!("{file},sign{c},signer{g}\n");
    }
    std::fs::write(root.join("labels.csv"), csv).unwrap();
    let build = |sets: &[String]| {
        let mut b = ConfigBuilder::new();
        for s in [
            format!("data.path=\"{}\"", root.display()),
            format!("data.cache_dir={}", tmp.path().join("cache").display()),
            "data.valid_fraction=0.25".to_string(),
            "training.progress=off".to_string(),
            "training.epochs=12".to_string(),
            "device.device=cpu".to_string(),
        ]
        .iter()
        .chain(sets)
        {
            b.add_set(s).unwrap();
        }
        b.build().unwrap()
    };
    let bin = env!("CARGO_BIN_EXE_trainer");
    let cfg_file = write(tmp.path(), "small.toml", &format!(
        "[data]\npath = \"{}\"\ncache_dir = \"{}\"\nvalid_fraction = 0.25\n[training]\nepochs = 12\nprogress = \"off\"\n",
        root.display(),
        tmp.path().join("cache").display()
    ));
    let out = Command::new(bin)
        .args(["--device", "cpu", "--config"])
        .arg(&cfg_file)
        .arg("--out")
        .arg(tmp.path().join("run"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // 36 training recordings, batch 32, the last partial batch dropped: 1 step an epoch.
    assert!(
        stderr.contains("warning: this run makes 12 optimizer steps in all (12 epochs over 36 training sequences in steps of 32 x 1): too few to train a model; use training.batch_size = 8 with training.epochs = 25, or training.epochs = 100"),
        "{stderr}"
    );
    let run_dir = tmp.path().join("run");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("summary.json")).unwrap()).unwrap();
    let warnings = summary["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].as_str().unwrap().contains("makes 12 optimizer steps"));

    // "auto" on the CPU: no batch of 8 rows or more reaches 100 steps in 12 epochs, so the
    // search keeps BatchNorm's 8 rows and says why.
    let report =
        trainer::tune::tune_batch(&build(&["training.batch_size=\"auto\"".into()]), &Faults::default()).unwrap();
    assert_eq!(report.batch_size, 8, "{}", report.render());
    assert!(report.reason.contains("fewer than 100 optimizer steps over 36 training sequences"), "{}", report.reason);
    // With 40 epochs batch 8 gives 4 x 40 = 160 steps: the search may take it, nothing larger.
    let report = trainer::tune::tune_batch(
        &build(&["training.batch_size=\"auto\"".into(), "training.epochs=40".into()]),
        &Faults::default(),
    )
    .unwrap();
    assert!(report.rows.iter().all(|r| r.batch <= 9), "{}", report.render());
}

/// Whether a WGPU adapter exists; without one a WGPU test skips, except in CI, which sets
/// SIGNFLOW_REQUIRE_WGPU=1 and so fails.
fn wgpu_available() -> bool {
    let dev = device::probe_for(&device::DeviceSpec::Wgpu(None));
    if dev.wgpu.adapters.is_empty() {
        assert!(
            std::env::var("SIGNFLOW_REQUIRE_WGPU").is_err(),
            "SIGNFLOW_REQUIRE_WGPU is set but no WGPU adapter was found"
        );
        eprintln!("skipped: no WGPU adapter");
        return false;
    }
    true
}

/// The built-in default config (conv-transformer) on a small synthetic set, on WGPU.
fn wgpu_default(tmp: &Path, sets: &[&str]) -> Option<ExperimentConfig> {
    if !wgpu_available() {
        return None;
    }
    let mut b = ConfigBuilder::new();
    for s in [
        format!("data.synthetic_dir={}", tmp.join("synth").display()),
        format!("data.cache_dir={}", tmp.join("cache").display()),
        format!("training.out_dir={}", tmp.join("runs").display()),
    ] {
        b.add_set(&s).unwrap();
    }
    for s in [
        "training.progress=off",
        "device.device=\"wgpu\"",
        "synthetic.classes=6",
        "synthetic.signers=4",
        "synthetic.repetitions=4",
        "training.batch_size=8",
        "training.log_every=1",
    ]
    .iter()
    .chain(sets)
    {
        b.add_set(s).unwrap();
    }
    Some(b.build().unwrap())
}

/// Mean loss of the first and of the last `n` logged steps.
fn first_and_last_loss(run_dir: &Path, n: usize) -> (f64, f64) {
    let rows = trainer::metrics::read_rows(&run_dir.join("metrics.csv")).unwrap();
    let losses: Vec<f64> = rows.iter().filter(|r| r.kind == "step").filter_map(|r| r.loss).collect();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    (mean(&losses[..n]), mean(&losses[losses.len() - n..]))
}

#[test]
fn bench_times_every_phase_of_the_configured_model() {
    use trainer::bench::{bench, BenchOptions};
    let tmp = tempfile::tempdir().unwrap();
    let cfg = smoke(tmp.path(), &[]);
    let opts = BenchOptions { batch: 4, frames: 8, features: 10, classes: 3, steps: 3, latency_runs: 5 };
    let compute = trainer::resolve::ResolvedCompute::resolve(&cfg).unwrap();
    let r = bench(&cfg, &compute, &opts).unwrap();
    assert_eq!((r.batch, r.frames, r.features, r.classes), (4, 8, 10, 3));
    assert_eq!(r.model, cfg.model.kind());
    let expected = {
        let _turn = trainer::turn(trainer::Streams::HOST);
        models::trainable_params(&cfg.model.init::<trainer::InnerBackend>(
            10,
            3,
            &device::dispatch_device(&device::Target::Cpu).unwrap(),
        ))
    };
    assert_eq!(r.trainable_params, expected);
    for (name, v) in [
        ("forward", r.forward_ms),
        ("backward", r.backward_ms),
        ("optimizer", r.optimizer_ms),
        ("b1", r.infer_b1_p50_ms),
        ("back to back", r.train_pipelined_samples_per_s),
    ] {
        assert!(v.is_finite() && v > 0.0, "{name} = {v}");
    }
    // The step is the median of per-step sums, so it is at least each phase's median.
    assert!(r.train_step_ms >= r.forward_ms.max(r.backward_ms) * 0.999, "{r:?}");
    assert!((r.train_samples_per_s - 4.0 / r.train_step_ms * 1e3).abs() < 1e-6);
    assert!(r.infer_b1_p90_ms >= r.infer_b1_p50_ms);
    let bad = BenchOptions { batch: 0, ..opts };
    let e = bench(&cfg, &compute, &bad).unwrap_err().to_string();
    assert!(e.contains("batch 0"), "{e}");
}

/// Launches and host waits of one training step of the default model (batch 8 x 32 frames), as
/// `trainer bench --count` reports them on WGPU; the counts do not depend on the adapter (the
/// figures and the reference model's are in docs/PERFORMANCE.md). Lower these when the step
/// gets leaner; a change that raises them must say why.
const MAX_LAUNCHES_PER_STEP: f64 = 110.0;
const MAX_HOST_WAITS_PER_STEP: f64 = 0.0;
/// Operations registered with Burn's fusion layer per step (tensor drops included): each costs
/// host time whether or not it launches, and a CUDA step is bound by the host (158 now).
const MAX_FUSION_OPS_PER_STEP: f64 = 165.0;
/// Launches of the step's update (gradient gather into the flat buffer, norm, AdamW's one
/// kernel): 7 now, where per-tensor AdamW launched 164.
const MAX_UPDATE_LAUNCHES: u64 = 8;
/// Launches and fusion operations of one inference pass of that model (upload, forward, the
/// logits' read) at batch 1 and 8: it launches 21 and registers 60-62 (the norms beside linear
/// layers folded into them: 3 launches fewer, 3 operations more).
const MAX_INFERENCE_LAUNCHES: f64 = 23.0;
const MAX_INFERENCE_FUSION_OPS: f64 = 68.0;

#[test]
fn a_training_step_on_wgpu_launches_a_bounded_number_of_kernels_and_waits_a_bounded_number_of_times() {
    if !wgpu_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("count.json");
    // A copy of the per-user kernel cache (as CI keeps it warm) with a damaged autotune entry
    // and a torn last write added: the run repairs it, says so, and still counts.
    let cache = tmp.path().join("kernels");
    let results = cache.join("autotune/0.10.0/damaged");
    std::fs::create_dir_all(&results).unwrap();
    if let Some(home) = device::runtime::default_cache_dir().filter(|d| d.join("autotune").is_dir()) {
        copy_dir(&home.join("autotune"), &cache.join("autotune"));
    }
    let damaged = results.join("matmul-tune.json.log");
    std::fs::write(&damaged, "{\"key\":1,\"value\":2}\n\u{0}not json\n{\"key\":").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_trainer"))
        .env(device::runtime::CACHE_ENV, &cache)
        .args(["bench", "--count", "--device", "wgpu", "--batch", "8", "--frames", "32", "--classes", "6"])
        .args(["--steps", "2", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    eprintln!("{stdout}");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let f = |k: &str| r[k].as_f64().unwrap_or_else(|| panic!("{k} missing in {r}"));
    // Real counts: a step launches kernels, and all of them were compiled in the warm-up.
    assert!(f("launches_per_step") >= 50.0, "{r}");
    assert!(f("compiled_in_warm_up") >= 20.0, "{r}");
    assert_eq!(f("compiled_in_counted"), 0.0, "{r}");
    assert!(f("launches_per_step") <= MAX_LAUNCHES_PER_STEP, "{r}");
    assert!(f("host_waits_per_step") <= MAX_HOST_WAITS_PER_STEP, "{r}");
    // Every launch comes from a registered operation and a plan; views and drops launch nothing.
    assert!(f("fusion_plans_per_step") >= f("launches_per_step") * 0.5, "{r}");
    assert!(f("fusion_ops_per_step") >= f("fusion_plans_per_step"), "{r}");
    assert!(f("fusion_drops_per_step") >= 1.0, "{r}");
    assert!(f("fusion_ops_per_step") <= MAX_FUSION_OPS_PER_STEP, "{r}");
    // The flat optimizer: the update is a handful of launches, AdamW's one kernel among them,
    // and the split step (queued as the counted ones are) adds up to a counted step.
    let update = r["launches_update"].as_u64().expect("launches_update");
    assert!((3..=MAX_UPDATE_LAUNCHES).contains(&update), "{r}");
    assert!(r["update_kernels"].to_string().contains("AdamwKernel"), "{r}");
    let split = (r["launches_forward_backward"].as_u64().unwrap() + update) as f64;
    assert!((split - f("launches_per_step")).abs() <= 1.0, "{r}");
    // The step runs SignFlow's CubeCL kernels (crates/cube), not their reference tensor ops.
    let names = r["kernels"].to_string();
    // No bool-to-float cast: Burn's fusion cannot join one, and the ops queued after it then
    // run one kernel each (`models::common::mask_values` builds masks from fusion ops instead).
    assert!(!names.contains("BoolCastKernel"), "{names}");
    let ours = [
        "DwconvTapsKernel",
        "DwconvWeightGradKernel",
        "DwconvSiluGradKernel",
        "ChannelNormBackwardKernel",
        "AssembleKernel",
        "EcaKernel",
        "EcaBackwardKernel",
        "SumRowsKernel",
        "AttentionScoresKernel",
        "AttentionScoresBackwardKernel",
        "AttentionValuesKernel",
        "AttentionValuesBackwardKernel",
        "SoftmaxDropoutKernel",
        "SoftmaxDropoutBackwardKernel",
        "ChannelNormTrainKernel",
        "SiluKernel",
        "SiluBackwardKernel",
    ];
    for kernel in ours {
        assert!(names.contains(kernel), "{kernel} not launched: {r}");
    }
    // Inference of the trained model at batch 1 and 8: one wait (the logits' read), nothing
    // compiled after the warm-up, BatchNorm with running statistics as one kernel.
    let passes = r["inference"].as_array().expect("inference counts");
    assert_eq!(passes.iter().map(|p| p["batch"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 8], "{r}");
    for p in passes {
        let g = |k: &str| p[k].as_f64().unwrap_or_else(|| panic!("{k} missing in {p}"));
        assert_eq!(g("host_waits"), 1.0, "{p}");
        assert_eq!(g("compiled_in_counted"), 0.0, "{p}");
        assert!(g("launches") >= 10.0 && g("launches") <= MAX_INFERENCE_LAUNCHES, "{p}");
        assert!(g("fusion_ops") >= g("launches") && g("fusion_ops") <= MAX_INFERENCE_FUSION_OPS, "{p}");
        let names = p["kernels"].to_string();
        // The conv blocks' SiLU, conv and norm as one kernel (no conv of its own); the other
        // norms folded into the linear layers beside them (no norm kernel at all).
        assert!(names.contains("ConvBlockEvalKernel") && !names.contains("BoolCastKernel"), "{names}");
        assert!(!names.contains("DwconvTapsKernel"), "a conv apart from its block's kernel: {names}");
        assert!(!names.contains("ChannelNorm"), "a norm not folded: {names}");
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("dropped 2 damaged autotune entries") && stderr.contains("matmul-tune.json.log"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&damaged).unwrap(), "{\"key\":1,\"value\":2}\n");
    // The run's own autotune results went to the cache it was given.
    assert!(std::fs::read_dir(cache.join("autotune/0.10.0")).unwrap().count() >= 2, "{}", cache.display());
}

/// Copies the files of `from` into `to`, recursively.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if src.is_dir() {
            copy_dir(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// A small conv-transformer whose forward pass draws nothing at random and leaves its weights
/// alone: no dropout, BatchNorm running statistics frozen (the forward pass would update them).
const STILL_CONV: [&str; 7] = [
    "model.kind=\"conv_transformer\"",
    "model.dim=16",
    "model.heads=2",
    "model.drop_path=0.0",
    "model.attention_dropout=0.0",
    "model.late_dropout=0.0",
    "model.bn_momentum=0.0",
];

/// Removes the gradient of a model's first trainable parameter.
struct DropFirstGrad<'a> {
    grads: &'a mut burn::optim::GradientsParams,
    done: bool,
}

impl burn::module::ModuleVisitor<trainer::TrainBackend> for DropFirstGrad<'_> {
    fn visit_float<const D: usize>(
        &mut self,
        param: &burn::module::Param<burn::tensor::Tensor<trainer::TrainBackend, D>>,
    ) {
        if !self.done {
            self.done = self.grads.remove::<trainer::InnerBackend, D>(param.id).is_some();
        }
    }
}

/// Gives a model's first trainable parameter one more row (a model the state does not fit).
struct GrowFirst(bool);

impl burn::module::ModuleMapper<trainer::TrainBackend> for GrowFirst {
    fn map_float<const D: usize>(
        &mut self,
        param: burn::module::Param<burn::tensor::Tensor<trainer::TrainBackend, D>>,
    ) -> burn::module::Param<burn::tensor::Tensor<trainer::TrainBackend, D>> {
        let (id, tensor, mapper) = param.consume();
        if self.0 || !tensor.is_require_grad() {
            return burn::module::Param::from_mapped_value(id, tensor, mapper);
        }
        self.0 = true;
        let inner = tensor.inner();
        let row = inner.clone().narrow(0, 0, 1);
        let grown = burn::tensor::Tensor::from_inner(burn::tensor::Tensor::cat(vec![inner, row], 0)).require_grad();
        burn::module::Param::from_mapped_value(id, grown, mapper)
    }
}

/// Adds 0.001 to every float parameter, as an edit of the model between steps would.
struct Nudge;

impl burn::module::ModuleMapper<trainer::TrainBackend> for Nudge {
    fn map_float<const D: usize>(
        &mut self,
        param: burn::module::Param<burn::tensor::Tensor<trainer::TrainBackend, D>>,
    ) -> burn::module::Param<burn::tensor::Tensor<trainer::TrainBackend, D>> {
        let (id, tensor, mapper) = param.consume();
        let trainable = tensor.is_require_grad();
        let mut tensor = burn::tensor::Tensor::from_inner(tensor.inner().add_scalar(1e-3));
        if trainable {
            tensor = tensor.require_grad();
        }
        burn::module::Param::from_mapped_value(id, tensor, mapper)
    }
}

/// The loss scale kept on the device for a loop that reads step outcomes late follows the host
/// scaler's rules step by step: growth, backoff, backoff to the floor and below it, growth again.
#[test]
fn the_device_scale_follows_the_host_scalers_rules() {
    use burn::tensor::Tensor;
    use trainer::amp::{DeviceScale, LossScaler};
    use trainer::config::AmpConfig;

    let cfg =
        AmpConfig { init_scale: 1024.0, growth_factor: 2.0, growth_interval: 3, backoff_factor: 0.5, min_scale: 256.0 };
    let dev = device::dispatch_device(&device::Target::Cpu).unwrap();
    let mut host = LossScaler::new(true, &cfg);
    let mut on_device = DeviceScale::new(&host, &dev);
    let outcomes = [true, true, true, false, true, false, false, false, true, true, true, true];
    for (i, finite) in outcomes.into_iter().enumerate() {
        host.update(finite, &cfg);
        on_device.update(Tensor::from_data([finite], &dev), &cfg);
        let scale = on_device.scale.clone().into_data().iter::<f64>().next().unwrap();
        let good = on_device.good_steps.clone().into_data().iter::<f64>().next().unwrap();
        assert_eq!((scale, good as usize), (host.scale, host.good_steps), "after outcome {i}");
    }
    assert_eq!((host.growths, host.backoffs), (2, 4));
}

/// The optimizer against burn-optim's `AdamW` and `Sgd`: 20 steps of a small conv-transformer
/// on the same batch, on the CPU (steps decided on the host) and on WGPU (decided on the
/// device), with a skipped step, a parameter without a gradient, weights changed between
/// steps, a save and load of its state, and a load of the state Burn's own optimizer wrote (the
/// format of checkpoints written before).
/// An optimizer state whose moments hold no elements (a damaged file's `[rows, 0]`) is an error
/// naming the file and the parameter, not a panic in Burn's reshape (which reads a 0 in a target
/// shape as "keep that axis").
#[test]
fn optimizer_state_without_elements_is_an_error_naming_the_parameter() {
    use burn::module::{Module, ModuleVisitor, Param, ParamId};
    use burn::optim::record::{AdaptorRecord, AdaptorRecordV1};
    use burn::optim::{AdamW, AdamWState, AdaptiveMomentumState};
    use burn::tensor::Tensor;
    use trainer::{InnerBackend, TrainBackend};
    /// The first matrix parameter's id and shape.
    struct FirstMatrix(Option<(ParamId, Vec<usize>)>);
    impl ModuleVisitor<TrainBackend> for FirstMatrix {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<TrainBackend, D>>) {
            if self.0.is_none() && D == 2 {
                self.0 = Some((param.id, param.val().dims().to_vec()));
            }
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let cfg = smoke(tmp.path(), &[]);
    let dev = device::dispatch_device(&device::Target::Cpu).unwrap();
    let _turn = trainer::turn(trainer::Streams::HOST);
    let model = cfg.model.init::<TrainBackend>(12, 3, &dev);
    let mut first = FirstMatrix(None);
    model.visit(&mut first);
    let (id, dims) = first.0.unwrap();
    let empty = Tensor::<InnerBackend, 2>::zeros([dims[0], 0], &dev);
    let state = AdamWState { momentum: AdaptiveMomentumState::new(1, empty.clone(), empty) };
    let mut record = hashbrown::HashMap::new();
    record.insert(id, AdaptorRecord::<AdamW, TrainBackend>::V1(AdaptorRecordV1::Rank2(state)));
    let path = tmp.path().join("optim.mpk");
    bundle::weights::write_record::<TrainBackend, _>(record, &path).unwrap();
    let e = trainer::optim::Optim::new(&cfg.optimizer).load(&path, &model, &dev).unwrap_err().to_string();
    let want =
        format!("the optimizer state of parameter {id} has shape [{}, 0]; the model's parameter is {dims:?}", dims[0]);
    assert!(e.contains(&want) && e.contains(&*path.to_string_lossy()), "{e}");
}

#[test]
fn the_optimizer_takes_the_steps_of_burns_adamw_and_sgd() {
    use burn::module::{AutodiffModule, Module};
    use burn::optim::momentum::MomentumConfig;
    use burn::optim::{AdamWConfig, GradientsParams, Optimizer, SgdConfig};
    use burn::tensor::{FloatDType, Tensor};
    use models::precision::{ComputeModel, Materialize};
    use trainer::optim::Optim;
    use trainer::TrainBackend;

    let tmp = tempfile::tempdir().unwrap();
    let mut devices = vec![device::dispatch_device(&device::Target::Cpu).unwrap()];
    if wgpu_available() {
        let wgpu = device::resolve(&device::DeviceSpec::Wgpu(None), &device::SelectionPolicy::default()).unwrap();
        devices.push(wgpu.device);
    }
    for dev in &devices {
        let on_device = device::backend_name(dev) != "cpu";
        for (kind, sets) in [
            ("adamw", vec!["optimizer.kind=\"adamw\"", "optimizer.lr=0.01", "optimizer.weight_decay=0.05"]),
            ("sgd", vec!["optimizer.kind=\"sgd\"", "optimizer.lr=0.05", "optimizer.momentum=0.9"]),
            (
                "nesterov",
                vec![
                    "optimizer.kind=\"sgd\"",
                    "optimizer.lr=0.05",
                    "optimizer.momentum=0.9",
                    "optimizer.nesterov=true",
                    "optimizer.weight_decay=0.01",
                ],
            ),
        ] {
            let all: Vec<&str> = STILL_CONV.iter().copied().chain(sets).collect();
            let cfg = smoke(tmp.path(), &all);
            let o = &cfg.optimizer;
            let init = {
                let _turn = trainer::turn(trainer::Streams::of_device(dev));
                cfg.model.init::<TrainBackend>(20, 5, dev).map(&mut Materialize)
            };
            let batch = trainer::bench::synthetic_batch(8, 16, 20, 5, dev);
            let objective = trainer::objective::Objective::new(models::Task::Classification, 0.0, dev);
            let grads_times = |m: &models::SignModel<TrainBackend>, factor: f64| {
                let (loss, _) = objective.forward(&ComputeModel::new(m.clone(), FloatDType::F32), batch.clone());
                GradientsParams::from_grads(loss.mul_scalar(factor).backward(), m)
            };
            let grads = |m: &models::SignModel<TrainBackend>| grads_times(m, 1.0);
            let weights = |m: &models::SignModel<TrainBackend>| bundle::weights::flat_weights(&m.valid());
            let (mut a, mut b) = (init.clone(), init.clone());
            let lr = o.lr;
            let mut ours = Optim::new(o);
            // On the device the step decides itself whether it applies (`step_checked`: inside
            // AdamW's kernel on WGPU, as tensor ops for SGD and for the step with a missing
            // gradient); on the CPU the host knows it does.
            let take_step = |ours: &mut Optim, b: models::SignModel<TrainBackend>, g: trainer::optim::FlatGrads| {
                if !on_device {
                    return ours.step(lr, b, g, None, None);
                }
                let check = trainer::optim::StepCheck {
                    loss: Tensor::<trainer::InnerBackend, 1>::zeros([1], dev),
                    norm2: g.squared_norm(),
                    scale: trainer::step::LossScale::Host(1.0),
                    clip: 0.0,
                };
                ours.step_checked(lr, b, g, check)
            };
            let mut theirs_adamw = AdamWConfig::new()
                .with_beta_1(o.beta1 as f32)
                .with_beta_2(o.beta2 as f32)
                .with_epsilon(o.epsilon as f32)
                .with_weight_decay(o.weight_decay as f32)
                .init::<TrainBackend, models::SignModel<TrainBackend>>();
            let momentum = MomentumConfig { momentum: o.momentum, dampening: 0.0, nesterov: o.nesterov };
            let decay =
                (o.weight_decay > 0.0).then(|| burn::optim::decay::WeightDecayConfig::new(o.weight_decay as f32));
            let mut theirs_sgd = SgdConfig::new()
                .with_momentum(Some(momentum))
                .with_weight_decay(decay)
                .init::<TrainBackend, models::SignModel<TrainBackend>>();
            // The last step: one parameter gets no gradient (both optimizers leave it as it was;
            // Burn's then also counts one step fewer in that parameter's bias correction, ours
            // does not, so it is the last step).
            let grads_at = |m: &models::SignModel<TrainBackend>, step: usize| {
                let mut g = grads(m);
                if step == 19 {
                    m.visit(&mut DropFirstGrad { grads: &mut g, done: false });
                }
                g
            };
            for step in 0..20 {
                a = match kind {
                    "adamw" => theirs_adamw.step(lr, a.clone(), grads_at(&a, step)),
                    _ => theirs_sgd.step(lr, a.clone(), grads_at(&a, step)),
                };
                if step == 8 && on_device {
                    // A step decided against on the device changes nothing.
                    let before = weights(&b);
                    // Its outcome is settled only at step 12, as the loop settles once per log
                    // interval: until then the device leaves it out of the bias correction.
                    let g = ours.gather(&b, grads_times(&b, f64::NAN));
                    b = take_step(&mut ours, b.clone(), g);
                    let changed = max_abs_diff(&weights(&b), &before);
                    assert_eq!(changed, 0.0, "{kind}: a skipped step changed the weights by up to {changed}");
                }
                let g = ours.gather(&b, grads_at(&b, step));
                b = take_step(&mut ours, b.clone(), g);
                if step == 5 {
                    // Weights changed between steps: the next step starts from the changed ones.
                    (a, b) = (a.map(&mut Nudge), b.map(&mut Nudge));
                }
                if step == 12 {
                    let path = tmp.path().join(format!("{kind}-ours.mpk"));
                    if on_device {
                        let e = ours.save(&path).unwrap_err().to_string();
                        assert!(e.contains("settle"), "{e}");
                        ours.settle(1);
                    }
                    ours.save(&path).unwrap();
                    ours = Optim::new(o).load(&path, &b, dev).unwrap();
                }
                if step == 15 {
                    // Burn's own record, as checkpoints written before hold it.
                    let path = tmp.path().join(format!("{kind}-burn.mpk"));
                    match kind {
                        "adamw" => bundle::weights::write_record::<TrainBackend, _>(theirs_adamw.to_record(), &path),
                        _ => bundle::weights::write_record::<TrainBackend, _>(theirs_sgd.to_record(), &path),
                    }
                    .unwrap();
                    ours = Optim::new(o).load(&path, &b, dev).unwrap();
                }
            }
            // State that does not fit the model (a parameter one row longer) is refused by name.
            let path = tmp.path().join(format!("{kind}-last.mpk"));
            if on_device {
                ours.settle(0);
            }
            ours.save(&path).unwrap();
            let e = Optim::new(o).load(&path, &b.clone().map(&mut GrowFirst(false)), dev).unwrap_err().to_string();
            assert!(e.contains("the optimizer state of parameter") && e.contains(&*path.to_string_lossy()), "{e}");
            let (wa, wb, w0) = (weights(&a), weights(&b), weights(&init));
            let (d, moved) = (max_abs_diff(&wa, &wb), max_abs_diff(&wa, &w0));
            eprintln!(
                "{} {kind}: max |ours - Burn's| {d:e} after 20 steps that moved weights by up to {moved:e}",
                device::backend_name(dev)
            );
            assert!(moved > 0.01, "{kind}: the weights did not move ({moved})");
            assert!(d <= 2e-5 * moved.max(1.0), "{kind} on {}: {d}", device::backend_name(dev));
        }
    }
}

#[test]
fn cross_validation_holds_out_every_signer_once_and_continues() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = smoke(tmp.path(), &["training.epochs=2"]);
    let dir = tmp.path().join("cv");
    let cv = trainer::cv::run_cv(&cfg, 2, Some(dir.clone())).unwrap();
    assert_eq!((cv.folds, cv.per_fold.len()), (2, 2));

    // Which signers each fold held out, by the same split function the runs used.
    let pre = data::preprocess::Preprocessor::new(cfg.preprocess.clone()).unwrap();
    let mut held_out = Vec::new();
    let mut total = 0;
    for (fold, f) in cv.per_fold.iter().enumerate() {
        let mut fold_cfg = cfg.clone();
        (fold_cfg.data.folds, fold_cfg.data.fold) = (2, fold);
        let p = trainer::resolve::prepare_data(&fold_cfg, &pre, false).unwrap();
        let groups: std::collections::BTreeSet<&str> =
            p.valid.iter().map(|&i| p.dataset.items[i].group.as_str()).collect();
        let train_groups: std::collections::BTreeSet<&str> =
            p.train.iter().map(|&i| p.dataset.items[i].group.as_str()).collect();
        assert!(groups.is_disjoint(&train_groups), "fold {fold}");
        assert_eq!((f.valid_groups, f.valid_samples, f.train_samples), (groups.len(), p.valid.len(), p.train.len()));
        held_out.extend(groups.into_iter().map(String::from));
        total = p.dataset.items.len();
        assert!(f.run_dir.join("model/model.json").is_file() && !f.reused);
        let saved = ExperimentConfig::from_file(&f.run_dir.join("config.toml")).unwrap();
        assert_eq!((saved.data.folds, saved.data.fold), (2, fold));
    }
    held_out.sort();
    assert_eq!(held_out.len(), 4, "smoke has 4 signers, each held out exactly once: {held_out:?}");
    held_out.dedup();
    assert_eq!(held_out.len(), 4);
    assert_eq!(cv.per_fold.iter().map(|f| f.valid_samples).sum::<usize>(), total);

    let top1: Vec<f64> = cv.per_fold.iter().map(|f| f.valid_top1.unwrap()).collect();
    let spread = cv.valid_top1.unwrap();
    assert!((spread.mean - (top1[0] + top1[1]) / 2.0).abs() < 1e-12);
    assert!((spread.std - (top1[0] - top1[1]).abs() / 2f64.sqrt()).abs() < 1e-12);
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("cv.json")).unwrap()).unwrap();
    assert_eq!(json["valid_top1"]["mean"].as_f64(), Some(spread.mean));
    assert!(cv.render().contains("validation top-1"), "{}", cv.render());

    // The same command again reads the finished folds back; another experiment is refused.
    let again = trainer::cv::run_cv(&cfg, 2, Some(dir.clone())).unwrap();
    assert!(again.per_fold.iter().all(|f| f.reused));
    assert_eq!(again.valid_top1, cv.valid_top1);
    let other = smoke(tmp.path(), &["training.epochs=2", "training.seed=5"]);
    let e = trainer::cv::run_cv(&other, 2, Some(dir.clone())).unwrap_err().to_string();
    assert!(e.contains("fold-0") && e.contains("training.seed"), "{e}");
    let e = trainer::cv::run_cv(&cfg, 3, Some(dir)).unwrap_err().to_string();
    assert!(e.contains("data.folds"), "{e}");

    // Bad settings.
    let e = smoke_builder(tmp.path(), &["data.folds=1"]).build().unwrap_err().to_string();
    assert!(e.contains("data.folds") && e.contains("must be 0 (no cross-validation) or 2..=1000"), "{e}");
    let e = smoke_builder(tmp.path(), &["data.folds=3", "data.fold=3"]).build().unwrap_err().to_string();
    assert!(e.contains("data.fold") && e.contains("0..3"), "{e}");
    let e = trainer::cv::run_cv(&cfg, 5, Some(tmp.path().join("cv5"))).unwrap_err().to_string();
    assert!(e.contains("data.folds = 5 but") && e.contains("has 4 signers"), "{e}");
    let e = trainer::cv::run_cv(&cfg, 1, None).unwrap_err().to_string();
    assert!(e.contains("--folds 1"), "{e}");
}

/// Every leaf of a TOML table as (dotted key, value).
fn flatten(prefix: &str, value: &toml::Value, out: &mut std::collections::BTreeMap<String, toml::Value>) {
    match value {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(&key, v, out);
            }
        }
        leaf => {
            out.insert(prefix.to_string(), leaf.clone());
        }
    }
}

/// Equal TOML values, numbers compared as numbers (an f32 default is serialized as its f64
/// widening, 0.006 as 0.006000000052...).
fn same_value(a: &toml::Value, b: &toml::Value) -> bool {
    use toml::Value::{Array, Float, Integer};
    let num = |v: &toml::Value| match v {
        Integer(i) => Some(*i as f64),
        Float(f) => Some(*f),
        _ => None,
    };
    match (a, b) {
        (Array(x), Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_value(p, q)),
        _ => match (num(a), num(b)) {
            (Some(x), Some(y)) => (x - y).abs() <= 1e-6 * x.abs().max(y.abs()),
            _ => a == b,
        },
    }
}

/// docs/CONFIG.md: one table per section (`### [section]`, `### [model] with kind = "..."`),
/// rows `| key | default | built-in run | meaning |`. Returns (section, model kind, key) ->
/// (default cell, built-in cell, line).
fn config_reference() -> std::collections::BTreeMap<(String, Option<String>), (String, String, usize)> {
    let text = std::fs::read_to_string(configs_dir().join("../docs/CONFIG.md")).unwrap();
    let mut rows = std::collections::BTreeMap::new();
    let (mut section, mut kind): (Option<String>, Option<String>) = (None, None);
    for (n, line) in text.lines().enumerate() {
        if let Some(heading) = line.strip_prefix("### ") {
            section = if heading == "Top level" {
                Some(String::new())
            } else {
                heading.split("`[").nth(1).and_then(|r| r.split("]`").next()).map(String::from)
            };
            kind = heading.split("kind = \"").nth(1).and_then(|r| r.split('"').next()).map(String::from);
            continue;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if !line.starts_with("| `") || cells.len() < 6 {
            continue;
        }
        let section = section.clone().unwrap_or_else(|| panic!("CONFIG.md line {}: a row before any section", n + 1));
        let key = cells[1].trim_matches('`');
        let key = if section.is_empty() { key.to_string() } else { format!("{section}.{key}") };
        let unquote = |c: &str| c.strip_prefix('`').and_then(|c| c.strip_suffix('`')).unwrap_or(c).to_string();
        let previous = rows.insert((key.clone(), kind.clone()), (unquote(cells[2]), unquote(cells[3]), n + 1));
        assert!(previous.is_none(), "CONFIG.md line {}: `{key}` is documented twice", n + 1);
    }
    rows
}

#[test]
fn config_reference_matches_the_code() {
    use std::collections::BTreeMap;
    use toml::Value;
    let parse = |cell: &str, what: &str| -> Value {
        toml::from_str::<toml::Table>(&format!("v = {cell}"))
            .unwrap_or_else(|e| panic!("{what}: `{cell}` is not a TOML value: {e}"))
            .remove("v")
            .unwrap()
    };
    // What the code says: serde defaults (each model kind's own) and the built-in run.
    let mut defaults: BTreeMap<(String, Option<String>), Value> = BTreeMap::new();
    let mut all = BTreeMap::new();
    flatten("", &Value::try_from(ExperimentConfig::default()).unwrap(), &mut all);
    for (k, v) in all.into_iter().filter(|(k, _)| !k.starts_with("model.")) {
        defaults.insert((k, None), v);
    }
    let kinds = [
        models::ModelConfig::ConvTransformer(Default::default()),
        models::ModelConfig::Transformer(Default::default()),
        models::ModelConfig::Gru(Default::default()),
    ];
    for model in &kinds {
        let mut keys = BTreeMap::new();
        flatten("model", &Value::try_from(model).unwrap(), &mut keys);
        for (k, v) in keys {
            defaults.insert((k, Some(model.kind().to_string())), v);
        }
    }
    // Optional keys (no value unless set) are documented with the default `unset`.
    let mut every = ExperimentConfig::default();
    every.ctc.lexicon = Some("words.txt".into());
    let mut set_keys = BTreeMap::new();
    flatten("", &Value::try_from(every).unwrap(), &mut set_keys);
    let optional: Vec<String> = set_keys
        .into_keys()
        .filter(|k| !k.starts_with("model.") && !defaults.contains_key(&(k.clone(), None)))
        .collect();
    assert_eq!(optional, ["ctc.lexicon"]);
    let mut built_in = BTreeMap::new();
    flatten("", &Value::Table(toml::from_str(DEFAULT_TOML).unwrap()), &mut built_in);
    let built_in_kind = built_in["model.kind"].as_str().unwrap().to_string();

    let docs = config_reference();
    let mut problems = Vec::new();
    for (key, kind) in defaults.keys() {
        if !docs.contains_key(&(key.clone(), kind.clone())) {
            problems.push(format!(
                "`{key}`{} is not documented",
                kind.as_ref().map(|k| format!(" ({k})")).unwrap_or_default()
            ));
        }
    }
    for key in built_in.keys() {
        let kind = key.starts_with("model.").then(|| built_in_kind.clone());
        if !defaults.contains_key(&(key.clone(), kind)) {
            problems.push(format!("configs/default.toml sets `{key}`, which the config does not have"));
        }
    }
    for key in &optional {
        match docs.get(&(key.clone(), None)) {
            Some((default, _, line)) if default != "unset" => {
                problems.push(format!("line {line}: `{key}` has no default value; document it as unset"))
            }
            Some(_) => {}
            None => problems.push(format!("`{key}` is not documented")),
        }
    }
    for ((key, kind), (default, built, line)) in &docs {
        if kind.is_none() && optional.contains(key) {
            continue;
        }
        let Some(expected) = defaults.get(&(key.clone(), kind.clone())) else {
            problems.push(format!("line {line}: `{key}` is documented but is not a config key"));
            continue;
        };
        if !same_value(&parse(default, &format!("line {line}")), expected) {
            problems.push(format!("line {line}: `{key}` default is documented as {default}, the code says {expected}"));
        }
        let in_built_in = match kind {
            Some(k) if *k != built_in_kind => None,
            _ => built_in.get(key),
        };
        match (in_built_in, built.is_empty()) {
            (None, true) => {}
            (None, false) => problems.push(format!(
                "line {line}: `{key}`: configs/default.toml does not set it, but the built-in column says {built}"
            )),
            (Some(v), true) => problems
                .push(format!("line {line}: `{key}`: configs/default.toml sets {v}, the built-in column is empty")),
            (Some(v), false) => {
                if !same_value(&parse(built, &format!("line {line}")), v) {
                    problems.push(format!(
                        "line {line}: `{key}`: built-in run documented as {built}, configs/default.toml sets {v}"
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "docs/CONFIG.md is out of date:\n{}", problems.join("\n"));
    assert!(docs.len() > 100, "the reference parser found only {} rows", docs.len());
}

/// A step that dies of a device out-of-memory (injected: Burn 0.21 raises it as a panic) is
/// continued from the last checkpoint with half the micro-batch and twice the accumulation;
/// the effective batch, the schedule and the data order stay, so the run learns like a clean one.
#[test]
fn out_of_memory_continues_from_the_checkpoint_with_half_the_micro_batch() {
    let tmp = tempfile::tempdir().unwrap();
    let clean = train_in(tmp.path(), "clean", learnable(tmp.path(), &[]));
    let sets = ["checkpoint.every_steps=4"];
    let s = train_injected(tmp.path(), "oom", learnable(tmp.path(), &sets), &["oom_at_steps=[5, 10]"]);
    assert_eq!(s.steps, clean.steps, "same schedule");
    assert_eq!((s.batch_size, s.accumulation_steps, s.effective_batch_size), (2, 4, 8));
    let f = &s.device_faults;
    assert_eq!(f.len(), 2, "{f:?}");
    assert_eq!((f[0].step, f[0].resumed_from_step, f[0].micro_batch, f[0].accumulation_steps), (5, 4, [8, 4], [1, 2]));
    assert_eq!((f[1].step, f[1].resumed_from_step, f[1].micro_batch, f[1].accumulation_steps), (10, 8, [4, 2], [2, 4]));
    assert_eq!(f[0].kind, trainer::fault::FaultKind::OutOfMemory);
    let run_dir = tmp.path().join("oom");
    for recorded in ["config.toml", "model/config.toml"] {
        let text = std::fs::read_to_string(run_dir.join(recorded)).unwrap();
        assert!(!text.contains("oom_at_steps"), "{recorded} must not carry the injected faults: {text}");
    }
    let ev = events(&run_dir);
    let faults: Vec<_> = ev.iter().filter(|e| e["kind"] == "device_fault").collect();
    assert_eq!(faults.len(), 2, "{ev:?}");
    assert_eq!(faults[0]["step"].as_u64(), Some(5));
    assert!(faults[0]["detail"].as_str().unwrap().contains("micro-batch 8 -> 4"), "{faults:?}");
    // The run's config now says 2 x 4; the original config still resumes it (and keeps 2 x 4).
    let saved = trainer::resume::read_saved_config(&run_dir).unwrap();
    assert_eq!((saved.training.batch_size.fixed(), saved.training.accumulation_steps), (Some(2), 4));
    trainer::resume::check_resume_compatible(&run_dir, &saved, &learnable(tmp.path(), &sets)).unwrap();
    // metrics.csv holds each step once (the rows after the checkpoint were rewritten).
    let rows = trainer::metrics::read_rows(&run_dir.join("metrics.csv")).unwrap();
    let steps: Vec<usize> = rows.iter().filter(|r| r.kind == "step").map(|r| r.step).collect();
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
    let (a, b) = (clean.last.as_ref().unwrap(), s.last.as_ref().unwrap());
    eprintln!(
        "clean: valid top-1 {:.3} loss {:.4}; after 2 out-of-memory recoveries: top-1 {:.3} loss {:.4}",
        a.valid_top1.unwrap(),
        a.valid_loss.unwrap(),
        b.valid_top1.unwrap(),
        b.valid_loss.unwrap()
    );
    assert!((a.valid_top1.unwrap() - b.valid_top1.unwrap()).abs() <= 0.05);
    assert!((a.valid_loss.unwrap() - b.valid_loss.unwrap()).abs() <= 0.05);

    // Without drop_last, a partial last batch of at most half a micro-batch (48 = 20 + 20 + 8):
    // halved, the epoch's last step takes the one micro-batch left, so the schedule (steps per
    // epoch) and each step's sequences stay.
    let n = clean.train_samples;
    let b = (10..40).step_by(2).find(|b| !n.is_multiple_of(*b) && n % b <= b / 2).unwrap();
    let batch = format!("training.batch_size={b}");
    let clean_b = train_in(tmp.path(), "clean-b", learnable(tmp.path(), &[&batch, "training.drop_last=false"]));
    assert_eq!(clean_b.steps, 12 * n.div_ceil(b), "the partial batch is a step of its own");
    let sets = [batch.as_str(), "training.drop_last=false", "checkpoint.every_steps=2"];
    let s_b = train_injected(tmp.path(), "oom-b", learnable(tmp.path(), &sets), &["oom_at_steps=[3]"]);
    assert_eq!(s_b.device_faults.len(), 1);
    assert_eq!((s_b.batch_size, s_b.accumulation_steps), (b / 2, 2));
    assert_eq!(s_b.steps, clean_b.steps, "{n} sequences in batches of {b}: same number of steps after halving");
    let (a, b) = (clean_b.last.as_ref().unwrap(), s_b.last.as_ref().unwrap());
    assert!((a.valid_top1.unwrap() - b.valid_top1.unwrap()).abs() <= 0.05);
}

/// Out of memory at micro-batch 1, or more faults than `recovery.max_device_faults`: a clear
/// error (exit code 3 from the CLI, no panic trace) and the run directory keeps its checkpoints.
#[test]
fn out_of_memory_that_cannot_be_recovered_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = smoke(tmp.path(), &["training.batch_size=2", "checkpoint.every_steps=1"]);
    let config = write(tmp.path(), "oom.toml", &cfg.to_toml());
    let run_dir = tmp.path().join("oom1");
    let trainer = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_trainer"))
            .args(["--config", &config.display().to_string(), "--out", &run_dir.display().to_string()])
            .args(extra)
            .output()
            .unwrap()
    };
    // Faults are not part of an experiment config: a `[fault]` table is an unknown key.
    let faulty = write(tmp.path(), "faulty.toml", "[fault]\noom_at_steps = [2]\n");
    let out = trainer(&["--config", &faulty.display().to_string()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("faulty.toml") && stderr.contains("fault"), "{stderr}");
    assert!(!run_dir.exists());
    let out = trainer(&["--inject", "oom_at_steps=[2]", "--inject", "oom_fits_micro_batch=0"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("out of memory at step 2") && stderr.contains("micro-batch 1"), "{stderr}");
    assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"), "{stderr}");
    assert!(stderr.contains("micro-batch 2 -> 1"), "the first fault was recovered: {stderr}");
    assert_eq!(trainer::checkpoint::list(&run_dir).last().map(|c| c.0), Some(2), "checkpoints kept");
    assert!(run_dir.join("config.toml").is_file() && !run_dir.join("summary.json").exists());
    // Nothing of the injected faults reaches the run directory: a resume does not inject them.
    let recorded = std::fs::read_to_string(run_dir.join("config.toml")).unwrap();
    assert!(!recorded.contains("[fault]") && !recorded.contains("oom_at_steps"), "{recorded}");
    // A subcommand that injects nothing refuses --inject rather than ignore the drill.
    let unused = tmp.path().join("unused").display().to_string();
    for (command, extra) in [("config", vec![]), ("generate", vec!["--to", unused.as_str()]), ("bench", vec![])] {
        let out = Command::new(env!("CARGO_BIN_EXE_trainer"))
            .args([command, "--inject", "oom_at_steps=[2]"])
            .args(extra)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(&format!("`trainer {command}` injects nothing")), "{stderr}");
    }

    let cfg = smoke(tmp.path(), &["recovery.max_device_faults=0"]);
    let err = run(cfg, injected(tmp.path().join("limit"), &["oom_at_steps=[1]"])).unwrap_err();
    assert!(err.to_string().contains("recovery.max_device_faults = 0 reached"), "{err}");
}

/// `--device wgpu` where no adapter exists (the Vulkan loader pointed at no driver): a clear
/// error and exit code, no panic trace, no run directory.
#[test]
fn wgpu_without_an_adapter_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write(tmp.path(), "exp.toml", &smoke(tmp.path(), &[]).to_toml());
    let run_dir = tmp.path().join("no-gpu");
    let out = Command::new(env!("CARGO_BIN_EXE_trainer"))
        .args(["--config", &config.display().to_string(), "--device", "wgpu", "--out", &run_dir.display().to_string()])
        .env("VK_ICD_FILENAMES", tmp.path().join("no-such-driver.json"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("device `wgpu` is not available"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!run_dir.exists());
}

/// A free TCP port on 127.0.0.1 (bound, read, released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn summary_json(run_dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(run_dir.join("summary.json")).unwrap()).unwrap()
}

#[test]
fn two_cpu_peers_reach_the_weights_of_one_device() {
    let tmp = tempfile::tempdir().unwrap();
    // 24 training sequences, global batch 8: 3 steps per epoch, 6 in all. SGD with momentum,
    // whose update is linear in the gradient, so only float rounding may differ.
    let base = [
        "training.epochs=2",
        "training.batch_size=8",
        "checkpoint.every_steps=0",
        "optimizer.kind=sgd",
        "optimizer.lr=0.05",
        "optimizer.momentum=0.9",
    ];
    let train = |name: &str, extra: &[&str]| {
        let sets: Vec<&str> = base.iter().chain(extra).copied().collect();
        let out =
            run(smoke(tmp.path(), &sets), RunOptions { run_dir: Some(tmp.path().join(name)), ..Default::default() })
                .unwrap();
        (exported_weights(&out.run_dir), out.summary.unwrap(), out.run_dir)
    };
    let (one, s_one, _) = train("one", &[]);
    let (equal, s_equal, dir_equal) = train("equal", &["distributed.devices=[\"cpu\", \"cpu\"]"]);
    let (fixed, s_fixed, _) = train(
        "fixed",
        &["distributed.devices=[\"cpu\", \"cpu\"]", "distributed.balance=\"fixed\"", "distributed.shares=[3.0, 1.0]"],
    );
    let (eq_d, fx_d) = (max_abs_diff(&equal, &one), max_abs_diff(&fixed, &one));
    eprintln!("2 CPU peers vs 1 device after {} steps: max |dw| equal {eq_d:e}, 3:1 {fx_d:e}", s_one.steps);
    assert_eq!((s_one.steps, s_equal.steps, s_fixed.steps), (6, 6, 6));
    assert_eq!(s_equal.samples_seen, s_one.samples_seen);
    assert!(eq_d <= 1e-5 && fx_d <= 1e-5, "equal shares {eq_d}, 3:1 shares {fx_d}");
    // AdamW divides by sqrt(v), which magnifies the rounding where gradients are tiny (as with
    // gradient accumulation): 4e-5 to 9e-5 here, against 3e-3 for one step's update.
    let adamw = ["training.epochs=2", "training.batch_size=8", "checkpoint.every_steps=0"];
    let go = |name: &str, extra: &[&str]| {
        let sets: Vec<&str> = adamw.iter().chain(extra).copied().collect();
        let out =
            run(smoke(tmp.path(), &sets), RunOptions { run_dir: Some(tmp.path().join(name)), ..Default::default() })
                .unwrap();
        exported_weights(&out.run_dir)
    };
    let d = max_abs_diff(&go("adamw-one", &[]), &go("adamw-two", &["distributed.devices=[\"cpu\", \"cpu\"]"]));
    eprintln!("AdamW: 2 CPU peers vs 1 device: max |dw| {d:e}");
    assert!(d <= 2e-4, "AdamW: max |dw| {d}");
    // BatchNorm (the conv-transformer) normalizes each peer's rows on their own, as DDP without
    // SyncBatchNorm does: 2 peers x 4 rows equal one device accumulating 2 micro-batches of 4
    // (the same rows: the loader shuffles, then cuts batches), not one batch of 8.
    // Running statistics frozen: the group keeps the leader's, accumulation updates them twice.
    let conv = ["optimizer.kind=sgd", "optimizer.lr=0.05", "training.epochs=1", "checkpoint.every_steps=0"];
    let go = |name: &str, extra: &[&str]| {
        let sets: Vec<&str> = STILL_CONV.iter().chain(&conv).chain(extra).copied().collect();
        let out =
            run(smoke(tmp.path(), &sets), RunOptions { run_dir: Some(tmp.path().join(name)), ..Default::default() })
                .unwrap();
        exported_weights(&out.run_dir)
    };
    let group = go("bn-two", &["training.batch_size=8", "distributed.devices=[\"cpu\", \"cpu\"]"]);
    let accum = go("bn-accum", &["training.batch_size=4", "training.accumulation_steps=2"]);
    let large = go("bn-large", &["training.batch_size=8"]);
    let (same, other) = (max_abs_diff(&group, &accum), max_abs_diff(&group, &large));
    eprintln!("BatchNorm: 2 peers vs accumulation 2 x 4: max |dw| {same:e}; vs one batch of 8: {other:e}");
    assert!(same <= 1e-5 && other > 100.0 * same, "BatchNorm model: {same} vs accumulation, {other} vs batch 8");
    assert!(max_abs_diff(&one, &exported_weights(&tmp.path().join("one"))) == 0.0);
    // The group is on record: peers, rows, and the start event.
    let g = summary_json(&dir_equal)["distributed"].clone();
    assert_eq!(g["peers"].as_array().unwrap().len(), 2, "{g}");
    assert_eq!(g["peers"][1]["rank"], 1);
    assert_eq!((g["peers"][0]["rows"].as_u64(), g["peers"][1]["rows"].as_u64()), (Some(4), Some(4)));
    let fixed_rows = s_fixed.distributed.as_ref().unwrap().peers.iter().map(|p| p.rows).collect::<Vec<_>>();
    assert_eq!(fixed_rows, [6, 2]);
    let ev = kinds(&events(&dir_equal));
    assert!(ev.contains(&"group_start".to_string()) && ev.contains(&"weights_verified".to_string()), "{ev:?}");
    // The same with the validation figures: identical to one device up to rounding.
    let (a, b) = (s_one.best.unwrap().value, s_equal.best.unwrap().value);
    assert!((a - b).abs() < 1e-5, "best validation figure {a} vs {b}");
}

#[test]
fn a_dead_peer_stops_the_group_naming_it_and_the_run_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let sets = [
        "training.epochs=2",
        "training.batch_size=8",
        "checkpoint.every_steps=2",
        "distributed.devices=[\"cpu\", \"cpu\"]",
        "distributed.timeout_s=20",
    ];
    let dir = tmp.path().join("run");
    let t0 = Instant::now();
    let err = run(smoke(tmp.path(), &sets), injected(dir.clone(), &["peer_dies_at_step=3"])).unwrap_err().to_string();
    let took = t0.elapsed();
    assert!(err.contains("peer 1 (") && err.contains("injected peer failure"), "{err}");
    assert!(took < Duration::from_secs(20), "the group took {took:?} to stop");
    // Checkpoints at step 2 and at the end of epoch 1 (step 3); the peer died in step 4.
    assert_eq!(trainer::checkpoint::list(&dir).last().map(|c| c.0), Some(3));
    // Continued without the fault: the same weights as a run that never failed.
    let out =
        run(smoke(tmp.path(), &sets), RunOptions { run_dir: Some(dir.clone()), resume: true, ..Default::default() })
            .unwrap();
    assert_eq!(out.summary.unwrap().steps, 6);
    let clean =
        run(smoke(tmp.path(), &sets), RunOptions { run_dir: Some(tmp.path().join("clean")), ..Default::default() })
            .unwrap();
    assert_eq!(max_abs_diff(&exported_weights(&dir), &exported_weights(&clean.run_dir)), 0.0);
}

/// `trainer` child processes of a two-machine group on 127.0.0.1; killed when dropped.
struct Procs(Vec<std::process::Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The largest single allocation requested by a thread while it fuzzes (see [`fuzz_formats`]).
mod alloc_watch {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;
    use std::sync::atomic::{AtomicUsize, Ordering};

    pub struct Watch;
    pub static LARGEST: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        pub static ON: Cell<bool> = const { Cell::new(false) };
    }

    unsafe impl GlobalAlloc for Watch {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            if ON.try_with(Cell::get).unwrap_or(false) {
                LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
            }
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            if ON.try_with(Cell::get).unwrap_or(false) {
                LARGEST.fetch_max(new_size, Ordering::Relaxed);
            }
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }
}

#[global_allocator]
static ALLOC: alloc_watch::Watch = alloc_watch::Watch;

/// A file format under the fuzzer: a valid file, where the mutated copies go, and the reader.
struct Target<'a> {
    name: &'a str,
    valid: Vec<u8>,
    path: PathBuf,
    read: Box<dyn Fn() -> Result<(), String> + 'a>,
}

/// Every file under `dirs`, recursively (missing directories hold none).
fn files_under(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let (mut stack, mut files) = (dirs.to_vec(), Vec::new());
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files
}

fn find_file(dir: &Path, suffix: &str) -> PathBuf {
    files_under(&[dir.to_path_buf()])
        .into_iter()
        .find(|p| p.to_string_lossy().ends_with(suffix))
        .unwrap_or_else(|| panic!("no {suffix} under {}", dir.display()))
}

/// The PyTorch weights a user imports (`infer import-torch`): a `torch.save` archive mutated
/// whole, and its pickle mutated inside an otherwise valid archive (a zip's checksums refuse most
/// whole-file mutations before the pickle is read). Each is read as the import reads it: every
/// floating-point tensor of the valid file, with its shape.
fn pytorch_targets(dir: &Path) -> Vec<Target<'static>> {
    use bundle::torch_file::TorchFile;
    use std::io::{Read, Write};
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bundle/tests/fixtures/tiny_reference.pt");
    let valid = std::fs::read(&fixture).unwrap();
    let shapes: Vec<(String, Vec<usize>)> = TorchFile::open(&fixture)
        .unwrap()
        .tensors
        .iter()
        .filter(|(_, t)| !matches!(t.dtype, bundle::torch_file::StorageType::Other(_)))
        .map(|(name, t)| (name.clone(), t.shape.iter().map(|&d| d as usize).collect()))
        .collect();
    let import = move |path: &Path| -> Result<(), String> {
        let mut file = TorchFile::open(path).map_err(|e| e.to_string())?;
        for (name, shape) in &shapes {
            file.read_f32(name, shape).map_err(|e| e.to_string())?;
        }
        Ok(())
    };
    let import2 = import.clone();
    // The archive's entries, to wrap each mutated pickle in.
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(valid.clone())).unwrap();
    let mut entries = Vec::new();
    for i in 0..zip.len() {
        let mut f = zip.by_index(i).unwrap();
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes).unwrap();
        entries.push((f.name().to_string(), bytes));
    }
    let pickle = entries.iter().find(|(n, _)| n.ends_with("/data.pkl")).unwrap().1.clone();
    let (whole, pkl, wrapped) = (dir.join("model.pt"), dir.join("data.pkl"), dir.join("wrapped.pt"));
    let (whole_read, pkl_read) = (whole.clone(), pkl.clone());
    vec![
        Target { name: "PyTorch .pt (torch.save)", valid, path: whole, read: Box::new(move || import(&whole_read)) },
        Target {
            name: "PyTorch pickle (data.pkl)",
            valid: pickle,
            path: pkl,
            read: Box::new(move || {
                let pickle = std::fs::read(&pkl_read).unwrap();
                let mut out = zip::ZipWriter::new(std::fs::File::create(&wrapped).unwrap());
                let stored =
                    zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
                for (name, bytes) in &entries {
                    out.start_file(name.as_str(), stored).unwrap();
                    out.write_all(if name.ends_with("/data.pkl") { &pickle } else { bytes }).unwrap();
                }
                out.finish().unwrap();
                import2(&wrapped)
            }),
        },
    ]
}

/// Seeded mutation fuzzing of every file SignFlow reads: each damaged input must be an error,
/// never a panic, a hang or a huge allocation.
#[test]
fn fuzz_formats() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = smoke(tmp.path(), &[]);
    let full = run(cfg.clone(), RunOptions { run_dir: Some(tmp.path().join("run")), ..Default::default() }).unwrap();
    let run_dir = full.run_dir;
    let dev = device::dispatch_device(&device::Target::Cpu).unwrap();
    let synth_csv = find_file(&tmp.path().join("synth"), "train.csv");
    let synth_root = synth_csv.parent().unwrap().to_path_buf();
    let fuzz = tmp.path().join("fuzz");
    std::fs::create_dir_all(&fuzz).unwrap();
    let place = |sub: &str| {
        let d = fuzz.join(sub);
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    // A dataset root whose train.csv is fuzzed, with the real landmark files beside it.
    let ds = place("dataset");
    std::os::unix::fs::symlink(synth_root.join("landmarks"), ds.join("landmarks")).unwrap();
    std::fs::copy(synth_root.join("sign_to_prediction_index_map.json"), ds.join("sign_to_prediction_index_map.json"))
        .unwrap();
    // A bundle without its manifest, so the decoders see every damaged byte.
    let bundle_dir = place("bundle");
    for e in std::fs::read_dir(run_dir.join("model")).unwrap().flatten() {
        if e.file_name() != "manifest.json" {
            std::fs::copy(e.path(), bundle_dir.join(e.file_name())).unwrap();
        }
    }
    let ckpt = place("checkpoint");
    let last_checkpoint = trainer::checkpoint::list(&run_dir).pop().unwrap().1;
    std::fs::copy(last_checkpoint.join("state.json"), ckpt.join("state.json")).unwrap();
    let optim_file = place("optim").join(bundle::layout::OPTIM_FILE);
    let npy = place("npy").join("seq.npy");
    let values: Vec<f32> = (0..12 * 30).map(|i| i as f32 * 0.01).collect();
    data::npy::write_npy(&npy, &[12, 30], &values).unwrap();
    // An npy-layout dataset whose labels.csv is fuzzed.
    let npy_ds = place("npy-dataset");
    for f in ["a", "b", "c", "d"] {
        data::npy::write_npy(&npy_ds.join(format!("{f}.npy")), &[12, 30], &values).unwrap();
    }
    let labels_csv = "file,label,group\na.npy,hello,s1\nb.npy,thanks,s1\nc.npy,hello,s2\nd.npy,thanks,s2\n";
    // A continuous npy-layout dataset whose gloss vocabulary is fuzzed.
    let gloss_ds = place("gloss-dataset");
    for f in ["a", "b"] {
        data::npy::write_npy(&gloss_ds.join(format!("{f}.npy")), &[12, 30], &values).unwrap();
    }
    std::fs::write(gloss_ds.join("labels.csv"), "file,tokens,group\na.npy,HELLO YOU,s1\nb.npy,THANKS,s2\n").unwrap();
    let glosses = "# glosses\nHELLO\nYOU\nTHANKS\n";
    // An ASL Fingerspelling layout whose train.csv and character map are fuzzed.
    let spelling = place("fingerspelling");
    write_fingerspelling(&spelling);
    let cfg_path = place("config").join("exp.toml");
    let card = bundle::card::read_card(&bundle_dir).unwrap();

    let text = |e: &dyn std::fmt::Display| e.to_string();
    let targets = vec![
        Target {
            name: "landmarks parquet",
            valid: std::fs::read(find_file(&synth_root, ".parquet")).unwrap(),
            path: place("parquet").join("seq.parquet"),
            read: Box::new(|| {
                data::islr::read_parquet(&fuzz.join("parquet/seq.parquet")).map(|_| ()).map_err(|e| text(&e))
            }),
        },
        Target {
            name: "npy",
            valid: std::fs::read(&npy).unwrap(),
            path: npy.clone(),
            read: Box::new(|| data::npy::read_npy(&npy).map(|_| ()).map_err(|e| text(&e))),
        },
        Target {
            name: "train.csv",
            valid: std::fs::read(&synth_csv).unwrap(),
            path: ds.join("train.csv"),
            read: Box::new(|| data::index::open(&ds).map(|_| ()).map_err(|e| text(&e))),
        },
        Target {
            name: "labels.csv (npy layout)",
            valid: labels_csv.as_bytes().to_vec(),
            path: npy_ds.join("labels.csv"),
            read: Box::new(|| data::index::open(&npy_ds).map(|_| ()).map_err(|e| text(&e))),
        },
        Target {
            name: "fingerspelling train.csv",
            valid: std::fs::read(spelling.join("train.csv")).unwrap(),
            path: spelling.join("train.csv"),
            read: Box::new(|| data::index::open(&spelling).map(|_| ()).map_err(|e| text(&e))),
        },
        Target {
            name: "character map (fingerspelling)",
            valid: std::fs::read(spelling.join(data::index::CHARACTER_MAP)).unwrap(),
            path: spelling.join(data::index::CHARACTER_MAP),
            read: Box::new(|| data::index::open(&spelling).map(|_| ()).map_err(|e| text(&e))),
        },
        Target {
            name: "gloss vocabulary.txt",
            valid: glosses.as_bytes().to_vec(),
            path: gloss_ds.join(data::index::GLOSS_LIST),
            read: Box::new(|| data::index::open(&gloss_ds).map(|_| ()).map_err(|e| text(&e))),
        },
        Target {
            name: "label map",
            valid: std::fs::read(synth_root.join("sign_to_prediction_index_map.json")).unwrap(),
            path: place("labels").join("map.json"),
            read: Box::new(|| {
                data::index::read_label_map(&fuzz.join("labels/map.json")).map(|_| ()).map_err(|e| text(&e))
            }),
        },
        Target {
            name: "model.json",
            valid: std::fs::read(run_dir.join("model/model.json")).unwrap(),
            path: bundle_dir.join("model.json"),
            read: Box::new(|| {
                bundle::load_bundle::<device::Backend>(&bundle_dir, &dev).map(|_| ()).map_err(|e| text(&e))
            }),
        },
        Target {
            name: "model.mpk",
            valid: std::fs::read(run_dir.join("model/model.mpk")).unwrap(),
            path: place("weights").join("model.mpk"),
            read: Box::new(|| {
                let model = card.model.init::<device::Backend>(card.input_features, card.labels.len(), &dev);
                bundle::weights::load_weights(model, &fuzz.join("weights"), &dev).map(|_| ()).map_err(|e| text(&e))
            }),
        },
        Target {
            name: "optimizer state (optim.mpk)",
            valid: std::fs::read(last_checkpoint.join(bundle::layout::OPTIM_FILE)).unwrap(),
            path: optim_file.clone(),
            read: Box::new(|| {
                let model = cfg.model.init::<trainer::TrainBackend>(card.input_features, card.labels.len(), &dev);
                let optim = trainer::optim::Optim::new(&cfg.optimizer);
                optim.load(&optim_file, &model, &dev).map(|_| ()).map_err(|e| text(&e))
            }),
        },
        Target {
            name: "checkpoint state.json",
            valid: std::fs::read(ckpt.join("state.json")).unwrap(),
            path: ckpt.join("state.json"),
            read: Box::new(|| trainer::checkpoint::read_state(&ckpt).map(|_| ()).map_err(|e| text(&e))),
        },
        Target {
            name: "config TOML",
            valid: std::fs::read(run_dir.join("config.toml")).unwrap(),
            path: cfg_path.clone(),
            read: Box::new(|| {
                let mut b = ConfigBuilder::new();
                b.add_file(&cfg_path).map_err(|e| text(&e))?;
                b.build().map(|_| ()).map_err(|e| text(&e))
            }),
        },
    ];

    // The interop formats: files written by pose-format and numpy, our fingerspelling writer's and
    // the run's TensorBoard event file (live JSON frames are fuzzed in `infer::live`).
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/tests/fixtures");
    let pose = place("pose").join("seq.pose");
    let npz = place("npz").join("seq.npz");
    let wide = place("fingerspell").join("seq.parquet");
    let one = data::islr::read_parquet(&find_file(&synth_root, ".parquet")).unwrap();
    let mut one_frame = one.clone();
    one_frame.retain_frames(&(0..one.frames()).map(|f| f == 0).collect::<Vec<_>>());
    data::fingerspell::write_file(&wide, &[(5, &one_frame)], data::islr::Codec::Zstd).unwrap();
    let wide_valid = std::fs::read(&wide).unwrap();
    let tb = place("tensorboard").join("events.out.tfevents.1");
    let tb_valid = std::fs::read(&trainer::tensorboard::event_files(&run_dir)[0]).unwrap();
    let openpose = vec!["pose_keypoints_2d".to_string(), "hand_left_keypoints_2d".to_string()];
    let interop = vec![
        Target {
            name: ".pose (pose-format)",
            valid: std::fs::read(fixtures.join("openpose.pose")).unwrap(),
            path: pose.clone(),
            read: Box::new(|| data::pose::read_pose_sequence(&pose, &openpose).map(|_| ()).map_err(|e| text(&e))),
        },
        Target {
            name: ".npz (numpy)",
            valid: std::fs::read(fixtures.join("archive.npz")).unwrap(),
            path: npz.clone(),
            read: Box::new(|| data::npy::read_npz(&npz).map(|_| ()).map_err(|e| text(&e))),
        },
        Target {
            name: "fingerspelling parquet",
            valid: wide_valid,
            path: wide.clone(),
            read: Box::new(|| data::fingerspell::read_file(&wide).map(|_| ()).map_err(|e| text(&e))),
        },
        Target {
            name: "TensorBoard events",
            valid: tb_valid,
            path: tb.clone(),
            read: Box::new(|| trainer::tensorboard::read_events(&tb).map(|_| ()).map_err(|e| text(&e))),
        },
    ];
    let targets: Vec<Target> = targets.into_iter().chain(interop).chain(pytorch_targets(&place("pytorch"))).collect();

    // A longer campaign, or other inputs:
    // SIGNFLOW_FUZZ_INPUTS=20000 SIGNFLOW_FUZZ_SEED=7 cargo test --release -p trainer fuzz_formats
    let setting = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let per_format = setting("SIGNFLOW_FUZZ_INPUTS").unwrap_or(500) as usize;
    let seed = setting("SIGNFLOW_FUZZ_SEED").unwrap_or(0x5157_2026);
    let mut failures = Vec::new();
    let mut report = Vec::new();
    // Readers that build models (on the CPU) draw from its generator; other tests' CPU runs must
    // not see that.
    let _turn = trainer::turn(trainer::Streams::HOST);
    for (t, target) in targets.iter().enumerate() {
        // The valid file reads, so the mutations below are what the errors are about.
        std::fs::write(&target.path, &target.valid).unwrap();
        assert_eq!((target.read)(), Ok(()), "{}: the valid file must read", target.name);
        let mut m = testkit::mutate::Mutator::new(seed + t as u64);
        let (mut errors, mut slowest, mut largest) = (0, Duration::ZERO, 0);
        for i in 0..per_format {
            let input = m.mutate(&target.valid);
            std::fs::write(&target.path, &input).unwrap();
            alloc_watch::LARGEST.store(0, std::sync::atomic::Ordering::Relaxed);
            let start = Instant::now();
            alloc_watch::ON.with(|on| on.set(true));
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (target.read)()));
            alloc_watch::ON.with(|on| on.set(false));
            let (took, asked) = (start.elapsed(), alloc_watch::LARGEST.load(std::sync::atomic::Ordering::Relaxed));
            (slowest, largest) = (slowest.max(took), largest.max(asked));
            let mut wrong = Vec::new();
            match outcome {
                Ok(Ok(())) => {}
                Ok(Err(e)) if e.trim().is_empty() => wrong.push("an empty error message".to_string()),
                Ok(Err(_)) => errors += 1,
                Err(p) => wrong.push(format!("panic {}", trainer::fault::panic_message(&*p))),
            }
            if took > Duration::from_secs(5) {
                wrong.push(format!("took {took:?}"));
            }
            if asked >= 256 << 20 {
                wrong.push(format!("asked for {asked} bytes at once"));
            }
            if !wrong.is_empty() {
                failures.push(format!(
                    "{} (seed {}, input {i}, kept as {}): {}",
                    target.name,
                    seed + t as u64,
                    keep_failing_input(target.name, i, &input).display(),
                    wrong.join("; ")
                ));
            }
        }
        // The valid file back: targets may share a dataset.
        std::fs::write(&target.path, &target.valid).unwrap();
        report.push(format!(
            "{}: {per_format} inputs, {errors} errors, slowest {:.1} ms, largest allocation {:.1} MiB",
            target.name,
            slowest.as_secs_f64() * 1e3,
            largest as f64 / 1048576.0
        ));
        assert!(errors > per_format / 10, "{}: only {errors} of {per_format} inputs were refused", target.name);
    }
    println!("{}", report.join("\n"));
    assert!(failures.is_empty(), "{} inputs failed:\n{}", failures.len(), failures.join("\n"));
}

/// A copy of an input that failed [`fuzz_formats`], outside the test's temporary directory.
fn keep_failing_input(target: &str, i: usize, input: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join("signflow-fuzz-failures");
    std::fs::create_dir_all(&dir).unwrap();
    let name: String = target.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    let path = dir.join(format!("{name}-{i}"));
    std::fs::write(&path, input).unwrap();
    path
}

/// The smoke experiment as continuous recognition: CTC on built-in synthetic sentences of 2-3
/// of 5 signs by 4 signers (one held out).
fn ctc_smoke(tmp: &Path, sets: &[&str]) -> ExperimentConfig {
    let mut all = vec![
        "task=ctc",
        "synthetic.classes=5",
        "synthetic.signers=4",
        "synthetic.min_frames=8",
        "synthetic.max_frames=14",
        "sentences.per_signer=24",
        "sentences.max_signs=3",
        "preprocess.window=48",
        "model.dim=32",
        "model.ff_dim=64",
        "optimizer.lr=0.01",
        "training.epochs=40",
        "training.batch_size=8",
        "training.label_smoothing=0",
        "training.early_stopping.metric=valid_cer",
        "checkpoint.every_steps=4",
    ];
    all.extend_from_slice(sets);
    smoke(tmp, &all)
}

/// A small ASL Fingerspelling layout: `train.csv` with phrases, the character map, and wide
/// parquet files of several sequences each (every phrase's letters are synthetic signs, one
/// after another, a letter's sign being its class in the generator).
fn write_fingerspelling(root: &Path) -> Vec<String> {
    let synth = data::synth::SynthConfig { min_frames: 6, max_frames: 8, ..Default::default() };
    let chars = " abc";
    let map: Vec<String> = chars.chars().enumerate().map(|(i, c)| format!("\"{c}\": {i}")).collect();
    std::fs::create_dir_all(root).unwrap();
    std::fs::write(root.join("character_to_prediction_index.json"), format!("{{{}}}", map.join(", "))).unwrap();
    let words = ["cab", "ab", "bca", "c", "ba"];
    let mut csv = String::from("path,file_id,sequence_id,participant_id,phrase\n");
    for participant in 0..4usize {
        let mut sequences = Vec::new();
        for k in 0..12usize {
            let phrase = match k % 3 {
                0 => words[k % 5].to_string(),
                1 => format!("{} {}", words[k % 5], words[(k + 2) % 5]),
                _ => format!("{} {}", words[(k + 1) % 5], words[k % 5]),
            };
            let mut seq = data::LandmarkSequence::empty(0, data::layout::NUM_LANDMARKS);
            for (j, c) in phrase.chars().enumerate() {
                let part = data::synth::generate_sequence(&synth, chars.find(c).unwrap(), participant, k * 16 + j);
                seq.xyz.extend_from_slice(&part.xyz);
            }
            seq.frame_ids = (0..(seq.xyz.len() / (3 * data::layout::NUM_LANDMARKS)) as i32).collect();
            let id = (participant * 100 + k) as i64;
            csv += &format!("{participant}.parquet,{participant},{id},{},{phrase}\n", 1000 + participant);
            sequences.push((id, seq));
        }
        let refs: Vec<(i64, &data::LandmarkSequence)> = sequences.iter().map(|(id, s)| (*id, s)).collect();
        data::fingerspell::write_file(&root.join(format!("{participant}.parquet")), &refs, data::islr::Codec::Zstd)
            .unwrap();
    }
    std::fs::write(root.join("train.csv"), csv).unwrap();
    words.iter().map(|w| w.to_string()).collect()
}

#[test]
fn ctc_trains_on_the_fingerspelling_layout_with_a_character_lexicon() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("fingerspelling");
    let words = write_fingerspelling(&root);
    let lexicon = tmp.path().join("words.txt");
    std::fs::write(&lexicon, words.join("\n")).unwrap();
    let sets = [
        format!("data.path=\"{}\"", root.display()),
        format!("ctc.lexicon=\"{}\"", lexicon.display()),
        "training.epochs=3".to_string(),
        "preprocess.window=64".to_string(),
    ];
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    let out =
        run(ctc_smoke(tmp.path(), &sets), RunOptions { run_dir: Some(tmp.path().join("run")), ..Default::default() })
            .unwrap();
    let s = out.summary.unwrap();
    assert_eq!((s.task, s.classes, s.train_groups, s.valid_groups), (models::Task::Ctc, 5, 3, 1));
    let scores = s.last.unwrap().valid_sequences.expect("CTC validation scores");
    assert!((0.0..=1.0).contains(&scores.beam.sequence_accuracy) && scores.beam.cer.is_finite());
    let card = bundle::card::read_card(&out.run_dir.join("model")).unwrap();
    let ctc = card.ctc.unwrap();
    assert_eq!(ctc.unit, data::tokens::Unit::Character);
    assert_eq!(card.labels, ["<blank>", " ", "a", "b", "c"]);
    assert_eq!(ctc.lexicon, words);
    // A classification run on it is refused with what to set.
    let err = run(smoke(tmp.path(), &[sets[0]]), RunOptions::default()).unwrap_err().to_string();
    assert!(err.contains("task = \"ctc\""), "{err}");
}

/// Tests that take long (WGPU kernel compilation, whole training runs): `cargo test --workspace
/// --release` runs them, `cargo quick-test` skips them.
mod slow {
    use super::*;

    /// On WGPU the loop leaves step outcomes on the device and settles them once per log
    /// interval (here 5 steps): non-finite steps are still skipped on the device, reported at
    /// their own step, counted in a row and rolled back from, as the CPU does after each step.
    #[test]
    fn non_finite_steps_on_wgpu_are_read_late_but_handled_at_their_own_step() {
        if !wgpu_available() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let cfg = learnable(
            tmp.path(),
            &[
                "device.device=\"wgpu\"",
                "training.epochs=3",
                "training.log_every=5",
                "recovery.max_consecutive_bad=3",
                "recovery.snapshot_every=4",
            ],
        );
        let s = train_injected(tmp.path(), "late", cfg, &["nan_loss_steps=[3, 10, 11, 12]"]);
        assert_eq!((s.skipped_steps, s.rollbacks, s.lr_scale), (4, 1, 0.5));
        let ev = events(&tmp.path().join("late"));
        assert_eq!(kinds(&ev), ["skipped_step", "skipped_step", "skipped_step", "skipped_step", "rollback"]);
        let steps: Vec<_> = ev.iter().map(|e| e["step"].as_u64().unwrap()).collect();
        assert_eq!(steps, [3, 10, 11, 12, 12], "{ev:?}");
        assert!(ev[2]["detail"].as_str().unwrap().contains("2 bad in a row"), "{ev:?}");
        assert!(ev[4]["detail"].as_str().unwrap().contains("rolled back to the weights of step"), "{ev:?}");
        let last = s.last.unwrap();
        assert!(last.train_loss.is_finite() && last.valid_top1.is_some(), "{last:?}");
    }

    /// f16 on WGPU with outcomes read once per log interval: the loss scale follows every step on
    /// the device (an overflow at step 2 halves it for step 3 with nothing read), and the events
    /// the host writes when it reads them are the CPU's, which reads after each step.
    #[test]
    fn f16_loss_scaling_on_wgpu_follows_each_step_without_reading_it() {
        if !wgpu_available() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let sets = [
            "training.precision=\"f16\"",
            "training.epochs=2",
            "training.log_every=5",
            "amp.init_scale=1024",
            "amp.growth_interval=4",
        ];
        let mut summaries = Vec::new();
        let mut details = Vec::new();
        for dev in ["cpu", "wgpu"] {
            let device = format!("device.device=\"{dev}\"");
            let all: Vec<&str> = sets.iter().copied().chain([device.as_str()]).collect();
            let s = train_injected(tmp.path(), dev, learnable(tmp.path(), &all), &["inf_grad_steps=[2]"]);
            let ev = events(&tmp.path().join(dev));
            details.push(
                ev.iter()
                    .map(|e| format!("{} {} {}", e["step"], e["kind"], e["detail"].as_str().unwrap_or("")))
                    .collect::<Vec<_>>(),
            );
            summaries.push((s.skipped_steps, s.rollbacks, s.loss_scale_backoffs, s.loss_scale));
        }
        eprintln!("{details:?}\n{summaries:?}");
        assert_eq!(details[0], details[1]);
        assert_eq!(summaries[0], summaries[1]);
        assert!(details[1][0].contains("loss_scale_backoff") && details[1][0].contains("1024 -> 512"), "{details:?}");
        assert!(details[1].iter().any(|d| d.contains("512 -> 1024")), "{details:?}");
    }

    /// A CPU peer and a WGPU (llvmpipe) peer: measured balance gives each a share of the batch in
    /// proportion to its measured samples/s, and the run learns.
    #[test]
    fn cpu_and_wgpu_peers_share_the_batch_by_measured_speed() {
        if !wgpu_available() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let cfg = learnable(
            tmp.path(),
            &[
                "training.epochs=10",
                "training.batch_size=12",
                "training.log_every=1",
                "distributed.devices=[\"cpu\", \"wgpu\"]",
                "distributed.balance=\"measured\"",
                "distributed.rebalance_every=10",
                "distributed.timeout_s=240",
            ],
        );
        let out = run(cfg, RunOptions { run_dir: Some(tmp.path().join("mixed")), ..Default::default() }).unwrap();
        let s = out.summary.unwrap();
        let g = s.distributed.as_ref().unwrap();
        assert!(g.rebalances >= 2, "{g:?}");
        let speeds: Vec<f64> = g.peers.iter().map(|p| p.samples_per_s.unwrap()).collect();
        let rows: Vec<usize> = g.peers.iter().map(|p| p.rows).collect();
        let total: f64 = speeds.iter().sum();
        let batch = 12.0;
        eprintln!("cpu + wgpu peers: speeds {speeds:?} samples/s -> rows {rows:?} of {batch}");
        // Within 15% of the speed share, or one row (the rounding of a 12-row batch).
        for (sp, r) in speeds.iter().zip(&rows) {
            let (want, got) = (sp / total, *r as f64 / batch);
            assert!((got - want).abs() <= (0.15 * want).max(1.0 / batch), "share {got} for a speed share {want}");
        }
        let ev = events(&out.run_dir);
        let rebalance: Vec<&serde_json::Value> = ev.iter().filter(|e| e["kind"] == "rebalance").collect();
        assert!(!rebalance.is_empty() && rebalance[0]["detail"].as_str().unwrap().contains("samples/s"), "{ev:?}");
        let (first, last) = first_and_last_loss(&out.run_dir, 5);
        assert!(last < 0.8 * first, "loss {first} -> {last}");
    }

    /// The default conv-transformer trains on WGPU (llvmpipe in CI) in f32 with `precision = auto`
    /// (which says what it chose and why), survives an out-of-memory from its step checkpoint (every
    /// `checkpoint.gpu_every_steps` on a GPU), reports peak memory per epoch and empties the cache;
    /// then in f16 with loss scaling. The loss falls in both.
    #[test]
    fn default_model_trains_on_wgpu_in_f32_and_f16_with_memory_figures_and_oom_recovery() {
        let tmp = tempfile::tempdir().unwrap();
        let sets = [
            "training.epochs=2",
            "augment.enabled=false",
            "schedule.warmup_epochs=0.25",
            "training.precision=\"auto\"",
            "checkpoint.gpu_every_steps=4",
            "training.empty_cache_interval=5",
        ];
        let Some(cfg) = wgpu_default(tmp.path(), &sets) else { return };
        let t0 = Instant::now();
        let s = train_injected(tmp.path(), "wgpu", cfg, &["oom_at_steps=[6]"]);
        let run_dir = tmp.path().join("wgpu");
        let (first, last) = first_and_last_loss(&run_dir, 4);
        eprintln!(
            "wgpu f32: {} steps in {:.0} s, loss {first:.3} -> {last:.3}, {:?}",
            s.steps,
            t0.elapsed().as_secs_f64(),
            s.peak_memory_mib
        );
        assert_eq!(s.steps, 18);
        assert!(last < first, "f32 loss did not fall: {first} -> {last}");
        assert_eq!(s.precision, "f32");
        assert!(
            s.precision_reason.contains("auto") && s.precision_reason.contains("software adapter"),
            "{}",
            s.precision_reason
        );
        assert_eq!(s.device_faults.len(), 1);
        assert_eq!((s.device_faults[0].step, s.device_faults[0].resumed_from_step), (6, 4));
        assert_eq!((s.batch_size, s.accumulation_steps), (4, 2));
        let rows = trainer::metrics::read_rows(&run_dir.join("metrics.csv")).unwrap();
        let epochs: Vec<_> = rows.iter().filter(|r| r.kind == "epoch").collect();
        assert_eq!(epochs.len(), 2);
        for e in &epochs {
            let (used, reserved) = (e.mem_in_use_mib.unwrap(), e.mem_reserved_mib.unwrap());
            assert!(used > 0.0 && used <= reserved, "epoch {}: {used} / {reserved} MiB", e.epoch);
        }
        let [used, reserved] = s.peak_memory_mib.expect("peak memory on a GPU backend");
        assert!(used > 0.0 && used <= reserved);
        let mem: Vec<_> = rows.iter().filter(|r| r.kind == "memory").map(|r| r.step).collect();
        assert_eq!(mem, [5, 10, 15], "cache emptied every 5 steps (step 5 ran before the fault and again after)");
        let ev = kinds(&events(&run_dir));
        assert!(ev.contains(&"device_fault".to_string()), "{ev:?}");

        let f16 =
            ["training.epochs=2", "augment.enabled=false", "schedule.warmup_epochs=0.25", "training.precision=\"f16\""];
        let s = train_in(tmp.path(), "wgpu-f16", wgpu_default(tmp.path(), &f16).unwrap());
        let (first, last) = first_and_last_loss(&tmp.path().join("wgpu-f16"), 4);
        eprintln!("wgpu f16: {} steps, loss {first:.3} -> {last:.3}, loss scale {:?}", s.steps, s.loss_scale);
        assert_eq!(s.precision, "f16");
        assert!(s.loss_scale.is_some_and(|v| v >= 1.0), "loss scaling active: {:?}", s.loss_scale);
        assert!(last < first, "f16 loss did not fall: {first} -> {last}");

        // Continuous recognition on WGPU: per-frame head on the device, CTC loss from the host copy
        // of its log-probabilities, gradient back to the device; validation decodes both ways.
        let ctc = ctc_smoke(tmp.path(), &["device.device=\"wgpu\"", "training.epochs=3", "training.log_every=1"]);
        let s = train_in(tmp.path(), "wgpu-ctc", ctc);
        let (first, last) = first_and_last_loss(&tmp.path().join("wgpu-ctc"), 4);
        let scores = s.last.as_ref().and_then(|r| r.valid_sequences).expect("CTC validation scores");
        eprintln!("wgpu CTC: {} steps, loss {first:.3} -> {last:.3}, valid {scores:?}", s.steps);
        assert!(
            s.device.to_lowercase().contains("llvmpipe") || s.device.to_lowercase().contains("wgpu"),
            "{}",
            s.device
        );
        assert!(last < 0.7 * first, "CTC loss did not fall on WGPU: {first} -> {last}");
        assert!(scores.beam.cer.is_finite() && scores.greedy.cer.is_finite());
    }

    /// `device.choose = "fastest"` times real training steps of the run's model on the CPU and on
    /// the WGPU adapter (llvmpipe here, allowed explicitly) and takes the faster, with the figures in
    /// the reason: on a software adapter the CPU wins for this small model.
    #[test]
    fn fastest_device_choice_times_each_device_and_says_why() {
        if !wgpu_available() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let sets = [
            "device.device=\"auto\"",
            "device.choose=\"fastest\"",
            "device.allow_software_wgpu=true",
            "training.epochs=1",
        ];
        let s = train_in(tmp.path(), "fastest", smoke(tmp.path(), &sets));
        eprintln!("chosen: {} ({})", s.device, s.device_reason);
        assert!(s.device_reason.starts_with("fastest of "), "{}", s.device_reason);
        assert_eq!(s.device_reason.matches("samples/s").count(), 2, "{}", s.device_reason);
        assert!(s.device_reason.contains("llvmpipe") || s.device_reason.contains("wgpu"), "{}", s.device_reason);
        assert!(s.device.contains("flex"), "the CPU backend should win on a software adapter: {}", s.device);
        // Only with device = "auto".
        let err = smoke_builder(tmp.path(), &["device.choose=\"fastest\""]).build().unwrap_err().to_string();
        assert!(err.contains("device.choose") && err.contains("auto"), "{err}");
    }

    /// The GPU batch-size search from a library caller (this test binary is not the trainer): it
    /// finds the trainer binary for its child-process probes, and picks a size below the point where
    /// the probes run out of memory (injected above micro-batch 6 on WGPU).
    #[test]
    fn gpu_batch_search_probes_in_child_processes_and_stays_below_the_failure_point() {
        if !wgpu_available() {
            return;
        }
        let exe = trainer::tune::probe_program().expect("the trainer binary next to the test binary");
        assert_eq!(exe.file_stem().unwrap(), "trainer");
        let tmp = tempfile::tempdir().unwrap();
        let cfg =
            smoke(tmp.path(), &["device.device=\"wgpu\"", "training.batch_size=\"auto\"", "training.max_batch_size=8"]);
        let r = trainer::tune::tune_batch(&cfg, &Faults::parse(&["oom_fits_micro_batch=6"]).unwrap()).unwrap();
        eprintln!("{}", r.render());
        let tried: Vec<(usize, bool)> = r.rows.iter().map(|row| (row.batch, row.fits)).collect();
        assert_eq!(tried, [(4, true), (8, false), (6, true), (7, false)]);
        assert!(r.rows[1].note.contains("out of memory"), "{:?}", r.rows[1]);
        assert!(r.rows[0].step_ms.is_some_and(|ms| ms > 0.0), "child probes time real steps");
        assert!(r.batch_size <= 6, "picked {} at or above the failure point 7", r.batch_size);
    }

    #[test]
    fn ctc_learns_sentences_and_keeps_resume_accumulation_half_precision_and_nan_recovery() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = ctc_smoke(tmp.path(), &[]);
        let full =
            run(cfg.clone(), RunOptions { run_dir: Some(tmp.path().join("full")), ..Default::default() }).unwrap();
        let s = full.summary.unwrap();
        assert_eq!(s.task, models::Task::Ctc);
        assert_eq!((s.train_groups, s.valid_groups), (3, 1));
        assert_eq!(s.classes, 6, "blank + 5 glosses");
        let rows = trainer::metrics::read_rows(&full.run_dir.join("metrics.csv")).unwrap();
        let epochs: Vec<&trainer::metrics::Row> = rows.iter().filter(|r| r.kind == "epoch").collect();
        let (first, last) = (epochs[0], epochs[epochs.len() - 1]);
        eprintln!(
            "CTC smoke: train loss {:.3} -> {:.3}, valid CER {:.3} -> {:.3} (greedy {:.3})",
            first.loss.unwrap(),
            last.loss.unwrap(),
            first.valid_cer.unwrap(),
            last.valid_cer.unwrap(),
            last.valid_greedy_cer.unwrap()
        );
        assert!(last.loss.unwrap() < 0.5 * first.loss.unwrap(), "the CTC loss should fall: {first:?} -> {last:?}");
        let scores = s.last.as_ref().unwrap().valid_sequences.unwrap();
        assert!(scores.beam.cer < 0.3, "held-out signer CER {} (an empty output scores 1.0)", scores.beam.cer);
        assert!(
            scores.beam.cer <= scores.greedy.cer + 1e-12,
            "beam {:?} worse than greedy {:?}",
            scores.beam,
            scores.greedy
        );
        assert!((scores.beam.nld - (1.0 - scores.beam.cer)).abs() < 1e-12);
        assert_eq!(s.best.as_ref().unwrap().metric, "valid_cer");
        let card = bundle::card::read_card(&full.run_dir.join("model")).unwrap();
        assert_eq!(card.task, models::Task::Ctc);
        let ctc = card.ctc.unwrap();
        assert_eq!((ctc.unit, &ctc.decode), (data::tokens::Unit::Gloss, &cfg.ctc));
        assert_eq!(card.labels[0], "<blank>");
        assert!(ctc.lexicon.is_empty());

        // A lexicon file is read against the vocabulary: a word it cannot spell is refused naming
        // the file and line; a lexicon on a classifier is a config error.
        let (words, bad) = (tmp.path().join("words.txt"), tmp.path().join("bad.txt"));
        std::fs::write(&words, format!("# every gloss but the last\n{}\n", card.labels[1..5].join(" "))).unwrap();
        std::fs::write(&bad, format!("{}\n\nsign_99\n", card.labels[1])).unwrap();
        let lexicon_set = |p: &Path| format!("ctc.lexicon=\"{}\"", p.display());
        let err = run(ctc_smoke(tmp.path(), &[&lexicon_set(&bad)]), RunOptions::default()).unwrap_err().to_string();
        assert!(err.contains("ctc.lexicon") && err.contains("bad.txt:3: word `sign_99`"), "{err}");
        let err = smoke_builder(tmp.path(), &[&lexicon_set(&words)]).build().unwrap_err().to_string();
        assert!(err.contains("`ctc.lexicon`") && err.contains("task = \"ctc\""), "{err}");

        // Exact resume: interrupted after step 6 (checkpoint at step 4), resumed, same weights.
        let dir = tmp.path().join("resumed");
        run(cfg.clone(), injected(dir.clone(), &["interrupt_after_steps=6"])).unwrap();
        let resumed = run(cfg.clone(), RunOptions { run_dir: Some(dir.clone()), resume: true, ..Default::default() })
            .unwrap()
            .summary
            .unwrap();
        assert_eq!(resumed.resumed_from_step, Some(4));
        assert_eq!(max_abs_diff(&exported_weights(&full.run_dir), &exported_weights(&dir)), 0.0);
        assert_eq!(resumed.last.unwrap().valid_sequences, s.last.as_ref().unwrap().valid_sequences);

        // Accumulation: 2 x 4 averages to the gradient of one batch of 8 (no dropout, one epoch).
        let exact = ["training.epochs=1", "model.dropout=0", "augment.enabled=false"];
        let one = train_in(tmp.path(), "b8", ctc_smoke(tmp.path(), &exact));
        let mut accum_sets = exact.to_vec();
        accum_sets.extend(["training.batch_size=4", "training.accumulation_steps=2"]);
        let two = train_in(tmp.path(), "b4x2", ctc_smoke(tmp.path(), &accum_sets));
        assert_eq!(one.steps, two.steps);
        let mut small_sets = exact.to_vec();
        small_sets.push("training.batch_size=4");
        train_in(tmp.path(), "b4", ctc_smoke(tmp.path(), &small_sets));
        let w8 = exported_weights(&tmp.path().join("b8"));
        let same = max_abs_diff(&w8, &exported_weights(&tmp.path().join("b4x2")));
        let different = max_abs_diff(&w8, &exported_weights(&tmp.path().join("b4")));
        eprintln!("CTC accumulation: max |dw| {same:e} with, {different:e} without");
        assert!(same < 1e-3 && different > 20.0 * same, "max |dw| {same} with accumulation, {different} without");
        // Two data-parallel CPU peers (4 rows each) take the step of one device on the batch of 8.
        let mut group_sets = exact.to_vec();
        group_sets.push("distributed.devices=[\"cpu\", \"cpu\"]");
        train_in(tmp.path(), "peers", ctc_smoke(tmp.path(), &group_sets));
        let peers = max_abs_diff(&w8, &exported_weights(&tmp.path().join("peers")));
        eprintln!("CTC, 2 CPU peers vs 1 device: max |dw| {peers:e}");
        assert!(peers < 1e-3 && different > 20.0 * peers, "2 peers differ from one device: max |dw| {peers}");

        // f16 compute with f32 master weights learns like f32; an injected NaN is skipped.
        // (This run also keeps beam search to a lexicon of four of the five glosses: the card
        // carries the words and the file they came from.)
        let half_sets = ["training.precision=f16", &lexicon_set(&words)];
        let half = train_in(tmp.path(), "f16", ctc_smoke(tmp.path(), &half_sets));
        assert_eq!((half.precision.as_str(), half.master_dtypes.as_slice()), ("f16", ["F32".to_string()].as_slice()));
        let half_cer = half.last.unwrap().valid_sequences.unwrap().beam.cer;
        assert!(half_cer < 0.5, "f16 CER {half_cer}");
        let ctc = bundle::card::read_card(&tmp.path().join("f16/model")).unwrap().ctc.unwrap();
        assert_eq!(
            (ctc.lexicon.as_slice(), ctc.decode.lexicon.as_deref()),
            (&card.labels[1..5], Some(words.as_path()))
        );
        let nan = train_injected(tmp.path(), "nan", ctc_smoke(tmp.path(), &[]), &["nan_loss_steps=[5]"]);
        assert_eq!((nan.skipped_steps, nan.rollbacks), (1, 0));
        assert!(nan.last.unwrap().valid_sequences.unwrap().beam.cer < 0.5);

        // Cross-validation by signer reports the CER of every fold.
        let cv = trainer::cv::run_cv(&ctc_smoke(tmp.path(), &[]), 2, Some(tmp.path().join("cv"))).unwrap();
        eprintln!("{}", cv.render());
        assert_eq!(cv.valid_cer.map(|c| c.n), Some(2));
        // An untrained model scores about 1 (measured here: 0.144 and 0.086).
        assert!(cv.per_fold.iter().all(|f| f.valid_groups == 2 && f.valid_cer.is_some_and(|c| c < 0.4)), "{cv:?}");
    }

    #[test]
    fn two_processes_through_the_orchestrator_match_one_device() {
        let tmp = tempfile::tempdir().unwrap();
        // SGD: linear in the gradient, so the comparison sees only float rounding (AdamW magnifies
        // it, see two_cpu_peers_reach_the_weights_of_one_device).
        let base = [
            "training.epochs=2",
            "training.batch_size=8",
            "checkpoint.every_steps=2",
            "optimizer.kind=sgd",
            "optimizer.lr=0.05",
            "optimizer.momentum=0.9",
        ];
        let one =
            run(smoke(tmp.path(), &base), RunOptions { run_dir: Some(tmp.path().join("one")), ..Default::default() })
                .unwrap();
        let expected = exported_weights(&one.run_dir);
        let orch = free_port();
        let node_cfg = |rank: u32, data_port: u16, extra: &[&str]| {
            let mut sets: Vec<String> = base.iter().map(|s| s.to_string()).collect();
            sets.extend([
                "distributed.nodes=2".to_string(),
                format!("distributed.node_rank={rank}"),
                format!("distributed.orchestrator=\"127.0.0.1:{orch}\""),
                format!("distributed.data_port={data_port}"),
                "distributed.timeout_s=15".to_string(),
            ]);
            sets.extend(extra.iter().map(|s| s.to_string()));
            let refs: Vec<&str> = sets.iter().map(String::as_str).collect();
            write(tmp.path(), &format!("node{rank}.toml"), &smoke(tmp.path(), &refs).to_toml())
        };
        // Every process of the group holds the secret; the orchestrator and the data servers
        // listen on 127.0.0.1 only (the default node_address and --bind).
        let trainer = |args: &[&str]| {
            let mut c = Command::new(env!("CARGO_BIN_EXE_trainer"));
            c.args(args).stdout(Stdio::null()).stderr(Stdio::piped()).env(SECRET_ENV, "the group's secret, 32 bytes..");
            c
        };
        let mut procs =
            Procs(vec![trainer(&["orchestrator", "--port", &orch.to_string(), "--nodes", "2"]).spawn().unwrap()]);
        // node_cfg writes node<rank>.toml: this one is moved aside before node 1's own is written.
        let wrong = tmp.path().join("node1-of-3.toml");
        std::fs::rename(node_cfg(1, free_port(), &["distributed.nodes=3"]), &wrong).unwrap();
        let (c0, c1) = (node_cfg(0, free_port(), &[]), node_cfg(1, free_port(), &[]));
        // Without a secret a node refuses to start; with another secret the orchestrator refuses
        // it (and says so), before it could register and block the real group.
        let out = trainer(&["--config", &c1.display().to_string()]).env_remove(SECRET_ENV).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("needs a shared secret"), "{stderr}");
        let t0 = Instant::now();
        let out = trainer(&["--config", &c1.display().to_string()])
            .env(SECRET_ENV, "someone else's secret!")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(stderr.contains("does not accept this group's secret"), "{stderr}");
        eprintln!("a node with another secret stopped after {:?}", t0.elapsed());
        // A node of the group's secret declaring another group size is refused at registration,
        // and the real group still forms after it.
        let out = trainer(&["--config", &wrong.display().to_string()]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(stderr.contains("serves groups of another size"), "{stderr}");
        let run_dir = tmp.path().join("two");
        let node1 = trainer(&["--config", &c1.display().to_string()]).spawn().unwrap();
        procs.0.push(node1);
        let out = trainer(&["--config", &c0.display().to_string(), "--out", &run_dir.display().to_string()])
            .output()
            .unwrap();
        assert!(out.status.success(), "node 0: {}", String::from_utf8_lossy(&out.stderr));
        let node1 = procs.0.pop().unwrap().wait_with_output().unwrap();
        assert!(node1.status.success(), "node 1: {}", String::from_utf8_lossy(&node1.stderr));
        let d = max_abs_diff(&exported_weights(&run_dir), &expected);
        eprintln!("2 processes (1 CPU peer each) vs 1 device: max |dw| {d:e}");
        assert!(d <= 1e-5, "max |dw| {d}");
        let g = summary_json(&run_dir)["distributed"].clone();
        assert_eq!((g["peers"][0]["node"].as_u64(), g["peers"][1]["node"].as_u64()), (Some(0), Some(1)), "{g}");

        // A killed node: node 0 stops within the timeout naming node 1; --resume with a new node 1
        // finishes the run.
        // 300 steps, so that the kill lands in the middle of the run.
        let long = ["training.epochs=100"];
        let (c0, c1) = (node_cfg(0, free_port(), &long), node_cfg(1, free_port(), &long));
        let run_dir = tmp.path().join("killed");
        let mut node1 = trainer(&["--config", &c1.display().to_string()]).spawn().unwrap();
        let node0 =
            trainer(&["--config", &c0.display().to_string(), "--out", &run_dir.display().to_string()]).spawn().unwrap();
        wait_for("a checkpoint of the group", Duration::from_secs(120), || {
            !trainer::checkpoint::list(&run_dir).is_empty()
        });
        node1.kill().unwrap();
        node1.wait().unwrap();
        let t0 = Instant::now();
        let out = node0.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{stderr}");
        assert!(stderr.contains("node 1"), "{stderr}");
        assert!(t0.elapsed() < Duration::from_secs(40), "node 0 took {:?} to stop", t0.elapsed());
        // The orchestrator keeps the dead session's registrations: a new group needs a new one.
        let mut old = procs.0.remove(0);
        let _ = old.kill();
        let log = String::from_utf8_lossy(&old.wait_with_output().unwrap().stderr).to_string();
        assert!(log.contains("refused a connection from 127.0.0.1:") && log.contains("secret"), "orchestrator: {log}");
        procs.0.insert(0, trainer(&["orchestrator", "--port", &orch.to_string(), "--nodes", "2"]).spawn().unwrap());
        let node1 = trainer(&["--config", &c1.display().to_string()]).spawn().unwrap();
        procs.0.push(node1);
        let out = trainer(&["--resume", &run_dir.display().to_string()]).output().unwrap();
        assert!(out.status.success(), "resume: {}", String::from_utf8_lossy(&out.stderr));
        let summary = summary_json(&run_dir);
        assert_eq!(summary["steps"].as_u64(), Some(300));
        assert!(summary["resumed_from_step"].as_u64().unwrap() >= 2, "{summary}");
    }
}

/// The trainer's code map holds: its modules form no cycle (`crate::a` used in `b` and `b` in
/// `a`, through any chain; `dist`'s files count one by one) and no function runs past 85 lines.
/// Doc comments and `mod tests` are not counted.
#[test]
fn trainer_modules_form_no_cycle_and_functions_stay_short() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files: Vec<(String, String)> = Vec::new();
    for dir in [src.clone(), src.join("dist")] {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(stem) = name.strip_suffix(".rs") else { continue };
            let module = match (dir == src, stem) {
                (true, "lib" | "main") => continue,
                (true, m) => m.to_string(),
                (false, "mod") => "dist".to_string(),
                (false, m) => format!("dist/{m}"),
            };
            let text = std::fs::read_to_string(e.path()).unwrap();
            let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
            let code: Vec<&str> = code.lines().filter(|l| !l.trim_start().starts_with("//")).collect();
            files.push((module, code.join("\n")));
        }
    }
    let names: Vec<&str> = files.iter().map(|(m, _)| m.as_str()).collect();
    let edges = |module: &str, code: &str| -> Vec<String> {
        let mut out = Vec::new();
        // The first two path segments after `prefix`, one level of `{a::b, c}` expanded.
        let paths = |prefix: &str| -> Vec<(String, String)> {
            let word =
                |s: &str| -> String { s.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect() };
            let mut found = Vec::new();
            for part in code.split(prefix).skip(1) {
                let items: Vec<&str> = match part.strip_prefix('{') {
                    Some(list) => list.split('}').next().unwrap_or("").split(',').collect(),
                    None => vec![part],
                };
                for item in items {
                    let mut segments = item.trim().split("::");
                    found.push((word(segments.next().unwrap_or("")), word(segments.next().unwrap_or(""))));
                }
            }
            found
        };
        let mut refs = paths("crate::");
        if module.starts_with("dist") {
            for (w, _) in paths("super::").into_iter().filter(|(w, _)| !w.is_empty()) {
                refs.push(("dist".into(), w));
            }
            for line in code.lines() {
                let rest =
                    line.trim_start().strip_prefix("use ").or_else(|| line.trim_start().strip_prefix("pub use "));
                // `use link::...` in dist/mod.rs names a sibling file; `use serde::...` nothing of ours.
                if let Some(w) = rest.and_then(|r| r.split("::").next()) {
                    if names.contains(&format!("dist/{w}").as_str()) {
                        refs.push(("dist".into(), w.to_string()));
                    }
                }
            }
        }
        for (a, b) in refs {
            let target =
                if a == "dist" && names.contains(&format!("dist/{b}").as_str()) { format!("dist/{b}") } else { a };
            if names.contains(&target.as_str()) && target != module && !out.contains(&target) {
                out.push(target);
            }
        }
        out
    };
    let graph: Vec<(String, Vec<String>)> = files.iter().map(|(m, code)| (m.clone(), edges(m, code))).collect();
    assert!(graph.iter().any(|(m, e)| m == "train" && e.contains(&"step".to_string())), "the scan sees train -> step");
    // Depth-first search for a back edge; the path names the cycle.
    fn visit<'a>(
        m: &'a str,
        graph: &'a [(String, Vec<String>)],
        path: &mut Vec<&'a str>,
        done: &mut Vec<&'a str>,
    ) -> Option<String> {
        if let Some(i) = path.iter().position(|p| *p == m) {
            return Some(format!("{} -> {m}", path[i..].join(" -> ")));
        }
        if done.contains(&m) {
            return None;
        }
        path.push(m);
        let deps = graph.iter().find(|(n, _)| n == m).map(|(_, e)| e.as_slice()).unwrap_or_default();
        for d in deps {
            if let Some(cycle) = visit(d, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.push(m);
        None
    }
    let mut done = Vec::new();
    for (m, _) in &graph {
        if let Some(cycle) = visit(m, &graph, &mut Vec::new(), &mut done) {
            panic!("trainer modules form a cycle: {cycle}");
        }
    }
    for (module, code) in &files {
        let lines: Vec<&str> = code.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let t = line.trim_start();
            let is_fn = ["fn ", "pub fn ", "pub(crate) fn ", "pub(super) fn "].iter().any(|p| t.starts_with(p));
            if !is_fn || t.ends_with(';') {
                continue;
            }
            let indent = line.len() - t.len();
            let end = lines[i + 1..]
                .iter()
                .position(|l| l.len() - l.trim_start().len() == indent && l.trim_start().starts_with('}'))
                .map_or(lines.len(), |p| i + 1 + p);
            let len = end - i + 1;
            assert!(len <= 85, "{module}.rs: `{}` is {len} lines long", t.split('(').next().unwrap());
        }
    }
}

/// Files the current release wrote (`tests/fixtures/golden-v1`, made by
/// `scripts/golden-fixtures.sh`): the bundle loads and gives the logits `infer logits` gave; the
/// model card, the run's `config.toml` and every checkpoint's `state.json` read back and written
/// again are the same documents, so a field added, renamed or dropped fails here until the format
/// changes its version and a new fixture joins this one (which must keep loading); and the
/// interrupted run resumes to the finished run's result.
#[test]
fn golden_files_of_this_release_load_resume_and_hold_their_format() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden-v1");
    let finished = golden.join("finished");
    let json = |p: &Path| -> serde_json::Value { serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap() };

    let card = bundle::card::read_card(&finished.join("model")).unwrap();
    assert_eq!(card.format_version, bundle::MODEL_FORMAT_VERSION, "a new model format version needs its own fixture");
    // Written again as text (as the writer writes: f32 fields in their shortest form) and parsed.
    fn again<T: serde::Serialize>(v: &T) -> serde_json::Value {
        serde_json::from_str(&serde_json::to_string(v).unwrap()).unwrap()
    }
    assert_eq!(
        again(&card),
        json(&finished.join("model/model.json")),
        "model.json's fields changed: bump bundle::MODEL_FORMAT_VERSION and add a fixture"
    );
    for run in ["finished", "interrupted"] {
        let path = golden.join(run).join("config.toml");
        let cfg = ExperimentConfig::from_file(&path).unwrap();
        let mut text: toml::Value = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let written: toml::Value = toml::from_str(&cfg.to_toml()).unwrap();
        // Keys added to version 1 since the fixture was written, each with the default that
        // means what a file without it meant: the fixture reads with them and gains them. A key
        // added without a line here (or a renamed or dropped one) fails below.
        let added: [(Option<&str>, &str, toml::Value); 4] = [
            (None, "config_version", 1.into()),
            (Some("sentences"), "rest_prob", 0.0.into()),
            (Some("augment"), "crop_prob", 0.0.into()),
            (Some("augment"), "crop", toml::Value::Array(vec![0.7.into(), 1.0.into()])),
        ];
        assert_eq!(cfg.config_version, 1);
        for (section, key, value) in added {
            let table = text.as_table_mut().unwrap();
            let table = match section {
                Some(name) => table.get_mut(name).and_then(toml::Value::as_table_mut).unwrap(),
                None => table,
            };
            assert!(table.insert(key.into(), value).is_none(), "{run}/config.toml already has `{key}`");
        }
        assert_eq!(written, text, "{run}/config.toml no longer reads back as written");
        for (step, dir) in trainer::checkpoint::list(&golden.join(run)) {
            let state = trainer::checkpoint::read_state(&dir).unwrap();
            assert_eq!(state.step, step);
            assert_eq!(
                again(&state),
                json(&dir.join("state.json")),
                "{run}: the checkpoint state of step {step} no longer reads back as written"
            );
        }
    }

    // The bundle's weights give the writer's logits (tolerance: the eval graph against Burn's
    // forward, and another CPU's rounding).
    let dev = device::dispatch_device(&device::Target::Cpu).unwrap();
    let model = {
        let _turn = trainer::turn(trainer::Streams::HOST);
        bundle::load_bundle::<device::Backend>(&finished.join("model"), &dev).unwrap().1
    };
    let arrays = data::npy::read_npz_arrays(&golden.join("input.npz")).unwrap();
    let get = |name: &str| arrays.iter().find(|(n, _)| n == name).map(|(_, a)| a).unwrap();
    let (x, valid) = (get("x"), get("valid"));
    let [b, t, f] = x.shape[..] else { panic!("x: {:?}", x.shape) };
    let input = burn::tensor::Tensor::<device::Backend, 3>::from_data(
        burn::tensor::TensorData::new(x.data.clone(), [b, t, f]),
        &dev,
    );
    let pad: Vec<bool> = (0..b * t).map(|i| i % t >= valid.data[i / t] as usize).collect();
    let mask = burn::tensor::Tensor::<device::Backend, 2, burn::tensor::Bool>::from_data(
        burn::tensor::TensorData::new(pad, [b, t]),
        &dev,
    );
    let logits = model.forward(input, mask).into_data().to_vec::<f32>().unwrap();
    let expected = data::npy::decode(&std::fs::read(golden.join("logits.npy")).unwrap()).unwrap().data;
    assert_eq!(logits.len(), expected.len());
    let diff = max_abs_diff(&logits, &expected);
    assert!(diff < 1e-4, "the golden bundle's logits moved by {diff}");

    // The interrupted run continues from its last checkpoint to the finished run's figures.
    let tmp = tempfile::tempdir().unwrap();
    let saved = ExperimentConfig::from_file(&golden.join("interrupted/config.toml")).unwrap();
    data::synth::generate(&tmp.path().join("data"), &saved.synthetic, false).unwrap();
    let dir = tmp.path().join("interrupted");
    copy_dir(&golden.join("interrupted"), &dir);
    // Only the data's location moves (a resume allows that).
    let mut cfg = saved.clone();
    cfg.data.path = tmp.path().join("data").display().to_string();
    cfg.data.cache_dir = tmp.path().join("cache").display().to_string();
    let resumed =
        run(cfg, RunOptions { run_dir: Some(dir), resume: true, ..Default::default() }).unwrap().summary.unwrap();
    let done: serde_json::Value = json(&finished.join("summary.json"));
    assert_eq!(resumed.resumed_from_step, Some(6));
    assert_eq!(resumed.steps as u64, done["steps"].as_u64().unwrap());
    let (a, b) = (resumed.last.unwrap().valid_loss.unwrap(), done["last"]["valid_loss"].as_f64().unwrap());
    assert!((a - b).abs() < 1e-3, "resumed valid loss {a}, the finished run's {b}");
}
