//! Just enough CBOR (RFC 8949) to frame cubecl's compiled-kernel entries without trusting them:
//! the length of one data item, and an entry's key as the compact JSON cubecl's table of
//! contents writes for it. Nothing here allocates by a length the bytes declare.

/// Nesting deeper than this in a key is not cubecl's (its keys are tuples of integers).
const MAX_KEY_DEPTH: usize = 16;

/// An entry cubecl wrote: a two-field map `{"key": K, "value": V}`.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Entry {
    /// Bytes the entry takes.
    pub len: usize,
    /// The key as compact JSON, when it is made of what JSON holds exactly (integers, text,
    /// arrays, maps with text keys, booleans, null); `None` for anything else.
    pub key_json: Option<String>,
}

/// The entry at the start of `bytes`, or `None` when it is truncated, malformed or not an entry.
pub(super) fn entry(bytes: &[u8]) -> Option<Entry> {
    let (major, pairs, mut pos) = header(bytes)?;
    if major != MAP || pairs != 2 {
        return None;
    }
    let (mut key_json, mut has_key, mut has_value) = (None, false, false);
    for _ in 0..2 {
        let name_len = item_len(&bytes[pos..])?;
        let name = text(&bytes[pos..pos + name_len])?;
        pos += name_len;
        let value_len = item_len(&bytes[pos..])?;
        match name {
            "key" if !has_key => {
                has_key = true;
                key_json = json(&bytes[pos..pos + value_len], 0).map(|(s, _)| s);
            }
            "value" if !has_value => has_value = true,
            _ => return None,
        }
        pos += value_len;
    }
    Some(Entry { len: pos, key_json })
}

const UNSIGNED: u8 = 0;
const NEGATIVE: u8 = 1;
const BYTES: u8 = 2;
const TEXT: u8 = 3;
const ARRAY: u8 = 4;
const MAP: u8 = 5;
const TAG: u8 = 6;
const SIMPLE: u8 = 7;

/// Major type, argument and header length of the item at the start of `b`. Indefinite lengths
/// (which cubecl's encoder does not write) and reserved encodings are `None`.
fn header(b: &[u8]) -> Option<(u8, u64, usize)> {
    let first = *b.first()?;
    let (major, info) = (first >> 5, first & 0x1f);
    let extra = match info {
        0..=23 => return Some((major, u64::from(info), 1)),
        24 => 1,
        25 => 2,
        26 => 4,
        27 => 8,
        _ => return None,
    };
    let arg = b.get(1..1 + extra)?.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x));
    Some((major, arg, 1 + extra))
}

/// Bytes taken by the data item at the start of `b`, nested items included.
pub(super) fn item_len(b: &[u8]) -> Option<usize> {
    let (mut pos, mut pending) = (0usize, 1usize);
    while pending > 0 {
        pending -= 1;
        let (major, arg, head) = header(b.get(pos..)?)?;
        pos += head;
        let arg = usize::try_from(arg).ok()?;
        match major {
            BYTES | TEXT => pos = pos.checked_add(arg).filter(|&end| end <= b.len())?,
            ARRAY => pending = pending.checked_add(arg)?,
            MAP => pending = pending.checked_add(arg.checked_mul(2)?)?,
            TAG => pending += 1,
            _ => {} // integers and simple values: the header is the item
        }
        // Every item still to come takes at least a byte.
        if pending > b.len() - pos {
            return None;
        }
    }
    Some(pos)
}

/// The text of a text-string item that is all of `b`.
fn text(b: &[u8]) -> Option<&str> {
    let (major, len, head) = header(b)?;
    (major == TEXT && head.checked_add(usize::try_from(len).ok()?) == Some(b.len()))
        .then(|| std::str::from_utf8(&b[head..]).ok())
        .flatten()
}

