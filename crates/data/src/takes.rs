//! Continuous takes for scoring live recognition: recordings of several signs in a row with the
//! frames of every sign annotated, written as `NAME.npy` (`[frames, 543, 3]` f32) and
//! `NAME.events.csv` (the annotation format, read by `infer eval-stream`):
//! ```text
//! label,start_frame,end_frame
//! sign_03,5,38
//! ```
//! one line per sign, its first and last frame inclusive, in the recording's frame numbers.
//!
//! A dataset's own clips become takes with [`takes_from_dataset`] (a held-out signer's isolated
//! clips joined by hands-down pauses, as [`join_clips`] does for synthetic ones).
//!
//! Synthetic takes ([`generate_take`]) are signed by signers the synthetic training set never
//! has (ids from [`SynthConfig::signers`] up), in two kinds:
//! - with pauses: the isolated clips as the dataset records them, one after another, the hands
//!   out of view for `pause_frames` frames between them (a signer dropping the hands);
//! - without pauses (`pause_frames = 0`): signs co-articulated into one another by the sentence
//!   generator ([`crate::sentences`]), the hands moving from one sign's end to the next's start.

use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::dataset::read_sample;
use crate::error::{write_atomic, DataError, Result};
use crate::index::DatasetIndex;
use crate::layout::NUM_LANDMARKS;
use crate::preprocess::PreprocessConfig;
use crate::sentences::{generate_sentence, hands_down, SentenceConfig};
use crate::sequence::LandmarkSequence;
use crate::sequence::Sample;
use crate::synth::{generate_sequence, run_jobs, SynthConfig};

/// The annotations of `NAME.npy` are in `NAME` + this.
pub const ANNOTATION_SUFFIX: &str = ".events.csv";
/// The header line of an annotation file.
pub const ANNOTATION_HEADER: &str = "label,start_frame,end_frame";

/// The annotation file of a recording.
pub fn annotation_path(recording: &Path) -> PathBuf {
    let stem = recording.file_stem().unwrap_or_default().to_string_lossy();
    recording.with_file_name(format!("{stem}{ANNOTATION_SUFFIX}"))
}

/// An annotation file's text: the header, then `label,start,end` per sign.
pub fn annotation_text<'a>(signs: impl IntoIterator<Item = (&'a str, i64, i64)>) -> String {
    let mut text = format!("{ANNOTATION_HEADER}\n");
    for (label, start, end) in signs {
        text.push_str(&format!("{label},{start},{end}\n"));
    }
    text
}

/// How synthetic takes are made.
#[derive(Debug, Clone, PartialEq)]
pub struct TakeConfig {
    /// Signs per take.
    pub signs: usize,
    /// Frames with the hands out of view between two signs; 0 = co-articulated signs, no pause.
    pub pause_frames: usize,
    /// Frames with the hands out of view before the first sign and after the last.
    pub edge_frames: usize,
}

impl Default for TakeConfig {
    fn default() -> Self {
        Self { signs: 5, pause_frames: 10, edge_frames: 10 }
    }
}

/// One take: its landmarks and its signs as `(class, first frame, last frame)`.
#[derive(Debug, Clone)]
pub struct Take {
    /// `[frames, 543, 3]` landmarks, frame numbers `0..frames`.
    pub landmarks: LandmarkSequence,
    /// The signs in order: class, first and last frame (inclusive).
    pub signs: Vec<(usize, usize, usize)>,
}

/// Take `index` of `signer` (a pure function of the configs and the arguments).
pub fn generate_take(signs: &SynthConfig, cfg: &TakeConfig, signer: usize, index: usize) -> Take {
    if cfg.pause_frames > 0 {
        // Random signs, none the same as the one before it (that would be one long sign).
        let mut rng = ChaCha8Rng::seed_from_u64(signs.seed ^ 0x7A6E_5EED ^ ((signer as u64) << 32) ^ index as u64);
        let mut picked: Vec<usize> = Vec::with_capacity(cfg.signs);
        for _ in 0..cfg.signs {
            let mut c = rng.random_range(0..signs.classes);
            if signs.classes > 1 && picked.last() == Some(&c) {
                c = (c + 1 + rng.random_range(0..signs.classes - 1)) % signs.classes;
            }
            picked.push(c);
        }
        let clips: Vec<LandmarkSequence> = (picked.iter().enumerate())
            .map(|(k, &class)| generate_sequence(signs, class, signer, 100 + index * cfg.signs + k))
            .collect();
        let (landmarks, spans) = join_clips(&clips, cfg);
        return Take { landmarks, signs: picked.into_iter().zip(spans).map(|(c, (a, b))| (c, a, b)).collect() };
    }
    // The co-articulated sentence is one clip between the take's edges; its signs keep their spans.
    let sentence_cfg =
        SentenceConfig { min_signs: cfg.signs, max_signs: cfg.signs, pause_prob: 0.0, ..SentenceConfig::default() };
    let s = generate_sentence(signs, &sentence_cfg, signer, 50_000 + index);
    let (landmarks, _) = join_clips(std::slice::from_ref(&s.landmarks), cfg);
    let spans = s.spans.iter().map(|&(a, b)| (cfg.edge_frames + a, cfg.edge_frames + b - 1));
    Take { landmarks, signs: s.signs.into_iter().zip(spans).map(|(c, (a, b))| (c, a, b)).collect() }
}

