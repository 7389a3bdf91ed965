//! The public ISLR ("asl-signs") parquet layout: one file per sequence, long format, one row per
//! (frame, landmark): `frame, row_id, type, landmark_index, x, y, z`.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{write_atomic, DataError, Result};
use crate::layout::{LandmarkType, NUM_LANDMARKS};
use crate::sequence::{LandmarkSequence, MAX_FRAMES};
use crate::table::{encode, Data, Kind, Table};

pub use crate::table::{codecs, Codec};

/// What a kind of column is, for messages.
fn describe(kind: Kind) -> &'static str {
    match kind {
        Kind::Int => "an integer type (int16 in the ISLR data)",
        Kind::Float => "a floating-point type (double in the ISLR data)",
        Kind::Text => "a string type",
        Kind::Other => "a type SignFlow reads",
    }
}

const COLUMNS: [(&str, Kind); 6] = [
    ("frame", Kind::Int),
    ("type", Kind::Text),
    ("landmark_index", Kind::Int),
    ("x", Kind::Float),
    ("y", Kind::Float),
    ("z", Kind::Float),
];

/// Read one ISLR parquet file into a `[frames, 543, 3]` sequence. Frames are sorted by frame
/// number; gaps in the numbering are kept in `frame_ids`, not filled. Null or NaN coordinates
/// become `NaN`.
pub fn read_parquet(path: &Path) -> Result<LandmarkSequence> {
    let table = Table::open(path)?;
    let found = || table.columns().iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ");
    let mut positions = Vec::new();
    for (name, kind) in COLUMNS {
        let p = table.position(name).ok_or_else(|| DataError::MissingColumn {
            path: path.to_path_buf(),
            column: name.into(),
            found: found(),
        })?;
        let column = &table.columns()[p];
        if column.kind != kind {
            return Err(DataError::WrongType {
                path: path.to_path_buf(),
                column: name.into(),
                expected: describe(kind).into(),
                found: column.type_name.clone(),
            });
        }
        positions.push(p);
    }
    // Checked against the footer before reading: a few MB of repeated rows can declare millions.
    let declared = table.declared_rows();
    let most = (MAX_FRAMES * NUM_LANDMARKS) as i64;
    if declared > most {
        return Err(DataError::invalid(
            path,
            format!(
                "declares {declared} rows; a recording has at most {MAX_FRAMES} frames of {NUM_LANDMARKS} landmarks ({most} rows)"
            ),
        ));
    }

    // frame number -> rows of (flat landmark index, xyz)
    let mut frames: BTreeMap<i64, Vec<(usize, [f32; 3])>> = BTreeMap::new();
    for chunk in table.chunks(&positions, 1 << 16) {
        let chunk = chunk?;
        let (x, y, z) = (chunk.floats(3), chunk.floats(4), chunk.floats(5));
        for r in 0..chunk.rows {
            let row = chunk.first_row + r;
            let text = chunk
                .text(1, r)
                .map_err(|_| DataError::invalid(path, format!("row {row}: the landmark type is not UTF-8 text")))?;
            let (Some(id), Some(ty), Some(li)) = (chunk.int(0, r), text, chunk.int(2, r)) else {
                return Err(DataError::invalid(path, format!("row {row}: null in frame, type or landmark_index")));
            };
            let t = LandmarkType::parse(ty).ok_or_else(|| {
                DataError::invalid(
                    path,
                    format!("row {row}: unknown landmark type `{ty}`; expected face, left_hand, pose or right_hand"),
                )
            })?;
            if li < 0 || li as usize >= t.count() {
                return Err(DataError::invalid(
                    path,
                    format!("row {row}: landmark_index {li} out of range for {} (0..{})", t.name(), t.count()),
                ));
            }
            if frames.len() == MAX_FRAMES && !frames.contains_key(&id) {
                return Err(DataError::invalid(
                    path,
                    format!("row {row}: more than {MAX_FRAMES} distinct frames; a recording has at most {MAX_FRAMES}"),
                ));
            }
            let rows = frames.entry(id).or_default();
            rows.push((t.offset() + li as usize, [x[r], y[r], z[r]]));
        }
    }
    if frames.is_empty() {
        return Err(DataError::EmptySequence { path: path.to_path_buf(), detail: ": the file has no rows".into() });
    }
    let mut seq = LandmarkSequence::empty(frames.len(), NUM_LANDMARKS);
    for (f, (id, rows)) in frames.into_iter().enumerate() {
        seq.frame_ids[f] =
            i32::try_from(id).map_err(|_| DataError::invalid(path, format!("frame number {id} is out of range")))?;
        for (p, v) in rows {
            seq.set(f, p, v);
        }
    }
    Ok(seq)
}

/// Write a `[frames, 543, 3]` sequence as an ISLR parquet file (snappy), atomically.
pub fn write_parquet(path: &Path, seq: &LandmarkSequence) -> Result<()> {
    write_parquet_with(path, seq, Codec::Snappy)
}

/// Write a `[frames, 543, 3]` sequence as an ISLR parquet file compressed with `codec`, atomically.
pub fn write_parquet_with(path: &Path, seq: &LandmarkSequence, codec: Codec) -> Result<()> {
    if seq.points != NUM_LANDMARKS {
        return Err(DataError::ShapeMismatch {
            path: path.to_path_buf(),
            expected_what: "landmarks per frame".into(),
            expected: NUM_LANDMARKS,
            found: seq.points,
        });
    }
    let rows = seq.frames() * NUM_LANDMARKS;
    let mut frame = Vec::with_capacity(rows);
    let mut row_id = Vec::with_capacity(rows);
    let mut ty = Vec::with_capacity(rows);
    let mut lidx = Vec::with_capacity(rows);
    let (mut x, mut y, mut z) = (Vec::with_capacity(rows), Vec::with_capacity(rows), Vec::with_capacity(rows));
    for (f, &id) in seq.frame_ids.iter().enumerate() {
        let id16 = i16::try_from(id)
            .map_err(|_| DataError::invalid(path, format!("frame number {id} does not fit the ISLR int16 column")))?;
        for t in LandmarkType::ALL {
            for i in 0..t.count() {
                let v = seq.at(f, t.offset() + i);
                frame.push(id16);
                row_id.push(format!("{id}-{}-{i}", t.name()));
                ty.push(t.name().to_string());
                lidx.push(i as i16);
                x.push(Some(v[0] as f64));
                y.push(Some(v[1] as f64));
                z.push(Some(v[2] as f64));
            }
        }
    }
    let columns = [
        ("frame", Data::Int16(frame)),
        ("row_id", Data::Text(row_id)),
        ("type", Data::Text(ty)),
        ("landmark_index", Data::Int16(lidx)),
        ("x", Data::Double(x)),
        ("y", Data::Double(y)),
        ("z", Data::Double(z)),
    ];
    write_atomic(path, &encode(path, &columns, codec)?)
}
