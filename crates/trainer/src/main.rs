//! `trainer`: train sign-language models from config files.
//!
//! `cargo run --release -p trainer -- --device auto` trains the built-in default experiment on a
//! synthetic dataset (generated once). See `trainer --help`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use trainer::config::{ConfigBuilder, FlagOverride};
use trainer::inject::Faults;
use trainer::{RunOptions, TrainError};

/// Train SignFlow models. Config layers: built-in default -> --config FILE -> --set KEY=VALUE -> flags.
#[derive(Parser)]
#[command(name = "trainer", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    train: TrainArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Train (the default when no subcommand is given).
    Train(TrainArgs),
    /// Print the resolved config (all layers applied) as TOML and exit.
    Config(TrainArgs),
    /// Find the batch size "auto" would pick (prints the table; trains nothing).
    TuneBatch(TrainArgs),
    /// Internal: one child-process probe of a GPU batch size (see `tune-batch`).
    #[command(name = "__probe-batch", hide = true)]
    ProbeBatch {
        #[command(flatten)]
        layers: TrainArgs,
        #[arg(long)]
        probe_batch: usize,
    },
    /// Time training steps (forward, backward, optimizer) and inference of the configured model
    /// on random data; the Burn half of `benches/reference/compare.py`.
    Bench(BenchArgs),
    /// K-fold cross-validation by signer: one run per fold under --out (default
    /// <out_dir>/<name>-cv-<time>), then cv.json with the mean and spread. Re-run with the same
    /// --out to continue.
    Cv {
        #[command(flatten)]
        layers: TrainArgs,
        /// Number of folds (each signer is held out in exactly one).
        #[arg(long, default_value_t = 5)]
        folds: usize,
    },
    /// Run the global orchestrator that the machines of a multi-node data-parallel run meet
    /// through (`distributed.orchestrator = "HOST:PORT"`), until interrupted.
    Orchestrator {
        /// Port to listen on.
        #[arg(long)]
        port: u16,
        /// Nodes in the group (every node's distributed.nodes): a node that declares another
        /// count is refused, and cannot fix the count for the others.
        #[arg(long)]
        nodes: u32,
        /// Address to listen on: 127.0.0.1 when the whole group is on this machine, else this
        /// machine's address on the network the nodes share (0.0.0.0: every interface).
        #[arg(long, default_value = "127.0.0.1")]
        bind: String,
        /// File holding the group's shared secret (else SIGNFLOW_GROUP_SECRET), as in
        /// distributed.secret_file.
        #[arg(long, default_value = "")]
        secret_file: String,
        /// Accept nodes without a secret (a network where every machine is trusted).
        #[arg(long)]
        insecure: bool,
    },
    /// Write the `[synthetic]` dataset of the resolved config to a directory (ISLR layout).
    Generate {
        #[command(flatten)]
        layers: TrainArgs,
        /// Output directory.
        #[arg(long)]
        to: PathBuf,
    },
    /// Write continuous takes of the `[synthetic]` signs by signers the synthetic dataset does
    /// not have, each recording (`take-SIGNER-N.npy`) with its annotated signs
    /// (`take-SIGNER-N.events.csv`), for `infer eval-stream`.
    GenerateTakes {
        #[command(flatten)]
        layers: TrainArgs,
        /// Output directory.
        #[arg(long)]
        to: PathBuf,
        /// Unseen signers.
        #[arg(long, default_value_t = 2)]
        signers: usize,
        /// Takes per signer.
        #[arg(long, default_value_t = 5)]
        takes: usize,
        /// Signs per take.
        #[arg(long, default_value_t = data::takes::TakeConfig::default().signs)]
        signs: usize,
        /// Frames with the hands out of view between two signs (0: signs co-articulated into
        /// one another, no pause).
        #[arg(long, default_value_t = data::takes::TakeConfig::default().pause_frames)]
        pause_frames: usize,
    },
}

