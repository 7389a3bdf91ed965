//! The `device` program, run as a user runs it. (The library's tests are in
//! `crates/device/tests/device.rs`, built into the `suite` test binary.)

#[test]
fn cli_list_json_reports_the_auto_choice() {
    // Headless: no XDG_RUNTIME_DIR. The binary gives the Vulkan loader a private one, so the
    // WGPU probe prints nothing of its own on stderr.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_device"))
        .args(["list", "--json"])
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("XDG_RUNTIME_DIR"), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["inventory"]["cpu"]["logical_cores"].as_u64().unwrap() >= 1);
    assert!(v["auto"]["target"]["backend"].is_string());
    assert!(v["auto"]["capabilities"]["amp"].is_string());

    let out =
        std::process::Command::new(env!("CARGO_BIN_EXE_device")).args(["select", "--device", "tpu"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown device kind `tpu`"), "{err}");
}

/// A kernel cache damaged on disk costs a recompilation and one warning, never the run: without
/// the repair, cubecl hands wgpu the damaged SPIR-V below and wgpu's validation panics.
#[test]
fn a_damaged_kernel_cache_is_repaired_with_a_warning_and_the_run_goes_on() {
    let cache = tempfile::tempdir().unwrap();
    let check = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_device"))
            .args(["check", "--device", "wgpu", "--size", "64"])
            .env("SIGNFLOW_KERNEL_CACHE", cache.path())
            .env_remove("XDG_RUNTIME_DIR")
            .output()
            .unwrap()
    };
    let first = check();
    if !first.status.success() {
        let err = String::from_utf8_lossy(&first.stderr);
        assert!(std::env::var("SIGNFLOW_REQUIRE_WGPU").is_err(), "SIGNFLOW_REQUIRE_WGPU is set: {err}");
        eprintln!("skipped: no WGPU device ({err})");
        return;
    }
    // The second run seals what the first compiled, without a word.
    let second = check();
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success() && !err.contains("kernel cache"), "{err}");
    let dir = cache.path().join(device::kernel_cache::KERNELS_DIR).join("vulkan/0.10.0/spirv");
    let chunk = dir.join("chunk0.cbor");
    let sums = std::fs::read_to_string(dir.join("chunk0.cbor.sums")).unwrap();
    let entries: Vec<(usize, usize)> = sums
        .lines()
        .map(|l| {
            let f: Vec<usize> = l.split(' ').take(2).map(|x| x.parse().unwrap()).collect();
            (f[0], f[0] + f[1])
        })
        .collect();
    assert!(!entries.is_empty(), "{sums}");

    // In every module, the first instruction (OpCapability, word 0x00020011, CBOR `1a 00 02 00
    // 11`) now claims 0x7fff words; a torn write at the end; a table of contents naming a chunk
    // that is not there (cubecl panics on it).
    let mut bytes = std::fs::read(&chunk).unwrap();
    for &(start, end) in &entries {
        let module = &bytes[start..end];
        let magic = module.windows(5).position(|w| w == [0x1a, 0x07, 0x23, 0x02, 0x03]).unwrap();
        let first = magic + module[magic..].windows(5).position(|w| w == [0x1a, 0x00, 0x02, 0x00, 0x11]).unwrap();
        bytes[start + first + 1] = 0x7f;
        bytes[start + first + 2] = 0xff;
    }
    bytes.extend_from_within(..entries[0].1 / 2);
    std::fs::write(&chunk, &bytes).unwrap();
    let toc = dir.join("toc.json.log");
    let mut lines = std::fs::read_to_string(&toc).unwrap();
    lines.push_str("{\"key\":[1,2],\"value\":\"chunk9.cbor\"}\n");
    std::fs::write(&toc, lines).unwrap();

    let third = check();
    let (out, err) = (String::from_utf8_lossy(&third.stdout), String::from_utf8_lossy(&third.stderr));
    assert!(third.status.success(), "{err}");
    assert!(out.contains("max abs error 0e0"), "{out}");
    let n = entries.len() + 1;
    assert!(err.contains(&format!("dropped {n} damaged compiled kernels from {}", chunk.display())), "{err}");
    assert!(err.contains("table-of-contents entr"), "{err}");
}
