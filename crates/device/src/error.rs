use thiserror::Error;

/// Everything that can go wrong when a device is asked for.
#[derive(Debug, Error)]
pub enum DeviceError {
    /// The text of a device spec could not be parsed.
    #[error("invalid device spec `{given}`: {why}; expected one of: auto, cpu, cuda, cuda:N, wgpu, wgpu:N")]
    InvalidSpec {
        /// The text given.
        given: String,
        /// What is wrong with it.
        why: String,
    },

    /// An explicit device was asked for and is not usable on this machine.
    #[error("device `{spec}` is not available: {reason}")]
    Unavailable {
        /// The spec asked for.
        spec: String,
        /// Why it cannot be used.
        reason: String,
    },

    /// A backend was selected that this build was compiled without.
    #[error("backend `{backend}` is not compiled into this build (enable the `{backend}` cargo feature)")]
    NotCompiled {
        /// `cuda` or `wgpu`.
        backend: &'static str,
    },

    /// Writing a monitor or report file failed.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// `Result` with [`DeviceError`].
pub type Result<T, E = DeviceError> = std::result::Result<T, E>;
