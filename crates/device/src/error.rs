use thiserror::Error;

/// Everything that can go wrong when a device is asked for.
#[derive(Debug, Error)]
pub enum DeviceError {
    /// The text of a device spec could not be parsed.
    #[error("invalid device spec `{given}`: {why}; expected one of: auto, cpu, cuda, cuda:N, wgpu, wgpu:N")]
    InvalidSpec { given: String, why: String },

    /// An explicit device was asked for and is not usable on this machine.
    #[error("device `{spec}` is not available: {reason}")]
    Unavailable { spec: String, reason: String },

    /// A backend was selected that this build was compiled without.
    #[error("backend `{backend}` is not compiled into this build (enable the `{backend}` cargo feature)")]
    NotCompiled { backend: &'static str },

    /// Writing a monitor or report file failed.
    #[error("cannot write {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = DeviceError> = std::result::Result<T, E>;
