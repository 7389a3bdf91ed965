//! Probes that look at the real machine. None of them panics on a machine without the hardware:
//! CUDA is checked library by library before any driver call (cudarc panics on a driver call when
//! libcuda is absent), and every probe also runs under `catch_unwind` as a last line of defence.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::inventory::{CpuInfo, CudaInventory, CudaStatus, Inventory, WgpuInventory};
use crate::spec::DeviceSpec;

/// Probe CUDA, WGPU and the CPU. Takes from a few milliseconds (no GPU) to ~a second per GPU.
pub fn probe() -> Inventory {
    Inventory { cuda: probe_cuda(), wgpu: probe_wgpu(), cpu: probe_cpu() }
}

/// Probe only what resolving `spec` needs: `cpu` touches neither the CUDA driver nor a graphics
/// stack (faster start, no GPU driver messages), `cuda` skips WGPU, `wgpu` skips CUDA, and `auto`
/// probes everything.
pub fn probe_for(spec: &DeviceSpec) -> Inventory {
    let not_probed = || WgpuInventory {
        unavailable: Some("wgpu: not probed (another device was asked for)".into()),
        adapters: Vec::new(),
    };
    let cuda_not_probed = || CudaInventory { status: CudaStatus::NotProbed, ..CudaInventory::not_compiled() };
    match spec {
        DeviceSpec::Auto => probe(),
        DeviceSpec::Cpu => Inventory { cuda: cuda_not_probed(), wgpu: not_probed(), cpu: probe_cpu() },
        DeviceSpec::Cuda(_) => Inventory { cuda: probe_cuda(), wgpu: not_probed(), cpu: probe_cpu() },
        DeviceSpec::Wgpu(_) => Inventory { cuda: cuda_not_probed(), wgpu: probe_wgpu(), cpu: probe_cpu() },
    }
}

/// For binaries, called first thing in `main` (before any thread starts): on a headless Linux box
/// without `XDG_RUNTIME_DIR`, the Vulkan loader's Wayland client prints "XDG_RUNTIME_DIR is invalid
/// or not set" twice whenever WGPU is probed. Point it at a private per-user directory so a run's
/// stderr only holds our own messages. Does nothing when the variable is set or elsewhere.
pub fn quiet_headless_env() {
    #[cfg(target_os = "linux")]
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt};
        // This process owns /proc/self, so its uid is ours (std has no getuid).
        let uid = std::fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(0);
        let dir = std::env::temp_dir().join(format!("signflow-runtime-{uid}"));
        let made = std::fs::DirBuilder::new().mode(0o700).create(&dir);
        let usable = made.is_ok()
            || std::fs::metadata(&dir).is_ok_and(|m| m.is_dir() && m.uid() == uid && m.mode() & 0o077 == 0);
        if usable {
            std::env::set_var("XDG_RUNTIME_DIR", &dir);
        }
    }
}

fn guarded<T>(what: &str, f: impl FnOnce() -> T, on_panic: impl FnOnce(String) -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            tracing::warn!("{what} probe panicked: {msg}");
            on_panic(format!("{what} probe panicked: {msg}"))
        }
    }
}

/// CUDA: driver library, then devices, then NVRTC and toolkit headers (both needed at run time
/// by cubecl to compile kernels).
pub fn probe_cuda() -> CudaInventory {
    guarded("CUDA", probe_cuda_inner, |msg| CudaInventory {
        status: CudaStatus::DriverError(msg),
        ..CudaInventory::not_compiled()
    })
}

