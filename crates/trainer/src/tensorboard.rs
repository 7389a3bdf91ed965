//! TensorBoard scalar event files (`events.out.tfevents.*` in the run directory), so
//! `tensorboard --logdir runs` plots and compares runs.
//!
//! The file is a sequence of TFRecords (`u64` length, masked CRC-32C of the length, the bytes,
//! masked CRC-32C of the bytes), each an `Event` protocol buffer: a `file_version` event first,
//! then `summary` events of `simple_value` scalars. A resumed run opens a new file starting with a
//! `session_log START` at the resume step, which tells TensorBoard to drop the interrupted
//! process's points after it. The few protobuf fields needed are encoded here by hand.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{Result, TrainError};

/// Prefix of event file names (TensorBoard finds files containing `tfevents`).
pub const FILE_PREFIX: &str = "events.out.tfevents.";

fn masked_crc(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(bytes);
    (crc.rotate_right(15)).wrapping_add(0xa282_ead8)
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn key(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn bytes_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    key(out, field, 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// An `Event` with wall time and step, and `body` (already encoded fields) appended.
fn event(wall_time: f64, step: i64, body: &[u8]) -> Vec<u8> {
    let mut e = Vec::with_capacity(16 + body.len());
    key(&mut e, 1, 1);
    e.extend_from_slice(&wall_time.to_le_bytes());
    key(&mut e, 2, 0);
    varint(&mut e, step as u64);
    e.extend_from_slice(body);
    e
}

/// One TFRecord around `data`.
fn record(data: &[u8]) -> Vec<u8> {
    let len = (data.len() as u64).to_le_bytes();
    let mut r = Vec::with_capacity(data.len() + 16);
    r.extend_from_slice(&len);
    r.extend_from_slice(&masked_crc(&len).to_le_bytes());
    r.extend_from_slice(data);
    r.extend_from_slice(&masked_crc(data).to_le_bytes());
    r
}

fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// Appends scalar events to one event file (flushed per call).
#[derive(Debug)]
pub struct EventWriter {
    path: PathBuf,
    file: File,
}

impl EventWriter {
    /// Start a new event file in `dir`. With `resume_step`, the file opens with a restart marker
    /// at the step after it (TensorBoard then ignores older points at later steps).
    pub fn create(dir: &Path, resume_step: Option<usize>) -> Result<Self> {
        let host = std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
        let host = if host.is_empty() { "localhost".to_string() } else { host };
        let secs = now() as u64;
        // A second process in the same second (a quick resume) must not append to the same file.
        let mut n = 0;
        let path = loop {
            let p = dir.join(format!("{FILE_PREFIX}{secs}.{host}.{}.{n}", std::process::id()));
            if !p.exists() {
                break p;
            }
            n += 1;
        };
        let file = File::create(&path).map_err(|e| TrainError::io(&path, e))?;
        let mut w = Self { path, file };
        let mut version = Vec::new();
        bytes_field(&mut version, 3, b"brain.Event:2");
        let mut first = record(&event(now(), 0, &version));
        if let Some(step) = resume_step {
            // SessionLog { status: START (1) } in field 6.
            let mut log = Vec::new();
            key(&mut log, 1, 0);
            varint(&mut log, 1);
            let mut body = Vec::new();
            bytes_field(&mut body, 6, &log);
            first.extend(record(&event(now(), step as i64 + 1, &body)));
        }
        w.append(&first)?;
        Ok(w)
    }

    /// The event file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn append(&mut self, bytes: &[u8]) -> Result<()> {
        self.file.write_all(bytes).map_err(|e| TrainError::io(&self.path, e))?;
        self.file.flush().map_err(|e| TrainError::io(&self.path, e))
    }

    /// Write `(tag, value)` scalars at `step` as one event; non-finite values are written too
    /// (TensorBoard shows them), an empty list writes nothing.
    pub fn scalars(&mut self, step: usize, values: &[(&str, f64)]) -> Result<()> {
        if values.is_empty() {
            return Ok(());
        }
        let mut summary = Vec::new();
        for (tag, v) in values {
            let mut value = Vec::new();
            bytes_field(&mut value, 1, tag.as_bytes());
            key(&mut value, 2, 5);
            value.extend_from_slice(&(*v as f32).to_le_bytes());
            bytes_field(&mut summary, 1, &value);
        }
        let mut body = Vec::new();
        bytes_field(&mut body, 5, &summary);
        self.append(&record(&event(now(), step as i64, &body)))
    }
}

/// One scalar point read back from an event file.
#[derive(Debug, Clone, PartialEq)]
pub struct Scalar {
    /// The step.
    pub step: i64,
    /// The tag.
    pub tag: String,
    /// The value.
    pub value: f32,
}

/// What an event file holds: its scalars and the steps of its restart markers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventFile {
    /// The `file_version` string of the first event.
    pub version: String,
    /// Every scalar, in file order.
    pub scalars: Vec<Scalar>,
    /// Steps of `session_log START` events.
    pub restarts: Vec<i64>,
}

struct Proto<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Proto<'a> {
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.b.get(self.at)?;
            self.at += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    /// Next (field, wire type, payload); varints come back as their 8 little-endian bytes.
    fn next(&mut self) -> Option<Option<(u64, u8, Vec<u8>)>> {
        if self.at >= self.b.len() {
            return Some(None);
        }
        let k = self.varint()?;
        let (field, wire) = (k >> 3, (k & 7) as u8);
        let payload = match wire {
            0 => self.varint()?.to_le_bytes().to_vec(),
            1 => self.take(8)?.to_vec(),
            2 => {
                let n = usize::try_from(self.varint()?).ok()?;
                self.take(n)?.to_vec()
            }
            5 => self.take(4)?.to_vec(),
            _ => return None,
        };
        Some(Some((field, wire, payload)))
    }
}

