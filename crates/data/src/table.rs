//! Flat parquet tables through parquet's own column readers and writers: a file's top-level
//! columns by name with the kind of values they hold, its rows a chunk at a time with nulls kept,
//! and tables written a row group at a time with any codec. The ISLR and fingerspelling layouts
//! are read and written through it.
//!
//! Files are untrusted: the footer is checked before a page is read (every column chunk inside
//! the file), a decoder's panic on a damaged page is an error naming the file, every column of a
//! row group must hold the rows the group declares, and no more than one chunk of rows is decoded
//! at a time.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::basic::{Compression, ConvertedType, IntType, LogicalType, Repetition, Type as Physical};
use parquet::column::reader::{ColumnReader, ColumnReaderImpl};
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, FloatType, Int32Type, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::{Type, TypePtr};
use serde::{Deserialize, Serialize};

use crate::error::{DataError, Result};
use crate::guard::guarded;

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

/// What a column's values are, from its parquet type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Integers: INT32 or INT64, signed or unsigned, of any width.
    Int,
    /// Floating point: float16, float32 or double.
    Float,
    /// UTF-8 text.
    Text,
    /// Anything else (booleans, dates, times, decimals, bytes, lists, structs): never read.
    Other,
}

/// How a column's physical values decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decode {
    I32 { unsigned: bool },
    I64 { unsigned: bool },
    F16,
    F32,
    F64,
    Text,
    None,
}

impl Decode {
    fn kind(self) -> Kind {
        match self {
            Self::I32 { .. } | Self::I64 { .. } => Kind::Int,
            Self::F16 | Self::F32 | Self::F64 => Kind::Float,
            Self::Text => Kind::Text,
            Self::None => Kind::Other,
        }
    }
}

/// One top-level column of a file.
#[derive(Debug, Clone)]
pub struct Column {
    /// Its name.
    pub name: String,
    /// What its values are.
    pub kind: Kind,
    /// Its type as pyarrow names it (`int16`, `double`, `string`, `list`, …), for messages.
    pub type_name: String,
    decode: Decode,
    /// Its leaf column, when it is one primitive column.
    leaf: Option<usize>,
    /// Its highest definition level (1 when it may hold nulls).
    max_def: i16,
}

