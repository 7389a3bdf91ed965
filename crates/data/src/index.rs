//! Dataset indexes: which files exist, their labels and groups (signers).
//!
//! Three layouts are recognised:
//! - ISLR: `train.csv` (`path, participant_id, sequence_id, sign`) + `sign_to_prediction_index_map.json`
//!   + one parquet per sequence;
//! - ASL Fingerspelling: `train.csv` with a `phrase` column (`path, file_id, sequence_id,
//!   participant_id, phrase`) + `character_to_prediction_index.json` + wide parquet files of
//!   several sequences each ([`crate::fingerspell`]): a continuous (CTC) dataset of characters;
//! - files: `labels.csv` (`file, label[, group]`) + one `.npy`, `.npz` or `.pose` file per
//!   sequence (one kind per dataset); the label map is `sign_to_prediction_index_map.json` if
//!   present, else the sorted distinct labels. With a `tokens` column instead of `label` the
//!   dataset is continuous (CTC): each row's text is split into tokens by the vocabulary in the
//!   directory, `vocabulary.txt` (glosses, whitespace-separated) or
//!   `character_to_prediction_index.json` (characters).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{DataError, Result};
use crate::tokens::{Unit, Vocabulary};

/// The ISLR layout's sequence list.
pub const ISLR_CSV: &str = "train.csv";
/// The ISLR layout's label map.
pub const LABEL_MAP: &str = "sign_to_prediction_index_map.json";
/// The files layout's sequence list.
pub const NPY_CSV: &str = "labels.csv";

/// A sequence file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// One parquet file per sequence in the ISLR long format.
    Islr,
    /// One `.npy` array per sequence.
    Npy,
    /// One `.npz` archive per sequence (its only array, or `landmarks`).
    Npz,
    /// One pose-format `.pose` file per sequence.
    Pose,
    /// ASL Fingerspelling: wide parquet files of several sequences, each entry a
    /// `sequence_id` in its file.
    Fingerspell,
}

impl Format {
    /// The format of one sequence file by its extension: `.parquet` (ISLR), `.npy`, `.npz` or `.pose`.
    pub fn from_extension(path: &Path) -> Option<Format> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("parquet") => Some(Format::Islr),
            Some("npy") => Some(Format::Npy),
            Some("npz") => Some(Format::Npz),
            Some("pose") => Some(Format::Pose),
            _ => None,
        }
    }

    /// The extensions [`Format::from_extension`] knows, for messages.
    pub const EXTENSIONS: &'static str = ".parquet, .npy, .npz or .pose";
}

/// One sequence of a dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Its file.
    pub path: PathBuf,
    /// Class index.
    pub label: usize,
    /// Signer / participant; splits keep a group on one side.
    pub group: String,
    /// Continuous datasets: the token classes of the sequence (class 0 is the CTC blank, never
    /// here); empty for classification.
    #[serde(default)]
    pub tokens: Vec<usize>,
    /// The sequence's `sequence_id` in a file holding several ([`Format::Fingerspell`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<i64>,
}

impl Entry {
    /// The file, and the sequence in it when it holds several (`file.parquet#42`), for messages.
    pub fn describe(&self) -> String {
        match self.sequence {
            Some(id) => format!("{}#{id}", self.path.display()),
            None => self.path.display().to_string(),
        }
    }
}

/// A dataset's sequence list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetIndex {
    /// The dataset root.
    pub root: PathBuf,
    /// Its layout.
    pub format: Format,
    /// Class names, index = label; for a continuous dataset the blank (`<blank>`) then the
    /// vocabulary's tokens.
    pub labels: Vec<String>,
    /// Every sequence.
    pub entries: Vec<Entry>,
    /// `Some(unit)` for a continuous-recognition (CTC) dataset: entries carry token sequences
    /// split by `unit`; `None` for sign classification.
    #[serde(default)]
    pub continuous: Option<Unit>,
}

