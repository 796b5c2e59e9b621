//! Routines: a body of loop IR with the nodes it touches and the static indices it takes, the
//! unit that is optimized, compiled and run.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::assignment::Assignment;
use crate::index::Symbol;
use crate::loops::{Index, Stmt, Var};
use crate::lower::{LowerError, lower_over};
use crate::node::{NodeId, TensorNode};

/// A body of loop IR with the nodes it touches and the static indices it takes: the unit that is
/// optimized, compiled and run.
#[derive(Debug, Clone, PartialEq)]
pub struct Routine {
    /// A name for printing and reports.
    pub name: String,
    /// Every node the body reads or writes, by id.
    pub nodes: BTreeMap<NodeId, TensorNode>,
    /// The static indices the routine takes when it runs, with the number of positions each
    /// selects among.
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
    /// rather than by its symbol, which they never see; by the symbol only where no access
    /// uses it.
    pub fn static_name(&self, symbol: Symbol) -> String {
        let at_it = |index: &[Index]| {
            (index.iter()).any(|i| i.vars().any(|var| var == Var::Static(symbol)))
        };
        let mut sliced = BTreeSet::new();
        for stmt in &self.body {
            stmt.walk(&mut |s| {
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
        let labels: Vec<String> = (sliced.iter())
            .map(|id| match self.nodes.get(id) {
                Some(node) => format!("'{}'", node.label),
                None => id.to_string(),
            })
            .collect();
        match labels.split_last() {
            None => format!("the static index s{}", symbol.0),
            Some((last, [])) => format!("the static index slicing {last}"),
            Some((last, rest)) => {
                format!("the static index slicing {} and {last}", rest.join(", "))
            }
        }
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
