//! Sibling loops merged: two consecutive loops over the same range whose iterations are
//! independent become one loop that runs the first body and then the second at each iteration,
//! and their inner loops likewise, as deep as they match. An update of several tensors over the
//! same cells (an optimizer's moments and then its parameter, a normalization's statistics and
//! then its output) then reads each cell once, keeps what the first body stored in registers for
//! the second, and runs as one kernel: one hand-off to the threads instead of one per tensor.
//!
//! A loop is independent when every node it writes moves along some axis with its variable alone
//! (so each iteration writes cells no other iteration writes), every read of a node it writes is
//! at the very position of one of those writes, or, on an axis along which every write of the
//! node is at one index moving with the variable alone, at that index (so an iteration reads only
//! cells of the slice it writes itself: a row's cells stored by one inner loop and read by the
//! next), it sets no local declared outside it, and it writes only by plain stores (no
//! scatter, fill or product). Two independent loops merge when the loop they make is independent
//! too and a node both write is written at the same positions by both: then iteration `i` of the
//! merged loop touches only the cells that iteration `i` of each loop touched, in the order the
//! two loops ran them, and every other iteration touches other cells, so what each cell holds at
//! the end is what it held after the two loops, bit for bit. Requiring both loops independent
//! also keeps a loop that could be split across threads from merging with one that could not.
//!
//! For a backend that runs every loop of a chain nested alone at once (the GPU), two loops merge
//! only where the loop they make nests as many loops alone as each of them did (a row's loop
//! over a matrix's cells keeps its inner loop to itself: it does not merge with a loop over the
//! rows only, such as a bias's update), so that no loop it would have run at once becomes
//! serial ([`Chains::Kept`]). A backend that splits only a top-level loop across threads and runs
//! everything inside an iteration in order (the C backend) lets chains shorten
//! ([`Chains::MayShorten`]): a row's statistics, then its cells normalized by them (a softmax, a
//! layer norm and their gradients) become one loop over the rows, each row's cells read while
//! they are in cache, and one kernel instead of one per step. There, whether two loops merge
//! depends only on what each reads and writes, so each loop's facts are found once and a run of
//! loops grows one loop at a time, its inner loops merged afterwards.
//!
//! A merged loop holds at most [`MAX_MERGED_STATEMENTS`] statements, so that a long run of
//! mergeable loops costs linear time to merge and makes kernels of bounded size, and at most [`INLINE_TRANSCENDENTAL_LIMIT`] transcendental functions, as a virtual
//! node's cell does (each is tens of operations in generated code, and a compiler's time on one
//! loop body grows faster than the body): a long chain of them, which the memory modes cut into
//! loops of a few functions each, stays cut, and its loops, alike, are one kernel compiled once.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use super::Renaming;
use super::memory::INLINE_TRANSCENDENTAL_LIMIT;
use super::virtualize::is_transcendental;
use crate::loops::{Index, LocalId, LoopVar, Scalar, Stmt, reads_own_iteration, slice_axes};
use crate::node::NodeId;
use crate::routine::Routine;

/// The most statements (nested ones counted) a merged loop holds.
pub const MAX_MERGED_STATEMENTS: usize = 256;

/// Whether a merge must keep the chains of loops nested alone as long as they were.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chains {
    /// Kept: for a backend that runs a chain's loops all at once (the GPU).
    Kept,
    /// Free to shorten: for a backend that splits only a top-level loop across threads (C).
    MayShorten,
}

/// `routine` with every run of mergeable sibling loops, at any depth, merged into one loop,
/// the chains of loops nested alone kept or not as `chains` says.
pub fn merge_loops(mut routine: Routine, chains: Chains) -> Routine {
    let body = std::mem::take(&mut routine.body);
    routine.body = match chains {
        Chains::Kept => merged_body(body),
        Chains::MayShorten => merged_in_order(body),
    };
    routine
}

