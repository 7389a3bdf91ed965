//! Embedding `infer` in an application loop: load once, feed frames as a camera would, react to
//! sign events.
//!
//! ```bash
//! cargo run --release -p trainer -- --config configs/smoke.toml --out runs/demo    # a model to use
//! cargo run --release -p infer --example live_stream -- runs/demo
//! ```
//! Here the "camera" is the synthetic generator: three signs of an unseen signer, back to back.

use std::sync::Arc;

use infer::{Predictor, PredictorOptions, StreamConfig, StreamingRecognizer};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Tensor buffers reused between batches instead of faulted in again (docs/PERFORMANCE.md).
    device::keep_freed_memory();
    let run_dir = std::env::args().nth(1).ok_or("usage: live_stream RUN_DIR")?;
    // Load once at start-up (this also warms the model up).
    let predictor = Arc::new(Predictor::load(run_dir.as_ref(), &PredictorOptions::default())?);
    println!("model: {} signs on {}", predictor.labels().len(), predictor.device_name());
    // Optional: frames per evaluation (default: the model's window).
    let window_frames = std::env::args().nth(2).map(|w| w.parse()).transpose()?.unwrap_or(0);
    let mut recognizer =
        StreamingRecognizer::new(predictor.clone(), StreamConfig { window_frames, ..Default::default() })?;

    // A landmark source: here synthetic recordings; in an app, MediaPipe results per camera frame.
    let synth = data::synth::SynthConfig { classes: predictor.labels().len(), ..Default::default() };
    let mut frame_no = 0i64;
    for class in [0, 1, 2].map(|c| c % synth.classes) {
        let seq = data::synth::generate_sequence(&synth, class, 99, 0);
        println!("(signing {})", predictor.labels()[class]);
        for t in 0..seq.frames() {
            let frame: Vec<[f32; 3]> = (0..seq.points).map(|p| seq.at(t, p)).collect();
            for event in recognizer.push(frame_no, &frame)? {
                println!(
                    "recognized {} ({:.2}) frames {}-{}",
                    event.label, event.confidence, event.start_frame, event.end_frame
                );
            }
            frame_no += 1;
        }
    }
    for event in recognizer.finish()? {
        println!(
            "recognized {} ({:.2}) frames {}-{}",
            event.label, event.confidence, event.start_frame, event.end_frame
        );
    }
    Ok(())
}
