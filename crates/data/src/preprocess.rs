//! Preprocessing shared by training and inference (one code path: no train/serve skew).
//!
//! Two stages, so the expensive, deterministic part can be cached:
//! 1. [`Preprocessor::normalize`]: landmark subset selection, dropping frames where every kept
//!    point is missing, centring on the NaN-mean of a reference point and scaling by the NaN-std of
//!    all kept coordinates. Output: a smaller [`Sample`] (still NaN where data is missing).
//! 2. [`Preprocessor::finish`]: coordinate choice, fitting to the window (resample or crop, pad
//!    with a mask), first and second time differences, NaN -> 0.
//!
//! Augmentation ([`crate::augment`]) runs between the two, in normalized coordinates.

use std::path::Path;

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::error::{DataError, Result};
use crate::layout::{mirror_map, named_subset, NUM_LANDMARKS, REFERENCE_POINT};
use crate::sequence::{FeatureSequence, LandmarkSequence, Prepared, Sample};

/// Coordinates kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Coords {
    /// x and y.
    Xy,
    /// x, y and z.
    Xyz,
}

/// What to do with sequences longer than the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LongSequences {
    /// Linear resampling in time to exactly `window` frames.
    Resize,
    /// A `window`-frame crop: random during training, centred otherwise.
    Crop,
}

/// The `[preprocess]` section of experiment configs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PreprocessConfig {
    /// Landmark subsets by name (`lips`, `hands`, `left_hand`, `right_hand`, `nose`, `eyes`,
    /// `left_eye`, `right_eye`, `pose`, `face`) or index (`"17"`, `"500-510"`); empty = all points.
    pub landmarks: Vec<String>,
    /// Coordinates kept.
    pub coords: Coords,
    /// Centre on the reference point and divide by the coordinate std of the sequence.
    pub normalize: bool,
    /// Flattened index of the reference point (face 17, below the lips, in the 543 layout); when
    /// the sequence has fewer points, the mean of all kept points is used.
    pub reference_point: usize,
    /// Append x[t+1]-x[t] and x[t+2]-x[t] (zero at the end) to each frame.
    pub time_differences: bool,
    /// Frames per model input; shorter sequences are padded and masked.
    pub window: usize,
    /// How longer sequences are shortened to `window`.
    pub long_sequences: LongSequences,
    /// Drop frames in which every kept point is missing.
    pub drop_empty_frames: bool,
    /// `.pose` files only: the components to read, concatenated in this order (e.g.
    /// `["pose_keypoints_2d", "hand_left_keypoints_2d"]` for OpenPose); empty = MediaPipe Holistic
    /// mapped onto the 543-point layout.
    pub pose_components: Vec<String>,
}

impl Default for PreprocessConfig {
    fn default() -> Self {
        Self {
            landmarks: ["lips", "hands", "nose", "eyes"].map(String::from).to_vec(),
            coords: Coords::Xy,
            normalize: true,
            reference_point: REFERENCE_POINT,
            time_differences: true,
            window: 64,
            long_sequences: LongSequences::Resize,
            drop_empty_frames: true,
            pose_components: Vec::new(),
        }
    }
}

impl PreprocessConfig {
    /// Check values that serde cannot; errors name the key.
    pub fn validate(&self) -> Result<()> {
        if self.window == 0 || self.window > 4096 {
            return Err(DataError::Config {
                key: "preprocess.window".into(),
                message: format!("must be in 1..=4096, got {}", self.window),
            });
        }
        for name in &self.landmarks {
            if named_subset(name).is_none() {
                return Err(DataError::Config {
                    key: "preprocess.landmarks".into(),
                    message: format!(
                        "unknown subset `{name}`; expected lips, hands, left_hand, right_hand, nose, eyes, left_eye, right_eye, pose, face, an index or a range A-B below {}", crate::layout::MAX_POINTS
                    ),
                });
            }
        }
        Ok(())
    }
}

/// A validated [`PreprocessConfig`] with its landmark indices resolved.
#[derive(Debug, Clone)]
pub struct Preprocessor {
    /// The settings.
    pub config: PreprocessConfig,
    /// Selected flattened indices, deduplicated, in config order; empty = all.
    indices: Vec<usize>,
}

impl Preprocessor {
    /// A preprocessor for `config` (checked).
    pub fn new(config: PreprocessConfig) -> Result<Self> {
        config.validate()?;
        let mut indices = Vec::new();
        let mut seen = vec![false; crate::layout::MAX_POINTS];
        for name in &config.landmarks {
            for i in named_subset(name).expect("validated") {
                if !std::mem::replace(&mut seen[i], true) {
                    indices.push(i);
                }
            }
        }
        Ok(Self { config, indices })
    }

