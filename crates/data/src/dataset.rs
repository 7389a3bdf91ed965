//! Loading a whole dataset: parse every file (in parallel), validate, run preprocessing stage 1,
//! and cache the result so later runs and epochs never re-parse parquet.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::error::{write_atomic, DataError, Result};
use crate::index::{DatasetIndex, Format};
use crate::preprocess::{PreprocessConfig, Preprocessor};
use crate::sequence::{FeatureSequence, LandmarkSequence, Sample};

/// What to do with a file that cannot be read or fails validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// Report it (path + reason) and leave it out.
    Skip,
    /// Stop at the first bad file.
    Fail,
}

/// One normalized sequence (after preprocessing stage 1) and its label.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// The raw sequence.
    pub sample: Sample,
    /// Class index.
    pub label: usize,
    /// Group (signer) the split holds out together.
    pub group: String,
    /// The file it came from.
    pub path: PathBuf,
    /// Continuous datasets: the token classes (empty for classification).
    pub tokens: Vec<usize>,
}

/// A loaded dataset, ready for batching.
#[derive(Debug, Clone)]
pub struct SignDataset {
    /// Class names, index = label.
    pub labels: Vec<String>,
    /// Every loaded sequence.
    pub items: Vec<Item>,
    /// Model input features per frame (after preprocessing stage 2).
    pub features: usize,
    /// Files left out, with the reason.
    pub skipped: Vec<(PathBuf, String)>,
    /// Whether the items came from the cache.
    pub from_cache: bool,
    /// `Some(unit)` for a continuous (CTC) dataset ([`DatasetIndex::continuous`]).
    pub continuous: Option<crate::tokens::Unit>,
}

/// How to load a dataset.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// What to do with a bad file.
    pub on_error: OnError,
    /// With `Skip`, still fail when more than this fraction of files is bad.
    pub max_bad_fraction: f64,
    /// Directory for the preprocessed cache; `None` disables caching.
    pub cache_dir: Option<PathBuf>,
    /// Loader threads.
    pub threads: usize,
    /// Show a progress bar.
    pub progress: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            on_error: OnError::Skip,
            max_bad_fraction: 0.05,
            cache_dir: None,
            threads: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            progress: false,
        }
    }
}

/// Read one sequence of the index's format: the file's, or sequence `sequence` of a file
/// holding several ([`Format::Fingerspell`]; without one, the file must hold exactly one).
/// `.pose` files are mapped with the preprocessing's `pose_components`.
pub fn read_sample(format: Format, path: &Path, sequence: Option<i64>, pre: &PreprocessConfig) -> Result<Sample> {
    match format {
        Format::Islr => crate::islr::read_parquet(path).map(Sample::Landmarks),
        Format::Npy => crate::npy::read_npy(path),
        Format::Npz => crate::npy::read_npz(path),
        Format::Pose => crate::pose::read_pose_sequence(path, &pre.pose_components).map(Sample::Landmarks),
        Format::Fingerspell => match sequence {
            Some(id) => crate::fingerspell::read_sequence(path, id).map(Sample::Landmarks),
            None => {
                let mut all = crate::fingerspell::read_file(path)?;
                match all.len() {
                    1 => Ok(Sample::Landmarks(all.remove(0).1)),
                    n => Err(DataError::invalid(path, format!("holds {n} sequences; name one by its sequence_id"))),
                }
            }
        },
    }
}

/// The entries to read together: each file of several sequences once
/// ([`Format::Fingerspell`]), every other entry on its own. Positions in `index.entries`.
fn read_units(index: &DatasetIndex) -> Vec<Vec<usize>> {
    if index.format != Format::Fingerspell {
        return (0..index.entries.len()).map(|i| vec![i]).collect();
    }
    let mut by_file: Vec<Vec<usize>> = Vec::new();
    let mut slot: HashMap<&Path, usize> = HashMap::new();
    for (i, e) in index.entries.iter().enumerate() {
        let k = *slot.entry(&e.path).or_insert_with(|| {
            by_file.push(Vec::new());
            by_file.len() - 1
        });
        by_file[k].push(i);
    }
    by_file
}

