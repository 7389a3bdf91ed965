//! Synthetic signs in the ISLR parquet layout, for the default run and for tests.
//!
//! Each class is a motion program of the hands, arms and lips: a wrist path (a Bezier curve plus
//! an oscillation), a hand shape that morphs from a start to an end configuration (finger curls,
//! spread, orientation), an optional second hand (mirrored or held still) and a mouth pattern.
//! Classes come in pairs whose programs are time reverses of each other, so a single frame cannot
//! tell a pair apart: a model has to use motion. Signers vary in size, position, speed, noise and
//! handedness (left-handed signers are mirrored); sequences have dropped frames and hands that
//! the tracker lost. Everything is a pure function of the seed.

use std::f32::consts::PI;
use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::error::{write_atomic, DataError, Result};
use crate::index::{ISLR_CSV, LABEL_MAP};
use crate::islr::{write_parquet_with, Codec};
use crate::layout::{
    mirror_map, LandmarkType, LEFT_EYE, LIPS_CENTRE, LIPS_LEFT, LIPS_RIGHT, NOSE, NUM_LANDMARKS, RIGHT_EYE,
};
use crate::sequence::LandmarkSequence;

/// Size and variability of a synthetic dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SynthConfig {
    /// Signs.
    pub classes: usize,
    /// Signers.
    pub signers: usize,
    /// Recordings of each class by each signer.
    pub repetitions: usize,
    /// Shortest recording, frames.
    pub min_frames: usize,
    /// Longest recording, frames.
    pub max_frames: usize,
    /// Generator seed.
    pub seed: u64,
    /// Per-coordinate tracking noise (std, image units) at the noisiest signer.
    pub noise: f32,
    /// Probability that a frame is missing from the recording (gap in frame numbers).
    pub drop_frame_prob: f32,
    /// Probability that the tracker loses a moving hand for a stretch of frames.
    pub lost_hand_prob: f32,
    /// Up to this share of a recording at each end shows the hands rising from / returning to rest.
    pub idle_fraction: f32,
    /// Largest departure of a signer's timing from linear (0 = constant speed).
    pub time_warp: f32,
    /// Parquet codec of the written files.
    pub compression: Codec,
}

impl Default for SynthConfig {
    fn default() -> Self {
        Self {
            classes: 20,
            signers: 8,
            repetitions: 6,
            min_frames: 20,
            max_frames: 60,
            seed: 7,
            noise: 0.006,
            drop_frame_prob: 0.05,
            lost_hand_prob: 0.25,
            idle_fraction: 0.2,
            time_warp: 0.2,
            compression: Codec::Snappy,
        }
    }
}

impl SynthConfig {
    /// Sequences the dataset holds.
    pub fn total(&self) -> usize {
        self.classes * self.signers * self.repetitions
    }

    /// Range checks; errors name the key.
    pub fn validate(&self) -> Result<()> {
        let err = |key: &str, message: String| Err(DataError::Config { key: format!("synthetic.{key}"), message });
        if self.classes < 2 {
            return err("classes", format!("need at least 2 classes, got {}", self.classes));
        }
        if self.signers == 0 || self.repetitions == 0 {
            return err("signers", "signers and repetitions must be at least 1".into());
        }
        if self.min_frames < 2 || self.min_frames > self.max_frames {
            return err(
                "min_frames",
                format!("need 2 <= min_frames <= max_frames, got {}..{}", self.min_frames, self.max_frames),
            );
        }
        if !(0.0..1.0).contains(&self.drop_frame_prob) || !(0.0..=1.0).contains(&self.lost_hand_prob) {
            return err("drop_frame_prob", "probabilities must be in [0, 1)".into());
        }
        if !(0.0..=0.45).contains(&self.idle_fraction) {
            return err("idle_fraction", format!("must be in [0, 0.45], got {}", self.idle_fraction));
        }
        if !(0.0..=0.5).contains(&self.time_warp) {
            return err("time_warp", format!("must be in [0, 0.5], got {}", self.time_warp));
        }
        Ok(())
    }