    fn indices_for(&self, points: usize, path: &Path) -> Result<Vec<usize>> {
        if self.indices.is_empty() {
            return Ok((0..points).collect());
        }
        if let Some(&bad) = self.indices.iter().find(|&&i| i >= points) {
            return Err(DataError::invalid(
                path,
                format!(
                    "has {points} landmarks per frame but preprocess.landmarks selects index {bad}; expected {NUM_LANDMARKS} (MediaPipe Holistic) or a subset within {points}"
                ),
            ));
        }
        Ok(self.indices.clone())
    }

    /// The landmarks kept (flattened indices, in feature order) from input of `points`
    /// landmarks per frame (all of them when `landmarks` is empty).
    pub fn kept_indices(&self, points: usize) -> Vec<usize> {
        if self.indices.is_empty() {
            (0..points).collect()
        } else {
            self.indices.clone()
        }
    }

    /// Number of landmarks kept for input of `points` landmarks.
    pub fn kept_points(&self, points: usize) -> usize {
        if self.indices.is_empty() {
            points
        } else {
            self.indices.len()
        }
    }

    /// Model input features per frame for samples of this kind and width.
    pub fn output_features(&self, sample_is_landmarks: bool, width: usize) -> usize {
        let base = if sample_is_landmarks {
            self.kept_points(width) * if self.config.coords == Coords::Xy { 2 } else { 3 }
        } else {
            width
        };
        if self.config.time_differences {
            base * 3
        } else {
            base
        }
    }

    /// For augmentation: the mirror partner of each kept point (within the kept points).
    pub fn mirror_of_kept(&self, points: usize) -> Vec<usize> {
        let kept: Vec<usize> = if self.indices.is_empty() { (0..points).collect() } else { self.indices.clone() };
        if points != NUM_LANDMARKS {
            return (0..kept.len()).collect();
        }
        let m = mirror_map();
        kept.iter().enumerate().map(|(pos, &i)| kept.iter().position(|&j| j == m[i]).unwrap_or(pos)).collect()
    }

    /// Stage 1: select, drop empty frames, normalize. Deterministic; safe to cache.
    pub fn normalize(&self, sample: &Sample, path: &Path) -> Result<Sample> {
        match sample {
            Sample::Landmarks(seq) => self.normalize_landmarks(seq, path).map(Sample::Landmarks),
            Sample::Features(seq) => {
                let mut keep = Vec::with_capacity(seq.frames());
                for f in 0..seq.frames() {
                    let row = &seq.data[f * seq.features..(f + 1) * seq.features];
                    keep.push(!self.config.drop_empty_frames || row.iter().any(|v| !v.is_nan()));
                }
                let data: Vec<f32> = seq
                    .data
                    .chunks_exact(seq.features.max(1))
                    .zip(&keep)
                    .filter(|(_, k)| **k)
                    .flat_map(|(r, _)| r.iter().copied())
                    .collect();
                if data.is_empty() {
                    return Err(DataError::EmptySequence {
                        path: path.to_path_buf(),
                        detail: ": every frame is entirely NaN".into(),
                    });
                }
                Ok(Sample::Features(FeatureSequence { features: seq.features, data }))
            }
        }
    }

    /// Which frames of `seq` become rows of the model input (before any resampling to the
    /// window): all of them, or with `drop_empty_frames` those with a kept landmark. Lets a
    /// caller map input rows back to its own frame numbers.
    pub fn kept_frames(&self, seq: &LandmarkSequence, path: &Path) -> Result<Vec<bool>> {
        let mut sel = seq.select(&self.indices_for(seq.points, path)?);
        sel.xyz.iter_mut().filter(|v| v.is_infinite()).for_each(|v| *v = f32::NAN);
        Ok(self.kept_of_selected(&sel))
    }

    /// [`Self::kept_frames`] of already selected landmarks (infinities already missing).
    fn kept_of_selected(&self, sel: &LandmarkSequence) -> Vec<bool> {
        (0..sel.frames()).map(|f| !self.config.drop_empty_frames || sel.frame_has_data(f)).collect()
    }

