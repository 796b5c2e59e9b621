//! Solving projection equations: co-iteration classes by union-find, pins to positions supplied
//! from outside, an iterate set, and a labeling that is a function of those three alone.
//!
//! `Eq(p, q)` puts two axes in one class (they share a loop); `Eq(p, Sol(i))` pins a class to the
//! index `i` (a fixed position, or a symbol supplied from outside such as a batch slice's);
//! `Iterate(p)` asks for a loop, `Component(p)` insists on one (a concatenation's component). A
//! class then takes its pin if it has one, else a fresh iterator if it is a component or must
//! iterate and is not of size 1 (a loop over an empty axis runs no times), else the fixed
//! position 0.
//!
//! The result depends only on the set of equations: the classes and the iterate set are
//! closures, the pins a checked partial function. Fresh iterators are numbered in the order of
//! the smallest projection id of their class, so even the names do not depend on the order the
//! equations come in.

use std::collections::{BTreeMap, HashMap, HashSet};

use rcannl_ir::{AxisIndex, Symbol};

use crate::error::{ShapeError, ShapeErrorKind};

/// The identity of one axis of one tensor within one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProjId(pub u32);

/// A side of a projection equation: an axis, or an index supplied from outside the operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProjTerm {
    /// An axis of one of the operation's tensors.
    Proj(ProjId),
    /// A fixed position or an outside symbol; never an index this operation iterates.
    Sol(AxisIndex),
}

/// A projection equation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProjEq {
    /// The two sides share their index.
    Eq(ProjTerm, ProjTerm),
    /// The axis needs a loop of its own unless it is pinned or of size 1 (an empty axis gets a
    /// loop that runs no times).
    Iterate(ProjTerm),
    /// A component of a concatenation: it needs a loop unless it is pinned, even of size 1 or 0,
    /// since lowering tells the active component by its symbol.
    Component(ProjTerm),
}

/// The solution: every axis's index, and the product space's iterators with their ranges, in
/// order of creation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labeling {
    /// The index of every axis: a loop iterator, a pinned symbol, or a fixed position.
    pub index: HashMap<ProjId, AxisIndex>,
    /// The fresh loop iterators with the sizes of their ranges.
    pub iterators: Vec<(Symbol, usize)>,
}

/// Solves `equations` over axes of the given `sizes` (every projection id the equations mention
/// must have one). Fresh iterators are `Symbol(first_symbol)`, `Symbol(first_symbol + 1)`, ….
pub fn solve(
    equations: &[ProjEq],
    sizes: &HashMap<ProjId, usize>,
    first_symbol: u32,
) -> Result<Labeling, ShapeError> {
    let size_of =
        |id: &ProjId| {
            sizes.get(id).copied().ok_or_else(|| {
            ShapeError::of_kind(ShapeErrorKind::Projection, format!(
                "projection inference: axis p{} has no size (the shapes must be closed first)",
                id.0
            ))
        })
        };
    let mut classes = UnionFind::default();
    for id in equations.iter().flat_map(mentioned) {
        classes.add(id);
    }
    // Classes first (a closure), then pins and iteration on the final classes, so that no
    // equation's effect depends on which came before it.
    for equation in equations {
        if let ProjEq::Eq(ProjTerm::Proj(p), ProjTerm::Proj(q)) = equation {
            let (size_p, size_q) = (size_of(p)?, size_of(q)?);
            if size_p != size_q {
                return Err(ShapeError::of_kind(
                    ShapeErrorKind::Projection,
                    format!(
                        "projection inference: axes p{} (size {size_p}) and p{} (size {size_q}) \
                     would share a loop",
                        p.0, q.0
                    ),
                ));
            }
            classes.union(*p, *q);
        }
    }
    let mut pins: HashMap<ProjId, AxisIndex> = HashMap::new();
    let mut iterate: HashSet<ProjId> = HashSet::new();
    let mut components: HashSet<ProjId> = HashSet::new();
    for equation in equations {
        match equation {
            ProjEq::Eq(ProjTerm::Proj(p), ProjTerm::Sol(index))
            | ProjEq::Eq(ProjTerm::Sol(index), ProjTerm::Proj(p)) => {
                let root = classes.find(*p);
                match pins.get(&root) {
                    Some(pinned) if pinned != index => {
                        return Err(ShapeError::of_kind(
                            ShapeErrorKind::Projection,
                            format!(
                                "projection inference: axis p{} is read both at {pinned} and at \
                             {index}",
                                p.0
                            ),
                        ));
                    }
                    _ => {
                        pins.insert(root, index.clone());
                    }
                }
            }
            ProjEq::Eq(ProjTerm::Sol(a), ProjTerm::Sol(b)) if a != b => {
                return Err(ShapeError::of_kind(
                    ShapeErrorKind::Projection,
                    format!(
                        "projection inference: two positions supplied from outside disagree ({a} \
                     vs {b})"
                    ),
                ));
            }
            ProjEq::Iterate(ProjTerm::Proj(p)) => {
                iterate.insert(classes.find(*p));
            }
            ProjEq::Component(ProjTerm::Proj(p)) => {
                components.insert(classes.find(*p));
            }
            ProjEq::Eq(..) | ProjEq::Iterate(ProjTerm::Sol(_)) | ProjEq::Component(_) => {}
        }
    }
    // Label each class once, in order of its smallest member.
    let mut members: BTreeMap<ProjId, Vec<ProjId>> = BTreeMap::new();
    for id in classes.ids() {
        members.entry(classes.find(id)).or_default().push(id);
    }
    let mut by_first: Vec<(ProjId, ProjId)> = members
        .iter()
        .map(|(root, ids)| (*ids.iter().min().expect("a class has members"), *root))
        .collect();
    by_first.sort();
    let mut labeling = Labeling {
        index: HashMap::new(),
        iterators: Vec::new(),
    };
    for (first, root) in by_first {
        let size = size_of(&first)?;
        let index = match pins.get(&root) {
            Some(pinned) => pinned.clone(),
            // An axis of size 0 iterates too: its loop runs no times, where position 0 would
            // address a cell that does not exist.
            None if components.contains(&root) || (iterate.contains(&root) && size != 1) => {
                let symbol = Symbol(first_symbol + labeling.iterators.len() as u32);
                labeling.iterators.push((symbol, size));
                AxisIndex::Iterator(symbol)
            }
            None => AxisIndex::Fixed(0),
        };
        for id in &members[&root] {
            labeling.index.insert(*id, index.clone());
        }
    }
    Ok(labeling)
}

