//! A background GPU sampler through NVML: utilization, memory, temperature and power per GPU,
//! streamed to a CSV and summarized (mean / max). Without NVML (no NVIDIA driver, or a build
//! without `cuda`) it reports "unavailable", starts no thread and costs nothing.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{DeviceError, Result};

/// One reading of one GPU. Fields the driver does not report are `None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSample {
    /// Milliseconds since the monitor started.
    pub elapsed_ms: u64,
    /// NVML GPU index.
    pub gpu: u32,
    /// GPU utilization.
    pub utilization_pct: Option<u32>,
    /// Memory-controller utilization.
    pub memory_utilization_pct: Option<u32>,
    /// Memory in use.
    pub memory_used_bytes: Option<u64>,
    /// Total memory.
    pub memory_total_bytes: Option<u64>,
    /// Temperature.
    pub temperature_c: Option<u32>,
    /// Power draw.
    pub power_w: Option<f64>,
}

/// Mean and max of one metric over the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    /// Mean over the samples.
    pub mean: f64,
    /// Maximum.
    pub max: f64,
    /// Samples.
    pub count: u64,
}

// Built where the sampler thread is (CUDA builds) and for the unit tests.
#[cfg(any(feature = "cuda", test))]
impl Stat {
    fn add(&mut self, v: f64) {
        self.count += 1;
        self.mean += (v - self.mean) / self.count as f64;
        if self.count == 1 || v > self.max {
            self.max = v;
        }
    }
}

/// One GPU's figures over a monitoring period.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuSummary {
    /// NVML GPU index.
    pub gpu: u32,
    /// GPU name.
    pub name: String,
    /// Utilization, percent.
    pub utilization_pct: Stat,
    /// Memory used, MiB.
    pub memory_used_mib: Stat,
    /// Temperature, degrees C.
    pub temperature_c: Stat,
    /// Power draw, W.
    pub power_w: Stat,
}

/// What a monitoring period saw.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MonitorSummary {
    /// Whether NVML was available.
    pub available: bool,
    /// Why not, when unavailable.
    pub reason: Option<String>,
    /// Sampling rounds taken.
    pub samples: u64,
    /// Per-GPU figures.
    pub gpus: Vec<GpuSummary>,
}

impl MonitorSummary {
    fn unavailable(reason: String) -> Self {
        Self { available: false, reason: Some(reason), ..Default::default() }
    }

    /// Mean utilization over all GPUs, if sampled.
    pub fn mean_utilization(&self) -> Option<f64> {
        let used: Vec<f64> =
            self.gpus.iter().filter(|g| g.utilization_pct.count > 0).map(|g| g.utilization_pct.mean).collect();
        (!used.is_empty()).then(|| used.iter().sum::<f64>() / used.len() as f64)
    }
}

/// A running (or unavailable) monitor. Stop it with [`GpuMonitor::stop`]; dropping it also stops
/// the thread.
#[derive(Debug)]
pub struct GpuMonitor {
    stop_tx: Option<Sender<()>>,
    handle: Option<JoinHandle<MonitorSummary>>,
    unavailable: Option<String>,
}

/// The header of the monitor's CSV file.
pub const CSV_HEADER: &str =
    "elapsed_ms,gpu,utilization_pct,memory_utilization_pct,memory_used_bytes,memory_total_bytes,temperature_c,power_w";

fn opt<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map(|x| x.to_string()).unwrap_or_default()
}

impl GpuSample {
    /// This sample as a CSV row.
    pub fn csv_row(&self) -> String {
        format!(
            "{},{},{},{},{},{},{},{}",
            self.elapsed_ms,
            self.gpu,
            opt(&self.utilization_pct),
            opt(&self.memory_utilization_pct),
            opt(&self.memory_used_bytes),
            opt(&self.memory_total_bytes),
            opt(&self.temperature_c),
            opt(&self.power_w.map(|w| format!("{w:.1}")))
        )
    }
}

/// Folds samples into per-GPU statistics (the sampler thread's, and the unit tests').
#[cfg(any(feature = "cuda", test))]
#[derive(Debug, Default)]
pub(crate) struct Aggregator {
    gpus: Vec<GpuSummary>,
    samples: u64,
}

