//! Routines: a body of loop IR with the nodes it touches and the static indices it takes, the
//! unit that is optimized, compiled and run.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::assignment::Assignment;
use crate::index::Symbol;
use crate::loops::{Index, Scalar, Stmt, Var};
use crate::lower::{LowerError, lower_over};
use crate::node::{NodeId, TensorNode};

/// The range a routine gives a static index that no slice of it selects with, whose value it
/// only embeds as a number ([`crate::FetchOp::EmbedStatic`]): every position from 0 below 2³¹,
/// which every backend's integers and embedded positions hold exactly. A slice selecting with
/// the index gives it the sliced axis's size instead.
pub const UNRANGED_STATIC: usize = 1 << 31;

/// A body of loop IR with the nodes it touches and the static indices it takes: the unit that is
/// optimized, compiled and run.
#[derive(Debug, Clone, PartialEq)]
pub struct Routine {
    /// A name for printing and reports.
    pub name: String,
    /// Every node the body reads or writes, by id.
    pub nodes: BTreeMap<NodeId, TensorNode>,
    /// The static indices the routine takes when it runs, with the number of positions each
    /// selects among ([`UNRANGED_STATIC`] for one that no slice selects with).
    pub statics: BTreeMap<Symbol, usize>,
    /// The statements, run in order.
    pub body: Vec<Stmt>,
}

impl Routine {
    /// The routine that runs `assignment` over `nodes`, lowered but not optimized.
    pub fn lower(
        name: &str,
        assignment: &Assignment,
        nodes: impl IntoIterator<Item = TensorNode>,
    ) -> Result<Routine, LowerError> {
        let nodes: BTreeMap<NodeId, TensorNode> = nodes.into_iter().map(|n| (n.id, n)).collect();
        let (body, statics) = lower_over(assignment, &nodes)?;
        Ok(Routine {
            name: name.to_owned(),
            nodes,
            statics,
            body,
        })
    }

    /// The static index `symbol` as a message names it: by the tensors the routine reads or
    /// writes at it (`the static index slicing 'xs' and 'ys'`), which whoever made it knows,
    /// rather than by its symbol, which they never see; else by the tensors whose cells hold
    /// its value (`the static index embedded in 'step'`); by the symbol only where neither
    /// is found.
    pub fn static_name(&self, symbol: Symbol) -> String {
        let at_it = |index: &[Index]| {
            (index.iter()).any(|i| i.vars().any(|var| var == Var::Static(symbol)))
        };
        let mut sliced = BTreeSet::new();
        let mut embedded = BTreeSet::new();
        // The locals holding its value, or values computed from it, in the order they are set.
        let mut holding = BTreeSet::new();
        for stmt in &self.body {
            stmt.walk(&mut |s| {
                let from_it = |value: &Scalar| {
                    let mut reads_holder = false;
                    value.for_each_local(&mut |id| reads_holder |= holding.contains(&id));
                    reads_holder || embeds(value, &at_it)
                };
                match s {
                    Stmt::Set { node, value, .. } if from_it(value) => {
                        embedded.insert(*node);
                    }
                    Stmt::Local { id, value, .. } | Stmt::SetLocal { id, value }
                        if from_it(value) =>
                    {
                        holding.insert(*id);
                    }
                    _ => {}
                }
                match s {
                    Stmt::Set { node, index, .. } if at_it(index) => {
                        sliced.insert(*node);
                    }
                    Stmt::ScatterAdd { target, .. } if at_it(&target.index) => {
                        sliced.insert(target.node);
                    }
                    _ => {}
                }
                for value in s.values() {
                    value.for_each_get(&mut |node, index| {
                        if at_it(index) {
                            sliced.insert(node);
                        }
                    });
                }
            });
        }
        let (how, named) = if sliced.is_empty() {
            ("embedded in", embedded)
        } else {
            ("slicing", sliced)
        };
        let labels: Vec<String> = (named.iter())
            .map(|id| match self.nodes.get(id) {
                Some(node) => format!("'{}'", node.label),
                None => id.to_string(),
            })
            .collect();
        match labels.split_last() {
            None => format!("the static index s{}", symbol.0),
            Some((last, [])) => format!("the static index {how} {last}"),
            Some((last, rest)) => {
                format!("the static index {how} {} and {last}", rest.join(", "))
            }
        }
    }
}

/// Whether `value` reads, as a number, an index that `at_it` accepts.
fn embeds(value: &Scalar, at_it: &impl Fn(&[Index]) -> bool) -> bool {
    match value {
        Scalar::Embed(index) => at_it(std::slice::from_ref(index)),
        Scalar::Const(_) | Scalar::Get(..) | Scalar::Local(_) => false,
        Scalar::Lookup(lookup) => embeds(&lookup.id, at_it),
        Scalar::Unop(_, a) => embeds(a, at_it),
        Scalar::Binop(_, a, b) => embeds(a, at_it) || embeds(b, at_it),
        Scalar::Ternop(_, a, b, c) => embeds(a, at_it) || embeds(b, at_it) || embeds(c, at_it),
    }
}

impl fmt::Display for Routine {
    /// A header with the static indices, a line per node (id, label, precision, dims, margins,
    /// memory mode), then the body.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let statics: Vec<String> = self
            .statics
            .iter()
            .map(|(symbol, range)| format!("s{} < {range}", symbol.0))
            .collect();
        writeln!(f, "routine {}({}):", self.name, statics.join(", "))?;
        for node in self.nodes.values() {
            let dims: Vec<String> = node.dims.iter().map(ToString::to_string).collect();
            write!(
                f,
                "  {} '{}': {} [{}]",
                node.id,
                node.label,
                node.precision,
                dims.join(", ")
            )?;
            if node.padding.iter().any(|(l, r)| l + r > 0) {
                let margins: Vec<String> = node
                    .padding
                    .iter()
                    .map(|(l, r)| format!("{l}+{r}"))
                    .collect();
                write!(f, " margins [{}]", margins.join(", "))?;
            }
            match node.memory_mode {
                Some(mode) => writeln!(f, " {mode}")?,
                None => writeln!(f)?,
            }
        }
        for stmt in &self.body {
            write!(f, "{stmt}")?;
        }
        Ok(())
    }
}
