//! The loop IR: what assignments lower to, what the optimizer rewrites and backends run.
//!
//! Indices are buffer positions (padding margins already added), sums of loop variables and of
//! static indices (supplied when the routine runs) plus a constant. A store computes its value in
//! the precision of what it writes: a node's for `Set`, a local's for `Local`/`SetLocal` (floats
//! in its compute precision — f32 for f16, bf16 and f32, f64 for f64 — every result rounded to
//! it; integers in wrapping `i64`; 128-bit words as words), converting every read to that kind,
//! and rounds it on the store.

use std::fmt;

use smallvec::{SmallVec, smallvec};

use crate::index::Symbol;
use crate::node::NodeId;
use crate::ops::{Binop, Ternop, Unop};
use crate::precision::Precision;

/// A loop variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LoopVar(pub u32);

impl fmt::Display for LoopVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "l{}", self.0)
    }
}

/// What an index may depend on: an enclosing loop, or a static index (a batch position chosen
/// when the routine runs, the same for the whole run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Var {
    /// The variable of an enclosing `for` loop.
    Loop(LoopVar),
    /// A static index: a routine parameter, given a value each time the routine runs.
    Static(Symbol),
}

impl fmt::Display for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Var::Loop(var) => write!(f, "{var}"),
            Var::Static(symbol) => write!(f, "s{}", symbol.0),
        }
    }
}

/// An index's terms, kept inline where there is one (as most often: a loop variable): every
/// read and write of a routine holds one index per axis.
pub type Terms = SmallVec<[(i64, Var); 1]>;

/// A position along one axis (or a flat offset): `Σ cᵢ·vᵢ + offset`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Index {
    /// The `(cᵢ, vᵢ)` terms: each variable with the coefficient it is multiplied by.
    pub terms: Terms,
    /// The constant term; in a buffer position, it includes the axis's left margin.
    pub offset: i64,
}

impl Index {
    /// Whether `var` is the only loop variable of this axis position, with a coefficient other
    /// than 0: the iterations of `var` then reach distinct positions along the axis, whatever
    /// the other loops do.
    pub fn moves_alone(&self, var: LoopVar) -> bool {
        let mut coefficient = 0i64;
        for (c, v) in &self.terms {
            match v {
                Var::Loop(l) if *l == var => coefficient = coefficient.saturating_add(*c),
                Var::Loop(_) => return false,
                Var::Static(_) => {}
            }
        }
        coefficient != 0
    }

    /// The index that is `offset` wherever it is evaluated.
    pub fn constant(offset: i64) -> Index {
        Index {
            terms: Terms::new(),
            offset,
        }
    }

    /// `var + offset`.
    pub fn var(var: LoopVar, offset: i64) -> Index {
        Index {
            terms: smallvec![(1, Var::Loop(var))],
            offset,
        }
    }

    /// The variables the index mentions.
    pub fn vars(&self) -> impl Iterator<Item = Var> + '_ {
        self.terms.iter().map(|(_, v)| *v)
    }

    /// The row-major flat offset of the position `index` in a buffer of `dims`: one term per
    /// variable, in the order the axes mention them from the innermost out.
    pub fn flat(index: &[Index], dims: &[usize]) -> Index {
        let mut flat = Index::constant(0);
        let mut stride = 1i64;
        for (axis, dim) in index.iter().zip(dims).rev() {
            flat.offset += axis.offset * stride;
            for (c, var) in &axis.terms {
                match flat.terms.iter_mut().find(|(_, v)| v == var) {
                    Some((total, _)) => *total += c * stride,
                    None => flat.terms.push((c * stride, *var)),
                }
            }
            stride *= *dim as i64;
        }
        flat
    }
}

