pub(crate) mod validator;

mod base;
mod explorer;
mod ordering;
mod policy;
mod processor;
pub(crate) mod trace;

pub(crate) use trace::{log_execution_table, op_kind};

pub use base::*;
pub use ordering::*;

pub(crate) use explorer::*;
pub(crate) use policy::*;
pub(crate) use processor::*;

#[cfg(test)]
pub(crate) mod tests;
