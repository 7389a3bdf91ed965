//! What a config resolves to on this machine: the device (and why) with the compute precision
//! (and why) in [`ResolvedCompute`], the preprocessing and the loaded, split data in
//! [`ResolvedData`]. `run` (through [`crate::measure`] and [`crate::plan`]), `tune-batch`, the
//! batch-size probe, `bench` and `cv` start from these values.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use data::dataset::{LoadOptions, SignDataset};
use data::index::{fnv1a, FNV_OFFSET};
use data::preprocess::Preprocessor;
use data::tokens::WordList;
use device::{ResolvedPrecision, SelectedDevice};
use models::decode::CtcDecoder;

use crate::config::ExperimentConfig;
use crate::{Result, TrainError};

/// The device and compute precision of a run (all `bench` needs).
#[derive(Debug, Clone)]
pub struct ResolvedCompute {
    /// The selected device, with the reason it was chosen.
    pub device: SelectedDevice,
    /// The compute precision, with the reason (and a warning when a request was not honoured).
    pub precision: ResolvedPrecision,
    /// This machine's devices of a data-parallel group (`[distributed] devices`; the first is
    /// `device`), empty for one device.
    pub peers: Vec<SelectedDevice>,
}

impl ResolvedCompute {
    /// Select the device `cfg.device` asks for and resolve `training.precision` on it.
    pub fn resolve(cfg: &ExperimentConfig) -> Result<Self> {
        let peers = if cfg.distributed.devices.is_empty() { Vec::new() } else { crate::dist::local_devices(cfg)? };
        let device = match peers.first() {
            Some(first) => first.clone(),
            None => device::resolve(&cfg.device.device, &cfg.device.policy())?,
        };
        let precision = cfg.training.precision.resolve(&device.selection.capabilities);
        // Several machines with one device each: this machine's one peer is `[device]`'s.
        let peers = if peers.is_empty() && cfg.distributed.is_group() { vec![device.clone()] } else { peers };
        Ok(Self { device, precision, peers })
    }

    /// The device to put tensors on.
    pub fn device(&self) -> &device::DispatchDevice {
        &self.device.device
    }

    /// Whether the device is a GPU backend (CUDA or WGPU): asynchronous, with a memory pool.
    pub fn on_gpu(&self) -> bool {
        crate::on_gpu(self.device())
    }
}

/// Loaded data split by group.
#[derive(Debug, Clone)]
pub struct PreparedData {
    /// The dataset root (`data.path`, or the generated synthetic dataset).
    pub root: PathBuf,
    /// Every loaded sequence, preprocessed.
    pub dataset: Arc<SignDataset>,
    /// Indices of the training sequences.
    pub train: Vec<usize>,
    /// Indices of the validation sequences (held-out signers).
    pub valid: Vec<usize>,
}

impl PreparedData {
    /// Distinct groups (signers) among `indices`.
    pub fn groups(&self, indices: &[usize]) -> Vec<String> {
        self.dataset.group_names(indices)
    }
}

/// Preprocessing and data of a run (what the batch-size search and probes need besides compute).
#[derive(Debug, Clone)]
pub struct ResolvedData {
    /// The preprocessor (`[preprocess]`).
    pub preprocessor: Arc<Preprocessor>,
    /// The loaded and split data.
    pub data: PreparedData,
    /// The `[ctc]` decoder with its lexicon read (unused by classification).
    pub decoder: CtcDecoder,
    /// The words of `[ctc] lexicon`, for the model card.
    pub lexicon: Option<WordList>,
}

impl ResolvedData {
    /// Open, load (through the preprocessed cache) and split the data of `cfg`; read its lexicon.
    pub fn resolve(cfg: &ExperimentConfig, progress: bool) -> Result<Self> {
        let preprocessor = Arc::new(Preprocessor::new(cfg.preprocess.clone())?);
        let data = prepare_data(cfg, &preprocessor, progress)?;
        let (decoder, lexicon) = ctc_decoder(cfg, &data.dataset)?;
        Ok(Self { preprocessor, data, decoder, lexicon })
    }
}

