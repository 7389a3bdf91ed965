//! The public ISLR ("asl-signs") parquet layout: one file per sequence, long format, one row per
//! (frame, landmark): `frame, row_id, type, landmark_index, x, y, z`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Float32Array, Int32Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use serde::{Deserialize, Serialize};

use crate::error::{write_atomic, DataError, Result};
use crate::guard::guarded;
use crate::layout::{LandmarkType, NUM_LANDMARKS};
use crate::sequence::{LandmarkSequence, MAX_FRAMES};

#[derive(Clone, Copy)]
enum Kind {
    Int,
    Float,
    Text,
}

impl Kind {
    fn accepts(self, t: &DataType) -> bool {
        match self {
            Kind::Int => t.is_integer(),
            Kind::Float => t.is_floating(),
            Kind::Text => match t {
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
                DataType::Dictionary(_, v) => matches!(v.as_ref(), DataType::Utf8 | DataType::LargeUtf8),
                _ => false,
            },
        }
    }
    fn describe(self) -> &'static str {
        match self {
            Kind::Int => "an integer type (int16 in the ISLR data)",
            Kind::Float => "a floating-point type (double in the ISLR data)",
            Kind::Text => "a string type",
        }
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

pub(crate) fn parquet_err(path: &Path, e: impl std::fmt::Display) -> DataError {
    DataError::Parquet { path: path.to_path_buf(), message: e.to_string() }
}

/// Open the parquet file `path` for reading, with its footer checked: every column chunk must lie
/// inside the file (the parquet crate asserts this while reading and would panic). Returns the
/// reader's builder and the file's length.
pub(crate) fn open_parquet(path: &Path) -> Result<(ParquetRecordBatchReaderBuilder<std::fs::File>, u64)> {
    let file = crate::error::open_regular(path)?;
    let file_len = file.metadata().map_err(|e| DataError::io(path, e))?.len();
    let builder = guarded(|| ParquetRecordBatchReaderBuilder::try_new(file))
        .map_err(|m| damaged(path, &m))?
        .map_err(|e| parquet_err(path, e))?;
    for (g, group) in builder.metadata().row_groups().iter().enumerate() {
        for chunk in group.columns() {
            let start = chunk.dictionary_page_offset().unwrap_or(chunk.data_page_offset());
            let len = chunk.compressed_size();
            let inside =
                start >= 0 && len >= 0 && (start as u64).checked_add(len as u64).is_some_and(|end| end <= file_len);
            if !inside {
                return Err(parquet_err(
                    path,
                    format!(
                        "row group {g}, column {}: the footer puts its {len} bytes at offset {start}, outside the file's {file_len} bytes",
                        chunk.column_path()
                    ),
                ));
            }
        }
    }
    Ok((builder, file_len))
}

/// The record batches of `reader`; a panic of the parquet decoder (it asserts on some damaged
/// pages) is an error naming the file.
pub(crate) fn batches(
    path: &Path,
    mut reader: ParquetRecordBatchReader,
) -> impl Iterator<Item = Result<RecordBatch>> + '_ {
    std::iter::from_fn(move || match guarded(|| reader.next()) {
        Ok(next) => next.map(|b| b.map_err(|e| parquet_err(path, e))),
        Err(m) => Some(Err(damaged(path, &m))),
    })
}

fn damaged(path: &Path, panic: &str) -> DataError {
    parquet_err(path, format!("damaged file: the parquet decoder stopped with \"{panic}\""))
}

/// The compression codecs parquet files are written with (all of them are read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Codec {
    /// Snappy (pyarrow's default).
    #[default]
    Snappy,
    /// Zstandard (polars' default).
    Zstd,
    /// Gzip.
    Gzip,
    /// LZ4 (raw, the current parquet codec).
    Lz4,
    /// Brotli.
    Brotli,
    /// No compression.
    None,
}

