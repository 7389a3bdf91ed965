//! Training-time augmentation, applied to normalized samples (between the two preprocessing
//! stages). Deterministic for a given RNG state: the loader seeds one RNG per (epoch, sample).

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::preprocess::resample;
use crate::sequence::{FeatureSequence, LandmarkSequence, Sample};

/// The `[augment]` section of experiment configs. Probabilities are per sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AugmentConfig {
    /// Augmentation on or off.
    pub enabled: bool,
    /// Horizontal flip: x -> -x around the reference point, left/right landmarks swapped.
    pub flip_prob: f32,
    /// Probability of the affine transform (scale, shear, shift, rotation).
    pub affine_prob: f32,
    /// Uniform scale range.
    pub scale: [f32; 2],
    /// Max absolute shear.
    pub shear: f32,
    /// Max absolute shift (normalized units).
    pub shift: f32,
    /// Max absolute rotation in degrees.
    pub rotation_deg: f32,
    /// Probability of a speed change.
    pub speed_prob: f32,
    /// Speed factor range: 2.0 plays twice as fast (half the frames).
    pub speed: [f32; 2],
    /// Probability of masking one span of frames.
    pub temporal_mask_prob: f32,
    /// Fraction of frames masked (one contiguous span).
    pub temporal_mask: [f32; 2],
    /// Probability of removing a block of landmarks.
    pub cutout_prob: f32,
    /// Fraction of landmarks removed (one contiguous block of kept points) for the whole sequence.
    pub cutout_fraction: f32,
    /// Probability of a temporal crop: only a contiguous part of the frames is kept (a sign
    /// without the rise from rest before it or the fall after it, as signs are inside
    /// continuous signing).
    pub crop_prob: f32,
    /// Share of the frames a crop keeps (at least 2 frames).
    pub crop: [f32; 2],
}

impl Default for AugmentConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            flip_prob: 0.5,
            affine_prob: 0.75,
            scale: [0.8, 1.2],
            shear: 0.15,
            shift: 0.1,
            rotation_deg: 30.0,
            speed_prob: 0.5,
            speed: [0.67, 1.5],
            temporal_mask_prob: 0.5,
            temporal_mask: [0.2, 0.4],
            cutout_prob: 0.2,
            cutout_fraction: 0.1,
            crop_prob: 0.0,
            crop: [0.7, 1.0],
        }
    }
}

/// An [`AugmentConfig`] bound to a landmark mirror table.
#[derive(Debug, Clone)]
pub struct Augmenter {
    /// The settings.
    pub config: AugmentConfig,
    /// For each kept landmark, its mirror partner (see `Preprocessor::mirror_of_kept`).
    mirror: Vec<usize>,
}

fn uniform<R: Rng>(rng: &mut R, lo: f32, hi: f32) -> f32 {
    if hi > lo {
        rng.random_range(lo..hi)
    } else {
        lo
    }
}

impl Augmenter {
    /// An augmenter for sequences whose kept points mirror by `mirror` (empty = no flip).
    pub fn new(config: AugmentConfig, mirror: Vec<usize>) -> Self {
        Self { config, mirror }
    }

    /// Augment `sample` in place.
    pub fn apply<R: Rng>(&self, sample: &mut Sample, rng: &mut R) {
        let c = &self.config;
        if !c.enabled {
            return;
        }
        // (No draw when crops are off: runs without them keep their augmentations.)
        if c.crop_prob > 0.0 && rng.random::<f32>() < c.crop_prob {
            match sample {
                Sample::Landmarks(seq) => {
                    let keep = crop_span(seq.frames(), c.crop, rng);
                    seq.retain_frames(&(0..seq.frames()).map(|f| keep.contains(&f)).collect::<Vec<_>>());
                }
                Sample::Features(seq) => {
                    let keep = crop_span(seq.frames(), c.crop, rng);
                    seq.data = seq.data[keep.start * seq.features..keep.end * seq.features].to_vec();
                }
            }
        }
        match sample {
            Sample::Landmarks(seq) => {
                if rng.random::<f32>() < c.flip_prob && self.mirror.len() == seq.points {
                    flip(seq, &self.mirror);
                }
                if rng.random::<f32>() < c.affine_prob {
                    self.affine(seq, rng);
                }
                if rng.random::<f32>() < c.cutout_prob {
                    cutout(seq, c.cutout_fraction, rng);
                }
                if rng.random::<f32>() < c.speed_prob {
                    let frames = seq.frames();
                    let target = self.speed_target(frames, rng);
                    seq.xyz = resample(&seq.xyz, frames, seq.points * 3, target);
                    seq.frame_ids = (0..target as i32).collect();
                }
                if rng.random::<f32>() < c.temporal_mask_prob {
                    let stride = seq.points * 3;
                    mask_span(&mut seq.xyz, stride, c.temporal_mask, rng);
                }
            }
            Sample::Features(seq) => {
                if rng.random::<f32>() < c.speed_prob {
                    let frames = seq.frames();
                    let target = self.speed_target(frames, rng);
                    *seq = FeatureSequence {
                        features: seq.features,
                        data: resample(&seq.data, frames, seq.features, target),
                    };
                }
                if rng.random::<f32>() < c.temporal_mask_prob {
                    mask_span(&mut seq.data, seq.features, c.temporal_mask, rng);
                }
            }
        }
    }