/// The label name of the CTC blank (class 0) in a continuous dataset's `labels`.
pub const BLANK_LABEL: &str = "<blank>";

/// A gloss vocabulary file in a continuous npy-layout dataset (one gloss per line).
pub const GLOSS_LIST: &str = "vocabulary.txt";

/// A character vocabulary file (ASL Fingerspelling's name).
pub const CHARACTER_MAP: &str = "character_to_prediction_index.json";

impl DatasetIndex {
    /// The token vocabulary of a continuous dataset (`None` for classification).
    pub fn vocabulary(&self) -> Option<Vocabulary> {
        let unit = self.continuous?;
        Vocabulary::new(unit, self.labels.iter().skip(1).cloned().collect(), self.root.clone()).ok()
    }
}

/// The vocabulary file of a continuous dataset at `root`: `vocabulary.txt` (glosses) or
/// `character_to_prediction_index.json` (characters).
pub fn read_vocabulary(root: &Path) -> Result<Vocabulary> {
    let (glosses, chars) = (root.join(GLOSS_LIST), root.join(CHARACTER_MAP));
    if glosses.is_file() {
        Vocabulary::read_gloss_list(&glosses)
    } else if chars.is_file() {
        Vocabulary::read_character_map(&chars)
    } else {
        Err(DataError::invalid(
            root,
            format!("a `tokens` column needs a vocabulary: expected `{GLOSS_LIST}` (one gloss per line) or `{CHARACTER_MAP}` in this directory"),
        ))
    }
}

/// Read a label map `{"sign": index}`; indices must be exactly `0..n`.
pub fn read_label_map(path: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path).map_err(|e| DataError::io(path, e))?;
    let map: HashMap<String, i64> = serde_json::from_str(&text)
        .map_err(|e| DataError::invalid(path, format!("expected a JSON object {{\"sign\": index}}: {e}")))?;
    let n = map.len();
    let mut labels = vec![None; n];
    for (sign, idx) in map {
        let slot = usize::try_from(idx)
            .ok()
            .and_then(|i| labels.get_mut(i))
            .ok_or_else(|| DataError::invalid(path, format!("index {idx} of `{sign}` is outside 0..{n}")))?;
        if let Some(prev) = slot.replace(sign.clone()) {
            return Err(DataError::invalid(path, format!("index {idx} is used by both `{prev}` and `{sign}`")));
        }
    }
    Ok(labels.into_iter().map(|l| l.expect("every slot filled: n distinct indices in 0..n")).collect())
}

/// Detect the layout of `root` and read its index.
pub fn open(root: &Path) -> Result<DatasetIndex> {
    if root.join(ISLR_CSV).is_file() {
        read_islr(root)
    } else if root.join(NPY_CSV).is_file() {
        read_npy_dir(root)
    } else {
        Err(DataError::invalid(
            root,
            format!(
                "not a dataset: expected `{ISLR_CSV}` (ISLR parquet layout) or `{NPY_CSV}` (npy/npz/pose files) in it"
            ),
        ))
    }
}

/// A CSV file's reader and its trimmed headers; errors name the file and line 1.
pub(crate) fn csv_reader(path: &Path) -> Result<(csv::Reader<std::fs::File>, Vec<String>)> {
    let mut rdr = csv::ReaderBuilder::new().flexible(false).from_path(path).map_err(|e| DataError::Csv {
        path: path.to_path_buf(),
        line: 1,
        message: e.to_string(),
    })?;
    let headers = rdr
        .headers()
        .map_err(|e| DataError::Csv { path: path.to_path_buf(), line: 1, message: e.to_string() })?
        .iter()
        .map(|h| h.trim().to_string())
        .collect();
    Ok((rdr, headers))
}

/// The position of column `name`, or an error listing the columns there are.
pub(crate) fn column(path: &Path, headers: &[String], name: &str) -> Result<usize> {
    headers.iter().position(|h| h == name).ok_or_else(|| DataError::MissingColumn {
        path: path.to_path_buf(),
        column: name.into(),
        found: headers.join(", "),
    })
}