/// Read and normalize the entries of one unit of [`read_units`].
fn read_unit(index: &DatasetIndex, unit: &[usize], pre: &Preprocessor) -> Vec<Result<Sample>> {
    let first = &index.entries[unit[0]];
    if index.format != Format::Fingerspell || unit.len() == 1 {
        return unit
            .iter()
            .map(|&i| {
                let e = &index.entries[i];
                read_sample(index.format, &e.path, e.sequence, &pre.config).and_then(|s| pre.normalize(&s, &e.path))
            })
            .collect();
    }
    match crate::fingerspell::read_file(&first.path) {
        Ok(all) => {
            let mut by_id: HashMap<i64, LandmarkSequence> = all.into_iter().collect();
            let held = by_id.len();
            unit.iter()
                .map(|&i| {
                    let e = &index.entries[i];
                    let id = e.sequence.unwrap_or_default();
                    let seq = by_id.remove(&id).ok_or_else(|| {
                        DataError::invalid(&e.path, format!("has no sequence_id {id} (it holds {held} sequences)"))
                    })?;
                    pre.normalize(&Sample::Landmarks(seq), Path::new(&e.describe()))
                })
                .collect()
        }
        // One failure of the file, told for each of its sequences.
        Err(e) => {
            let message = e.to_string();
            unit.iter().map(|&i| Err(DataError::invalid(&index.entries[i].path, message.clone()))).collect()
        }
    }
}

impl SignDataset {
    /// The left/right mirror table of the landmarks `pre` keeps from this dataset's sequences,
    /// what the flip augmentation swaps (identity for feature data).
    pub fn mirror_table(&self, pre: &Preprocessor) -> Vec<usize> {
        match self.items.first().map(|i| &i.sample) {
            Some(Sample::Landmarks(seq)) => {
                let full = crate::layout::NUM_LANDMARKS;
                if pre.kept_points(full) == seq.points {
                    pre.mirror_of_kept(full)
                } else {
                    pre.mirror_of_kept(seq.points)
                }
            }
            _ => Vec::new(),
        }
    }

    /// Load every entry of `index` through preprocessing stage 1.
    pub fn load(index: &DatasetIndex, pre: &Preprocessor, opts: &LoadOptions) -> Result<SignDataset> {
        let key = cache_key(index, pre);
        let cache_path = opts.cache_dir.as_ref().map(|d| d.join(format!("{key:016x}.sfcache")));
        if let Some(path) = &cache_path {
            if path.is_file() {
                match read_cache(path, key) {
                    Ok(mut ds) => {
                        ds.labels = index.labels.clone();
                        ds.continuous = index.continuous;
                        tracing::info!(
                            "loaded {} preprocessed sequences from cache {}",
                            ds.items.len(),
                            path.display()
                        );
                        return Ok(ds);
                    }
                    Err(e) => tracing::warn!("ignoring unreadable cache ({e}); rebuilding it"),
                }
            }
        }
        let ds = Self::load_uncached(index, pre, opts)?;
        if let Some(path) = &cache_path {
            if let Some(dir) = path.parent() {
                crate::error::sweep_temp_files(dir);
            }
            if let Err(e) = write_cache(path, key, &ds) {
                tracing::warn!("could not write the preprocessing cache: {e}");
            }
        }
        Ok(ds)
    }