/// The `[ctc]` decoder of `cfg` over the classes of `ds`, with the words of its lexicon file
/// (spelled in the dataset's vocabulary) when `ctc.lexicon` names one.
pub fn ctc_decoder(cfg: &ExperimentConfig, ds: &SignDataset) -> Result<(CtcDecoder, Option<WordList>)> {
    let plain = CtcDecoder { config: cfg.ctc.clone(), lexicon: None };
    let (Some(path), Some(unit)) = (&cfg.ctc.lexicon, ds.continuous) else { return Ok((plain, None)) };
    let words = WordList::read(path)?;
    let lexicon = bundle::build_lexicon(&words, unit, &ds.labels)
        .map_err(|message| data::DataError::Config { key: "ctc.lexicon".into(), message })?;
    Ok((CtcDecoder { lexicon: Some(Arc::new(lexicon)), ..plain }, Some(words)))
}

/// The micro-batch and accumulation to continue with after an out-of-memory at micro-batch `b`
/// with `k` accumulation steps: at most half of `b`, the same effective batch `b * k`, and a power
/// of two where one at least half as large as that divides the effective batch (cubecl tunes
/// kernels by power-of-two shape buckets, so such a batch meets fewer new kernels). `None` at
/// micro-batch 1.
pub fn smaller_micro_batch(b: usize, k: usize) -> Option<(usize, usize)> {
    if b <= 1 {
        return None;
    }
    let total = b * k.max(1);
    let half = b / 2;
    let divides = |m: usize| total.is_multiple_of(m);
    let pow2 = (0..usize::BITS).map(|i| 1usize << i).take_while(|&m| m <= half).filter(|&m| divides(m)).last();
    let m = match pow2 {
        Some(p) if 2 * p >= half => p,
        _ => (1..=half).rev().find(|&m| divides(m)).unwrap_or(1),
    };
    Some((m, total / m))
}

