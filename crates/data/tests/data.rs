//! Cross-module tests on real files: generator -> parquet -> reader -> preprocessing -> batches.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use data::dataset::{LoadOptions, OnError, SignDataset};
use data::index;
use data::islr::{read_parquet, write_parquet};
use data::layout::{LandmarkType, NUM_LANDMARKS};
use data::loader::{epoch_batches, EpochLoader, ItemBatcher, LoaderConfig};
use data::preprocess::{PreprocessConfig, Preprocessor};
use data::synth::{generate, generate_sequence, SynthConfig};
use data::table::Data;
use data::{LandmarkSequence, Sample};

fn tiny() -> SynthConfig {
    SynthConfig { classes: 4, signers: 3, repetitions: 2, min_frames: 10, max_frames: 30, ..Default::default() }
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/tests/fixtures").join(name)
}

#[test]
fn round_trip_generator_parquet_reader_preprocess_batch() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny();
    let ds = generate(dir.path(), &cfg, false).unwrap();
    assert_eq!(ds.sequences, 24);

    let idx = index::open(dir.path()).unwrap();
    assert_eq!(idx.format, index::Format::Islr);
    assert_eq!(idx.labels, vec!["sign_00", "sign_01", "sign_02", "sign_03"]);
    assert_eq!(idx.entries.len(), 24);

    // The file on disk holds exactly what the generator produced (f32 -> f64 -> f32 is exact).
    let e = &idx.entries[5];
    let signer: usize = e.group.parse::<usize>().unwrap() - 1000;
    let reps = cfg.repetitions;
    let pos = 5 - signer * cfg.classes * reps;
    let expected = generate_sequence(&cfg, pos / reps, signer, pos % reps);
    assert_eq!(e.label, pos / reps);
    let read = read_parquet(&e.path).unwrap();
    assert_eq!(read.frame_ids, expected.frame_ids);
    assert_eq!(read.points, NUM_LANDMARKS);
    assert!(read.xyz.iter().zip(&expected.xyz).all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())));

    // Preprocess and batch: 118 points x 2 coords x 3 (position, d1, d2).
    let pre = Preprocessor::new(PreprocessConfig { window: 32, ..Default::default() }).unwrap();
    let loaded = SignDataset::load(&idx, &pre, &LoadOptions::default()).unwrap();
    assert_eq!(loaded.features, 708);
    assert_eq!(loaded.items.len(), 24);
    assert!(loaded.skipped.is_empty());
    let prepared = pre.prepare(&Sample::Landmarks(read.clone()), &e.path).unwrap();
    let batcher = ItemBatcher { preprocessor: Arc::new(pre.clone()), augmenter: None, seed: 0 };
    let hb = batcher.host_batch(&loaded, &[5, 6], 0);
    assert_eq!((hb.batch, hb.window, hb.features), (2, 32, 708));
    assert_eq!(&hb.inputs[..32 * 708], prepared.data.as_slice());
    assert_eq!(hb.labels, vec![loaded.items[5].label as i64, loaded.items[6].label as i64]);
    let valid = prepared.valid;
    assert_eq!(valid, read.frames().min(32));
    assert_eq!(&hb.pad_mask[..32], prepared.pad_mask().as_slice());

    // Upload to a real Burn device and read back.
    let dev = device::resolve(&device::DeviceSpec::Cpu, &Default::default()).unwrap().device;
    let b = hb.to_device::<device::Backend>(&dev);
    assert_eq!(b.inputs.dims(), [2, 32, 708]);
    let back = b.inputs.into_data().to_vec::<f32>().unwrap();
    assert_eq!(back, hb.inputs);
    // Bool storage differs between backends: read the mask back as float.
    let mask = b.pad_mask.float().into_data().to_vec::<f32>().unwrap();
    assert_eq!(mask, hb.pad_mask.iter().map(|&m| m as u8 as f32).collect::<Vec<_>>());
    assert!(mask.contains(&1.0), "a 30-frame-max sequence in a 32 window has padding");
}

#[test]
fn parquet_written_by_pyarrow_reads_with_gaps_and_nans() {
    let s = read_parquet(&fixture("pyarrow_islr.parquet")).unwrap();
    assert_eq!(s.frame_ids, vec![3, 4, 7]);
    assert_eq!(s.points, 543);
    let face10 = s.at(2, 10);
    assert!((face10[0] - 0.08).abs() < 1e-6 && (face10[1] - 0.5).abs() < 1e-6 && face10[2] == -0.25, "{face10:?}");
    assert!((s.at(0, LandmarkType::Pose.offset())[1] - 0.6).abs() < 1e-6);
    let lh = LandmarkType::LeftHand.offset();
    let rh = LandmarkType::RightHand.offset();
    assert!((0..3).all(|f| (0..21).all(|i| s.at(f, lh + i)[0].is_nan())));
    assert!(s.at(1, rh)[0].is_nan());
    assert!(!s.at(0, rh)[0].is_nan() && !s.at(2, rh + 20)[0].is_nan());
    assert!((s.at(2, rh + 20)[0] - (0.07 + 0.020)).abs() < 1e-6);
}

fn write_table(path: &Path, fields: Vec<(&str, Data)>) {
    std::fs::write(path, data::table::encode(path, &fields, data::table::Codec::Snappy).unwrap()).unwrap();
}

fn text(v: &str, n: usize) -> Data {
    Data::Text(vec![v.to_string(); n])
}

fn cols(n: usize) -> Vec<(&'static str, Data)> {
    vec![
        ("frame", Data::Int16(vec![0i16; n])),
        ("row_id", text("0-face-0", n)),
        ("type", text("face", n)),
        ("landmark_index", Data::Int16((0..n as i16).collect())),
        ("x", Data::Double(vec![Some(0.5); n])),
        ("y", Data::Double(vec![Some(0.5); n])),
        ("z", Data::Double(vec![Some(0.0); n])),
    ]
}

