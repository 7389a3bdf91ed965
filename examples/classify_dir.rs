//! Classify every sequence file (ISLR parquet or npy) in a directory with one loaded model, in
//! batches; files are read on worker threads one batch ahead of the model.
//!
//! ```bash
//! cargo run --release -p infer --example classify_dir -- runs/demo .signflow/synthetic/<dir>/landmarks/1003
//! ```

use std::path::PathBuf;

use infer::{Classifier, PredictorOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Tensor buffers reused between batches instead of faulted in again (docs/PERFORMANCE.md).
    device::keep_freed_memory();
    let mut args = std::env::args().skip(1);
    let (run_dir, dir) = match (args.next(), args.next()) {
        (Some(r), Some(d)) => (PathBuf::from(r), PathBuf::from(d)),
        _ => return Err("usage: classify_dir RUN_DIR DIR".into()),
    };
    let predictor = Classifier::load(&run_dir, &PredictorOptions { top_k: 3, ..Default::default() })?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| data::index::Format::from_extension(p).is_some())
        .collect();
    files.sort();
    predictor.predict_files(&files, 32, |file, result| match result {
        Ok(p) => println!("{}: {} ({:.3})", file.display(), p.best().label, p.best().probability),
        Err(e) => eprintln!("skipped {e}"),
    })?;
    Ok(())
}