    fn load_uncached(index: &DatasetIndex, pre: &Preprocessor, opts: &LoadOptions) -> Result<SignDataset> {
        let n = index.entries.len();
        if n == 0 {
            return Err(DataError::invalid(&index.root, "the dataset index lists no sequences"));
        }
        let bar = if opts.progress { indicatif::ProgressBar::new(n as u64) } else { indicatif::ProgressBar::hidden() };
        bar.set_style(
            indicatif::ProgressStyle::with_template("loading {bar:30} {pos}/{len} sequences {per_sec} eta {eta}")
                .expect("valid template"),
        );
        let results: Vec<Mutex<Option<Result<Sample>>>> = (0..n).map(|_| Mutex::new(None)).collect();
        let units = read_units(index);
        let next = AtomicUsize::new(0);
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            for _ in 0..opts.threads.max(1) {
                scope.spawn(|| loop {
                    let u = next.fetch_add(1, Ordering::Relaxed);
                    if u >= units.len() || stop.load(Ordering::Relaxed) {
                        break;
                    }
                    for (&i, r) in units[u].iter().zip(read_unit(index, &units[u], pre)) {
                        if r.is_err() && opts.on_error == OnError::Fail {
                            stop.store(true, Ordering::Relaxed);
                        }
                        *results[i].lock().expect("not poisoned") = Some(r);
                        bar.inc(1);
                    }
                });
            }
        });
        bar.finish_and_clear();

        let mut items = Vec::with_capacity(n);
        let mut skipped = Vec::new();
        let mut first_error = None;
        let mut expected: Option<(bool, usize, PathBuf)> = None;
        for (entry, slot) in index.entries.iter().zip(results) {
            let Some(result) = slot.into_inner().expect("not poisoned") else { continue };
            let checked = result.and_then(|sample| {
                let shape = (matches!(sample, Sample::Landmarks(_)), sample.width());
                match &expected {
                    None => {
                        expected = Some((shape.0, shape.1, entry.path.clone()));
                        Ok(sample)
                    }
                    Some((kind, width, first)) if (*kind, *width) != shape => Err(DataError::ShapeMismatch {
                        path: entry.path.clone(),
                        expected_what: format!(
                            "{} per frame (as in {})",
                            if *kind { "landmarks" } else { "features" },
                            first.display()
                        ),
                        expected: *width,
                        found: shape.1,
                    }),
                    Some(_) => Ok(sample),
                }
            });
            match checked {
                Ok(sample) => items.push(Item {
                    sample,
                    label: entry.label,
                    group: entry.group.clone(),
                    path: entry.path.clone(),
                    tokens: entry.tokens.clone(),
                }),
                Err(e) => {
                    if opts.on_error == OnError::Fail {
                        return Err(e);
                    }
                    tracing::warn!("skipping {}: {e}", entry.describe());
                    skipped.push((entry.path.clone(), e.to_string()));
                    first_error.get_or_insert(e);
                }
            }
        }
        let bad = n - items.len();
        if items.is_empty() || bad as f64 > opts.max_bad_fraction * n as f64 {
            let first = first_error.unwrap_or_else(|| DataError::invalid(&index.root, "no sequence could be loaded"));
            return Err(DataError::TooManyBad { count: bad, total: n, first: Box::new(first) });
        }
        let (is_landmarks, width, _) = expected.expect("at least one item");
        let features = pre.output_features(is_landmarks, width);
        Ok(SignDataset {
            labels: index.labels.clone(),
            items,
            features,
            skipped,
            from_cache: false,
            continuous: index.continuous,
        })
    }

    /// Number of classes.
    pub fn num_classes(&self) -> usize {
        self.labels.len()
    }

    /// Split item positions by group (see [`crate::index::split_by_group`]).
    pub fn split_by_group(&self, valid_fraction: f64, seed: u64) -> (Vec<usize>, Vec<usize>) {
        crate::index::split_by_group(&self.groups(), valid_fraction, seed)
    }

    /// Fold `fold` of `folds` by group (see [`crate::index::fold_by_group`]).
    pub fn fold_by_group(&self, folds: usize, fold: usize, seed: u64) -> (Vec<usize>, Vec<usize>) {
        crate::index::fold_by_group(&self.groups(), folds, fold, seed)
    }

    /// The group of each item.
    pub fn groups(&self) -> Vec<&str> {
        self.items.iter().map(|i| i.group.as_str()).collect()
    }

    /// The distinct groups (signers) of the items at `indices`, sorted.
    pub fn group_names(&self, indices: &[usize]) -> Vec<String> {
        let set: std::collections::BTreeSet<&str> =
            indices.iter().filter_map(|&i| self.items.get(i)).map(|i| i.group.as_str()).collect();
        set.into_iter().map(String::from).collect()
    }

    /// Median length in frames (after stage 1) of the items at `indices`: what a streaming
    /// recognizer should look at to see one whole sign. `None` for no items.
    pub fn median_frames(&self, indices: &[usize]) -> Option<usize> {
        let mut lens: Vec<usize> =
            indices.iter().filter_map(|&i| self.items.get(i)).map(|i| i.sample.frames()).collect();
        lens.sort_unstable();
        lens.get(lens.len() / 2).copied()
    }
}

