//! Classify every ISLR parquet file in a directory with one loaded model, in batches.
//!
//! ```bash
//! cargo run --release -p infer --example classify_dir -- runs/demo .signflow/synthetic/<dir>/landmarks/1003
//! ```

use std::path::PathBuf;

use infer::{Predictor, PredictorOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (run_dir, dir) = match (args.next(), args.next()) {
        (Some(r), Some(d)) => (PathBuf::from(r), PathBuf::from(d)),
        _ => return Err("usage: classify_dir RUN_DIR DIR".into()),
    };
    let predictor = Predictor::load(&run_dir, &PredictorOptions { top_k: 3, ..Default::default() })?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    files.sort();
    for chunk in files.chunks(32) {
        let mut samples = Vec::new();
        for f in chunk {
            samples.push(data::dataset::read_sample(data::index::Format::Islr, f)?);
        }
        for (f, p) in chunk.iter().zip(predictor.predict_batch(&samples)?) {
            let best = p.best();
            println!("{}: {} ({:.3})", f.display(), best.label, best.probability);
        }
    }
    Ok(())
}
