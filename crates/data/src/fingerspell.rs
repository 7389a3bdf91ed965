//! The ASL Fingerspelling layout: `train.csv` (`path, file_id, sequence_id, participant_id,
//! phrase`) and wide parquet files holding several sequences each, one row per frame:
//! `sequence_id, frame, x_face_0 … x_right_hand_20, y_…, z_…` (1,629 coordinate columns on the
//! 543-point Holistic layout). Sequences are read as `[frames, 543, 3]` landmark sequences, the
//! same as the ISLR data, with their phrase as the target.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{write_atomic, DataError, Result};
use crate::index::{column, csv_reader, records};
use crate::layout::{LandmarkType, NUM_LANDMARKS};
use crate::sequence::{LandmarkSequence, MAX_FRAMES};
use crate::table::{encode, Codec, Data, Kind, Table};

/// The layout's sequence list.
pub const TRAIN_CSV: &str = "train.csv";
/// The layout's character map (`{"a": 0, …}`), when present.
pub const CHARACTER_MAP: &str = "character_to_prediction_index.json";

/// The fewest bytes of file a row may take. A row holds 1,629 coordinates (6.5 KB once read);
/// recorded landmarks take kilobytes a row on disk, so a file declaring more rows than its size
/// allows at this rate is refused before reading instead of expanding a few MB of repeated rows
/// into gigabytes.
pub const MIN_BYTES_PER_ROW: u64 = 256;

/// The coordinate column of `axis` (`x`, `y`, `z`) of flattened landmark `point`.
pub fn column_name(axis: char, point: usize) -> String {
    let (ty, i) = LandmarkType::of_flat(point).expect("point < 543");
    format!("{axis}_{}_{i}", ty.name())
}

/// One sequence of the layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhraseEntry {
    /// The parquet file holding it.
    pub path: PathBuf,
    /// Its `sequence_id` in that file.
    pub sequence_id: i64,
    /// The signer.
    pub participant: String,
    /// The fingerspelled text.
    pub phrase: String,
    /// Its line in `train.csv` (for messages).
    #[serde(default)]
    pub line: usize,
}

/// Read `root/train.csv` of the fingerspelling layout.
pub fn open(root: &Path) -> Result<Vec<PhraseEntry>> {
    let csv_path = root.join(TRAIN_CSV);
    let (mut rdr, headers) = csv_reader(&csv_path)?;
    let col = |name: &str| column(&csv_path, &headers, name);
    let (pc, sc, gc, tc) = (col("path")?, col("sequence_id")?, col("participant_id")?, col("phrase")?);
    let mut out = Vec::new();
    for rec in records(&csv_path, &mut rdr) {
        let (line, rec) = rec?;
        let field = |i: usize| rec.get(i).unwrap_or_default().trim();
        let sequence_id = field(sc).parse::<i64>().map_err(|_| DataError::Csv {
            path: csv_path.clone(),
            line,
            message: format!("sequence_id `{}` is not an integer", field(sc)),
        })?;
        out.push(PhraseEntry {
            path: root.join(field(pc)),
            sequence_id,
            participant: field(gc).to_string(),
            phrase: field(tc).to_string(),
            line,
        });
    }
    Ok(out)
}

