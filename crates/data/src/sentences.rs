//! Synthetic continuous signing, for continuous recognition (CTC): sentences of the synthetic
//! signs of [`crate::synth`] signed one after another by one signer, with co-articulated
//! transitions (the hands move from where one sign ends to where the next begins) and pauses
//! (the hands hold still, or with `rest_prob` drop out of view: the signer rests between two
//! signs, which then rise from rest and may lose frames as isolated clips do), labelled as gloss
//! sequences.
//!
//! Written in the continuous npy layout ([`crate::index`]): `labels.csv` (`file, tokens,
//! group`), `vocabulary.txt` (the sign names, one per line) and
//! `sentences/<signer>/<id>.npy` (`[frames, 543, 3]` f32). The CSV is written last, atomically,
//! so an interrupted run never looks complete. Everything is a pure function of the seeds.

use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::error::{write_atomic, DataError, Result};
use crate::index::{GLOSS_LIST, NPY_CSV};
use crate::layout::NUM_LANDMARKS;
use crate::sequence::LandmarkSequence;
use crate::synth::{generate_sequence, run_jobs, SynthConfig};

/// How sentences are put together (`[sentences]`); the signs themselves and the signers come
/// from a [`SynthConfig`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SentenceConfig {
    /// Sentences recorded by each signer.
    pub per_signer: usize,
    /// Fewest signs in a sentence.
    pub min_signs: usize,
    /// Most signs in a sentence.
    pub max_signs: usize,
    /// Frames of the movement between two signs: `[shortest, longest]`.
    pub transition_frames: [usize; 2],
    /// Probability of a pause (hands held still) after a sign.
    pub pause_prob: f32,
    /// Frames of a pause: `[shortest, longest]`.
    pub pause_frames: [usize; 2],
    /// Probability that a pause is a rest: the hands out of view for the pause's frames, and the
    /// next sign recorded as an isolated clip is (rising from rest, with its dropped frames).
    pub rest_prob: f32,
}

impl Default for SentenceConfig {
    fn default() -> Self {
        Self {
            per_signer: 40,
            min_signs: 2,
            max_signs: 5,
            transition_frames: [2, 6],
            pause_prob: 0.3,
            pause_frames: [3, 10],
            rest_prob: 0.0,
        }
    }
}

impl SentenceConfig {
    /// Range checks; errors name the key.
    pub fn validate(&self) -> Result<()> {
        let err = |key: &str, message: String| Err(DataError::Config { key: format!("sentences.{key}"), message });
        if self.per_signer == 0 {
            return err("per_signer", "must be at least 1".into());
        }
        if self.min_signs == 0 || self.min_signs > self.max_signs {
            return err(
                "min_signs",
                format!("need 1 <= min_signs <= max_signs, got {}..{}", self.min_signs, self.max_signs),
            );
        }
        for (key, [lo, hi]) in [("transition_frames", self.transition_frames), ("pause_frames", self.pause_frames)] {
            if lo > hi || hi > 1000 {
                return err(
                    key,
                    format!("need [shortest, longest] with shortest <= longest <= 1000, got [{lo}, {hi}]"),
                );
            }
        }
        for (key, p) in [("pause_prob", self.pause_prob), ("rest_prob", self.rest_prob)] {
            if !(0.0..=1.0).contains(&p) {
                return err(key, format!("must be in [0, 1], got {p}"));
            }
        }
        Ok(())
    }
}

/// One generated sentence: its landmarks, its signs (classes of the [`SynthConfig`]) and where
/// each sign lies (`[first frame, end frame)`).
#[derive(Debug, Clone)]
pub struct Sentence {
    /// `[frames, 543, 3]` landmarks.
    pub landmarks: LandmarkSequence,
    /// Sign classes in order.
    pub signs: Vec<usize>,
    /// Frame span of each sign.
    pub spans: Vec<(usize, usize)>,
}