/// The decoding and pyarrow's name of a top-level field.
fn classify(t: &Type) -> (Decode, String) {
    let info = t.get_basic_info();
    let logical = info.logical_type_ref();
    let converted = info.converted_type();
    if t.is_group() {
        let list = matches!(logical, Some(LogicalType::List)) || converted == ConvertedType::LIST;
        let map = matches!(logical, Some(LogicalType::Map)) || converted == ConvertedType::MAP;
        let name = if list {
            "list"
        } else if map {
            "map"
        } else {
            "struct"
        };
        return (Decode::None, name.into());
    }
    if info.has_repetition() && info.repetition() == Repetition::REPEATED {
        return (Decode::None, "list".into());
    }
    let length = match t {
        Type::PrimitiveType { type_length, .. } => *type_length,
        Type::GroupType { .. } => 0,
    };
    let int = |bits: i8, signed: bool| format!("{}int{bits}", if signed { "" } else { "u" });
    let physical = t.get_physical_type();
    let integer = match (physical, logical, converted) {
        (Physical::INT32 | Physical::INT64, Some(LogicalType::Integer(IntType { bit_width, is_signed })), _) => {
            Some((*bit_width, *is_signed))
        }
        (_, Some(_), _) => None,
        (Physical::INT32, None, ConvertedType::NONE | ConvertedType::INT_32) => Some((32, true)),
        (Physical::INT64, None, ConvertedType::NONE | ConvertedType::INT_64) => Some((64, true)),
        (Physical::INT32, None, ConvertedType::INT_8) => Some((8, true)),
        (Physical::INT32, None, ConvertedType::INT_16) => Some((16, true)),
        (Physical::INT32, None, ConvertedType::UINT_8) => Some((8, false)),
        (Physical::INT32, None, ConvertedType::UINT_16) => Some((16, false)),
        (Physical::INT32, None, ConvertedType::UINT_32) => Some((32, false)),
        (Physical::INT64, None, ConvertedType::UINT_64) => Some((64, false)),
        _ => None,
    };
    if let Some((bits, signed)) = integer {
        let decode = if physical == Physical::INT32 {
            Decode::I32 { unsigned: !signed }
        } else {
            Decode::I64 { unsigned: !signed }
        };
        return (decode, int(bits, signed));
    }
    let text = matches!(logical, Some(LogicalType::String | LogicalType::Enum | LogicalType::Json))
        || (logical.is_none() && matches!(converted, ConvertedType::UTF8 | ConvertedType::ENUM | ConvertedType::JSON));
    match (physical, logical) {
        (Physical::FLOAT, None) => (Decode::F32, "float".into()),
        (Physical::DOUBLE, None) => (Decode::F64, "double".into()),
        (Physical::FIXED_LEN_BYTE_ARRAY, Some(LogicalType::Float16)) if length == 2 => {
            (Decode::F16, "halffloat".into())
        }
        (Physical::BYTE_ARRAY, _) if text => (Decode::Text, "string".into()),
        _ => {
            let name = match (logical, converted) {
                (Some(LogicalType::Date), _) | (None, ConvertedType::DATE) => "date32".to_string(),
                (Some(LogicalType::Timestamp(_)), _)
                | (None, ConvertedType::TIMESTAMP_MILLIS | ConvertedType::TIMESTAMP_MICROS) => "timestamp".into(),
                (Some(LogicalType::Time(_)), _) | (None, ConvertedType::TIME_MILLIS | ConvertedType::TIME_MICROS) => {
                    "time".into()
                }
                (Some(LogicalType::Decimal(_)), _) | (None, ConvertedType::DECIMAL) => "decimal".into(),
                _ => match physical {
                    Physical::BOOLEAN => "bool".into(),
                    Physical::BYTE_ARRAY => "binary".into(),
                    Physical::FIXED_LEN_BYTE_ARRAY => format!("fixed_size_binary[{length}]"),
                    Physical::INT96 => "int96".into(),
                    other => format!("{other} ({logical:?})").to_lowercase(),
                },
            };
            (Decode::None, name)
        }
    }
}

/// One column's values for a chunk of rows.
#[derive(Debug)]
enum Values {
    Int(Vec<Option<i64>>),
    /// A null is NaN.
    Float(Vec<f32>),
    Text(Vec<Option<ByteArray>>),
}

/// Rows of a table read together: the requested columns, in the order they were requested.
#[derive(Debug)]
pub struct Chunk {
    /// The 1-based row number of its first row in the file, for messages.
    pub first_row: usize,
    /// How many rows it holds.
    pub rows: usize,
    columns: Vec<Values>,
}

impl Chunk {
    /// Row `r`'s value of requested column `c`, an integer column (`None` for a null).
    pub fn int(&self, c: usize, r: usize) -> Option<i64> {
        match &self.columns[c] {
            Values::Int(v) => v[r],
            other => panic!("column {c} is not an integer column: {other:?}"),
        }
    }

    /// Requested column `c`, a floating-point column, as f32 (null: NaN).
    pub fn floats(&self, c: usize) -> &[f32] {
        match &self.columns[c] {
            Values::Float(v) => v,
            other => panic!("column {c} is not a floating-point column: {other:?}"),
        }
    }

    /// Row `r`'s value of requested column `c`, a text column (`None` for a null); bytes that are
    /// not UTF-8 are an error.
    pub fn text(&self, c: usize, r: usize) -> std::result::Result<Option<&str>, std::str::Utf8Error> {
        match &self.columns[c] {
            Values::Text(v) => v[r].as_ref().map(|b| std::str::from_utf8(b.data())).transpose(),
            other => panic!("column {c} is not a text column: {other:?}"),
        }
    }
}

/// A parquet file opened for reading, its footer checked.
pub struct Table {
    path: PathBuf,
    reader: SerializedFileReader<File>,
    len: u64,
    columns: Vec<Column>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table").field("path", &self.path).field("columns", &self.columns.len()).finish()
    }
}

/// An error naming the file: parquet could not decode it.
pub(crate) fn parquet_err(path: &Path, e: impl std::fmt::Display) -> DataError {
    DataError::Parquet { path: path.to_path_buf(), message: e.to_string() }
}

