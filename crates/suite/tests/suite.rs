//! The integration tests of `bundle`, `data`, `device`, `models`, `engine` and `learn` as one
//! binary (see Cargo.toml).
//! Filter by crate: `cargo test --release -p suite -- models::`.

#[path = "../../bundle/tests/bundle.rs"]
mod bundle;
#[path = "../../data/tests/data.rs"]
mod data;
#[path = "../../device/tests/device.rs"]
mod device;
#[path = "../../engine/tests/engine.rs"]
mod engine;
#[path = "../../learn/tests/learn.rs"]
mod learn;
#[path = "../../models/tests/models.rs"]
mod models;