/// The records with their line numbers; errors name the file and line.
pub(crate) fn records<'a>(
    path: &Path,
    rdr: &'a mut csv::Reader<std::fs::File>,
) -> impl Iterator<Item = Result<(usize, csv::StringRecord)>> + 'a {
    let path = path.to_path_buf();
    rdr.records().map(move |r| {
        r.map(|rec| (rec.position().map(|p| p.line() as usize).unwrap_or(0), rec)).map_err(|e| DataError::Csv {
            path: path.clone(),
            line: e.position().map(|p| p.line() as usize).unwrap_or(0),
            message: e.to_string(),
        })
    })
}

fn read_islr(root: &Path) -> Result<DatasetIndex> {
    let csv_path = root.join(ISLR_CSV);
    let (mut rdr, headers) = csv_reader(&csv_path)?;
    if headers.iter().any(|h| h == "phrase") && !headers.iter().any(|h| h == "sign") {
        return read_fingerspelling(root);
    }
    let labels = read_label_map(&root.join(LABEL_MAP))?;
    let lookup: HashMap<&str, usize> = labels.iter().enumerate().map(|(i, l)| (l.as_str(), i)).collect();
    let (pc, gc, sc) = (
        column(&csv_path, &headers, "path")?,
        column(&csv_path, &headers, "participant_id")?,
        column(&csv_path, &headers, "sign")?,
    );
    let mut entries = Vec::new();
    for rec in records(&csv_path, &mut rdr) {
        let (line, rec) = rec?;
        let sign = rec.get(sc).unwrap_or_default().trim();
        let label = *lookup.get(sign).ok_or_else(|| DataError::UnknownLabel {
            path: csv_path.clone(),
            line,
            label: sign.to_string(),
        })?;
        entries.push(Entry {
            path: root.join(rec.get(pc).unwrap_or_default().trim()),
            label,
            group: rec.get(gc).unwrap_or_default().trim().to_string(),
            tokens: Vec::new(),
            sequence: None,
        });
    }
    Ok(DatasetIndex { root: root.to_path_buf(), format: Format::Islr, labels, entries, continuous: None })
}

/// The ASL Fingerspelling layout: phrases split into the characters of the character map; a
/// character outside it is an error naming the line of `train.csv`.
fn read_fingerspelling(root: &Path) -> Result<DatasetIndex> {
    let csv_path = root.join(ISLR_CSV);
    let map = root.join(CHARACTER_MAP);
    if !map.is_file() {
        return Err(DataError::invalid(
            &csv_path,
            format!(
                "is an ASL Fingerspelling index (a `phrase` column): its characters need `{CHARACTER_MAP}` beside it"
            ),
        ));
    }
    let vocabulary = Vocabulary::read_character_map(&map)?;
    let mut entries = Vec::new();
    for p in crate::fingerspell::open(root)? {
        let tokens = vocabulary.encode(&p.phrase).map_err(|message| DataError::Csv {
            path: csv_path.clone(),
            line: p.line,
            message,
        })?;
        entries.push(Entry { path: p.path, label: 0, group: p.participant, tokens, sequence: Some(p.sequence_id) });
    }
    let labels = std::iter::once(BLANK_LABEL.to_string()).chain(vocabulary.tokens).collect();
    Ok(DatasetIndex {
        root: root.to_path_buf(),
        format: Format::Fingerspell,
        labels,
        entries,
        continuous: Some(Unit::Character),
    })
}