/// Cache files: magic, header length (u64), CRC-32 of everything after it (u32), the JSON header,
/// the values (f32, little-endian). A file whose CRC or sizes do not match is rebuilt.
const CACHE_MAGIC: &[u8; 8] = b"SFCACHE2";

/// Identifies the files (path, size, mtime) and the stage-1 preprocessing settings.
fn cache_key(index: &DatasetIndex, pre: &Preprocessor) -> u64 {
    let mut h = Fnv::default();
    h.write(CACHE_MAGIC);
    let c = &pre.config;
    h.write(
        format!(
            "{:?}|{:?}|{}|{}|{}|{:?}",
            c.landmarks, c.coords, c.normalize, c.reference_point, c.drop_empty_frames, c.pose_components
        )
        .as_bytes(),
    );
    for e in &index.entries {
        h.write(e.path.to_string_lossy().as_bytes());
        h.write(&e.label.to_le_bytes());
        h.write(e.group.as_bytes());
        for t in &e.tokens {
            h.write(&t.to_le_bytes());
        }
        if let Some(id) = e.sequence {
            h.write(&id.to_le_bytes());
        }
        if let Ok(m) = std::fs::metadata(&e.path) {
            h.write(&m.len().to_le_bytes());
            if let Ok(t) = m.modified().map(|t| t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default()) {
                h.write(&t.as_nanos().to_le_bytes());
            }
        }
    }
    h.0
}

/// FNV-1a over a sequence of fields, with a separator mix after each so field boundaries count.
#[derive(Debug)]
struct Fnv(u64);
impl Default for Fnv {
    fn default() -> Self {
        Self(crate::index::FNV_OFFSET)
    }
}
impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        self.0 = crate::index::fnv1a(self.0, bytes).wrapping_mul(0x100000001b3) ^ 0xff;
    }
}

#[derive(Serialize, Deserialize)]
struct CacheMeta {
    key: u64,
    features: usize,
    skipped: Vec<(PathBuf, String)>,
    items: Vec<CacheItem>,
}

#[derive(Serialize, Deserialize)]
struct CacheItem {
    path: PathBuf,
    label: usize,
    group: String,
    landmarks: bool,
    width: usize,
    frame_ids: Vec<i32>,
    values: usize,
    #[serde(default)]
    tokens: Vec<usize>,
}

