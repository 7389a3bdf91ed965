//! The `.pose` format of the sign-language-processing community's `pose-format` library
//! (spec v0.1 and v0.2), read into landmark sequences.
//!
//! Layout (little-endian): header `version f32; width, height, depth u16; components u16`, then
//! per component `name str; point_format str; points, limbs, colors u16; points × str;
//! limbs × (u16, u16); colors × (u16, u16, u16)` where `str` is a u16 length and UTF-8 bytes.
//! Body v0.2: `fps f32; frames u32; people u16`, v0.1: `fps u16; frames u16 (unreliable: the
//! count is derived from the body size); people u16`; then `data f32[frames, people, points,
//! dims]` and `confidence f32[frames, people, points]`, where `dims` is the longest point format
//! minus its confidence letter (`XYZC` → 3).
//!
//! Mapping onto SignFlow's 543-point Holistic layout ([`to_sequence`]): the MediaPipe Holistic
//! components `POSE_LANDMARKS` (33), `FACE_LANDMARKS` (468; extra iris points dropped),
//! `LEFT_HAND_LANDMARKS` and `RIGHT_HAND_LANDMARKS` (21 each) go to their groups; other
//! components (e.g. `POSE_WORLD_LANDMARKS`) are ignored. Files of another component set are read
//! by naming the components (`[preprocess] pose_components`): their points are concatenated in
//! that order. Person 0 is read; a point of confidence 0 is missing (NaN). x and y are divided by
//! the header's width and height (pose-format stores pixels), so Holistic files land in
//! MediaPipe's normalised coordinates like the ISLR data.

use std::path::Path;

use crate::error::{DataError, Result};
use crate::layout::{LandmarkType, NUM_LANDMARKS};
use crate::sequence::LandmarkSequence;

/// One component of a `.pose` header.
#[derive(Debug, Clone, PartialEq)]
pub struct Component {
    /// Its name, e.g. `LEFT_HAND_LANDMARKS`.
    pub name: String,
    /// Its point format, e.g. `XYZC` (the last letter `C` is the confidence).
    pub format: String,
    /// Point names.
    pub points: Vec<String>,
    /// Limbs (point index pairs).
    pub limbs: Vec<(u16, u16)>,
    /// Colours (RGB).
    pub colors: Vec<[u16; 3]>,
}

/// A decoded `.pose` file.
#[derive(Debug, Clone, PartialEq)]
pub struct PoseFile {
    /// Format version (0.1 or 0.2).
    pub version: f32,
    /// Image width, height and depth the coordinates refer to.
    pub dimensions: [u16; 3],
    /// Components, in file order.
    pub components: Vec<Component>,
    /// Frames per second.
    pub fps: f32,
    /// Frames.
    pub frames: usize,
    /// People per frame.
    pub people: usize,
    /// Coordinates per point.
    pub dims: usize,
    /// `[frames, people, points, dims]`.
    pub data: Vec<f32>,
    /// `[frames, people, points]`.
    pub confidence: Vec<f32>,
}

/// The MediaPipe Holistic component names and where they go in the 543 layout.
pub const HOLISTIC: [(&str, LandmarkType); 4] = [
    ("POSE_LANDMARKS", LandmarkType::Pose),
    ("FACE_LANDMARKS", LandmarkType::Face),
    ("LEFT_HAND_LANDMARKS", LandmarkType::LeftHand),
    ("RIGHT_HAND_LANDMARKS", LandmarkType::RightHand),
];

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> std::result::Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or_else(|| {
            format!("truncated at byte {}: {what} needs {n} bytes, {} left", self.at, self.bytes.len() - self.at)
        })?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u16(&mut self, what: &str) -> std::result::Result<u16, String> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self, what: &str) -> std::result::Result<u32, String> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn f32(&mut self, what: &str) -> std::result::Result<f32, String> {
        Ok(f32::from_bits(self.u32(what)?))
    }
    fn str(&mut self, what: &str) -> std::result::Result<String, String> {
        let n = self.u16(what)? as usize;
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec()).map_err(|_| format!("{what} is not UTF-8 text"))
    }
    fn f32s(&mut self, n: usize, what: &str) -> std::result::Result<Vec<f32>, String> {
        let bytes = n.checked_mul(4).ok_or_else(|| format!("{what}: size overflows"))?;
        let b = self.take(bytes, what)?;
        Ok(b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }
}