/// A few MB of parquet can declare millions of frames (each frame takes 6.5 KB once read): refused
/// from the footer's row count, or at the first frame past the limit, before the sequence is
/// allocated.
#[test]
fn parquet_with_more_frames_than_a_recording_has_is_refused_before_allocating() {
    let dir = tempfile::tempdir().unwrap();
    let frames_cols = |n: usize, frame: Vec<i32>| -> Vec<(&'static str, Data)> {
        vec![
            ("frame", Data::Int32(frame)),
            ("type", text("face", n)),
            ("landmark_index", Data::Int16(vec![0i16; n])),
            ("x", Data::Double(vec![Some(0.5); n])),
            ("y", Data::Double(vec![Some(0.5); n])),
            ("z", Data::Double(vec![Some(0.0); n])),
        ]
    };
    // 1,000,000 rows, each its own frame: 6.5 GB as a sequence.
    let n = 1_000_000;
    let p = dir.path().join("frames.parquet");
    write_table(&p, frames_cols(n, (0..n as i32).collect()));
    let err = read_parquet(&p).unwrap_err().to_string();
    let most = data::sequence::MAX_FRAMES;
    assert!(err.contains(&format!("row {}: more than {most} distinct frames", most + 1)), "{err}");
    // 11,000,000 rows of one frame: over the rows any recording can have, refused from the footer.
    let p = dir.path().join("rows.parquet");
    let one = frames_cols(1_000_000, vec![0; 1_000_000]);
    let mut w = data::table::Writer::new(&p, data::table::Codec::Snappy);
    for _ in 0..11 {
        w.write_group(&one).unwrap();
    }
    std::fs::write(&p, w.finish().unwrap()).unwrap();
    let size = std::fs::metadata(&p).unwrap().len();
    let err = read_parquet(&p).unwrap_err().to_string();
    assert!(err.contains("declares 11000000 rows; a recording has at most 20000 frames"), "{err} ({size} bytes)");
}

/// A footer that puts a column chunk outside the file (or at a negative offset) is an error naming
/// the file, the row group and the column; the parquet crate asserts on it while reading.
#[test]
fn parquet_footer_placing_a_column_outside_the_file_is_refused() {
    use parquet::file::metadata::{ParquetMetaDataReader, ParquetMetaDataWriter};
    let dir = tempfile::tempdir().unwrap();
    let valid = dir.path().join("valid.parquet");
    write_parquet(&valid, &generate_sequence(&tiny(), 0, 0, 0)).unwrap();
    let bytes = std::fs::read(&valid).unwrap();
    let footer_len = u32::from_le_bytes(bytes[bytes.len() - 8..bytes.len() - 4].try_into().unwrap()) as usize;
    let body = &bytes[..bytes.len() - 8 - footer_len];
    let with_column = |start: i64, column: usize| {
        let meta = ParquetMetaDataReader::new().parse_and_finish(&std::fs::File::open(&valid).unwrap()).unwrap();
        let mut group = meta.row_group(0).clone();
        let mut columns = group.columns().to_vec();
        columns[column] = columns[column]
            .clone()
            .into_builder()
            .set_dictionary_page_offset(None)
            .set_data_page_offset(start)
            .build()
            .unwrap();
        group = group.into_builder().set_column_metadata(columns).build().unwrap();
        let meta = meta.into_builder().set_row_groups(vec![group]).build();
        let mut out = body.to_vec();
        ParquetMetaDataWriter::new(&mut out, &meta).finish().unwrap();
        let p = dir.path().join(format!("at-{start}.parquet"));
        std::fs::write(&p, out).unwrap();
        p
    };
    for (start, column) in [(-1, 0), (1 << 40, 3)] {
        let p = with_column(start, column);
        let err = read_parquet(&p).unwrap_err().to_string();
        assert!(err.contains(&p.display().to_string()) && err.contains("row group 0, column "), "{err}");
        assert!(err.contains(&format!("at offset {start}, outside the file")), "{err}");
        let err = data::fingerspell::read_file(&p).unwrap_err().to_string();
        assert!(err.contains("outside the file"), "{err}");
    }
    // Rewritten with the offsets it had, the file reads.
    assert!(read_parquet(&valid).is_ok());
}

/// `.npy` shapes with a zero-width dimension hold no data whatever the frame count: refused
/// (a 129-byte file declaring 2147483647 frames of 0 x 3 values once allocated 8 GB).
#[test]
fn npy_with_a_zero_width_dimension_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (shape, name) in [("(2147483647, 0, 3)", "zero_points.npy"), ("(2147483647, 0)", "zero_features.npy")] {
        let header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&((header.len() + 1) as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        bytes.push(b'\n');
        let p = dir.path().join(name);
        std::fs::write(&p, &bytes).unwrap();
        let err = data::npy::read_npy(&p).unwrap_err().to_string();
        assert!(err.contains(name) && err.contains("has a dimension of 0"), "{err}");
    }
}

#[test]
fn parquet_validation_errors_name_file_and_problem() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("no_z.parquet");
    write_table(&p, cols(3).into_iter().filter(|(n, _)| *n != "z").collect());
    let err = read_parquet(&p).unwrap_err().to_string();
    assert_eq!(err, format!("{}: missing column `z` (found: frame, row_id, type, landmark_index, x, y)", p.display()));

    let p = dir.path().join("x_text.parquet");
    let mut c = cols(2);
    c[4] = ("x", Data::Text(vec!["a".into(), "b".into()]));
    write_table(&p, c);
    let err = read_parquet(&p).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "{}: column `x` has type string, expected a floating-point type (double in the ISLR data)",
            p.display()
        )
    );

    let p = dir.path().join("empty.parquet");
    write_table(&p, cols(0));
    let err = read_parquet(&p).unwrap_err().to_string();
    assert_eq!(err, format!("{}: empty sequence (no frames: the file has no rows)", p.display()));

    let p = dir.path().join("bad_type.parquet");
    let mut c = cols(2);
    c[2] = ("type", Data::Text(vec!["face".into(), "tail".into()]));
    write_table(&p, c);
    let err = read_parquet(&p).unwrap_err().to_string();
    assert!(
        err.ends_with("row 2: unknown landmark type `tail`; expected face, left_hand, pose or right_hand"),
        "{err}"
    );

    let p = dir.path().join("bad_index.parquet");
    let mut c = cols(2);
    c[3] = ("landmark_index", Data::Int16(vec![0i16, 468]));
    write_table(&p, c);
    let err = read_parquet(&p).unwrap_err().to_string();
    assert!(err.ends_with("row 2: landmark_index 468 out of range for face (0..468)"), "{err}");

    let p = dir.path().join("garbage.parquet");
    std::fs::write(&p, b"definitely not parquet").unwrap();
    let err = read_parquet(&p).unwrap_err().to_string();
    assert!(err.starts_with(&format!("{}: not a readable parquet file", p.display())), "{err}");

    let err = read_parquet(&dir.path().join("missing.parquet")).unwrap_err().to_string();
    assert!(err.contains("missing.parquet") && err.contains("No such file"), "{err}");

    let bad = LandmarkSequence::empty(2, 10);
    let err = write_parquet(&dir.path().join("w.parquet"), &bad).unwrap_err().to_string();
    assert!(err.ends_with("landmarks per frame expected 543, found 10"), "{err}");
}