    /// Sign names: `sign_00`, `sign_01`, ...
    pub fn label_names(&self) -> Vec<String> {
        let width = (self.classes.saturating_sub(1)).to_string().len().max(2);
        (0..self.classes).map(|c| format!("sign_{c:0width$}")).collect()
    }
}

#[derive(Debug, Clone)]
struct HandShape {
    curls: [f32; 5],
    spread: f32,
    orientation: f32,
}

#[derive(Debug, Clone)]
struct Program {
    path: [[f32; 2]; 4],
    wiggle_amp: f32,
    wiggle_cycles: f32,
    wiggle_dir: f32,
    shape_start: HandShape,
    shape_end: HandShape,
    second_hand: SecondHand,
    mouth_amp: f32,
    mouth_cycles: f32,
    reversed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum SecondHand {
    Resting,
    Mirrored,
    Still([f32; 2]),
}

fn shape<R: Rng>(rng: &mut R) -> HandShape {
    HandShape {
        curls: [(); 5].map(|_| {
            if rng.random::<f32>() < 0.5 {
                rng.random_range(0.0..0.25)
            } else {
                rng.random_range(0.6..1.0)
            }
        }),
        spread: rng.random_range(0.0..1.0),
        orientation: rng.random_range(-0.8..0.8),
    }
}

/// Places where signs happen (image coordinates of the dominant wrist): forehead, eye, cheek,
/// chin, neck, chest, belly, side, neutral space in front.
const LOCATIONS: [[f32; 2]; 9] = [
    [0.47, 0.2],
    [0.44, 0.25],
    [0.4, 0.32],
    [0.48, 0.4],
    [0.47, 0.47],
    [0.45, 0.58],
    [0.47, 0.7],
    [0.33, 0.55],
    [0.4, 0.62],
];

fn program(seed: u64, class: usize) -> Program {
    // Pairs (2k, 2k+1) share a program; the odd one runs it backwards. Programs are built from a
    // small shared vocabulary of places and hand shapes, as real signs are, so classes overlap
    // in what any single frame shows.
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5EED_0000 ^ ((class / 2) as u64).wrapping_mul(0x9E37_79B9));
    let mut shapes_rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5A9E);
    let vocabulary: Vec<HandShape> = (0..8).map(|_| shape(&mut shapes_rng)).collect();
    let point = |rng: &mut ChaCha8Rng| {
        let p = LOCATIONS[rng.random_range(0..LOCATIONS.len())];
        [p[0] + rng.random_range(-0.03..0.03), p[1] + rng.random_range(-0.03..0.03)]
    };
    let (start, end) = (point(&mut rng), point(&mut rng));
    let mid = |rng: &mut ChaCha8Rng, a: [f32; 2], b: [f32; 2], w: f32| {
        [
            a[0] + (b[0] - a[0]) * w + rng.random_range(-0.06..0.06),
            a[1] + (b[1] - a[1]) * w + rng.random_range(-0.06..0.06),
        ]
    };
    let path = [start, mid(&mut rng, start, end, 0.33), mid(&mut rng, start, end, 0.67), end];
    let second_hand = match rng.random_range(0..3) {
        0 => SecondHand::Resting,
        1 => SecondHand::Mirrored,
        _ => SecondHand::Still([rng.random_range(0.55..0.7), rng.random_range(0.5..0.7)]),
    };
    Program {
        path,
        wiggle_amp: rng.random_range(0.0..0.05),
        wiggle_cycles: rng.random_range(0.5..3.0),
        wiggle_dir: rng.random_range(0.0..PI),
        shape_start: vocabulary[rng.random_range(0..vocabulary.len())].clone(),
        shape_end: vocabulary[rng.random_range(0..vocabulary.len())].clone(),
        second_hand,
        mouth_amp: rng.random_range(0.0..1.0),
        mouth_cycles: rng.random_range(0.5..3.0),
        reversed: class % 2 == 1,
    }
}

