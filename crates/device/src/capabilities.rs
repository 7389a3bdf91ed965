//! Which float dtypes a device can use, which are fast, and the mixed-precision dtype `auto` means.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::inventory::Inventory;
use crate::select::Target;

/// A compute precision for model math.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// 32-bit float.
    F32,
    /// 16-bit IEEE half.
    F16,
    /// bfloat16.
    Bf16,
}

impl Precision {
    /// Burn's float dtype for this precision.
    pub fn float_dtype(self) -> burn::tensor::FloatDType {
        match self {
            Self::F32 => burn::tensor::FloatDType::F32,
            Self::F16 => burn::tensor::FloatDType::F16,
            Self::Bf16 => burn::tensor::FloatDType::BF16,
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::F32 => "f32",
            Self::F16 => "f16",
            Self::Bf16 => "bf16",
        })
    }
}

impl FromStr for Precision {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "f32" | "fp32" | "float32" => Ok(Self::F32),
            "f16" | "fp16" | "float16" | "half" => Ok(Self::F16),
            "bf16" | "bfloat16" => Ok(Self::Bf16),
            other => Err(format!("unknown precision `{other}`; expected f32, f16 or bf16")),
        }
    }
}

/// A precision request: what `training.precision`, `infer --precision` and
/// `PredictorOptions::precision` take. `auto` means the same everywhere: the device's
/// [`Capabilities::amp`] (bf16 on CUDA >= 8.0, f16 on CUDA 7.x and on WGPU adapters with
/// SHADER_F16, f32 on the CPU and on software adapters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PrecisionSetting {
    /// Ask the device.
    #[default]
    Auto,
    /// f32 compute.
    F32,
    /// f16 compute (with loss scaling in training).
    F16,
    /// bf16 compute.
    Bf16,
}

impl PrecisionSetting {
    /// The explicit precision asked for (`None` for `auto`).
    pub fn explicit(self) -> Option<Precision> {
        match self {
            Self::Auto => None,
            Self::F32 => Some(Precision::F32),
            Self::F16 => Some(Precision::F16),
            Self::Bf16 => Some(Precision::Bf16),
        }
    }

    /// Resolve the request on a device. `auto` takes the device's choice; an explicit request the
    /// device cannot run falls back (bf16 -> f16 -> f32) with a warning.
    pub fn resolve(self, caps: &Capabilities) -> ResolvedPrecision {
        let ok = |precision: Precision, reason: String| ResolvedPrecision { precision, reason, warning: None };
        match self.explicit() {
            None => ok(caps.amp, format!("auto: {}", caps.amp_reason)),
            Some(p) if caps.supports(p) => ok(p, "requested".into()),
            Some(Precision::Bf16) if caps.supports(Precision::F16) => ResolvedPrecision {
                precision: Precision::F16,
                reason: "bf16 requested, not supported here".into(),
                warning: Some("bf16 is not supported on this device; falling back to f16".into()),
            },
            Some(_) => ResolvedPrecision {
                precision: Precision::F32,
                reason: "half precision requested, not supported here".into(),
                warning: Some("neither f16 nor bf16 is supported on this device; computing in f32".into()),
            },
        }
    }
}

impl fmt::Display for PrecisionSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.explicit() {
            None => f.write_str("auto"),
            Some(p) => p.fmt(f),
        }
    }
}

impl FromStr for PrecisionSetting {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim().eq_ignore_ascii_case("auto") {
            return Ok(Self::Auto);
        }
        match s.parse::<Precision>() {
            Ok(Precision::F32) => Ok(Self::F32),
            Ok(Precision::F16) => Ok(Self::F16),
            Ok(Precision::Bf16) => Ok(Self::Bf16),
            Err(_) => Err(format!("unknown precision `{}`; expected auto, f32, f16 or bf16", s.trim())),
        }
    }
}

