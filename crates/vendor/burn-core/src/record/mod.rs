mod primitive;
mod tensor;

mod base;
mod memory;
mod recorder;
mod settings;

pub use base::*;
pub use memory::*;
pub use recorder::*;
pub use settings::*;

#[cfg(feature = "std")]
mod file;
#[cfg(feature = "std")]
pub use file::*;

pub use primitive::ParamSerde;

#[cfg(feature = "record-item-custom-serde")]
pub mod serde;