#[test]
fn index_errors_name_file_line_and_label() {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), &tiny(), false).unwrap();
    let csv = dir.path().join("train.csv");
    let mut text = std::fs::read_to_string(&csv).unwrap();
    text.push_str("landmarks/1000/x.parquet,1000,1,sign_99\n");
    std::fs::write(&csv, text).unwrap();
    let err = index::open(dir.path()).unwrap_err().to_string();
    assert_eq!(err, format!("{}:26: unknown label `sign_99` (not in the label map)", csv.display()));

    std::fs::write(&csv, "file,participant_id,sequence_id,sign\n").unwrap();
    let err = index::open(dir.path()).unwrap_err().to_string();
    assert_eq!(
        err,
        format!("{}: missing column `path` (found: file, participant_id, sequence_id, sign)", csv.display())
    );

    let map = dir.path().join("sign_to_prediction_index_map.json");
    std::fs::write(&map, r#"{"a": 0, "b": 5}"#).unwrap();
    let err = index::open(dir.path()).unwrap_err().to_string();
    assert!(err.contains("index 5 of `b` is outside 0..2"), "{err}");

    let err = index::open(&dir.path().join("landmarks")).unwrap_err().to_string();
    assert!(err.contains("not a dataset: expected `train.csv`"), "{err}");
}

#[test]
fn npy_layout_reads_features_and_landmarks_and_rejects_bad_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Three feature sequences [frames, 5] by two signers, one of them with a NaN frame.
    let mut csv = String::from("file,label,group\n");
    for (i, (label, group, frames)) in [("wave", "s1", 4), ("nod", "s1", 6), ("wave", "s2", 3)].iter().enumerate() {
        let mut v: Vec<f32> = (0..frames * 5).map(|x| x as f32 * 0.1 + i as f32).collect();
        if i == 1 {
            v[5..10].iter_mut().for_each(|x| *x = f32::NAN);
        }
        data::npy::write_npy(&d.join(format!("{i}.npy")), &[*frames, 5], &v).unwrap();
        csv.push_str(&format!("{i}.npy,{label},{group}\n"));
    }
    std::fs::write(d.join("labels.csv"), &csv).unwrap();
    let idx = index::open(d).unwrap();
    assert_eq!(idx.labels, vec!["nod", "wave"]);
    let pre = Preprocessor::new(PreprocessConfig { window: 8, ..Default::default() }).unwrap();
    let ds = SignDataset::load(&idx, &pre, &LoadOptions::default()).unwrap();
    assert_eq!(ds.features, 15);
    assert_eq!(ds.items[1].sample.frames(), 5, "the all-NaN frame is dropped");
    let p = pre.finish::<rand_chacha::ChaCha8Rng>(&ds.items[0].sample, None);
    assert_eq!(&p.data[..5], &[0.0, 0.1, 0.2, 0.3, 0.4]);
    assert!((p.data[5] - 0.5).abs() < 1e-6 && (p.data[10] - 1.0).abs() < 1e-6);

    // A landmark array [frames, 75, 3] and a wrong-width sequence in one dataset: with Fail the
    // mismatch is an error that names both files; with Skip the file is reported and left out.
    data::npy::write_npy(&d.join("3.npy"), &[4, 7], &[0.5; 28]).unwrap();
    std::fs::write(d.join("labels.csv"), format!("{csv}3.npy,nod,s3\n")).unwrap();
    let idx = index::open(d).unwrap();
    let fail = LoadOptions { on_error: OnError::Fail, ..Default::default() };
    let err = SignDataset::load(&idx, &pre, &fail).unwrap_err().to_string();
    assert!(err.contains("3.npy: features per frame (as in") && err.ends_with("expected 5, found 7"), "{err}");
    let skip = LoadOptions { on_error: OnError::Skip, max_bad_fraction: 0.5, ..Default::default() };
    let ds = SignDataset::load(&idx, &pre, &skip).unwrap();
    assert_eq!(ds.items.len(), 3);
    assert_eq!(ds.skipped.len(), 1);
    assert!(ds.skipped[0].0.ends_with("3.npy"));
    // Too many bad files is an error even when skipping.
    let strict = LoadOptions { max_bad_fraction: 0.1, ..skip };
    let err = SignDataset::load(&idx, &pre, &strict).unwrap_err().to_string();
    assert!(err.starts_with("1 of 4 sequences failed to load; first:"), "{err}");

    // Truncated data, wrong dtype, not npy at all.
    let f = d.join("trunc.npy");
    data::npy::write_npy(&f, &[4, 5], &[1.0; 20]).unwrap();
    let bytes = std::fs::read(&f).unwrap();
    std::fs::write(&f, &bytes[..bytes.len() - 8]).unwrap();
    let err = data::npy::read_npy(&f).unwrap_err().to_string();
    assert!(err.contains("data truncated: shape [4, 5] of <f4 needs 80 bytes, file has 72"), "{err}");
    let mut bytes = std::fs::read(d.join("0.npy")).unwrap();
    let pos = bytes.windows(3).position(|w| w == b"<f4").unwrap();
    bytes[pos..pos + 3].copy_from_slice(b"<i4");
    std::fs::write(&f, &bytes).unwrap();
    let err = data::npy::read_npy(&f).unwrap_err().to_string();
    assert!(err.contains("dtype <i4 not supported"), "{err}");
    std::fs::write(&f, b"hello").unwrap();
    assert!(data::npy::read_npy(&f).unwrap_err().to_string().contains("not a .npy file"));
    data::npy::write_npy(&f, &[3, 75, 3], &vec![0.25; 675]).unwrap();
    match data::npy::read_npy(&f).unwrap() {
        Sample::Landmarks(l) => assert_eq!((l.frames(), l.points, l.at(2, 74)), (3, 75, [0.25; 3])),
        other => panic!("expected landmarks, got {other:?}"),
    }
}