fn damaged(path: &Path, panic: &str) -> DataError {
    parquet_err(path, format!("damaged file: the parquet decoder stopped with \"{panic}\""))
}

impl Table {
    /// Open the parquet file `path`: its footer is read and every column chunk must lie inside the
    /// file (the parquet crate asserts this while reading and would panic).
    pub fn open(path: &Path) -> Result<Table> {
        let file = crate::error::open_regular(path)?;
        let len = file.metadata().map_err(|e| DataError::io(path, e))?.len();
        let reader = guarded(|| SerializedFileReader::new(file))
            .map_err(|m| damaged(path, &m))?
            .map_err(|e| parquet_err(path, e))?;
        let meta = reader.metadata();
        let leaves = meta.file_metadata().schema_descr().num_columns();
        for (g, group) in meta.row_groups().iter().enumerate() {
            if group.columns().len() != leaves {
                return Err(parquet_err(
                    path,
                    format!(
                        "row group {g} has {} column chunks; the schema has {leaves} columns",
                        group.columns().len()
                    ),
                ));
            }
            if group.num_rows() < 0 {
                return Err(parquet_err(path, format!("row group {g} declares {} rows", group.num_rows())));
            }
            for chunk in group.columns() {
                let start = chunk.dictionary_page_offset().unwrap_or(chunk.data_page_offset());
                let size = chunk.compressed_size();
                let inside =
                    start >= 0 && size >= 0 && (start as u64).checked_add(size as u64).is_some_and(|end| end <= len);
                if !inside {
                    return Err(parquet_err(
                        path,
                        format!(
                            "row group {g}, column {}: the footer puts its {size} bytes at offset {start}, outside the file's {len} bytes",
                            chunk.column_path()
                        ),
                    ));
                }
            }
        }
        // The row groups' rows are what is read; the footer's total is what the layouts check.
        let in_groups: i64 = meta.row_groups().iter().map(|g| g.num_rows()).fold(0, i64::saturating_add);
        if in_groups != meta.file_metadata().num_rows() {
            return Err(parquet_err(
                path,
                format!("the footer declares {} rows and its row groups {in_groups}", meta.file_metadata().num_rows()),
            ));
        }
        let schema = meta.file_metadata().schema_descr();
        let mut columns: Vec<Column> = schema
            .root_schema()
            .get_fields()
            .iter()
            .map(|field| {
                let (decode, type_name) = classify(field);
                Column {
                    name: field.name().to_string(),
                    kind: decode.kind(),
                    type_name,
                    decode,
                    leaf: None,
                    max_def: 0,
                }
            })
            .collect();
        for (leaf, descr) in schema.columns().iter().enumerate() {
            let column = &mut columns[schema.get_column_root_idx(leaf)];
            if column.decode != Decode::None {
                column.leaf = Some(leaf);
                column.max_def = descr.max_def_level();
            }
        }
        Ok(Table { path: path.to_path_buf(), reader, len, columns })
    }

    /// The file's top-level columns, in file order.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// The position of the column named `name` in [`Self::columns`].
    pub fn position(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// The rows the footer declares.
    pub fn declared_rows(&self) -> i64 {
        self.reader.metadata().file_metadata().num_rows()
    }

    /// The file's length in bytes.
    pub fn file_len(&self) -> u64 {
        self.len
    }

    /// The file's rows, `rows_per_chunk` at a time, of the columns at `positions` (each an
    /// integer, floating-point or text column).
    pub fn chunks(&self, positions: &[usize], rows_per_chunk: usize) -> Chunks<'_> {
        Chunks {
            table: self,
            positions: positions.to_vec(),
            per_chunk: rows_per_chunk.max(1),
            group: 0,
            readers: Vec::new(),
            left: 0,
            row: 0,
        }
    }
}

/// The rows of a [`Table`], a [`Chunk`] at a time ([`Table::chunks`]).
pub struct Chunks<'a> {
    table: &'a Table,
    positions: Vec<usize>,
    per_chunk: usize,
    /// The next row group to open.
    group: usize,
    readers: Vec<ColumnReader>,
    /// Rows of the open row group not read yet.
    left: usize,
    /// Rows read before this chunk.
    row: usize,
}

