mod base;
mod client;
pub mod security;
mod server;

pub use base::*;
pub use client::*;
pub use server::*;
