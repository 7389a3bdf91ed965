//! Measurement: what a run finds out by probing this machine before it is planned: the device
//! and precision (with `device.choose = "fastest"`, timed steps on each usable device,
//! [`crate::choose`]), the data (loaded through the preprocessed cache and split), and, for
//! `training.batch_size = "auto"` in a new run, the batch-size search ([`crate::tune`]). The
//! timings are the one training step's ([`crate::step`]). Each finding is printed on the console
//! as it is made; [`crate::plan`] turns them into the run.

use crate::config::ExperimentConfig;
use crate::inject::Faults;
use crate::report::Console;
use crate::resolve::{ResolvedCompute, ResolvedData};
use crate::tune::TuneReport;
use crate::Result;

/// What [`measure`] found.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The device and precision.
    pub compute: ResolvedCompute,
    /// The preprocessing and the loaded, split data.
    pub input: ResolvedData,
    /// The batch-size search, when the batch was `"auto"` and not known from a resumed run.
    pub search: Option<TuneReport>,
}

/// Measure what the run of `cfg` (resuming the run whose config is `saved`, when given) needs.
pub fn measure(
    cfg: &ExperimentConfig,
    saved: Option<&ExperimentConfig>,
    faults: &Faults,
    console: &Console,
) -> Result<Measured> {
    let mut compute = ResolvedCompute::resolve(cfg)?;
    let input = ResolvedData::resolve(cfg, console.bars())?;
    let fastest = cfg.device.choose == device::Choose::Fastest
        && cfg.device.device == device::DeviceSpec::Auto
        && cfg.distributed.devices.is_empty();
    if fastest {
        compute = crate::choose::fastest(cfg, &input, compute)?;
    }
    console.line(format!("device: {} ({})", compute.device.selection.name, compute.device.selection.reason));
    if let Some(dir) = compute.on_gpu().then(device::runtime::setup).flatten().and_then(|s| s.cache_dir.as_ref()) {
        console.line(format!(
            "kernel cache: {} (autotune results and compiled kernels; {})",
            dir.display(),
            device::runtime::CACHE_ENV
        ));
    }
    if let Some(w) = &compute.precision.warning {
        eprintln!("warning: {w}");
    }
    console.line(format!(
        "precision: {} compute, f32 master weights ({})",
        compute.precision.precision, compute.precision.reason
    ));
    let search = match crate::plan::known_batch(&cfg.training, saved) {
        Some(_) => None,
        None => {
            let report = crate::tune::search(cfg, &compute, &input, faults)?;
            console.block(report.render());
            Some(report)
        }
    };
    Ok(Measured { compute, input, search })
}