#[derive(Debug, Clone)]
struct Signer {
    scale: f32,
    offset: [f32; 2],
    speed: f32,
    left_handed: bool,
    noise: f32,
    /// Per-signer displacement of each path control point.
    style: [[f32; 2]; 4],
    /// How strongly this signer's timing departs from linear.
    warp: f32,
}

fn signer(seed: u64, id: usize, cfg: &SynthConfig) -> Signer {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x51C0_0000 ^ (id as u64).wrapping_mul(0xA24B_AED4_963E_E407));
    Signer {
        scale: rng.random_range(0.85..1.15),
        offset: [rng.random_range(-0.05..0.05), rng.random_range(-0.04..0.04)],
        speed: rng.random_range(0.8..1.25),
        left_handed: rng.random::<f32>() < 0.25,
        noise: cfg.noise * rng.random_range(0.4..1.0),
        style: [(); 4].map(|_| [rng.random_range(-0.04..0.04), rng.random_range(-0.04..0.04)]),
        warp: rng.random::<f32>() * cfg.time_warp,
    }
}

fn bezier(p: &[[f32; 2]; 4], t: f32) -> [f32; 2] {
    let u = 1.0 - t;
    let w = [u * u * u, 3.0 * u * u * t, 3.0 * u * t * t, t * t * t];
    [0, 1].map(|k| w.iter().zip(p).map(|(w, p)| w * p[k]).sum())
}

/// 21 hand points (MediaPipe order) for a wrist position and a shape; `side` = +1 for the
/// subject's right hand (image left), -1 for the left hand.
fn hand_points(wrist: [f32; 2], s: &HandShape, size: f32, side: f32) -> [[f32; 3]; 21] {
    let mut pts = [[0f32; 3]; 21];
    pts[0] = [wrist[0], wrist[1], 0.0];
    let seg = [0.035, 0.022, 0.016, 0.013];
    for finger in 0..5 {
        let base_angle = -PI / 2.0 + side * (s.orientation + (finger as f32 - 2.0) * (0.18 + 0.12 * s.spread));
        let (mut x, mut y) = (wrist[0], wrist[1]);
        let mut angle = if finger == 0 { base_angle - side * 0.5 } else { base_angle };
        for j in 0..4 {
            let len = seg[j] * size * if finger == 0 { 0.85 } else { 1.0 };
            x += len * angle.cos();
            y += len * angle.sin();
            pts[1 + finger * 4 + j] = [x, y, -0.01 * j as f32 * s.curls[finger]];
            angle += side * s.curls[finger] * 0.9;
        }
    }
    pts
}

fn lerp_shape(a: &HandShape, b: &HandShape, t: f32) -> HandShape {
    let l = |x: f32, y: f32| x + (y - x) * t;
    HandShape {
        curls: [0, 1, 2, 3, 4].map(|i| l(a.curls[i], b.curls[i])),
        spread: l(a.spread, b.spread),
        orientation: l(a.orientation, b.orientation),
    }
}

/// A fixed face template: 468 points in an oval, lips, eyes and nose where MediaPipe puts them.
fn face_template() -> Vec<[f32; 2]> {
    let mut rng = ChaCha8Rng::seed_from_u64(468);
    let mut face: Vec<[f32; 2]> = (0..468)
        .map(|_| {
            let a = rng.random_range(0.0..2.0 * PI);
            let r = rng.random_range(0.0f32..1.0).sqrt();
            [0.5 + 0.075 * r * a.cos(), 0.28 + 0.1 * r * a.sin()]
        })
        .collect();
    for (k, (&l, &r)) in LIPS_LEFT.iter().zip(&LIPS_RIGHT).enumerate() {
        let a = PI * (k as f32 + 0.5) / LIPS_LEFT.len() as f32 * 2.0;
        face[l] = [0.5 + 0.03 * a.cos().abs(), 0.345 + 0.01 * a.sin()];
        face[r] = [0.5 - 0.03 * a.cos().abs(), 0.345 + 0.01 * a.sin()];
    }
    for (k, &i) in LIPS_CENTRE.iter().enumerate() {
        face[i] = [0.5, [0.335, 0.37, 0.34, 0.35][k]];
    }
    for (k, (&l, &r)) in LEFT_EYE.iter().zip(&RIGHT_EYE).enumerate() {
        let a = 2.0 * PI * k as f32 / 16.0;
        face[l] = [0.535 + 0.015 * a.cos(), 0.255 + 0.006 * a.sin()];
        face[r] = [0.465 - 0.015 * a.cos(), 0.255 + 0.006 * a.sin()];
    }
    for (k, &i) in NOSE.iter().enumerate() {
        face[i] = [[0.5, 0.5, 0.515, 0.485][k], [0.3, 0.31, 0.305, 0.305][k]];
    }
    face
}

