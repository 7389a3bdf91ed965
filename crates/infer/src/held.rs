//! [`HeldModel`]: the predictor's Burn model, dropped by code compiled once, in this crate.
//!
//! Rust compiles a value's drop glue in every crate that drops it, and in release builds it
//! does not share generic code between crates. Dropping a Burn model drops tensors of the
//! `Dispatch` backend, whose drop glue reaches the generic tensor code of every backend it
//! holds (the CUDA and WGPU fusion streams included). So each program that dropped a
//! `Predictor` (the `infer` binary, every example, every test binary) compiled all of that
//! again: about a minute of release build per binary. Behind [`ManuallyDrop`] with a drop that
//! is never inlined, the model's drop glue is compiled here only.

use std::mem::ManuallyDrop;
use std::ops::Deref;

use models::precision::ComputeModel;

/// A [`ComputeModel`] whose drop is compiled in this crate (module docs).
#[derive(Debug)]
pub(crate) struct HeldModel(ManuallyDrop<ComputeModel<crate::Backend>>);

impl HeldModel {
    /// Hold `model`.
    pub(crate) fn new(model: ComputeModel<crate::Backend>) -> Self {
        Self(ManuallyDrop::new(model))
    }
}

impl Deref for HeldModel {
    type Target = ComputeModel<crate::Backend>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Drop for HeldModel {
    #[inline(never)]
    fn drop(&mut self) {
        // SAFETY: this is the held model's only drop, and nothing reads it afterwards: the
        // `HeldModel` that owns it is being dropped.
        unsafe { ManuallyDrop::drop(&mut self.0) }
    }
}