fn read_npy_dir(root: &Path) -> Result<DatasetIndex> {
    let csv_path = root.join(NPY_CSV);
    let (mut rdr, headers) = csv_reader(&csv_path)?;
    let fc = column(&csv_path, &headers, "file")?;
    // A `tokens` column (and no `label`) makes a continuous dataset: token sequences per file.
    let vocabulary = if headers.iter().any(|h| h == "tokens") && !headers.iter().any(|h| h == "label") {
        Some(read_vocabulary(root)?)
    } else {
        None
    };
    let lc = column(&csv_path, &headers, if vocabulary.is_some() { "tokens" } else { "label" })?;
    let gc = headers.iter().position(|h| h == "group");
    let mut rows = Vec::new();
    for rec in records(&csv_path, &mut rdr) {
        let (line, rec) = rec?;
        let file = rec.get(fc).unwrap_or_default().trim().to_string();
        let label = rec.get(lc).unwrap_or_default().trim().to_string();
        if file.is_empty() || label.is_empty() {
            return Err(DataError::Csv { path: csv_path.clone(), line, message: "empty `file` or `label`".into() });
        }
        let group = gc.and_then(|g| rec.get(g)).map(|g| g.trim().to_string()).unwrap_or_else(|| file.clone());
        rows.push((line, file, label, group));
    }
    let format = match rows.first() {
        None => Format::Npy,
        Some((line, file, ..)) => {
            Format::from_extension(Path::new(file)).filter(|f| *f != Format::Islr).ok_or_else(|| DataError::Csv {
                path: csv_path.clone(),
                line: *line,
                message: format!("`{file}`: expected a .npy, .npz or .pose file"),
            })?
        }
    };
    if let Some((line, file, ..)) = rows.iter().find(|r| Format::from_extension(Path::new(&r.1)) != Some(format)) {
        return Err(DataError::Csv {
            path: csv_path.clone(),
            line: *line,
            message: format!("`{file}`: every file of a dataset must be of one kind, like the first ({format:?})"),
        });
    }
    if let Some(vocabulary) = vocabulary {
        let mut entries = Vec::with_capacity(rows.len());
        for (line, file, text, group) in rows {
            let tokens = vocabulary.encode(&text).map_err(|message| DataError::Csv {
                path: csv_path.clone(),
                line,
                message: format!("column `tokens`: {message}"),
            })?;
            entries.push(Entry { path: root.join(file), label: 0, group, tokens, sequence: None });
        }
        let labels = std::iter::once(BLANK_LABEL.to_string()).chain(vocabulary.tokens.iter().cloned()).collect();
        return Ok(DatasetIndex {
            root: root.to_path_buf(),
            format,
            labels,
            entries,
            continuous: Some(vocabulary.unit),
        });
    }
    let map_path = root.join(LABEL_MAP);
    let labels = if map_path.is_file() {
        read_label_map(&map_path)?
    } else {
        let mut l: Vec<String> = rows.iter().map(|r| r.2.clone()).collect();
        l.sort();
        l.dedup();
        l
    };
    let lookup: HashMap<&str, usize> = labels.iter().enumerate().map(|(i, l)| (l.as_str(), i)).collect();
    let mut entries = Vec::with_capacity(rows.len());
    for (line, file, label, group) in rows {
        let idx = *lookup.get(label.as_str()).ok_or_else(|| DataError::UnknownLabel {
            path: csv_path.clone(),
            line,
            label: label.clone(),
        })?;
        entries.push(Entry { path: root.join(file), label: idx, group, tokens: Vec::new(), sequence: None });
    }
    Ok(DatasetIndex { root: root.to_path_buf(), format, labels, entries, continuous: None })
}

impl DatasetIndex {
    /// Split entries by group (see [`split_by_group`]). Returns (train, valid) entry indices.
    pub fn split_by_group(&self, fraction: f64, seed: u64) -> (Vec<usize>, Vec<usize>) {
        split_by_group(&self.groups(), fraction, seed)
    }

    /// Fold `fold` of `folds` by group (see [`fold_by_group`]). Returns (train, valid) entry indices.
    pub fn fold_by_group(&self, folds: usize, fold: usize, seed: u64) -> (Vec<usize>, Vec<usize>) {
        fold_by_group(&self.groups(), folds, fold, seed)
    }

    /// The group of each entry.
    pub fn groups(&self) -> Vec<&str> {
        self.entries.iter().map(|e| e.group.as_str()).collect()
    }
}

