mod base;
mod display;
mod initializer;
mod param;
mod quantize;
#[cfg(feature = "std")]
mod reinit;

pub use base::*;
pub use display::*;
pub use initializer::*;
pub use param::*;
pub use quantize::*;

#[cfg(feature = "std")]
pub use reinit::*;