/// Sentence `index` of `signer` (a pure function of the two configs and the arguments).
pub fn generate_sentence(signs: &SynthConfig, cfg: &SentenceConfig, signer: usize, index: usize) -> Sentence {
    let mut rng = ChaCha8Rng::seed_from_u64(
        signs.seed ^ 0x5E47_E9CE ^ ((signer as u64) << 32) ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
    );
    let n = rng.random_range(cfg.min_signs..=cfg.max_signs);
    let classes: Vec<usize> = (0..n).map(|_| rng.random_range(0..signs.classes)).collect();
    // Signs inside a sentence start and end in signing space (no rest in between) and keep every
    // frame; the transitions below join them.
    let inner = SynthConfig { idle_fraction: 0.0, drop_frame_prob: 0.0, ..signs.clone() };
    let mut out = LandmarkSequence::empty(0, NUM_LANDMARKS);
    let mut spans = Vec::with_capacity(n);
    let mut after_rest = false;
    for (k, &class) in classes.iter().enumerate() {
        let seg = generate_sequence(if after_rest { signs } else { &inner }, class, signer, 1000 + index * 16 + k);
        if k > 0 && !after_rest {
            let frames = rng.random_range(cfg.transition_frames[0]..=cfg.transition_frames[1]);
            transition(&mut out, &seg, frames);
        }
        let start = out.frames();
        append(&mut out, &seg, 0..seg.frames());
        spans.push((start, out.frames()));
        after_rest = false;
        if k + 1 < n && rng.random::<f32>() < cfg.pause_prob {
            let frames = rng.random_range(cfg.pause_frames[0]..=cfg.pause_frames[1]);
            let per = NUM_LANDMARKS * 3;
            let held = out.xyz[out.xyz.len() - per..].to_vec();
            // (No draw without rests: sentences of configs that have none stay as they were.)
            after_rest = cfg.rest_prob > 0.0 && rng.random::<f32>() < cfg.rest_prob;
            if after_rest {
                hands_down(&mut out, frames, &held);
            } else {
                for _ in 0..frames {
                    out.xyz.extend_from_slice(&held);
                }
            }
            out.frame_ids.resize(out.xyz.len() / per, 0);
        }
    }
    out.frame_ids = (0..out.frames() as i32).collect();
    Sentence { landmarks: out, signs: classes, spans }
}

/// Append `n` frames repeating the frame `last` (`[543 * 3]`) with the hands out of view, to the
/// coordinates only (the caller numbers the frames).
pub fn hands_down(out: &mut LandmarkSequence, n: usize, last: &[f32]) {
    let hands = crate::layout::named_subset("hands").unwrap_or_default();
    let mut frame = last.to_vec();
    for &h in &hands {
        frame[h * 3..h * 3 + 3].fill(f32::NAN);
    }
    for _ in 0..n {
        out.xyz.extend_from_slice(&frame);
    }
}

/// Append frames `range` of `seq` to `out`.
fn append(out: &mut LandmarkSequence, seq: &LandmarkSequence, range: std::ops::Range<usize>) {
    let per = seq.points * 3;
    out.xyz.extend_from_slice(&seq.xyz[range.start * per..range.end * per]);
    out.frame_ids.extend(range.map(|f| seq.frame_ids[f]));
}

/// Append `frames` frames moving every point from the last frame of `out` to the first of `next`
/// (smoothstep in time; a point missing at one end holds its other end's position).
fn transition(out: &mut LandmarkSequence, next: &LandmarkSequence, frames: usize) {
    let Some(last) = out.frames().checked_sub(1) else { return };
    for i in 1..=frames {
        let u = i as f32 / (frames + 1) as f32;
        let w = u * u * (3.0 - 2.0 * u);
        for p in 0..NUM_LANDMARKS {
            let (a, b) = (out.at(last, p), next.at(0, p));
            let v = [0, 1, 2].map(|k| match (a[k].is_nan(), b[k].is_nan()) {
                (false, false) => a[k] + (b[k] - a[k]) * w,
                (true, false) => b[k],
                (false, true) => a[k],
                (true, true) => f32::NAN,
            });
            out.xyz.extend_from_slice(&v);
        }
        out.frame_ids.push(0);
    }
}

/// What [`generate`] wrote.
#[derive(Debug, Clone)]
pub struct GeneratedSentences {
    /// Where it was written.
    pub root: PathBuf,
    /// Sentences written.
    pub sentences: usize,
    /// The gloss vocabulary (sign names).
    pub glosses: Vec<String>,
}