/// Generate one recording of `class` by `signer_id`.
pub fn generate_sequence(cfg: &SynthConfig, class: usize, signer_id: usize, repetition: usize) -> LandmarkSequence {
    let prog = program(cfg.seed, class);
    let who = signer(cfg.seed, signer_id, cfg);
    let mut rng = ChaCha8Rng::seed_from_u64(
        cfg.seed ^ ((class as u64) << 40) ^ ((signer_id as u64) << 20) ^ repetition as u64 ^ 0xF00D,
    );
    let mid = (cfg.min_frames + cfg.max_frames) as f32 / 2.0;
    let frames =
        ((mid * who.speed * rng.random_range(0.8f32..1.25)).round() as usize).clamp(cfg.min_frames, cfg.max_frames);
    let face = face_template();
    let pose_off = LandmarkType::Pose.offset();
    let right = LandmarkType::RightHand.offset();
    let left = LandmarkType::LeftHand.offset();
    let lost: Option<(usize, usize)> = (rng.random::<f32>() < cfg.lost_hand_prob).then(|| {
        let len = rng.random_range(1..=frames / 3 + 1);
        let start = rng.random_range(0..frames.saturating_sub(len).max(1));
        (start, start + len)
    });
    let jitter = [rng.random_range(-0.01f32..0.01), rng.random_range(-0.01f32..0.01)];
    let warp = who.warp * rng.random_range(-1.0f32..1.0);
    // Hands rise from rest before the sign and drop back after it, for a varying share of frames.
    let lead_in = rng.random::<f32>() * cfg.idle_fraction;
    let lead_out = rng.random::<f32>() * cfg.idle_fraction;
    let path: [[f32; 2]; 4] =
        [0, 1, 2, 3].map(|k| [prog.path[k][0] + who.style[k][0], prog.path[k][1] + who.style[k][1]]);
    let rest = [0.36f32, 0.95f32];

    let mut seq = LandmarkSequence::empty(frames, NUM_LANDMARKS);
    for f in 0..frames {
        let u = f as f32 / (frames - 1) as f32;
        // Position within the sign proper (0..1), and how far the hand is from rest (1 = signing).
        let (mut t, raised) = if u < lead_in {
            (0.0, u / lead_in.max(1e-6))
        } else if u > 1.0 - lead_out {
            (1.0, (1.0 - u) / lead_out.max(1e-6))
        } else {
            ((u - lead_in) / (1.0 - lead_in - lead_out).max(1e-6), 1.0)
        };
        t = (t + warp * (PI * t).sin()).clamp(0.0, 1.0);
        if prog.reversed {
            t = 1.0 - t;
        }
        let tr = |p: [f32; 2]| {
            [0.5 + (p[0] - 0.5) * who.scale + who.offset[0], 0.3 + (p[1] - 0.3) * who.scale + who.offset[1]]
        };
        // Face: template + mouth opening.
        let mouth = prog.mouth_amp * (0.5 - 0.5 * (2.0 * PI * prog.mouth_cycles * t).cos());
        for (i, p) in face.iter().enumerate() {
            let mut p = *p;
            if p[1] > 0.345 && (p[0] - 0.5).abs() < 0.035 {
                p[1] += 0.012 * mouth;
            }
            let q = tr(p);
            seq.set(f, i, [q[0], q[1], 0.0]);
        }
        // Dominant (right) hand.
        let mut w = bezier(&path, t);
        let wig = prog.wiggle_amp * (2.0 * PI * prog.wiggle_cycles * t).sin();
        w[0] += wig * prog.wiggle_dir.cos() + jitter[0];
        w[1] += wig * prog.wiggle_dir.sin() + jitter[1];
        let ease = raised * raised * (3.0 - 2.0 * raised);
        w = [rest[0] + (w[0] - rest[0]) * ease, rest[1] + (w[1] - rest[1]) * ease];
        let hs = lerp_shape(&prog.shape_start, &prog.shape_end, t);
        let wr = tr(w);
        let hand_size = who.scale;
        for (i, p) in hand_points(wr, &hs, hand_size, 1.0).iter().enumerate() {
            seq.set(f, right + i, *p);
        }
        // Second (left) hand.
        let second = match prog.second_hand {
            SecondHand::Resting => None,
            SecondHand::Mirrored => Some([1.0 - w[0], w[1]]),
            SecondHand::Still(p) => Some(p),
        };
        if let Some(p) = second {
            let p = tr(p);
            for (i, q) in hand_points(p, &hs, hand_size, -1.0).iter().enumerate() {
                seq.set(f, left + i, *q);
            }
        }
        // Pose: shoulders, elbows follow wrists, hips; the rest near the head.
        let sh_r = tr([0.38, 0.5]);
        let sh_l = tr([0.62, 0.5]);
        let wl = second.map(tr).unwrap_or(tr([0.64, 0.95]));
        for i in 0..33 {
            let p = match i {
                11 => sh_l,
                12 => sh_r,
                13 => [(sh_l[0] + wl[0]) / 2.0 + 0.04, (sh_l[1] + wl[1]) / 2.0 + 0.08],
                14 => [(sh_r[0] + wr[0]) / 2.0 - 0.04, (sh_r[1] + wr[1]) / 2.0 + 0.08],
                15 | 17 | 19 | 21 => wl,
                16 | 18 | 20 | 22 => wr,
                23 => tr([0.58, 0.95]),
                24 => tr([0.42, 0.95]),
                25..=32 => [f32::NAN, f32::NAN],
                _ => tr([0.5 + 0.01 * (i as f32 - 5.0), 0.28]),
            };
            seq.set(f, pose_off + i, [p[0], p[1], if p[0].is_nan() { f32::NAN } else { -0.2 }]);
        }
        // Tracking: resting hand out of view; a lost stretch of the dominant hand.
        if prog.second_hand == SecondHand::Resting {
            for i in 0..21 {
                seq.set(f, left + i, [f32::NAN; 3]);
            }
        }
        if lost.is_some_and(|(a, b)| (a..b).contains(&f)) {
            for i in 0..21 {
                seq.set(f, right + i, [f32::NAN; 3]);
            }
        }
    }
    // Noise on every present coordinate.
    let normal = rand_distr::Normal::new(0.0f32, who.noise.max(1e-9)).expect("positive std");
    for v in seq.xyz.iter_mut().filter(|v| !v.is_nan()) {
        *v += rng.sample(normal);
    }
    if who.left_handed {
        let m = mirror_map();
        let src = seq.clone();
        for f in 0..frames {
            for (p, &q) in m.iter().enumerate() {
                let v = src.at(f, q);
                seq.set(f, p, [1.0 - v[0], v[1], v[2]]);
            }
        }
    }
    // Dropped frames: gaps in the frame numbering, as in the real data. Keep at least 2 frames.
    let keep: Vec<bool> =
        (0..frames).map(|f| f == 0 || f == frames - 1 || rng.random::<f32>() >= cfg.drop_frame_prob).collect();
    seq.retain_frames(&keep);
    let start = rng.random_range(0..40);
    seq.frame_ids.iter_mut().for_each(|id| *id += start);
    seq
}