/// `trainer bench`: the shape of the random data and what to measure.
#[derive(Args)]
struct BenchArgs {
    #[command(flatten)]
    layers: TrainArgs,
    /// Reference model sizes (dim 192, 2 stages, kernel 17) instead of the config's `[model]`.
    #[arg(long)]
    reference: bool,
    /// Sequences per batch.
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// Frames per sequence.
    #[arg(long, default_value_t = 64)]
    frames: usize,
    /// Features per frame.
    #[arg(long, default_value_t = 469)]
    features: usize,
    /// Output classes.
    #[arg(long, default_value_t = 250)]
    classes: usize,
    /// Timed training steps (after 2 warm-up steps).
    #[arg(long, default_value_t = 10)]
    steps: usize,
    /// Timed batch-1 forward passes.
    #[arg(long, default_value_t = 100)]
    latency_runs: usize,
    /// Count the device work of a training step instead of timing (kernels launched and
    /// compiled, host waits); needs a WGPU or CUDA device.
    #[arg(long)]
    count: bool,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Args, Clone, Default)]
struct TrainArgs {
    /// Experiment file (TOML); repeatable, later files override earlier ones.
    #[arg(long = "config", value_name = "FILE")]
    configs: Vec<PathBuf>,
    /// Override one key, e.g. --set optimizer.lr=0.002 (repeatable; value is TOML).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// auto, cpu, cuda, cuda:N, wgpu, wgpu:N (sets device.device).
    #[arg(long)]
    device: Option<String>,
    /// Sets training.epochs.
    #[arg(long)]
    epochs: Option<i64>,
    /// Sets training.batch_size (the micro-batch): a number or "auto".
    #[arg(long)]
    batch_size: Option<String>,
    /// Sets training.precision: auto, f32, f16, bf16.
    #[arg(long)]
    precision: Option<String>,
    /// Time each step's phases (with device syncs) and print the table at the end.
    #[arg(long)]
    profile: bool,
    /// Sets training.seed.
    #[arg(long)]
    seed: Option<i64>,
    /// Run directory (default: <training.out_dir>/<name>-<UTC time>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Continue the run in RUN_DIR from its last complete checkpoint; its config.toml is the base layer.
    #[arg(long, value_name = "RUN_DIR")]
    resume: Option<PathBuf>,
    /// Data-parallel devices of this machine, comma-separated, e.g. cpu,cpu or cpu,wgpu or gpus
    /// (sets distributed.devices).
    #[arg(long, value_delimiter = ',')]
    devices: Option<Vec<String>>,
    /// equal, measured or fixed (sets distributed.balance).
    #[arg(long)]
    balance: Option<String>,
    /// Machines in the group (sets distributed.nodes).
    #[arg(long)]
    nodes: Option<i64>,
    /// This machine's index (sets distributed.node_rank).
    #[arg(long)]
    node_rank: Option<i64>,
    /// HOST:PORT of `trainer orchestrator` (sets distributed.orchestrator).
    #[arg(long)]
    orchestrator: Option<String>,
    /// Inject a failure to drill recovery, e.g. --inject 'oom_at_steps=[5]' (repeatable; keys of
    /// `trainer::inject::Faults`, values in TOML). Only in builds with `fault-injection`.
    #[cfg(feature = "fault-injection")]
    #[arg(long = "inject", value_name = "KEY=VALUE")]
    inject: Vec<String>,
}

impl TrainArgs {
    /// The resolved config.
    fn config(&self) -> Result<trainer::ExperimentConfig, TrainError> {
        Ok(self.builder()?.build()?)
    }

    /// The fault plan of `--inject` (empty in a build without `fault-injection`).
    fn faults(&self) -> Result<Faults, TrainError> {
        #[cfg(feature = "fault-injection")]
        return Faults::parse(&self.inject).map_err(TrainError::Invalid);
        #[cfg(not(feature = "fault-injection"))]
        Ok(Faults::default())
    }

    /// The resolved config of a subcommand that injects no faults: `--inject` there is refused,
    /// not ignored (a drill that silently does nothing would pass for a recovery that works).
    fn config_without_faults(&self, command: &str) -> Result<trainer::ExperimentConfig, TrainError> {
        #[cfg(feature = "fault-injection")]
        if !self.inject.is_empty() {
            return Err(TrainError::Invalid(format!(
                "--inject drills training (`trainer`, `trainer train`, `trainer tune-batch`); `trainer {command}` injects nothing"
            )));
        }
        let _ = command;
        self.config()
    }

