//! Test support for SignFlow's crates (a dev-dependency only; nothing in the product uses it):
//! - [`mutate`]: seeded byte mutations for the fuzz tests of every reader;
//! - [`pose`]: a `.pose` writer for test recordings.
#![warn(missing_docs)]

pub mod mutate;
pub mod pose;
