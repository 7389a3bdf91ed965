//! What a probe found on this machine. Plain data: the selection logic is a pure function of it,
//! so tests build fabricated inventories (multi-GPU boxes, missing drivers) by hand.

use serde::{Deserialize, Serialize};

/// Everything the probes found.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Inventory {
    pub cuda: CudaInventory,
    pub wgpu: WgpuInventory,
    pub cpu: CpuInfo,
}

/// Why CUDA can or cannot be used.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "state", content = "detail", rename_all = "snake_case")]
pub enum CudaStatus {
    /// Driver, NVRTC and toolkit headers were all found; `gpus` lists the visible devices.
    Ready,
    /// The binary was built without the `cuda` feature.
    NotCompiled,
    /// `libcuda` (the NVIDIA driver library) could not be loaded.
    DriverMissing,
    /// The driver is there but the NVRTC runtime compiler library is not.
    NvrtcMissing,
    /// Driver and NVRTC are there but no CUDA toolkit directory (headers) was found.
    ToolkitMissing,
    /// A driver call failed; the text is the driver's error.
    DriverError(String),
    /// Not looked at: the device asked for was not a CUDA one (see `probe_for`).
    NotProbed,
}

/// One CUDA GPU as CUDA numbers it (after `CUDA_VISIBLE_DEVICES`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CudaGpu {
    pub ordinal: usize,
    pub name: String,
    pub total_memory_bytes: u64,
    pub free_memory_bytes: u64,
    /// (major, minor), e.g. (8, 0) for an A100.
    pub compute_capability: (u32, u32),
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CudaInventory {
    pub status: CudaStatus,
    /// The value of `CUDA_VISIBLE_DEVICES` when probed, if set.
    pub visible_devices: Option<String>,
    pub toolkit_path: Option<String>,
    pub gpus: Vec<CudaGpu>,
}

/// The kind of a WGPU adapter, as the driver reports it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AdapterKind {
    DiscreteGpu,
    IntegratedGpu,
    VirtualGpu,
    /// A software rasterizer (llvmpipe, lavapipe, SwiftShader): real, but slower than the CPU backend.
    Cpu,
    Other,
}

impl AdapterKind {
    /// Preference order among hardware adapters: lower is better.
    pub fn rank(self) -> u8 {
        match self {
            Self::DiscreteGpu => 0,
            Self::IntegratedGpu => 1,
            Self::VirtualGpu => 2,
            Self::Other => 3,
            Self::Cpu => 4,
        }
    }

    pub fn is_software(self) -> bool {
        self == Self::Cpu
    }
}

/// One WGPU adapter of the graphics API Burn uses on this platform (Vulkan on Linux, Metal on macOS).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WgpuAdapter {
    /// Position in the probe's list; what `wgpu:N` refers to.
    pub index: usize,
    /// Position among adapters of the same kind; what Burn's `WgpuDevice::DiscreteGpu(n)` etc. take.
    pub kind_index: usize,
    pub name: String,
    pub backend: String,
    pub kind: AdapterKind,
    pub driver: String,
    pub shader_f16: bool,
    pub software: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WgpuInventory {
    /// `None` when the probe ran; otherwise why it could not (e.g. not compiled).
    pub unavailable: Option<String>,
    pub adapters: Vec<WgpuAdapter>,
}

/// The host CPU and what the CPU backend (Burn's Flex) can do on it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CpuInfo {
    pub model: String,
    pub logical_cores: usize,
    pub physical_cores: Option<usize>,
    pub total_memory_bytes: u64,
    pub available_memory_bytes: u64,
    pub backend: String,
    pub supports_f16: bool,
    pub supports_bf16: bool,
}

impl CudaInventory {
    pub fn not_compiled() -> Self {
        Self { status: CudaStatus::NotCompiled, visible_devices: None, toolkit_path: None, gpus: Vec::new() }
    }
}

impl CudaStatus {
    /// One line for the user: why CUDA is not used (or `None` when it is ready).
    pub fn skip_reason(&self) -> Option<String> {
        match self {
            Self::Ready => None,
            Self::NotCompiled => Some("CUDA: this build has no `cuda` feature".into()),
            Self::DriverMissing => Some("CUDA: libcuda not found (no NVIDIA driver)".into()),
            Self::NvrtcMissing => {
                Some("CUDA: driver found but NVRTC missing (install the CUDA toolkit's libnvrtc)".into())
            }
            Self::ToolkitMissing => Some(
                "CUDA: driver and NVRTC found but no CUDA toolkit headers (set CUDA_PATH or install to /usr/local/cuda)"
                    .into(),
            ),
            Self::DriverError(e) => Some(format!("CUDA: driver error: {e}")),
            Self::NotProbed => Some("CUDA: not probed (another device was asked for)".into()),
        }
    }
}

/// Bytes as GiB with one decimal, for reports.
pub fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}
