//! What a probe found on this machine. Plain data: the selection logic is a pure function of it,
//! so tests build fabricated inventories (multi-GPU boxes, missing drivers) by hand.

use serde::{Deserialize, Serialize};

/// Everything the probes found.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Inventory {
    /// CUDA driver, toolkit and GPUs.
    pub cuda: CudaInventory,
    /// WGPU adapters.
    pub wgpu: WgpuInventory,
    /// The host CPU and memory.
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
    /// CUDA device ordinal.
    pub ordinal: usize,
    /// Device name.
    pub name: String,
    /// Total device memory.
    pub total_memory_bytes: u64,
    /// Free device memory at probe time.
    pub free_memory_bytes: u64,
    /// (major, minor), e.g. (8, 0) for an A100.
    pub compute_capability: (u32, u32),
}

/// What the CUDA probe found.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CudaInventory {
    /// Whether CUDA is usable, or which piece is missing.
    pub status: CudaStatus,
    /// The value of `CUDA_VISIBLE_DEVICES` when probed, if set.
    pub visible_devices: Option<String>,
    /// The CUDA toolkit directory NVRTC compiles against.
    pub toolkit_path: Option<String>,
    /// Usable GPUs.
    pub gpus: Vec<CudaGpu>,
}

/// The kind of a WGPU adapter, as the driver reports it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AdapterKind {
    /// A discrete GPU.
    DiscreteGpu,
    /// A GPU sharing memory with the CPU.
    IntegratedGpu,
    /// A virtualized GPU.
    VirtualGpu,
    /// A software rasterizer (llvmpipe, lavapipe, SwiftShader): real, but slower than the CPU backend.
    Cpu,
    /// Anything else the driver reports.
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

    /// Whether this kind is a software renderer.
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
    /// Adapter name.
    pub name: String,
    /// Graphics API (Vulkan, Metal, ...).
    pub backend: String,
    /// Device type.
    pub kind: AdapterKind,
    /// Driver name and version.
    pub driver: String,
    /// Whether it supports `SHADER_F16`.
    pub shader_f16: bool,
    /// Whether it is a software renderer (llvmpipe, lavapipe).
    pub software: bool,
}

/// What the WGPU probe found.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WgpuInventory {
    /// `None` when the probe ran; otherwise why it could not (e.g. not compiled).
    pub unavailable: Option<String>,
    /// Adapters of the graphics API Burn uses.
    pub adapters: Vec<WgpuAdapter>,
}

/// The host CPU and what the CPU backend (Burn's Flex) can do on it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CpuInfo {
    /// CPU model name.
    pub model: String,
    /// Logical cores (threads).
    pub logical_cores: usize,
    /// Physical cores, when known.
    pub physical_cores: Option<usize>,
    /// Total host memory.
    pub total_memory_bytes: u64,
    /// Available host memory at probe time.
    pub available_memory_bytes: u64,
    /// The CPU backend (`flex`).
    pub backend: String,
    /// Whether the CPU backend computes in f16.
    pub supports_f16: bool,
    /// Whether the CPU backend computes in bf16.
    pub supports_bf16: bool,
}

impl CudaInventory {
    /// The inventory of a build without this backend.
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
