//! Integration tests against the real machine: real probes, real Burn devices, real numbers.

use device::{DeviceSpec, SelectionPolicy, Target};

#[test]
fn probe_never_panics_and_auto_always_resolves() {
    let inv = device::probe();
    let sel = device::select(&DeviceSpec::Auto, &inv, &SelectionPolicy::default()).unwrap();
    // On a machine without a CUDA driver, auto must say why CUDA was skipped.
    if inv.cuda.status != device::inventory::CudaStatus::Ready {
        assert!(sel.skipped.iter().any(|s| s.starts_with("CUDA:")), "{:?}", sel.skipped);
    }
    assert!(inv.cpu.logical_cores >= 1);
    assert!(inv.cpu.total_memory_bytes > 0);
    // Flex supports both half types; the capability table must reflect what the backend says.
    assert!(inv.cpu.supports_f16 && inv.cpu.supports_bf16);
}

#[test]
fn auto_device_computes_correct_numbers() {
    let selected = device::resolve(&DeviceSpec::Auto, &SelectionPolicy::default()).unwrap();
    let err = device::matmul_check(&selected.device, 128).unwrap();
    assert!(err < 1e-3, "max abs error {err} on {}", selected.selection.name);

    use burn::tensor::Tensor;
    let x = Tensor::<device::Backend, 1>::from_floats([1.0, -2.0, 3.5], &selected.device);
    let y = (x.clone() * x).sum().into_scalar();
    assert_eq!(y, 1.0 + 4.0 + 12.25);
}

#[test]
fn cpu_device_has_no_pool_stats_and_empty_cache_is_reported_as_noop() {
    let selected = device::resolve(&DeviceSpec::Cpu, &SelectionPolicy::default()).unwrap();
    assert_eq!(selected.selection.target, Target::Cpu);
    assert_eq!(device::backend_name(&selected.device), "cpu");
    assert!(device::memory_stats(&selected.device).is_none());
    assert!(!device::empty_cache(&selected.device));
    assert!(device::MemoryGuard::new(&selected.device, "cpu work").finish().is_none());
}

/// Resolving an explicit device probes only that kind: `cpu` never touches CUDA or WGPU, and
/// `wgpu` sees the same adapters as the full probe.
#[test]
fn probe_for_looks_only_at_what_the_spec_needs() {
    use device::inventory::CudaStatus;
    let cpu = device::probe_for(&DeviceSpec::Cpu);
    assert_eq!(cpu.cuda.status, CudaStatus::NotProbed);
    assert!(cpu.wgpu.adapters.is_empty());
    assert!(cpu.wgpu.unavailable.as_deref().is_some_and(|w| w.contains("not probed")), "{:?}", cpu.wgpu);
    assert!(cpu.cpu.logical_cores >= 1);
    let sel = device::select(&DeviceSpec::Cpu, &cpu, &SelectionPolicy::default()).unwrap();
    assert_eq!(sel.target, Target::Cpu);
    // A CUDA request against an inventory that skipped CUDA says so instead of "no driver".
    let err = device::select(&DeviceSpec::Cuda(None), &cpu, &SelectionPolicy::default()).unwrap_err();
    assert!(err.to_string().contains("not probed"), "{err}");

    let full = device::probe();
    let wgpu = device::probe_for(&DeviceSpec::Wgpu(None));
    assert_eq!(wgpu.cuda.status, CudaStatus::NotProbed);
    let names = |inv: &device::Inventory| inv.wgpu.adapters.iter().map(|a| a.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&wgpu), names(&full));
    let cuda = device::probe_for(&DeviceSpec::Cuda(None));
    assert_eq!(cuda.cuda.status, full.cuda.status);
    assert!(cuda.wgpu.adapters.is_empty());
}

/// `--device wgpu` on whatever adapter exists, software Vulkan (llvmpipe) included. CI installs
/// mesa-vulkan-drivers and sets SIGNFLOW_REQUIRE_WGPU=1 so a missing adapter fails there.
#[test]
fn explicit_wgpu_runs_a_real_tensor_op_and_reports_memory() {
    let inv = device::probe();
    if inv.wgpu.adapters.is_empty() {
        assert!(
            std::env::var("SIGNFLOW_REQUIRE_WGPU").is_err(),
            "SIGNFLOW_REQUIRE_WGPU is set but no WGPU adapter was found: {:?}",
            inv.wgpu
        );
        eprintln!("no WGPU adapter on this machine; install mesa-vulkan-drivers libvulkan1 to run this test");
        return;
    }
    let selected = device::resolve_with(&DeviceSpec::Wgpu(None), &SelectionPolicy::default(), &inv).unwrap();
    assert_eq!(device::backend_name(&selected.device), "wgpu");
    let err = device::matmul_check(&selected.device, 64).unwrap();
    assert!(err < 1e-3, "max abs error {err} on {}", selected.selection.name);

    let guard = device::MemoryGuard::new(&selected.device, "wgpu matmul");
    let keep = burn::tensor::Tensor::<device::Backend, 2>::from_data(
        burn::tensor::TensorData::new(vec![1.0f32; 256 * 256], [256, 256]),
        &selected.device,
    );
    let delta = guard.finish().expect("the wgpu backend keeps pool statistics");
    assert!(delta.after.bytes_in_use >= delta.before.bytes_in_use + 256 * 256 * 4, "{delta:?}");
    drop(keep);
    // Allocate, drop, empty: the pool gives the freed pages back, so reserved strictly falls.
    let big = burn::tensor::Tensor::<device::Backend, 2>::ones([2048, 4096], &selected.device); // 32 MiB
    let held = device::memory_stats(&selected.device).unwrap();
    drop(big);
    let cached = device::memory_stats(&selected.device).unwrap();
    assert!(cached.bytes_in_use + 32 * 1048576 <= held.bytes_in_use, "{held:?} -> {cached:?}");
    assert_eq!(cached.bytes_reserved, held.bytes_reserved, "dropping keeps the pages cached");
    assert!(device::empty_cache(&selected.device));
    let emptied = device::memory_stats(&selected.device).unwrap();
    assert!(emptied.bytes_reserved < cached.bytes_reserved, "empty_cache: {cached:?} -> {emptied:?}");
    eprintln!(
        "reserved {:.1} MiB -> {:.1} MiB after empty_cache",
        cached.bytes_reserved as f64 / 1048576.0,
        emptied.bytes_reserved as f64 / 1048576.0
    );
}

#[test]
fn explicit_devices_that_do_not_exist_are_errors() {
    let inv = device::probe();
    let err = device::select(&DeviceSpec::Cuda(Some(7)), &inv, &SelectionPolicy::default()).unwrap_err();
    assert!(err.to_string().starts_with("device `cuda:7` is not available: "), "{err}");
    let err = device::select(&DeviceSpec::Wgpu(Some(99)), &inv, &SelectionPolicy::default()).unwrap_err();
    assert!(err.to_string().contains("wgpu:99"), "{err}");
}

#[test]
fn monitor_without_nvml_is_unavailable_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("gpu.csv");
    let mon = device::GpuMonitor::start(std::time::Duration::from_millis(20), Some(&csv)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let available = mon.is_available();
    let summary = mon.stop();
    assert_eq!(summary.available, available);
    if available {
        let text = std::fs::read_to_string(&csv).unwrap();
        assert!(text.starts_with(device::monitor::CSV_HEADER));
        assert!(summary.samples >= 1);
    } else {
        assert!(summary.reason.unwrap().contains("NVML"));
        assert!(!csv.exists());
    }
}
