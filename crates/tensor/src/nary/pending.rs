//! The list of operands pending along a contraction path, in the order they were made: the
//! operands first, then each step's result. A [`Path`](super::Path) names operands by their
//! position in this list; a Fenwick tree over the ids still pending converts positions and ids
//! in logarithmic time, so following a path of n steps takes n log n, not n².

/// The ids (`0..operands` for the operands, then one per step's result, in order) still pending.
#[derive(Debug)]
pub(super) struct Pending {
    /// A Fenwick tree of 0/1 over ids: node `k` (from 1) counts the pending ids in
    /// `k - lowbit(k) .. k`.
    tree: Vec<usize>,
    /// The ids given so far.
    made: usize,
    /// The ids still pending.
    len: usize,
}

impl Pending {
    /// `operands` pending operands, with room for the results of a path's steps.
    pub(super) fn new(operands: usize) -> Pending {
        let mut pending = Pending {
            tree: vec![0; 2 * operands.max(1)],
            made: 0,
            len: 0,
        };
        for _ in 0..operands {
            pending.push();
        }
        pending
    }

    /// The id of a new pending entry (a step's result), at the end of the list.
    pub(super) fn push(&mut self) -> usize {
        let id = self.made;
        self.made += 1;
        self.add(id, true);
        id
    }

    /// Takes `id` (pending) out of the list.
    pub(super) fn remove(&mut self, id: usize) {
        self.add(id, false);
    }

    /// The position of pending `id` in the list: how many pending ids are below it.
    pub(super) fn position(&self, id: usize) -> usize {
        let mut count = 0;
        let mut k = id;
        while k > 0 {
            count += self.tree[k - 1];
            k &= k - 1;
        }
        count
    }

    /// The id at `position` in the list, if the list is that long.
    pub(super) fn id_at(&self, position: usize) -> Option<usize> {
        if position >= self.len {
            return None;
        }
        // Descend the tree for the largest prefix holding at most `position` pending ids.
        let mut remaining = position;
        let mut k = 0;
        let mut step = self.tree.len().next_power_of_two();
        while step > 0 {
            let next = k + step;
            if next <= self.tree.len() && self.tree[next - 1] <= remaining {
                k = next;
                remaining -= self.tree[next - 1];
            }
            step /= 2;
        }
        Some(k)
    }

    fn add(&mut self, id: usize, pending: bool) {
        let mut k = id + 1;
        while k <= self.tree.len() {
            if pending {
                self.tree[k - 1] += 1;
            } else {
                self.tree[k - 1] -= 1;
            }
            k += k & k.wrapping_neg();
        }
        if pending {
            self.len += 1;
        } else {
            self.len -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_and_ids_follow_the_list() {
        // The list as a plain vector of ids, beside the tree.
        let mut list: Vec<usize> = (0..7).collect();
        let mut pending = Pending::new(7);
        for (i, j) in [(0, 3), (2, 4), (1, 0), (0, 3), (1, 2), (0, 1)] {
            let (a, b) = (list[i], list[j]);
            assert_eq!(pending.id_at(i), Some(a));
            assert_eq!(pending.id_at(j), Some(b));
            assert_eq!((pending.position(a), pending.position(b)), (i, j));
            list.retain(|&id| id != a && id != b);
            pending.remove(a);
            pending.remove(b);
            list.push(pending.push());
            for (position, &id) in list.iter().enumerate() {
                assert_eq!(pending.id_at(position), Some(id));
                assert_eq!(pending.position(id), position);
            }
            assert_eq!(pending.id_at(list.len()), None);
        }
        assert_eq!(list, vec![12]);
    }
}
