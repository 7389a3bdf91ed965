//! Device faults: Burn 0.21 raises a device out-of-memory (and other runtime failures of the
//! CUDA or WGPU runtime) as a panic, not an error. This module recognises such a panic and
//! records each fault a run survived. The policy (continue from the last checkpoint with half
//! the micro-batch) is in [`crate::run::run`]; injected faults for drills in [`crate::inject`].

use std::any::Any;

use serde::{Deserialize, Serialize};

/// What kind of device failure a panic was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// The device ran out of memory.
    OutOfMemory,
    /// Another failure of the device or its runtime (device lost, launch failure).
    Device,
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::OutOfMemory => "out of memory",
            Self::Device => "device fault",
        })
    }
}

/// One device fault a run survived (in `state.json` of later checkpoints, `events.jsonl` and
/// `summary.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceFault {
    /// The optimizer step (0-based) that failed.
    pub step: usize,
    /// Its epoch (1-based).
    pub epoch: usize,
    /// Out of memory or another device fault.
    pub kind: FaultKind,
    /// The runtime's message (first line).
    pub message: String,
    /// Micro-batch size before and after.
    pub micro_batch: [usize; 2],
    /// Accumulation steps before and after.
    pub accumulation_steps: [usize; 2],
    /// The checkpoint step the run continued from.
    pub resumed_from_step: usize,
}

impl DeviceFault {
    /// The line for logs and `events.jsonl`.
    pub fn describe(&self) -> String {
        format!(
            "{} at step {}: {}; continuing from the checkpoint of step {} with micro-batch {} -> {} and accumulation {} -> {} (same effective batch)",
            self.kind,
            self.step,
            self.message,
            self.resumed_from_step,
            self.micro_batch[0],
            self.micro_batch[1],
            self.accumulation_steps[0],
            self.accumulation_steps[1]
        )
    }
}

/// The text of a panic payload (one definition, in `data`).
pub use data::guard::panic_message;

/// A caught panic that is a device fault: its kind and the first line of its message (`None`
/// for any other panic, which is a bug and should propagate).
pub fn device_fault(payload: &(dyn Any + Send)) -> Option<(FaultKind, String)> {
    let message = panic_message(payload);
    let kind = classify(&message)?;
    Some((kind, message.lines().next().unwrap_or_default().to_string()))
}

/// Whether a panic message is a device failure, and which. Matches the wording of cubecl's
/// `OutOfMemory`/`BufferTooBig` errors, CUDA's `CUDA_ERROR_OUT_OF_MEMORY`, wgpu's out-of-memory
/// and device-lost errors. Anything else (a bug) is not a device fault and is not retried.
pub fn classify(message: &str) -> Option<FaultKind> {
    let m = message.to_ascii_lowercase();
    let oom = ["out of memory", "out-of-memory", "outofmemory", "out_of_memory", "can't allocate buffer"];
    let device = ["device lost", "devicelost", "device_lost", "cuda_error", "launch failed", "illegal address"];
    if oom.iter().any(|k| m.contains(k)) {
        Some(FaultKind::OutOfMemory)
    } else if device.iter().any(|k| m.contains(k)) {
        Some(FaultKind::Device)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_are_classified_by_their_wording() {
        let cubecl = "An out-of-memory error happened during launch\nCaused by:\n  alloc";
        assert_eq!(classify(cubecl), Some(FaultKind::OutOfMemory));
        assert_eq!(classify("DriverError(CUDA_ERROR_OUT_OF_MEMORY, \"out of memory\")"), Some(FaultKind::OutOfMemory));
        assert_eq!(classify("can't allocate buffer of size: 123"), Some(FaultKind::OutOfMemory));
        assert_eq!(classify("Parent device is lost"), None);
        assert_eq!(classify("wgpu error: Device lost"), Some(FaultKind::Device));
        assert_eq!(classify("index out of bounds: the len is 3 but the index is 7"), None);
    }
}
