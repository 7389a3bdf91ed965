//! Repair of the compiled kernels in the kernel cache.
//!
//! cubecl keeps compiled kernels (SPIR-V on Vulkan, PTX on CUDA) as CBOR entries appended to
//! `chunk0.cbor`, and a JSON-lines table of contents, `toc.json.log`, naming each key's chunk,
//! in `<backend>/<cubecl version>/<spirv|ptx>/` below [`super::KERNELS_DIR`]. It loads the chunk
//! whole and hands a cached kernel to the driver unchecked, so one damaged entry fails every later
//! run (wgpu's validation panics), a table of contents naming a chunk that is not there panics,
//! and a torn last entry hides every entry appended after it. cubecl stores no checksum:
//! SignFlow seals the entries it has read whole in `chunk0.cbor.sums`, one
//! `<offset> <length> <crc32>` line each. [`repair`] checks sealed entries against their sums,
//! frames the ones appended since and seals them, drops what is damaged (those kernels are
//! compiled again) and the table-of-contents lines that name no kernel of the cache.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::{cbor, lines, replace_file};

/// Chunks larger than this are left alone (a training run's is about 10 MB).
const MAX_CHUNK_BYTES: u64 = 1 << 30;

/// How deep below the kernels directory the chunks sit (`<backend>/<version>/<kind>/`), with margin.
const MAX_DEPTH: usize = 4;

/// cubecl's table of contents in a chunk directory.
const TOC: &str = "toc.json.log";

/// Suffix of a chunk's seal file.
const SUMS_SUFFIX: &str = ".sums";

/// Check and repair every chunk directory below `kernels_dir`. Returns one message per file
/// that was repaired or could not be checked, naming it and what was found.
pub(super) fn repair(kernels_dir: &Path) -> Vec<String> {
    let mut dirs = Vec::new();
    collect(kernels_dir, MAX_DEPTH, &mut dirs);
    dirs.sort();
    dirs.iter().flat_map(|dir| repair_dir(dir)).collect()
}

/// Directories holding a table of contents or a chunk.
fn collect(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut holds_cache = false;
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else { continue };
        let name = entry.file_name();
        if kind.is_dir() && depth > 0 {
            collect(&entry.path(), depth - 1, out);
        } else if kind.is_file() && (name == TOC || is_chunk_name(&name.to_string_lossy())) {
            holds_cache = true;
        }
    }
    if holds_cache {
        out.push(dir.to_path_buf());
    }
}