fn write_cache(path: &Path, key: u64, ds: &SignDataset) -> Result<()> {
    let mut blob: Vec<u8> = Vec::new();
    let mut items = Vec::with_capacity(ds.items.len());
    for it in &ds.items {
        let (landmarks, width, frame_ids, values): (bool, usize, Vec<i32>, &[f32]) = match &it.sample {
            Sample::Landmarks(s) => (true, s.points, s.frame_ids.clone(), &s.xyz),
            Sample::Features(s) => (false, s.features, Vec::new(), &s.data),
        };
        for v in values {
            blob.extend_from_slice(&v.to_le_bytes());
        }
        items.push(CacheItem {
            path: it.path.clone(),
            label: it.label,
            group: it.group.clone(),
            landmarks,
            width,
            frame_ids,
            values: values.len(),
            tokens: it.tokens.clone(),
        });
    }
    let meta = serde_json::to_vec(&CacheMeta { key, features: ds.features, skipped: ds.skipped.clone(), items })
        .expect("serializable");
    let mut crc = crc32fast::Hasher::new();
    crc.update(&meta);
    crc.update(&blob);
    let mut out = Vec::with_capacity(20 + meta.len() + blob.len());
    out.extend_from_slice(CACHE_MAGIC);
    out.extend_from_slice(&(meta.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(&meta);
    out.extend_from_slice(&blob);
    write_atomic(path, &out)
}

fn read_cache(path: &Path, key: u64) -> Result<SignDataset> {
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    let bad = |m: &str| DataError::invalid(path, format!("corrupt cache: {m}"));
    if bytes.len() < 20 || &bytes[..8] != CACHE_MAGIC {
        return Err(bad("bad magic"));
    }
    let meta_len = usize::try_from(u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes")))
        .map_err(|_| bad("header length"))?;
    let stored_crc = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes"));
    if crc32fast::hash(&bytes[20..]) != stored_crc {
        return Err(bad("CRC-32 mismatch (the file changed after it was written)"));
    }
    let meta_bytes = bytes.get(20..20usize.saturating_add(meta_len)).ok_or_else(|| bad("truncated header"))?;
    let meta: CacheMeta = serde_json::from_slice(meta_bytes).map_err(|e| bad(&e.to_string()))?;
    if meta.key != key {
        return Err(bad("key mismatch"));
    }
    let body = &bytes[20 + meta_len..];
    let mut floats = body.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    let total = meta.items.iter().try_fold(0usize, |acc, i| acc.checked_add(i.values));
    if body.len() % 4 != 0 || Some(body.len() / 4) != total {
        return Err(bad("data length does not match the header"));
    }
    for ci in &meta.items {
        let expected =
            if ci.landmarks { ci.frame_ids.len().checked_mul(ci.width).and_then(|n| n.checked_mul(3)) } else { None };
        let consistent = match expected {
            Some(n) => n == ci.values,
            None => !ci.landmarks && ci.width > 0 && ci.values % ci.width == 0,
        };
        if !consistent {
            return Err(bad("an item's sizes do not match its values"));
        }
    }
    let mut items = Vec::with_capacity(meta.items.len());
    for ci in meta.items {
        let values: Vec<f32> = floats.by_ref().take(ci.values).collect();
        let sample = if ci.landmarks {
            Sample::Landmarks(LandmarkSequence { points: ci.width, frame_ids: ci.frame_ids, xyz: values })
        } else {
            Sample::Features(FeatureSequence { features: ci.width, data: values })
        };
        items.push(Item { sample, label: ci.label, group: ci.group, path: ci.path, tokens: ci.tokens });
    }
    Ok(SignDataset {
        labels: Vec::new(),
        items,
        features: meta.features,
        skipped: meta.skipped,
        from_cache: true,
        continuous: None,
    })
}

/// A subset of a loaded dataset (e.g. the training split) as a Burn [`burn_dataset::Dataset`],
/// for code built on Burn's dataset combinators. Items are normalized samples (stage 1); batch them
/// with [`crate::loader::ItemBatcher`].
#[derive(Debug, Clone)]
pub struct DatasetSplit {
    /// The whole dataset.
    pub data: std::sync::Arc<SignDataset>,
    /// Positions of the split's items in it.
    pub indices: Vec<usize>,
}

impl burn_dataset::Dataset<Item> for DatasetSplit {
    fn get(&self, index: usize) -> Option<Item> {
        self.indices.get(index).and_then(|&i| self.data.items.get(i)).cloned()
    }

    fn len(&self) -> usize {
        self.indices.len()
    }
}