#[test]
fn bad_files_in_a_dataset_are_reported_or_fatal_by_policy() {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), &tiny(), false).unwrap();
    let idx = index::open(dir.path()).unwrap();
    std::fs::write(&idx.entries[3].path, b"corrupt").unwrap();
    let pre = Preprocessor::new(PreprocessConfig::default()).unwrap();
    let ds = SignDataset::load(&idx, &pre, &LoadOptions { max_bad_fraction: 0.1, ..Default::default() }).unwrap();
    assert_eq!(ds.items.len(), 23);
    assert_eq!(ds.skipped[0].0, idx.entries[3].path);
    assert!(ds.skipped[0].1.contains("not a readable parquet file"));
    let err =
        SignDataset::load(&idx, &pre, &LoadOptions { on_error: OnError::Fail, ..Default::default() }).unwrap_err();
    assert!(err.to_string().starts_with(&idx.entries[3].path.display().to_string()), "{err}");
}

#[test]
fn cache_reproduces_the_dataset_and_is_rebuilt_when_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    generate(&dir.path().join("ds"), &tiny(), false).unwrap();
    let idx = index::open(&dir.path().join("ds")).unwrap();
    let pre = Preprocessor::new(PreprocessConfig::default()).unwrap();
    let opts = LoadOptions { cache_dir: Some(dir.path().join("cache")), ..Default::default() };
    let first = SignDataset::load(&idx, &pre, &opts).unwrap();
    assert!(!first.from_cache);
    let second = SignDataset::load(&idx, &pre, &opts).unwrap();
    assert!(second.from_cache);
    assert_eq!(first.items.len(), second.items.len());
    for (a, b) in first.items.iter().zip(&second.items) {
        assert_eq!((a.label, &a.group, &a.path), (b.label, &b.group, &b.path));
        match (&a.sample, &b.sample) {
            (Sample::Landmarks(x), Sample::Landmarks(y)) => {
                assert_eq!(x.frame_ids, y.frame_ids);
                assert!(x.xyz.iter().zip(&y.xyz).all(|(p, q)| p.to_bits() == q.to_bits()));
            }
            _ => panic!("landmarks expected"),
        }
    }
    assert_eq!(second.labels, first.labels);
    // Another preprocessing config gets another cache file.
    let pre2 = Preprocessor::new(PreprocessConfig { landmarks: vec!["hands".into()], ..Default::default() }).unwrap();
    assert!(!SignDataset::load(&idx, &pre2, &opts).unwrap().from_cache);
    // A cache with one value changed (its sizes all intact) fails its CRC-32 and is rebuilt.
    let third = SignDataset::load(&idx, &pre, &opts).unwrap();
    assert!(third.from_cache);
    let caches: Vec<_> = std::fs::read_dir(dir.path().join("cache")).unwrap().map(|f| f.unwrap().path()).collect();
    for f in &caches {
        let mut bytes = std::fs::read(f).unwrap();
        let last = bytes.len() - 2;
        bytes[last] ^= 0x40;
        std::fs::write(f, &bytes).unwrap();
    }
    let rebuilt = SignDataset::load(&idx, &pre, &opts).unwrap();
    assert!(!rebuilt.from_cache, "a flipped bit in the values must not be loaded");
    assert_eq!(rebuilt.items.len(), 24);
    // A corrupt cache is ignored and rebuilt.
    for f in &caches {
        std::fs::write(f, b"SFCACHE2garbage").unwrap();
    }
    let fourth = SignDataset::load(&idx, &pre, &opts).unwrap();
    assert!(!fourth.from_cache);
    assert_eq!(fourth.items.len(), 24);
}

#[test]
fn group_split_keeps_signers_apart() {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), &SynthConfig { signers: 5, ..tiny() }, false).unwrap();
    let idx = index::open(dir.path()).unwrap();
    let (train, valid) = idx.split_by_group(0.2, 1);
    assert_eq!(train.len() + valid.len(), idx.entries.len());
    assert!(!valid.is_empty() && !train.is_empty());
    let groups =
        |v: &[usize]| v.iter().map(|&i| idx.entries[i].group.clone()).collect::<std::collections::HashSet<_>>();
    assert!(groups(&train).is_disjoint(&groups(&valid)));
    assert_eq!(groups(&valid).len(), 1);
    assert_eq!(idx.split_by_group(0.2, 1), (train, valid), "deterministic");

    // K-fold by signer: every signer held out exactly once over the folds, never on both sides.
    let mut held_out = Vec::new();
    for fold in 0..3 {
        let (train, valid) = idx.fold_by_group(3, fold, 1);
        assert_eq!(train.len() + valid.len(), idx.entries.len());
        assert!(!valid.is_empty(), "fold {fold}");
        assert!(groups(&train).is_disjoint(&groups(&valid)));
        held_out.extend(groups(&valid));
        assert_eq!(idx.fold_by_group(3, fold, 1), (train, valid), "deterministic");
    }
    held_out.sort();
    let mut all: Vec<String> = groups(&(0..idx.entries.len()).collect::<Vec<_>>()).into_iter().collect();
    all.sort();
    assert_eq!(held_out, all, "5 signers in 3 folds: each held out once");
    assert_eq!(data::index::count_groups(&idx.groups()), 5);
    let dealt: std::collections::HashSet<_> = (0..10).map(|seed| idx.fold_by_group(3, 0, seed).1).collect();
    assert!(dealt.len() > 1, "the seed deals the signers");
}

#[test]
fn loader_is_deterministic_across_worker_counts_and_resumable() {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), &tiny(), false).unwrap();
    let idx = index::open(dir.path()).unwrap();
    let pre = Preprocessor::new(PreprocessConfig { window: 16, ..Default::default() }).unwrap();
    let ds = Arc::new(SignDataset::load(&idx, &pre, &LoadOptions::default()).unwrap());
    let aug = data::augment::Augmenter::new(Default::default(), pre.mirror_of_kept(543));
    let batcher = ItemBatcher { preprocessor: Arc::new(pre), augmenter: Some(Arc::new(aug)), seed: 11 };
    let all: Vec<usize> = (0..ds.items.len()).collect();
    let cfg = |workers| LoaderConfig { batch_size: 5, shuffle: true, drop_last: false, seed: 3, workers, prefetch: 2 };
    let run = |workers, start| {
        EpochLoader::start(ds.clone(), batcher.clone(), &all, &cfg(workers), 2, start).collect::<Vec<_>>()
    };
    let one = run(1, 0);
    let three = run(3, 0);
    assert_eq!(one.len(), 5);
    assert_eq!(one, three);
    let resumed = run(2, 3);
    assert_eq!(resumed.as_slice(), &one[3..]);
    // Every item appears once per epoch; another epoch has another order and other augmentation.
    let mut seen: Vec<usize> = one.iter().flat_map(|b| b.indices.clone()).collect();
    seen.sort();
    assert_eq!(seen, all);
    let other = EpochLoader::start(ds.clone(), batcher.clone(), &all, &cfg(2), 3, 0).collect::<Vec<_>>();
    assert_ne!(other[0].indices, one[0].indices);
    assert_eq!(epoch_batches(&all, &LoaderConfig { drop_last: true, ..cfg(1) }, 0).len(), 4);
    // Augmentation changes the inputs compared with no augmentation.
    let plain = ItemBatcher { augmenter: None, ..batcher.clone() };
    assert_ne!(plain.host_batch(&ds, &one[0].indices, 2).inputs, one[0].inputs);
}

