//! What modules beyond the graph's core keep with a graph's state: one value per type, made at
//! first use. An operation remembers here what it needs about the tensors it made (the ids of
//! one-hot rows, the steps of an einsum along a path, the updates training steps run), so that
//! the graph holds it without naming the operation.

use std::any::{Any, TypeId};
use std::collections::HashMap;

/// One value of each type that a module keeps with a graph.
#[derive(Default)]
pub(crate) struct Extensions {
    by_type: HashMap<TypeId, Box<dyn Any + Send>>,
}

impl Extensions {
    /// The value of type `T`, if one was kept.
    pub(crate) fn get<T: Any>(&self) -> Option<&T> {
        self.by_type
            .get(&TypeId::of::<T>())
            .and_then(|value| value.downcast_ref())
    }

    /// The value of type `T`, made by `T::default()` at first use.
    pub(crate) fn get_mut<T: Any + Send + Default>(&mut self) -> &mut T {
        self.by_type
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Box::new(T::default()))
            .downcast_mut()
            .expect("a value is kept under its own type")
    }
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extensions")
            .field("values", &self.by_type.len())
            .finish()
    }
}