/// Whether a read at `index`, inside a loop over `var` whose iterations write the read node at
/// the positions `written` (each moving with `var` somewhere, so that iterations write apart),
/// reads only cells its own iteration writes, or none the loop writes: it is at one of those
/// positions, or, on an axis along which every write is at one index moving with `var` alone, at
/// that index — the slice that only its own iteration writes (a row's cells stored by one inner
/// loop and read by the next). The iterations may then run in any order, or interleaved with
/// another loop's, without a read seeing another iteration's write.
pub fn reads_own_iteration(var: LoopVar, written: &[Vec<Index>], index: &[Index]) -> bool {
    written.iter().any(|w| w.as_slice() == index)
        || slice_axes(var, written.iter()).any(|axis| index.get(axis) == Some(&written[0][axis]))
}

/// The axes along which every position of `written` is at one index moving with `var` alone:
/// there, each iteration of a loop over `var` writes a slice of the node that no other
/// iteration writes.
pub fn slice_axes<'a>(
    var: LoopVar,
    written: impl Iterator<Item = &'a Vec<Index>> + Clone,
) -> impl Iterator<Item = usize> {
    let first = written.clone().next();
    first.into_iter().flat_map(move |first| {
        let written = written.clone();
        (0..first.len()).filter(move |&axis| {
            first[axis].moves_alone(var)
                && written.clone().all(|w| w.get(axis) == Some(&first[axis]))
        })
    })
}

/// A scalar local of a routine: an accumulator kept in a register, an inlined intermediate, or a
/// shared subexpression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LocalId(pub u32);

impl fmt::Display for LocalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}

/// Operations that read one value and write several consecutive cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VecUnop {
    /// One 128-bit word of random bits into as many values of the written precision as its bits
    /// make: uniform in [0, 1) for floats, uniform over the whole range for integers.
    Uint4x32ToPrecUniform,
}

impl VecUnop {
    /// How many cells one application writes, for a written node of precision `precision`.
    pub fn length(self, precision: Precision) -> usize {
        match self {
            VecUnop::Uint4x32ToPrecUniform => 16 / precision.size_in_bytes(),
        }
    }

    /// The operation's name in printed IR and error messages (`uint4x32_to_prec_uniform`).
    pub fn name(self) -> &'static str {
        match self {
            VecUnop::Uint4x32ToPrecUniform => "uint4x32_to_prec_uniform",
        }
    }
}

/// A cell of `node` chosen along one axis by a value held in data: a table's row picked by an
/// id (a gather). The id is computed as a number in f64 (in f32 in a GPU routine holding no f64
/// value); it selects a cell when it is an integer in `0..size`, and none otherwise (−1 for
/// padding, NaN, anything past the axis), which reads as 0 and is written nowhere. Nothing
/// outside the axis is ever addressed, whatever the data holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Lookup {
    /// The node read (or, in a `ScatterAdd`, added into).
    pub node: NodeId,
    /// Buffer positions of every axis; along `axis`, the position of its first interior cell
    /// (the left margin), to which the id is added.
    pub index: Vec<Index>,
    /// The axis the id selects along, counted from the outermost (0).
    pub axis: usize,
    /// The number of interior positions along `axis`.
    pub size: usize,
    /// The expression computing the id.
    pub id: Scalar,
}

impl Lookup {
    /// The index of the last cell the id can select (the axis's last interior position), for a
    /// code generator's bounds check; `None` when the node's index lacks `axis`.
    pub fn last_cell(&self) -> Option<Vec<Index>> {
        let mut last = self.index.clone();
        last.get_mut(self.axis)?.offset += self.size.saturating_sub(1) as i64;
        Some(last)
    }

    /// How far apart consecutive positions along `axis` lie in a buffer of `buffer_dims`
    /// (row-major).
    pub fn stride(&self, buffer_dims: &[usize]) -> usize {
        buffer_dims.iter().skip(self.axis + 1).product()
    }

    /// The position along `axis` that `id` selects, if it selects one.
    pub fn selected(&self, id: f64) -> Option<i64> {
        let valid = id >= 0.0 && id < self.size as f64 && id.trunc() == id;
        valid.then_some(id as i64)
    }
}