impl std::fmt::Debug for Chunks<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chunks").field("group", &self.group).field("row", &self.row).finish()
    }
}

impl Chunks<'_> {
    fn open_group(&mut self) -> Result<()> {
        let (table, g) = (self.table, self.group);
        let path = &table.path;
        let group = table.reader.get_row_group(g).map_err(|e| parquet_err(path, e))?;
        self.readers.clear();
        for &p in &self.positions {
            let leaf = table.columns[p].leaf.expect("chunks are read of integer, float or text columns");
            let reader = guarded(|| group.get_column_reader(leaf))
                .map_err(|m| damaged(path, &m))?
                .map_err(|e| parquet_err(path, e))?;
            self.readers.push(reader);
        }
        self.left = usize::try_from(group.metadata().num_rows()).unwrap_or(0);
        self.group += 1;
        Ok(())
    }

    fn read_chunk(&mut self, rows: usize) -> Result<Chunk> {
        let table = self.table;
        let mut columns = Vec::with_capacity(self.readers.len());
        for (reader, &p) in self.readers.iter_mut().zip(&self.positions) {
            let column = &table.columns[p];
            let read = guarded(|| read_values(reader, column, rows))
                .map_err(|m| damaged(&table.path, &m))?
                .map_err(|e| parquet_err(&table.path, format!("column `{}`: {e}", column.name)))?;
            let (got, values) = read;
            if got != rows {
                return Err(parquet_err(
                    &table.path,
                    format!(
                        "row group {}, column `{}`: it ends after {} of the rows from row {}; the row group declares {}",
                        self.group - 1,
                        column.name,
                        got,
                        self.row + 1,
                        rows
                    ),
                ));
            }
            columns.push(values);
        }
        let chunk = Chunk { first_row: self.row + 1, rows, columns };
        self.row += rows;
        self.left -= rows;
        Ok(chunk)
    }
}

impl Iterator for Chunks<'_> {
    type Item = Result<Chunk>;

    fn next(&mut self) -> Option<Result<Chunk>> {
        while self.left == 0 {
            if self.group == self.table.reader.num_row_groups() {
                return None;
            }
            if let Err(e) = self.open_group() {
                self.group = self.table.reader.num_row_groups();
                return Some(Err(e));
            }
        }
        let rows = self.left.min(self.per_chunk);
        let out = self.read_chunk(rows);
        if out.is_err() {
            (self.group, self.left) = (self.table.reader.num_row_groups(), 0);
        }
        Some(out)
    }
}

