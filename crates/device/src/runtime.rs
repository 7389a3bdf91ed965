//! cubecl's settings for this process: where autotune results and compiled kernels persist, and
//! whether kernel launches and compilations are logged for [`crate::counters`].
//!
//! cubecl (the runtime under Burn's CUDA and WGPU backends) reads its settings once, when the
//! first GPU-class client starts, from a `cubecl.toml` it finds above the working directory, and
//! panics on a malformed one; its autotune results go to the `target/` directory of the nearest
//! `Cargo.toml` above the working directory, so runs started from different directories tune the
//! same kernels again. The binaries call [`configure`] first, so every run of a user shares one
//! cache directory (printed by the trainer) and no file in the working directory is read;
//! cubecl's environment variables (`CUBECL_DEBUG_LOG=stderr`, `CUBECL_AUTOTUNE_LEVEL`) still apply.
//!
//! Architecture Invariant: the settings are set once per process, before any device is used;
//! a later call returns the first call's result.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Environment variable naming the kernel cache directory.
pub const CACHE_ENV: &str = "SIGNFLOW_KERNEL_CACHE";

/// What [`configure`] set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeSetup {
    /// The cache directory in use: autotune results under `autotune/`, compiled kernels (PTX on
    /// CUDA, SPIR-V on Vulkan) under [`kernels_dir_name`] (cubecl keys them by kernel type,
    /// launch settings and its own version, not by source, so a build whose kernels changed
    /// must not reuse them).
    pub cache_dir: Option<PathBuf>,
    /// The file kernel launches and compilations are appended to, when counting.
    pub count_log: Option<PathBuf>,
    /// Why a requested setting could not be applied (the run goes on with cubecl's defaults),
    /// or what was repaired in the cache ([`crate::kernel_cache::repair`]); one line each.
    pub warning: Option<String>,
}

static SETUP: OnceLock<RuntimeSetup> = OnceLock::new();

/// The default cache directory: `$SIGNFLOW_KERNEL_CACHE`, else `$XDG_CACHE_HOME/signflow/kernels`,
/// else `~/.cache/signflow/kernels`.
pub fn default_cache_dir() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var(CACHE_ENV)
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("signflow").join("kernels")))
        .or_else(|| var("HOME").map(|d| d.join(".cache").join("signflow").join("kernels")))
}

/// Set cubecl's settings for this process: the cache directory (`None`: [`default_cache_dir`])
/// and, with `count_log`, one appended line per kernel launch and per kernel compilation (read
/// by [`crate::counters::WorkCounter`]). Call before any device is used; only the first call
/// of a process has an effect, later ones return its result.
pub fn configure(cache_dir: Option<&Path>, count_log: Option<&Path>) -> &'static RuntimeSetup {
    SETUP.get_or_init(|| apply(cache_dir.map(Path::to_path_buf).or_else(default_cache_dir), count_log))
}

/// What [`configure`] set, if it was called.
pub fn setup() -> Option<&'static RuntimeSetup> {
    SETUP.get()
}

#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn apply(cache_dir: Option<PathBuf>, count_log: Option<&Path>) -> RuntimeSetup {
    use cubecl::config::cache::CacheConfig;
    use cubecl::config::compilation::CompilationLogLevel;
    use cubecl::config::profiling::ProfilingLogLevel;
    use cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};

    if CubeClRuntimeConfig::storage().lock().is_some() {
        return RuntimeSetup {
            cache_dir: None,
            count_log: None,
            warning: Some("cubecl's settings were read before SignFlow could set them; using cubecl's".into()),
        };
    }
    let mut warning = None;
    let cache_dir = cache_dir.and_then(|dir| match usable_dir(&dir) {
        Ok(()) => Some(dir),
        Err(e) => {
            warning =
                Some(format!("kernel cache {} is not usable ({e}); caching under cubecl's default", dir.display()));
            None
        }
    });
    // cubecl's environment variables (CUBECL_DEBUG_LOG, CUBECL_AUTOTUNE_LEVEL, ...) still apply.
    if let Some(dir) = &cache_dir {
        let repaired = crate::kernel_cache::repair(dir);
        if !repaired.is_empty() {
            warning = Some(repaired.join("\n"));
        }
    }
    let mut cfg = CubeClRuntimeConfig::default().override_from_env();
    if let Some(dir) = &cache_dir {
        // cubecl adds `autotune/<its version>/` below the root.
        cfg.autotune.cache = CacheConfig::File(dir.clone());
        let kernels = dir.join(kernels_dir_name(env!("CARGO_PKG_VERSION"), KERNEL_SOURCE));
        cfg.compilation.cache = Some(CacheConfig::File(kernels));
    }
    if let Some(log) = count_log {
        // Appended by every device's logger thread: one line per write, so lines never mix.
        cfg.profiling.logger.level = ProfilingLogLevel::Minimal;
        cfg.profiling.logger.file = Some(log.to_path_buf());
        cfg.profiling.logger.append = true;
        cfg.compilation.logger.level = CompilationLogLevel::Basic;
        cfg.compilation.logger.file = Some(log.to_path_buf());
        cfg.compilation.logger.append = true;
    }
    CubeClRuntimeConfig::set(cfg);
    RuntimeSetup { cache_dir, count_log: count_log.map(Path::to_path_buf), warning }
}

#[cfg(not(any(feature = "cuda", feature = "wgpu")))]
fn apply(_cache_dir: Option<PathBuf>, count_log: Option<&Path>) -> RuntimeSetup {
    RuntimeSetup {
        cache_dir: None,
        count_log: None,
        warning: count_log.map(|_| "built without GPU-class backends: no kernels to count".to_string()),
    }
}

/// The source of SignFlow's own CubeCL kernels, the only kernels whose code can change without
/// a version change (Burn's and cubecl's are pinned, and cubecl puts its version in the cache
/// path): the compiled-kernel directory is keyed by it.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
const KERNEL_SOURCE: &[u8] = include_bytes!("../../cube/src/kernels.rs");

/// The compiled-kernel directory's name: `kernels-<version>-<FNV-1a of the kernels' source>`,
/// so a build with changed kernels compiles them again instead of loading stale ones that have
/// the same kernel ids.
pub fn kernels_dir_name(version: &str, source: &[u8]) -> String {
    let hash = source.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    format!("kernels-{version}-{hash:016x}")
}

/// `dir` exists (created if needed) and a file can be written in it.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn usable_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let probe = tempfile::NamedTempFile::new_in(dir)?;
    drop(probe);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_directory_follows_the_environment() {
        // Only reads the environment: safe next to other tests.
        let dir = default_cache_dir();
        match std::env::var_os(CACHE_ENV).filter(|v| !v.is_empty()) {
            Some(v) => assert_eq!(dir, Some(PathBuf::from(v))),
            None => assert!(dir.is_none_or(|d| d.ends_with("signflow/kernels"))),
        }
    }

    #[test]
    fn the_compiled_kernel_directory_changes_with_the_kernels_source() {
        let a = kernels_dir_name("0.1.0", b"fn kernel() { a + b }");
        assert_eq!(a, kernels_dir_name("0.1.0", b"fn kernel() { a + b }"));
        assert_ne!(a, kernels_dir_name("0.1.0", b"fn kernel() { a - b }"));
        assert_ne!(a, kernels_dir_name("0.2.0", b"fn kernel() { a + b }"));
        // FNV-1a 64 of the empty input is its offset basis.
        assert_eq!(kernels_dir_name("0.1.0", b""), "kernels-0.1.0-cbf29ce484222325");
    }
}