fn mentioned(equation: &ProjEq) -> Vec<ProjId> {
    let term = |t: &ProjTerm| match t {
        ProjTerm::Proj(id) => Some(*id),
        ProjTerm::Sol(_) => None,
    };
    match equation {
        ProjEq::Eq(a, b) => [term(a), term(b)].into_iter().flatten().collect(),
        ProjEq::Iterate(t) | ProjEq::Component(t) => term(t).into_iter().collect(),
    }
}

/// Union-find over projection ids, with path halving and union by size.
#[derive(Debug, Default)]
struct UnionFind {
    slot: HashMap<ProjId, usize>,
    ids: Vec<ProjId>,
    parent: Vec<usize>,
    rank: Vec<usize>,
}

impl UnionFind {
    fn add(&mut self, id: ProjId) {
        if !self.slot.contains_key(&id) {
            self.slot.insert(id, self.ids.len());
            self.parent.push(self.ids.len());
            self.rank.push(1);
            self.ids.push(id);
        }
    }

    fn root(&mut self, mut slot: usize) -> usize {
        while self.parent[slot] != slot {
            self.parent[slot] = self.parent[self.parent[slot]];
            slot = self.parent[slot];
        }
        slot
    }

    fn find(&mut self, id: ProjId) -> ProjId {
        let slot = self.slot[&id];
        let root = self.root(slot);
        self.ids[root]
    }

    fn union(&mut self, a: ProjId, b: ProjId) {
        let (a, b) = (self.slot[&a], self.slot[&b]);
        let (mut a, mut b) = (self.root(a), self.root(b));
        if a == b {
            return;
        }
        if self.rank[a] < self.rank[b] {
            std::mem::swap(&mut a, &mut b);
        }
        self.parent[b] = a;
        self.rank[a] += self.rank[b];
    }