/// `body` with its consecutive mergeable loops merged, then the same in each loop's body. With
/// no chain to keep, whether two loops merge depends only on what they read and write, known
/// before their inner loops merge: each loop's [`LoopFacts`] are found once, and a run of
/// loops grows one loop at a time in time linear in what it holds.
fn merged_in_order(body: Vec<Stmt>) -> Vec<Stmt> {
    let mut merged: Vec<Stmt> = Vec::with_capacity(body.len());
    // The facts of `merged`'s last statement, when it is a loop that may take the next one.
    let mut last: Option<LoopFacts> = None;
    for stmt in body {
        let facts = LoopFacts::of(&stmt);
        if let (Some(into), Some(facts), Some(Stmt::For { var, range, body })) =
            (last.as_mut(), &facts, merged.last_mut())
            && let Stmt::For {
                var: second_var,
                range: second_range,
                body: second_body,
            } = &stmt
            && range == second_range
        {
            let mut renaming = Renaming::default();
            renaming.rebind(*second_var, *var);
            if into.absorb(facts.renamed(&renaming, *var)) {
                body.extend(second_body.iter().map(|s| renaming.stmt(s)));
                continue;
            }
        }
        last = facts;
        merged.push(stmt);
    }
    for stmt in &mut merged {
        if let Stmt::For { body, .. } = stmt {
            *body = merged_in_order(std::mem::take(body));
        }
    }
    merged
}

/// `body` with its loops' bodies merged first, then its own consecutive mergeable loops, every
/// chain of loops nested alone kept. Each loop's [`LoopFacts`] are found once, and those of a
/// loop grown by a merge once per merge, whatever the number of loops it is then tried with.
fn merged_body(body: Vec<Stmt>) -> Vec<Stmt> {
    let mut merged: Vec<Stmt> = Vec::with_capacity(body.len());
    // The facts of `merged`'s last statement, when it is an independent loop.
    let mut last: Option<LoopFacts> = None;
    for stmt in body {
        let stmt = match stmt {
            Stmt::For { var, range, body } => Stmt::For {
                var,
                range,
                body: merged_body(body),
            },
            other => other,
        };
        let facts = LoopFacts::of(&stmt);
        if let (Some(first), Some(first_facts), Some(second_facts)) =
            (merged.last(), last.as_ref(), facts.as_ref())
            && let Some((joined, joined_facts)) =
                merge_known(first, first_facts, &stmt, second_facts)
        {
            *merged.last_mut().expect("a last statement") = joined;
            last = Some(joined_facts);
            continue;
        }
        merged.push(stmt);
        last = facts;
    }
    merged
}

/// Appends `stmt` to `body`, merged into `body`'s last statement where the two merge.
fn push(body: &mut Vec<Stmt>, stmt: Stmt) {
    if let Some(last) = body.last()
        && let Some(merged) = merge(last, &stmt)
    {
        *body.last_mut().expect("a last statement") = merged;
        return;
    }
    body.push(stmt);
}

/// The loop running `first`'s body and then `second`'s at each iteration, with their inner
/// loops merged where they meet, if the two are loops that may merge and the merge keeps every
/// chain of loops nested alone.
fn merge(first: &Stmt, second: &Stmt) -> Option<Stmt> {
    let first_facts = LoopFacts::of(first)?;
    let second_facts = LoopFacts::of(second)?;
    merge_known(first, &first_facts, second, &second_facts).map(|(merged, _)| merged)
}

/// [`merge`] of two independent loops whose facts are known, with the merged loop's facts.
fn merge_known(
    first: &Stmt,
    first_facts: &LoopFacts,
    second: &Stmt,
    second_facts: &LoopFacts,
) -> Option<(Stmt, LoopFacts)> {
    let (
        Stmt::For {
            var,
            range,
            body: first_body,
        },
        Stmt::For {
            var: second_var,
            range: second_range,
            body: second_body,
        },
    ) = (first, second)
    else {
        return None;
    };
    if range != second_range
        || first_facts.statements + second_facts.statements > MAX_MERGED_STATEMENTS
        || first_facts.transcendentals + second_facts.transcendentals > INLINE_TRANSCENDENTAL_LIMIT
    {
        return None;
    }
    let same_writes = first_facts.writes.iter().all(|(node, indices)| {
        second_facts.writes.get(node).is_none_or(|others| {
            indices
                .iter()
                .chain(others)
                .all(|index| index == &indices[0])
        })
    });
    if !same_writes || !first_facts.locals.is_disjoint(&second_facts.locals) {
        return None;
    }
    let mut renaming = Renaming::default();
    renaming.rebind(*second_var, *var);
    let mut body = first_body.clone();
    for stmt in second_body {
        push(&mut body, renaming.stmt(stmt));
    }
    let merged = Stmt::For {
        var: *var,
        range: *range,
        body,
    };
    if chain_depth(&merged) < chain_depth(first).max(chain_depth(second)) {
        return None;
    }
    let facts = LoopFacts::of(&merged)?;
    Some((merged, facts))
}