/// Split positions by their group (`groups[i]` is the group of position `i`): groups are hashed
/// deterministically with `seed`, and about `fraction` of them go to validation, so no signer
/// appears on both sides. Returns (train, valid) positions. With a single group, falls back to a
/// per-position split.
pub fn split_by_group(groups: &[&str], fraction: f64, seed: u64) -> (Vec<usize>, Vec<usize>) {
    let distinct = distinct_groups(groups);
    let fraction = fraction.clamp(0.0, 1.0);
    let mut train = Vec::new();
    let mut valid = Vec::new();
    if distinct.len() < 2 {
        for i in 0..groups.len() {
            if unit_hash(&i.to_string(), seed) < fraction {
                valid.push(i)
            } else {
                train.push(i)
            }
        }
        return (train, valid);
    }
    // Rank groups by hash and take the first ceil(fraction * groups) for validation, so the
    // validation set is never empty when fraction > 0.
    let ranked = rank_groups(&distinct, seed);
    let n_valid = ((distinct.len() as f64 * fraction).ceil() as usize).min(distinct.len() - 1);
    partition(groups, &ranked.into_iter().take(n_valid).collect())
}

/// Distinct groups ordered by their seeded hash (ties by name): the order both splits deal from.
fn rank_groups<'a>(distinct: &[&'a str], seed: u64) -> Vec<&'a str> {
    let mut ranked: Vec<(f64, &str)> = distinct.iter().map(|g| (unit_hash(g, seed), *g)).collect();
    ranked.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(b.1)));
    ranked.into_iter().map(|(_, g)| g).collect()
}

/// (train, valid) positions: valid are those whose group is in `held_out`.
fn partition(groups: &[&str], held_out: &std::collections::HashSet<&str>) -> (Vec<usize>, Vec<usize>) {
    let (mut train, mut valid) = (Vec::new(), Vec::new());
    for (i, g) in groups.iter().enumerate() {
        if held_out.contains(g) {
            valid.push(i)
        } else {
            train.push(i)
        }
    }
    (train, valid)
}

/// The distinct groups, sorted.
fn distinct_groups<'a>(groups: &[&'a str]) -> Vec<&'a str> {
    let mut distinct = groups.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    distinct
}

/// Number of distinct groups among `groups`.
pub fn count_groups(groups: &[&str]) -> usize {
    distinct_groups(groups).len()
}

/// K-fold cross-validation by group: distinct groups, ranked by their seeded hash, are dealt
/// round-robin into `folds` folds; `fold` (0-based) is held out. Over `fold = 0..folds` every
/// group is held out exactly once and no group is ever on both sides. Returns (train, valid)
/// positions; `valid` is empty when there are fewer groups than folds and `fold` got none (callers
/// check [`count_groups`] first).
pub fn fold_by_group(groups: &[&str], folds: usize, fold: usize, seed: u64) -> (Vec<usize>, Vec<usize>) {
    let folds = folds.max(1);
    let held_out: std::collections::HashSet<&str> = rank_groups(&distinct_groups(groups), seed)
        .into_iter()
        .enumerate()
        .filter(|(r, _)| r % folds == fold)
        .map(|(_, g)| g)
        .collect();
    partition(groups, &held_out)
}

/// FNV-1a offset basis.
pub const FNV_OFFSET: u64 = 0xcbf29ce484222325;

/// Fold `bytes` into an FNV-1a state (stable across platforms and versions).
pub fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// A deterministic hash of `s` mapped to [0, 1) (seeded FNV-1a with a final mix).
fn unit_hash(s: &str, seed: u64) -> f64 {
    let mut h = fnv1a(FNV_OFFSET ^ seed.wrapping_mul(0x9E3779B97F4A7C15), s.as_bytes());
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51afd7ed558ccd);
    h ^= h >> 33;
    (h >> 11) as f64 / (1u64 << 53) as f64
}
