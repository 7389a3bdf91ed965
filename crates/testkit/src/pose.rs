//! Writing `.pose` files (pose-format's v0.2 layout, which `data::pose` reads), for tests that
//! need recordings in that format.

use std::path::Path;

use data::pose::{Component, PoseFile, HOLISTIC};
use data::sequence::LandmarkSequence;

/// Encode `pose` in the v0.2 layout (what pose-format writes).
pub fn encode(pose: &PoseFile) -> Vec<u8> {
    let mut out = Vec::new();
    let s = |out: &mut Vec<u8>, t: &str| {
        out.extend_from_slice(&(t.len() as u16).to_le_bytes());
        out.extend_from_slice(t.as_bytes());
    };
    out.extend_from_slice(&0.2f32.to_le_bytes());
    for d in pose.dimensions {
        out.extend_from_slice(&d.to_le_bytes());
    }
    out.extend_from_slice(&(pose.components.len() as u16).to_le_bytes());
    for c in &pose.components {
        s(&mut out, &c.name);
        s(&mut out, &c.format);
        for n in [c.points.len(), c.limbs.len(), c.colors.len()] {
            out.extend_from_slice(&(n as u16).to_le_bytes());
        }
        for p in &c.points {
            s(&mut out, p);
        }
        for (a, b) in &c.limbs {
            out.extend_from_slice(&a.to_le_bytes());
            out.extend_from_slice(&b.to_le_bytes());
        }
        for rgb in &c.colors {
            for v in rgb {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
    out.extend_from_slice(&pose.fps.to_le_bytes());
    out.extend_from_slice(&(pose.frames as u32).to_le_bytes());
    out.extend_from_slice(&(pose.people as u16).to_le_bytes());
    for v in pose.data.iter().chain(&pose.confidence) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// Write `pose` as a v0.2 `.pose` file.
pub fn write_pose(path: &Path, pose: &PoseFile) -> std::io::Result<()> {
    std::fs::write(path, encode(pose))
}

/// A Holistic `.pose` of `seq` (a `[frames, 543, 3]` sequence in normalised coordinates) as
/// pose-format writes it: pixels of a `width` x `height` image (a size of 0 keeps the
/// coordinates as they are), NaN points with confidence 0.
pub fn from_sequence(seq: &LandmarkSequence, fps: f32, width: u16, height: u16) -> PoseFile {
    let names = |n: usize| (0..n).map(|i| i.to_string()).collect::<Vec<_>>();
    let components: Vec<Component> = HOLISTIC
        .iter()
        .map(|(name, ty)| Component {
            name: name.to_string(),
            format: "XYZC".into(),
            points: names(ty.count()),
            limbs: Vec::new(),
            colors: vec![[255, 0, 0]],
        })
        .collect();
    let (mut data, mut confidence) = (Vec::new(), Vec::new());
    for f in 0..seq.frames() {
        for (_, ty) in HOLISTIC {
            for i in 0..ty.count() {
                let v = seq.at(f, ty.offset() + i);
                let missing = v.iter().any(|c| c.is_nan());
                let scale = |c: f32, s: u16| if s > 0 { c * s as f32 } else { c };
                let v = if missing { [0.0; 3] } else { [scale(v[0], width), scale(v[1], height), v[2]] };
                data.extend_from_slice(&v);
                confidence.push(if missing { 0.0 } else { 1.0 });
            }
        }
    }
    PoseFile {
        version: 0.2,
        dimensions: [width, height, 0],
        components,
        fps,
        frames: seq.frames(),
        people: 1,
        dims: 3,
        data,
        confidence,
    }
}
