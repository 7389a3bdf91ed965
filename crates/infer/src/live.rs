//! Live landmark frames as JSON lines, the input of `infer stream --input -`: one object per line,
//! so a MediaPipe front end in any language can pipe frames into the recognizer.
//!
//! ```json
//! {"frame": 12, "face": [[x, y, z], …468], "left_hand": null, "pose": [[x, y, z], …33], "right_hand": [[x, y, z], …21]}
//! {"frame": 13, "landmarks": [[x, y, z], …543]}
//! ```
//!
//! Either the four Holistic groups by name (`face` 468, `left_hand` 21, `pose` 33, `right_hand`
//! 21; a group that is absent or `null` was not detected) or `landmarks` with every point of the
//! layout in flattened order. A point is `[x, y]` or `[x, y, z]` in MediaPipe's normalised
//! coordinates; `null`, NaN or an infinite value marks it missing. `frame` is optional (the line
//! count is used when it is absent).

use std::io::BufRead;
use std::path::Path;

use serde::Deserialize;

use data::layout::{LandmarkType, NUM_LANDMARKS};
use data::LandmarkSequence;

use crate::InferError;

/// The default longest line [`read_line`] accepts: a frame of 543 points is about 30 KB of JSON.
pub const DEFAULT_MAX_LINE_BYTES: usize = 4 << 20;

/// What [`read_line`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A line (without its newline) is in the buffer.
    Text,
    /// The line was longer than the limit: its first bytes were dropped with the rest of it, and
    /// this is how long it was (up to its newline or the end of the input).
    TooLong(usize),
    /// The input ended.
    End,
}

/// Read one line of `input` into `buf` (cleared first), holding at most `max` bytes of it: a
/// longer line is read through and dropped, so memory stays bounded whatever arrives.
pub fn read_line(input: &mut impl BufRead, buf: &mut Vec<u8>, max: usize) -> std::io::Result<Line> {
    buf.clear();
    let mut len = 0usize;
    let mut any = false;
    loop {
        let chunk = input.fill_buf()?;
        if chunk.is_empty() {
            break;
        }
        any = true;
        let (part, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (&chunk[..i], Some(i + 1)),
            None => (chunk, None),
        };
        if len + part.len() <= max {
            buf.extend_from_slice(part);
        } else {
            buf.clear();
        }
        len += part.len();
        let used = done.unwrap_or(part.len());
        input.consume(used);
        if done.is_some() {
            break;
        }
    }
    Ok(match (any, len > max) {
        (false, _) => Line::End,
        (true, true) => Line::TooLong(len),
        (true, false) => {
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            Line::Text
        }
    })
}

/// One frame as it arrives on the wire.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireFrame {
    frame: Option<i64>,
    face: Option<Vec<Option<Vec<Option<f64>>>>>,
    left_hand: Option<Vec<Option<Vec<Option<f64>>>>>,
    pose: Option<Vec<Option<Vec<Option<f64>>>>>,
    right_hand: Option<Vec<Option<Vec<Option<f64>>>>>,
    landmarks: Option<Vec<Option<Vec<Option<f64>>>>>,
}

/// A parsed frame: its number and every point of the 543 layout (NaN where missing).
#[derive(Debug, Clone, PartialEq)]
pub struct LiveFrame {
    /// The frame number (from the line, or the caller's default).
    pub frame: i64,
    /// `[543]` points.
    pub points: Vec<[f32; 3]>,
}

fn point(p: &Option<Vec<Option<f64>>>, what: &dyn Fn() -> String) -> Result<[f32; 3], String> {
    let Some(p) = p else { return Ok([f32::NAN; 3]) };
    if !(2..=3).contains(&p.len()) {
        return Err(format!("{} has {} values; expected [x, y] or [x, y, z]", what(), p.len()));
    }
    let v = |i: usize| p.get(i).copied().flatten().map(|v| v as f32).filter(|v| v.is_finite());
    match (v(0), v(1)) {
        (Some(x), Some(y)) => Ok([x, y, if p.len() == 3 { v(2).unwrap_or(f32::NAN) } else { f32::NAN }]),
        _ => Ok([f32::NAN; 3]),
    }
}