/// How many loops `stmt` nests alone: 1 for a loop whose body is not a single loop, one more
/// for each loop that is its parent's only statement. The GPU runs such a chain's iterations
/// all at once, so a merge that shortens a chain would leave loops serial there.
fn chain_depth(stmt: &Stmt) -> usize {
    let mut depth = 0;
    let mut body = std::slice::from_ref(stmt);
    while let [Stmt::For { body: inner, .. }] = body {
        depth += 1;
        body = inner;
    }
    depth
}

/// How many statements `stmt` is, nested ones included.
fn statement_count(stmt: &Stmt) -> usize {
    let mut count = 0;
    stmt.walk(&mut |_| count += 1);
    count
}

/// How many transcendental functions `stmt` computes, nested statements included.
fn transcendentals(stmt: &Stmt) -> usize {
    let mut count = 0;
    stmt.walk(&mut |stmt| {
        let mut stack: Vec<&Scalar> = stmt.values().collect();
        while let Some(scalar) = stack.pop() {
            count += usize::from(is_transcendental(scalar));
            match scalar {
                Scalar::Const(_) | Scalar::Get(..) | Scalar::Embed(_) | Scalar::Local(_) => {}
                Scalar::Lookup(lookup) => stack.push(&lookup.id),
                Scalar::Unop(_, a) => stack.push(a),
                Scalar::Binop(_, a, b) => stack.extend([&**a, &**b]),
                Scalar::Ternop(_, a, b, c) => stack.extend([&**a, &**b, &**c]),
            }
        }
    });
    count
}

/// What decides whether a loop whose iterations are independent may take the next loop in: the
/// positions it writes and reads each node at (each distinct position once), the nodes it looks
/// cells up in, the locals it declares, and its size.
#[derive(Debug, Clone)]
struct LoopFacts {
    var: LoopVar,
    writes: BTreeMap<NodeId, Vec<Vec<Index>>>,
    reads: BTreeMap<NodeId, Vec<Vec<Index>>>,
    looked_up: BTreeSet<NodeId>,
    locals: HashSet<LocalId>,
    statements: usize,
    transcendentals: usize,
}

impl LoopFacts {
    /// The facts of the loop `stmt`, if its iterations are independent.
    fn of(stmt: &Stmt) -> Option<LoopFacts> {
        let Stmt::For { var, body, .. } = stmt else {
            return None;
        };
        let mut facts = LoopFacts {
            var: *var,
            writes: BTreeMap::new(),
            reads: BTreeMap::new(),
            looked_up: BTreeSet::new(),
            locals: HashSet::new(),
            statements: statement_count(stmt),
            transcendentals: transcendentals(stmt),
        };
        let mut independent = true;
        let mut set_locals = Vec::new();
        for inner in body {
            inner.walk(&mut |s| {
                match s {
                    Stmt::Set { node, index, .. } => {
                        independent &= index.iter().any(|axis| axis.moves_alone(*var));
                        add_position(&mut facts.writes, *node, index);
                    }
                    Stmt::Local { id, .. } => {
                        facts.locals.insert(*id);
                    }
                    Stmt::SetLocal { id, .. } => set_locals.push(*id),
                    Stmt::For { .. } => {}
                    Stmt::SetVec { .. }
                    | Stmt::ScatterAdd { .. }
                    | Stmt::Fill { .. }
                    | Stmt::FillMargins { .. }
                    | Stmt::Gemm { .. } => independent = false,
                }
                for value in s.values() {
                    looked_up_nodes(value, &mut facts.looked_up);
                    value.for_each_get(&mut |node, index| {
                        add_position(&mut facts.reads, node, index);
                    });
                }
            });
        }
        // A local set here but declared outside would carry values between iterations.
        independent &= set_locals.iter().all(|id| facts.locals.contains(id));
        independent &= facts
            .looked_up
            .iter()
            .all(|node| !facts.writes.contains_key(node));
        independent &= facts.reads_own_iterations(facts.reads.iter());
        independent.then_some(facts)
    }