/// Up to `rows` values of `reader` (at most one chunk): how many rows it held and their values.
fn read_values(reader: &mut ColumnReader, column: &Column, rows: usize) -> parquet::errors::Result<(usize, Values)> {
    fn typed<T: parquet::data_type::DataType>(
        reader: &mut ColumnReaderImpl<T>,
        max_def: i16,
        rows: usize,
    ) -> parquet::errors::Result<(usize, Vec<Option<T::T>>)> {
        let mut values = Vec::with_capacity(rows);
        let mut defs = Vec::with_capacity(if max_def > 0 { rows } else { 0 });
        let (got, _, _) = reader.read_records(rows, (max_def > 0).then_some(&mut defs), None, &mut values)?;
        if max_def == 0 {
            return Ok((got, values.into_iter().map(Some).collect()));
        }
        let mut present = values.into_iter();
        Ok((got, defs.iter().map(|&d| if d == max_def { present.next() } else { None }).collect()))
    }
    let wrong = || parquet::errors::ParquetError::General(format!("its pages are not {}", column.type_name));
    let out_of_range =
        |v: u64| parquet::errors::ParquetError::General(format!("value {v} does not fit a signed 64-bit integer"));
    let d = column.max_def;
    Ok(match (reader, column.decode) {
        (ColumnReader::Int32ColumnReader(r), Decode::I32 { unsigned }) => {
            let (n, v) = typed::<Int32Type>(r, d, rows)?;
            let widen = |x: i32| if unsigned { i64::from(x as u32) } else { i64::from(x) };
            (n, Values::Int(v.into_iter().map(|x| x.map(widen)).collect()))
        }
        (ColumnReader::Int64ColumnReader(r), Decode::I64 { unsigned }) => {
            let (n, v) = typed::<Int64Type>(r, d, rows)?;
            let mut out = Vec::with_capacity(v.len());
            for x in v {
                out.push(match x {
                    Some(x) if unsigned && x < 0 => return Err(out_of_range(x as u64)),
                    x => x,
                });
            }
            (n, Values::Int(out))
        }
        (ColumnReader::FloatColumnReader(r), Decode::F32) => {
            let (n, v) = typed::<FloatType>(r, d, rows)?;
            (n, Values::Float(v.into_iter().map(|x| x.unwrap_or(f32::NAN)).collect()))
        }
        (ColumnReader::DoubleColumnReader(r), Decode::F64) => {
            let (n, v) = typed::<DoubleType>(r, d, rows)?;
            (n, Values::Float(v.into_iter().map(|x| x.map_or(f32::NAN, |x| x as f32)).collect()))
        }
        (ColumnReader::FixedLenByteArrayColumnReader(r), Decode::F16) => {
            let (n, v) = typed::<parquet::data_type::FixedLenByteArrayType>(r, d, rows)?;
            let mut out = Vec::with_capacity(v.len());
            for x in v {
                out.push(match x {
                    Some(b) => {
                        let bytes: [u8; 2] = b.data().try_into().map_err(|_| wrong())?;
                        half::f16::from_le_bytes(bytes).to_f32()
                    }
                    None => f32::NAN,
                });
            }
            (n, Values::Float(out))
        }
        (ColumnReader::ByteArrayColumnReader(r), Decode::Text) => {
            let (n, v) = typed::<ByteArrayType>(r, d, rows)?;
            (n, Values::Text(v))
        }
        _ => return Err(wrong()),
    })
}

/// One column's values to write. Integers and text are written as required columns, floats as
/// optional ones (`None` is a null).
#[derive(Debug, Clone)]
pub enum Data {
    /// INT32 annotated as a signed 16-bit integer (pyarrow's int16).
    Int16(Vec<i16>),
    /// INT32 (int32).
    Int32(Vec<i32>),
    /// INT64 (int64).
    Int64(Vec<i64>),
    /// FLOAT (float32).
    Float(Vec<Option<f32>>),
    /// DOUBLE (float64).
    Double(Vec<Option<f64>>),
    /// BYTE_ARRAY annotated as a string (pyarrow's string).
    Text(Vec<String>),
}

impl Data {
    fn len(&self) -> usize {
        match self {
            Self::Int16(v) => v.len(),
            Self::Int32(v) => v.len(),
            Self::Int64(v) => v.len(),
            Self::Float(v) => v.len(),
            Self::Double(v) => v.len(),
            Self::Text(v) => v.len(),
        }
    }

    fn field(&self, name: &str) -> parquet::errors::Result<TypePtr> {
        let (physical, logical, repetition) = match self {
            Self::Int16(_) => (
                Physical::INT32,
                Some(LogicalType::Integer(IntType { bit_width: 16, is_signed: true })),
                Repetition::REQUIRED,
            ),
            Self::Int32(_) => (Physical::INT32, None, Repetition::REQUIRED),
            Self::Int64(_) => (Physical::INT64, None, Repetition::REQUIRED),
            Self::Float(_) => (Physical::FLOAT, None, Repetition::OPTIONAL),
            Self::Double(_) => (Physical::DOUBLE, None, Repetition::OPTIONAL),
            Self::Text(_) => (Physical::BYTE_ARRAY, Some(LogicalType::String), Repetition::REQUIRED),
        };
        Ok(Arc::new(
            Type::primitive_type_builder(name, physical)
                .with_repetition(repetition)
                .with_logical_type(logical)
                .build()?,
        ))
    }
}

/// A parquet file image built a row group at a time: every group has the columns, names and
/// types of the first.
pub struct Writer {
    path: PathBuf,
    codec: Codec,
    inner: Option<SerializedFileWriter<Vec<u8>>>,
    schema: Vec<TypePtr>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").field("path", &self.path).field("codec", &self.codec).finish()
    }
}