/// `chunk<digits>.cbor`, the only names cubecl gives chunks.
fn is_chunk_name(name: &str) -> bool {
    name.strip_prefix("chunk")
        .and_then(|rest| rest.strip_suffix(".cbor"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn repair_dir(dir: &Path) -> Vec<String> {
    let mut messages = Vec::new();
    // Chunk name -> the keys it holds (`None`: not all known, so none of its lines is dropped).
    let mut chunks: HashMap<String, Option<HashSet<String>>> = HashMap::new();
    let names = std::fs::read_dir(dir).into_iter().flatten().flatten().filter_map(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        (e.file_type().is_ok_and(|t| t.is_file()) && is_chunk_name(&name)).then_some(name)
    });
    for name in names {
        let (keys, message) = repair_chunk(&dir.join(&name));
        messages.extend(message);
        chunks.insert(name, keys);
    }
    messages.extend(repair_toc(&dir.join(TOC), &chunks));
    messages
}

/// One entry's place in a chunk and its checksum.
struct Seal {
    range: Range<usize>,
    crc: u32,
}

/// Check the chunk at `path` against its seal, drop damaged entries and seal the rest. Returns
/// the keys it holds (`None` when unknown) and what was repaired or could not be.
fn repair_chunk(path: &Path) -> (Option<HashSet<String>>, Option<String>) {
    let shown = path.display();
    match std::fs::metadata(path) {
        Ok(m) if m.len() > MAX_CHUNK_BYTES => {
            let msg =
                format!("kernel cache: {shown} is {} bytes, more than compiled kernels take; not checked", m.len());
            return (None, Some(msg));
        }
        Ok(_) => {}
        Err(e) => return (None, Some(format!("kernel cache: {shown} could not be read ({e})"))),
    }
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => return (None, Some(format!("kernel cache: {shown} could not be read ({e})"))),
    };
    let sums = sums_path(path);
    let seal_text = std::fs::read_to_string(&sums).unwrap_or_default();
    let checked = check(&bytes, &parse_sums(&seal_text));
    let (keys, kept) = (checked.keys, checked.kept);

    if checked.damaged == 0 {
        let seal = render_sums(&kept);
        let written = if seal == seal_text { Ok(()) } else { replace_file(&sums, seal.as_bytes()) };
        let message = written.err().map(|e| format!("kernel cache: {} could not be written ({e})", sums.display()));
        return (keys, message);
    }

    let n = checked.damaged;
    let what = format!("{n} damaged compiled kernel{}", if n == 1 { "" } else { "s" });
    // Without a seal while the chunk changes, a crash leaves entries to be framed again, not
    // sums that describe another layout.
    let _ = std::fs::remove_file(&sums);
    let rewritten = rewrite_chunk(path, &bytes, &kept);
    let message = match rewritten {
        Ok(new_seals) => match replace_file(&sums, render_sums(&new_seals).as_bytes()) {
            Ok(()) => format!("kernel cache: dropped {what} from {shown} (compiled again when next used)"),
            Err(e) => {
                format!("kernel cache: dropped {what} from {shown}; {} could not be written ({e})", sums.display())
            }
        },
        Err(e) => format!("kernel cache: {shown} has {what} and could not be rewritten ({e})"),
    };
    (keys, Some(message))
}

fn sums_path(chunk: &Path) -> PathBuf {
    let mut name = chunk.as_os_str().to_owned();
    name.push(SUMS_SUFFIX);
    PathBuf::from(name)
}

/// The seal's lines up to the first one that does not read; later entries are framed again.
fn parse_sums(text: &str) -> Vec<Seal> {
    let mut seals = Vec::new();
    for line in text.lines() {
        let mut fields = line.split(' ');
        let parsed = (|| {
            let start: usize = fields.next()?.parse().ok()?;
            let len: usize = fields.next()?.parse().ok()?;
            let crc = u32::from_str_radix(fields.next()?, 16).ok()?;
            fields.next().is_none().then_some(Seal { range: start..start.checked_add(len)?, crc })
        })();
        match parsed {
            Some(seal) => seals.push(seal),
            None => break,
        }
    }
    seals
}

fn render_sums(seals: &[Seal]) -> String {
    seals.iter().map(|s| format!("{} {} {:08x}\n", s.range.start, s.range.len(), s.crc)).collect()
}

/// What [`check`] found in a chunk.
struct Checked {
    kept: Vec<Seal>,
    damaged: usize,
    keys: Option<HashSet<String>>,
}

/// Walk the chunk: sealed entries in order while they follow each other from the start (each
/// must match its sum and frame as an entry), then entries appended since, framed; the first
/// unframed bytes end the walk and are dropped (a torn write or garbage).
fn check(bytes: &[u8], sealed: &[Seal]) -> Checked {
    let mut out = Checked { kept: Vec::new(), damaged: 0, keys: Some(HashSet::new()) };
    let keep = |out: &mut Checked, range: Range<usize>, crc: u32, entry: cbor::Entry| {
        match (&mut out.keys, entry.key_json) {
            (Some(keys), Some(key)) => {
                keys.insert(key);
            }
            (keys, _) => *keys = None,
        }
        out.kept.push(Seal { range, crc });
    };
    let mut pos = 0;
    for seal in sealed {
        if seal.range.start != pos || seal.range.end > bytes.len() {
            break;
        }
        let item = &bytes[seal.range.clone()];
        match cbor::entry(item) {
            Some(entry) if entry.len == item.len() && crc32fast::hash(item) == seal.crc => {
                keep(&mut out, seal.range.clone(), seal.crc, entry)
            }
            _ => out.damaged += 1,
        }
        pos = seal.range.end;
    }
    while pos < bytes.len() {
        let Some(entry) = cbor::entry(&bytes[pos..]) else {
            out.damaged += 1;
            break;
        };
        let range = pos..pos + entry.len;
        pos = range.end;
        let crc = crc32fast::hash(&bytes[range.clone()]);
        keep(&mut out, range, crc, entry);
    }
    out
}

/// Leave only the `kept` entries in the chunk and return where they now are. When only a tail
/// goes, the file is cut in place, so a process appending to it keeps appending to it.
fn rewrite_chunk(path: &Path, bytes: &[u8], kept: &[Seal]) -> std::io::Result<Vec<Seal>> {
    let mut content = Vec::with_capacity(bytes.len());
    let mut seals = Vec::with_capacity(kept.len());
    for seal in kept {
        let start = content.len();
        content.extend_from_slice(&bytes[seal.range.clone()]);
        seals.push(Seal { range: start..content.len(), crc: seal.crc });
    }
    if bytes.starts_with(&content) {
        std::fs::OpenOptions::new().write(true).open(path)?.set_len(content.len() as u64)?;
    } else {
        replace_file(path, &content)?;
    }
    Ok(seals)
}

/// Drop the table-of-contents lines that do not read, name a chunk that is not in `dir`, or
/// name a key their chunk does not hold: cubecl panics on a missing chunk and reads a chunk
/// whole again for every key it cannot find there.
fn repair_toc(toc: &Path, chunks: &HashMap<String, Option<HashSet<String>>>) -> Option<String> {
    let bytes = match std::fs::read(toc) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => return Some(format!("kernel cache: {} could not be read ({e})", toc.display())),
    };
    let (kept, dropped) = lines::split(&bytes, |line| {
        let Ok(chunk) = serde_json::from_str::<String>(line.value.get()) else { return false };
        match chunks.get(&chunk) {
            Some(Some(keys)) => keys.contains(line.key.get()),
            Some(None) => true,
            None => false,
        }
    });
    if dropped == 0 {
        return None;
    }
    let what = format!("{dropped} table-of-contents entr{}", if dropped == 1 { "y" } else { "ies" });
    Some(match replace_file(toc, &kept) {
        Ok(()) => format!("kernel cache: dropped {what} naming no cached kernel from {}", toc.display()),
        Err(e) => format!(
            "kernel cache: {} has {what} naming no cached kernel and could not be rewritten ({e})",
            toc.display()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize)]
    struct Entry {
        key: (u64, u128),
        value: Vec<u32>,
    }

    fn entry(i: u32) -> (Vec<u8>, String) {
        let key = (7_908_788_575_221_942_349, u128::MAX - u128::from(i));
        let mut bytes = Vec::new();
        let value = (0..200).map(|w| 0x0723_0203 ^ (w * i)).collect();
        ciborium::ser::into_writer(&Entry { key, value }, &mut bytes).unwrap();
        let toc = format!("{{\"key\":{},\"value\":\"chunk0.cbor\"}}\n", serde_json::to_string(&key).unwrap());
        (bytes, toc)
    }

    /// A chunk directory as cubecl leaves it: entries `0..n` in `chunk0.cbor` and the toc.
    fn cache(n: u32) -> (tempfile::TempDir, PathBuf, Vec<(Vec<u8>, String)>) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("vulkan/0.10.0/spirv");
        std::fs::create_dir_all(&dir).unwrap();
        let entries: Vec<_> = (0..n).map(entry).collect();
        std::fs::write(dir.join("chunk0.cbor"), entries.iter().flat_map(|e| e.0.clone()).collect::<Vec<_>>()).unwrap();
        std::fs::write(dir.join(TOC), entries.iter().map(|e| e.1.clone()).collect::<String>()).unwrap();
        (tmp, dir, entries)
    }

    fn read(p: PathBuf) -> Vec<u8> {
        std::fs::read(p).unwrap()
    }

    #[test]
    fn entries_are_sealed_once_and_a_damaged_one_is_dropped_with_its_toc_line() {
        let (tmp, dir, entries) = cache(3);
        let chunk = dir.join("chunk0.cbor");
        // First look: all framed and sealed, nothing to say.
        assert!(repair(tmp.path()).is_empty());
        let sums = std::fs::read_to_string(dir.join("chunk0.cbor.sums")).unwrap();
        assert_eq!(sums.lines().count(), 3, "{sums}");
        assert!(repair(tmp.path()).is_empty());

        // One bit flipped inside the middle entry's value: it still frames, its sum does not match.
        let mut bytes = read(chunk.clone());
        let middle = entries[0].0.len() + entries[1].0.len() - 3;
        bytes[middle] ^= 0x01;
        std::fs::write(&chunk, &bytes).unwrap();
        let messages = repair(tmp.path());
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(messages[0].contains("dropped 1 damaged compiled kernel from"), "{}", messages[0]);
        assert!(messages[0].contains("chunk0.cbor"), "{}", messages[0]);
        assert!(messages[1].contains("dropped 1 table-of-contents entry naming no cached kernel"), "{}", messages[1]);
        assert_eq!(read(chunk.clone()), [entries[0].0.clone(), entries[2].0.clone()].concat());
        assert_eq!(std::fs::read_to_string(dir.join(TOC)).unwrap(), entries[0].1.clone() + &entries[2].1);
        assert!(repair(tmp.path()).is_empty(), "repaired: nothing more");
    }

    #[test]
    fn a_torn_last_entry_is_cut_off_in_place_and_entries_after_garbage_go() {
        let (tmp, dir, entries) = cache(2);
        let chunk = dir.join("chunk0.cbor");
        assert!(repair(tmp.path()).is_empty());
        let (third, _) = entry(2);
        let mut f = std::fs::OpenOptions::new().append(true).open(&chunk).unwrap();
        std::io::Write::write_all(&mut f, &third[..third.len() / 2]).unwrap();
        let messages = repair(tmp.path());
        assert!(messages[0].contains("dropped 1 damaged compiled kernel"), "{messages:?}");
        // The same file, cut: an appender's next entry lands right after the good ones.
        std::io::Write::write_all(&mut f, &third).unwrap();
        assert_eq!(read(chunk.clone()), [entries[0].0.clone(), entries[1].0.clone(), third.clone()].concat());
        assert!(repair(tmp.path()).is_empty());

        // Garbage between unsealed entries: the walk stops there.
        std::fs::write(dir.join("chunk0.cbor.sums"), "").unwrap();
        std::fs::write(&chunk, [entries[0].0.clone(), vec![0xff, 0x00], entries[1].0.clone()].concat()).unwrap();
        assert_eq!(repair(tmp.path()).len(), 2);
        assert_eq!(read(chunk), entries[0].0);
        assert_eq!(std::fs::read_to_string(dir.join(TOC)).unwrap(), entries[0].1);
    }

    #[test]
    fn toc_lines_naming_missing_or_foreign_chunks_go_and_a_bad_seal_is_rebuilt() {
        let (tmp, dir, entries) = cache(2);
        let toc = dir.join(TOC);
        let foreign = r#"{"key":[1,2],"value":"../../../../etc/passwd"}"#;
        let missing = r#"{"key":[1,3],"value":"chunk7.cbor"}"#;
        std::fs::write(&toc, format!("{}{foreign}\n{missing}\n{}{{\"key\":", entries[0].1, entries[1].1)).unwrap();
        // A seal whose second line does not read: the first entry is checked, the second framed.
        std::fs::write(
            dir.join("chunk0.cbor.sums"),
            format!("0 {} {:08x}\nnot a seal\n", entries[0].0.len(), crc32fast::hash(&entries[0].0)),
        )
        .unwrap();
        let messages = repair(tmp.path());
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert!(messages[0].contains("dropped 3 table-of-contents entries"), "{}", messages[0]);
        assert_eq!(std::fs::read_to_string(&toc).unwrap(), entries[0].1.clone() + &entries[1].1);
        assert_eq!(std::fs::read_to_string(dir.join("chunk0.cbor.sums")).unwrap().lines().count(), 2);

        // A seal that does not match the chunk at all (another chunk's): every entry is checked
        // against it, fails, and goes; the entry after it is framed and kept.
        std::fs::write(dir.join("chunk0.cbor.sums"), format!("0 {} 00000000\n", entries[0].0.len())).unwrap();
        let messages = repair(tmp.path());
        assert!(messages[0].contains("dropped 1 damaged compiled kernel"), "{messages:?}");
        assert_eq!(read(dir.join("chunk0.cbor")), entries[1].0);
    }

    #[test]
    fn chunk_names_are_cubecls_only() {
        assert!(is_chunk_name("chunk0.cbor") && is_chunk_name("chunk12.cbor"));
        assert!(!is_chunk_name("chunk.cbor") && !is_chunk_name("chunk0.cbor.sums") && !is_chunk_name("../chunk0.cbor"));
    }
}
