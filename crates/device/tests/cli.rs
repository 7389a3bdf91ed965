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
