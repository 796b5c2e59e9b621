//! Assignments: the high-level IR. Each accumulating assignment carries the projections record
//! that says how its loops run; lowering (`lower`) turns it into loops.

use std::fmt;

use crate::index::Symbol;
use crate::loops::VecUnop;
use crate::node::NodeId;
use crate::ops::{Binop, Ternop, Unop};
use crate::projections::Projections;

/// An expression over an assignment's operands: what a gradient computes at each point of the
/// forward operation's product space (`where(a + b == v, g, 0)` for a max-plus product).
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// The `i`-th operand, read through the `i`-th read map.
    Operand(usize),
    /// A constant.
    Const(f64),
    /// A one-argument operation of a subexpression.
    Unop(Unop, Box<Expr>),
    /// A two-argument operation of two subexpressions.
    Binop(Binop, Box<Expr>, Box<Expr>),
    /// A three-argument operation (`where`, `fma`, …) of three subexpressions.
    Ternop(Ternop, Box<Expr>, Box<Expr>, Box<Expr>),
}

impl Expr {
    /// The expression with each operand replaced by `operand(i)`.
    pub fn map_operands<T>(
        &self,
        operand: &impl Fn(usize) -> T,
        constant: &impl Fn(f64) -> T,
        unop: &impl Fn(Unop, T) -> T,
        binop: &impl Fn(Binop, T, T) -> T,
        ternop: &impl Fn(Ternop, T, T, T) -> T,
    ) -> T {
        let go = |e: &Expr| e.map_operands(operand, constant, unop, binop, ternop);
        match self {
            Expr::Operand(i) => operand(*i),
            Expr::Const(c) => constant(*c),
            Expr::Unop(op, a) => unop(*op, go(a)),
            Expr::Binop(op, a, b) => binop(*op, go(a), go(b)),
            Expr::Ternop(op, a, b, c) => ternop(*op, go(a), go(b), go(c)),
        }
    }
}

/// What an accumulating assignment computes at each point of its product space.
#[derive(Debug, Clone, PartialEq)]
pub enum Rhs {
    /// `op(a)`, `a` read through read map 0.
    Unop(Unop, NodeId),
    /// `a op b`, `a` read through read map 0 and `b` through read map 1.
    Binop(Binop, NodeId, NodeId),
    /// `op(a, b, c)`, each operand read through the read map of its position.
    Ternop(Ternop, NodeId, NodeId, NodeId),
    /// An expression over these operands (each read through its own map).
    Expr(Expr, Vec<NodeId>),
}

impl Rhs {
    /// The nodes read, in operand order (the order of the projections' read maps).
    pub fn operands(&self) -> Vec<NodeId> {
        match self {
            Rhs::Unop(_, a) => vec![*a],
            Rhs::Binop(_, a, b) => vec![*a, *b],
            Rhs::Ternop(_, a, b, c) => vec![*a, *b, *c],
            Rhs::Expr(_, operands) => operands.clone(),
        }
    }
}

/// Where a fetched node's values come from.
#[derive(Debug, Clone, PartialEq)]
pub enum FetchOp {
    /// Every cell holds the constant.
    Constant(f64),
    /// The cells hold these values, row-major (as many as the node has cells).
    ConstantFill(Vec<f64>),
    /// Every cell holds its own row-major offset.
    RangeOverOffsets,
    /// Every cell holds the node's id (as 128-bit words: the id in the first word), which keys
    /// a tensor's random bits.
    EmbedSelfId,
    /// Every cell holds a dimension's size, solved by shape inference.
    EmbedDim(usize),
    /// Every cell holds the value of a static index when the routine runs.
    EmbedStatic(Symbol),
    /// The node is `source[s, …]` for the static index `s` of `source`'s leading axis.
    Slice {
        /// The node sliced: the fetched node's dims with one more axis in front.
        source: NodeId,
        /// The static index choosing the position along `source`'s leading axis when the
        /// routine runs; its range is that axis's size.
        batch: Symbol,
    },
    /// The values are copied in from the host before the routine runs: no code.
    FromHost,
}

