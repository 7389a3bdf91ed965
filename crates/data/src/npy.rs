//! NumPy arrays as sequences: `.npy` files and `.npz` archives of `[frames, features]` or
//! `[frames, landmarks, 2|3]` arrays, read and written through the `npyz` crate.
//!
//! Accepted: float16, float32 and float64 in either byte order, C or Fortran order. Feature and
//! landmark counts come from the files. An `.npz` archive gives its only array, or the one named
//! `landmarks` when it holds several.

use std::io::{Cursor, Read};
use std::path::Path;

use npyz::{DType, NpyFile, NpyHeader, Order, TypeChar, WriterBuilder};

use crate::error::{write_atomic, DataError, Result};
use crate::sequence::{FeatureSequence, LandmarkSequence, Sample};

/// The array an `.npz` archive with several arrays is read from.
pub const NPZ_ARRAY: &str = "landmarks";

/// A decoded array: its shape and its values as f32 in C order.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    /// Dimensions, slowest first.
    pub shape: Vec<usize>,
    /// Values in C (row-major) order.
    pub data: Vec<f32>,
}

/// Read a `.npy` file as a [`Sample`]: 2-D arrays are feature sequences, 3-D arrays with a last
/// axis of 2 or 3 are landmark sequences (a missing z becomes NaN).
pub fn read_npy(path: &Path) -> Result<Sample> {
    let bytes = crate::error::read_regular(path)?;
    let array = decode(&bytes).map_err(|m| DataError::invalid(path, m))?;
    to_sample(path, array)
}

/// Read the sequence of an `.npz` archive: its only array, or [`NPZ_ARRAY`] when it has several.
pub fn read_npz(path: &Path) -> Result<Sample> {
    let arrays = read_npz_arrays(path)?;
    let names = || arrays.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ");
    let pick = match arrays.len() {
        0 => return Err(DataError::invalid(path, "the .npz archive holds no .npy array")),
        1 => 0,
        _ => arrays.iter().position(|(n, _)| n == NPZ_ARRAY).ok_or_else(|| {
            DataError::invalid(
                path,
                format!("the .npz archive holds several arrays ({}) and none is named `{NPZ_ARRAY}`", names()),
            )
        })?,
    };
    let (name, array) = arrays.into_iter().nth(pick).expect("index from the list");
    to_sample(path, array).map_err(|e| match e {
        DataError::Invalid { path, message } => {
            DataError::Invalid { path, message: format!("array `{name}`: {message}") }
        }
        other => other,
    })
}

/// Every array of an `.npz` archive, by name (the member name without `.npy`), in archive order.
pub fn read_npz_arrays(path: &Path) -> Result<Vec<(String, Array)>> {
    let file = crate::error::open_regular(path)?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file))
        .map_err(|e| DataError::invalid(path, format!("not a readable .npz (zip) archive: {e}")))?;
    let mut out = Vec::new();
    for i in 0..zip.len() {
        let mut member =
            zip.by_index(i).map_err(|e| DataError::invalid(path, format!("member {i} of the archive: {e}")))?;
        let name = member.name().to_string();
        let Some(stem) = name.strip_suffix(".npy") else { continue };
        // Refuse members that claim more than the archive could hold before allocating for them.
        let claimed = member.size();
        let limit = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0).saturating_mul(1032).max(1 << 20);
        if claimed > limit {
            return Err(DataError::invalid(path, format!("member `{name}` claims {claimed} bytes; corrupt archive")));
        }
        let mut bytes = Vec::with_capacity(claimed as usize);
        member
            .read_to_end(&mut bytes)
            .map_err(|e| DataError::invalid(path, format!("member `{name}`: {e} (truncated or corrupt archive)")))?;
        let array = decode(&bytes).map_err(|m| DataError::invalid(path, format!("array `{stem}`: {m}")))?;
        out.push((stem.to_string(), array));
    }
    Ok(out)
}