/// A scalar computation.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// A constant, converted to the kind the enclosing store computes in.
    Const(f64),
    /// The cell of a node at these buffer positions, one per axis.
    Get(NodeId, Vec<Index>),
    /// `lookup.node` at the cell the id selects, or 0 where it selects none.
    Lookup(Box<Lookup>),
    /// The value of an index as a number (a cell's own offset, a static index).
    Embed(Index),
    /// The current value of a local.
    Local(LocalId),
    /// A one-argument operation.
    Unop(Unop, Box<Scalar>),
    /// A two-argument operation.
    Binop(Binop, Box<Scalar>, Box<Scalar>),
    /// A three-argument operation.
    Ternop(Ternop, Box<Scalar>, Box<Scalar>, Box<Scalar>),
}

impl Scalar {
    /// Calls `visit` on this expression and on every expression inside it (a lookup's id
    /// included), each before those inside it, left to right: the one walk the visitors below
    /// share.
    pub fn for_each_part(&self, visit: &mut impl FnMut(&Scalar)) {
        visit(self);
        match self {
            Scalar::Const(_) | Scalar::Get(..) | Scalar::Embed(_) | Scalar::Local(_) => {}
            Scalar::Lookup(lookup) => lookup.id.for_each_part(visit),
            Scalar::Unop(_, a) => a.for_each_part(visit),
            Scalar::Binop(_, a, b) => {
                a.for_each_part(visit);
                b.for_each_part(visit);
            }
            Scalar::Ternop(_, a, b, c) => {
                a.for_each_part(visit);
                b.for_each_part(visit);
                c.for_each_part(visit);
            }
        }
    }

    /// Calls `visit` on every local this expression reads.
    pub fn for_each_local(&self, visit: &mut impl FnMut(LocalId)) {
        self.for_each_part(&mut |part| {
            if let Scalar::Local(id) = part {
                visit(*id);
            }
        });
    }

    /// Whether the expression reads `node` through a lookup, at a position held in data.
    pub fn looks_up(&self, node: NodeId) -> bool {
        let mut found = false;
        self.for_each_lookup(&mut |looked_up| found |= looked_up == node);
        found
    }

    /// Calls `visit` on the node each lookup of this expression (those in a lookup's id too)
    /// reads at a position held in data.
    pub fn for_each_lookup(&self, visit: &mut impl FnMut(NodeId)) {
        self.for_each_part(&mut |part| {
            if let Scalar::Lookup(lookup) = part {
                visit(lookup.node);
            }
        });
    }

    /// Replaces each read `node[index]` of this expression (those inside a lookup's id too, not
    /// the lookup's own read of its table) by `read(node, index)`, where that gives a value.
    pub fn replace_gets(&mut self, read: &mut impl FnMut(NodeId, &[Index]) -> Option<Scalar>) {
        match self {
            Scalar::Get(node, index) => {
                if let Some(value) = read(*node, index) {
                    *self = value;
                }
            }
            Scalar::Const(_) | Scalar::Embed(_) | Scalar::Local(_) => {}
            Scalar::Lookup(lookup) => lookup.id.replace_gets(read),
            Scalar::Unop(_, a) => a.replace_gets(read),
            Scalar::Binop(_, a, b) => {
                a.replace_gets(read);
                b.replace_gets(read);
            }
            Scalar::Ternop(_, a, b, c) => {
                a.replace_gets(read);
                b.replace_gets(read);
                c.replace_gets(read);
            }
        }
    }

    /// Calls `visit` on every node this expression reads, with the index read.
    pub fn for_each_get(&self, visit: &mut impl FnMut(NodeId, &[Index])) {
        self.for_each_part(&mut |part| match part {
            Scalar::Get(node, index) => visit(*node, index),
            // The index along the looked-up axis stands for every position of it.
            Scalar::Lookup(lookup) => visit(lookup.node, &lookup.index),
            _ => {}
        });
    }
}