    fn builder(&self) -> Result<ConfigBuilder, TrainError> {
        let mut b = match &self.resume {
            Some(run) => {
                if !run.join(bundle::layout::CONFIG_FILE).is_file() {
                    return Err(TrainError::Resume {
                        path: run.clone(),
                        message: "not a run directory (it has no config.toml)".into(),
                    });
                }
                let mut b = ConfigBuilder::new();
                b.add_file(&run.join(bundle::layout::CONFIG_FILE))?;
                b
            }
            None => ConfigBuilder::new(),
        };
        for f in &self.configs {
            b.add_file(f)?;
        }
        for s in &self.sets {
            b.add_set(s)?;
        }
        let mut flag = |flag: &'static str, key: &'static str, value: toml::Value| {
            b.add_flag(FlagOverride { flag, key, value });
        };
        if let Some(d) = &self.device {
            flag("--device", "device.device", toml::Value::String(d.clone()));
        }
        if let Some(e) = self.epochs {
            flag("--epochs", "training.epochs", toml::Value::Integer(e));
        }
        if let Some(bs) = &self.batch_size {
            let v = bs.parse::<i64>().map(toml::Value::Integer).unwrap_or_else(|_| toml::Value::String(bs.clone()));
            flag("--batch-size", "training.batch_size", v);
        }
        if let Some(p) = &self.precision {
            flag("--precision", "training.precision", toml::Value::String(p.clone()));
        }
        if self.profile {
            flag("--profile", "training.profile", toml::Value::Boolean(true));
        }
        if let Some(s) = self.seed {
            flag("--seed", "training.seed", toml::Value::Integer(s));
        }
        if let Some(d) = &self.devices {
            let list = d.iter().map(|s| toml::Value::String(s.trim().to_string())).collect();
            flag("--devices", "distributed.devices", toml::Value::Array(list));
        }
        if let Some(b) = &self.balance {
            flag("--balance", "distributed.balance", toml::Value::String(b.clone()));
        }
        if let Some(n) = self.nodes {
            flag("--nodes", "distributed.nodes", toml::Value::Integer(n));
        }
        if let Some(r) = self.node_rank {
            flag("--node-rank", "distributed.node_rank", toml::Value::Integer(r));
        }
        if let Some(o) = &self.orchestrator {
            flag("--orchestrator", "distributed.orchestrator", toml::Value::String(o.clone()));
        }
        Ok(b)
    }
}

fn main() -> ExitCode {
    // First, before any thread starts: tensor buffers are reused instead of faulted in again.
    device::keep_freed_memory();
    device::quiet_headless_env();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    // Device faults are panics in Burn 0.21; the trainer recovers from them or reports them as
    // errors, so they get no panic trace; nor do third-party decoders' panics on a damaged file
    // (Burn's weights, parquet pages), which `data::guard` turns into errors naming the file. Any
    // other panic is a bug and keeps the default report.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = trainer::fault::panic_message(info.payload());
        if trainer::fault::classify(&message).is_none() && !data::guard::decoding() {
            default_hook(info);
        }
    }));
    let cli = Cli::parse();
    // Before any device is used: cubecl's caches in one per-user directory, and with `bench
    // --count` its launch log in a directory removed at exit.
    let count_dir = match &cli.command {
        Some(Command::Bench(BenchArgs { count: true, .. })) => match tempfile::tempdir() {
            Ok(d) => Some(d),
            Err(e) => {
                eprintln!("error: a temporary directory for the kernel launch log: {e}");
                return ExitCode::FAILURE;
            }
        },
        _ => None,
    };
    let count_log = count_dir.as_ref().map(|d| d.path().join("kernels.log"));
    let setup = device::runtime::configure(None, count_log.as_deref());
    if let Some(w) = &setup.warning {
        w.lines().for_each(|line| eprintln!("warning: {line}"));
    }
    match real_main(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(match e {
                TrainError::Config(_) => 2,
                TrainError::DeviceFault { .. } => 3,
                TrainError::Group { .. } => trainer::dist::EXIT_PEER_LOST as u8,
                _ => 1,
            })
        }
    }
}

