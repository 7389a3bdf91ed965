//! Repair of the persistent autotune results in the kernel cache.
//!
//! cubecl appends one JSON entry per line to `autotune/<cubecl version>/<device>/*.json.log` and
//! reads them back at start. An entry it cannot parse (a torn write, a damaged disk, a file
//! edited by hand) is skipped with a `log` warning that the programs do not print, and stays in
//! the file; a torn last line also swallows the next entry cubecl appends. [`repair`] keeps the
//! entries that parse, drops the rest, and says so: those kernels are tuned again.

use std::path::{Path, PathBuf};

use super::lines;

/// Result files larger than this are left alone (cubecl's own are kilobytes to a megabyte).
const MAX_FILE_BYTES: u64 = 256 << 20;

/// How deep below `autotune/` the result files sit (`<version>/<device>/<file>`), with margin.
const MAX_DEPTH: usize = 4;

/// Drop the damaged entries of every autotune result file under `cache_dir/autotune`, rewriting
/// each damaged file through a temporary file and a rename. Returns one message per file that
/// was repaired or could not be read, naming it and what was found.
pub(super) fn repair(cache_dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    collect(&cache_dir.join("autotune"), MAX_DEPTH, &mut files);
    files.sort();
    files.iter().filter_map(|f| repair_file(f)).collect()
}

fn collect(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_dir() && depth > 0 {
            collect(&path, depth - 1, out);
        } else if kind.is_file() && path.to_string_lossy().ends_with(".json.log") {
            out.push(path);
        }
    }
}

/// `Some(message)` when `file` had damaged entries (now dropped) or could not be checked.
fn repair_file(file: &Path) -> Option<String> {
    let size = std::fs::metadata(file).ok()?.len();
    if size > MAX_FILE_BYTES {
        return Some(format!(
            "kernel cache: {} is {size} bytes, more than autotune results take; not checked",
            file.display()
        ));
    }
    let bytes = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => return Some(format!("kernel cache: {} could not be read ({e})", file.display())),
    };
    let (kept, dropped) = lines::split(&bytes, |_| true);
    if dropped == 0 {
        return None;
    }
    let what = format!("{dropped} damaged autotune entr{}", if dropped == 1 { "y" } else { "ies" });
    match super::replace_file(file, &kept) {
        Ok(()) => Some(format!("kernel cache: dropped {what} from {} (those kernels are tuned again)", file.display())),
        Err(e) => Some(format!("kernel cache: {} has {what} and could not be rewritten ({e})", file.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"key":{"key":{"m":64},"checksum":"ab"},"value":{"fastest_index":1,"results":[]}}"#;

    #[test]
    fn damaged_entries_are_dropped_and_named_good_ones_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("autotune/0.10.0/device-0-0-cuda");
        std::fs::create_dir_all(&dir).unwrap();
        let damaged = dir.join("matmul-tune.json.log");
        // A good entry, garbage, a JSON value that is no entry, a good one, a torn last write.
        let content = format!("{GOOD}\n\u{1}\u{2}garbage\n[1, 2]\n{GOOD}\n{}", &GOOD[..30]);
        std::fs::write(&damaged, content).unwrap();
        let clean = dir.join("reduce-tune.json.log");
        std::fs::write(&clean, format!("{GOOD}\n")).unwrap();
        std::fs::write(dir.join("notes.txt"), "not a result file\n").unwrap();

        let messages = repair(tmp.path());
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert!(messages[0].contains("dropped 3 damaged autotune entries"), "{}", messages[0]);
        assert!(messages[0].contains("matmul-tune.json.log"), "{}", messages[0]);
        assert_eq!(std::fs::read_to_string(&damaged).unwrap(), format!("{GOOD}\n{GOOD}\n"));
        assert_eq!(std::fs::read_to_string(&clean).unwrap(), format!("{GOOD}\n"));
        assert_eq!(std::fs::read_to_string(dir.join("notes.txt")).unwrap(), "not a result file\n");
        // Repaired: a second pass finds nothing.
        assert!(repair(tmp.path()).is_empty());
    }

    #[test]
    fn a_missing_or_empty_cache_needs_no_repair() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(repair(tmp.path()).is_empty());
        let dir = tmp.path().join("autotune/0.10.0/d");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("x.json.log"), "").unwrap();
        assert!(repair(tmp.path()).is_empty());
    }
}
