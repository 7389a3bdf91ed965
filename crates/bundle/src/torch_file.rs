//! A `torch.save` archive (PyTorch 1.6 and later: a zip of `<name>/data.pkl`, `<name>/byteorder`
//! and one `<name>/data/<key>` file per storage), read as an untrusted file.
//!
//! [`TorchFile::open`] parses the pickle with [`crate::pickle`] (bounded) and finds the state
//! dict's tensors without reading any data; [`TorchFile::read_f32`] reads one tensor of the shape
//! its caller expects, with every index checked against the storage the file holds. Nothing is
//! allocated beyond what the pickle's own bytes or the checked tensor need.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use burn::tensor::{bf16, f16};

use crate::pickle::{self, Obj, Pickle, TensorView, Val};
use crate::{BundleError, Result};

/// The largest `data.pkl` read: a state dict's pickle holds names and shapes, not data (a
/// thousand-tensor model's is ~100 KB).
pub const MAX_PICKLE_BYTES: u64 = 64 << 20;

/// Element types of torch storages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageType {
    /// `FloatStorage`.
    F32,
    /// `DoubleStorage`.
    F64,
    /// `HalfStorage`.
    F16,
    /// `BFloat16Storage`.
    BF16,
    /// Integer or boolean storages, by class name; never loaded into a float parameter.
    Other(&'static str),
}

impl StorageType {
    fn from_class(name: &str) -> Option<Self> {
        Some(match name {
            "FloatStorage" => Self::F32,
            "DoubleStorage" => Self::F64,
            "HalfStorage" => Self::F16,
            "BFloat16Storage" => Self::BF16,
            "LongStorage" => Self::Other("int64"),
            "IntStorage" => Self::Other("int32"),
            "ShortStorage" => Self::Other("int16"),
            "CharStorage" => Self::Other("int8"),
            "ByteStorage" => Self::Other("uint8"),
            "BoolStorage" => Self::Other("bool"),
            _ => return None,
        })
    }

    /// Bytes per element, for the float types.
    fn size(self) -> Option<u64> {
        match self {
            Self::F32 => Some(4),
            Self::F64 => Some(8),
            Self::F16 | Self::BF16 => Some(2),
            Self::Other(_) => None,
        }
    }

    /// The torch name of the element type.
    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "float32",
            Self::F64 => "float64",
            Self::F16 => "float16",
            Self::BF16 => "bfloat16",
            Self::Other(n) => n,
        }
    }
}

/// One tensor of the state dict, as declared (nothing read yet).
#[derive(Clone, Debug)]
pub struct TensorEntry {
    /// Element type of its storage.
    pub dtype: StorageType,
    /// Its shape.
    pub shape: Vec<u64>,
    view: TensorView,
    key: String,
    storage_numel: u64,
}

/// An opened `torch.save` archive and its state dict.
pub struct TorchFile {
    path: PathBuf,
    zip: zip::ZipArchive<BufReader<File>>,
    prefix: String,
    big_endian: bool,
    /// The state dict's tensors by name (entries that are not tensors are left out).
    pub tensors: BTreeMap<String, TensorEntry>,
}

