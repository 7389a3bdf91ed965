mod base;
mod batch;
mod builder;
mod multithread;
mod strategy;

/// Module for batching items.
pub mod batcher;
/// Module to split a dataloader.
pub mod split;

pub use base::*;
pub use batch::*;
pub use builder::*;
pub use multithread::*;
pub use strategy::*;
