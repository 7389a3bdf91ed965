//! `manifest.json`: the size and CRC-32 of every file of a staged directory (checkpoint, best
//! model, bundle), written when the directory is committed. A file truncated or changed after it
//! was written (a torn copy, a bad disk, a partial sync) is found by [`verify`] before a single
//! byte of it is decoded.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::layout::MANIFEST_FILE;
use crate::{BundleError, Result};

/// One file's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileSum {
    /// Size in bytes.
    pub bytes: u64,
    /// CRC-32 (IEEE) of the content, as 8 hex digits.
    pub crc32: String,
}

/// The manifest: file name -> size and CRC.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Manifest {
    /// The directory's files (not the manifest itself).
    pub files: BTreeMap<String, FileSum>,
}

/// Size and CRC-32 of `path`.
pub fn sum_file(path: &Path) -> Result<FileSum> {
    let mut f = std::fs::File::open(path).map_err(|e| BundleError::io(path, e))?;
    let mut hasher = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(|e| BundleError::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        bytes += n as u64;
    }
    Ok(FileSum { bytes, crc32: format!("{:08x}", hasher.finalize()) })
}

/// Write `dir/manifest.json` for the plain files directly in `dir`.
pub fn write(dir: &Path) -> Result<()> {
    let mut m = Manifest::default();
    for e in std::fs::read_dir(dir).map_err(|e| BundleError::io(dir, e))?.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name != MANIFEST_FILE && e.path().is_file() && !name.starts_with('.') {
            m.files.insert(name, sum_file(&e.path())?);
        }
    }
    crate::atomic::write_json(&dir.join(MANIFEST_FILE), &m)
}

/// Check the files `names` of `dir` (all the manifest lists when `names` is empty) against its
/// manifest. A directory written without one (by an older SignFlow) passes.
pub fn verify(dir: &Path, names: &[&str]) -> Result<()> {
    let path = dir.join(MANIFEST_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(BundleError::io(&path, e)),
    };
    let m: Manifest = serde_json::from_str(&text)
        .map_err(|e| BundleError::Invalid { path: path.clone(), message: format!("unreadable manifest: {e}") })?;
    let wanted: Vec<&str> =
        if names.is_empty() { m.files.keys().map(String::as_str).collect() } else { names.to_vec() };
    for name in wanted {
        let Some(expected) = m.files.get(name) else { continue };
        let file = dir.join(name);
        if !file.is_file() {
            return Err(BundleError::Invalid { path: file, message: "missing (the manifest lists it)".into() });
        }
        let found = sum_file(&file)?;
        if found.bytes != expected.bytes {
            return Err(BundleError::Invalid {
                path: file,
                message: format!(
                    "holds {} bytes, {} were written: the file was truncated or changed after it was written",
                    found.bytes, expected.bytes
                ),
            });
        }
        if found.crc32 != expected.crc32 {
            return Err(BundleError::Invalid {
                path: file,
                message: format!(
                    "CRC-32 {} does not match the {} written with it: the file is corrupt",
                    found.crc32, expected.crc32
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_truncated_or_flipped_file_fails_verification_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::write(dir.join("model.mpk"), vec![7u8; 1000]).unwrap();
        std::fs::write(dir.join("state.json"), "{}").unwrap();
        write(dir).unwrap();
        verify(dir, &[]).unwrap();
        let mut bytes = vec![7u8; 1000];
        bytes[500] ^= 1;
        std::fs::write(dir.join("model.mpk"), &bytes).unwrap();
        let e = verify(dir, &["model.mpk"]).unwrap_err().to_string();
        assert!(e.contains("model.mpk") && e.contains("corrupt"), "{e}");
        verify(dir, &["state.json"]).unwrap();
        std::fs::write(dir.join("model.mpk"), &bytes[..600]).unwrap();
        let e = verify(dir, &[]).unwrap_err().to_string();
        assert!(e.contains("holds 600 bytes, 1000 were written"), "{e}");
        std::fs::remove_file(dir.join(MANIFEST_FILE)).unwrap();
        verify(dir, &[]).unwrap();
    }
}
