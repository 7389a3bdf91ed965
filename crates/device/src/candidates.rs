//! The usable devices of each kind, for a choice made by measuring (`Choose::Fastest`): the
//! fixed ranking puts any GPU before the CPU, but for a small model or batch the CPU can be
//! faster (kernel launches, transfers and, on software adapters such as llvmpipe, emulation cost
//! more than the arithmetic). Callers time their real workload on each candidate.

use serde::{Deserialize, Serialize};

use crate::select::{SelectionPolicy, Target};
use crate::spec::DeviceSpec;
use crate::SelectedDevice;

/// How `auto` picks among the usable devices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Choose {
    /// The fixed ranking: CUDA, then a real WGPU adapter, then the CPU.
    #[default]
    Ranked,
    /// Measured on the caller's workload: the fastest device.
    Fastest,
}

impl std::str::FromStr for Choose {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "ranked" => Ok(Self::Ranked),
            "fastest" => Ok(Self::Fastest),
            other => Err(format!("expected `ranked` or `fastest`, got `{other}`")),
        }
    }
}

/// The best usable device of each kind (CUDA, WGPU, CPU, in the ranking's order) under
/// `policy`, and a line for each kind left out saying why. Software WGPU adapters count only
/// with `policy.allow_software_wgpu`.
pub fn candidates(policy: &SelectionPolicy) -> (Vec<SelectedDevice>, Vec<String>) {
    let mut found = Vec::new();
    let mut skipped = Vec::new();
    for spec in [DeviceSpec::Cuda(None), DeviceSpec::Wgpu(None), DeviceSpec::Cpu] {
        match crate::resolve(&spec, policy) {
            Ok(d) => {
                let software = matches!(&d.selection.target, Target::Wgpu { kind, .. } if kind.is_software());
                if software && !policy.allow_software_wgpu {
                    skipped.push(format!("{} (software adapter; allow_software_wgpu is off)", d.selection.name));
                } else {
                    found.push(d);
                }
            }
            Err(e) => skipped.push(format!("{spec}: {e}")),
        }
    }
    (found, skipped)
}

/// The device reason of a measured choice: `fastest of A 812 samples/s, B 41 samples/s (what)`.
pub fn fastest_reason(figures: &[(String, String)], what: &str) -> String {
    let parts: Vec<String> = figures.iter().map(|(name, figure)| format!("{name} {figure}")).collect();
    format!("fastest of {} ({what})", parts.join(", "))
}