/// The item at the start of `b` as compact JSON (serde_json's spelling) and the bytes it takes.
fn json(b: &[u8], depth: usize) -> Option<(String, usize)> {
    if depth > MAX_KEY_DEPTH {
        return None;
    }
    let (major, arg, head) = header(b)?;
    let body = |len: u64| -> Option<&[u8]> { b.get(head..head.checked_add(usize::try_from(len).ok()?)?) };
    match major {
        UNSIGNED => Some((arg.to_string(), head)),
        NEGATIVE => Some(((-1 - i128::from(arg)).to_string(), head)),
        TEXT => {
            let s = std::str::from_utf8(body(arg)?).ok()?;
            Some((serde_json::to_string(s).ok()?, head + s.len()))
        }
        ARRAY | MAP => {
            let (mut out, mut pos) = (String::from(if major == ARRAY { "[" } else { "{" }), head);
            for i in 0..arg {
                if i > 0 {
                    out.push(',');
                }
                if major == MAP {
                    let name_len = item_len(&b[pos..])?;
                    let name = text(&b[pos..pos + name_len])?;
                    out.push_str(&serde_json::to_string(name).ok()?);
                    out.push(':');
                    pos += name_len;
                }
                let (item, len) = json(&b[pos..], depth + 1)?;
                out.push_str(&item);
                pos += len;
            }
            out.push(if major == ARRAY { ']' } else { '}' });
            Some((out, pos))
        }
        // Bignums (tags 2 and 3) of at most 16 bytes: u128 and i128 keys.
        TAG if arg == 2 || arg == 3 => {
            let (inner, len, inner_head) = header(&b[head..])?;
            let digits = b.get(head + inner_head..head + inner_head + usize::try_from(len).ok()?)?;
            if inner != BYTES || digits.len() > 16 {
                return None;
            }
            let n = digits.iter().fold(0u128, |acc, &x| (acc << 8) | u128::from(x));
            let s = if arg == 2 { n.to_string() } else { (-1 - i128::try_from(n).ok()?).to_string() };
            Some((s, head + inner_head + digits.len()))
        }
        SIMPLE => match arg {
            20 => Some(("false".into(), head)),
            21 => Some(("true".into(), head)),
            22 => Some(("null".into(), head)),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize)]
    struct Cubecl<K, V> {
        key: K,
        value: V,
    }

    fn encode<T: serde::Serialize>(v: &T) -> Vec<u8> {
        let mut out = Vec::new();
        ciborium::ser::into_writer(v, &mut out).unwrap();
        out
    }

    #[test]
    fn entries_are_framed_and_their_keys_spelled_as_serde_json_does() {
        let key = (7_908_788_575_221_942_349u64, 204_828_599_409_341_842_174_377_736_575_595_694_599u128);
        let value = (vec![0x0723_0203u32, 0x0001_0300, 7], "main", 1.5f64, vec![true, false]);
        let bytes = encode(&Cubecl { key, value: value.clone() });
        let e = entry(&bytes).unwrap();
        assert_eq!(e.len, bytes.len());
        assert_eq!(e.key_json.as_deref(), Some(serde_json::to_string(&key).unwrap().as_str()));

        let key = (-3i64, "a\"b", vec![(1u8, None::<u8>)], i128::MIN + 1);
        let bytes = encode(&Cubecl { key: key.clone(), value: 0u8 });
        assert_eq!(entry(&bytes).unwrap().key_json.unwrap(), serde_json::to_string(&key).unwrap());
        // Floats are not spelled (JSON would round them): framed, key unknown.
        let bytes = encode(&Cubecl { key: 0.5f32, value: 0u8 });
        assert_eq!(entry(&bytes), Some(Entry { len: bytes.len(), key_json: None }));
    }

    #[test]
    fn truncated_oversized_or_foreign_items_are_not_entries() {
        let bytes = encode(&Cubecl { key: (1u64, 2u128), value: vec![5u32; 100] });
        for cut in 0..bytes.len() {
            assert_eq!(entry(&bytes[..cut]), None, "cut at {cut}");
        }
        // A declared length far beyond the bytes: rejected without allocating it.
        assert_eq!(item_len(&[0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]), None);
        assert_eq!(item_len(&[0x5a, 0x7f, 0xff, 0xff, 0xff, 1, 2]), None);
        assert_eq!(entry(&encode(&(1u8, 2u8))), None, "an array");
        let small = encode(&Cubecl { key: 1u8, value: 2u8 });
        assert_eq!(entry(&small).map(|e| e.len), Some(small.len()));
        let mut other = std::collections::BTreeMap::new();
        other.insert("key", 1u8);
        other.insert("other", 2u8);
        assert_eq!(entry(&encode(&other)), None, "not cubecl's fields");
        // Indefinite lengths and reserved encodings.
        assert_eq!(item_len(&[0x9f, 0x01, 0xff]), None);
        assert_eq!(item_len(&[0x1c]), None);
        // Deep nesting in a key: framed, not spelled.
        let mut deep = vec![0xa2, 0x63, b'k', b'e', b'y'];
        deep.extend(std::iter::repeat_n(0x81, 40));
        deep.push(0x01);
        deep.extend([0x65, b'v', b'a', b'l', b'u', b'e', 0x00]);
        assert_eq!(entry(&deep), Some(Entry { len: deep.len(), key_json: None }));
    }
}
