//! # SignFlow data
//!
//! Landmark sequences from the formats people have, transformed identically at training and
//! inference time:
//! - formats: the public ISLR parquet layout ([`islr`], [`index`]; snappy, zstd, gzip, lz4, brotli),
//!   a `labels.csv` layout of `.npy`/`.npz` arrays ([`npy`]) or `.pose` files ([`pose`]), and the
//!   ASL Fingerspelling wide parquet layout ([`fingerspell`]), both through flat parquet tables
//!   ([`table`]), with validation that names the file and the problem;
//! - [`preprocess`]: landmark subsets, normalization, NaN handling, time differences, windows
//!   with a padding mask (one [`preprocess::PreprocessConfig`] shared by trainer and infer);
//! - [`augment`]: flip with left/right swap, affine, speed, temporal mask, cutout; seeded;
//! - [`synth`]: a synthetic sign generator writing the ISLR layout; [`sentences`]: synthetic
//!   continuous signing (sentences of those signs, gloss labels) for CTC; [`takes`]: continuous
//!   recordings with annotated signs (`NAME.events.csv`) for scoring live recognition;
//! - [`tokens`]: token vocabularies of continuous recognition (characters, glosses);
//! - [`dataset`] and [`loader`]: parallel loading with a preprocessed cache, group (signer)
//!   splits, and prefetching batch loaders producing Burn tensors.
//!
//! ```no_run
//! use data::{dataset::{LoadOptions, SignDataset}, preprocess::{PreprocessConfig, Preprocessor}};
//! let root = std::path::Path::new("synthetic");
//! data::synth::generate(root, &data::synth::SynthConfig::default(), true)?;
//! let index = data::index::open(root)?;
//! let pre = Preprocessor::new(PreprocessConfig::default())?;
//! let ds = SignDataset::load(&index, &pre, &LoadOptions::default())?;
//! let (train, valid) = ds.split_by_group(0.2, 0);
//! # Ok::<(), data::DataError>(())
//! ```
#![warn(missing_docs)]

pub mod augment;
pub mod dataset;
/// Errors that name the file, line or key.
pub mod error;
pub mod fingerspell;
pub mod guard;
pub mod index;
pub mod islr;
pub mod layout;
pub mod loader;
pub mod npy;
pub mod pose;
pub mod preprocess;
pub mod sentences;
pub mod sequence;
pub mod synth;
pub mod table;
pub mod takes;
pub mod tokens;

pub use error::{sweep_temp_files, write_atomic, DataError, Result};
pub use sequence::{FeatureSequence, LandmarkSequence, Prepared, Sample};
