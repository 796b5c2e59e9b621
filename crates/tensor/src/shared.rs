//! The lock around a graph's state, so that graphs, tensors and contexts can move between
//! threads and be shared by them.
//!
//! A graph's state sits behind one mutex: building an operation or reading a tensor's label
//! takes it for the length of one step and lets go. The library never holds it while it calls
//! code that could take it again (user closures run with it released), because a mutex taken
//! twice by one thread waits on itself forever. Such a second take is a bug of this crate, and
//! it panics with a message saying so rather than hanging: each thread keeps the list of states
//! it holds.

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::graph::State;

/// A graph's state, shared by the handles (graph, tensors, contexts) that point at it.
#[derive(Debug, Clone)]
pub(crate) struct SharedState(Arc<Mutex<State>>);

thread_local! {
    /// The states this thread holds locked, by address.
    static HELD: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

impl SharedState {
    pub(crate) fn new(state: State) -> SharedState {
        SharedState(Arc::new(Mutex::new(state)))
    }

    fn address(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// The state, locked until the guard is dropped. Waits while another thread holds it.
    pub(crate) fn lock(&self) -> StateGuard<'_> {
        let address = self.address();
        HELD.with_borrow_mut(|held| {
            assert!(
                !held.contains(&address),
                "rcannl bug: a graph's state locked twice by one thread (this would deadlock)"
            );
            held.push(address);
        });
        // A panic while the state was locked (a bug, or a failed assertion of a caller's test)
        // leaves it as the RefCell it replaces would have: usable.
        let guard = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        StateGuard { guard, address }
    }

    /// Whether `self` and `other` are the same graph's state.
    pub(crate) fn same(&self, other: &SharedState) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// A graph's state, locked by this thread.
pub(crate) struct StateGuard<'a> {
    guard: MutexGuard<'a, State>,
    address: usize,
}

impl Drop for StateGuard<'_> {
    fn drop(&mut self) {
        let address = self.address;
        HELD.with_borrow_mut(|held| {
            if let Some(at) = held.iter().rposition(|&a| a == address) {
                held.swap_remove(at);
            }
        });
    }
}

impl Deref for StateGuard<'_> {
    type Target = State;

    fn deref(&self) -> &State {
        &self.guard
    }
}

impl DerefMut for StateGuard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.guard
    }
}

#[cfg(test)]
mod tests {
    use crate::Graph;

    #[test]
    fn a_second_lock_by_one_thread_panics_instead_of_hanging() {
        let graph = Graph::default();
        let _first = graph.state.lock();
        let second = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            drop(graph.state.lock());
        }));
        assert!(second.is_err());
    }

    #[test]
    fn two_graphs_lock_independently() {
        let (a, b) = (Graph::default(), Graph::default());
        let first = a.state.lock();
        let second = b.state.lock();
        assert_ne!(first.id, second.id);
    }
}
