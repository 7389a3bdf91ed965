//! No code: this package holds the test binary `suite` (tests/suite.rs), which compiles the
//! integration tests of `bundle`, `data`, `models`, `engine` and `learn` (each in
//! `crates/<crate>/tests/`) as modules of one binary, so Burn's generic code is instantiated for
//! them once. Run one crate's tests with `cargo test --release -p suite -- data::`.
