//! cubecl's JSON-lines cache files (autotune results, the compiled kernels' table of contents):
//! one `{"key": .., "value": ..}` object per line, appended.

use std::collections::HashMap;

use serde_json::value::RawValue;

/// One entry as written, its key and value still JSON text.
pub(super) struct Line<'a> {
    /// The key's JSON text as in the file (cubecl writes it compact).
    pub key: &'a RawValue,
    /// The value's JSON text.
    pub value: &'a RawValue,
}

/// `body` as an entry: a JSON object with a `key` and a `value`.
fn parse(body: &[u8]) -> Option<Line<'_>> {
    let mut fields: HashMap<String, &RawValue> = serde_json::from_slice(body).ok()?;
    Some(Line { key: fields.remove("key")?, value: fields.remove("value")? })
}

/// The lines of `bytes` that parse as an entry and that `keep` accepts (each with its newline),
/// and how many other lines there were (blank lines are dropped without counting). A last line
/// without a newline is a torn write: dropped.
pub(super) fn split(bytes: &[u8], mut keep: impl FnMut(&Line) -> bool) -> (Vec<u8>, usize) {
    let mut kept = Vec::with_capacity(bytes.len());
    let mut dropped = 0;
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        let entry = line.strip_suffix(b"\n").and_then(parse);
        match entry {
            Some(entry) if keep(&entry) => kept.extend_from_slice(line),
            None if line.iter().all(u8::is_ascii_whitespace) => {}
            _ => dropped += 1,
        }
    }
    (kept, dropped)
}
