//! In-memory sequences: raw landmarks as read from disk, or generic per-frame feature vectors.

use serde::{Deserialize, Serialize};

/// The most frames one recording may have (11 minutes at 30 fps; ISLR clips have tens to
/// hundreds). Readers refuse more before allocating: a compressed file can declare millions of
/// rows in a few megabytes, and each ISLR frame takes 6.5 KB in memory.
pub const MAX_FRAMES: usize = 20_000;

/// Raw landmarks of one recording: `[frames, points, 3]` (x, y, z), `NaN` where the tracker found
/// nothing. `frame_ids` are the source frame numbers (they may have gaps).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LandmarkSequence {
    /// Points per frame.
    pub points: usize,
    /// Source frame numbers.
    pub frame_ids: Vec<i32>,
    /// `[frames, points, 3]`, row-major.
    pub xyz: Vec<f32>,
}

impl LandmarkSequence {
    /// An all-NaN sequence of `frames` x `points`.
    pub fn empty(frames: usize, points: usize) -> Self {
        Self { points, frame_ids: (0..frames as i32).collect(), xyz: vec![f32::NAN; frames * points * 3] }
    }

    /// Frames.
    pub fn frames(&self) -> usize {
        self.frame_ids.len()
    }

    /// The (x, y, z) of `point` in `frame`.
    #[inline]
    pub fn at(&self, frame: usize, point: usize) -> [f32; 3] {
        let i = (frame * self.points + point) * 3;
        [self.xyz[i], self.xyz[i + 1], self.xyz[i + 2]]
    }

    /// Set the (x, y, z) of `point` in `frame`.
    #[inline]
    pub fn set(&mut self, frame: usize, point: usize, v: [f32; 3]) {
        let i = (frame * self.points + point) * 3;
        self.xyz[i..i + 3].copy_from_slice(&v);
    }

    /// Keep only `indices` (in this order). Indices must be `< self.points`.
    pub fn select(&self, indices: &[usize]) -> LandmarkSequence {
        let mut xyz = Vec::with_capacity(self.frames() * indices.len() * 3);
        for f in 0..self.frames() {
            for &p in indices {
                xyz.extend_from_slice(&self.at(f, p));
            }
        }
        LandmarkSequence { points: indices.len(), frame_ids: self.frame_ids.clone(), xyz }
    }

    /// Keep only the frames for which `keep` is true.
    pub fn retain_frames(&mut self, keep: &[bool]) {
        let stride = self.points * 3;
        let mut xyz = Vec::with_capacity(self.xyz.len());
        let mut ids = Vec::with_capacity(self.frame_ids.len());
        for (f, &k) in keep.iter().enumerate() {
            if k {
                xyz.extend_from_slice(&self.xyz[f * stride..(f + 1) * stride]);
                ids.push(self.frame_ids[f]);
            }
        }
        self.xyz = xyz;
        self.frame_ids = ids;
    }

    /// Whether any coordinate of `frame` is a number.
    pub fn frame_has_data(&self, frame: usize) -> bool {
        let stride = self.points * 3;
        self.xyz[frame * stride..(frame + 1) * stride].iter().any(|v| !v.is_nan())
    }
}

/// Generic per-frame feature vectors `[frames, features]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeatureSequence {
    /// Features per frame.
    pub features: usize,
    /// `[frames, features]`, row-major.
    pub data: Vec<f32>,
}

impl FeatureSequence {
    /// Frames.
    pub fn frames(&self) -> usize {
        self.data.len().checked_div(self.features).unwrap_or(0)
    }
}

/// One loaded sample, before preprocessing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Sample {
    /// Landmark coordinates.
    Landmarks(LandmarkSequence),
    /// Per-frame feature vectors.
    Features(FeatureSequence),
}

impl Sample {
    /// Frames.
    pub fn frames(&self) -> usize {
        match self {
            Self::Landmarks(s) => s.frames(),
            Self::Features(s) => s.frames(),
        }
    }

    /// Landmark count for landmark samples, feature count for feature samples.
    pub fn width(&self) -> usize {
        match self {
            Self::Landmarks(s) => s.points,
            Self::Features(s) => s.features,
        }
    }
}

/// A preprocessed, fixed-length window: `[window, features]`, the first `valid` frames are real,
/// the rest padding (zeros, masked out by the models).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prepared {
    /// Frames in the window.
    pub window: usize,
    /// Features per frame.
    pub features: usize,
    /// Real frames at the start; the rest is padding.
    pub valid: usize,
    /// `[window, features]`, row-major.
    pub data: Vec<f32>,
}

impl Prepared {
    /// `true` for padding frames (Burn's convention: true = pad).
    pub fn pad_mask(&self) -> Vec<bool> {
        (0..self.window).map(|t| t >= self.valid).collect()
    }
}