fn fields(b: &[u8]) -> Option<Vec<(u64, u8, Vec<u8>)>> {
    let mut p = Proto { b, at: 0 };
    let mut out = Vec::new();
    while let Some(f) = p.next()? {
        out.push(f);
    }
    Some(out)
}

/// Read an event file back, checking every record's CRCs; errors name the file and the byte.
pub fn read_events(path: &Path) -> Result<EventFile> {
    let bytes = std::fs::read(path).map_err(|e| TrainError::io(path, e))?;
    let bad = |at: usize, what: &str| TrainError::io(path, format!("byte {at}: {what}"));
    let mut out = EventFile::default();
    let mut at = 0;
    while at < bytes.len() {
        let header = bytes.get(at..at + 12).ok_or_else(|| bad(at, "truncated record header"))?;
        let len_bytes = &header[..8];
        if u32::from_le_bytes(header[8..12].try_into().expect("4 bytes")) != masked_crc(len_bytes) {
            return Err(bad(at, "record length CRC mismatch (corrupt file)"));
        }
        let len = usize::try_from(u64::from_le_bytes(len_bytes.try_into().expect("8 bytes")))
            .map_err(|_| bad(at, "record length out of range"))?;
        let end =
            (at + 12).checked_add(len).filter(|e| e + 4 <= bytes.len()).ok_or_else(|| bad(at, "truncated record"))?;
        let data = &bytes[at + 12..end];
        if u32::from_le_bytes(bytes[end..end + 4].try_into().expect("4 bytes")) != masked_crc(data) {
            return Err(bad(at, "record data CRC mismatch (corrupt file)"));
        }
        let ev = fields(data).ok_or_else(|| bad(at, "not an Event protocol buffer"))?;
        let step =
            ev.iter().find(|f| f.0 == 2).map(|f| i64::from_le_bytes(f.2[..8].try_into().expect("8"))).unwrap_or(0);
        for (field, _, payload) in &ev {
            match field {
                3 => out.version = String::from_utf8_lossy(payload).into_owned(),
                5 => {
                    for (_, _, value) in fields(payload).ok_or_else(|| bad(at, "bad Summary"))? {
                        let v = fields(&value).ok_or_else(|| bad(at, "bad Summary.Value"))?;
                        let tag = v.iter().find(|f| f.0 == 1).map(|f| String::from_utf8_lossy(&f.2).into_owned());
                        let val = v
                            .iter()
                            .find(|f| f.0 == 2 && f.1 == 5)
                            .map(|f| f32::from_le_bytes(f.2[..4].try_into().expect("4")));
                        if let (Some(tag), Some(value)) = (tag, val) {
                            out.scalars.push(Scalar { step, tag, value });
                        }
                    }
                }
                6 => out.restarts.push(step),
                _ => {}
            }
        }
        at = end + 4;
    }
    Ok(out)
}

/// The event files of a run directory, oldest first.
pub fn event_files(run_dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(run_dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(FILE_PREFIX)))
                .collect()
        })
        .unwrap_or_default();
    files.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_and_masking_match_tensorflow() {
        // CRC-32C check value of "123456789" (RFC 3720).
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
        // The masked CRC of an 8-byte zero length, as TensorFlow's record writer computes it.
        let crc = crc32c::crc32c(&[0u8; 8]);
        assert_eq!(masked_crc(&[0u8; 8]), crc.rotate_right(15).wrapping_add(0xa282ead8));
    }

    #[test]
    fn scalars_round_trip_and_corruption_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = EventWriter::create(dir.path(), Some(9)).unwrap();
        w.scalars(10, &[("train/loss", 1.5), ("lr", 3e-4)]).unwrap();
        w.scalars(20, &[("train/loss", 0.25)]).unwrap();
        let path = w.path().to_path_buf();
        let f = read_events(&path).unwrap();
        assert_eq!(f.version, "brain.Event:2");
        assert_eq!(f.restarts, vec![10]);
        assert_eq!(f.scalars.len(), 3);
        assert_eq!(f.scalars[0], Scalar { step: 10, tag: "train/loss".into(), value: 1.5 });
        assert_eq!(f.scalars[1].value, 3e-4f64 as f32);
        assert_eq!(f.scalars[2].step, 20);
        let mut bytes = std::fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n - 6] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let err = read_events(&path).unwrap_err().to_string();
        assert!(err.contains("CRC mismatch") && err.contains("tfevents"), "{err}");
        std::fs::write(&path, &bytes[..n - 3]).unwrap();
        assert!(read_events(&path).unwrap_err().to_string().contains("truncated"));
    }
}