fn real_main(cli: Cli) -> Result<(), TrainError> {
    match cli.command {
        None => train(&cli.train),
        Some(Command::Train(args)) => train(&args),
        Some(Command::Config(args)) => {
            let cfg = args.config_without_faults("config")?;
            print!("{}", cfg.to_toml());
            Ok(())
        }
        Some(Command::TuneBatch(args)) => {
            let cfg = args.config()?;
            let report = trainer::tune::tune_batch(&cfg, &args.faults()?)?;
            print!("{}", report.render());
            Ok(())
        }
        Some(Command::ProbeBatch { layers, probe_batch }) => {
            // Internal: the parent wrote this config and passed its fault plan on.
            let (cfg, faults) = (layers.config()?, layers.faults()?);
            // A device fault is the probe's answer: report it as an error, not a panic trace.
            let probe = std::panic::catch_unwind(|| trainer::tune::probe_batch(&cfg, probe_batch, &faults));
            let ms = probe.map_err(|payload| {
                let message = trainer::fault::panic_message(&*payload);
                let kind = trainer::fault::classify(&message).map_or("panic".to_string(), |k| k.to_string());
                TrainError::Invalid(format!("{kind}: {}", message.lines().next().unwrap_or_default()))
            })??;
            println!("ok {ms:.3}");
            Ok(())
        }
        Some(Command::Bench(args)) => bench(args),
        Some(Command::Cv { layers, folds }) => {
            if let Some(r) = &layers.resume {
                return Err(TrainError::Invalid(format!(
                    "trainer cv continues with --out {}: --resume is for single runs",
                    r.display()
                )));
            }
            let cfg = layers.config_without_faults("cv")?;
            let summary = trainer::cv::run_cv(&cfg, folds, layers.out.clone())?;
            print!("{}", summary.render());
            Ok(())
        }
        Some(Command::Orchestrator { port, nodes, bind, secret_file, insecure }) => {
            trainer::dist::orchestrator(port, nodes, &bind, &secret_file, insecure)
        }
        Some(Command::GenerateTakes { layers, to, signers, takes, signs, pause_frames }) => {
            let cfg = layers.config_without_faults("generate-takes")?;
            let take = data::takes::TakeConfig { signs, pause_frames, ..Default::default() };
            let written = data::takes::write_takes(&to, &cfg.synthetic, &take, signers, takes, true)?;
            println!("wrote {} takes of {signs} signs to {}", written.len(), to.display());
            Ok(())
        }
        Some(Command::Generate { layers, to }) => {
            let cfg = layers.config_without_faults("generate")?;
            let out = data::synth::generate(&to, &cfg.synthetic, true)?;
            println!("wrote {} sequences of {} classes to {}", out.sequences, out.labels.len(), to.display());
            Ok(())
        }
    }
}

/// `trainer bench`: time (or, with `--count`, count the device work of) training steps and
/// inference on random data.
fn bench(args: BenchArgs) -> Result<(), TrainError> {
    let BenchArgs { layers, reference, batch, frames, features, classes, steps, latency_runs, count, json } = args;
    let cfg = layers.config_without_faults("bench")?;
    let cfg = match reference {
        true => trainer::ExperimentConfig {
            model: models::ModelConfig::ConvTransformer(models::ConvTransformerConfig::default()),
            ..cfg
        },
        false => cfg,
    };
    let opts = trainer::bench::BenchOptions { batch, frames, features, classes, steps, latency_runs };
    let compute = trainer::resolve::ResolvedCompute::resolve(&cfg)?;
    let json_text = match count {
        true => {
            let log = device::runtime::setup().and_then(|s| s.count_log.as_deref()).ok_or_else(|| {
                TrainError::Invalid("--count: cubecl's launch log could not be set up (see the warning)".into())
            })?;
            let counter = device::counters::WorkCounter::new(log);
            let report = trainer::workcount::count(&cfg, &compute, &opts, &counter)?;
            print!("{}", report.render());
            serde_json::to_string_pretty(&report)
        }
        false => {
            let report = trainer::bench::bench(&cfg, &compute, &opts)?;
            print!("{}", report.render());
            serde_json::to_string_pretty(&report)
        }
    };
    if let Some(path) = json {
        let text = json_text.map_err(|e| TrainError::io(&path, e))?;
        bundle::atomic::write_atomic(&path, text.as_bytes())?;
    }
    Ok(())
}

fn train(args: &TrainArgs) -> Result<(), TrainError> {
    let cfg = args.config()?;
    let opts = RunOptions {
        run_dir: args.resume.clone().or_else(|| args.out.clone()),
        resume: args.resume.is_some(),
        #[cfg(feature = "fault-injection")]
        faults: args.faults()?,
    };
    trainer::run(cfg, opts)?;
    Ok(())
}