#[cfg(any(feature = "cuda", test))]
impl Aggregator {
    /// Add a sample of GPU `name`.
    pub fn add(&mut self, name: &str, s: &GpuSample) {
        self.samples += 1;
        let entry = match self.gpus.iter_mut().position(|g| g.gpu == s.gpu) {
            Some(i) => &mut self.gpus[i],
            None => {
                self.gpus.push(GpuSummary { gpu: s.gpu, name: name.to_string(), ..Default::default() });
                self.gpus.last_mut().expect("just pushed")
            }
        };
        if let Some(u) = s.utilization_pct {
            entry.utilization_pct.add(u as f64);
        }
        if let Some(m) = s.memory_used_bytes {
            entry.memory_used_mib.add(m as f64 / (1 << 20) as f64);
        }
        if let Some(t) = s.temperature_c {
            entry.temperature_c.add(t as f64);
        }
        if let Some(p) = s.power_w {
            entry.power_w.add(p);
        }
    }

    /// The summary of everything added.
    pub fn finish(self) -> MonitorSummary {
        MonitorSummary { available: true, reason: None, samples: self.samples, gpus: self.gpus }
    }
}

impl GpuMonitor {
    /// Start sampling every `interval`, appending rows to `csv` if given (written to
    /// `<csv>.partial` and renamed into place on stop, so a reader never sees half a file).
    pub fn start(interval: Duration, csv: Option<&Path>) -> Result<Self> {
        if let Err(reason) = nvml_available() {
            tracing::debug!("GPU monitor unavailable: {reason}");
            return Ok(Self { stop_tx: None, handle: None, unavailable: Some(reason) });
        }
        let writer = match csv {
            Some(path) => {
                let partial = partial_path(path);
                let file = File::create(&partial)
                    .map_err(|source| DeviceError::Io { path: partial.display().to_string(), source })?;
                let mut w = BufWriter::new(file);
                writeln!(w, "{CSV_HEADER}")
                    .map_err(|source| DeviceError::Io { path: partial.display().to_string(), source })?;
                Some((w, partial, path.to_path_buf()))
            }
            None => None,
        };
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let interval = interval.max(Duration::from_millis(10));
        let handle = std::thread::Builder::new()
            .name("gpu-monitor".into())
            .spawn(move || sample_loop(interval, stop_rx, writer))
            .map_err(|source| DeviceError::Io { path: "gpu-monitor thread".into(), source })?;
        Ok(Self { stop_tx: Some(stop_tx), handle: Some(handle), unavailable: None })
    }

    /// Whether NVML answers on this machine.
    pub fn is_available(&self) -> bool {
        self.unavailable.is_none()
    }

    /// Stop sampling and return the summary.
    pub fn stop(mut self) -> MonitorSummary {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> MonitorSummary {
        if let Some(reason) = &self.unavailable {
            return MonitorSummary::unavailable(reason.clone());
        }
        drop(self.stop_tx.take());
        match self.handle.take().map(|h| h.join()) {
            Some(Ok(summary)) => summary,
            Some(Err(_)) => MonitorSummary::unavailable("monitor thread panicked".into()),
            None => MonitorSummary::unavailable("monitor already stopped".into()),
        }
    }
}

impl Drop for GpuMonitor {
    fn drop(&mut self) {
        if self.handle.is_some() {
            self.stop_inner();
        }
    }
}

fn partial_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".partial");
    PathBuf::from(s)
}

#[cfg(feature = "cuda")]
fn nvml_available() -> Result<(), String> {
    let nvml = nvml_wrapper::Nvml::init().map_err(|e| format!("NVML unavailable: {e}"))?;
    match nvml.device_count() {
        Ok(0) => Err("NVML found no GPU".into()),
        Ok(_) => Ok(()),
        Err(e) => Err(format!("NVML device count failed: {e}")),
    }
}

#[cfg(not(feature = "cuda"))]
fn nvml_available() -> Result<(), String> {
    Err("NVML unavailable: this build has no `cuda` feature".into())
}

type CsvWriter = Option<(BufWriter<File>, PathBuf, PathBuf)>;