    /// Whether every read among `reads` of a node this loop writes reads only its own
    /// iteration's cells.
    fn reads_own_iterations<'a>(
        &self,
        reads: impl Iterator<Item = (&'a NodeId, &'a Vec<Vec<Index>>)>,
    ) -> bool {
        let mut own = true;
        for (node, positions) in reads {
            if let Some(written) = self.writes.get(node) {
                own &= positions
                    .iter()
                    .all(|index| reads_own_iteration(self.var, written, index));
            }
        }
        own
    }

    /// The facts of the same loop with its variable renamed by `renaming` to `to`.
    fn renamed(&self, renaming: &Renaming, to: LoopVar) -> LoopFacts {
        let rename = |map: &BTreeMap<NodeId, Vec<Vec<Index>>>| {
            map.iter()
                .map(|(node, positions)| {
                    let positions = positions
                        .iter()
                        .map(|index| index.iter().map(|axis| renaming.index(axis)).collect())
                        .collect();
                    (*node, positions)
                })
                .collect()
        };
        LoopFacts {
            var: to,
            writes: rename(&self.writes),
            reads: rename(&self.reads),
            looked_up: self.looked_up.clone(),
            locals: self.locals.clone(),
            statements: self.statements,
            transcendentals: self.transcendentals,
        }
    }

    /// Takes the loop `next` describes (its variable already renamed to this loop's) into this
    /// one, if the two may merge (the module's page says when): then these facts become the
    /// merged loop's and the answer is `true`. It costs what `next` holds, not what this holds.
    fn absorb(&mut self, next: LoopFacts) -> bool {
        let fits = self.statements + next.statements <= MAX_MERGED_STATEMENTS
            && self.transcendentals + next.transcendentals <= INLINE_TRANSCENDENTAL_LIMIT
            && self.locals.is_disjoint(&next.locals);
        // Where both loops write a node, they write it at the same positions, or apart: along
        // an axis on which every position of both is one index moving with the variable alone,
        // each iteration writes a slice of the node that no other iteration writes (a margin's
        // slabs, a concatenation's parts).
        let writes_agree = next.writes.iter().all(|(node, positions)| {
            self.writes.get(node).is_none_or(|mine| {
                let all = || mine.iter().chain(positions);
                all().all(|index| index == &mine[0]) || slice_axes(self.var, all()).next().is_some()
            })
        });
        let lookups_apart = next.looked_up.iter().all(|n| !self.writes.contains_key(n))
            && self.looked_up.iter().all(|n| !next.writes.contains_key(n));
        if !(fits && writes_agree && lookups_apart) {
            return false;
        }
        // What the next loop reads of the nodes this one writes, and what this one reads of the
        // nodes the next one writes: looked up from the next loop's side, so that a merge costs
        // what the next loop holds.
        let mine_read_by_next = self.reads_own_iterations(next.reads.iter());
        let next_read_by_me = next.writes.iter().all(|(node, written)| {
            self.reads.get(node).is_none_or(|positions| {
                positions
                    .iter()
                    .all(|index| reads_own_iteration(self.var, written, index))
            })
        });
        if !(mine_read_by_next && next_read_by_me) {
            return false;
        }
        for (node, positions) in &next.writes {
            for index in positions {
                add_position(&mut self.writes, *node, index);
            }
        }
        for (node, positions) in &next.reads {
            for index in positions {
                add_position(&mut self.reads, *node, index);
            }
        }
        self.looked_up.extend(next.looked_up);
        self.locals.extend(next.locals);
        self.statements += next.statements;
        self.transcendentals += next.transcendentals;
        true
    }
}

/// Adds `index` to `node`'s positions in `positions`, unless it is there.
fn add_position(positions: &mut BTreeMap<NodeId, Vec<Vec<Index>>>, node: NodeId, index: &[Index]) {
    let known = positions.entry(node).or_default();
    if !known.iter().any(|known| known.as_slice() == index) {
        known.push(index.to_vec());
    }
}