impl TorchFile {
    /// Open `path` and find its state dict: the pickled dict itself, or the dict under
    /// `state_dict` / `model_state_dict` of a training checkpoint.
    pub fn open(path: &Path) -> Result<Self> {
        let invalid = |message: String| BundleError::Invalid { path: path.into(), message };
        let mut file = File::open(path).map_err(|e| BundleError::io(path, e))?;
        let mut magic = [0u8; 4];
        let n = file.read(&mut magic).map_err(|e| BundleError::io(path, e))?;
        if n < 4 || &magic != b"PK\x03\x04" {
            return Err(invalid(if n >= 2 && magic[0] == 0x80 {
                "a torch.save file in the legacy format (PyTorch before 1.6, or \
                 _use_new_zipfile_serialization=False): load it in PyTorch and save it again with torch.save"
                    .into()
            } else {
                "not a torch.save file (it is not a zip archive)".into()
            }));
        }
        drop(file);
        let file = File::open(path).map_err(|e| BundleError::io(path, e))?;
        let mut zip = zip::ZipArchive::new(BufReader::new(file))
            .map_err(|e| invalid(format!("not a readable torch.save archive: {e}")))?;
        let pkl = zip
            .file_names()
            .find(|n| n.ends_with("/data.pkl") && n.matches('/').count() == 1)
            .map(str::to_owned)
            .ok_or_else(|| {
                let script = if zip.file_names().any(|n| n.ends_with("constants.pkl")) {
                    " (a TorchScript archive: save model.state_dict() with torch.save instead)"
                } else {
                    ""
                };
                invalid(format!("a zip archive without the <name>/data.pkl of torch.save{script}"))
            })?;
        let prefix = pkl.trim_end_matches("data.pkl").to_string();
        let declared = zip.by_name(&pkl).map(|f| f.size()).unwrap_or(0);
        if declared > MAX_PICKLE_BYTES {
            return Err(invalid(format!(
                "{pkl}: {declared} bytes, over the limit of {MAX_PICKLE_BYTES} for a state dict's pickle"
            )));
        }
        let pickle_bytes = read_entry(&mut zip, &pkl, MAX_PICKLE_BYTES).map_err(|m| invalid(format!("{pkl}: {m}")))?;
        let pickle = pickle::parse(&pickle_bytes).map_err(|e| invalid(format!("{pkl}: {e}")))?;
        drop(pickle_bytes);
        let big_endian = match zip.by_name(&format!("{prefix}byteorder")) {
            Ok(mut f) => {
                let mut s = String::new();
                f.by_ref().take(16).read_to_string(&mut s).map_err(|e| invalid(format!("byteorder: {e}")))?;
                match s.trim() {
                    "little" => false,
                    "big" => true,
                    other => return Err(invalid(format!("byteorder is {other:?}, expected \"little\" or \"big\""))),
                }
            }
            Err(_) => false,
        };
        let tensors = state_dict(&pickle).map_err(|m| invalid(format!("{pkl}: {m}")))?;
        Ok(Self { path: path.into(), zip, prefix, big_endian, tensors })
    }