/// Read every sequence of one wide parquet file, by `sequence_id` (ascending), each with its frames
/// sorted by frame number. Missing coordinates (null or NaN) are NaN.
pub fn read_file(path: &Path) -> Result<Vec<(i64, LandmarkSequence)>> {
    let table = Table::open(path)?;
    let columns = table.columns();
    let missing = |name: String| {
        let found: Vec<&str> = columns.iter().take(8).map(|c| c.name.as_str()).collect();
        DataError::MissingColumn {
            path: path.to_path_buf(),
            column: name,
            found: format!("{} … ({} columns)", found.join(", "), columns.len()),
        }
    };
    let of_kind = |name: String, kind: Kind, expected: &str| {
        let p = table.position(&name).ok_or_else(|| missing(name.clone()))?;
        if columns[p].kind != kind {
            return Err(DataError::WrongType {
                path: path.to_path_buf(),
                column: name,
                expected: expected.into(),
                found: columns[p].type_name.clone(),
            });
        }
        Ok(p)
    };
    // sequence_id, frame, then the coordinate column of every (axis, point).
    let mut positions = Vec::with_capacity(2 + NUM_LANDMARKS * 3);
    for name in ["sequence_id", "frame"] {
        positions.push(of_kind(name.into(), Kind::Int, "an integer type")?);
    }
    for axis in ['x', 'y', 'z'] {
        for p in 0..NUM_LANDMARKS {
            positions.push(of_kind(column_name(axis, p), Kind::Float, "a floating-point type")?);
        }
    }
    // Checked against the footer and the file's size before reading.
    let declared = u64::try_from(table.declared_rows()).unwrap_or(0);
    let file_len = table.file_len();
    let most = (file_len / MIN_BYTES_PER_ROW).max(MAX_FRAMES as u64);
    if declared > most {
        return Err(DataError::invalid(
            path,
            format!(
                "declares {declared} rows in {file_len} bytes; a file of this size holds at most {most} (one row of 1,629 coordinates per {MIN_BYTES_PER_ROW} bytes, or {MAX_FRAMES} rows)"
            ),
        ));
    }
    // sequence_id -> frame -> xyz of its 543 points
    let mut sequences: BTreeMap<i64, BTreeMap<i64, Vec<f32>>> = BTreeMap::new();
    for chunk in table.chunks(&positions, 4096) {
        let chunk = chunk?;
        let values: Vec<&[f32]> = (2..positions.len()).map(|c| chunk.floats(c)).collect();
        for r in 0..chunk.rows {
            let row = chunk.first_row + r;
            let (Some(id), Some(frame)) = (chunk.int(0, r), chunk.int(1, r)) else {
                return Err(DataError::invalid(path, format!("row {row}: null sequence_id or frame")));
            };
            let mut xyz = vec![f32::NAN; NUM_LANDMARKS * 3];
            for (k, col) in values.iter().enumerate() {
                // k = axis * 543 + point; stored as point * 3 + axis.
                let (axis, p) = (k / NUM_LANDMARKS, k % NUM_LANDMARKS);
                xyz[p * 3 + axis] = col[r];
            }
            let sequence = sequences.entry(id).or_default();
            if sequence.len() == MAX_FRAMES && !sequence.contains_key(&frame) {
                return Err(DataError::invalid(
                    path,
                    format!(
                        "row {row}: sequence {id} has more than {MAX_FRAMES} frames; a recording has at most {MAX_FRAMES}"
                    ),
                ));
            }
            if sequence.insert(frame, xyz).is_some() {
                return Err(DataError::invalid(
                    path,
                    format!("row {row}: frame {frame} of sequence {id} appears twice"),
                ));
            }
        }
    }
    if sequences.is_empty() {
        return Err(DataError::EmptySequence { path: path.to_path_buf(), detail: ": the file has no rows".into() });
    }
    let mut out = Vec::with_capacity(sequences.len());
    for (id, frames) in sequences {
        let mut seq = LandmarkSequence::empty(0, NUM_LANDMARKS);
        for (frame, xyz) in frames {
            seq.frame_ids.push(i32::try_from(frame).map_err(|_| {
                DataError::invalid(path, format!("sequence {id}: frame number {frame} is out of range"))
            })?);
            seq.xyz.extend_from_slice(&xyz);
        }
        out.push((id, seq));
    }
    Ok(out)
}

/// Read one sequence of a wide parquet file.
pub fn read_sequence(path: &Path, sequence_id: i64) -> Result<LandmarkSequence> {
    let all = read_file(path)?;
    let n = all.len();
    all.into_iter()
        .find(|(id, _)| *id == sequence_id)
        .map(|(_, s)| s)
        .ok_or_else(|| DataError::invalid(path, format!("has no sequence_id {sequence_id} (it holds {n} sequences)")))
}

/// Write sequences (`[frames, 543, 3]` each) as one wide parquet file, atomically: float32
/// coordinates, `sequence_id` int64 and `frame` int16 as in the competition files.
pub fn write_file(path: &Path, sequences: &[(i64, &LandmarkSequence)], codec: Codec) -> Result<()> {
    let mut ids = Vec::new();
    let mut frames = Vec::new();
    let mut coords: Vec<Vec<Option<f32>>> = vec![Vec::new(); NUM_LANDMARKS * 3];
    for (id, seq) in sequences {
        if seq.points != NUM_LANDMARKS {
            return Err(DataError::ShapeMismatch {
                path: path.to_path_buf(),
                expected_what: "landmarks per frame".into(),
                expected: NUM_LANDMARKS,
                found: seq.points,
            });
        }
        for (f, &frame) in seq.frame_ids.iter().enumerate() {
            ids.push(*id);
            frames.push(i16::try_from(frame).map_err(|_| {
                DataError::invalid(path, format!("frame number {frame} does not fit the int16 column"))
            })?);
            for p in 0..NUM_LANDMARKS {
                let v = seq.at(f, p);
                for axis in 0..3 {
                    coords[axis * NUM_LANDMARKS + p].push(Some(v[axis]));
                }
            }
        }
    }
    let names: Vec<String> =
        (0..NUM_LANDMARKS * 3).map(|k| column_name(['x', 'y', 'z'][k / NUM_LANDMARKS], k % NUM_LANDMARKS)).collect();
    let mut columns = vec![("sequence_id", Data::Int64(ids)), ("frame", Data::Int16(frames))];
    for (name, values) in names.iter().zip(coords) {
        columns.push((name.as_str(), Data::Float(values)));
    }
    write_atomic(path, &encode(path, &columns, codec)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_names_follow_the_competition_files() {
        assert_eq!(column_name('x', 0), "x_face_0");
        assert_eq!(column_name('z', 542), "z_right_hand_20");
        assert_eq!(column_name('y', 489), "y_pose_0");
        assert_eq!(column_name('x', 468), "x_left_hand_0");
    }
}
