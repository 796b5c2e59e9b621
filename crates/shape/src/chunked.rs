//! A vector stored in chunks of fixed capacity, for the session's and the solver's per-tensor,
//! per-operation and per-variable records, which only ever grow by one at the end.
//!
//! A `Vec` grows by moving everything into a block twice as large: for records that reach
//! hundreds of megabytes in a large graph, that is the whole of them copied at every doubling.
//! Chunks never move; a new one is added when the last is full.

use std::ops::{Index, IndexMut};

/// Items per chunk.
const CHUNK: usize = 1024;

#[derive(Debug, Clone)]
pub(crate) struct ChunkedVec<T> {
    /// Every chunk but the last is full.
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for ChunkedVec<T> {
    fn default() -> Self {
        ChunkedVec {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T> ChunkedVec<T> {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn push(&mut self, item: T) {
        match self.chunks.last_mut() {
            Some(last) if last.len() < CHUNK => last.push(item),
            _ => {
                let mut chunk = Vec::with_capacity(CHUNK);
                chunk.push(item);
                self.chunks.push(chunk);
            }
        }
        self.len += 1;
    }

    pub(crate) fn pop(&mut self) -> Option<T> {
        let last = self.chunks.last_mut()?;
        let item = last.pop();
        if last.is_empty() {
            self.chunks.pop();
        }
        self.len -= 1;
        item
    }

    pub(crate) fn get(&self, index: usize) -> Option<&T> {
        self.chunks.get(index / CHUNK)?.get(index % CHUNK)
    }

    /// Grows to `len` items, each new one made by `fill`.
    pub(crate) fn grow_to(&mut self, len: usize, mut fill: impl FnMut() -> T) {
        while self.len < len {
            self.push(fill());
        }
    }

    /// The items in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flatten()
    }
}

impl<T> Index<usize> for ChunkedVec<T> {
    type Output = T;

    fn index(&self, index: usize) -> &T {
        &self.chunks[index / CHUNK][index % CHUNK]
    }
}

impl<T> IndexMut<usize> for ChunkedVec<T> {
    fn index_mut(&mut self, index: usize) -> &mut T {
        &mut self.chunks[index / CHUNK][index % CHUNK]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_keep_their_places_across_chunks() {
        let mut items = ChunkedVec::default();
        let n = 2 * CHUNK + 3;
        for i in 0..n {
            items.push(i);
        }
        assert_eq!(items.len(), n);
        assert!((0..n).all(|i| items[i] == i && items.get(i) == Some(&i)));
        assert_eq!(items.get(n), None);
        assert!(items.iter().copied().eq(0..n));
        items[CHUNK] = 7;
        assert_eq!(items[CHUNK], 7);
        // Popping across a chunk boundary, then growing again.
        for expected in (2 * CHUNK - 1..n).rev() {
            assert_eq!(items.pop(), Some(expected));
        }
        assert_eq!(items.len(), 2 * CHUNK - 1);
        items.grow_to(2 * CHUNK + 1, || 0);
        assert_eq!(items.len(), 2 * CHUNK + 1);
        assert_eq!(items[2 * CHUNK - 2], 2 * CHUNK - 2);
        assert_eq!((items[2 * CHUNK - 1], items[2 * CHUNK]), (0, 0));
        let mut empty: ChunkedVec<u8> = ChunkedVec::default();
        assert_eq!(empty.pop(), None);
        assert_eq!(empty.iter().count(), 0);
    }
}
