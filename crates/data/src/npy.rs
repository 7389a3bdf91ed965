//! A generic sequence format: `.npy` arrays of `[frames, features]` or `[frames, landmarks, 2|3]`
//! (little-endian f32 or f64, C order). Feature and landmark counts come from the files.

use std::path::Path;

use crate::error::{write_atomic, DataError, Result};
use crate::sequence::{FeatureSequence, LandmarkSequence, Sample};

const MAGIC: &[u8] = b"\x93NUMPY";

fn header_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let start = header.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = header[start..].trim_start().strip_prefix(':')?.trim_start();
    if rest.starts_with('(') {
        rest.find(')').map(|e| &rest[..=e])
    } else {
        let end = rest.find([',', '}']).unwrap_or(rest.len());
        Some(rest[..end].trim())
    }
}

/// Read a `.npy` file as a [`Sample`]: 2-D arrays are feature sequences, 3-D arrays with a last
/// axis of 2 or 3 are landmark sequences (a missing z becomes NaN).
pub fn read_npy(path: &Path) -> Result<Sample> {
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    let bad = |m: String| DataError::invalid(path, m);
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(bad("not a .npy file (missing the \\x93NUMPY magic)".into()));
    }
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12),
        v => return Err(bad(format!("unsupported .npy version {v}"))),
    };
    let header = bytes.get(start..start + header_len).ok_or_else(|| bad("truncated .npy header".into()))?;
    let header = std::str::from_utf8(header).map_err(|_| bad("the .npy header is not text".into()))?;
    let descr = header_value(header, "descr").ok_or_else(|| bad("the .npy header has no 'descr'".into()))?;
    let descr = descr.trim_matches(|c| c == '\'' || c == '"');
    if header_value(header, "fortran_order") == Some("True") {
        return Err(bad("Fortran-ordered arrays are not supported; save with np.ascontiguousarray".into()));
    }
    let shape = header_value(header, "shape").ok_or_else(|| bad("the .npy header has no 'shape'".into()))?;
    let shape: Vec<usize> = shape
        .trim_matches(|c| c == '(' || c == ')')
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse::<usize>().map_err(|_| bad(format!("bad shape {shape}"))))
        .collect::<Result<_>>()?;
    let body = &bytes[start + header_len..];
    // Checked: a corrupt header must not make us allocate (or wrap around to) a bogus size.
    let count = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| bad(format!("shape {shape:?} is too large")))?;
    let values: Vec<f32> = match descr {
        "<f4" | "|f4" => {
            let need = count.checked_mul(4).ok_or_else(|| bad(format!("shape {shape:?} is too large")))?;
            if body.len() < need {
                return Err(bad(format!(
                    "data truncated: shape {shape:?} needs {need} bytes, file has {}",
                    body.len()
                )));
            }
            body[..need].chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
        }
        "<f8" => {
            let need = count.checked_mul(8).ok_or_else(|| bad(format!("shape {shape:?} is too large")))?;
            if body.len() < need {
                return Err(bad(format!(
                    "data truncated: shape {shape:?} needs {need} bytes, file has {}",
                    body.len()
                )));
            }
            body[..need].chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")) as f32).collect()
        }
        other => {
            return Err(bad(format!(
                "dtype {other} not supported; expected little-endian float32 (<f4) or float64 (<f8)"
            )))
        }
    };
    match shape.as_slice() {
        [0, ..] => Err(DataError::EmptySequence { path: path.to_path_buf(), detail: String::new() }),
        [_, f] => Ok(Sample::Features(FeatureSequence { features: *f, data: values })),
        [frames, points, c @ (2 | 3)] => {
            let mut seq = LandmarkSequence::empty(*frames, *points);
            for (i, chunk) in values.chunks_exact(*c).enumerate() {
                seq.xyz[i * 3] = chunk[0];
                seq.xyz[i * 3 + 1] = chunk[1];
                if *c == 3 {
                    seq.xyz[i * 3 + 2] = chunk[2];
                }
            }
            Ok(Sample::Landmarks(seq))
        }
        other => {
            Err(bad(format!("shape {other:?} not supported; expected [frames, features] or [frames, landmarks, 2|3]")))
        }
    }
}

/// Write `data` with `shape` as a version-1 little-endian f32 `.npy` file, atomically.
pub fn write_npy(path: &Path, shape: &[usize], data: &[f32]) -> Result<()> {
    let expected: usize = shape.iter().product();
    if expected != data.len() {
        return Err(DataError::ShapeMismatch {
            path: path.to_path_buf(),
            expected_what: format!("values for shape {shape:?}"),
            expected,
            found: data.len(),
        });
    }
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape_txt = if dims.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape_txt}, }}");
    let unpadded = MAGIC.len() + 4 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + data.len() * 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in data {
        out.extend_from_slice(&v.to_le_bytes());
    }
    write_atomic(path, &out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_shapes_are_errors_not_allocations() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.npy");
        write_npy(&p, &[2, 3], &[0.0; 6]).unwrap();
        let mut bytes = std::fs::read(&p).unwrap();
        let at = bytes.windows(6).position(|w| w == b"(2, 3)").unwrap();
        bytes.splice(at..at + 6, b"(99999999999, 99999999999)".iter().copied());
        // Keep the header length field consistent with the longer header.
        let new_len = (u16::from_le_bytes([bytes[8], bytes[9]]) as usize + 20) as u16;
        bytes[8..10].copy_from_slice(&new_len.to_le_bytes());
        std::fs::write(&p, &bytes).unwrap();
        let err = read_npy(&p).unwrap_err().to_string();
        assert!(err.contains("too large") || err.contains("data truncated"), "{err}");
    }
}
