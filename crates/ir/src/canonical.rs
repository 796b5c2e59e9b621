//! Statements in their own names. A deep model repeats the same nests over other nodes; the
//! optimizer and the code generators do each distinct nest's work once by comparing statements
//! with their names (nodes, loop variables, locals) numbered in the order the statements first
//! use them: two runs of statements alike in their own names, over nodes alike (precision,
//! dims, margins, memory mode; labels aside), compute alike, and the work done for one, renamed
//! ([`in_routine`]), stands for the other.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::mem::discriminant;

use rustc_hash::{FxHashMap, FxHasher};

use crate::loops::{Index, LocalId, Lookup, LoopVar, Scalar, Stmt, Var};
use crate::node::{MemoryMode, NodeId, TensorNode};
use crate::precision::Precision;

/// Statements in their own names, with the routine's nodes behind their numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct OwnNames {
    /// The statements, every node, loop variable and local numbered from 0 in the order of its
    /// first use.
    pub stmts: Vec<Stmt>,
    /// The routine's node behind each number: `nodes[i]` is the statements' `NodeId(i)`.
    pub nodes: Vec<NodeId>,
}

impl OwnNames {
    /// `stmts` in their own names.
    pub fn of(mut stmts: Vec<Stmt>) -> OwnNames {
        let mut numbering = Numbering::default();
        for stmt in &mut stmts {
            rename_stmt(stmt, &mut numbering);
        }
        OwnNames {
            stmts,
            nodes: numbering.nodes,
        }
    }

    /// A hash of the statements and of their nodes as `nodes` (the routine's) describes them:
    /// the same for statements alike.
    pub fn hash(&self, nodes: &BTreeMap<NodeId, TensorNode>) -> u64 {
        let mut hashing = Hashing {
            hasher: FxHasher::default(),
            names: true,
        };
        for stmt in &self.stmts {
            hashing.stmt(stmt);
        }
        for node in &self.nodes {
            nodes.get(node).map(described).hash(&mut hashing.hasher);
        }
        hashing.hasher.finish()
    }

    /// Whether these statements over `nodes` and `other` over `other_nodes` are alike.
    pub fn alike(
        &self,
        nodes: &BTreeMap<NodeId, TensorNode>,
        other: &OwnNames,
        other_nodes: &BTreeMap<NodeId, TensorNode>,
    ) -> bool {
        self.stmts == other.stmts
            && self.nodes.len() == other.nodes.len()
            && (self.nodes.iter().zip(&other.nodes))
                .all(|(a, b)| nodes.get(a).map(described) == other_nodes.get(b).map(described))
    }
}

/// What of a node the statements over it depend on: all but its id and label.
type Described<'a> = (
    Precision,
    &'a [usize],
    &'a [(usize, usize)],
    Option<MemoryMode>,
);

fn described(node: &TensorNode) -> Described<'_> {
    (node.precision, &node.dims, &node.padding, node.memory_mode)
}

/// `stmts`, in their own names, renamed into a routine: node `i` becomes `nodes[i]`, loop
/// variable `v` becomes `var_base + v` and local `l` becomes `local_base + l`.
pub fn in_routine(stmts: &[Stmt], nodes: &[NodeId], var_base: u32, local_base: u32) -> Vec<Stmt> {
    let mut back = Back {
        nodes,
        var_base,
        local_base,
    };
    stmts
        .iter()
        .map(|stmt| {
            let mut stmt = stmt.clone();
            rename_stmt(&mut stmt, &mut back);
            stmt
        })
        .collect()
}

/// A hash of `stmt`'s form: all of it but its names (nodes, loop variables, locals), so that
/// statements alike in their own names have the same form (and others most often not).
pub fn form(stmt: &Stmt) -> u64 {
    let mut hashing = Hashing {
        hasher: FxHasher::default(),
        names: false,
    };
    hashing.stmt(stmt);
    hashing.hasher.finish()
}

/// A hasher of statements, with their names or without. A fast hasher rather than a
/// collision-resistant one: a form only places chunk boundaries, and statements of equal
/// own-name hashes are compared before one stands for the other.
struct Hashing {
    hasher: FxHasher,
    names: bool,
}

impl Hashing {
    fn name(&mut self, name: impl Hash) {
        if self.names {
            name.hash(&mut self.hasher);
        }
    }