/// Isolated clips (543-point landmarks, at least one frame each) as one recording: `edge_frames`
/// frames with the hands out of view, then each clip as recorded, `pause_frames` hands-down
/// frames between two (none: the clips butt-joined), `edge_frames` at the end. Returns the
/// recording (frame numbers `0..frames`) and each clip's first and last frame.
pub fn join_clips(clips: &[LandmarkSequence], cfg: &TakeConfig) -> (LandmarkSequence, Vec<(usize, usize)>) {
    let per = NUM_LANDMARKS * 3;
    let (mut out, mut spans) = (LandmarkSequence::empty(0, NUM_LANDMARKS), Vec::with_capacity(clips.len()));
    for (k, clip) in clips.iter().enumerate() {
        let gap = if k == 0 { cfg.edge_frames } else { cfg.pause_frames };
        let before = if out.xyz.is_empty() { &clip.xyz[..per] } else { &out.xyz[out.xyz.len() - per..] }.to_vec();
        hands_down(&mut out, gap, &before);
        let start = out.xyz.len() / per;
        out.xyz.extend_from_slice(&clip.xyz);
        spans.push((start, out.xyz.len() / per - 1));
    }
    if let Some(last) = out.xyz.len().checked_sub(per).map(|i| out.xyz[i..].to_vec()) {
        hands_down(&mut out, cfg.edge_frames, &last);
    }
    out.frame_ids = (0..(out.xyz.len() / per) as i32).collect();
    (out, spans)
}

/// Write `seq` as `path` (`.npy`, `[frames, points, 3]`) and its annotations beside it (`signs`:
/// label, first and last frame).
pub fn write_take<'a>(
    path: &Path,
    seq: &LandmarkSequence,
    signs: impl IntoIterator<Item = (&'a str, usize, usize)>,
) -> Result<()> {
    crate::npy::write_npy(path, &[seq.frames(), seq.points, 3], &seq.xyz)?;
    let rows = signs.into_iter().map(|(label, a, b)| (label, a as i64, b as i64));
    write_atomic(&annotation_path(path), annotation_text(rows).as_bytes())
}

/// Write `per_signer` takes of each of `signers` unseen signers (ids `signs.signers..`) under
/// `dir` as `take-<signer>-<index>.npy` with its annotations; returns the recordings.
pub fn write_takes(
    dir: &Path,
    signs: &SynthConfig,
    cfg: &TakeConfig,
    signers: usize,
    per_signer: usize,
    progress: bool,
) -> Result<Vec<PathBuf>> {
    signs.validate()?;
    if cfg.signs == 0 {
        return Err(DataError::Config { key: "signs".into(), message: "a take needs at least one sign".into() });
    }
    std::fs::create_dir_all(dir).map_err(|e| DataError::io(dir, e))?;
    let labels = signs.label_names();
    let jobs: Vec<(usize, usize)> =
        (0..signers).flat_map(|s| (0..per_signer).map(move |j| (signs.signers + s, j))).collect();
    run_jobs(&jobs, "takes", progress, |&(signer, j)| {
        let take = generate_take(signs, cfg, signer, j);
        let path = dir.join(format!("take-{signer}-{j:03}.npy"));
        write_take(&path, &take.landmarks, take.signs.iter().map(|&(c, a, b)| (labels[c].as_str(), a, b)))?;
        Ok(path)
    })
}

