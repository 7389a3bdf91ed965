//! Turning a [`DeviceSpec`] plus an [`Inventory`] into one device. Pure: no probing happens here.
//!
//! # The `auto` rule
//! 1. CUDA, if the driver, NVRTC and toolkit are all present: among the visible GPUs with at least
//!    `min_free_memory_mib` free, GPUs named in `prefer` come first (in list order); the rest are
//!    ranked by **score = free memory in GiB x architecture weight**, where the weight is 1.0 for
//!    compute capability >= 8.0 (bf16 tensor cores), 0.7 for 7.x (f16 tensor cores) and 0.4 below.
//!    Ties go to the lower ordinal.
//! 2. Else a hardware WGPU adapter: discrete before integrated before virtual, then list order.
//!    Software adapters (llvmpipe, lavapipe) are skipped unless `allow_software_wgpu` is set: the CPU
//!    backend is faster than a rasterizer emulating a GPU.
//! 3. Else the CPU (Burn's Flex backend).
//!
//! Every candidate that is passed over gets a one-line reason in [`Selection::skipped`].

use serde::{Deserialize, Serialize};

use crate::capabilities::{capabilities, Capabilities};
use crate::error::{DeviceError, Result};
use crate::inventory::{gib, AdapterKind, CudaGpu, Inventory, WgpuAdapter};
use crate::spec::DeviceSpec;

/// Knobs of the `auto` rule; part of experiment configs (`[device]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SelectionPolicy {
    /// GPU name fragments (case-insensitive, e.g. "A100") or CUDA ordinals ("1"), most preferred first.
    pub prefer: Vec<String>,
    /// GPUs with less free memory than this are skipped by `auto` and `cuda`.
    pub min_free_memory_mib: u64,
    /// Let `auto` pick a software WGPU adapter over the CPU backend.
    pub allow_software_wgpu: bool,
}

/// The concrete device chosen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "backend", rename_all = "snake_case")]
pub enum Target {
    /// A CUDA GPU.
    Cuda {
        /// CUDA device ordinal.
        ordinal: usize,
    },
    /// A WGPU adapter.
    Wgpu {
        /// Index among all adapters.
        index: usize,
        /// Its device type.
        kind: AdapterKind,
        /// Index among adapters of this type (what Burn's `WgpuDevice` takes).
        kind_index: usize,
    },
    /// The CPU backend.
    Cpu,
}

/// The outcome of selection, with the reasons for it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Selection {
    /// The spec that was resolved (for messages).
    pub spec: String,
    /// The chosen target.
    pub target: Target,
    /// Human name, e.g. "NVIDIA A100-SXM4-80GB (cuda:0)".
    pub name: String,
    /// Why this device won.
    pub reason: String,
    /// One line per candidate passed over.
    pub skipped: Vec<String>,
    /// What the target can compute in.
    pub capabilities: Capabilities,
}

/// The architecture weight of the documented CUDA score.
pub fn arch_weight(cc: (u32, u32)) -> f64 {
    match cc.0 {
        8.. => 1.0,
        7 => 0.7,
        _ => 0.4,
    }
}

/// The documented CUDA score: free GiB x architecture weight.
pub fn cuda_score(gpu: &CudaGpu) -> f64 {
    gpu.free_memory_bytes as f64 / (1u64 << 30) as f64 * arch_weight(gpu.compute_capability)
}

fn preference_rank(gpu: &CudaGpu, prefer: &[String]) -> usize {
    let name = gpu.name.to_ascii_lowercase();
    prefer
        .iter()
        .position(|p| {
            let p = p.trim().to_ascii_lowercase();
            p == gpu.ordinal.to_string() || (!p.is_empty() && name.contains(&p))
        })
        .unwrap_or(usize::MAX)
}