    fn index(&mut self, index: &Index) {
        index.offset.hash(&mut self.hasher);
        for (coefficient, var) in &index.terms {
            coefficient.hash(&mut self.hasher);
            match var {
                Var::Loop(var) => self.name(var),
                Var::Static(symbol) => symbol.hash(&mut self.hasher),
            }
        }
    }

    fn indices(&mut self, index: &[Index]) {
        index.len().hash(&mut self.hasher);
        index.iter().for_each(|axis| self.index(axis));
    }

    fn stmt(&mut self, stmt: &Stmt) {
        discriminant(stmt).hash(&mut self.hasher);
        match stmt {
            Stmt::For { var, range, body } => {
                self.name(var);
                range.hash(&mut self.hasher);
                body.len().hash(&mut self.hasher);
                body.iter().for_each(|s| self.stmt(s));
            }
            Stmt::Set { node, index, value } => {
                self.name(node);
                self.indices(index);
                self.scalar(value);
            }
            Stmt::SetVec {
                node,
                offset,
                op,
                arg,
            } => {
                self.name(node);
                self.index(offset);
                op.hash(&mut self.hasher);
                self.scalar(arg);
            }
            Stmt::Fill { node, value } | Stmt::FillMargins { node, value } => {
                self.name(node);
                value.to_bits().hash(&mut self.hasher);
            }
            Stmt::Local {
                id,
                precision,
                value,
            } => {
                self.name(id);
                precision.hash(&mut self.hasher);
                self.scalar(value);
            }
            Stmt::SetLocal { id, value } => {
                self.name(id);
                self.scalar(value);
            }
            Stmt::ScatterAdd { target, value } => {
                self.lookup(target);
                self.scalar(value);
            }
            Stmt::Gemm { plan, nest } => {
                [plan.c, plan.a, plan.b]
                    .iter()
                    .for_each(|node| self.name(node));
                plan.zero_first.hash(&mut self.hasher);
                for loops in [&plan.batch, &plan.m, &plan.n, &plan.k] {
                    loops.len().hash(&mut self.hasher);
                    for (var, range) in loops {
                        self.name(var);
                        range.hash(&mut self.hasher);
                    }
                }
                for index in [&plan.c_index, &plan.a_index, &plan.b_index] {
                    self.indices(index);
                }
                plan.a_margins.hash(&mut self.hasher);
                nest.len().hash(&mut self.hasher);
                nest.iter().for_each(|s| self.stmt(s));
            }
        }
    }

    fn scalar(&mut self, scalar: &Scalar) {
        discriminant(scalar).hash(&mut self.hasher);
        match scalar {
            Scalar::Const(c) => c.to_bits().hash(&mut self.hasher),
            Scalar::Get(node, index) => {
                self.name(node);
                self.indices(index);
            }
            Scalar::Lookup(lookup) => self.lookup(lookup),
            Scalar::Embed(index) => self.index(index),
            Scalar::Local(id) => self.name(id),
            Scalar::Unop(op, a) => {
                op.hash(&mut self.hasher);
                self.scalar(a);
            }
            Scalar::Binop(op, a, b) => {
                op.hash(&mut self.hasher);
                self.scalar(a);
                self.scalar(b);
            }
            Scalar::Ternop(op, a, b, c) => {
                op.hash(&mut self.hasher);
                self.scalar(a);
                self.scalar(b);
                self.scalar(c);
            }
        }
    }

    fn lookup(&mut self, lookup: &Lookup) {
        self.name(lookup.node);
        self.indices(&lookup.index);
        (lookup.axis, lookup.size).hash(&mut self.hasher);
        self.scalar(&lookup.id);
    }
}

/// What each name of a statement becomes.
trait Names {
    fn node(&mut self, node: NodeId) -> NodeId;
    fn var(&mut self, var: LoopVar) -> LoopVar;
    fn local(&mut self, id: LocalId) -> LocalId;
}

/// Names numbered in the order of their first use.
#[derive(Default)]
struct Numbering {
    /// The routine's node behind each own number.
    nodes: Vec<NodeId>,
    node_numbers: FxHashMap<NodeId, u32>,
    vars: FxHashMap<LoopVar, u32>,
    locals: FxHashMap<LocalId, u32>,
}

