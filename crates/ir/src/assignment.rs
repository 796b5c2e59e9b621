//! Assignments: the high-level IR. Each accumulating assignment carries the projections record
//! that says how its loops run; lowering (`lower`) turns it into loops.

use std::fmt;

use crate::node::NodeId;
use crate::ops::{Binop, Ternop, Unop};
use crate::projections::Projections;

/// What an accumulating assignment computes at each point of its product space.
#[derive(Debug, Clone, PartialEq)]
pub enum Rhs {
    Unop(Unop, NodeId),
    Binop(Binop, NodeId, NodeId),
    Ternop(Ternop, NodeId, NodeId, NodeId),
}

impl Rhs {
    /// The nodes read, in operand order (the order of the projections' read maps).
    pub fn operands(&self) -> Vec<NodeId> {
        match self {
            Rhs::Unop(_, a) => vec![*a],
            Rhs::Binop(_, a, b) => vec![*a, *b],
            Rhs::Ternop(_, a, b, c) => vec![*a, *b, *c],
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Assignment {
    Noop,
    Seq(Vec<Assignment>),
    /// `lhs =:accum rhs` (`initialize_neutral`: the cells start from the accumulator's neutral
    /// element) or `lhs =accum rhs` (accumulating into what is there).
    Accum {
        initialize_neutral: bool,
        accum: Binop,
        lhs: NodeId,
        rhs: Rhs,
        projections: Projections,
    },
    /// One result assembled from several sources (concatenation, block matrices): at each point
    /// the one source whose stretch is active is read through `op`. The projections' read maps
    /// are the sources', in order.
    Block {
        initialize_neutral: bool,
        accum: Binop,
        lhs: NodeId,
        op: Unop,
        sources: Vec<NodeId>,
        projections: Projections,
    },
    /// A block assignment run backwards (the gradient of a concatenation): one `source`, read
    /// through the projections' written map, scattered into `targets` through their read maps,
    /// each through `op`. At each point exactly one target may be addressed.
    RevSides {
        initialize_neutral: bool,
        accum: Binop,
        source: NodeId,
        op: Unop,
        targets: Vec<NodeId>,
        projections: Projections,
    },
}

/// `=:+`, `=+`, `=:` …: the accumulator as an assignment writes it.
fn assign(initialize_neutral: bool, accum: Binop) -> String {
    let colon = if initialize_neutral { ":" } else { "" };
    match accum {
        Binop::Arg2 => format!("={colon}"),
        other => format!("={colon}{other}"),
    }
}

/// `node`, or `op node` unless `op` is the identity.
fn applied(op: Unop, node: NodeId) -> String {
    match op {
        Unop::Identity => node.to_string(),
        op => format!("{op} {node}"),
    }
}

impl fmt::Display for Assignment {
    /// `n2 =:+ n0 * n1 ~logic:"…"`, one assignment per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Assignment::Noop => f.write_str("noop"),
            Assignment::Seq(parts) => {
                let lines: Vec<String> = parts.iter().map(ToString::to_string).collect();
                f.write_str(&lines.join("\n"))
            }
            Assignment::Accum {
                initialize_neutral,
                accum,
                lhs,
                rhs,
                projections,
            } => {
                let rhs = match rhs {
                    Rhs::Unop(op, a) => applied(*op, *a),
                    Rhs::Binop(op, a, b) => format!("{a} {op} {b}"),
                    Rhs::Ternop(op, a, b, c) => format!("{op:?}({a}, {b}, {c})").to_lowercase(),
                };
                write!(
                    f,
                    "{lhs} {} {rhs} ~logic:\"{}\"",
                    assign(*initialize_neutral, *accum),
                    projections.label
                )
            }
            Assignment::Block {
                initialize_neutral,
                accum,
                lhs,
                op,
                sources,
                projections,
            } => {
                let sources: Vec<String> = sources.iter().map(|s| applied(*op, *s)).collect();
                write!(
                    f,
                    "{lhs} {} block({}) ~logic:\"{}\"",
                    assign(*initialize_neutral, *accum),
                    sources.join("; "),
                    projections.label
                )
            }
            Assignment::RevSides {
                initialize_neutral,
                accum,
                source,
                op,
                targets,
                projections,
            } => {
                let targets: Vec<String> = targets.iter().map(ToString::to_string).collect();
                let source = applied(*op, *source);
                write!(
                    f,
                    "block({}) {} {source} ~logic:\"{}\"",
                    targets.join("; "),
                    assign(*initialize_neutral, *accum),
                    projections.label
                )
            }
        }
    }
}