/// What [`generate`] wrote.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GeneratedDataset {
    /// Where it was written.
    pub root: PathBuf,
    /// Sequences written.
    pub sequences: usize,
    /// Class names.
    pub labels: Vec<String>,
}

/// Write a synthetic dataset in the ISLR layout under `root` (created if needed): `train.csv`,
/// `sign_to_prediction_index_map.json`, `landmarks/<signer>/<sequence_id>.parquet`. The CSV and
/// label map are written last, atomically, so an interrupted run never looks complete.
pub fn generate(root: &Path, cfg: &SynthConfig, progress: bool) -> Result<GeneratedDataset> {
    cfg.validate()?;
    let labels = cfg.label_names();
    let jobs: Vec<(usize, usize, usize)> = (0..cfg.signers)
        .flat_map(|s| (0..cfg.classes).flat_map(move |c| (0..cfg.repetitions).map(move |r| (s, c, r))))
        .collect();
    let rel_path =
        |s: usize, c: usize, r: usize| format!("landmarks/{}/{}.parquet", 1000 + s, sequence_id(cfg, s, c, r));
    // What a generator killed mid-write left behind (its files are rewritten below).
    crate::error::sweep_temp_files(root);
    for s in 0..cfg.signers {
        crate::error::sweep_temp_files(&root.join(format!("landmarks/{}", 1000 + s)));
    }
    run_jobs(&jobs, "sequences", progress, |&(s, c, r)| {
        write_parquet_with(&root.join(rel_path(s, c, r)), &generate_sequence(cfg, c, s, r), cfg.compression)
    })?;
    let mut csv = String::from("path,participant_id,sequence_id,sign\n");
    for &(s, c, r) in &jobs {
        csv.push_str(&format!("{},{},{},{}\n", rel_path(s, c, r), 1000 + s, sequence_id(cfg, s, c, r), labels[c]));
    }
    let map: serde_json::Map<String, serde_json::Value> =
        labels.iter().enumerate().map(|(i, l)| (l.clone(), serde_json::Value::from(i))).collect();
    let map_text = serde_json::to_string_pretty(&map).expect("serializable");
    write_atomic(&root.join(LABEL_MAP), map_text.as_bytes())?;
    write_atomic(&root.join(ISLR_CSV), csv.as_bytes())?;
    Ok(GeneratedDataset { root: root.to_path_buf(), sequences: jobs.len(), labels })
}