impl Names for Numbering {
    fn node(&mut self, node: NodeId) -> NodeId {
        let next = self.nodes.len() as u32;
        let own = *self.node_numbers.entry(node).or_insert(next);
        if own == next {
            self.nodes.push(node);
        }
        NodeId(own)
    }

    fn var(&mut self, var: LoopVar) -> LoopVar {
        let next = self.vars.len() as u32;
        LoopVar(*self.vars.entry(var).or_insert(next))
    }

    fn local(&mut self, id: LocalId) -> LocalId {
        let next = self.locals.len() as u32;
        LocalId(*self.locals.entry(id).or_insert(next))
    }
}

/// Own names back in a routine.
struct Back<'a> {
    nodes: &'a [NodeId],
    var_base: u32,
    local_base: u32,
}

impl Names for Back<'_> {
    fn node(&mut self, node: NodeId) -> NodeId {
        self.nodes[node.0 as usize]
    }

    fn var(&mut self, var: LoopVar) -> LoopVar {
        LoopVar(self.var_base.saturating_add(var.0))
    }

    fn local(&mut self, id: LocalId) -> LocalId {
        LocalId(self.local_base.saturating_add(id.0))
    }
}

/// `stmt` with every name renamed by `names`, in the order the statement is written.
fn rename_stmt(stmt: &mut Stmt, names: &mut impl Names) {
    match stmt {
        Stmt::For { var, body, .. } => {
            *var = names.var(*var);
            for stmt in body {
                rename_stmt(stmt, names);
            }
        }
        Stmt::Set { node, index, value } => {
            *node = names.node(*node);
            rename_indices(index, names);
            rename_scalar(value, names);
        }
        Stmt::SetVec {
            node, offset, arg, ..
        } => {
            *node = names.node(*node);
            rename_index(offset, names);
            rename_scalar(arg, names);
        }
        Stmt::Fill { node, .. } | Stmt::FillMargins { node, .. } => *node = names.node(*node),
        Stmt::Local { id, value, .. } | Stmt::SetLocal { id, value } => {
            *id = names.local(*id);
            rename_scalar(value, names);
        }
        Stmt::ScatterAdd { target, value } => {
            rename_lookup(target, names);
            rename_scalar(value, names);
        }
        Stmt::Gemm { plan, nest } => {
            plan.c = names.node(plan.c);
            plan.a = names.node(plan.a);
            plan.b = names.node(plan.b);
            for (var, _) in plan
                .batch
                .iter_mut()
                .chain(&mut plan.m)
                .chain(&mut plan.n)
                .chain(&mut plan.k)
            {
                *var = names.var(*var);
            }
            rename_indices(&mut plan.c_index, names);
            rename_indices(&mut plan.a_index, names);
            rename_indices(&mut plan.b_index, names);
            for stmt in nest {
                rename_stmt(stmt, names);
            }
        }
    }
}

fn rename_scalar(scalar: &mut Scalar, names: &mut impl Names) {
    match scalar {
        Scalar::Const(_) => {}
        Scalar::Get(node, index) => {
            *node = names.node(*node);
            rename_indices(index, names);
        }
        Scalar::Lookup(lookup) => rename_lookup(lookup, names),
        Scalar::Embed(index) => rename_index(index, names),
        Scalar::Local(id) => *id = names.local(*id),
        Scalar::Unop(_, a) => rename_scalar(a, names),
        Scalar::Binop(_, a, b) => {
            rename_scalar(a, names);
            rename_scalar(b, names);
        }
        Scalar::Ternop(_, a, b, c) => {
            rename_scalar(a, names);
            rename_scalar(b, names);
            rename_scalar(c, names);
        }
    }
}

fn rename_lookup(lookup: &mut Lookup, names: &mut impl Names) {
    lookup.node = names.node(lookup.node);
    rename_indices(&mut lookup.index, names);
    rename_scalar(&mut lookup.id, names);
}

fn rename_indices(index: &mut [Index], names: &mut impl Names) {
    for axis in index {
        rename_index(axis, names);
    }
}

fn rename_index(index: &mut Index, names: &mut impl Names) {
    for (_, var) in &mut index.terms {
        if let Var::Loop(l) = var {
            *l = names.var(*l);
        }
    }
}