/// Decode one `.npy` image. Errors are messages; the caller adds the file name.
pub fn decode(bytes: &[u8]) -> std::result::Result<Array, String> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err("not a .npy file (missing the \\x93NUMPY magic)".into());
    }
    // The header's declared length, checked against the file before the header is read (the
    // header reader allocates what it declares: up to 4 GiB in versions 2 and 3).
    let (start, header_len) = match bytes[6] {
        1 => (10, u16::from_le_bytes([bytes[8], bytes[9]]) as usize),
        2 | 3 if bytes.len() >= 12 => (12, u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize),
        2 | 3 => return Err("the file ends inside the header's length".into()),
        v => return Err(format!("unsupported .npy format version {v}.{} (expected 1, 2 or 3)", bytes[7])),
    };
    if header_len > bytes.len() - start {
        return Err(format!(
            "the header declares {header_len} bytes, the file has {} after the {start}-byte preamble",
            bytes.len() - start
        ));
    }
    let mut cursor = Cursor::new(bytes);
    let header = NpyHeader::from_reader(&mut cursor).map_err(|e| format!("unreadable .npy header: {e}"))?;
    let body = bytes.len() - cursor.position() as usize;
    let shape: Vec<usize> = header
        .shape()
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("shape {:?} is too large", header.shape())))
        .collect::<std::result::Result<_, _>>()?;
    let count = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    let (kind, size, descr) = match header.dtype() {
        DType::Plain(t) => (t.type_char(), t.size_field() as usize, t.to_string()),
        other => return Err(format!("dtype {} not supported; expected float16, float32 or float64", other.descr())),
    };
    if kind != TypeChar::Float || !matches!(size, 2 | 4 | 8) {
        return Err(format!("dtype {descr} not supported; expected float16, float32 or float64 (<f2, <f4, <f8 or >…)"));
    }
    // Checked before reading: a corrupt header must not make us allocate a bogus size.
    let need = count.and_then(|c| c.checked_mul(size)).ok_or_else(|| format!("shape {shape:?} is too large"))?;
    if body < need {
        return Err(format!("data truncated: shape {shape:?} of {descr} needs {need} bytes, file has {body}"));
    }
    let order = header.order();
    let file = NpyFile::with_header(header, cursor);
    let read_err = |e: std::io::Error| format!("unreadable data: {e}");
    let data: Vec<f32> = match size {
        2 => file.into_vec::<half::f16>().map_err(read_err)?.into_iter().map(f32::from).collect(),
        4 => file.into_vec::<f32>().map_err(read_err)?,
        _ => file.into_vec::<f64>().map_err(read_err)?.into_iter().map(|v| v as f32).collect(),
    };
    let data = if order == Order::Fortran && shape.len() > 1 { fortran_to_c(&shape, &data) } else { data };
    Ok(Array { shape, data })
}

/// Reorder column-major (first index fastest) values into row-major order.
fn fortran_to_c(shape: &[usize], data: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0; data.len()];
    let mut index = vec![0usize; shape.len()];
    for value in &mut out {
        // `index` walks C order; its Fortran offset is sum(index[k] * prod(shape[..k])).
        let mut offset = 0;
        let mut stride = 1;
        for (i, d) in index.iter().zip(shape) {
            offset += i * stride;
            stride *= d;
        }
        *value = data[offset];
        for k in (0..shape.len()).rev() {
            index[k] += 1;
            if index[k] < shape[k] {
                break;
            }
            index[k] = 0;
        }
    }
    out
}