/// Read a `.pose` file.
pub fn read_pose(path: &Path) -> Result<PoseFile> {
    let bytes = crate::error::read_regular(path)?;
    decode(&bytes).map_err(|m| DataError::invalid(path, format!("not a readable .pose file: {m}")))
}

/// Decode a `.pose` image. Errors are messages; the caller adds the file name.
pub fn decode(bytes: &[u8]) -> std::result::Result<PoseFile, String> {
    let mut r = Reader { bytes, at: 0 };
    let version = r.f32("the version")?;
    let v = (version * 1000.0).round() as i32;
    if v != 100 && v != 200 {
        return Err(format!("version {version} not supported; expected 0.1 or 0.2"));
    }
    let dimensions = [r.u16("the width")?, r.u16("the height")?, r.u16("the depth")?];
    let count = r.u16("the component count")? as usize;
    // Not `with_capacity(count)`: the count is the file's word, the components it promises may
    // not be there (65,535 of them would reserve 7.5 MiB for a file of a few bytes).
    let mut components = Vec::new();
    for c in 0..count {
        let name = r.str(&format!("component {c}'s name"))?;
        let format = r.str(&format!("component `{name}`'s point format"))?;
        if format.len() < 2 {
            return Err(format!("component `{name}` has point format `{format}`; expected e.g. XYZC or XYC"));
        }
        let (np, nl, nc) = (r.u16("point count")?, r.u16("limb count")?, r.u16("colour count")?);
        let points =
            (0..np).map(|_| r.str(&format!("a point name of `{name}`"))).collect::<std::result::Result<_, _>>()?;
        let limbs =
            (0..nl).map(|_| Ok((r.u16("a limb")?, r.u16("a limb")?))).collect::<std::result::Result<_, String>>()?;
        let colors = (0..nc)
            .map(|_| Ok([r.u16("a colour")?, r.u16("a colour")?, r.u16("a colour")?]))
            .collect::<std::result::Result<_, String>>()?;
        components.push(Component { name, format, points, limbs, colors });
    }
    let points: usize = components.iter().map(|c| c.points.len()).sum();
    let dims = components.iter().map(|c| c.format.len() - 1).max().unwrap_or(0);
    let (fps, frames_field, people) = if v == 100 {
        let fps = r.u16("fps")? as f32;
        r.u16("the frame count")?;
        (fps, None, r.u16("the people count")? as usize)
    } else {
        let fps = r.f32("fps")?;
        let frames = r.u32("the frame count")? as usize;
        (fps, Some(frames), r.u16("the people count")? as usize)
    };
    // Each factor is at most 2^32 (points: 2^16 components of 2^16), so the product is checked.
    let per_person = points.checked_mul(dims + 1).and_then(|v| v.checked_mul(4));
    let per_frame = per_person
        .and_then(|v| v.checked_mul(people))
        .ok_or_else(|| format!("{people} people x {points} points x {} values a frame: size overflows", dims + 1))?;
    if per_frame == 0 && frames_field.unwrap_or(0) > 0 {
        return Err(format!(
            "declares {} frames but no points or people (components: {count}, people: {people})",
            frames_field.unwrap_or(0)
        ));
    }
    let left = bytes.len() - r.at;
    let frames = match frames_field {
        Some(f) => f,
        // v0.1's 16-bit frame count overflows on long videos; pose-format derives it from the size.
        None => left.checked_div(per_frame).unwrap_or(0),
    };
    let need = frames.checked_mul(per_frame).ok_or_else(|| format!("{frames} frames: size overflows"))?;
    if need > left {
        return Err(format!(
            "truncated body: {frames} frames x {people} people x {points} points x {} values need {need} bytes, {left} left",
            dims + 1
        ));
    }
    // `need` covers both (checked above), so these products cannot overflow.
    let data = r.f32s(frames * people * points * dims, "the data")?;
    let confidence = r.f32s(frames * people * points, "the confidence")?;
    Ok(PoseFile { version, dimensions, components, fps, frames, people, dims, data, confidence })
}