#[cfg(feature = "cuda")]
fn probe_cuda_inner() -> CudaInventory {
    use cudarc::driver::CudaContext;

    use crate::inventory::CudaGpu;

    let visible_devices = std::env::var("CUDA_VISIBLE_DEVICES").ok();
    let toolkit_path = cubecl::cuda::install::cuda_path().map(|p| p.display().to_string());
    let mut inv = CudaInventory {
        status: CudaStatus::Ready,
        visible_devices,
        toolkit_path: toolkit_path.clone(),
        gpus: Vec::new(),
    };
    // SAFETY: only tries to dlopen the driver library; never calls into it.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        inv.status = CudaStatus::DriverMissing;
        return inv;
    }
    let count = match CudaContext::device_count() {
        Ok(n) => n.max(0) as usize,
        Err(e) => {
            inv.status = CudaStatus::DriverError(e.to_string());
            return inv;
        }
    };
    for ordinal in 0..count {
        let ctx = match CudaContext::new(ordinal) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("CUDA device {ordinal}: cannot create a context: {e}");
                continue;
            }
        };
        let (free, total) = ctx.mem_get_info().unwrap_or((0, 0));
        let (major, minor) = ctx.compute_capability().unwrap_or((0, 0));
        inv.gpus.push(CudaGpu {
            ordinal,
            name: ctx.name().unwrap_or_else(|_| format!("CUDA device {ordinal}")),
            total_memory_bytes: ctx.total_mem().map(|m| m as u64).unwrap_or(total as u64),
            free_memory_bytes: free as u64,
            compute_capability: (major.max(0) as u32, minor.max(0) as u32),
        });
    }
    // SAFETY: only tries to dlopen libnvrtc.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        inv.status = CudaStatus::NvrtcMissing;
    } else if !toolkit_path.is_some_and(|p| std::path::Path::new(&p).join("include").is_dir()) {
        inv.status = CudaStatus::ToolkitMissing;
    }
    inv
}

#[cfg(not(feature = "cuda"))]
fn probe_cuda_inner() -> CudaInventory {
    CudaInventory::not_compiled()
}

/// WGPU adapters of the graphics API Burn's wgpu backend uses on this platform, in the order
/// cubecl enumerates them (so `kind_index` maps onto `WgpuDevice::DiscreteGpu(n)` etc.).
pub fn probe_wgpu() -> WgpuInventory {
    guarded("wgpu", probe_wgpu_inner, |msg| WgpuInventory { unavailable: Some(msg), adapters: Vec::new() })
}

#[cfg(feature = "wgpu")]
fn probe_wgpu_inner() -> WgpuInventory {
    use cubecl::wgpu::{AutoGraphicsApi, GraphicsApi};

    use crate::inventory::{AdapterKind, WgpuAdapter};

    let backend = AutoGraphicsApi::backend();
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends: wgpu::Backends::all(),
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    });
    let adapters = cubecl::future::block_on(instance.enumerate_adapters(backend.into()));
    let mut per_kind = [0usize; 5];
    let adapters = adapters
        .iter()
        .enumerate()
        .map(|(index, adapter)| {
            let info = adapter.get_info();
            let kind = match info.device_type {
                wgpu::DeviceType::DiscreteGpu => AdapterKind::DiscreteGpu,
                wgpu::DeviceType::IntegratedGpu => AdapterKind::IntegratedGpu,
                wgpu::DeviceType::VirtualGpu => AdapterKind::VirtualGpu,
                wgpu::DeviceType::Cpu => AdapterKind::Cpu,
                wgpu::DeviceType::Other => AdapterKind::Other,
            };
            let slot = &mut per_kind[kind.rank() as usize];
            let kind_index = *slot;
            *slot += 1;
            WgpuAdapter {
                index,
                kind_index,
                name: info.name.clone(),
                backend: format!("{:?}", info.backend),
                kind,
                driver: format!("{} {}", info.driver, info.driver_info).trim().to_string(),
                shader_f16: adapter.features().contains(wgpu::Features::SHADER_F16),
                software: kind.is_software(),
            }
        })
        .collect();
    WgpuInventory { unavailable: None, adapters }
}

#[cfg(not(feature = "wgpu"))]
fn probe_wgpu_inner() -> WgpuInventory {
    WgpuInventory { unavailable: Some("wgpu: this build has no `wgpu` feature".into()), adapters: Vec::new() }
}

/// Host CPU facts plus the dtypes the Flex CPU backend supports, asked of the backend itself.
pub fn probe_cpu() -> CpuInfo {
    use burn::backend::flex::{Flex, FlexDevice};
    use burn::tensor::backend::Backend;
    use burn::tensor::DType;
    use sysinfo::System;

    let mut sys = System::new();
    sys.refresh_memory();
    sys.refresh_cpu_list(sysinfo::CpuRefreshKind::nothing());
    let model = sys
        .cpus()
        .first()
        .map(|c| c.brand().trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    CpuInfo {
        model,
        logical_cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        physical_cores: System::physical_core_count(),
        total_memory_bytes: sys.total_memory(),
        available_memory_bytes: sys.available_memory(),
        backend: "flex".into(),
        supports_f16: Flex::supports_dtype(&FlexDevice, DType::F16),
        supports_bf16: Flex::supports_dtype(&FlexDevice, DType::BF16),
    }
}
