use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::DeviceError;

/// What the user asked for: `auto`, `cpu`, `cuda`, `cuda:N`, `wgpu`, `wgpu:N`.
///
/// `cuda` and `wgpu` without an index mean "the best device of that kind"; with an index they name
/// exactly one device and it is an error if that device does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceSpec {
    /// The best available device.
    #[default]
    Auto,
    /// The CPU backend.
    Cpu,
    /// A CUDA GPU (`None` = the best one).
    Cuda(Option<usize>),
    /// A WGPU adapter (`None` = the best one).
    Wgpu(Option<usize>),
}

impl FromStr for DeviceSpec {
    type Err = DeviceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let given = s.trim().to_ascii_lowercase();
        let invalid = |why: String| DeviceError::InvalidSpec { given: s.to_string(), why };
        let (kind, index) = match given.split_once(':') {
            Some((k, i)) => (k, Some(i)),
            None => (given.as_str(), None),
        };
        let index = match index {
            None => None,
            Some(i) => Some(i.parse::<usize>().map_err(|_| {
                invalid(format!("the index after `{kind}:` must be a non-negative integer, got `{i}`"))
            })?),
        };
        match (kind, index) {
            ("auto", None) => Ok(Self::Auto),
            ("cpu", None) => Ok(Self::Cpu),
            ("auto" | "cpu", Some(_)) => Err(invalid(format!("`{kind}` takes no index"))),
            ("cuda" | "gpu", i) => Ok(Self::Cuda(i)),
            ("wgpu" | "vulkan" | "metal", i) => Ok(Self::Wgpu(i)),
            ("", _) => Err(invalid("the spec is empty".into())),
            (other, _) => Err(invalid(format!("unknown device kind `{other}`"))),
        }
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => write!(f, "auto"),
            Self::Cpu => write!(f, "cpu"),
            Self::Cuda(None) => write!(f, "cuda"),
            Self::Cuda(Some(i)) => write!(f, "cuda:{i}"),
            Self::Wgpu(None) => write!(f, "wgpu"),
            Self::Wgpu(Some(i)) => write!(f, "wgpu:{i}"),
        }
    }
}

impl Serialize for DeviceSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DeviceSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_accepted_form() {
        assert_eq!("auto".parse::<DeviceSpec>().unwrap(), DeviceSpec::Auto);
        assert_eq!(" CPU ".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cpu);
        assert_eq!("cuda".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cuda(None));
        assert_eq!("cuda:1".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cuda(Some(1)));
        assert_eq!("wgpu".parse::<DeviceSpec>().unwrap(), DeviceSpec::Wgpu(None));
        assert_eq!("wgpu:0".parse::<DeviceSpec>().unwrap(), DeviceSpec::Wgpu(Some(0)));
    }

    #[test]
    fn display_round_trips() {
        for s in ["auto", "cpu", "cuda", "cuda:3", "wgpu", "wgpu:2"] {
            assert_eq!(s.parse::<DeviceSpec>().unwrap().to_string(), s);
        }
    }

    #[test]
    fn bad_specs_name_the_input_and_the_accepted_forms() {
        let err = "cuda:x".parse::<DeviceSpec>().unwrap_err().to_string();
        assert!(err.contains("`cuda:x`"), "{err}");
        assert!(err.contains("non-negative integer"), "{err}");
        assert!(err.contains("auto, cpu, cuda, cuda:N, wgpu, wgpu:N"), "{err}");

        let err = "tpu".parse::<DeviceSpec>().unwrap_err().to_string();
        assert!(err.contains("unknown device kind `tpu`"), "{err}");

        let err = "cpu:1".parse::<DeviceSpec>().unwrap_err().to_string();
        assert!(err.contains("takes no index"), "{err}");

        let err = "cuda:-1".parse::<DeviceSpec>().unwrap_err().to_string();
        assert!(err.contains("`-1`"), "{err}");

        assert!("".parse::<DeviceSpec>().is_err());
    }
}