/// Parse one JSON line; `default_frame` numbers frames that carry no `frame`. Errors say what is
/// wrong and what was expected (the caller adds where the line came from).
pub fn parse_frame(line: &str, default_frame: i64) -> Result<LiveFrame, String> {
    let wire: WireFrame = serde_json::from_str(line).map_err(|e| format!("not a frame object: {e}"))?;
    let mut points = vec![[f32::NAN; 3]; NUM_LANDMARKS];
    let groups = [
        (LandmarkType::Face, &wire.face),
        (LandmarkType::LeftHand, &wire.left_hand),
        (LandmarkType::Pose, &wire.pose),
        (LandmarkType::RightHand, &wire.right_hand),
    ];
    let named = groups.iter().any(|(_, g)| g.is_some());
    match (&wire.landmarks, named) {
        (Some(_), true) => return Err("has both `landmarks` and named groups; send one or the other".into()),
        (Some(all), false) => {
            if all.len() != NUM_LANDMARKS {
                return Err(format!("`landmarks` has {} points; expected {NUM_LANDMARKS}", all.len()));
            }
            for (i, p) in all.iter().enumerate() {
                points[i] = point(p, &|| format!("landmarks[{i}]"))?;
            }
        }
        (None, _) => {
            for (ty, group) in groups {
                let Some(group) = group else { continue };
                if group.len() != ty.count() {
                    return Err(format!("`{}` has {} points; expected {}", ty.name(), group.len(), ty.count()));
                }
                for (i, p) in group.iter().enumerate() {
                    points[ty.offset() + i] = point(p, &|| format!("{}[{i}]", ty.name()))?;
                }
            }
        }
    }
    Ok(LiveFrame { frame: wire.frame.unwrap_or(default_frame), points })
}

/// File extension of a recording: frames as JSON lines, one [`parse_frame`] object per line.
pub const RECORDING_EXTENSION: &str = "jsonl";

/// Whether `path` names a recording of JSON-line frames (by its `.jsonl` extension).
pub fn is_recording(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case(RECORDING_EXTENSION))
}

/// What is wrong with a line of frames ([`frame_lines`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadLine {
    /// Longer than the limit (`len` bytes, over `max`); read through without being kept.
    TooLong {
        /// The line's length in bytes.
        len: usize,
        /// The limit it passed.
        max: usize,
    },
    /// Not UTF-8.
    NotUtf8,
    /// Not a frame: what is wrong and what was expected ([`parse_frame`]).
    Frame(String),
}

impl std::fmt::Display for BadLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooLong { len, max } => write!(f, "{len} bytes, over the {max}-byte limit of a frame"),
            Self::NotUtf8 => f.write_str("not UTF-8"),
            Self::Frame(message) => f.write_str(message),
        }
    }
}

/// The frames of JSON lines read from `input`, one item per non-blank line: its line number
/// (1-based) and the frame or what is wrong with the line. A line is held in at most
/// `max_line_bytes` ([`read_line`]); a frame without `frame` is numbered by its line (0-based).
/// The one reader of frame lines: `infer stream --input -` skips a bad line, a recording file
/// ([`read_recording`]) is refused at one.
pub fn frame_lines<R: BufRead>(
    mut input: R,
    max_line_bytes: usize,
) -> impl Iterator<Item = std::io::Result<(usize, Result<LiveFrame, BadLine>)>> {
    let (mut buf, mut n) = (Vec::new(), 0usize);
    std::iter::from_fn(move || loop {
        n += 1;
        let frame = match read_line(&mut input, &mut buf, max_line_bytes) {
            Err(e) => return Some(Err(e)),
            Ok(Line::End) => return None,
            Ok(Line::TooLong(len)) => Err(BadLine::TooLong { len, max: max_line_bytes }),
            Ok(Line::Text) => match std::str::from_utf8(&buf) {
                Err(_) => Err(BadLine::NotUtf8),
                Ok(text) if text.trim().is_empty() => continue,
                Ok(text) => parse_frame(text, n as i64 - 1).map_err(BadLine::Frame),
            },
        };
        return Some(Ok((n, frame)));
    })
}