/// Run `work` on every job on up to 8 threads, with a progress bar counting `what`; stops at the
/// first failure and returns it, else the results in job order. Shared by the generators.
pub(crate) fn run_jobs<J: Sync, T: Send>(
    jobs: &[J],
    what: &str,
    progress: bool,
    work: impl Fn(&J) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let bar = if progress { indicatif::ProgressBar::new(jobs.len() as u64) } else { indicatif::ProgressBar::hidden() };
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "generating {{bar:30}} {{pos}}/{{len}} {what} {{per_sec}} eta {{eta}}"
        ))
        .expect("valid template"),
    );
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(8);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<T>>> = jobs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    let failure: std::sync::Mutex<Option<DataError>> = std::sync::Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                if failure.lock().expect("not poisoned").is_some() {
                    break;
                }
                match work(job) {
                    Ok(v) => *results[i].lock().expect("not poisoned") = Some(v),
                    Err(e) => {
                        failure.lock().expect("not poisoned").get_or_insert(e);
                        break;
                    }
                }
                bar.inc(1);
            });
        }
    });
    bar.finish_and_clear();
    if let Some(e) = failure.into_inner().expect("not poisoned") {
        return Err(e);
    }
    Ok(results.into_iter().map(|r| r.into_inner().expect("not poisoned").expect("every job ran")).collect())
}