impl Codec {
    /// Every codec.
    pub const ALL: [Codec; 6] = [Self::Snappy, Self::Zstd, Self::Gzip, Self::Lz4, Self::Brotli, Self::None];

    fn compression(self) -> Compression {
        use parquet::basic::{BrotliLevel, GzipLevel, ZstdLevel};
        match self {
            Self::Snappy => Compression::SNAPPY,
            Self::Zstd => Compression::ZSTD(ZstdLevel::default()),
            Self::Gzip => Compression::GZIP(GzipLevel::default()),
            Self::Lz4 => Compression::LZ4_RAW,
            Self::Brotli => Compression::BROTLI(BrotliLevel::default()),
            Self::None => Compression::UNCOMPRESSED,
        }
    }
}

/// The compression codec of every column chunk of a parquet file, as parquet names them
/// (`SNAPPY`, `ZSTD(ZstdLevel(1))`, …), deduplicated.
pub fn codecs(path: &Path) -> Result<Vec<String>> {
    use parquet::file::reader::FileReader;
    let file = crate::error::open_regular(path)?;
    let reader = parquet::file::reader::SerializedFileReader::new(file).map_err(|e| parquet_err(path, e))?;
    let mut out: Vec<String> = reader
        .metadata()
        .row_groups()
        .iter()
        .flat_map(|g| g.columns().iter().map(|c| format!("{:?}", c.compression())))
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

/// Encode `batch` as a parquet file image compressed with `codec`.
pub(crate) fn encode_batch(path: &Path, batch: &RecordBatch, codec: Codec) -> Result<Vec<u8>> {
    let props = WriterProperties::builder().set_compression(codec.compression()).build();
    let mut buf = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut buf, batch.schema(), Some(props)).map_err(|e| parquet_err(path, e))?;
    writer.write(batch).map_err(|e| parquet_err(path, e))?;
    writer.close().map_err(|e| parquet_err(path, e))?;
    Ok(buf)
}

pub(crate) fn cast(path: &Path, col: &ArrayRef, to: &DataType) -> Result<ArrayRef> {
    arrow_cast::cast(col, to).map_err(|e| parquet_err(path, e))
}