/// The clips of a dataset's signers `positions` (entries of `index`) as takes under `dir`: for
/// each signer, its clips in an order drawn from `seed` (no sign right after itself where the
/// signer's clips allow), `cfg.signs` to a take, joined by [`join_clips`], written as
/// `take-<signer>-<n>.npy` (the signer's name reduced to letters, digits, `-` and `_`, after
/// its ordinal) with annotations in the dataset's label names. Clips are read as the model
/// reads them (`pre`: `.pose` components); a clip that cannot be read or is not in the 543-point
/// layout is passed over and named in the returned list beside the takes.
pub fn takes_from_dataset(
    index: &DatasetIndex,
    positions: &[usize],
    pre: &PreprocessConfig,
    cfg: &TakeConfig,
    seed: u64,
    dir: &Path,
) -> Result<(Vec<PathBuf>, Vec<String>)> {
    if cfg.signs == 0 {
        return Err(DataError::Config { key: "signs".into(), message: "a take needs at least one sign".into() });
    }
    let mut signers: Vec<&str> = positions.iter().map(|&i| index.entries[i].group.as_str()).collect();
    signers.sort_unstable();
    signers.dedup();
    std::fs::create_dir_all(dir).map_err(|e| DataError::io(dir, e))?;
    let (mut written, mut skipped) = (Vec::new(), Vec::new());
    for (ordinal, signer) in signers.iter().enumerate() {
        let mut mine: Vec<usize> = positions.iter().copied().filter(|&i| index.entries[i].group == *signer).collect();
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (ordinal as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        for k in (1..mine.len()).rev() {
            mine.swap(k, rng.random_range(0..=k));
        }
        for k in 1..mine.len() {
            // A sign right after itself would be one long sign: swap a later, different one in.
            if index.entries[mine[k]].label == index.entries[mine[k - 1]].label {
                if let Some(j) =
                    (k + 1..mine.len()).find(|&j| index.entries[mine[j]].label != index.entries[mine[k]].label)
                {
                    mine.swap(k, j);
                }
            }
        }
        let (mut labels, mut clips) = (Vec::with_capacity(mine.len()), Vec::with_capacity(mine.len()));
        for &i in &mine {
            let e = &index.entries[i];
            match read_sample(index.format, &e.path, e.sequence, pre) {
                Ok(Sample::Landmarks(seq)) if seq.points == NUM_LANDMARKS && seq.frames() > 0 => {
                    labels.push(e.label);
                    clips.push(seq);
                }
                Ok(Sample::Landmarks(seq)) => skipped.push(format!(
                    "{}: {} points in {} frames; takes need the {NUM_LANDMARKS}-point layout and a frame",
                    e.describe(),
                    seq.points,
                    seq.frames()
                )),
                Ok(Sample::Features(_)) => {
                    skipped.push(format!("{}: feature vectors, not landmarks (a take needs landmarks)", e.describe()))
                }
                Err(err) => skipped.push(err.to_string()),
            }
        }
        let name: String =
            signer.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
        for (n, (chunk, chunk_labels)) in clips.chunks(cfg.signs).zip(labels.chunks(cfg.signs)).enumerate() {
            let (take, spans) = join_clips(chunk, cfg);
            let path = dir.join(format!("take-{ordinal:02}-{name}-{n:03}.npy"));
            let rows = chunk_labels.iter().zip(spans).map(|(&label, (a, b))| (index.labels[label].as_str(), a, b));
            write_take(&path, &take, rows)?;
            written.push(path);
        }
    }
    Ok((written, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signs() -> SynthConfig {
        SynthConfig { classes: 6, signers: 2, repetitions: 1, min_frames: 10, max_frames: 16, ..Default::default() }
    }

    #[test]
    fn takes_with_pauses_put_each_clip_between_hands_down_frames() {
        let cfg = TakeConfig { signs: 4, pause_frames: 7, edge_frames: 3 };
        let t = generate_take(&signs(), &cfg, 2, 1);
        assert_eq!(t.signs.len(), 4);
        assert_eq!(t.signs[0].1, 3);
        for w in t.signs.windows(2) {
            assert_eq!(w[1].1, w[0].2 + 1 + 7, "{:?}", t.signs);
        }
        let frames = t.landmarks.frames();
        assert_eq!(t.signs[3].2 + 1 + 3, frames);
        assert_eq!(t.landmarks.frame_ids, (0..frames as i32).collect::<Vec<_>>());
        let hand = crate::layout::named_subset("hands").unwrap()[0];
        let visible = |f: usize| !t.landmarks.at(f, hand)[0].is_nan();
        assert!(!visible(0) && !visible(t.signs[0].2 + 1) && !visible(frames - 1));
        // Deterministic.
        let again = generate_take(&signs(), &cfg, 2, 1);
        assert_eq!(again.signs, t.signs);
    }

    #[test]
    fn takes_without_pauses_are_co_articulated_and_written_with_annotations() {
        let cfg = TakeConfig { signs: 3, pause_frames: 0, edge_frames: 2 };
        let t = generate_take(&signs(), &cfg, 2, 0);
        assert_eq!(t.signs.len(), 3);
        assert_eq!(t.signs[0].1, 2);
        // Signs follow one another through a transition of a few frames, no pause.
        for w in t.signs.windows(2) {
            let gap = w[1].1 - w[0].2 - 1;
            assert!((2..=6).contains(&gap), "{:?}", t.signs);
        }
        let dir = tempfile::tempdir().unwrap();
        let written = write_takes(dir.path(), &signs(), &cfg, 2, 2, false).unwrap();
        assert_eq!(written.len(), 4);
        let text = std::fs::read_to_string(annotation_path(&written[0])).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], ANNOTATION_HEADER);
        assert_eq!(lines.len(), 4);
        assert!(written[0].file_name().unwrap().to_string_lossy().starts_with("take-2-000"));
    }
}