/// Write a synthetic continuous dataset under `root` (created if needed); see the module docs.
pub fn generate(root: &Path, signs: &SynthConfig, cfg: &SentenceConfig, progress: bool) -> Result<GeneratedSentences> {
    signs.validate()?;
    cfg.validate()?;
    let glosses = signs.label_names();
    let jobs: Vec<(usize, usize)> = (0..signs.signers).flat_map(|s| (0..cfg.per_signer).map(move |j| (s, j))).collect();
    let rel_path = |s: usize, j: usize| format!("sentences/{}/{}.npy", 1000 + s, 200_000 + s * cfg.per_signer + j);
    crate::error::sweep_temp_files(root);
    for s in 0..signs.signers {
        let dir = root.join(format!("sentences/{}", 1000 + s));
        std::fs::create_dir_all(&dir).map_err(|e| DataError::io(&dir, e))?;
        crate::error::sweep_temp_files(&dir);
    }
    let results = run_jobs(&jobs, "sentences", progress, |&(s, j)| {
        let sentence = generate_sentence(signs, cfg, s, j);
        let seq = &sentence.landmarks;
        crate::npy::write_npy(&root.join(rel_path(s, j)), &[seq.frames(), seq.points, 3], &seq.xyz)?;
        Ok(sentence.signs)
    })?;
    let mut csv = String::from("file,tokens,group\n");
    for (&(s, j), signs) in jobs.iter().zip(&results) {
        let text: Vec<&str> = signs.iter().map(|&c| glosses[c].as_str()).collect();
        csv.push_str(&format!("{},{},{}\n", rel_path(s, j), text.join(" "), 1000 + s));
    }
    let mut list = String::from("# synthetic signs, one gloss per line\n");
    for g in &glosses {
        list.push_str(g);
        list.push('\n');
    }
    write_atomic(&root.join(GLOSS_LIST), list.as_bytes())?;
    write_atomic(&root.join(NPY_CSV), csv.as_bytes())?;
    Ok(GeneratedSentences { root: root.to_path_buf(), sentences: jobs.len(), glosses })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signs() -> SynthConfig {
        SynthConfig { classes: 6, signers: 2, repetitions: 1, min_frames: 10, max_frames: 16, ..Default::default() }
    }

    #[test]
    fn sentences_join_signs_with_transitions_and_pauses() {
        let cfg =
            SentenceConfig { pause_prob: 1.0, pause_frames: [4, 4], transition_frames: [3, 3], ..Default::default() };
        let s = generate_sentence(&signs(), &cfg, 1, 3);
        assert!((cfg.min_signs..=cfg.max_signs).contains(&s.signs.len()));
        assert_eq!(s.spans.len(), s.signs.len());
        // Sign k+1 starts after sign k's end, a 4-frame pause and a 3-frame transition.
        for w in s.spans.windows(2) {
            assert_eq!(w[1].0, w[0].1 + 4 + 3, "{:?}", s.spans);
        }
        assert_eq!(s.spans.last().unwrap().1, s.landmarks.frames());
        assert_eq!(s.landmarks.xyz.len(), s.landmarks.frames() * NUM_LANDMARKS * 3);
        assert_eq!(s.landmarks.frame_ids, (0..s.landmarks.frames() as i32).collect::<Vec<_>>());
        // Deterministic, and another sentence differs.
        let again = generate_sentence(&signs(), &cfg, 1, 3);
        assert_eq!(again.signs, s.signs);
        assert!(again.landmarks.xyz.iter().zip(&s.landmarks.xyz).all(|(a, b)| a.to_bits() == b.to_bits()));
        let other = generate_sentence(&signs(), &cfg, 1, 4);
        assert!(other.signs != s.signs || other.landmarks.frames() != s.landmarks.frames());
    }

    /// With `rest_prob = 1` every pause is the hands out of view, and the sign after it rises from
    /// rest without a transition.
    #[test]
    fn rests_drop_the_hands_out_of_view_between_signs() {
        let cfg = SentenceConfig {
            min_signs: 3,
            max_signs: 3,
            pause_prob: 1.0,
            rest_prob: 1.0,
            pause_frames: [5, 5],
            transition_frames: [3, 3],
            ..Default::default()
        };
        let s = generate_sentence(&signs(), &cfg, 1, 3);
        let hand = crate::layout::named_subset("hands").unwrap()[0];
        let visible = |f: usize| !s.landmarks.at(f, hand)[0].is_nan();
        for w in s.spans.windows(2) {
            assert_eq!(w[1].0, w[0].1 + 5, "a rest, no transition: {:?}", s.spans);
            assert!((w[0].1..w[1].0).all(|f| !visible(f)), "hands out of view during the rest");
        }
        assert_eq!(s.landmarks.frame_ids, (0..s.landmarks.frames() as i32).collect::<Vec<_>>());
        let held = generate_sentence(&signs(), &SentenceConfig { rest_prob: 0.0, ..cfg.clone() }, 1, 3);
        assert_eq!(held.spans[1].0, held.spans[0].1 + 5 + 3, "without rests: a held pause and a transition");
    }

    #[test]
    fn a_generated_dataset_opens_as_continuous_with_its_glosses() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = SentenceConfig { per_signer: 3, ..Default::default() };
        let g = generate(dir.path(), &signs(), &cfg, false).unwrap();
        assert_eq!(g.sentences, 6);
        let index = crate::index::open(dir.path()).unwrap();
        assert_eq!(index.continuous, Some(crate::tokens::Unit::Gloss));
        assert_eq!(index.labels[0], crate::index::BLANK_LABEL);
        assert_eq!(&index.labels[1..], &g.glosses[..]);
        assert_eq!(index.entries.len(), 6);
        let first = generate_sentence(&signs(), &cfg, 0, 0);
        // Class c of the synthetic signs is token c + 1 (0 is the blank).
        assert_eq!(index.entries[0].tokens, first.signs.iter().map(|c| c + 1).collect::<Vec<_>>());
        assert_eq!(index.entries[0].group, "1000");
        let sample = crate::npy::read_npy(&index.entries[0].path).unwrap();
        assert_eq!(sample.frames(), first.landmarks.frames());
    }

    #[test]
    fn config_errors_name_the_key() {
        let e = SentenceConfig { min_signs: 4, max_signs: 2, ..Default::default() }.validate().unwrap_err();
        assert!(e.to_string().contains("sentences.min_signs"), "{e}");
        let e = SentenceConfig { pause_frames: [5, 2], ..Default::default() }.validate().unwrap_err();
        assert!(e.to_string().contains("sentences.pause_frames"), "{e}");
    }
}