    fn ids(&self) -> Vec<ProjId> {
        self.ids.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(id: u32) -> ProjTerm {
        ProjTerm::Proj(ProjId(id))
    }

    fn eq(a: ProjTerm, b: ProjTerm) -> ProjEq {
        ProjEq::Eq(a, b)
    }

    fn iterate(id: u32) -> ProjEq {
        ProjEq::Iterate(p(id))
    }

    fn sizes(pairs: &[(u32, usize)]) -> HashMap<ProjId, usize> {
        pairs.iter().map(|&(id, size)| (ProjId(id), size)).collect()
    }

    fn index(labeling: &Labeling, id: u32) -> AxisIndex {
        labeling.index[&ProjId(id)].clone()
    }

    #[test]
    fn matmul_classes() {
        // c[0,1] a[2,3] b[4,5]: c_i = a_i, a_j = b_j, c_k = b_k; every axis a terminal.
        let equations: Vec<ProjEq> = [eq(p(0), p(2)), eq(p(3), p(4)), eq(p(1), p(5))]
            .into_iter()
            .chain((0..6).map(iterate))
            .collect();
        let sizes = sizes(&[(0, 2), (1, 4), (2, 2), (3, 3), (4, 3), (5, 4)]);
        let labeling = solve(&equations, &sizes, 0).unwrap();
        assert_eq!(
            labeling.iterators,
            vec![(Symbol(0), 2), (Symbol(1), 4), (Symbol(2), 3)]
        );
        assert_eq!(index(&labeling, 0), AxisIndex::Iterator(Symbol(0)));
        assert_eq!(index(&labeling, 2), AxisIndex::Iterator(Symbol(0)));
        assert_eq!(index(&labeling, 3), index(&labeling, 4));
        assert_eq!(index(&labeling, 1), index(&labeling, 5));
    }

    #[test]
    fn pins_dominate_iteration_and_size_one_needs_no_loop() {
        let equations = [
            eq(p(0), ProjTerm::Sol(AxisIndex::Fixed(0))),
            iterate(0),
            iterate(1),
            iterate(2),
        ];
        let labeling = solve(&equations, &sizes(&[(0, 5), (1, 1), (2, 3)]), 7).unwrap();
        assert_eq!(index(&labeling, 0), AxisIndex::Fixed(0));
        assert_eq!(index(&labeling, 1), AxisIndex::Fixed(0));
        assert_eq!(index(&labeling, 2), AxisIndex::Iterator(Symbol(7)));
        assert_eq!(labeling.iterators, vec![(Symbol(7), 3)]);
    }

    #[test]
    fn an_empty_axis_gets_a_loop_that_never_runs() {
        // Position 0 of an axis of size 0 is no cell: the axis is iterated, over nothing.
        let labeling = solve(&[eq(p(0), p(1)), iterate(0)], &sizes(&[(0, 0), (1, 0)]), 4).unwrap();
        assert_eq!(index(&labeling, 0), AxisIndex::Iterator(Symbol(4)));
        assert_eq!(index(&labeling, 1), AxisIndex::Iterator(Symbol(4)));
        assert_eq!(labeling.iterators, vec![(Symbol(4), 0)]);
    }

    #[test]
    fn an_axis_without_an_iterate_marker_is_read_at_zero() {
        let labeling = solve(&[eq(p(0), p(1))], &sizes(&[(0, 4), (1, 4)]), 0).unwrap();
        assert_eq!(index(&labeling, 0), AxisIndex::Fixed(0));
        assert!(labeling.iterators.is_empty());
    }

    #[test]
    fn conflicts_are_errors() {
        let different_sizes = solve(&[eq(p(0), p(1))], &sizes(&[(0, 2), (1, 3)]), 0);
        assert!(
            different_sizes
                .unwrap_err()
                .message
                .contains("would share a loop")
        );
        let two_pins = solve(
            &[
                eq(p(0), ProjTerm::Sol(AxisIndex::Fixed(0))),
                eq(p(1), ProjTerm::Sol(AxisIndex::Fixed(1))),
                eq(p(0), p(1)),
            ],
            &sizes(&[(0, 2), (1, 2)]),
            0,
        );
        assert!(two_pins.unwrap_err().message.contains("read both at"));
        let outside = solve(
            &[eq(
                ProjTerm::Sol(AxisIndex::Fixed(0)),
                ProjTerm::Sol(AxisIndex::Fixed(2)),
            )],
            &sizes(&[]),
            0,
        );
        assert!(outside.unwrap_err().message.contains("disagree"));
        let without_size = solve(&[iterate(9)], &sizes(&[]), 0);
        assert!(without_size.unwrap_err().message.contains("has no size"));
    }

    #[test]
    fn a_batch_slice_axis_takes_the_outside_symbol() {
        let slice = AxisIndex::Iterator(Symbol(100));
        let labeling = solve(
            &[
                eq(ProjTerm::Sol(slice.clone()), p(0)),
                iterate(0),
                iterate(1),
            ],
            &sizes(&[(0, 8), (1, 3)]),
            0,
        )
        .unwrap();
        assert_eq!(index(&labeling, 0), slice);
        assert_eq!(labeling.iterators, vec![(Symbol(0), 3)]);
    }
}