/// The high-level IR of one computation step: what a tensor operation or its gradient produces. The
/// accumulating forms carry the projections that say how their loops run; [`crate::lower::lower`]
/// turns an assignment into loop IR.
#[derive(Debug, Clone, PartialEq)]
pub enum Assignment {
    /// Does nothing.
    Noop,
    /// The parts, one after another.
    Seq(Vec<Assignment>),
    /// `body`, with a comment saying what it is (OCANNL's `Block_comment`): it computes what
    /// `body` computes, and lowers to `body`'s loops; printed code shows the comment over it.
    BlockComment {
        /// What the code does, in words.
        text: String,
        /// The code commented.
        body: Box<Assignment>,
    },
    /// `lhs =:accum rhs` (`initialize_neutral`: the cells start from the accumulator's neutral
    /// element) or `lhs =accum rhs` (accumulating into what is there).
    Accum {
        /// Whether the written cells start from `accum`'s neutral element (`=:`) rather than from
        /// what they hold (`=`).
        initialize_neutral: bool,
        /// How each point's value is combined into its cell: `Add` sums (`=+`), `Max` keeps the
        /// largest, `Arg2` overwrites.
        accum: Binop,
        /// The node written, through the projections' written map.
        lhs: NodeId,
        /// What is computed at each point of the product space.
        rhs: Rhs,
        /// The product space the loops run over and the index maps of `lhs` and the operands.
        projections: Projections,
    },
    /// One result assembled from several sources (concatenation, block matrices): at each point
    /// the one source whose stretch is active is read through `op`. The projections' read maps
    /// are the sources', in order.
    Block {
        /// Whether the written cells start from `accum`'s neutral element rather than from what
        /// they hold.
        initialize_neutral: bool,
        /// How each point's value is combined into its cell.
        accum: Binop,
        /// The node assembled, through the projections' written map.
        lhs: NodeId,
        /// Applied to the source's value before it is accumulated (`Identity` for a copy).
        op: Unop,
        /// The nodes assembled from, in the order of the projections' read maps.
        sources: Vec<NodeId>,
        /// The product space the loops run over (a concatenated axis's parts as a coupled factor)
        /// and the index maps of `lhs` and the sources.
        projections: Projections,
    },
    /// A block assignment run backwards (the gradient of a concatenation): one `source`, read
    /// through the projections' written map, scattered into `targets` through their read maps,
    /// each through `op`. At each point exactly one target may be addressed.
    RevSides {
        /// Whether each target's cells start from `accum`'s neutral element rather than from what
        /// they hold.
        initialize_neutral: bool,
        /// How each point's value is combined into its target's cell (`Add` for a gradient).
        accum: Binop,
        /// The node read, through the projections' written map: the gradient of the block's
        /// result.
        source: NodeId,
        /// Applied to the source's value before it is accumulated.
        op: Unop,
        /// The nodes written, each through the read map of its position: the gradients of the
        /// block's sources.
        targets: Vec<NodeId>,
        /// The record of the block assignment this one reverses, unchanged.
        projections: Projections,
    },
    /// `lhs := op(rhs)` where one cell of `rhs` makes `op.length(precision)` consecutive cells
    /// of `lhs` (row-major): the one operation that changes element counts.
    SetVecUnop {
        /// The operation; one application writes `op.length(precision)` cells, for `lhs`'s
        /// precision.
        op: VecUnop,
        /// The node written, which has no margins: the values of the `i`-th cell of `rhs`
        /// (row-major) are its cells from `i · op.length(precision)` on, the values past its last
        /// cell dropped.
        lhs: NodeId,
        /// The node read, one application per cell.
        rhs: NodeId,
        /// The loops over `rhs`'s cells; the written map gives the first cell each one writes
        /// (its linear position in `lhs`), so it has no concatenated index.
        projections: Projections,
    },
    /// A gather: `lhs` is the one-hot product `Σ_v table[…, v, …]·[ids[…] = v]` of the
    /// projections (read maps: `table`, then `ids`), computed without its loop over `v`: each
    /// point reads the table's cell at the id (0 where the id selects none). `v` is the one
    /// symbol of the table's map that neither `lhs`'s map nor the ids' map has.
    Gather {
        /// Whether `lhs` starts from 0 (`=:+`) rather than adding to what it holds (`=+`).
        initialize_neutral: bool,
        /// The node written, through the projections' written map.
        lhs: NodeId,
        /// The node looked up (read map 0): along the axis indexed by `v`, the id selects the cell.
        table: NodeId,
        /// The ids (read map 1): positions along the table's selected axis, held as numbers.
        ids: NodeId,
        /// The one-hot product's record, its product space including `v`.
        projections: Projections,
    },
    /// A gather's gradient, over the gather's own projections: at each point `source` (read
    /// through the written map) is added into the cell of `target` (read map 0) the id (read
    /// map 1) selects, nowhere where it selects none.
    ScatterAdd {
        /// The node added into, through read map 0: the gradient of the gather's table.
        target: NodeId,
        /// The node whose values are added, through the written map (the gradient of the gather's
        /// result).
        source: NodeId,
        /// The ids (read map 1) choosing the cell of `target` along the gathered axis.
        ids: NodeId,
        /// The gather's own record, unchanged.
        projections: Projections,
    },
    /// `node`'s values from a constant, its positions, its identity, or another node.
    Fetch {
        /// The node whose cells (inside its margins) are set.
        node: NodeId,
        /// Where the values come from.
        op: FetchOp,
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
            Assignment::BlockComment { text, body } => {
                write!(f, "~~({text:?};")?;
                for line in body.to_string().lines() {
                    write!(f, "\n  {line}")?;
                }
                f.write_str("\n)")
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
                    Rhs::Ternop(op, a, b, c) => format!("{op}({a}, {b}, {c})"),
                    Rhs::Expr(expr, operands) => expr.map_operands(
                        &|i| operands[i].to_string(),
                        &|c| c.to_string(),
                        &|op, a| format!("{op}({a})"),
                        &|op, a, b| format!("({a} {op} {b})"),
                        &|op, a, b, c| format!("{op}({a}, {b}, {c})"),
                    ),
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
            Assignment::Gather {
                initialize_neutral,
                lhs,
                table,
                ids,
                projections,
            } => write!(
                f,
                "{lhs} {} gather({table}, {ids}) ~logic:\"{}\"",
                assign(*initialize_neutral, Binop::Add),
                projections.label
            ),
            Assignment::ScatterAdd {
                target,
                source,
                ids,
                projections,
            } => write!(
                f,
                "scatter({target}, {ids}) =+ {source} ~logic:\"{}\"",
                projections.label
            ),
            Assignment::SetVecUnop {
                op,
                lhs,
                rhs,
                projections,
            } => write!(
                f,
                "{lhs} =: {}({rhs}) ~logic:\"{}\"",
                op.name(),
                projections.label
            ),
            Assignment::Fetch { node, op } => match op {
                FetchOp::Constant(c) => write!(f, "{node} =: {c}"),
                FetchOp::ConstantFill(values) => {
                    let values: Vec<String> = values.iter().map(ToString::to_string).collect();
                    write!(f, "{node} =: [{}]", values.join(", "))
                }
                FetchOp::RangeOverOffsets => write!(f, "{node} =: range_over_offsets"),
                FetchOp::EmbedSelfId => write!(f, "{node} =: self_id"),
                FetchOp::EmbedDim(d) => write!(f, "{node} =: dim {d}"),
                FetchOp::EmbedStatic(s) => write!(f, "{node} =: static s{}", s.0),
                FetchOp::Slice { source, batch } => {
                    write!(f, "{node} =: {source} @| s{}", batch.0)
                }
                FetchOp::FromHost => write!(f, "{node} =: host data"),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::lower::lower;
    use crate::node::TensorNode;
    use crate::precision::Precision;

    #[test]
    fn a_block_comment_lowers_as_its_body_and_prints_over_it() {
        let nodes: HashMap<NodeId, TensorNode> = [TensorNode::new(0, "x", Precision::F32, &[3])]
            .into_iter()
            .map(|n| (n.id, n))
            .collect();
        let body = Assignment::Seq(vec![
            Assignment::Fetch {
                node: NodeId(0),
                op: FetchOp::Constant(1.0),
            },
            Assignment::Fetch {
                node: NodeId(0),
                op: FetchOp::RangeOverOffsets,
            },
        ]);
        let commented = Assignment::BlockComment {
            text: "fill \"x\"".to_owned(),
            body: Box::new(body.clone()),
        };
        assert_eq!(
            lower(&commented, &nodes).unwrap(),
            lower(&body, &nodes).unwrap()
        );
        assert_eq!(
            commented.to_string(),
            format!(
                "~~(\"fill \\\"x\\\"\";\n  {}\n  {}\n)",
                "n0 =: 1", "n0 =: range_over_offsets"
            )
        );
    }
}