fn sequence_id(cfg: &SynthConfig, s: usize, c: usize, r: usize) -> u64 {
    (s * cfg.classes * cfg.repetitions + c * cfg.repetitions + r) as u64 + 100_000
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> SynthConfig {
        SynthConfig { classes: 4, signers: 2, repetitions: 2, ..Default::default() }
    }

    #[test]
    fn deterministic_for_a_seed() {
        let a = generate_sequence(&small(), 1, 0, 0);
        let b = generate_sequence(&small(), 1, 0, 0);
        assert_eq!(a.frame_ids, b.frame_ids);
        assert!(a.xyz.iter().zip(&b.xyz).all(|(x, y)| x.to_bits() == y.to_bits()));
        let c = generate_sequence(&SynthConfig { seed: 8, ..small() }, 1, 0, 0);
        let same = a.xyz.len() == c.xyz.len() && a.xyz.iter().zip(&c.xyz).all(|(x, y)| x.to_bits() == y.to_bits());
        assert!(!same, "another seed gave the same sequence");
    }

    #[test]
    fn sequences_are_in_range_with_gaps_and_missing_hands() {
        let cfg = SynthConfig { drop_frame_prob: 0.3, lost_hand_prob: 1.0, ..small() };
        let s = generate_sequence(&cfg, 0, 0, 0);
        assert!(s.frames() >= 2 && s.frames() <= cfg.max_frames);
        assert!(s.frame_ids.windows(2).all(|w| w[1] > w[0]));
        assert!(s.frame_ids.windows(2).any(|w| w[1] - w[0] > 1), "expected a gap: {:?}", s.frame_ids);
        let rh = LandmarkType::RightHand.offset();
        let lh = LandmarkType::LeftHand.offset();
        let missing = |f: usize, off: usize| s.at(f, off)[0].is_nan() && s.at(f, off + 20)[0].is_nan();
        // With lost_hand_prob = 1 one hand is lost for a stretch (a left-handed signer is mirrored).
        assert!((0..s.frames()).any(|f| missing(f, rh) || missing(f, lh)));
        let present: Vec<f32> = s.xyz.chunks_exact(3).filter(|c| !c[0].is_nan()).map(|c| c[0]).collect();
        assert!(present.iter().all(|x| (-0.2..1.2).contains(x)));
    }

    #[test]
    fn paired_classes_are_time_reverses() {
        let cfg = SynthConfig {
            noise: 0.0,
            drop_frame_prob: 0.0,
            lost_hand_prob: 0.0,
            idle_fraction: 0.0,
            time_warp: 0.0,
            ..small()
        };
        let a = generate_sequence(&cfg, 2, 0, 0);
        let b = generate_sequence(&cfg, 3, 0, 0);
        // The first frame of one is the last of the other, up to a per-recording jitter of 0.02.
        let (fa, fb) = (0, b.frames() - 1);
        let mut max_diff = 0f32;
        for p in 0..NUM_LANDMARKS {
            let (u, v) = (a.at(fa, p), b.at(fb, p));
            assert_eq!(u[0].is_nan(), v[0].is_nan(), "point {p}");
            if !u[0].is_nan() {
                max_diff = max_diff.max((u[0] - v[0]).abs()).max((u[1] - v[1]).abs());
            }
        }
        assert!(max_diff < 0.03, "max diff {max_diff}");
        // ... while the two start differently.
        let rh = LandmarkType::RightHand.offset();
        let start_diff = (0..NUM_LANDMARKS)
            .map(|p| (a.at(0, p)[0] - b.at(0, p)[0]).abs())
            .filter(|d| !d.is_nan())
            .fold(0f32, f32::max);
        assert!(start_diff > 0.03, "classes 2 and 3 start alike ({start_diff}); rh {:?}", a.at(0, rh));
    }

    #[test]
    fn config_errors_name_the_key() {
        let err = SynthConfig { classes: 1, ..Default::default() }.validate().unwrap_err();
        assert_eq!(err.to_string(), "config key `synthetic.classes`: need at least 2 classes, got 1");
        let err = SynthConfig { min_frames: 50, max_frames: 10, ..Default::default() }.validate().unwrap_err();
        assert!(err.to_string().contains("synthetic.min_frames"));
        let err = SynthConfig { idle_fraction: 0.6, ..Default::default() }.validate().unwrap_err();
        assert_eq!(err.to_string(), "config key `synthetic.idle_fraction`: must be in [0, 0.45], got 0.6");
    }
}