/// The synthetic signs are learnable from motion (a nearest-centroid classifier over whole
/// windows is far above chance on unseen signers) but not from one frame (the same classifier on
/// the middle frame alone is much worse, since paired classes are time reverses).
#[test]
fn synthetic_signs_need_motion_to_be_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = SynthConfig { classes: 10, signers: 6, repetitions: 4, ..Default::default() };
    generate(dir.path(), &cfg, false).unwrap();
    let idx = index::open(dir.path()).unwrap();
    let pre = Preprocessor::new(PreprocessConfig {
        landmarks: vec!["hands".into(), "lips".into()],
        window: 16,
        time_differences: false,
        ..Default::default()
    })
    .unwrap();
    let ds = SignDataset::load(&idx, &pre, &LoadOptions::default()).unwrap();
    let (train, valid) = ds.split_by_group(0.34, 0);
    let windows: Vec<Vec<f32>> =
        ds.items.iter().map(|it| pre.finish::<rand_chacha::ChaCha8Rng>(&it.sample, None).data).collect();
    let accuracy = |features: &dyn Fn(&[f32]) -> Vec<f32>| {
        let dim = features(&windows[0]).len();
        let mut sums = vec![vec![0f64; dim]; cfg.classes];
        let mut counts = vec![0usize; cfg.classes];
        for &i in &train {
            for (s, v) in sums[ds.items[i].label].iter_mut().zip(features(&windows[i])) {
                *s += v as f64;
            }
            counts[ds.items[i].label] += 1;
        }
        let correct = valid
            .iter()
            .filter(|&&i| {
                let f = features(&windows[i]);
                let best = (0..cfg.classes)
                    .min_by(|&a, &b| {
                        let d = |c: usize| {
                            sums[c].iter().zip(&f).map(|(s, v)| (s / counts[c] as f64 - *v as f64).powi(2)).sum::<f64>()
                        };
                        d(a).total_cmp(&d(b))
                    })
                    .unwrap();
                best == ds.items[i].label
            })
            .count();
        correct as f64 / valid.len() as f64
    };
    let width = ds.features;
    let whole = accuracy(&|w: &[f32]| w.to_vec());
    let one_frame = accuracy(&|w: &[f32]| w[8 * width..9 * width].to_vec());
    eprintln!("nearest centroid on unseen signers: whole window {whole:.2}, middle frame {one_frame:.2}, chance 0.10");
    assert!(whole >= 0.4, "whole-window accuracy {whole}");
    assert!(one_frame + 0.15 <= whole, "one frame {one_frame} vs whole {whole}");
}

/// The tiny synthetic set on disk, loaded with a `window`-frame preprocessor, and its group split
/// (training positions). Keep the directory alive while the dataset is used.
fn tiny_train_split(window: usize) -> (tempfile::TempDir, Preprocessor, Arc<SignDataset>, Vec<usize>) {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), &tiny(), false).unwrap();
    let idx = index::open(dir.path()).unwrap();
    let pre = Preprocessor::new(PreprocessConfig { window, ..Default::default() }).unwrap();
    let ds = Arc::new(SignDataset::load(&idx, &pre, &LoadOptions::default()).unwrap());
    let (train, _) = ds.split_by_group(0.34, 0);
    (dir, pre, ds, train)
}

#[test]
fn splits_are_burn_datasets_and_batch_like_the_loader() {
    use burn_dataset::Dataset;
    let (_dir, pre, ds, train) = tiny_train_split(16);
    let split = data::dataset::DatasetSplit { data: ds.clone(), indices: train.clone() };
    assert_eq!(split.len(), train.len());
    assert!(split.get(train.len()).is_none());
    let first = split.get(0).unwrap();
    assert_eq!(first.path, ds.items[train[0]].path);
    // Burn's combinators work on it.
    let shuffled = burn_dataset::transform::ShuffledDataset::new(split.clone(), 1);
    assert_eq!(shuffled.len(), train.len());
    let items: Vec<_> = split.iter().take(3).collect();
    let batcher = ItemBatcher { preprocessor: Arc::new(pre), augmenter: None, seed: 0 };
    assert_eq!(batcher.batch_items(&items, 0).inputs, batcher.host_batch(&ds, &train[..3], 0).inputs);
}