/// A batched matrix product recognized in a nest: `c[ic] := c[ic] + a[ia] · b[ib]` over the
/// nest's loops, each loop in one group: `batch` (in all three indices), `m` (in `c` and `a`),
/// `n` (in `c` and `b`), `k` (in `a` and `b`: the reduction). Backends with a matrix-product
/// routine run it through that; the others run the nest it was found in.
///
/// A plan whose `a_margins` are not empty reads `a` through a copy widened by zeros (a
/// convolution's input gradient gathered over its zero-padded output gradient, see
/// `optimize::gather`): its loops and indices are then its own, not the nest's, and the nest is
/// what it means.
#[derive(Debug, Clone, PartialEq)]
pub struct GemmPlan {
    /// The result, into whose cells the terms `a[ia] · b[ib]` are added.
    pub c: NodeId,
    /// The left operand, indexed by the `batch`, `m` and `k` loops.
    pub a: NodeId,
    /// The right operand, indexed by the `batch`, `k` and `n` loops.
    pub b: NodeId,
    /// Whether the nest starts by filling `c` with zeros.
    pub zero_first: bool,
    /// The loops with their ranges that choose one product of the batch.
    pub batch: Vec<(LoopVar, usize)>,
    /// The loops with their ranges that choose a row of `c` and of `a`.
    pub m: Vec<(LoopVar, usize)>,
    /// The loops with their ranges that choose a column of `c` and of `b`.
    pub n: Vec<(LoopVar, usize)>,
    /// Outermost first, as the nest runs them: the order each cell receives its terms in.
    pub k: Vec<(LoopVar, usize)>,
    /// The buffer position of `c`'s cell along each of its axes, over the plan's loops.
    pub c_index: Vec<Index>,
    /// Into `a`'s buffer widened by `a_margins`, when there are some.
    pub a_index: Vec<Index>,
    /// The buffer position of `b`'s cell along each of its axes, over the plan's loops.
    pub b_index: Vec<Index>,
    /// `(before, after)` zero cells added around each axis of `a`'s buffer before the product
    /// reads it; empty when it reads `a` where it lies.
    pub a_margins: Vec<(usize, usize)>,
}

impl GemmPlan {
    /// The loops that choose the cell written: batch, rows, columns.
    pub fn written_loops(&self) -> Vec<(LoopVar, usize)> {
        self.batch
            .iter()
            .chain(&self.m)
            .chain(&self.n)
            .copied()
            .collect()
    }
}

/// A statement of the loop IR: a loop, a store into a node or a local, a fill, a scatter, or a
/// recognized matrix product.
#[derive(Debug, Clone, PartialEq)]
pub enum Stmt {
    /// `for var in 0..range { body }`.
    For {
        /// The loop variable, counting up from 0.
        var: LoopVar,
        /// The number of iterations.
        range: usize,
        /// The statements run at each iteration, in order.
        body: Vec<Stmt>,
    },
    /// Stores `value` at `index` of `node`.
    Set {
        /// The node written.
        node: NodeId,
        /// The buffer position along each axis of `node`.
        index: Vec<Index>,
        /// The value stored, computed in `node`'s precision and rounded to it.
        value: Scalar,
    },
    /// Stores the `op.length(precision)` values of `op(arg)` at consecutive cells of `node`
    /// (which has no margins) from the flat row-major cell `offset` on; cells past the end are
    /// not written.
    SetVec {
        /// The node written.
        node: NodeId,
        /// The flat row-major offset of the first cell written.
        offset: Index,
        /// The operation; it writes `op.length(precision)` cells, for `node`'s precision.
        op: VecUnop,
        /// The value the operation reads: a 128-bit word.
        arg: Scalar,
    },
    /// Sets every cell of `node`'s buffer, margins included.
    Fill {
        /// The node filled.
        node: NodeId,
        /// The value of every cell, rounded to the node's precision.
        value: f64,
    },
    /// Sets the cells of `node`'s margins, leaving its interior alone.
    FillMargins {
        /// The node whose margins are set.
        node: NodeId,
        /// The value of every margin cell: the neutral element of the accumulator that reads
        /// there, so that reads of the margins change nothing.
        value: f64,
    },
    /// Declares the local `id` of `precision`, starting at `value`; it lives until the end of
    /// the enclosing body.
    Local {
        /// The local declared.
        id: LocalId,
        /// The local's precision: what stores into it compute in (floats in its compute precision)
        /// and round to.
        precision: Precision,
        /// Its initial value.
        value: Scalar,
    },
    /// Stores `value` into the local `id`.
    SetLocal {
        /// The local written, declared by an enclosing or earlier `Local`.
        id: LocalId,
        /// The value stored, computed in the local's precision.
        value: Scalar,
    },
    /// Adds `value` into the cell of `target.node` that `target.id` selects, if it selects one
    /// (a gather's gradient: repeated ids accumulate). `target.id` is read before `value`.
    ScatterAdd {
        /// The cell added into: the node, the positions of its other axes and the id.
        target: Box<Lookup>,
        /// The value added.
        value: Scalar,
    },
    /// A matrix product, with the statements it was recognized in (its meaning).
    Gemm {
        /// The product, for backends with a matrix-product routine.
        plan: Box<GemmPlan>,
        /// The statements the product was recognized in: what it means, and what the other backends
        /// run.
        nest: Vec<Stmt>,
    },
}

