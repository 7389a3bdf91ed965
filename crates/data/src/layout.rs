//! The MediaPipe Holistic landmark layout used by the ISLR data, and named landmark subsets.
//!
//! Flattened order (543 points): face 0-467, left hand 468-488, pose 489-521, right hand 522-542.

use serde::{Deserialize, Serialize};

/// The four landmark groups of MediaPipe Holistic, in flattened order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LandmarkType {
    /// 468 face-mesh points.
    Face,
    /// 21 left-hand points.
    LeftHand,
    /// 33 body-pose points.
    Pose,
    /// 21 right-hand points.
    RightHand,
}

/// Face-mesh points.
pub const FACE: usize = 468;
/// Points per hand.
pub const HAND: usize = 21;
/// Body-pose points.
pub const POSE: usize = 33;
/// Points of the Holistic layout (543).
pub const NUM_LANDMARKS: usize = FACE + HAND + POSE + HAND;

impl LandmarkType {
    /// Every type, in layout order.
    pub const ALL: [LandmarkType; 4] = [Self::Face, Self::LeftHand, Self::Pose, Self::RightHand];

    /// The name in ISLR parquet files (`face`, `left_hand`, `pose`, `right_hand`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Face => "face",
            Self::LeftHand => "left_hand",
            Self::Pose => "pose",
            Self::RightHand => "right_hand",
        }
    }

    /// The type of an ISLR `type` column value.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == s)
    }

    /// Index of this group's first point in the flattened layout.
    pub fn offset(self) -> usize {
        match self {
            Self::Face => 0,
            Self::LeftHand => FACE,
            Self::Pose => FACE + HAND,
            Self::RightHand => FACE + HAND + POSE,
        }
    }

    /// Points of this type.
    pub fn count(self) -> usize {
        match self {
            Self::Face => FACE,
            Self::LeftHand | Self::RightHand => HAND,
            Self::Pose => POSE,
        }
    }

    /// The group and in-group index of a flattened index.
    pub fn of_flat(index: usize) -> Option<(Self, usize)> {
        Self::ALL
            .into_iter()
            .find(|t| (t.offset()..t.offset() + t.count()).contains(&index))
            .map(|t| (t, index - t.offset()))
    }
}

/// Lips (40 face points) as used by the 1st-place ISLR solution; left/right halves mirror each
/// other position by position, the centre line maps to itself.
pub const LIPS_LEFT: [usize; 18] = [84, 181, 91, 146, 61, 185, 40, 39, 37, 87, 178, 88, 95, 78, 191, 80, 81, 82];
/// Right half of the lips (mirrors [`LIPS_LEFT`] position by position).
pub const LIPS_RIGHT: [usize; 18] =
    [314, 405, 321, 375, 291, 409, 270, 269, 267, 317, 402, 318, 324, 308, 415, 310, 311, 312];
/// Lip centre line (maps to itself).
pub const LIPS_CENTRE: [usize; 4] = [0, 17, 13, 14];
/// Nose points; 98 and 327 mirror each other.
pub const NOSE: [usize; 4] = [1, 2, 98, 327];
/// Eye contours; position k of one mirrors position k of the other.
pub const RIGHT_EYE: [usize; 16] = [33, 7, 163, 144, 145, 153, 154, 155, 133, 246, 161, 160, 159, 158, 157, 173];
/// Left eye contour.
pub const LEFT_EYE: [usize; 16] = [263, 249, 390, 373, 374, 380, 381, 382, 362, 466, 388, 387, 386, 385, 384, 398];
/// Face landmark used as the normalisation reference (chin, below the lips).
pub const REFERENCE_POINT: usize = 17;

/// MediaPipe pose mirror pairs (in-group indices); 0 (nose) maps to itself.
const POSE_PAIRS: [(usize, usize); 16] = [
    (1, 4),
    (2, 5),
    (3, 6),
    (7, 8),
    (9, 10),
    (11, 12),
    (13, 14),
    (15, 16),
    (17, 18),
    (19, 20),
    (21, 22),
    (23, 24),
    (25, 26),
    (27, 28),
    (29, 30),
    (31, 32),
];

/// The most landmarks per frame any layout has here (MediaPipe Holistic: 543); selections name
/// indices below it.
pub const MAX_POINTS: usize = 4096;