/// Burn's own `DataLoaderBuilder` drives `ItemBatcher` (Burn's `Batcher`) over a `DatasetSplit`
/// (Burn's `Dataset`): real tensors on the Flex CPU backend, every item once per epoch with its
/// label, values equal to the trainer's loader, augmentation deterministic for a seed in whatever
/// order the workers deliver batches.
#[test]
fn burn_dataloader_batches_a_split_with_item_batcher() {
    use burn::backend::Flex;
    use burn::data::dataloader::DataLoaderBuilder;
    use data::dataset::{DatasetSplit, Item};
    use data::loader::SignBatch;
    type B = Flex;

    let (_dir, pre, ds, train) = tiny_train_split(32);
    let split = DatasetSplit { data: ds.clone(), indices: train.clone() };
    let features = ds.features;
    let plain = ItemBatcher { preprocessor: Arc::new(pre.clone()), augmenter: None, seed: 0 };

    // Unshuffled, one worker: batches in split order, equal to the trainer's host batches.
    let loader = DataLoaderBuilder::<B, Item, SignBatch<B>>::new(plain.clone()).batch_size(5).build(split.clone());
    assert_eq!(loader.num_items(), train.len());
    let batches: Vec<SignBatch<B>> = loader.iter().collect();
    assert_eq!(batches.len(), train.len().div_ceil(5));
    for (k, b) in batches.iter().enumerate() {
        let ids = &train[k * 5..((k + 1) * 5).min(train.len())];
        let want = plain.host_batch(&ds, ids, 0);
        assert_eq!(b.inputs.dims(), [ids.len(), 32, features]);
        assert_eq!(b.pad_mask.dims(), [ids.len(), 32]);
        assert_eq!(b.inputs.clone().into_data().to_vec::<f32>().unwrap(), want.inputs);
        assert_eq!(b.pad_mask.clone().into_data().to_vec::<bool>().unwrap(), want.pad_mask);
        let labels = b.labels.clone().into_data().convert::<i64>().to_vec::<i64>().unwrap();
        assert_eq!(labels, ids.iter().map(|&i| ds.items[i].label as i64).collect::<Vec<_>>());
    }
    // Short sequences are padded at the end of the window and the mask says so.
    let any_pad = batches.iter().any(|b| b.pad_mask.clone().into_data().to_vec::<bool>().unwrap().contains(&true));
    assert!(any_pad, "the tiny set has sequences shorter than 32 frames");

    // Shuffled, augmented, three workers: each item once; two loaders with the same seeds give the
    // same rows (batches arrive in any order), and other rows than no augmentation.
    let aug = data::augment::Augmenter::new(Default::default(), pre.mirror_of_kept(543));
    let augmented = ItemBatcher { augmenter: Some(Arc::new(aug)), seed: 11, ..plain.clone() };
    let rows = |batcher: &ItemBatcher, workers: usize, shuffle: u64| {
        let loader = DataLoaderBuilder::<B, Item, SignBatch<B>>::new(batcher.clone())
            .batch_size(4)
            .shuffle(shuffle)
            .num_workers(workers)
            .build(split.clone());
        let mut rows: Vec<(i64, Vec<u32>)> = Vec::new();
        for b in loader.iter() {
            let [n, t, f] = b.inputs.dims();
            let x = b.inputs.into_data().to_vec::<f32>().unwrap();
            let y = b.labels.into_data().convert::<i64>().to_vec::<i64>().unwrap();
            for i in 0..n {
                rows.push((y[i], x[i * t * f..(i + 1) * t * f].iter().map(|v| v.to_bits()).collect()));
            }
        }
        rows.sort();
        rows
    };
    let a = rows(&augmented, 3, 3);
    assert_eq!(a.len(), train.len());
    let mut labels: Vec<i64> = a.iter().map(|r| r.0).collect();
    let mut want: Vec<i64> = train.iter().map(|&i| ds.items[i].label as i64).collect();
    labels.sort();
    want.sort();
    assert_eq!(labels, want);
    assert_eq!(a, rows(&augmented, 3, 3), "same seeds, same rows");
    assert_ne!(a, rows(&plain, 3, 3), "augmentation changes the inputs");
    assert_ne!(a, rows(&augmented, 3, 4), "another shuffle gives other batches and other draws");
}

// ---- interop: the formats other tools write ----

/// The fixture value of flat point `p` in frame `f` (see make_interop_fixtures.py).
fn fixture_value(f: usize, p: usize) -> [f32; 3] {
    if (468..489).contains(&p) && f == 1 {
        return [f32::NAN; 3];
    }
    [(0.1 + 0.01 * f as f64 + 0.0001 * p as f64) as f32, (0.5 - 0.0002 * p as f64) as f32, (-0.01 * f as f64) as f32]
}

/// Max |difference| between `seq` and the fixture values (NaN must match NaN).
fn fixture_error(seq: &LandmarkSequence) -> f32 {
    assert_eq!((seq.frames(), seq.points), (3, NUM_LANDMARKS));
    let mut worst = 0f32;
    for f in 0..3 {
        for p in 0..NUM_LANDMARKS {
            let (a, b) = (seq.at(f, p), fixture_value(f, p));
            for k in 0..3 {
                assert_eq!(a[k].is_nan(), b[k].is_nan(), "frame {f} point {p} axis {k}: {a:?} vs {b:?}");
                if !a[k].is_nan() {
                    worst = worst.max((a[k] - b[k]).abs());
                }
            }
        }
    }
    worst
}

#[test]
fn parquet_of_every_codec_from_pyarrow_and_polars_reads_the_same_values() {
    for name in ["zstd", "gzip", "lz4", "brotli", "polars"] {
        let seq = read_parquet(&fixture(&format!("islr_{name}.parquet"))).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(seq.frame_ids, vec![20, 21, 22], "{name}");
        assert!(fixture_error(&seq) < 1e-6, "{name}");
    }
    // And our writer produces each codec, read back bit for bit.
    let dir = tempfile::tempdir().unwrap();
    let seq = read_parquet(&fixture("islr_zstd.parquet")).unwrap();
    for codec in data::islr::Codec::ALL {
        let p = dir.path().join(format!("{codec:?}.parquet"));
        data::islr::write_parquet_with(&p, &seq, codec).unwrap();
        let back = read_parquet(&p).unwrap();
        assert_eq!(back.frame_ids, seq.frame_ids);
        assert!(back.xyz.iter().zip(&seq.xyz).all(|(a, b)| a.to_bits() == b.to_bits()), "{codec:?}");
    }
}

#[test]
fn npy_of_every_dtype_and_order_and_npz_archives_read_the_same_values() {
    let landmarks = |s: Sample| match s {
        Sample::Landmarks(l) => l,
        other => panic!("expected landmarks, got {} wide", other.width()),
    };
    // float16 keeps ~3 significant digits.
    assert!(fixture_error(&landmarks(data::npy::read_npy(&fixture("f16.npy")).unwrap())) < 5e-4);
    assert!(fixture_error(&landmarks(data::npy::read_npy(&fixture("f64_big_endian.npy")).unwrap())) < 1e-7);
    assert!(fixture_error(&landmarks(data::npy::read_npy(&fixture("fortran.npy")).unwrap())) < 1e-7);
    assert!(fixture_error(&landmarks(data::npy::read_npz(&fixture("archive.npz")).unwrap())) < 1e-7);
    let arrays = data::npy::read_npz_arrays(&fixture("archive.npz")).unwrap();
    let names: Vec<&str> = arrays.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["landmarks", "fps"]);
    assert_eq!(arrays[1].1.data, vec![30.0]);

    // An archive with several arrays and none named `landmarks` names what it holds.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("two.npz");
    {
        let mut z = zip::ZipWriter::new(std::fs::File::create(&p).unwrap());
        for name in ["a.npy", "b.npy"] {
            z.start_file(name, zip::write::SimpleFileOptions::default()).unwrap();
            std::io::Write::write_all(&mut z, &data::npy::encode(&[2, 3], &[0.0; 6]).unwrap()).unwrap();
        }
        z.finish().unwrap();
    }
    let err = data::npy::read_npz(&p).unwrap_err().to_string();
    assert!(err.contains("two.npz") && err.contains("a, b") && err.contains("landmarks"), "{err}");
    // A labels.csv dataset of .npz files is read as such.
    std::fs::copy(fixture("archive.npz"), dir.path().join("x.npz")).unwrap();
    std::fs::copy(fixture("archive.npz"), dir.path().join("y.npz")).unwrap();
    std::fs::write(dir.path().join("labels.csv"), "file,label\nx.npz,hello\ny.npz,bye\n").unwrap();
    let idx = index::open(dir.path()).unwrap();
    assert_eq!(idx.format, index::Format::Npz);
    std::fs::write(dir.path().join("labels.csv"), "file,label\nx.npz,hello\nf.npy,bye\n").unwrap();
    let err = index::open(dir.path()).unwrap_err().to_string();
    assert!(err.contains("labels.csv:3") && err.contains("one kind"), "{err}");
}

