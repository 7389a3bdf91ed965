//! Architecture invariant (ARCHITECTURE.md, `crates/infer`): programs on `infer` compile none of
//! Burn's (or cubecl's) generic code themselves. Release builds share no generics between
//! crates, so a program that drops a Burn value or calls a generic Burn function compiles its own
//! copy of the backends' code (minutes per program instead of a second).
//!
//! The test compiles each program that uses `infer` (the examples and the `infer` binary) once
//! more, to an object file only, against the rlibs of this very build, with symbol mangling v0
//! (which spells out every generic argument), and lists the symbols the program defines: none may
//! name a Burn or cubecl crate, except the drop and `Debug` of an `infer::held::Held` (a call
//! through its vtable each, whose names carry the held type). A control program that takes a
//! pointer to one generic Burn function must be caught, so the check itself can fail.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/release/deps`, where this test binary and the rlibs it was built with live.
fn deps_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent().expect("the deps directory").to_path_buf()
}

/// The most recently built rlib of crate `name` in `deps` (the one this build made).
fn newest_rlib(deps: &Path, name: &str) -> Option<PathBuf> {
    let prefix = format!("lib{name}-");
    std::fs::read_dir(deps)
        .ok()?
        .flatten()
        .filter(|e| {
            let file = e.file_name().to_string_lossy().into_owned();
            file.starts_with(&prefix) && file.ends_with(".rlib")
        })
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .map(|e| e.path())
}

/// The crate names of a manifest's `[dependencies]` (`foo-bar` as `foo_bar`).
fn dependency_names(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut inside = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == "[dependencies]";
        } else if inside && !line.is_empty() && !line.starts_with('#') {
            let key = line.split(['.', '=', ' ']).next().unwrap_or_default();
            names.push(key.replace('-', "_"));
        }
    }
    names
}

/// The symbols `source` (a program's main file) defines when compiled as this build compiled
/// it, that name Burn or cubecl code.
fn burn_symbols(source: &Path, out: &Path) -> Vec<String> {
    let deps = deps_dir();
    let manifest = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    let mut crates = dependency_names(&manifest);
    crates.push("infer".into());
    let object = out.join(format!("{}.o", source.file_stem().unwrap().to_string_lossy()));
    let mut rustc = Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()));
    rustc.args(["--edition", "2021", "--crate-type", "bin", "--emit=obj", "-C", "opt-level=3"]);
    rustc.args(["-C", "symbol-mangling-version=v0", "-o"]).arg(&object).arg(source);
    rustc.arg("-L").arg(format!("dependency={}", deps.display()));
    // What cargo gives the package's programs at compile time (clap's `version` reads it).
    for (key, value) in [
        ("CARGO_PKG_NAME", env!("CARGO_PKG_NAME")),
        ("CARGO_PKG_VERSION", env!("CARGO_PKG_VERSION")),
        ("CARGO_PKG_AUTHORS", env!("CARGO_PKG_AUTHORS")),
        ("CARGO_PKG_DESCRIPTION", env!("CARGO_PKG_DESCRIPTION")),
    ] {
        rustc.env(key, value);
    }
    for name in &crates {
        let rlib = newest_rlib(&deps, name).unwrap_or_else(|| panic!("no lib{name}-*.rlib in {}", deps.display()));
        rustc.arg("--extern").arg(format!("{name}={}", rlib.display()));
    }
    let compiled = rustc.output().expect("rustc runs");
    assert!(
        compiled.status.success(),
        "{}: rustc failed:\n{}",
        source.display(),
        String::from_utf8_lossy(&compiled.stderr)
    );
    let listed = Command::new("nm").arg("--defined-only").arg(&object).output().expect("nm (binutils) runs");
    assert!(listed.status.success(), "nm {}: {}", object.display(), String::from_utf8_lossy(&listed.stderr));
    String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .filter(|symbol| symbol.contains("burn") || symbol.contains("cubecl"))
        .filter(|symbol| !held_trampoline(symbol))
        .map(str::to_string)
        .collect()
}

/// Whether `symbol` (v0 mangling) is the drop or the `Debug::fmt` of an `infer::held::Held`:
/// one call through the held value's vtable each, named with the held (Burn) type but holding
/// none of its code.
fn held_trampoline(symbol: &str) -> bool {
    // `_R` `I` `Nv` `Nt` `Cs<hash>_4core` `3ptr` `13drop_in_place` `I` `NtNtCs<hash>_5infer4held4Held`...
    fn after_hash(rest: &str) -> &str {
        rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric())
    }
    let drop = symbol.starts_with("_RINvNtCs")
        && symbol
            .split_once("_4core3ptr13drop_in_placeINtNtCs")
            .is_some_and(|(_, rest)| after_hash(rest).starts_with("_5infer4held4Held"));
    // `_R` `Nv` `X<impl>` `NtCs<hash>_5infer4held` `INtB<back>_4Held<T>` `...Debug` `3fmt`...
    let debug = symbol.starts_with("_RNvXs")
        && symbol
            .split_once("_5infer4heldINtB")
            .is_some_and(|(_, rest)| after_hash(rest).starts_with("_4Held") && rest.contains("5Debug3fmt"));
    drop || debug
}

#[test]
fn programs_on_infer_compile_no_burn_code() {
    let tmp = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let programs = [
        "../../examples/classify_dir.rs",
        "../../examples/live_stream.rs",
        "../../examples/stream_soak.rs",
        "src/main.rs",
    ];
    for program in programs {
        let found = burn_symbols(&root.join(program), tmp.path());
        assert!(
            found.is_empty(),
            "{program} compiles {} Burn/cubecl functions of its own, e.g. {:?}: keep Burn types and generic calls inside `infer` (ARCHITECTURE.md, crates/infer)",
            found.len(),
            &found[..found.len().min(3)]
        );
    }

    // The exception is exactly Held's two trampolines (symbols as live_stream's object names
    // them, with this build's crate hashes), not the drop of the model they hold.
    let held = "_RNvXs2_NtCsfZsGcXesRDc_5infer4heldINtB5_4HeldINtNtCsauNJnMR9N51_6models9precision12ComputeModelNtNtCs81gcmLqZK8z_13burn_dispatch7backend8DispatchEENtNtCsgEmfK2I1SDS_4core3fmt5Debug3fmtCscuhxXoiv8sA_11live_stream";
    let dropped = "_RINvNtCsgEmfK2I1SDS_4core3ptr13drop_in_placeINtNtCsfZsGcXesRDc_5infer4held4HeldINtNtCsauNJnMR9N51_6models9precision12ComputeModelNtNtCs81gcmLqZK8z_13burn_dispatch7backend8DispatchEEECscuhxXoiv8sA_11live_stream";
    let model = "_RINvNtCsgEmfK2I1SDS_4core3ptr13drop_in_placeINtNtCsauNJnMR9N51_6models9precision12ComputeModelNtNtCs81gcmLqZK8z_13burn_dispatch7backend8DispatchEECscuhxXoiv8sA_11live_stream";
    assert!(held_trampoline(held) && held_trampoline(dropped) && !held_trampoline(model));

    // The control: one pointer to a generic Burn function is found.
    let control = tmp.path().join("control.rs");
    std::fs::write(
        &control,
        "fn main() {\n    let new: fn([usize; 2]) -> burn::tensor::Shape = burn::tensor::Shape::new::<2>;\n    println!(\"{:?}\", std::hint::black_box(new)([1, 2]));\n}\n",
    )
    .unwrap();
    let found = burn_symbols(&control, tmp.path());
    assert!(!found.is_empty(), "the control program's Burn function was not found: the check is blind");
}