fn to_sample(path: &Path, array: Array) -> Result<Sample> {
    let Array { shape, data } = array;
    match shape.as_slice() {
        [0, ..] => Err(DataError::EmptySequence { path: path.to_path_buf(), detail: String::new() }),
        // A zero-width frame holds no values, so the file's size says nothing about the frame count.
        [_, rest @ ..] if rest.contains(&0) => Err(DataError::invalid(
            path,
            format!("shape {shape:?} has a dimension of 0: a frame must hold at least one value"),
        )),
        [_, f] => Ok(Sample::Features(FeatureSequence { features: *f, data })),
        [frames, points, c @ (2 | 3)] => {
            let mut seq = LandmarkSequence::empty(*frames, *points);
            for (i, chunk) in data.chunks_exact(*c).enumerate() {
                seq.xyz[i * 3] = chunk[0];
                seq.xyz[i * 3 + 1] = chunk[1];
                if *c == 3 {
                    seq.xyz[i * 3 + 2] = chunk[2];
                }
            }
            Ok(Sample::Landmarks(seq))
        }
        other => Err(DataError::invalid(
            path,
            format!("shape {other:?} not supported; expected [frames, features] or [frames, landmarks, 2|3]"),
        )),
    }
}

/// Encode `data` with `shape` as a little-endian f32 C-order `.npy` image.
pub fn encode(shape: &[usize], data: &[f32]) -> std::io::Result<Vec<u8>> {
    let shape: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    let mut out = Vec::with_capacity(128 + data.len() * 4);
    let mut writer = npyz::WriteOptions::new().default_dtype().shape(&shape).writer(&mut out).begin_nd()?;
    writer.extend(data.iter().copied())?;
    writer.finish()?;
    Ok(out)
}

/// Write `data` with `shape` as a little-endian f32 `.npy` file, atomically.
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
    let bytes = encode(shape, data).map_err(|e| DataError::io(path, e))?;
    write_atomic(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_shapes_are_errors_not_allocations() {
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }";
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&((header.len() + 1) as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        bytes.push(b'\n');
        bytes.extend_from_slice(&[0; 24]);
        let err = decode(&bytes).unwrap_err();
        assert!(err.contains("too large") || err.contains("data truncated"), "{err}");
        // A valid image decodes; the same image cut short does not.
        let ok = encode(&[2, 3], &[1.0; 6]).unwrap();
        assert_eq!(decode(&ok).unwrap(), Array { shape: vec![2, 3], data: vec![1.0; 6] });
        assert!(decode(&ok[..ok.len() - 1]).unwrap_err().contains("data truncated"));
    }

    #[test]
    fn a_header_longer_than_the_file_is_an_error_before_it_is_read() {
        let ok = encode(&[2, 3], &[1.0; 6]).unwrap();
        // Version 3 with a 2 GB header length (a fuzzer's find: the header reader allocated it).
        let mut v3 = ok.clone();
        v3[6] = 3;
        v3.splice(8..10, [0x76, 0x00, 0x00, 0x7b]);
        let err = decode(&v3).unwrap_err();
        assert!(err.contains("header declares 2063597686 bytes"), "{err}");
        let mut v1 = ok.clone();
        v1[8..10].copy_from_slice(&u16::MAX.to_le_bytes());
        assert!(decode(&v1).unwrap_err().contains("header declares 65535 bytes"));
        let err = decode(&[&ok[..6], &[2, 0, 1, 0]].concat()).unwrap_err();
        assert!(err.contains("ends inside the header's length"), "{err}");
        let mut v9 = ok;
        v9[6] = 9;
        assert!(decode(&v9).unwrap_err().contains("unsupported .npy format version 9.0"));
    }

    #[test]
    fn fortran_order_is_transposed_to_c_order() {
        // A 2x3 matrix [[0,1,2],[3,4,5]] stored column-major is 0,3,1,4,2,5.
        assert_eq!(fortran_to_c(&[2, 3], &[0., 3., 1., 4., 2., 5.]), vec![0., 1., 2., 3., 4., 5.]);
        // 2x2x2: Fortran offset of (i,j,k) = i + 2j + 4k.
        let f: Vec<f32> = (0..8).map(|v| v as f32).collect();
        let c = fortran_to_c(&[2, 2, 2], &f);
        assert_eq!(c, vec![0., 4., 2., 6., 1., 5., 3., 7.]);
    }
}