/// Read one ISLR parquet file into a `[frames, 543, 3]` sequence. Frames are sorted by frame
/// number; gaps in the numbering are kept in `frame_ids`, not filled. Null or NaN coordinates
/// become `NaN`.
pub fn read_parquet(path: &Path) -> Result<LandmarkSequence> {
    let (builder, _) = open_parquet(path)?;
    let schema = builder.schema().clone();
    let found = || schema.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join(", ");
    let mut roots = Vec::new();
    for (name, kind) in COLUMNS {
        let (i, field) = schema.column_with_name(name).ok_or_else(|| DataError::MissingColumn {
            path: path.to_path_buf(),
            column: name.into(),
            found: found(),
        })?;
        if !kind.accepts(field.data_type()) {
            return Err(DataError::WrongType {
                path: path.to_path_buf(),
                column: name.into(),
                expected: kind.describe().into(),
                found: field.data_type().to_string(),
            });
        }
        roots.push(i);
    }
    // Checked against the footer before reading: a few MB of repeated rows can declare millions.
    let declared = builder.metadata().file_metadata().num_rows();
    let most = (MAX_FRAMES * NUM_LANDMARKS) as i64;
    if declared > most {
        return Err(DataError::invalid(
            path,
            format!(
                "declares {declared} rows; a recording has at most {MAX_FRAMES} frames of {NUM_LANDMARKS} landmarks ({most} rows)"
            ),
        ));
    }
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let reader = builder.with_projection(mask).with_batch_size(1 << 16).build().map_err(|e| parquet_err(path, e))?;

    // frame number -> rows of (flat landmark index, xyz)
    let mut frames: BTreeMap<i32, Vec<(usize, [f32; 3])>> = BTreeMap::new();
    let mut row_base = 0usize;
    for batch in batches(path, reader) {
        let batch = batch?;
        let col = |name: &str| batch.column_by_name(name).expect("projected column present").clone();
        let frame = cast(path, &col("frame"), &DataType::Int32)?;
        let frame = frame.as_any().downcast_ref::<Int32Array>().expect("cast to Int32");
        let lidx = cast(path, &col("landmark_index"), &DataType::Int32)?;
        let lidx = lidx.as_any().downcast_ref::<Int32Array>().expect("cast to Int32");
        let ty = cast(path, &col("type"), &DataType::Utf8)?;
        let ty = ty.as_any().downcast_ref::<StringArray>().expect("cast to Utf8");
        let xyz: Vec<ArrayRef> =
            ["x", "y", "z"].iter().map(|c| cast(path, &col(c), &DataType::Float32)).collect::<Result<_>>()?;
        let xyz: Vec<&Float32Array> =
            xyz.iter().map(|a| a.as_any().downcast_ref::<Float32Array>().expect("cast")).collect();
        for r in 0..batch.num_rows() {
            let row = row_base + r + 1;
            if frame.is_null(r) || lidx.is_null(r) || ty.is_null(r) {
                return Err(DataError::invalid(path, format!("row {row}: null in frame, type or landmark_index")));
            }
            let t = LandmarkType::parse(ty.value(r)).ok_or_else(|| {
                DataError::invalid(
                    path,
                    format!(
                        "row {row}: unknown landmark type `{}`; expected face, left_hand, pose or right_hand",
                        ty.value(r)
                    ),
                )
            })?;
            let li = lidx.value(r);
            if li < 0 || li as usize >= t.count() {
                return Err(DataError::invalid(
                    path,
                    format!("row {row}: landmark_index {li} out of range for {} (0..{})", t.name(), t.count()),
                ));
            }
            let v = |k: usize| if xyz[k].is_null(r) { f32::NAN } else { xyz[k].value(r) };
            let id = frame.value(r);
            if frames.len() == MAX_FRAMES && !frames.contains_key(&id) {
                return Err(DataError::invalid(
                    path,
                    format!("row {row}: more than {MAX_FRAMES} distinct frames; a recording has at most {MAX_FRAMES}"),
                ));
            }
            let rows = frames.entry(id).or_default();
            rows.push((t.offset() + li as usize, [v(0), v(1), v(2)]));
        }
        row_base += batch.num_rows();
    }
    if frames.is_empty() {
        return Err(DataError::EmptySequence { path: path.to_path_buf(), detail: ": the file has no rows".into() });
    }
    let mut seq = LandmarkSequence::empty(frames.len(), NUM_LANDMARKS);
    for (f, (id, rows)) in frames.into_iter().enumerate() {
        seq.frame_ids[f] = id;
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
                ty.push(t.name());
                lidx.push(i as i16);
                x.push(v[0] as f64);
                y.push(v[1] as f64);
                z.push(v[2] as f64);
            }
        }
    }
    let schema = Arc::new(Schema::new(vec![
        Field::new("frame", DataType::Int16, false),
        Field::new("row_id", DataType::Utf8, false),
        Field::new("type", DataType::Utf8, false),
        Field::new("landmark_index", DataType::Int16, false),
        Field::new("x", DataType::Float64, true),
        Field::new("y", DataType::Float64, true),
        Field::new("z", DataType::Float64, true),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(arrow_array::Int16Array::from(frame)),
        Arc::new(StringArray::from(row_id)),
        Arc::new(StringArray::from(ty)),
        Arc::new(arrow_array::Int16Array::from(lidx)),
        Arc::new(arrow_array::Float64Array::from(x)),
        Arc::new(arrow_array::Float64Array::from(y)),
        Arc::new(arrow_array::Float64Array::from(z)),
    ];
    let batch = RecordBatch::try_new(schema, columns).map_err(|e| parquet_err(path, e))?;
    write_atomic(path, &encode_batch(path, &batch, codec)?)
}