impl Stmt {
    /// Calls `visit` on this statement and every statement nested in it, outermost first.
    pub fn walk(&self, visit: &mut impl FnMut(&Stmt)) {
        visit(self);
        if let Stmt::For { body, .. } | Stmt::Gemm { nest: body, .. } = self {
            for stmt in body {
                stmt.walk(visit);
            }
        }
    }

    /// The cells the statement stores, counted over the trips of its loops (a statement that
    /// is no loop counts one): the work a backend weighs before splitting it across threads.
    pub fn stored_cells(&self) -> usize {
        match self {
            Stmt::For { range, body, .. } => {
                range.saturating_mul(body.iter().map(Stmt::stored_cells).sum())
            }
            _ => 1,
        }
    }

    /// The node the statement writes, if it writes one.
    pub fn written_node(&self) -> Option<NodeId> {
        match self {
            Stmt::Set { node, .. }
            | Stmt::SetVec { node, .. }
            | Stmt::Fill { node, .. }
            | Stmt::FillMargins { node, .. } => Some(*node),
            Stmt::ScatterAdd { target, .. } => Some(target.node),
            Stmt::For { .. } | Stmt::Local { .. } | Stmt::SetLocal { .. } | Stmt::Gemm { .. } => {
                None
            }
        }
    }

    /// The expressions the statement evaluates itself (not those of nested statements). Asked of
    /// every statement by most passes: no allocation.
    pub fn values(&self) -> impl Iterator<Item = &Scalar> {
        let (first, second) = match self {
            Stmt::Set { value, .. } | Stmt::Local { value, .. } | Stmt::SetLocal { value, .. } => {
                (Some(value), None)
            }
            Stmt::SetVec { arg, .. } => (Some(arg), None),
            Stmt::ScatterAdd { target, value } => (Some(&target.id), Some(value)),
            Stmt::For { .. } | Stmt::Fill { .. } | Stmt::FillMargins { .. } | Stmt::Gemm { .. } => {
                (None, None)
            }
        };
        first.into_iter().chain(second)
    }
}

impl fmt::Display for Index {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = self
            .terms
            .iter()
            .map(|(c, v)| {
                if *c == 1 {
                    v.to_string()
                } else {
                    format!("{c}*{v}")
                }
            })
            .collect();
        if self.offset != 0 || parts.is_empty() {
            parts.push(self.offset.to_string());
        }
        f.write_str(&parts.join("+").replace("+-", "-"))
    }
}

impl fmt::Display for Lookup {
    /// `n1[l0, @(n2[l1]) + 0 <5]`: the looked-up axis shows its id, its start and its size.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let axes: Vec<String> = self
            .index
            .iter()
            .enumerate()
            .map(|(axis, index)| {
                if axis == self.axis {
                    format!("@({}) + {index} <{}", self.id, self.size)
                } else {
                    index.to_string()
                }
            })
            .collect();
        write!(f, "{}[{}]", self.node, axes.join(", "))
    }
}

