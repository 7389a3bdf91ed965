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

/// The largest manifest read: a few hundred bytes a file, and a directory holds a handful.
const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// Whether `name` is a plain file name: no separator, not `.` or `..`, so it stays in its directory.
fn plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// Read `dir/manifest.json`: `None` when there is none. Every name it lists must be a plain file
/// name (a manifest is read from disk, which may hold someone else's file).
pub fn read(dir: &Path) -> Result<Option<Manifest>> {
    let path = dir.join(MANIFEST_FILE);
    let mut text = String::new();
    match std::fs::File::open(&path) {
        Ok(f) => {
            f.take(MAX_MANIFEST_BYTES + 1).read_to_string(&mut text).map_err(|e| BundleError::io(&path, e))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(BundleError::io(&path, e)),
    }
    let invalid = |message: String| BundleError::Invalid { path: path.clone(), message };
    if text.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(invalid(format!("larger than {MAX_MANIFEST_BYTES} bytes; a manifest lists a few files")));
    }
    let m: Manifest = serde_json::from_str(&text).map_err(|e| invalid(format!("unreadable manifest: {e}")))?;
    if let Some(bad) = m.files.keys().find(|n| !plain_name(n)) {
        return Err(invalid(format!("lists {bad:?}, which is not a file name in this directory")));
    }
    Ok(Some(m))
}

/// The entries of `dir` that SignFlow did not write: everything when it has no manifest;
/// otherwise whatever the manifest does not list as a plain file (its own `.tmp*` files of an
/// interrupted write aside). Only a directory without such entries is ever replaced or removed.
pub fn foreign_entries(dir: &Path) -> Result<Vec<String>> {
    let manifest = read(dir)?;
    let mut foreign = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| BundleError::io(dir, e))? {
        let e = e.map_err(|e| BundleError::io(dir, e))?;
        let name = e.file_name().to_string_lossy().to_string();
        let ours = match &manifest {
            None => false,
            Some(m) => {
                let is_file = e.file_type().is_ok_and(|t| t.is_file());
                is_file && (name == MANIFEST_FILE || name.starts_with(".tmp") || m.files.contains_key(&name))
            }
        };
        if !ours {
            foreign.push(name);
        }
    }
    foreign.sort();
    Ok(foreign)
}

/// Check the files `names` of `dir` (all the manifest lists when `names` is empty) against its
/// manifest. A directory written without one (by an older SignFlow) passes.
pub fn verify(dir: &Path, names: &[&str]) -> Result<()> {
    let Some(m) = read(dir)? else { return Ok(()) };
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
        assert!(foreign_entries(dir).unwrap().is_empty());
        std::fs::write(dir.join("notes.txt"), "mine").unwrap();
        assert_eq!(foreign_entries(dir).unwrap(), ["notes.txt"]);
        std::fs::write(dir.join("model.mpk"), &bytes[..600]).unwrap();
        let e = verify(dir, &[]).unwrap_err().to_string();
        assert!(e.contains("holds 600 bytes, 1000 were written"), "{e}");
        std::fs::remove_file(dir.join(MANIFEST_FILE)).unwrap();
        verify(dir, &[]).unwrap();
        assert_eq!(foreign_entries(dir).unwrap(), ["model.mpk", "notes.txt", "state.json"]);
    }

    #[test]
    fn a_manifest_naming_files_outside_its_directory_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("step-00000004");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(tmp.path().join("secret"), "not yours").unwrap();
        for name in ["../secret", "/etc/passwd", "..", "a/b"] {
            let m = serde_json::json!({ "files": { name: { "bytes": 9, "crc32": "00000000" } } });
            std::fs::write(dir.join(MANIFEST_FILE), m.to_string()).unwrap();
            let e = verify(&dir, &[]).unwrap_err().to_string();
            assert!(e.contains("not a file name in this directory") && e.contains("manifest.json"), "{name}: {e}");
        }
        std::fs::write(dir.join(MANIFEST_FILE), vec![b' '; (MAX_MANIFEST_BYTES + 10) as usize]).unwrap();
        assert!(verify(&dir, &[]).unwrap_err().to_string().contains("larger than"));
    }
}