    /// Read tensor `name`, which must have the shape `expected` (the parameter it is for), as f32
    /// values in row-major order. The shape is checked before anything is allocated, and every
    /// element's index against the storage's declared size and the bytes the archive holds for it.
    pub fn read_f32(&mut self, name: &str, expected: &[usize]) -> Result<Vec<f32>> {
        let path = self.path.clone();
        let big_endian = self.big_endian;
        let invalid = |message: String| BundleError::Invalid { path: path.clone(), message };
        let t = self.tensors.get(name).ok_or_else(|| invalid(format!("no tensor `{name}`")))?.clone();
        if t.shape.len() != expected.len() || t.shape.iter().zip(expected).any(|(&d, &e)| d != e as u64) {
            return Err(invalid(format!(
                "cannot import the PyTorch weights: tensor `{name}` has shape {:?}, the model needs {expected:?}",
                t.shape
            )));
        }
        let size = t.dtype.size().ok_or_else(|| {
            invalid(format!(
                "tensor `{name}` holds {} values; the model's parameters are floating point",
                t.dtype.name()
            ))
        })?;
        let count: u64 = t.shape.iter().product();
        if count == 0 {
            return Ok(Vec::new());
        }
        // The highest element index the view reaches.
        let last = t
            .shape
            .iter()
            .zip(&t.view.strides)
            .try_fold(t.view.offset, |acc, (&n, &s)| (n - 1).checked_mul(s).and_then(|x| acc.checked_add(x)));
        let needed = match last {
            Some(last) if last < t.storage_numel => last + 1,
            _ => {
                return Err(invalid(format!(
                    "tensor `{name}` (shape {:?}, strides {:?}, offset {}) reaches past its storage of {} elements",
                    t.shape, t.view.strides, t.view.offset, t.storage_numel
                )))
            }
        };
        let entry = format!("{}data/{}", self.prefix, t.key);
        let declared = self
            .zip
            .by_name(&entry)
            .map(|f| f.size())
            .map_err(|_| invalid(format!("tensor `{name}`: its storage {entry} is missing from the archive")))?;
        if declared < t.storage_numel.saturating_mul(size) {
            return Err(invalid(format!(
                "tensor `{name}`: storage {entry} declares {} {} elements ({} bytes), the archive holds {declared} bytes",
                t.storage_numel,
                t.dtype.name(),
                t.storage_numel.saturating_mul(size)
            )));
        }
        let bytes = read_entry(&mut self.zip, &entry, needed * size)
            .map_err(|m| invalid(format!("tensor `{name}`: {entry}: {m}")))?;
        if (bytes.len() as u64) < needed * size {
            return Err(invalid(format!(
                "tensor `{name}`: {entry} holds {} bytes, {} are needed (truncated)",
                bytes.len(),
                needed * size
            )));
        }
        let value = |i: u64| -> f32 {
            let at = (i * size) as usize;
            let b = &bytes[at..at + size as usize];
            let word = |n: usize| -> [u8; 8] {
                let mut w = [0u8; 8];
                w[..n].copy_from_slice(b);
                if big_endian {
                    w[..n].reverse();
                }
                w
            };
            match t.dtype {
                StorageType::F32 => f32::from_le_bytes(word(4)[..4].try_into().expect("4 bytes")),
                StorageType::F64 => f64::from_le_bytes(word(8)) as f32,
                StorageType::F16 => f16::from_le_bytes(word(2)[..2].try_into().expect("2 bytes")).to_f32(),
                StorageType::BF16 => bf16::from_le_bytes(word(2)[..2].try_into().expect("2 bytes")).to_f32(),
                StorageType::Other(_) => unreachable!("sizes exist for float types only"),
            }
        };
        let mut out = Vec::with_capacity(count as usize);
        let mut index = vec![0u64; t.shape.len()];
        for _ in 0..count {
            let at = t.view.offset + index.iter().zip(&t.view.strides).map(|(i, s)| i * s).sum::<u64>();
            out.push(value(at));
            for d in (0..index.len()).rev() {
                index[d] += 1;
                if index[d] < t.shape[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        Ok(out)
    }
}

/// Read at most `limit` bytes of an archive entry (the caller checks the length it needs).
fn read_entry(
    zip: &mut zip::ZipArchive<BufReader<File>>,
    name: &str,
    limit: u64,
) -> std::result::Result<Vec<u8>, String> {
    let f = zip.by_name(name).map_err(|e| format!("cannot open it in the archive: {e}"))?;
    let mut bytes = Vec::new();
    f.take(limit).read_to_end(&mut bytes).map_err(|e| format!("cannot read it: {e}"))?;
    Ok(bytes)
}

/// The tensors of the pickled state dict, by name.
fn state_dict(p: &Pickle) -> std::result::Result<BTreeMap<String, TensorEntry>, String> {
    let root = p.dict(p.root).ok_or("the pickled object is not a dict (save model.state_dict())")?;
    let mut tensors = tensors_of(p, root)?;
    if tensors.is_empty() {
        for key in ["state_dict", "model_state_dict"] {
            if let Some((_, v)) = root.iter().find(|(k, _)| p.str(*k) == Some(key)) {
                let inner = p.dict(*v).ok_or_else(|| format!("`{key}` is not a dict"))?;
                tensors = tensors_of(p, inner)?;
                break;
            }
        }
    }
    if tensors.is_empty() {
        return Err("no tensor in it, at the top or under `state_dict` / `model_state_dict`".into());
    }
    Ok(tensors)
}

fn tensors_of(p: &Pickle, dict: &[(Val, Val)]) -> std::result::Result<BTreeMap<String, TensorEntry>, String> {
    let mut out = BTreeMap::new();
    for (k, v) in dict {
        let Some(Obj::Tensor(view)) = p.obj(*v) else { continue };
        let name = p.str(*k).ok_or("a tensor under a key that is not a string")?;
        let Some(Obj::Storage { kind, key, numel }) = p.arena.get(view.storage) else {
            return Err(format!("tensor `{name}` without a storage"));
        };
        let dtype = StorageType::from_class(kind).ok_or_else(|| format!("tensor `{name}` has storage type {kind}"))?;
        out.insert(
            name.to_string(),
            TensorEntry {
                dtype,
                shape: view.shape.clone(),
                view: view.clone(),
                key: key.clone(),
                storage_numel: *numel,
            },
        );
    }
    Ok(out)
}