#[test]
fn pose_files_from_pose_format_map_onto_the_holistic_layout() {
    for name in ["holistic_v02.pose", "holistic_v01.pose"] {
        let pose = data::pose::read_pose(&fixture(name)).unwrap();
        assert_eq!((pose.frames, pose.people, pose.dims), (3, 1, 3), "{name}");
        assert_eq!(pose.fps, 25.0);
        assert_eq!(pose.components.len(), 5);
        // x, y in pixels of 640x480 are divided back; POSE_WORLD_LANDMARKS are ignored; the left
        // hand has confidence 0 in frame 1 and reads as missing.
        let seq = data::pose::to_sequence(Path::new(name), &pose, &[]).unwrap();
        assert!(fixture_error(&seq) < 1e-6, "{name}");
    }
    // Another component set, selected by name and concatenated in that order.
    let path = fixture("openpose.pose");
    let err = data::pose::read_pose_sequence(&path, &[]).unwrap_err().to_string();
    assert!(
        err.contains("openpose.pose") && err.contains("pose_keypoints_2d (25), hand_left_keypoints_2d (21)"),
        "{err}"
    );
    let comps = vec!["hand_left_keypoints_2d".to_string(), "pose_keypoints_2d".to_string()];
    let seq = data::pose::read_pose_sequence(&path, &comps).unwrap();
    assert_eq!((seq.frames(), seq.points), (2, 46));
    // Point 0 of the hand is file point 25: x = 25 + f over width 100, y = 50 over height 200; no z.
    let v = seq.at(1, 0);
    assert_eq!((v[0], v[1]), (0.26, 0.25));
    assert!(v[2].is_nan());
    assert!(seq.at(1, 5)[0].is_nan(), "file point 30 has confidence 0 in frame 1");
    let err = data::pose::read_pose_sequence(&path, &["face".to_string()]).unwrap_err().to_string();
    assert!(err.contains("no component `face`"), "{err}");
    // Our writer's files read back to the same landmarks.
    let dir = tempfile::tempdir().unwrap();
    let seq = data::pose::read_pose_sequence(&fixture("holistic_v02.pose"), &[]).unwrap();
    let p = dir.path().join("back.pose");
    testkit::pose::write_pose(&p, &testkit::pose::from_sequence(&seq, 30.0, 640, 480)).unwrap();
    assert!(fixture_error(&data::pose::read_pose_sequence(&p, &[]).unwrap()) < 1e-6);
    // A labels.csv dataset of .pose files, preprocessed through the ordinary path.
    std::fs::copy(fixture("holistic_v02.pose"), dir.path().join("a.pose")).unwrap();
    std::fs::copy(fixture("holistic_v01.pose"), dir.path().join("b.pose")).unwrap();
    std::fs::write(dir.path().join("labels.csv"), "file,label\na.pose,hello\nb.pose,bye\n").unwrap();
    let idx = index::open(dir.path()).unwrap();
    assert_eq!(idx.format, index::Format::Pose);
    let pre = Preprocessor::new(PreprocessConfig { window: 8, ..Default::default() }).unwrap();
    let opts = LoadOptions { on_error: OnError::Fail, ..Default::default() };
    let ds = SignDataset::load(&idx, &pre, &opts).unwrap();
    assert_eq!(ds.items.len(), 2);
}

/// A wide (fingerspelling) file of 30,000 rows with every coordinate missing takes a few hundred
/// KB, and 195 MB once read: refused from its footer, for its size, before any row is read.
#[test]
fn fingerspelling_file_declaring_more_rows_than_its_size_holds_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("wide.parquet");
    let n = 30_000;
    let names: Vec<String> = ['x', 'y', 'z']
        .iter()
        .flat_map(|&a| (0..NUM_LANDMARKS).map(move |i| data::fingerspell::column_name(a, i)))
        .collect();
    let mut fields: Vec<(&str, Data)> =
        vec![("sequence_id", Data::Int64(vec![1i64; n])), ("frame", Data::Int32((0..n as i32).collect()))];
    for name in &names {
        fields.push((name, Data::Float(vec![None; n])));
    }
    write_table(&p, fields);
    let size = std::fs::metadata(&p).unwrap().len();
    assert!(size < 20_000 * data::fingerspell::MIN_BYTES_PER_ROW, "{size} bytes");
    let err = data::fingerspell::read_file(&p).unwrap_err().to_string();
    assert!(err.contains(&p.display().to_string()) && err.contains("declares 30000 rows"), "{err}");
}

