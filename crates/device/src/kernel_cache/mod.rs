//! Checks of the kernel cache that cubecl does not make: [`crate::runtime::configure`] calls
//! [`repair`] before any device starts, so cubecl only ever reads cache files that parse.
//!
//! - `autotune`: the autotune results (`autotune/`), JSON lines.
//! - `compiled`: the compiled kernels ([`KERNELS_DIR`]), CBOR chunks sealed with checksums.
//!
//! What was dropped is compiled or tuned again; every repair is one message naming the file.

mod autotune;
mod cbor;
mod compiled;
mod lines;

use std::path::Path;

/// The directory of compiled kernels below the cache directory, one per SignFlow version.
pub const KERNELS_DIR: &str = concat!("kernels-", env!("CARGO_PKG_VERSION"));

/// Drop the damaged entries of the autotune results and compiled kernels under `cache_dir`.
/// Returns one message per file that was repaired or could not be checked, naming it and what
/// was found; empty when everything read.
pub fn repair(cache_dir: &Path) -> Vec<String> {
    let mut messages = autotune::repair(cache_dir);
    messages.extend(compiled::repair(&cache_dir.join(KERNELS_DIR)));
    messages
}

/// Replace `file` by `content` through a temporary file in its directory and a rename, so a
/// reader sees the old file or the new one, never a part. The new file keeps the old one's
/// permissions (a temporary file is only readable by its owner).
fn replace_file(file: &Path, content: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = file.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    if let Ok(old) = std::fs::metadata(file) {
        tmp.as_file().set_permissions(old.permissions())?;
    }
    tmp.write_all(content)?;
    tmp.as_file().sync_all()?;
    tmp.persist(file).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_replaced_file_keeps_its_permissions() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("chunk0.cbor");
        std::fs::write(&file, b"old").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        replace_file(&file, b"new").unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"new");
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o644);
    }
}