/// Pick the best CUDA GPU by preference, then score; records why the others lost.
fn best_cuda<'a>(gpus: &'a [CudaGpu], policy: &SelectionPolicy, skipped: &mut Vec<String>) -> Option<&'a CudaGpu> {
    let min_free = policy.min_free_memory_mib.saturating_mul(1 << 20);
    let mut eligible: Vec<&CudaGpu> = Vec::new();
    for gpu in gpus {
        if gpu.free_memory_bytes < min_free {
            skipped.push(format!(
                "cuda:{}: {} has {} free, below the minimum of {} MiB",
                gpu.ordinal,
                gpu.name,
                gib(gpu.free_memory_bytes),
                policy.min_free_memory_mib
            ));
        } else {
            eligible.push(gpu);
        }
    }
    eligible.sort_by(|a, b| {
        preference_rank(a, &policy.prefer)
            .cmp(&preference_rank(b, &policy.prefer))
            .then(cuda_score(b).total_cmp(&cuda_score(a)))
            .then(a.ordinal.cmp(&b.ordinal))
    });
    let best = eligible.first().copied();
    for other in eligible.iter().skip(1) {
        skipped.push(format!(
            "cuda:{}: {} ranked below cuda:{} (score {:.1} vs {:.1})",
            other.ordinal,
            other.name,
            best.map(|b| b.ordinal).unwrap_or_default(),
            cuda_score(other),
            best.map(cuda_score).unwrap_or_default()
        ));
    }
    best
}

fn cuda_selection(gpu: &CudaGpu, reason: String) -> (Target, String, String) {
    (Target::Cuda { ordinal: gpu.ordinal }, format!("{} (cuda:{})", gpu.name, gpu.ordinal), reason)
}

fn wgpu_selection(a: &WgpuAdapter, reason: String) -> (Target, String, String) {
    (
        Target::Wgpu { index: a.index, kind: a.kind, kind_index: a.kind_index },
        format!("{} ({}, wgpu:{})", a.name, a.backend, a.index),
        reason,
    )
}

fn best_wgpu(adapters: &[WgpuAdapter], allow_software: bool) -> Option<&WgpuAdapter> {
    adapters.iter().filter(|a| allow_software || !a.software).min_by_key(|a| (a.kind.rank(), a.index))
}

fn unavailable(spec: &DeviceSpec, reason: impl Into<String>) -> DeviceError {
    DeviceError::Unavailable { spec: spec.to_string(), reason: reason.into() }
}

fn list_gpus(gpus: &[CudaGpu]) -> String {
    if gpus.is_empty() {
        return "no CUDA GPU is visible".into();
    }
    let names: Vec<String> = gpus.iter().map(|g| format!("cuda:{} {}", g.ordinal, g.name)).collect();
    format!("this machine has {} CUDA GPU(s): {}", gpus.len(), names.join(", "))
}

/// Resolve `spec` against `inv`. Errors only for explicit requests that cannot be met; `auto`
/// always succeeds (the CPU is always there).
pub fn select(spec: &DeviceSpec, inv: &Inventory, policy: &SelectionPolicy) -> Result<Selection> {
    let mut skipped = Vec::new();
    let (target, name, reason) = match *spec {
        DeviceSpec::Cpu => (Target::Cpu, cpu_name(inv), "requested explicitly".to_string()),
        DeviceSpec::Cuda(index) => {
            if let Some(why) = inv.cuda.status.skip_reason() {
                return Err(unavailable(spec, why));
            }
            match index {
                Some(i) => {
                    let gpu = inv.cuda.gpus.iter().find(|g| g.ordinal == i).ok_or_else(|| {
                        unavailable(spec, format!("there is no cuda:{i}; {}", list_gpus(&inv.cuda.gpus)))
                    })?;
                    cuda_selection(gpu, "requested explicitly".into())
                }
                None => {
                    let gpu = best_cuda(&inv.cuda.gpus, policy, &mut skipped).ok_or_else(|| {
                        let mut why = list_gpus(&inv.cuda.gpus);
                        if !skipped.is_empty() {
                            why = format!("{why}; {}", skipped.join("; "));
                        }
                        unavailable(spec, why)
                    })?;
                    cuda_selection(gpu, format!("best CUDA GPU, score {:.1}", cuda_score(gpu)))
                }
            }
        }
        DeviceSpec::Wgpu(index) => {
            if let Some(why) = &inv.wgpu.unavailable {
                return Err(unavailable(spec, why.clone()));
            }
            match index {
                Some(i) => {
                    let a = inv.wgpu.adapters.get(i).ok_or_else(|| {
                        unavailable(spec, format!("there is no wgpu:{i}; {} adapter(s) found", inv.wgpu.adapters.len()))
                    })?;
                    wgpu_selection(a, "requested explicitly".into())
                }
                None => {
                    let a = best_wgpu(&inv.wgpu.adapters, true)
                        .ok_or_else(|| unavailable(spec, "no WGPU adapter found (no Vulkan/Metal driver)"))?;
                    wgpu_selection(a, format!("best WGPU adapter ({:?})", a.kind))
                }
            }
        }
        DeviceSpec::Auto => select_auto(inv, policy, &mut skipped),
    };
    let capabilities = capabilities(&target, inv);
    Ok(Selection { spec: spec.to_string(), target, name, reason, skipped, capabilities })
}