/// Read a recording (a `.jsonl` file of frames, as `infer stream --input -` takes them) into a
/// sequence of the 543-point layout. Blank lines are skipped; a line that is not a frame, is
/// not UTF-8 or is longer than [`DEFAULT_MAX_LINE_BYTES`] is an error naming the file and line,
/// and so is a recording with no frame or more than [`data::sequence::MAX_FRAMES`] (a 3-byte line
/// `{}` is a frame of 6.5 KB: the limit keeps memory to what a recording can justify).
pub fn read_recording(path: &Path) -> Result<LandmarkSequence, InferError> {
    let file = data::error::open_regular(path).map_err(InferError::Data)?;
    let bad = |line: usize, message: String| InferError::File {
        path: path.into(),
        message: format!("line {line}: {message}"),
    };
    let (mut frame_ids, mut xyz) = (Vec::new(), Vec::new());
    for line in frame_lines(std::io::BufReader::new(file), DEFAULT_MAX_LINE_BYTES) {
        let (n, frame) = line.map_err(|e| InferError::File { path: path.into(), message: e.to_string() })?;
        if frame_ids.len() == data::sequence::MAX_FRAMES {
            return Err(bad(
                n,
                format!("more than {} frames; a recording is at most that long", data::sequence::MAX_FRAMES),
            ));
        }
        let frame = frame.map_err(|e| bad(n, e.to_string()))?;
        let id =
            i32::try_from(frame.frame).map_err(|_| bad(n, format!("frame number {} is out of range", frame.frame)))?;
        frame_ids.push(id);
        xyz.extend(frame.points.iter().flatten());
    }
    if frame_ids.is_empty() {
        return Err(InferError::File { path: path.into(), message: "no frame in the recording".into() });
    }
    Ok(LandmarkSequence { points: NUM_LANDMARKS, frame_ids, xyz })
}