impl Serialize for PrecisionSetting {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Accepts the same names and aliases as [`FromStr`] (`auto`, `f32`/`fp32`/`float32`,
/// `f16`/`fp16`/`float16`/`half`, `bf16`/`bfloat16`), so a config file and a flag agree.
impl<'de> Deserialize<'de> for PrecisionSetting {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A precision request resolved on a device, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedPrecision {
    /// The compute precision.
    pub precision: Precision,
    /// Why (the device's reason for `auto`, or "requested").
    pub reason: String,
    /// Set when an explicit request could not be honoured.
    pub warning: Option<String>,
}

impl From<Precision> for PrecisionSetting {
    fn from(p: Precision) -> Self {
        match p {
            Precision::F32 => Self::F32,
            Precision::F16 => Self::F16,
            Precision::Bf16 => Self::Bf16,
        }
    }
}

/// Support of one dtype on one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DtypeSupport {
    /// The dtype.
    pub dtype: Precision,
    /// Tensors of this dtype work for general arithmetic.
    pub usable: bool,
    /// Computing in it is faster than f32 here (tensor cores, native half ALUs).
    pub fast: bool,
}

/// What one device can compute in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// Support of f32, f16 and bf16.
    pub dtypes: Vec<DtypeSupport>,
    /// What `precision = "auto"` resolves to.
    pub amp: Precision,
    /// Why `amp` is what it is.
    pub amp_reason: String,
}

impl Capabilities {
    /// Whether `p` is usable for general arithmetic here.
    pub fn supports(&self, p: Precision) -> bool {
        self.dtypes.iter().any(|d| d.dtype == p && d.usable)
    }
}

fn caps(f16: (bool, bool), bf16: (bool, bool), amp: Precision, reason: String) -> Capabilities {
    Capabilities {
        dtypes: vec![
            DtypeSupport { dtype: Precision::F32, usable: true, fast: true },
            DtypeSupport { dtype: Precision::F16, usable: f16.0, fast: f16.1 },
            DtypeSupport { dtype: Precision::Bf16, usable: bf16.0, fast: bf16.1 },
        ],
        amp,
        amp_reason: reason,
    }
}

/// Capabilities of `target`, from the probe results alone.
pub fn capabilities(target: &Target, inv: &Inventory) -> Capabilities {
    match target {
        Target::Cuda { ordinal } => {
            let cc = inv.cuda.gpus.iter().find(|g| g.ordinal == *ordinal).map(|g| g.compute_capability);
            let (major, minor) = cc.unwrap_or((0, 0));
            let v = format!("compute capability {major}.{minor}");
            if major >= 8 {
                caps((true, true), (true, true), Precision::Bf16, format!("{v} >= 8.0: bf16 tensor cores"))
            } else if major == 7 {
                caps((true, true), (false, false), Precision::F16, format!("{v}: f16 tensor cores, no native bf16"))
            } else if (major, minor) >= (5, 3) {
                caps(
                    (true, false),
                    (false, false),
                    Precision::F32,
                    format!("{v}: no tensor cores, f16 gives no speed-up"),
                )
            } else {
                caps((false, false), (false, false), Precision::F32, format!("{v}: no half-precision arithmetic"))
            }
        }
        Target::Wgpu { index, .. } => {
            let a = inv.wgpu.adapters.iter().find(|a| a.index == *index);
            let f16 = a.is_some_and(|a| a.shader_f16);
            let software = a.is_none_or(|a| a.software);
            if f16 && !software {
                caps(
                    (true, true),
                    (false, false),
                    Precision::F16,
                    "adapter supports SHADER_F16; no bf16 arithmetic on WGPU".into(),
                )
            } else if f16 {
                caps(
                    (true, false),
                    (false, false),
                    Precision::F32,
                    "software adapter: f16 is emulated, no speed-up".into(),
                )
            } else {
                caps(
                    (false, false),
                    (false, false),
                    Precision::F32,
                    "adapter lacks SHADER_F16; no bf16 arithmetic on WGPU".into(),
                )
            }
        }
        Target::Cpu => caps(
            (inv.cpu.supports_f16, false),
            (inv.cpu.supports_bf16, false),
            Precision::F32,
            "CPU backend: f16/bf16 work but run slower than f32 (measured on Flex: bf16 train step ~2x slower)".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precision_settings_parse_resolve_and_fall_back() {
        assert_eq!("AUTO".parse::<PrecisionSetting>().unwrap(), PrecisionSetting::Auto);
        assert_eq!("half".parse::<PrecisionSetting>().unwrap(), PrecisionSetting::F16);
        assert_eq!("bfloat16".parse::<PrecisionSetting>().unwrap(), PrecisionSetting::Bf16);
        assert!("f8".parse::<PrecisionSetting>().unwrap_err().contains("expected auto, f32, f16 or bf16"));
        assert_eq!(PrecisionSetting::Bf16.to_string(), "bf16");
        let caps = |f16: bool, bf16: bool, amp: Precision| Capabilities {
            dtypes: vec![
                DtypeSupport { dtype: Precision::F32, usable: true, fast: true },
                DtypeSupport { dtype: Precision::F16, usable: f16, fast: f16 },
                DtypeSupport { dtype: Precision::Bf16, usable: bf16, fast: bf16 },
            ],
            amp,
            amp_reason: "test".into(),
        };
        let r = PrecisionSetting::Bf16.resolve(&caps(true, false, Precision::F16));
        assert_eq!(r.precision, Precision::F16);
        assert!(r.warning.unwrap().contains("falling back to f16"));
        let r = PrecisionSetting::F16.resolve(&caps(false, false, Precision::F32));
        assert_eq!(r.precision, Precision::F32);
        assert!(r.warning.is_some());
        let r = PrecisionSetting::Auto.resolve(&caps(true, true, Precision::Bf16));
        assert_eq!((r.precision, r.warning, r.reason.as_str()), (Precision::Bf16, None, "auto: test"));
        let r = PrecisionSetting::F32.resolve(&caps(true, true, Precision::Bf16));
        assert_eq!((r.precision, r.reason.as_str()), (Precision::F32, "requested"));
    }

    #[test]
    fn precision_parses_and_prints() {
        assert_eq!("BF16".parse::<Precision>().unwrap(), Precision::Bf16);
        assert_eq!("half".parse::<Precision>().unwrap(), Precision::F16);
        assert_eq!(Precision::Bf16.to_string(), "bf16");
        assert!("f8".parse::<Precision>().unwrap_err().contains("expected f32, f16 or bf16"));
    }
}
