//! cubecl's settings for this process: where autotune results and compiled kernels persist, and
//! whether kernel launches and compilations are logged for [`crate::counters`].
//!
//! cubecl (the runtime under Burn's CUDA and WGPU backends) reads its settings once, when the
//! first GPU-class client starts, from a `cubecl.toml` it finds above the working directory, and
//! panics on a malformed one; its autotune results go to the `target/` directory of the nearest
//! `Cargo.toml` above the working directory, so runs started from different directories tune the
//! same kernels again. The binaries call [`configure`] first, and [`crate::dispatch_device`]
//! calls it with the defaults for a GPU-class device where nothing did (a library user's
//! process, the in-process tests), so every run of a user shares one cache directory (printed by
//! the trainer) and no file in the working directory is read;
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
    /// CUDA, SPIR-V on Vulkan) under `kernels-<SignFlow version>/`. cubecl keys a compiled kernel
    /// by its type, launch settings and compile-time arguments, not by its code; SignFlow's own
    /// kernels take a hash of their source as a compile-time argument (`cube::kernels`), so a
    /// build whose kernels changed compiles them again.
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
        let kernels = dir.join(crate::kernel_cache::KERNELS_DIR);
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
}
