//! [`Compute`]: how a predictor computes, one choice for the library and the CLI, every value
//! of which can run (on a device that has it).

use device::PrecisionSetting;

/// How a [`crate::Predictor`] computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compute {
    /// Floating point at a precision: `Auto` takes the device's choice, as training does (f32 on
    /// the CPU); an explicit f16/bf16 must be usable on the device. On the CPU at f32 a
    /// conv-transformer runs as [`engine`]'s f32 eval graph unless
    /// `PredictorOptions::eval_graph` is off.
    Float(PrecisionSetting),
    /// [`engine`]'s int8 eval graph on the CPU (BatchNorm folded, dense layers in int8;
    /// conv-transformers only).
    Int8,
}

impl Default for Compute {
    fn default() -> Self {
        Self::Float(PrecisionSetting::Auto)
    }
}

impl std::str::FromStr for Compute {
    type Err = String;

    /// `auto`, `f32`, `f16`, `bf16` or `int8`.
    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim().eq_ignore_ascii_case("int8") {
            return Ok(Self::Int8);
        }
        s.parse::<PrecisionSetting>()
            .map(Self::Float)
            .map_err(|e| format!("{e} (or int8: the int8 eval graph on the CPU)"))
    }
}

impl std::fmt::Display for Compute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Float(p) => write!(f, "{p}"),
            Self::Int8 => f.write_str("int8"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_parses_and_prints_every_choice() {
        for text in ["auto", "f32", "f16", "bf16", "int8"] {
            let c: Compute = text.parse().unwrap();
            assert_eq!(c.to_string(), text);
        }
        assert_eq!("INT8".parse::<Compute>(), Ok(Compute::Int8));
        assert!("int4".parse::<Compute>().unwrap_err().contains("or int8"));
    }
}