/// The dataset root: `data.path`, or the built-in dataset of the task, generated once per
/// setting: `[synthetic]` signs for classification, `[sentences]` of those signs for CTC.
pub fn dataset_root(cfg: &ExperimentConfig, progress: bool) -> Result<PathBuf> {
    if let Some(p) = cfg.data_path() {
        return Ok(p);
    }
    // The file each generator writes last, atomically: its presence means the dataset is whole.
    let (prefix, key, last_file) = match cfg.task {
        models::Task::Classification => {
            ("synth", serde_json::to_string(&cfg.synthetic).unwrap_or_default(), data::index::ISLR_CSV)
        }
        models::Task::Ctc => (
            "sentences",
            serde_json::to_string(&(&cfg.synthetic, &cfg.sentences)).unwrap_or_default(),
            data::index::NPY_CSV,
        ),
    };
    let root =
        PathBuf::from(&cfg.data.synthetic_dir).join(format!("{prefix}-{:016x}", fnv1a(FNV_OFFSET, key.as_bytes())));
    if root.join(last_file).is_file() {
        return Ok(root);
    }
    // One generator per dataset at a time: a second process waits for the first (an advisory
    // lock on `KEY.lock`, released by the OS if the holder dies), then finds it done.
    let lock_path = root.with_extension("lock");
    std::fs::create_dir_all(&cfg.data.synthetic_dir)
        .map_err(|e| TrainError::io(Path::new(&cfg.data.synthetic_dir), e))?;
    let lock = std::fs::File::options()
        .create(true)
        .write(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(|e| TrainError::io(&lock_path, e))?;
    if lock.try_lock().is_err() {
        println!("waiting for another process generating {}", root.display());
        lock.lock().map_err(|e| TrainError::io(&lock_path, e))?;
    }
    if !root.join(last_file).is_file() {
        let s = &cfg.synthetic;
        match cfg.task {
            models::Task::Classification => {
                println!(
                    "generating a synthetic sign dataset ({} classes x {} signers x {} repetitions) in {}",
                    s.classes,
                    s.signers,
                    s.repetitions,
                    root.display()
                );
                data::synth::generate(&root, s, progress)?;
            }
            models::Task::Ctc => {
                let c = &cfg.sentences;
                println!(
                    "generating synthetic continuous signing ({} signers x {} sentences of {}-{} of {} signs) in {}",
                    s.signers,
                    c.per_signer,
                    c.min_signs,
                    c.max_signs,
                    s.classes,
                    root.display()
                );
                data::sentences::generate(&root, s, c, progress)?;
            }
        }
    }
    Ok(root)
}

/// Open, load (through the preprocessed cache) and split the data.
pub fn prepare_data(cfg: &ExperimentConfig, pre: &Preprocessor, progress: bool) -> Result<PreparedData> {
    let root = dataset_root(cfg, progress)?;
    let index = data::index::open(&root)?;
    match (cfg.task, index.continuous) {
        (models::Task::Ctc, None) => {
            return Err(TrainError::Invalid(format!(
                "task = \"ctc\" needs a continuous dataset (labels.csv with a `tokens` column and a vocabulary file); {} has one sign per sequence",
                root.display()
            )))
        }
        (models::Task::Classification, Some(_)) => {
            return Err(TrainError::Invalid(format!(
                "{} is a continuous dataset (token sequences); set task = \"ctc\" to train on it",
                root.display()
            )))
        }
        _ => {}
    }
    let opts = LoadOptions {
        on_error: cfg.data.on_error,
        max_bad_fraction: cfg.data.max_bad_fraction,
        cache_dir: (!cfg.data.cache_dir.is_empty()).then(|| PathBuf::from(&cfg.data.cache_dir)),
        threads: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        progress,
    };
    let ds = SignDataset::load(&index, pre, &opts)?;
    for (path, why) in &ds.skipped {
        eprintln!("warning: skipped {}: {why}", path.display());
    }
    let (train, valid) = if cfg.data.folds >= 2 {
        let groups = data::index::count_groups(&ds.groups());
        if groups < cfg.data.folds {
            return Err(TrainError::Invalid(format!(
                "data.folds = {} but {} has {groups} signers (groups); each fold needs at least one",
                cfg.data.folds,
                root.display()
            )));
        }
        ds.fold_by_group(cfg.data.folds, cfg.data.fold, cfg.data.split_seed)
    } else {
        ds.split_by_group(cfg.data.valid_fraction, cfg.data.split_seed)
    };
    Ok(PreparedData { root, dataset: Arc::new(ds), train, valid })
}

#[cfg(test)]
mod tests {
    use super::smaller_micro_batch;

    #[test]
    fn a_smaller_micro_batch_keeps_the_effective_batch_and_prefers_powers_of_two() {
        assert_eq!(smaller_micro_batch(8, 1), Some((4, 2)));
        assert_eq!(smaller_micro_batch(64, 2), Some((32, 4)));
        // 24 is half of 48, but 16 divides 48 and falls in a tuned power-of-two bucket.
        assert_eq!(smaller_micro_batch(48, 1), Some((16, 3)));
        assert_eq!(smaller_micro_batch(96, 1), Some((32, 3)));
        // No power of two within a factor of two of 50 divides 100: the largest divisor.
        assert_eq!(smaller_micro_batch(100, 1), Some((50, 2)));
        // Odd micro-batches used to lose samples (7 -> 3 x 2 = 6); the effective batch stays 7.
        assert_eq!(smaller_micro_batch(7, 1), Some((1, 7)));
        assert_eq!(smaller_micro_batch(6, 1), Some((2, 3)));
        assert_eq!(smaller_micro_batch(3, 4), Some((1, 12)));
        assert_eq!(smaller_micro_batch(1, 8), None);
        for b in 2..200 {
            for k in 1..5 {
                let (m, n) = smaller_micro_batch(b, k).unwrap();
                assert!(m <= b / 2 && m >= 1 && m * n == b * k, "b {b} k {k} -> {m} x {n}");
            }
        }
    }
}