fn cpu_name(inv: &Inventory) -> String {
    format!("{} ({} threads, {} backend)", inv.cpu.model, inv.cpu.logical_cores, inv.cpu.backend)
}

fn select_auto(inv: &Inventory, policy: &SelectionPolicy, skipped: &mut Vec<String>) -> (Target, String, String) {
    match inv.cuda.status.skip_reason() {
        Some(why) => skipped.push(why),
        None if inv.cuda.gpus.is_empty() => {
            let hidden = inv.cuda.visible_devices.as_deref().map(|v| format!(" (CUDA_VISIBLE_DEVICES={v:?})"));
            skipped.push(format!("CUDA: driver ready but no GPU visible{}", hidden.unwrap_or_default()));
        }
        None => {
            if let Some(gpu) = best_cuda(&inv.cuda.gpus, policy, skipped) {
                return cuda_selection(gpu, format!("best CUDA GPU, score {:.1}", cuda_score(gpu)));
            }
        }
    }
    if let Some(why) = &inv.wgpu.unavailable {
        skipped.push(why.clone());
    } else if let Some(a) = best_wgpu(&inv.wgpu.adapters, policy.allow_software_wgpu) {
        let why = if a.software { "software WGPU adapter allowed by policy" } else { "hardware WGPU adapter" };
        return wgpu_selection(a, format!("{why} ({:?})", a.kind));
    } else if inv.wgpu.adapters.is_empty() {
        skipped.push("wgpu: no adapter found".into());
    } else {
        let names: Vec<&str> = inv.wgpu.adapters.iter().map(|a| a.name.as_str()).collect();
        skipped.push(format!("wgpu: only a software adapter ({}); the CPU backend is faster", names.join(", ")));
    }
    (Target::Cpu, cpu_name(inv), "no usable GPU; CPU backend".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::Precision;
    use crate::inventory::{CpuInfo, CudaInventory, CudaStatus, WgpuInventory};

    const GIB: u64 = 1 << 30;

    fn gpu(ordinal: usize, name: &str, free_gib: u64, cc: (u32, u32)) -> CudaGpu {
        CudaGpu {
            ordinal,
            name: name.into(),
            total_memory_bytes: 80 * GIB,
            free_memory_bytes: free_gib * GIB,
            compute_capability: cc,
        }
    }

    fn adapter(index: usize, name: &str, kind: AdapterKind) -> WgpuAdapter {
        WgpuAdapter {
            index,
            kind_index: 0,
            name: name.into(),
            backend: "Vulkan".into(),
            kind,
            driver: String::new(),
            shader_f16: kind != AdapterKind::Cpu,
            software: kind.is_software(),
        }
    }

    fn inventory(status: CudaStatus, gpus: Vec<CudaGpu>, adapters: Vec<WgpuAdapter>) -> Inventory {
        Inventory {
            cuda: CudaInventory { status, visible_devices: None, toolkit_path: None, gpus },
            wgpu: WgpuInventory { unavailable: None, adapters },
            cpu: CpuInfo {
                model: "Test CPU".into(),
                logical_cores: 2,
                physical_cores: Some(2),
                total_memory_bytes: 24 * GIB,
                available_memory_bytes: 20 * GIB,
                backend: "flex".into(),
                supports_f16: true,
                supports_bf16: true,
            },
        }
    }

    fn this_machine() -> Inventory {
        inventory(
            CudaStatus::DriverMissing,
            vec![],
            vec![adapter(0, "llvmpipe (LLVM 15.0.6, 256 bits)", AdapterKind::Cpu)],
        )
    }

    #[test]
    fn no_gpu_machine_falls_back_to_cpu_with_reasons() {
        let s = select(&DeviceSpec::Auto, &this_machine(), &SelectionPolicy::default()).unwrap();
        assert_eq!(s.target, Target::Cpu);
        assert_eq!(s.skipped.len(), 2, "{:?}", s.skipped);
        assert_eq!(s.skipped[0], "CUDA: libcuda not found (no NVIDIA driver)");
        assert!(s.skipped[1].starts_with("wgpu: only a software adapter (llvmpipe"), "{}", s.skipped[1]);
        assert_eq!(s.capabilities.amp, Precision::F32);
    }

    #[test]
    fn software_adapter_allowed_by_policy_or_explicit_request() {
        let policy = SelectionPolicy { allow_software_wgpu: true, ..Default::default() };
        let s = select(&DeviceSpec::Auto, &this_machine(), &policy).unwrap();
        assert_eq!(s.target, Target::Wgpu { index: 0, kind: AdapterKind::Cpu, kind_index: 0 });
        let s = select(&DeviceSpec::Wgpu(None), &this_machine(), &SelectionPolicy::default()).unwrap();
        assert!(matches!(s.target, Target::Wgpu { index: 0, .. }));
    }

    #[test]
    fn nvrtc_missing_is_reported_and_skipped() {
        let inv = inventory(CudaStatus::NvrtcMissing, vec![gpu(0, "NVIDIA A100", 70, (8, 0))], vec![]);
        let s = select(&DeviceSpec::Auto, &inv, &SelectionPolicy::default()).unwrap();
        assert_eq!(s.target, Target::Cpu);
        assert_eq!(s.skipped[0], "CUDA: driver found but NVRTC missing (install the CUDA toolkit's libnvrtc)");
        let err = select(&DeviceSpec::Cuda(Some(0)), &inv, &SelectionPolicy::default()).unwrap_err().to_string();
        assert!(err.contains("NVRTC missing"), "{err}");
    }

    #[test]
    fn heterogeneous_two_gpu_box_picks_by_score() {
        // A V100 with more free memory loses to an A100 with less: 30 x 1.0 > 32 x 0.7.
        let inv = inventory(
            CudaStatus::Ready,
            vec![gpu(0, "Tesla V100-SXM2-32GB", 32, (7, 0)), gpu(1, "NVIDIA A100-SXM4-40GB", 30, (8, 0))],
            vec![adapter(0, "NVIDIA A100", AdapterKind::DiscreteGpu)],
        );
        let s = select(&DeviceSpec::Auto, &inv, &SelectionPolicy::default()).unwrap();
        assert_eq!(s.target, Target::Cuda { ordinal: 1 });
        assert_eq!(s.name, "NVIDIA A100-SXM4-40GB (cuda:1)");
        assert_eq!(s.capabilities.amp, Precision::Bf16);
        assert_eq!(s.skipped.len(), 1);
        assert!(
            s.skipped[0].starts_with("cuda:0: Tesla V100-SXM2-32GB ranked below cuda:1 (score 22.4 vs 30.0)"),
            "{}",
            s.skipped[0]
        );
    }

    #[test]
    fn same_arch_prefers_more_free_memory_and_ties_go_to_lower_ordinal() {
        let inv = inventory(
            CudaStatus::Ready,
            vec![gpu(0, "RTX 4090", 5, (8, 9)), gpu(1, "RTX 4090", 20, (8, 9)), gpu(2, "RTX 4090", 20, (8, 9))],
            vec![],
        );
        let s = select(&DeviceSpec::Auto, &inv, &SelectionPolicy::default()).unwrap();
        assert_eq!(s.target, Target::Cuda { ordinal: 1 });
    }

    #[test]
    fn too_little_memory_skips_a_gpu_and_can_leave_none() {
        let inv = inventory(
            CudaStatus::Ready,
            vec![gpu(0, "NVIDIA A100", 1, (8, 0)), gpu(1, "Tesla T4", 14, (7, 5))],
            vec![],
        );
        let policy = SelectionPolicy { min_free_memory_mib: 4096, ..Default::default() };
        let s = select(&DeviceSpec::Auto, &inv, &policy).unwrap();
        assert_eq!(s.target, Target::Cuda { ordinal: 1 });
        assert_eq!(s.capabilities.amp, Precision::F16);
        assert!(s.skipped[0].contains("below the minimum of 4096 MiB"), "{:?}", s.skipped);

        let policy = SelectionPolicy { min_free_memory_mib: 32_000, ..Default::default() };
        let s = select(&DeviceSpec::Auto, &inv, &policy).unwrap();
        assert_eq!(s.target, Target::Cpu);
        assert_eq!(s.skipped.iter().filter(|r| r.contains("below the minimum")).count(), 2);
        let err = select(&DeviceSpec::Cuda(None), &inv, &policy).unwrap_err().to_string();
        assert!(err.contains("below the minimum"), "{err}");
    }

    #[test]
    fn preference_list_overrides_score() {
        let inv = inventory(
            CudaStatus::Ready,
            vec![gpu(0, "NVIDIA H100", 70, (9, 0)), gpu(1, "NVIDIA GeForce RTX 3060", 10, (8, 6))],
            vec![],
        );
        let policy = SelectionPolicy { prefer: vec!["rtx 3060".into()], ..Default::default() };
        assert_eq!(select(&DeviceSpec::Auto, &inv, &policy).unwrap().target, Target::Cuda { ordinal: 1 });
        let policy = SelectionPolicy { prefer: vec!["a100".into(), "0".into()], ..Default::default() };
        assert_eq!(select(&DeviceSpec::Auto, &inv, &policy).unwrap().target, Target::Cuda { ordinal: 0 });
    }

    #[test]
    fn hardware_wgpu_beats_cpu_and_discrete_beats_integrated() {
        let inv = inventory(
            CudaStatus::DriverMissing,
            vec![],
            vec![
                adapter(0, "llvmpipe", AdapterKind::Cpu),
                adapter(1, "Intel Iris Xe", AdapterKind::IntegratedGpu),
                adapter(2, "AMD Radeon RX 7900", AdapterKind::DiscreteGpu),
            ],
        );
        let s = select(&DeviceSpec::Auto, &inv, &SelectionPolicy::default()).unwrap();
        assert!(matches!(s.target, Target::Wgpu { index: 2, kind: AdapterKind::DiscreteGpu, .. }));
        assert_eq!(s.capabilities.amp, Precision::F16);
    }

    #[test]
    fn explicit_missing_devices_are_errors_not_fallbacks() {
        let inv = inventory(CudaStatus::Ready, vec![gpu(0, "NVIDIA L4", 20, (8, 9))], vec![]);
        let err = select(&DeviceSpec::Cuda(Some(7)), &inv, &SelectionPolicy::default()).unwrap_err().to_string();
        assert_eq!(
            err,
            "device `cuda:7` is not available: there is no cuda:7; this machine has 1 CUDA GPU(s): cuda:0 NVIDIA L4"
        );
        let err = select(&DeviceSpec::Wgpu(Some(3)), &inv, &SelectionPolicy::default()).unwrap_err().to_string();
        assert!(err.contains("there is no wgpu:3; 0 adapter(s) found"), "{err}");
        let err =
            select(&DeviceSpec::Cuda(None), &this_machine(), &SelectionPolicy::default()).unwrap_err().to_string();
        assert!(err.contains("libcuda not found"), "{err}");
    }

    #[test]
    fn cuda_visible_devices_hiding_everything_is_explained() {
        let mut inv = inventory(CudaStatus::Ready, vec![], vec![]);
        inv.cuda.visible_devices = Some(String::new());
        let s = select(&DeviceSpec::Auto, &inv, &SelectionPolicy::default()).unwrap();
        assert_eq!(s.target, Target::Cpu);
        assert_eq!(s.skipped[0], "CUDA: driver ready but no GPU visible (CUDA_VISIBLE_DEVICES=\"\")");
    }
}
