//! [`HeldModel`]: the predictor's Burn model behind a trait object, so that dropping it runs
//! code compiled once, in this crate.
//!
//! Rust compiles a value's drop glue in every crate that drops it, and in release builds it
//! does not share generic code between crates. Dropping a Burn model drops tensors of the
//! `Dispatch` backend, whose drop glue reaches the generic tensor code of every backend it
//! holds (the CUDA and WGPU fusion streams included). So each program that dropped a
//! `Predictor` by value (the `infer` binary, every example, every test binary) would compile all
//! of that again: about a minute of release build per binary. A `Box<dyn Held>` is dropped
//! through its vtable, whose drop function is generated where the box is made: here.

use std::ops::Deref;

use models::precision::ComputeModel;

/// What the predictor asks of its model (one method: the model itself).
trait Held: std::fmt::Debug + Send + Sync {
    /// The model.
    fn model(&self) -> &ComputeModel<crate::Backend>;
}

impl Held for ComputeModel<crate::Backend> {
    fn model(&self) -> &ComputeModel<crate::Backend> {
        self
    }
}

/// A [`ComputeModel`] whose drop is compiled in this crate (module docs).
#[derive(Debug)]
pub(crate) struct HeldModel(Box<dyn Held>);

impl HeldModel {
    /// Hold `model`.
    pub(crate) fn new(model: ComputeModel<crate::Backend>) -> Self {
        Self(Box::new(model))
    }
}

impl Deref for HeldModel {
    type Target = ComputeModel<crate::Backend>;

    fn deref(&self) -> &Self::Target {
        self.0.model()
    }
}