/// Flattened indices of a named subset: `lips`, `left_hand`, `right_hand`, `hands`, `nose`,
/// `left_eye`, `right_eye`, `eyes`, `pose`, `face`, a single index `"17"` or a range `"500-510"`
/// (inclusive). `None` for an unknown name.
///
/// Indices and ranges must be below [`MAX_POINTS`]: a selection comes from configs and model
/// cards, which are untrusted, and `0-2000000` must be refused, not enumerated.
pub fn named_subset(name: &str) -> Option<Vec<usize>> {
    let name = name.trim();
    let group = |t: LandmarkType| (t.offset()..t.offset() + t.count()).collect::<Vec<_>>();
    Some(match name {
        "lips" => LIPS_LEFT.iter().chain(&LIPS_RIGHT).chain(&LIPS_CENTRE).copied().collect(),
        "left_hand" => group(LandmarkType::LeftHand),
        "right_hand" => group(LandmarkType::RightHand),
        "hands" => [group(LandmarkType::LeftHand), group(LandmarkType::RightHand)].concat(),
        "nose" => NOSE.to_vec(),
        "left_eye" => LEFT_EYE.to_vec(),
        "right_eye" => RIGHT_EYE.to_vec(),
        "eyes" => LEFT_EYE.iter().chain(&RIGHT_EYE).copied().collect(),
        "pose" => group(LandmarkType::Pose),
        "face" => group(LandmarkType::Face),
        other => {
            if let Some((a, b)) = other.split_once('-') {
                let (a, b) = (a.trim().parse::<usize>().ok()?, b.trim().parse::<usize>().ok()?);
                if a > b || b >= MAX_POINTS {
                    return None;
                }
                (a..=b).collect()
            } else {
                let i = other.parse::<usize>().ok()?;
                if i >= MAX_POINTS {
                    return None;
                }
                vec![i]
            }
        }
    })
}

/// The horizontal mirror of each of the 543 flattened points: left/right hands, eyes, lips
/// halves, nostrils and pose sides swap; other face points map to themselves (their x is still
/// mirrored, but MediaPipe's face mesh has no simple left/right index table we rely on).
pub fn mirror_map() -> Vec<usize> {
    let mut m: Vec<usize> = (0..NUM_LANDMARKS).collect();
    let mut swap = |a: usize, b: usize| {
        m[a] = b;
        m[b] = a;
    };
    for i in 0..HAND {
        swap(LandmarkType::LeftHand.offset() + i, LandmarkType::RightHand.offset() + i);
    }
    for (a, b) in LEFT_EYE.iter().zip(&RIGHT_EYE) {
        swap(*a, *b);
    }
    for (a, b) in LIPS_LEFT.iter().zip(&LIPS_RIGHT) {
        swap(*a, *b);
    }
    swap(98, 327);
    for (a, b) in POSE_PAIRS {
        swap(LandmarkType::Pose.offset() + a, LandmarkType::Pose.offset() + b);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_offsets_cover_543_points() {
        assert_eq!(NUM_LANDMARKS, 543);
        assert_eq!(LandmarkType::RightHand.offset(), 522);
        assert_eq!(LandmarkType::of_flat(489), Some((LandmarkType::Pose, 0)));
        assert_eq!(LandmarkType::of_flat(542), Some((LandmarkType::RightHand, 20)));
        assert_eq!(LandmarkType::of_flat(543), None);
    }

    #[test]
    fn reference_subset_has_118_points() {
        let n: usize =
            ["lips", "hands", "nose", "left_eye", "right_eye"].iter().map(|s| named_subset(s).unwrap().len()).sum();
        assert_eq!(n, 118);
        assert_eq!(named_subset("3-5").unwrap(), vec![3, 4, 5]);
        assert_eq!(named_subset("5-3"), None);
        assert_eq!(named_subset("elbows"), None);
    }

    #[test]
    fn mirror_map_is_an_involution() {
        let m = mirror_map();
        for (i, &j) in m.iter().enumerate() {
            assert_eq!(m[j], i);
        }
        assert_eq!(m[468], 522);
        assert_eq!(m[33], 263);
        assert_eq!(m[489 + 11], 489 + 12);
        assert_eq!(m[17], 17);
    }
}