impl PoseFile {
    /// `name (points)` of every component, for messages.
    pub fn describe_components(&self) -> String {
        self.components.iter().map(|c| format!("{} ({})", c.name, c.points.len())).collect::<Vec<_>>().join(", ")
    }

    /// Index of the first point of each component in the file's point order.
    fn offsets(&self) -> Vec<usize> {
        self.components
            .iter()
            .scan(0, |acc, c| {
                let o = *acc;
                *acc += c.points.len();
                Some(o)
            })
            .collect()
    }

    /// (x, y, z) of `point` of person 0 in `frame`; NaN when its confidence is 0.
    fn point(&self, frame: usize, point: usize, points: usize) -> [f32; 3] {
        let base = frame * self.people * points + point;
        if self.confidence[base] == 0.0 {
            return [f32::NAN; 3];
        }
        let d = &self.data[base * self.dims..base * self.dims + self.dims];
        let (w, h) = (self.dimensions[0] as f32, self.dimensions[1] as f32);
        let scale = |v: f32, s: f32| if s > 0.0 { v / s } else { v };
        [
            scale(d[0], w),
            if self.dims > 1 { scale(d[1], h) } else { f32::NAN },
            if self.dims > 2 { d[2] } else { f32::NAN },
        ]
    }
}

/// Landmarks of person 0: with no `components`, the MediaPipe Holistic components mapped onto the
/// 543-point layout; otherwise the named components' points concatenated in that order.
pub fn to_sequence(path: &Path, pose: &PoseFile, components: &[String]) -> Result<LandmarkSequence> {
    if pose.people == 0 || pose.frames == 0 {
        return Err(DataError::EmptySequence {
            path: path.to_path_buf(),
            detail: format!(": {} frames of {} people", pose.frames, pose.people),
        });
    }
    let points: usize = pose.components.iter().map(|c| c.points.len()).sum();
    let offsets = pose.offsets();
    let find = |name: &str| pose.components.iter().position(|c| c.name == name);
    // (source component, target offset in the output, points taken)
    let mut plan: Vec<(usize, usize, usize)> = Vec::new();
    let width = if components.is_empty() {
        for (name, ty) in HOLISTIC {
            let Some(c) = find(name) else {
                return Err(DataError::invalid(
                    path,
                    format!(
                        "components {} are not MediaPipe Holistic (missing {name}); expected POSE_LANDMARKS, FACE_LANDMARKS, LEFT_HAND_LANDMARKS and RIGHT_HAND_LANDMARKS, or name the components to read in preprocess.pose_components",
                        pose.describe_components()
                    ),
                ));
            };
            let have = pose.components[c].points.len();
            if have < ty.count() {
                return Err(DataError::invalid(
                    path,
                    format!("component {name} has {have} points; the Holistic layout needs {}", ty.count()),
                ));
            }
            plan.push((c, ty.offset(), ty.count()));
        }
        NUM_LANDMARKS
    } else {
        let mut at = 0;
        for name in components {
            let c = find(name).ok_or_else(|| {
                DataError::invalid(
                    path,
                    format!(
                        "has no component `{name}` (preprocess.pose_components); it has {}",
                        pose.describe_components()
                    ),
                )
            })?;
            let n = pose.components[c].points.len();
            plan.push((c, at, n));
            at += n;
        }
        at
    };
    let mut seq = LandmarkSequence::empty(pose.frames, width);
    for f in 0..pose.frames {
        for &(c, to, n) in &plan {
            for i in 0..n {
                seq.set(f, to + i, pose.point(f, offsets[c] + i, points));
            }
        }
    }
    Ok(seq)
}

/// Read a `.pose` file as landmarks (see [`to_sequence`]).
pub fn read_pose_sequence(path: &Path, components: &[String]) -> Result<LandmarkSequence> {
    to_sequence(path, &read_pose(path)?, components)
}
