//! # SignFlow device layer
//!
//! The only crate that knows about CUDA, WGPU and CPU specifics. It probes the machine without
//! ever panicking, turns a [`DeviceSpec`] (`auto`, `cpu`, `cuda:1`, ...) into one Burn device
//! with the reasons for the choice, says which float dtypes that device handles well, reports and
//! empties its memory pool, and samples GPU utilization in the background.
//!
//! Everything above this crate computes on one backend type, [`Backend`] (Burn's `Dispatch`), or
//! [`TrainBackend`] (`Autodiff<Dispatch>`), with the device picked at run time.
//!
//! ```no_run
//! use device::{resolve, DeviceSpec, SelectionPolicy};
//! let selected = resolve(&"auto".parse::<DeviceSpec>()?, &SelectionPolicy::default())?;
//! println!("using {} because {}", selected.selection.name, selected.selection.reason);
//! let x = burn::tensor::Tensor::<device::Backend, 2>::ones([2, 2], &selected.device);
//! # Ok::<(), device::DeviceError>(())
//! ```
#![warn(missing_docs)]

pub mod candidates;
pub mod capabilities;
pub mod counters;
/// Errors of probing and selection.
pub mod error;
pub mod host_alloc;
pub mod inventory;
pub mod kernel_cache;
pub mod memory;
pub mod monitor;
pub mod probe;
pub mod runtime;
pub mod select;
/// Device specs (`auto`, `cpu`, `cuda:N`, `wgpu:N`).
pub mod spec;
pub mod thread_cpu;

pub use burn::DispatchDevice;
pub use candidates::{candidates, Choose};
pub use capabilities::{Capabilities, DtypeSupport, Precision, PrecisionSetting, ResolvedPrecision};
pub use error::{DeviceError, Result};
pub use host_alloc::keep_freed_memory;
pub use inventory::Inventory;
pub use memory::{empty_cache, host_memory, memory_stats, HostMemory, MemoryDelta, MemoryGuard, MemoryStats};
pub use monitor::{GpuMonitor, MonitorSummary};
pub use probe::{probe, probe_for, quiet_headless_env};
pub use select::{select, Selection, SelectionPolicy, Target};
pub use spec::DeviceSpec;

/// The inference backend: one type for every device, chosen at run time.
pub type Backend = burn::Dispatch;
/// The training backend.
pub type TrainBackend = burn::backend::Autodiff<burn::Dispatch>;

/// A device ready to compute on, with the selection that produced it.
#[derive(Debug, Clone)]
pub struct SelectedDevice {
    /// The device to put tensors on.
    pub device: DispatchDevice,
    /// What was selected and why.
    pub selection: Selection,
}

/// Probe what `spec` needs (everything for `auto`) and resolve it.
pub fn resolve(spec: &DeviceSpec, policy: &SelectionPolicy) -> Result<SelectedDevice> {
    let inventory = probe_for(spec);
    resolve_with(spec, policy, &inventory)
}

/// Resolve `spec` against an inventory probed earlier.
pub fn resolve_with(spec: &DeviceSpec, policy: &SelectionPolicy, inventory: &Inventory) -> Result<SelectedDevice> {
    let selection = select(spec, inventory, policy)?;
    for line in &selection.skipped {
        tracing::info!("skipped {line}");
    }
    tracing::info!("device: {} ({})", selection.name, selection.reason);
    let device = dispatch_device(&selection.target)?;
    Ok(SelectedDevice { device, selection })
}

/// The Burn device for a selected target. A GPU-class target also sets cubecl's settings for
/// the process if nothing did before ([`runtime::configure`] with its defaults: the per-user
/// kernel cache), so a library user's process compiles and tunes a kernel once, across runs and
/// processes, as the programs do; a program that configured cubecl first keeps its settings.
pub fn dispatch_device(target: &Target) -> Result<DispatchDevice> {
    if !matches!(target, Target::Cpu) {
        configure_gpu_runtime();
    }
    match target {
        Target::Cpu => Ok(DispatchDevice::Flex(burn::backend::flex::FlexDevice)),
        #[cfg(feature = "cuda")]
        Target::Cuda { ordinal } => Ok(DispatchDevice::Cuda(burn::backend::cuda::CudaDevice::new(*ordinal))),
        #[cfg(not(feature = "cuda"))]
        Target::Cuda { .. } => Err(DeviceError::NotCompiled { backend: "cuda" }),
        #[cfg(feature = "wgpu")]
        Target::Wgpu { kind, kind_index, .. } => {
            use burn::backend::wgpu::WgpuDevice;
            use inventory::AdapterKind;
            Ok(DispatchDevice::Wgpu(match kind {
                AdapterKind::DiscreteGpu => WgpuDevice::DiscreteGpu(*kind_index),
                AdapterKind::IntegratedGpu => WgpuDevice::IntegratedGpu(*kind_index),
                AdapterKind::VirtualGpu => WgpuDevice::VirtualGpu(*kind_index),
                AdapterKind::Cpu => WgpuDevice::Cpu,
                AdapterKind::Other => WgpuDevice::DefaultDevice,
            }))
        }
        #[cfg(not(feature = "wgpu"))]
        Target::Wgpu { .. } => Err(DeviceError::NotCompiled { backend: "wgpu" }),
    }
}

/// [`runtime::configure`] with the defaults unless it ran; its warning (an unusable or repaired
/// cache) goes to the log.
fn configure_gpu_runtime() {
    if runtime::setup().is_some() {
        return;
    }
    if let Some(w) = &runtime::configure(None, None).warning {
        tracing::warn!("{w}");
    }
}

/// Short backend name of a device, for logs and reports: `cuda`, `wgpu`, `cpu`.
pub fn backend_name(device: &DispatchDevice) -> &'static str {
    match device {
        #[cfg(feature = "cuda")]
        DispatchDevice::Cuda(_) => "cuda",
        #[cfg(feature = "wgpu")]
        DispatchDevice::Wgpu(_) => "wgpu",
        DispatchDevice::Flex(_) => "cpu",
    }
}

/// Run a real matrix multiply of size `n` on `device` and return the largest absolute error
/// against the exact result. Used by `device check`, the GPU check script and tests.
pub fn matmul_check(device: &DispatchDevice, n: usize) -> std::result::Result<f32, String> {
    use burn::tensor::{Tensor, TensorData};
    // a[i][k] = (i + k) mod 7, b[k][j] = 1 if k == j else 0.5: small integers, exact in f32.
    let a: Vec<f32> = (0..n * n).map(|x| ((x / n + x % n) % 7) as f32).collect();
    let b: Vec<f32> = (0..n * n).map(|x| if x / n == x % n { 1.0 } else { 0.5 }).collect();
    let ta = Tensor::<Backend, 2>::from_data(TensorData::new(a.clone(), [n, n]), device);
    let tb = Tensor::<Backend, 2>::from_data(TensorData::new(b.clone(), [n, n]), device);
    let got = ta.matmul(tb).into_data().to_vec::<f32>().map_err(|e| format!("{e:?}"))?;
    let mut max_err = 0f32;
    for i in 0..n {
        let row_sum: f32 = (0..n).map(|k| a[i * n + k]).sum();
        for j in 0..n {
            let expected = 0.5 * row_sum + 0.5 * a[i * n + j];
            max_err = max_err.max((got[i * n + j] - expected).abs());
        }
    }
    Ok(max_err)
}
