mod base;
mod execution;

pub use base::*;