    /// Frame count after a random speed change of a `frames`-long sequence (at least 1).
    fn speed_target<R: Rng>(&self, frames: usize, rng: &mut R) -> usize {
        let factor = uniform(rng, self.config.speed[0], self.config.speed[1]);
        ((frames as f32 / factor).round() as usize).max(1)
    }

    fn affine<R: Rng>(&self, seq: &mut LandmarkSequence, rng: &mut R) {
        let c = &self.config;
        let s = uniform(rng, c.scale[0], c.scale[1]);
        let (shx, shy) = if rng.random::<bool>() {
            (uniform(rng, -c.shear, c.shear), 0.0)
        } else {
            (0.0, uniform(rng, -c.shear, c.shear))
        };
        let theta = uniform(rng, -c.rotation_deg, c.rotation_deg).to_radians();
        let (dx, dy) = (uniform(rng, -c.shift, c.shift), uniform(rng, -c.shift, c.shift));
        let (sin, cos) = theta.sin_cos();
        // M = R * Shear * S
        let m = [[s * (cos - sin * shy), s * (cos * shx - sin)], [s * (sin + cos * shy), s * (sin * shx + cos)]];
        for p in seq.xyz.chunks_exact_mut(3) {
            let (x, y) = (p[0], p[1]);
            p[0] = m[0][0] * x + m[0][1] * y + dx;
            p[1] = m[1][0] * x + m[1][1] * y + dy;
            p[2] *= s;
        }
    }
}

/// Mirror horizontally around x = 0 (normalized coordinates) and swap left/right points.
pub fn flip(seq: &mut LandmarkSequence, mirror: &[usize]) {
    let src = seq.clone();
    for f in 0..seq.frames() {
        for (p, &q) in mirror.iter().enumerate() {
            let v = src.at(f, q);
            seq.set(f, p, [-v[0], v[1], v[2]]);
        }
    }
}

fn cutout<R: Rng>(seq: &mut LandmarkSequence, fraction: f32, rng: &mut R) {
    let n = ((seq.points as f32 * fraction).round() as usize).clamp(1, seq.points);
    let start = rng.random_range(0..=seq.points - n);
    for f in 0..seq.frames() {
        for p in start..start + n {
            seq.set(f, p, [f32::NAN; 3]);
        }
    }
}

/// A random contiguous range of `frames` holding a share in `range` of them (at least 2
/// frames, all of them when there are fewer).
fn crop_span<R: Rng>(frames: usize, range: [f32; 2], rng: &mut R) -> std::ops::Range<usize> {
    let n = ((frames as f32 * uniform(rng, range[0], range[1])).round() as usize).clamp(2.min(frames), frames);
    let start = rng.random_range(0..=frames - n);
    start..start + n
}