#[test]
fn fingerspelling_files_read_as_sequences_by_id() {
    let all = data::fingerspell::read_file(&fixture("fingerspell.parquet")).unwrap();
    let ids: Vec<i64> = all.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, vec![3, 7]);
    assert!(fixture_error(&all[1].1) < 1e-6);
    // Sequence 3 was stored with frames 5, 4: read sorted, values offset by 0.5.
    let s3 = data::fingerspell::read_sequence(&fixture("fingerspell.parquet"), 3).unwrap();
    assert_eq!(s3.frame_ids, vec![4, 5]);
    assert!((s3.at(0, 0)[0] - (fixture_value(1, 0)[0] + 0.5)).abs() < 1e-6);
    let err = data::fingerspell::read_sequence(&fixture("fingerspell.parquet"), 99).unwrap_err().to_string();
    assert!(err.contains("no sequence_id 99") && err.contains("2 sequences"), "{err}");
    // Write and read back; the index names its rows' files.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("1.parquet");
    data::fingerspell::write_file(&p, &[(7, &all[1].1), (3, &all[0].1)], data::islr::Codec::Zstd).unwrap();
    let back = data::fingerspell::read_file(&p).unwrap();
    let bits = |v: &[(i64, LandmarkSequence)]| -> Vec<(i64, Vec<i32>, Vec<u32>)> {
        v.iter().map(|(id, s)| (*id, s.frame_ids.clone(), s.xyz.iter().map(|x| x.to_bits()).collect())).collect()
    };
    assert!(bits(&back) == bits(&all), "the written file reads back differently");
    std::fs::write(
        dir.path().join("train.csv"),
        "path,file_id,sequence_id,participant_id,phrase\n1.parquet,1,7,11,3 creekhouse\n1.parquet,1,3,12,hello\n",
    )
    .unwrap();
    let entries = data::fingerspell::open(dir.path()).unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!((entries[0].sequence_id, entries[0].phrase.as_str()), (7, "3 creekhouse"));
    // Without its character map the index says what is missing.
    let err = index::open(dir.path()).unwrap_err().to_string();
    assert!(err.contains("Fingerspelling") && err.contains("character_to_prediction_index.json"), "{err}");
    // With it the layout is a continuous dataset of characters: one entry per sequence, the
    // phrase as tokens, each file read once into the sequences it holds.
    let chars = " 3cehklorsu";
    let map: Vec<String> = chars.chars().enumerate().map(|(i, c)| format!("\"{c}\": {i}")).collect();
    std::fs::write(dir.path().join("character_to_prediction_index.json"), format!("{{{}}}", map.join(", "))).unwrap();
    let idx = index::open(dir.path()).unwrap();
    assert_eq!((idx.format, idx.continuous), (index::Format::Fingerspell, Some(data::tokens::Unit::Character)));
    assert_eq!((idx.labels.len(), idx.labels[0].as_str()), (chars.len() + 1, index::BLANK_LABEL));
    assert_eq!(idx.vocabulary().unwrap().decode(&idx.entries[1].tokens), "hello");
    let seqs: Vec<(Option<i64>, &str)> = idx.entries.iter().map(|e| (e.sequence, e.group.as_str())).collect();
    assert_eq!(seqs, [(Some(7), "11"), (Some(3), "12")]);
    let pre = Preprocessor::new(PreprocessConfig::default()).unwrap();
    let ds = SignDataset::load(&idx, &pre, &LoadOptions::default()).unwrap();
    for (item, e) in ds.items.iter().zip(&idx.entries) {
        let one = data::dataset::read_sample(idx.format, &e.path, e.sequence, &pre.config).unwrap();
        let (Sample::Landmarks(a), Sample::Landmarks(b)) = (&item.sample, &pre.normalize(&one, &e.path).unwrap())
        else {
            panic!("landmark sequences")
        };
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
        assert!(a.frame_ids == b.frame_ids && bits(&a.xyz) == bits(&b.xyz), "{} differs", e.describe());
        assert_eq!(item.tokens, e.tokens);
    }
    assert_eq!(ds.items.len(), 2);
    // A file of several sequences read without naming one, a missing sequence and a character
    // outside the map are errors naming the file, sequence or line.
    let err = data::dataset::read_sample(idx.format, &p, None, &pre.config).unwrap_err().to_string();
    assert!(err.contains("1.parquet") && err.contains("holds 2 sequences"), "{err}");
    let csv = dir.path().join("train.csv");
    std::fs::write(
        &csv,
        "path,file_id,sequence_id,participant_id,phrase\n1.parquet,1,7,11,hello\n1.parquet,1,99,12,hello\n",
    )
    .unwrap();
    let fail = LoadOptions { on_error: OnError::Fail, ..Default::default() };
    let err = SignDataset::load(&index::open(dir.path()).unwrap(), &pre, &fail).unwrap_err().to_string();
    assert!(err.contains("1.parquet") && err.contains("no sequence_id 99"), "{err}");
    std::fs::write(
        &csv,
        "path,file_id,sequence_id,participant_id,phrase\n1.parquet,1,7,11,hello\n1.parquet,1,3,12,hi!\n",
    )
    .unwrap();
    let err = index::open(dir.path()).unwrap_err().to_string();
    assert!(err.contains("train.csv:3") && err.contains("`i`"), "{err}");
    // A file of another layout names the missing column.
    let err = data::fingerspell::read_file(&fixture("islr_zstd.parquet")).unwrap_err().to_string();
    assert!(err.contains("islr_zstd.parquet") && err.contains("sequence_id"), "{err}");
}

#[test]
fn truncated_and_mutated_files_of_the_new_formats_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    type Reader = fn(&Path) -> Result<(), String>;
    let cases: [(&str, Reader); 5] = [
        ("holistic_v02.pose", |p| data::pose::read_pose_sequence(p, &[]).map(|_| ()).map_err(|e| e.to_string())),
        ("archive.npz", |p| data::npy::read_npz(p).map(|_| ()).map_err(|e| e.to_string())),
        ("f16.npy", |p| data::npy::read_npy(p).map(|_| ()).map_err(|e| e.to_string())),
        ("islr_brotli.parquet", |p| read_parquet(p).map(|_| ()).map_err(|e| e.to_string())),
        ("fingerspell.parquet", |p| data::fingerspell::read_file(p).map(|_| ()).map_err(|e| e.to_string())),
    ];
    for (name, read) in cases {
        let valid = std::fs::read(fixture(name)).unwrap();
        let p = dir.path().join(format!("damaged-{name}"));
        // Every truncation point of the first bytes, then a spread over the rest.
        let cuts: Vec<usize> =
            (0..64.min(valid.len())).chain((64..valid.len()).step_by(valid.len() / 50 + 1)).collect();
        for cut in cuts {
            std::fs::write(&p, &valid[..cut]).unwrap();
            let err = read(&p).expect_err(&format!("{name} cut at {cut} read as valid"));
            assert!(err.contains("damaged-"), "{name} cut at {cut}: {err}");
        }
        let mut m = testkit::mutate::Mutator::new(19);
        let mut errors = 0;
        for _ in 0..150 {
            std::fs::write(&p, m.mutate(&valid)).unwrap();
            if let Err(e) = read(&p) {
                errors += 1;
                assert!(e.contains("damaged-"), "{name}: {e}");
            }
        }
        assert!(errors > 0, "{name}: no mutation was caught");
    }
}
