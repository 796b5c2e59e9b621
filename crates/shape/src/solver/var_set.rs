//! Sets of variables as bit vectors: variables are numbered densely from 0 within a session, so
//! membership is one bit, with no hashing, and copying a set costs a bit per variable.

use std::marker::PhantomData;

use crate::term::{DimVar, RowVarId};

/// A variable numbered densely from 0.
pub(super) trait DenseVar: Copy {
    /// The variable's number.
    fn index(self) -> usize;
}

impl DenseVar for DimVar {
    fn index(self) -> usize {
        self.0 as usize
    }
}

impl DenseVar for RowVarId {
    fn index(self) -> usize {
        self.0 as usize
    }
}

/// A set of variables of one kind; it grows to the largest variable inserted.
#[derive(Debug, Clone)]
pub(super) struct VarSet<V> {
    words: Vec<u64>,
    kind: PhantomData<V>,
}

impl<V> Default for VarSet<V> {
    fn default() -> Self {
        VarSet {
            words: Vec::new(),
            kind: PhantomData,
        }
    }
}

impl<V: DenseVar> VarSet<V> {
    /// Adds `var`; true if it was not in the set.
    pub(super) fn insert(&mut self, var: V) -> bool {
        let (word, bit) = (var.index() / 64, var.index() % 64);
        if self.words.len() <= word {
            self.words.resize(word + 1, 0);
        }
        let absent = self.words[word] & (1 << bit) == 0;
        self.words[word] |= 1 << bit;
        absent
    }

    /// Takes `var` out of the set.
    pub(super) fn remove(&mut self, var: V) {
        let (word, bit) = (var.index() / 64, var.index() % 64);
        if let Some(w) = self.words.get_mut(word) {
            *w &= !(1 << bit);
        }
    }

    /// Whether `var` is in the set.
    pub(super) fn contains(&self, var: V) -> bool {
        let (word, bit) = (var.index() / 64, var.index() % 64);
        self.words.get(word).is_some_and(|w| w & (1 << bit) != 0)
    }
}

impl<V: DenseVar> Extend<V> for VarSet<V> {
    fn extend<I: IntoIterator<Item = V>>(&mut self, vars: I) {
        for var in vars {
            self.insert(var);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership_across_words_and_growth() {
        let mut set: VarSet<DimVar> = VarSet::default();
        assert!(!set.contains(DimVar(0)));
        assert!(
            !set.contains(DimVar(1000)),
            "far beyond the storage: absent"
        );
        assert!(set.insert(DimVar(63)));
        assert!(set.insert(DimVar(64)));
        assert!(
            !set.insert(DimVar(63)),
            "a second insertion finds it present"
        );
        assert!(set.contains(DimVar(63)) && set.contains(DimVar(64)));
        assert!(!set.contains(DimVar(62)) && !set.contains(DimVar(65)));
        set.extend([DimVar(0), DimVar(200)]);
        let copy = set.clone();
        for index in 0..300 {
            let expected = [0, 63, 64, 200].contains(&index);
            assert_eq!(copy.contains(DimVar(index)), expected, "variable {index}");
        }
        let mut rows: VarSet<RowVarId> = VarSet::default();
        assert!(rows.insert(RowVarId(5)));
        assert!(rows.contains(RowVarId(5)) && !rows.contains(RowVarId(4)));
        rows.remove(RowVarId(5));
        rows.remove(RowVarId(4000));
        assert!(!rows.contains(RowVarId(5)), "removed");
        assert!(rows.insert(RowVarId(5)), "absent again after its removal");
    }
}