fn mask_span<R: Rng>(data: &mut [f32], stride: usize, range: [f32; 2], rng: &mut R) {
    let frames = data.len().checked_div(stride).unwrap_or(0);
    let n = ((frames as f32 * uniform(rng, range[0], range[1])).round() as usize).min(frames.saturating_sub(1));
    if n == 0 {
        return;
    }
    let start = rng.random_range(0..=frames - n);
    data[start * stride..(start + n) * stride].iter_mut().for_each(|v| *v = f32::NAN);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn seq() -> LandmarkSequence {
        let mut s = LandmarkSequence::empty(10, 4);
        for f in 0..10 {
            for p in 0..4 {
                s.set(f, p, [p as f32 + 1.0, f as f32, 0.5]);
            }
        }
        s
    }

    #[test]
    fn flip_negates_x_and_swaps_partners() {
        let mut s = seq();
        flip(&mut s, &[1, 0, 2, 3]);
        assert_eq!(s.at(3, 0), [-2.0, 3.0, 0.5]);
        assert_eq!(s.at(3, 1), [-1.0, 3.0, 0.5]);
        assert_eq!(s.at(3, 2), [-3.0, 3.0, 0.5]);
        flip(&mut s, &[1, 0, 2, 3]);
        assert_eq!(s, seq());
    }

    #[test]
    fn deterministic_under_a_seed_and_different_across_seeds() {
        let aug = Augmenter::new(
            AugmentConfig { flip_prob: 1.0, affine_prob: 1.0, speed_prob: 1.0, ..Default::default() },
            vec![1, 0, 2, 3],
        );
        let run = |seed| {
            let mut s = Sample::Landmarks(seq());
            aug.apply(&mut s, &mut ChaCha8Rng::seed_from_u64(seed));
            s
        };
        let a = run(7);
        let b = run(7);
        let c = run(8);
        let bits = |s: &Sample| match s {
            Sample::Landmarks(l) => l.xyz.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            _ => unreachable!(),
        };
        assert_eq!(bits(&a), bits(&b));
        assert_ne!(bits(&a), bits(&c));
    }

    #[test]
    fn affine_with_identity_parameters_is_identity_and_rotation_preserves_norm() {
        let cfg = AugmentConfig { scale: [1.0, 1.0], shear: 0.0, shift: 0.0, rotation_deg: 0.0, ..Default::default() };
        let aug = Augmenter::new(cfg.clone(), vec![]);
        let mut s = seq();
        aug.affine(&mut s, &mut ChaCha8Rng::seed_from_u64(1));
        assert_eq!(s, seq());
        let aug = Augmenter::new(AugmentConfig { rotation_deg: 90.0, ..cfg }, vec![]);
        let mut s = seq();
        aug.affine(&mut s, &mut ChaCha8Rng::seed_from_u64(1));
        for f in 0..10 {
            for p in 0..4 {
                let (a, b) = (s.at(f, p), seq().at(f, p));
                let (na, nb) = (a[0].hypot(a[1]), b[0].hypot(b[1]));
                assert!((na - nb).abs() < 1e-4);
            }
        }
    }

    #[test]
    fn crops_keep_a_contiguous_share_of_the_frames() {
        let aug = Augmenter::new(AugmentConfig { crop_prob: 1.0, crop: [0.5, 0.5], ..Default::default() }, vec![]);
        let off = AugmentConfig {
            flip_prob: 0.0,
            affine_prob: 0.0,
            speed_prob: 0.0,
            temporal_mask_prob: 0.0,
            cutout_prob: 0.0,
            ..aug.config.clone()
        };
        let mut s = Sample::Landmarks(seq());
        Augmenter::new(off, vec![]).apply(&mut s, &mut ChaCha8Rng::seed_from_u64(5));
        let Sample::Landmarks(l) = s else { unreachable!() };
        assert_eq!(l.frames(), 5);
        let first = l.at(0, 0)[1] as usize;
        assert!(first <= 5);
        assert_eq!((0..5).map(|f| l.at(f, 0)[1] as usize).collect::<Vec<_>>(), (first..first + 5).collect::<Vec<_>>());
        assert_eq!(crop_span(1, [0.1, 0.1], &mut ChaCha8Rng::seed_from_u64(1)), 0..1);
        assert_eq!(crop_span(10, [0.01, 0.01], &mut ChaCha8Rng::seed_from_u64(1)).len(), 2);
    }

    #[test]
    fn temporal_mask_and_cutout_blank_the_expected_amount() {
        let mut data = vec![1.0f32; 100 * 2];
        mask_span(&mut data, 2, [0.3, 0.3], &mut ChaCha8Rng::seed_from_u64(3));
        assert_eq!(data.iter().filter(|v| v.is_nan()).count(), 30 * 2);
        let mut s = LandmarkSequence::empty(5, 20);
        s.xyz.iter_mut().for_each(|v| *v = 0.0);
        cutout(&mut s, 0.25, &mut ChaCha8Rng::seed_from_u64(3));
        assert_eq!(s.xyz.iter().filter(|v| v.is_nan()).count(), 5 * 5 * 3);
    }

    #[test]
    fn speed_changes_length() {
        let aug = Augmenter::new(
            AugmentConfig {
                speed_prob: 1.0,
                speed: [2.0, 2.0],
                flip_prob: 0.0,
                affine_prob: 0.0,
                temporal_mask_prob: 0.0,
                cutout_prob: 0.0,
                ..Default::default()
            },
            vec![],
        );
        let mut s = Sample::Landmarks(seq());
        aug.apply(&mut s, &mut ChaCha8Rng::seed_from_u64(0));
        assert_eq!(s.frames(), 5);
    }
}