#[cfg(feature = "cuda")]
fn sample_loop(interval: Duration, stop: mpsc::Receiver<()>, mut writer: CsvWriter) -> MonitorSummary {
    use std::sync::mpsc::RecvTimeoutError;
    use std::time::Instant;

    use nvml_wrapper::enum_wrappers::device::TemperatureSensor;

    let nvml = match nvml_wrapper::Nvml::init() {
        Ok(n) => n,
        Err(e) => return MonitorSummary::unavailable(format!("NVML unavailable: {e}")),
    };
    let count = nvml.device_count().unwrap_or(0);
    let names: Vec<String> = (0..count)
        .map(|i| nvml.device_by_index(i).and_then(|d| d.name()).unwrap_or_else(|_| format!("GPU {i}")))
        .collect();
    let start = Instant::now();
    let mut agg = Aggregator::default();
    loop {
        for i in 0..count {
            let Ok(d) = nvml.device_by_index(i) else { continue };
            let util = d.utilization_rates().ok();
            let mem = d.memory_info().ok();
            let s = GpuSample {
                elapsed_ms: start.elapsed().as_millis() as u64,
                gpu: i,
                utilization_pct: util.as_ref().map(|u| u.gpu),
                memory_utilization_pct: util.as_ref().map(|u| u.memory),
                memory_used_bytes: mem.as_ref().map(|m| m.used),
                memory_total_bytes: mem.as_ref().map(|m| m.total),
                temperature_c: d.temperature(TemperatureSensor::Gpu).ok(),
                power_w: d.power_usage().ok().map(|mw| mw as f64 / 1000.0),
            };
            if let Some((w, _, _)) = writer.as_mut() {
                if let Err(e) = writeln!(w, "{}", s.csv_row()) {
                    tracing::warn!("GPU monitor: cannot write CSV row: {e}");
                }
            }
            agg.add(&names[i as usize], &s);
        }
        match stop.recv_timeout(interval) {
            Err(RecvTimeoutError::Timeout) => continue,
            Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    finish_csv(writer);
    agg.finish()
}

#[cfg(not(feature = "cuda"))]
fn sample_loop(_interval: Duration, _stop: mpsc::Receiver<()>, writer: CsvWriter) -> MonitorSummary {
    finish_csv(writer);
    MonitorSummary::unavailable("NVML unavailable: this build has no `cuda` feature".into())
}

fn finish_csv(writer: CsvWriter) {
    if let Some((mut w, partial, path)) = writer {
        let done = w.flush().and_then(|_| w.get_ref().sync_all()).and_then(|_| std::fs::rename(&partial, &path));
        if let Err(e) = done {
            tracing::warn!("GPU monitor: cannot finish {}: {e}", path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(gpu: u32, util: u32, mem_mib: u64) -> GpuSample {
        GpuSample {
            elapsed_ms: 0,
            gpu,
            utilization_pct: Some(util),
            memory_utilization_pct: None,
            memory_used_bytes: Some(mem_mib << 20),
            memory_total_bytes: Some(80 << 30),
            temperature_c: Some(60 + util / 10),
            power_w: Some(util as f64 * 3.0),
        }
    }

    #[test]
    fn aggregates_mean_and_max_per_gpu() {
        let mut agg = Aggregator::default();
        for (u, m) in [(10, 100), (50, 300), (90, 200)] {
            agg.add("A", &sample(0, u, m));
        }
        agg.add("B", &sample(1, 20, 50));
        let s = agg.finish();
        assert_eq!(s.samples, 4);
        assert_eq!(s.gpus.len(), 2);
        assert_eq!(s.gpus[0].name, "A");
        assert!((s.gpus[0].utilization_pct.mean - 50.0).abs() < 1e-9);
        assert_eq!(s.gpus[0].utilization_pct.max, 90.0);
        assert_eq!(s.gpus[0].memory_used_mib.max, 300.0);
        assert_eq!(s.gpus[0].power_w.max, 270.0);
        assert!((s.mean_utilization().unwrap() - 35.0).abs() < 1e-9);
    }

    #[test]
    fn csv_rows_leave_missing_fields_empty() {
        let mut s = sample(0, 42, 1);
        s.temperature_c = None;
        assert_eq!(s.csv_row(), format!("0,0,42,,1048576,{},,126.0", 80u64 << 30));
        assert_eq!(s.csv_row().split(',').count(), CSV_HEADER.split(',').count());
    }
}