/// Adds the nodes `value` looks cells up in to `nodes`.
fn looked_up_nodes(value: &Scalar, nodes: &mut BTreeSet<NodeId>) {
    match value {
        Scalar::Const(_) | Scalar::Get(..) | Scalar::Embed(_) | Scalar::Local(_) => {}
        Scalar::Lookup(lookup) => {
            nodes.insert(lookup.node);
            looked_up_nodes(&lookup.id, nodes);
        }
        Scalar::Unop(_, a) => looked_up_nodes(a, nodes),
        Scalar::Binop(_, a, b) => {
            looked_up_nodes(a, nodes);
            looked_up_nodes(b, nodes);
        }
        Scalar::Ternop(_, a, b, c) => {
            looked_up_nodes(a, nodes);
            looked_up_nodes(b, nodes);
            looked_up_nodes(c, nodes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loops::{LoopVar, Scalar};
    use crate::ops::Binop;

    fn at(vars: &[u32]) -> Vec<Index> {
        vars.iter().map(|&v| Index::var(LoopVar(v), 0)).collect()
    }

    fn get(node: u32, vars: &[u32]) -> Scalar {
        Scalar::Get(NodeId(node), at(vars))
    }

    fn add(a: Scalar, b: Scalar) -> Scalar {
        Scalar::Binop(Binop::Add, Box::new(a), Box::new(b))
    }

    fn set(node: u32, index: Vec<Index>, value: Scalar) -> Stmt {
        Stmt::Set {
            node: NodeId(node),
            index,
            value,
        }
    }

    /// `for outer (3) { local := 0; for inner (range) { local += n{from}[index] }; n{node}[outer]
    /// := local }`: a row's sum, `index` given its loop variables.
    fn row_sum(
        (outer, inner, range): (u32, u32, usize),
        local: u32,
        from: u32,
        index: Vec<Index>,
        node: u32,
    ) -> Stmt {
        Stmt::For {
            var: LoopVar(outer),
            range: 3,
            body: vec![
                Stmt::Local {
                    id: LocalId(local),
                    precision: crate::precision::Precision::F32,
                    value: Scalar::Const(0.0),
                },
                Stmt::For {
                    var: LoopVar(inner),
                    range,
                    body: vec![Stmt::SetLocal {
                        id: LocalId(local),
                        value: add(
                            Scalar::Local(LocalId(local)),
                            Scalar::Get(NodeId(from), index),
                        ),
                    }],
                },
                set(node, at(&[outer]), Scalar::Local(LocalId(local))),
            ],
        }
    }

    /// `for outer { for inner { body } }` over 3 × 4.
    fn nest(outer: u32, inner: u32, body: Vec<Stmt>) -> Stmt {
        Stmt::For {
            var: LoopVar(outer),
            range: 3,
            body: vec![Stmt::For {
                var: LoopVar(inner),
                range: 4,
                body,
            }],
        }
    }

    fn merged(body: Vec<Stmt>) -> Vec<Stmt> {
        merged_body(body)
    }

    #[test]
    fn an_update_chain_over_the_same_cells_becomes_one_nest() {
        // m := m + g; v := v + g·g; p := p + m + v: an optimizer's three updates.
        let body = vec![
            nest(
                0,
                1,
                vec![set(1, at(&[0, 1]), add(get(1, &[0, 1]), get(0, &[0, 1])))],
            ),
            nest(
                2,
                3,
                vec![set(2, at(&[2, 3]), add(get(2, &[2, 3]), get(0, &[2, 3])))],
            ),
            nest(
                4,
                5,
                vec![set(
                    3,
                    at(&[4, 5]),
                    add(get(3, &[4, 5]), add(get(1, &[4, 5]), get(2, &[4, 5]))),
                )],
            ),
        ];
        let expected = vec![nest(
            0,
            1,
            vec![
                set(1, at(&[0, 1]), add(get(1, &[0, 1]), get(0, &[0, 1]))),
                set(2, at(&[0, 1]), add(get(2, &[0, 1]), get(0, &[0, 1]))),
                set(
                    3,
                    at(&[0, 1]),
                    add(get(3, &[0, 1]), add(get(1, &[0, 1]), get(2, &[0, 1]))),
                ),
            ],
        )];
        assert_eq!(merged(body), expected);
    }

    #[test]
    fn merged_loops_compute_a_bounded_number_of_transcendental_functions() {
        // A chain of tanh, stored every few functions by the memory modes: its loops merge
        // while the merged body stays within the limit, and no further.
        let tanh = |x: Scalar| Scalar::Unop(crate::ops::Unop::Tanh, Box::new(x));
        let link = |var: u32, node: u32, functions: usize| {
            let value = (0..functions).fold(get(node, &[var]), |x, _| tanh(x));
            Stmt::For {
                var: LoopVar(var),
                range: 64,
                body: vec![set(node + 1, at(&[var]), value)],
            }
        };
        let half = INLINE_TRANSCENDENTAL_LIMIT / 2;
        let within = merged(vec![link(0, 0, half), link(1, 1, half)]);
        assert_eq!(within.len(), 1, "{within:?}");
        assert_eq!(transcendentals(&within[0]), INLINE_TRANSCENDENTAL_LIMIT);
        let beyond = vec![link(0, 0, half), link(1, 1, half + 1)];
        assert_eq!(merged(beyond.clone()), beyond);
    }

    #[test]
    fn a_read_of_another_iterations_cell_keeps_the_loops_apart() {
        // b[i, j] := a[i, j]; c[i, j] := b[j, i] reads what later iterations of the first write.
        let body = vec![
            nest(0, 1, vec![set(1, at(&[0, 1]), get(0, &[0, 1]))]),
            nest(2, 3, vec![set(2, at(&[2, 3]), get(1, &[3, 2]))]),
        ];
        assert_eq!(merged(body.clone()), body);
    }

    #[test]
    fn writes_of_one_node_along_different_axes_keep_the_loops_apart() {
        let body = vec![
            nest(0, 1, vec![set(1, at(&[0, 1]), get(0, &[0, 1]))]),
            nest(2, 3, vec![set(1, at(&[3, 2]), get(0, &[2, 3]))]),
        ];
        assert_eq!(merged(body.clone()), body);
        assert_eq!(merged_in_order(body.clone()), body);
    }

    #[test]
    fn slices_of_one_node_written_apart_merge_where_chains_may_shorten() {
        // A margin's column and the interior beside it, `n1[i, 0] := 0` and `n1[i, j + 1] :=
        // n0[i, j]`: iteration `i` of either writes only row `i`.
        let column = Stmt::For {
            var: LoopVar(0),
            range: 3,
            body: vec![set(
                1,
                vec![Index::var(LoopVar(0), 0), Index::constant(0)],
                Scalar::Const(0.0),
            )],
        };
        let interior = nest(
            2,
            3,
            vec![set(
                1,
                vec![Index::var(LoopVar(2), 0), Index::var(LoopVar(3), 1)],
                get(0, &[2, 3]),
            )],
        );
        let body = vec![column, interior];
        let [Stmt::For { body: row, .. }] = &merged_in_order(body.clone())[..] else {
            panic!("one loop over the rows")
        };
        assert_eq!(row.len(), 2);
        // A first row written along the columns, `n1[0, i] := 0`, is not written apart: merged,
        // iteration 1 would overwrite what iteration 0 of the interior stored at `n1[0, 1]`.
        let first_row = Stmt::For {
            var: LoopVar(0),
            range: 3,
            body: vec![set(
                1,
                vec![Index::constant(0), Index::var(LoopVar(0), 0)],
                Scalar::Const(0.0),
            )],
        };
        let apart = vec![first_row, body[1].clone()];
        assert_eq!(merged_in_order(apart.clone()), apart);
    }

    #[test]
    fn a_loop_summing_into_one_cell_does_not_merge_with_a_split_loop() {
        // total[0] := total[0] + a[i, j] runs serially; b[i, j] := a[i, j] could be split.
        let zero = vec![Index::constant(0)];
        let body = vec![
            nest(0, 1, vec![set(1, at(&[0, 1]), get(0, &[0, 1]))]),
            nest(
                2,
                3,
                vec![set(
                    2,
                    zero.clone(),
                    add(Scalar::Get(NodeId(2), zero), get(0, &[2, 3])),
                )],
            ),
        ];
        assert_eq!(merged(body.clone()), body);
    }

    #[test]
    fn a_merge_that_would_shorten_a_chain_of_loops_is_not_made() {
        // Row sums then the rows scaled by them: merged, the scaling's inner loop would no
        // longer be nested alone. Likewise a matrix's update and its bias's.
        let sum = row_sum((0, 1, 4), 0, 0, at(&[0, 1]), 1);
        let scaled = nest(
            2,
            3,
            vec![set(2, at(&[2, 3]), add(get(0, &[2, 3]), get(1, &[2])))],
        );
        let body = vec![sum.clone(), scaled];
        assert_eq!(merged(body.clone()), body);
        // Where only the top-level loop runs at once, the two are one loop over the rows: each
        // row's sum, then its cells scaled by it.
        let [Stmt::For { var, body: row, .. }] = &merged_in_order(body)[..] else {
            panic!("one loop over the rows")
        };
        assert_eq!(*var, LoopVar(0));
        let Stmt::For { body: sum_body, .. } = &sum else {
            panic!("a loop")
        };
        assert_eq!(row[..3], sum_body[..]);
        assert_eq!(
            row[3],
            Stmt::For {
                var: LoopVar(3),
                range: 4,
                body: vec![set(2, at(&[0, 3]), add(get(0, &[0, 3]), get(1, &[0])))],
            }
        );
        let bias = Stmt::For {
            var: LoopVar(4),
            range: 3,
            body: vec![set(3, at(&[4]), add(get(3, &[4]), get(4, &[4])))],
        };
        let body = vec![nest(5, 6, vec![set(5, at(&[5, 6]), get(0, &[5, 6]))]), bias];
        assert_eq!(merged(body.clone()), body);
    }

    #[test]
    fn loops_over_rows_merge_with_their_inner_loops_kept_apart() {
        // Two row sums of different inner ranges: the rows' loops merge, the inner loops,
        // which set locals of their rows, stay as they are.
        let row_sum = |outer: u32, inner: u32, range: usize, local: u32, node: u32| {
            row_sum((outer, inner, range), local, 0, at(&[outer, inner]), node)
        };
        let [Stmt::For { var, body, .. }] =
            &merged(vec![row_sum(0, 1, 4, 0, 1), row_sum(2, 3, 2, 1, 2)])[..]
        else {
            panic!("one loop")
        };
        assert_eq!(*var, LoopVar(0));
        let ranges: Vec<Option<usize>> = body
            .iter()
            .map(|s| match s {
                Stmt::For { range, .. } => Some(*range),
                _ => None,
            })
            .collect();
        assert_eq!(ranges, [None, Some(4), None, None, Some(2), None]);
        assert_eq!(body[5], set(2, at(&[0]), Scalar::Local(LocalId(1))));
    }

    #[test]
    fn a_row_stored_by_one_inner_loop_and_summed_by_the_next_merges_where_chains_may_shorten() {
        // A softmax's exponentials stored row by row, then summed by row: iteration `i` of the
        // sum reads only row `i`, which only iteration `i` of the first loop writes.
        let stored = nest(0, 1, vec![set(1, at(&[0, 1]), get(0, &[0, 1]))]);
        let row_sum = |read: Vec<Index>| row_sum((2, 3, 4), 0, 1, read, 2);
        let body = vec![stored.clone(), row_sum(at(&[2, 3]))];
        let [Stmt::For { body: row, .. }] = &merged_in_order(body.clone())[..] else {
            panic!("one loop over the rows")
        };
        let Stmt::For { body: first, .. } = &stored else {
            panic!("a loop")
        };
        assert_eq!(row.len(), 4);
        assert_eq!(row[0], first[0]);
        // Kept chains keep them apart, and so does a read of another row (the sum of a column).
        assert_eq!(merged_body(body).len(), 2);
        let by_columns = vec![stored, row_sum(at(&[3, 2]))];
        assert_eq!(merged_in_order(by_columns).len(), 2);
    }
}