/// Encode a frame of the 543 layout as a JSON line with the named groups (missing points as
/// `null`, a missing z as `[x, y, null]`, a group with no point as `null`): what a front end
/// sends, and what [`parse_frame`] reads back to the same values.
pub fn encode_frame(frame: i64, points: &[[f32; 3]]) -> String {
    let mut obj = serde_json::Map::new();
    obj.insert("frame".into(), frame.into());
    for ty in LandmarkType::ALL {
        let pts = &points[ty.offset()..ty.offset() + ty.count()];
        let value = if pts.iter().all(|p| p[0].is_nan()) {
            serde_json::Value::Null
        } else {
            pts.iter()
                .map(|p| {
                    if p[0].is_nan() || p[1].is_nan() {
                        serde_json::Value::Null
                    } else {
                        serde_json::json!([p[0], p[1], if p[2].is_finite() { Some(p[2]) } else { None }])
                    }
                })
                .collect()
        };
        obj.insert(ty.name().into(), value);
    }
    serde_json::Value::Object(obj).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recordings_read_frames_and_name_the_line_of_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let mut points = vec![[f32::NAN; 3]; NUM_LANDMARKS];
        points[500] = [0.25, 0.5, -0.125];
        let good = write("good.jsonl", &format!("{}\n\n{}\n", encode_frame(7, &points), r#"{"pose": null}"#));
        let seq = read_recording(&good).unwrap();
        // A frame without `frame` is numbered by its line (0-based), as on stdin.
        assert_eq!((seq.points, seq.frame_ids.clone()), (NUM_LANDMARKS, vec![7, 2]));
        assert_eq!(seq.at(0, 500), [0.25, 0.5, -0.125]);
        assert!(seq.at(1, 500)[0].is_nan() && seq.at(0, 0)[0].is_nan());

        let err = |name: &str, text: &str| read_recording(&write(name, text)).unwrap_err().to_string();
        let e = err("layout.jsonl", "{}\n{\"face\": [[0.5, 0.5]]}\n");
        assert!(e.contains("layout.jsonl: line 2: `face` has 1 points; expected 468"), "{e}");
        assert!(err("empty.jsonl", "\n\n").contains("empty.jsonl: no frame in the recording"));
        let e = err("long.jsonl", &"{}\n".repeat(data::sequence::MAX_FRAMES + 1));
        assert!(e.contains("line 20001: more than 20000 frames"), "{e}");
        let e = read_recording(dir.path()).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
    }

    #[test]
    fn lines_longer_than_the_limit_are_dropped_whole_and_the_next_one_reads() {
        let input = [b"short\r\n".to_vec(), vec![b'x'; 10_000], b"\nafter\n".to_vec(), b"tail".to_vec()].concat();
        let mut r = std::io::BufReader::with_capacity(64, &input[..]);
        let mut buf = Vec::new();
        assert_eq!(read_line(&mut r, &mut buf, 100).unwrap(), Line::Text);
        assert_eq!(buf, b"short");
        assert_eq!(read_line(&mut r, &mut buf, 100).unwrap(), Line::TooLong(10_000));
        assert!(buf.capacity() <= 256, "held {} bytes of a line it refused", buf.capacity());
        assert_eq!(read_line(&mut r, &mut buf, 100).unwrap(), Line::Text);
        assert_eq!(buf, b"after");
        assert_eq!(read_line(&mut r, &mut buf, 100).unwrap(), Line::Text);
        assert_eq!(buf, b"tail");
        assert_eq!(read_line(&mut r, &mut buf, 100).unwrap(), Line::End);
    }

    #[test]
    fn frame_lines_number_every_line_and_say_what_is_wrong_with_each() {
        let input = [
            b"{}\n\n".to_vec(),
            vec![b'x'; 300],
            b"\n{\"face\": [[0.5, 0.5]]}\n\xff\xfe\n{\"frame\": 40}\n{}".to_vec(),
        ]
        .concat();
        let lines: Vec<_> = frame_lines(&input[..], 100).map(Result::unwrap).collect();
        let numbers: Vec<usize> = lines.iter().map(|(n, _)| *n).collect();
        assert_eq!(numbers, [1, 3, 4, 5, 6, 7], "blank line 2 is skipped");
        assert_eq!(lines[0].1.as_ref().unwrap().frame, 0);
        assert_eq!(lines[1].1, Err(BadLine::TooLong { len: 300, max: 100 }));
        assert_eq!(lines[2].1, Err(BadLine::Frame("`face` has 1 points; expected 468".into())));
        assert_eq!(lines[3].1, Err(BadLine::NotUtf8));
        assert_eq!(lines[4].1.as_ref().unwrap().frame, 40);
        assert_eq!(lines[5].1.as_ref().unwrap().frame, 6, "numbered by its line");
    }

    #[test]
    fn named_groups_and_flat_layout_give_the_same_points() {
        let mut pts = vec![[f32::NAN; 3]; NUM_LANDMARKS];
        for (i, p) in pts.iter_mut().enumerate().skip(468).take(21) {
            *p = [i as f32 / 1000.0, 0.5, -0.1];
        }
        pts[480][2] = f32::NAN;
        let line = encode_frame(7, &pts);
        let a = parse_frame(&line, 0).unwrap();
        assert_eq!(a.frame, 7);
        assert_eq!(a.points[470], [0.47, 0.5, -0.1]);
        assert!(a.points[480][..2] == pts[480][..2] && a.points[480][2].is_nan(), "a missing z stays missing");
        assert!(a.points[0][0].is_nan() && a.points[530][0].is_nan());
        let flat: Vec<serde_json::Value> = a
            .points
            .iter()
            .map(|p| if p[0].is_nan() { serde_json::Value::Null } else { serde_json::json!([p[0], p[1], p[2]]) })
            .collect();
        let b = parse_frame(&serde_json::json!({ "landmarks": flat }).to_string(), 3).unwrap();
        assert_eq!(b.frame, 3);
        assert_eq!(b.points[470], a.points[470]);
    }

    #[test]
    fn bad_frames_say_what_was_expected() {
        assert!(parse_frame("{\"left_hand\": [[0.1, 0.2]]}", 0).unwrap_err().contains("expected 21"));
        assert!(parse_frame("[1, 2]", 0).unwrap_err().contains("not a frame object"));
        assert!(parse_frame("{\"hand\": []}", 0).unwrap_err().contains("unknown field"));
        let pts = vec![vec![0.1]; 21];
        let err = parse_frame(&serde_json::json!({ "right_hand": pts }).to_string(), 0).unwrap_err();
        assert!(err.contains("right_hand[0] has 1 values"), "{err}");
        // Non-finite numbers cannot be written in JSON; a null coordinate is a missing point.
        let mut hand = vec![serde_json::json!([0.1, 0.2, 0.0]); 21];
        hand[3] = serde_json::json!([null, 0.2, 0.0]);
        let f = parse_frame(&serde_json::json!({ "right_hand": hand }).to_string(), 0).unwrap();
        assert!(f.points[522 + 3][0].is_nan());
        assert_eq!(f.points[522][0], 0.1);
    }

    #[test]
    fn mutated_lines_are_errors_or_frames_never_panics() {
        let mut pts = vec![[0.25f32, 0.5, -0.1]; NUM_LANDMARKS];
        pts[500] = [f32::NAN; 3];
        let valid = encode_frame(3, &pts);
        let mut m = testkit::mutate::Mutator::new(7);
        let mut errors = 0;
        for _ in 0..2000 {
            let line = String::from_utf8_lossy(&m.mutate(valid.as_bytes())).into_owned();
            match parse_frame(&line, 0) {
                Ok(f) => assert_eq!(f.points.len(), NUM_LANDMARKS),
                Err(e) => {
                    errors += 1;
                    assert!(!e.is_empty());
                }
            }
        }
        assert!(errors > 1000, "only {errors} of 2000 mutated lines were refused");
    }
}