    fn normalize_landmarks(&self, seq: &LandmarkSequence, path: &Path) -> Result<LandmarkSequence> {
        if seq.frames() == 0 {
            return Err(DataError::EmptySequence { path: path.to_path_buf(), detail: String::new() });
        }
        let indices = self.indices_for(seq.points, path)?;
        // Reference: NaN-mean over frames of the reference point, taken before dropping anything.
        let reference = if seq.points > self.config.reference_point {
            let mut sum = [0f64; 3];
            let mut n = [0usize; 3];
            for f in 0..seq.frames() {
                let v = seq.at(f, self.config.reference_point);
                for k in 0..3 {
                    if v[k].is_finite() {
                        sum[k] += v[k] as f64;
                        n[k] += 1;
                    }
                }
            }
            Some([0, 1, 2].map(|k| if n[k] > 0 { (sum[k] / n[k] as f64) as f32 } else { 0.5 }))
        } else {
            None
        };
        let mut sel = seq.select(&indices);
        // An infinite coordinate is a broken measurement: it is treated as missing, like NaN, so
        // it cannot spread through the normalization into the features or the loss.
        sel.xyz.iter_mut().filter(|v| v.is_infinite()).for_each(|v| *v = f32::NAN);
        if self.config.drop_empty_frames {
            let keep = self.kept_of_selected(&sel);
            sel.retain_frames(&keep);
        }
        if sel.frames() == 0 {
            return Err(DataError::EmptySequence {
                path: path.to_path_buf(),
                detail: ": every frame is missing all selected landmarks".into(),
            });
        }
        if self.config.normalize {
            let reference = reference.unwrap_or_else(|| nan_mean_points(&sel));
            let dims = if self.config.coords == Coords::Xy { 2 } else { 3 };
            for c in sel.xyz.chunks_exact_mut(3) {
                for k in 0..3 {
                    c[k] -= reference[k];
                }
            }
            let (mut s, mut s2, mut n) = (0f64, 0f64, 0usize);
            for c in sel.xyz.chunks_exact(3) {
                for &v in &c[..dims] {
                    if !v.is_nan() {
                        s += v as f64;
                        s2 += (v as f64) * (v as f64);
                        n += 1;
                    }
                }
            }
            if n > 1 {
                let mean = s / n as f64;
                let std = ((s2 / n as f64) - mean * mean).max(0.0).sqrt();
                if std > 1e-6 {
                    let inv = (1.0 / std) as f32;
                    sel.xyz.iter_mut().for_each(|v| *v *= inv);
                }
            }
        }
        Ok(sel)
    }

    /// Stage 2: coordinates, window, time differences, NaN -> 0. `rng` is used only for random
    /// crops of long sequences (training); `None` crops centred.
    pub fn finish<R: Rng>(&self, sample: &Sample, rng: Option<&mut R>) -> Prepared {
        let (frames, per_frame): (usize, Vec<f32>) = match sample {
            Sample::Landmarks(seq) => {
                let dims = if self.config.coords == Coords::Xy { 2 } else { 3 };
                let mut v = Vec::with_capacity(seq.frames() * seq.points * dims);
                for c in seq.xyz.chunks_exact(3) {
                    v.extend_from_slice(&c[..dims]);
                }
                (seq.frames(), v)
            }
            Sample::Features(seq) => (seq.frames(), seq.data.clone()),
        };
        let width = per_frame.len().checked_div(frames).unwrap_or(0);
        let window = self.config.window;
        let (fitted, valid) = fit_window(&per_frame, frames, width, window, self.config.long_sequences, rng);
        let out_width = if self.config.time_differences { width * 3 } else { width };
        let mut data = vec![0f32; window * out_width];
        for t in 0..valid {
            let row = &mut data[t * out_width..(t + 1) * out_width];
            let x = &fitted[t * width..(t + 1) * width];
            row[..width].copy_from_slice(x);
            if self.config.time_differences {
                for (lag, block) in [(1usize, 1usize), (2, 2)] {
                    if t + lag < valid {
                        let next = &fitted[(t + lag) * width..(t + lag + 1) * width];
                        for i in 0..width {
                            row[block * width + i] = next[i] - x[i];
                        }
                    }
                }
            }
        }
        data.iter_mut().filter(|v| !v.is_finite()).for_each(|v| *v = 0.0);
        Prepared { window, features: out_width, valid, data }
    }

    /// Both stages without augmentation: what inference does with a raw sample.
    pub fn prepare(&self, sample: &Sample, path: &Path) -> Result<Prepared> {
        let normalized = self.normalize(sample, path)?;
        Ok(self.finish::<rand_chacha::ChaCha8Rng>(&normalized, None))
    }
}

fn nan_mean_points(seq: &LandmarkSequence) -> [f32; 3] {
    let mut sum = [0f64; 3];
    let mut n = [0usize; 3];
    for c in seq.xyz.chunks_exact(3) {
        for k in 0..3 {
            if !c[k].is_nan() {
                sum[k] += c[k] as f64;
                n[k] += 1;
            }
        }
    }
    [0, 1, 2].map(|k| if n[k] > 0 { (sum[k] / n[k] as f64) as f32 } else { 0.0 })
}

