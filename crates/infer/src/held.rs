//! [`Held`]: a value behind a trait object, so that dropping it runs code compiled where it was
//! made, not in every crate that drops it.
//!
//! Rust compiles a value's drop glue in every crate that drops it, and in release builds it
//! does not share generic code between crates. Dropping a Burn model drops tensors of the
//! `Dispatch` backend, whose drop glue reaches the generic tensor code of every backend it
//! holds (the CUDA and WGPU fusion streams included). So each program or test binary that
//! dropped a model by value would compile all of that again: about a minute of release build per
//! binary. A `Held` is dropped through its vtable, whose drop function is generated where
//! [`Held::new`] is called: a library makes its models `Held` in a non-generic function, and
//! its callers compile none of it.

use std::ops::{Deref, DerefMut};

/// How a [`Held`] reaches its value (implemented by every `Send + Sync + Debug` type). Its
/// `Debug` goes through the vtable too: a model's `Debug` formats tensors, and a generic
/// `Debug` would be compiled wherever a holder of a `Held` is formatted (derived `Debug` impls
/// are small enough to be inlined into other crates).
trait Slot<T>: Send + Sync {
    fn get(&self) -> &T;
    fn get_mut(&mut self) -> &mut T;
    fn debug(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result;
}

impl<T: Send + Sync + std::fmt::Debug> Slot<T> for T {
    fn get(&self) -> &T {
        self
    }
    fn get_mut(&mut self) -> &mut T {
        self
    }
    fn debug(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// A `T` whose drop is compiled in the crate that called [`Held::new`] (module docs); it
/// dereferences to the `T`.
pub struct Held<T: 'static>(Box<dyn Slot<T>>);

impl<T: Send + Sync + std::fmt::Debug + 'static> Held<T> {
    /// Hold `value`. Its drop glue is generated here, in the calling crate: call this from a
    /// non-generic function of the crate that should compile it.
    pub fn new(value: T) -> Self {
        Self(Box::new(value))
    }
}

impl<T: 'static> Deref for Held<T> {
    type Target = T;

    fn deref(&self) -> &T {
        (*self.0).get()
    }
}

impl<T: 'static> DerefMut for Held<T> {
    fn deref_mut(&mut self) -> &mut T {
        (*self.0).get_mut()
    }
}

impl<T: 'static> std::fmt::Debug for Held<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.debug(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[derive(Debug)]
    struct Counted(Arc<AtomicUsize>, Vec<u32>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_held_value_is_reached_changed_formatted_and_dropped_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut held = Held::new(Counted(drops.clone(), vec![1, 2]));
        held.1.push(3);
        assert_eq!(held.1, [1, 2, 3]);
        assert!(format!("{held:?}").starts_with("Counted("), "{held:?}");
        drop(held);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }
}
