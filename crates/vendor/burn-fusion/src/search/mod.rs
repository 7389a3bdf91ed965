mod block;
mod optimization;

pub(super) mod merging;
pub(super) use block::*;

pub use optimization::*;