fn indices(index: &[Index]) -> String {
    index
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Const(x) => write!(f, "{x}"),
            Scalar::Get(node, index) => write!(f, "{node}[{}]", indices(index)),
            Scalar::Lookup(lookup) => write!(f, "{}", lookup),
            Scalar::Embed(index) => write!(f, "#({index})"),
            Scalar::Local(id) => write!(f, "{id}"),
            Scalar::Unop(op, x) => write!(f, "{op}({x})"),
            Scalar::Binop(op, a, b) => match op {
                Binop::Arg1
                | Binop::Arg2
                | Binop::Max
                | Binop::Min
                | Binop::ReluGate
                | Binop::Sat01Gate => {
                    write!(f, "{op}({a}, {b})")
                }
                Binop::Threefry4x32 => write!(f, "threefry4x32({a}, {b})"),
                Binop::Threefry4x32Light => write!(f, "threefry4x32_light({a}, {b})"),
                _ => write!(f, "({a} {op} {b})"),
            },
            Scalar::Ternop(op, a, b, c) => write!(f, "{op}({a}, {b}, {c})"),
        }
    }
}

impl Stmt {
    fn write(&self, f: &mut fmt::Formatter<'_>, depth: usize) -> fmt::Result {
        let pad = "  ".repeat(depth);
        match self {
            Stmt::For { var, range, body } => {
                writeln!(f, "{pad}for {var} in 0..{range} {{")?;
                for stmt in body {
                    stmt.write(f, depth + 1)?;
                }
                writeln!(f, "{pad}}}")
            }
            Stmt::Set { node, index, value } => {
                writeln!(f, "{pad}{node}[{}] := {value}", indices(index))
            }
            Stmt::SetVec {
                node,
                offset,
                op,
                arg,
            } => writeln!(f, "{pad}{node}[@{offset}..] := {}({arg})", op.name()),
            Stmt::Fill { node, value } => writeln!(f, "{pad}fill {node} with {value}"),
            Stmt::FillMargins { node, value } => {
                writeln!(f, "{pad}fill margins of {node} with {value}")
            }
            Stmt::Local {
                id,
                precision,
                value,
            } => writeln!(f, "{pad}local {id}: {precision} := {value}"),
            Stmt::SetLocal { id, value } => writeln!(f, "{pad}{id} := {value}"),
            Stmt::ScatterAdd { target, value } => writeln!(f, "{pad}{target} += {value}"),
            Stmt::Gemm { plan, nest } => {
                let group = |loops: &[(LoopVar, usize)]| {
                    let shown: Vec<String> =
                        loops.iter().map(|(v, r)| format!("{v}<{r}>")).collect();
                    if shown.is_empty() {
                        "-".to_owned()
                    } else {
                        shown.join(" ")
                    }
                };
                // A gathering plan's indices are its own: shown, with the margins.
                let (c, a, b) = if plan.a_margins.is_empty() {
                    (plan.c.to_string(), plan.a.to_string(), plan.b.to_string())
                } else {
                    let at = |node: NodeId, index: &[Index]| {
                        let axes: Vec<String> = index.iter().map(Index::to_string).collect();
                        format!("{node}[{}]", axes.join(", "))
                    };
                    (
                        at(plan.c, &plan.c_index),
                        format!(
                            "{} (zero margins {:?})",
                            at(plan.a, &plan.a_index),
                            plan.a_margins
                        ),
                        at(plan.b, &plan.b_index),
                    )
                };
                writeln!(
                    f,
                    "{pad}gemm {c} {}= {a} * {b} (batch {}; m {}; n {}; k {}) {{",
                    if plan.zero_first { ":" } else { "+" },
                    group(&plan.batch),
                    group(&plan.m),
                    group(&plan.n),
                    group(&plan.k)
                )?;
                for stmt in nest {
                    stmt.write(f, depth + 1)?;
                }
                writeln!(f, "{pad}}}")
            }
        }
    }
}

impl fmt::Display for Stmt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, 0)
    }
}