/// Fit `[frames, width]` to `window` frames; returns the data (`min(frames, window)` rows) and
/// the number of valid rows.
fn fit_window<R: Rng>(
    x: &[f32],
    frames: usize,
    width: usize,
    window: usize,
    mode: LongSequences,
    rng: Option<&mut R>,
) -> (Vec<f32>, usize) {
    if frames <= window {
        return (x.to_vec(), frames);
    }
    match mode {
        LongSequences::Crop => {
            let max_start = frames - window;
            let start = match rng {
                Some(r) => r.random_range(0..=max_start),
                None => max_start / 2,
            };
            (x[start * width..(start + window) * width].to_vec(), window)
        }
        LongSequences::Resize => (resample(x, frames, width, window), window),
    }
}

/// Linear resampling in time of `[frames, width]` to `[target, width]`; the first and last
/// frames are kept. NaN in either neighbour gives NaN (missing stays missing).
pub fn resample(x: &[f32], frames: usize, width: usize, target: usize) -> Vec<f32> {
    let mut out = vec![0f32; target * width];
    if frames == 0 || target == 0 {
        return out;
    }
    for t in 0..target {
        let pos = if target == 1 { 0.0 } else { t as f64 * (frames - 1) as f64 / (target - 1) as f64 };
        let i0 = pos.floor() as usize;
        let i1 = (i0 + 1).min(frames - 1);
        let w = (pos - i0 as f64) as f32;
        for j in 0..width {
            let a = x[i0 * width + j];
            let b = x[i1 * width + j];
            out[t * width + j] = if w == 0.0 { a } else { a + (b - a) * w };
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp(frames: usize, points: usize) -> LandmarkSequence {
        let mut s = LandmarkSequence::empty(frames, points);
        for f in 0..frames {
            for p in 0..points {
                s.set(f, p, [f as f32, p as f32, 0.0]);
            }
        }
        s
    }

    #[test]
    fn resample_keeps_endpoints_and_interpolates() {
        let x: Vec<f32> = (0..5).map(|v| v as f32 * 10.0).collect();
        let y = resample(&x, 5, 1, 9);
        assert_eq!(y, vec![0.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 35.0, 40.0]);
        let z = resample(&x, 5, 1, 3);
        assert_eq!(z, vec![0.0, 20.0, 40.0]);
    }

    #[test]
    fn short_sequence_is_padded_with_mask_and_differences() {
        let cfg = PreprocessConfig { landmarks: vec!["0-1".into()], normalize: false, window: 6, ..Default::default() };
        let p = Preprocessor::new(cfg).unwrap();
        let out = p.prepare(&Sample::Landmarks(ramp(4, 3)), Path::new("t")).unwrap();
        assert_eq!((out.window, out.features, out.valid), (6, 12, 4));
        assert_eq!(out.pad_mask(), vec![false, false, false, false, true, true]);
        // frame 1: positions (1,0),(1,1); d1 = +1 in x; d2 = +2 in x.
        assert_eq!(&out.data[12..24], &[1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 2.0, 0.0, 2.0, 0.0]);
        // last valid frame has zero differences; padding is all zero.
        assert_eq!(&out.data[3 * 12 + 4..4 * 12], &[0.0; 8]);
        assert!(out.data[4 * 12..].iter().all(|v| *v == 0.0));
    }

    #[test]
    fn normalization_centres_on_reference_and_scales_to_unit_std() {
        let mut s = LandmarkSequence::empty(3, 543);
        for f in 0..3 {
            s.set(f, 17, [0.5, 0.5, 0.0]);
            s.set(f, 468, [0.7, 0.1 + f as f32 * 0.1, 0.0]);
        }
        let cfg = PreprocessConfig {
            landmarks: vec!["17".into(), "468".into()],
            time_differences: false,
            ..Default::default()
        };
        let p = Preprocessor::new(cfg).unwrap();
        let Sample::Landmarks(n) = p.normalize(&Sample::Landmarks(s), Path::new("t")).unwrap() else { panic!() };
        assert_eq!(n.at(0, 0), [0.0, 0.0, 0.0]);
        let vals: Vec<f64> = n.xyz.chunks_exact(3).flat_map(|c| [c[0] as f64, c[1] as f64]).collect();
        let mean = vals.iter().sum::<f64>() / vals.len() as f64;
        let var = vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / vals.len() as f64;
        assert!((var.sqrt() - 1.0).abs() < 1e-4, "std {}", var.sqrt());
    }

    #[test]
    fn infinite_coordinates_are_treated_as_missing_and_never_reach_the_features() {
        let (mut with_inf, mut with_nan) = (ramp(6, 543), ramp(6, 543));
        for (f, p) in [(1, 0), (2, 500), (4, 468), (5, 17)] {
            with_inf.set(f, p, [f32::INFINITY, f32::NEG_INFINITY, 1.0]);
            with_nan.set(f, p, [f32::NAN, f32::NAN, 1.0]);
        }
        let p = Preprocessor::new(PreprocessConfig::default()).unwrap();
        let a = p.prepare(&Sample::Landmarks(with_inf), Path::new("inf")).unwrap();
        let b = p.prepare(&Sample::Landmarks(with_nan), Path::new("nan")).unwrap();
        assert!(a.data.iter().all(|v| v.is_finite()));
        assert!(a.data.iter().any(|v| *v != 0.0), "the sequence keeps its content");
        assert_eq!(a.data, b.data, "an infinite coordinate is prepared like a missing one");
    }

    #[test]
    fn empty_frames_are_dropped_and_all_empty_is_an_error() {
        let mut s = ramp(5, 543);
        for p in 0..543 {
            s.set(2, p, [f32::NAN; 3]);
        }
        let p = Preprocessor::new(PreprocessConfig::default()).unwrap();
        let Sample::Landmarks(n) = p.normalize(&Sample::Landmarks(s), Path::new("t")).unwrap() else { panic!() };
        assert_eq!(n.frame_ids, vec![0, 1, 3, 4]);
        assert_eq!(n.points, 118);

        let err = p.prepare(&Sample::Landmarks(LandmarkSequence::empty(3, 543)), Path::new("seq.parquet")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "seq.parquet: empty sequence (no frames: every frame is missing all selected landmarks)"
        );
    }

    #[test]
    fn wrong_landmark_count_and_bad_config_are_errors() {
        let p = Preprocessor::new(PreprocessConfig::default()).unwrap();
        let err = p.prepare(&Sample::Landmarks(ramp(3, 75)), Path::new("a.npy")).unwrap_err().to_string();
        assert!(err.starts_with("a.npy: has 75 landmarks per frame but preprocess.landmarks selects index"), "{err}");
        for huge in ["0-2000000", "4096", "18446744073709551615"] {
            let err = Preprocessor::new(PreprocessConfig { landmarks: vec![huge.into()], ..Default::default() })
                .unwrap_err()
                .to_string();
            assert!(err.contains(&format!("unknown subset `{huge}`")) && err.contains("below 4096"), "{err}");
        }
        let err =
            Preprocessor::new(PreprocessConfig { landmarks: vec!["tail".into()], ..Default::default() }).unwrap_err();
        assert!(err.to_string().starts_with("config key `preprocess.landmarks`: unknown subset `tail`"), "{err}");
        let err = Preprocessor::new(PreprocessConfig { window: 0, ..Default::default() }).unwrap_err();
        assert_eq!(err.to_string(), "config key `preprocess.window`: must be in 1..=4096, got 0");
    }

    #[test]
    fn long_sequences_resize_or_crop() {
        let base = PreprocessConfig {
            landmarks: vec!["0".into()],
            normalize: false,
            time_differences: false,
            window: 4,
            ..Default::default()
        };
        let p = Preprocessor::new(base.clone()).unwrap();
        let out = p.prepare(&Sample::Landmarks(ramp(7, 1)), Path::new("t")).unwrap();
        let xs: Vec<f32> = out.data.chunks_exact(2).map(|c| c[0]).collect();
        assert_eq!(xs, vec![0.0, 2.0, 4.0, 6.0]);
        let p = Preprocessor::new(PreprocessConfig { long_sequences: LongSequences::Crop, ..base }).unwrap();
        let out = p.prepare(&Sample::Landmarks(ramp(7, 1)), Path::new("t")).unwrap();
        let xs: Vec<f32> = out.data.chunks_exact(2).map(|c| c[0]).collect();
        assert_eq!(xs, vec![1.0, 2.0, 3.0, 4.0]);
    }

    #[test]
    fn output_feature_count_matches_reference() {
        let p = Preprocessor::new(PreprocessConfig::default()).unwrap();
        assert_eq!(p.output_features(true, 543), 118 * 2 * 3);
        assert_eq!(p.output_features(false, 100), 300);
        let m = p.mirror_of_kept(543);
        assert_eq!(m.len(), 118);
        for (i, &j) in m.iter().enumerate() {
            assert_eq!(m[j], i);
        }
    }
}