impl Writer {
    /// A writer of a file for `path` (named in errors; nothing is written there).
    pub fn new(path: &Path, codec: Codec) -> Writer {
        Writer { path: path.to_path_buf(), codec, inner: None, schema: Vec::new() }
    }

    /// Add a row group of `columns` (name, values), all of one length.
    pub fn write_group(&mut self, columns: &[(&str, Data)]) -> Result<()> {
        let err = |e: parquet::errors::ParquetError| parquet_err(&self.path, e);
        let rows = columns.first().map_or(0, |(_, d)| d.len());
        if let Some((name, d)) = columns.iter().find(|(_, d)| d.len() != rows) {
            return Err(parquet_err(
                &self.path,
                format!("column `{name}` has {} rows, the first column {rows}", d.len()),
            ));
        }
        let fields =
            columns.iter().map(|(name, d)| d.field(name)).collect::<parquet::errors::Result<Vec<_>>>().map_err(err)?;
        if self.inner.is_none() {
            let schema = Type::group_type_builder("schema").with_fields(fields.clone()).build().map_err(err)?;
            let props = WriterProperties::builder().set_compression(self.codec.compression()).build();
            let writer = SerializedFileWriter::new(Vec::new(), Arc::new(schema), Arc::new(props)).map_err(err)?;
            (self.inner, self.schema) = (Some(writer), fields);
        } else if fields != self.schema {
            return Err(parquet_err(&self.path, "a row group's columns differ from the first group's"));
        }
        let writer = self.inner.as_mut().expect("created above");
        let mut group = writer.next_row_group().map_err(err)?;
        for (_, data) in columns {
            let mut column = group.next_column().map_err(err)?.expect("one column writer per schema column");
            let wrote = match data {
                Data::Int16(v) => {
                    let v: Vec<i32> = v.iter().map(|&x| i32::from(x)).collect();
                    column.typed::<Int32Type>().write_batch(&v, None, None)
                }
                Data::Int32(v) => column.typed::<Int32Type>().write_batch(v, None, None),
                Data::Int64(v) => column.typed::<Int64Type>().write_batch(v, None, None),
                Data::Float(v) => {
                    let defs: Vec<i16> = v.iter().map(|x| i16::from(x.is_some())).collect();
                    let present: Vec<f32> = v.iter().flatten().copied().collect();
                    column.typed::<FloatType>().write_batch(&present, Some(&defs), None)
                }
                Data::Double(v) => {
                    let defs: Vec<i16> = v.iter().map(|x| i16::from(x.is_some())).collect();
                    let present: Vec<f64> = v.iter().flatten().copied().collect();
                    column.typed::<DoubleType>().write_batch(&present, Some(&defs), None)
                }
                Data::Text(v) => {
                    let v: Vec<ByteArray> = v.iter().map(|s| ByteArray::from(s.as_str())).collect();
                    column.typed::<ByteArrayType>().write_batch(&v, None, None)
                }
            };
            wrote.map_err(err)?;
            column.close().map_err(err)?;
        }
        group.close().map_err(err)?;
        Ok(())
    }

    /// The file image; a file needs at least one row group (which may have no rows).
    pub fn finish(self) -> Result<Vec<u8>> {
        let Some(writer) = self.inner else {
            return Err(parquet_err(&self.path, "a parquet file needs at least one row group"));
        };
        writer.into_inner().map_err(|e| parquet_err(&self.path, e))
    }
}

/// The image of a parquet file of one row group of `columns`, compressed with `codec`.
pub fn encode(path: &Path, columns: &[(&str, Data)], codec: Codec) -> Result<Vec<u8>> {
    let mut writer = Writer::new(path, codec);
    writer.write_group(columns)?;
    writer.finish()
}

/// The compression codec of every column chunk of a parquet file, as parquet names them
/// (`SNAPPY`, `ZSTD(ZstdLevel(1))`, …), deduplicated.
pub fn codecs(path: &Path) -> Result<Vec<String>> {
    let table = Table::open(path)?;
    let mut out: Vec<String> = table
        .reader
        .metadata()
        .row_groups()
        .iter()
        .flat_map(|g| g.columns().iter().map(|c| format!("{:?}", c.compression())))
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}
