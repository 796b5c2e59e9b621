//! Assignments printed in `cd!` notation, one a line: `y =:+ w * x ~logic:"@";`. Tensors go by
//! their labels and gradients by `label.grad`; formulas by `cd!`'s operators (`+ - * / % **`,
//! `< == !=`, `&& ||`, parenthesized only where they must be) and primitives by name
//! (`relu(x)`, `max(a, b)`, `relu_gate(a, b)`, `where_(c, a, b)`); the accumulator as `cd!`
//! writes it (`=:` sets, `=+` adds, `=:+` adds from 0, `=max`, `=?/`, …); and the logic of the
//! projections as `cd!`'s `~logic:` takes it (`"@"` composition, `"T"` transposition, the
//! einsum spec), left out for pointwise assignments and updates, which `cd!` projects without
//! one. The same assignments print in the IR's own form with node ids (`Assignment`'s
//! `Display`); this form is for reading them as they were written.
//!
//! A block comment (`cd!`'s `~~("text"; …)`, OCANNL's `Block_comment`) prints as it is written,
//! its scope's lines indented under it:
//!
//! ```text
//! ~~("loss step";
//!   loss =:+ …;
//! );
//! ```
//!
//! A few assignments have no `cd!` spelling, and print in the IR's words: concatenations
//! (`y =: [a; b] ~logic:"…"`, and `[a.grad; b.grad] =+ y.grad` back), gathers
//! (`gather(table, ids)`, `scatter(table.grad, ids) =+ …`) and fetches (`=: range_over_offsets()`,
//! `=: x @| s0` for a batch slice).

use std::collections::HashMap;

use rcannl_ir::{Assignment, Binop, Expr, FetchOp, NodeId, Rhs, Ternop, Unop};
use rcannl_shape::logic::Logic;

/// How a printout names what assignments touch: each node (`w`, `w.grad`) and, for each
/// projections label, the logic `cd!` would write (`"@"`); a label without one prints no logic.
#[derive(Debug, Clone, Default)]
pub(crate) struct Notation {
    pub nodes: HashMap<NodeId, String>,
    pub logics: HashMap<String, String>,
}

/// The logic `cd!`'s `~logic:` writes for `logic`: `None` for pointwise operations (`"."`, the
/// default).
pub(crate) fn cd_logic(logic: &Logic) -> Option<String> {
    match logic {
        Logic::Pointwise(_) => None,
        Logic::Compose | Logic::ComposeAccumulate => Some("@".to_owned()),
        Logic::Transpose => Some("T".to_owned()),
        Logic::Spec(spec) | Logic::Block(spec) => Some(spec.to_string()),
        Logic::BatchSlice { .. } => Some("@|".to_owned()),
        Logic::Uint4x32ToPrec { .. } => Some("U4x32".to_owned()),
    }
}

impl Notation {
    fn node(&self, id: NodeId) -> String {
        self.nodes
            .get(&id)
            .cloned()
            .unwrap_or_else(|| id.to_string())
    }

    /// ` ~logic:"…"` for the projections labelled `label`, or nothing.
    fn logic(&self, label: &str) -> String {
        match self.logics.get(label) {
            Some(logic) => format!(" ~logic:\"{logic}\""),
            None => String::new(),
        }
    }

    /// The assignments, one a line (a sequence's parts on lines of their own), each ending in
    /// `;` and a newline; a block comment's scope indented by two spaces under it.
    pub fn assignments<'a>(&self, assignments: impl IntoIterator<Item = &'a Assignment>) -> String {
        let mut out = String::new();
        for a in assignments {
            self.write(a, 0, &mut out);
        }
        out
    }

    /// `a`'s lines, indented by `depth` levels.
    fn write(&self, a: &Assignment, depth: usize, out: &mut String) {
        let indent = "  ".repeat(depth);
        let line = match a {
            Assignment::Noop => return,
            Assignment::Seq(parts) => {
                parts.iter().for_each(|part| self.write(part, depth, out));
                return;
            }
            Assignment::BlockComment { text, body } => {
                let mut scope = String::new();
                self.write(body, depth + 1, &mut scope);
                if scope.is_empty() {
                    out.push_str(&format!("{indent}~~({text:?});\n"));
                } else {
                    out.push_str(&format!("{indent}~~({text:?};\n{scope}{indent});\n"));
                }
                return;
            }
            Assignment::Accum {
                initialize_neutral,
                accum,
                lhs,
                rhs,
                projections,
            } => {
                let (expr, operands) = as_expr(rhs);
                let names: Vec<String> = operands.into_iter().map(|n| self.node(n)).collect();
                format!(
                    "{} {} {}{}",
                    self.node(*lhs),
                    accumulator(*initialize_neutral, *accum),
                    formula(&expr, &names).0,
                    self.logic(&projections.label)
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
                let sources: Vec<String> = sources.iter().map(|&s| self.applied(*op, s)).collect();
                format!(
                    "{} {} [{}]{}",
                    self.node(*lhs),
                    accumulator(*initialize_neutral, *accum),
                    sources.join("; "),
                    self.logic(&projections.label)
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
                let targets: Vec<String> = targets.iter().map(|&t| self.node(t)).collect();
                format!(
                    "[{}] {} {}{}",
                    targets.join("; "),
                    accumulator(*initialize_neutral, *accum),
                    self.applied(*op, *source),
                    self.logic(&projections.label)
                )
            }
            Assignment::SetVecUnop {
                op,
                lhs,
                rhs,
                projections,
            } => format!(
                "{} =: {}({}){}",
                self.node(*lhs),
                op.name(),
                self.node(*rhs),
                self.logic(&projections.label)
            ),
            Assignment::Gather {
                initialize_neutral,
                lhs,
                table,
                ids,
                projections,
            } => format!(
                "{} {} gather({}, {}){}",
                self.node(*lhs),
                accumulator(*initialize_neutral, Binop::Add),
                self.node(*table),
                self.node(*ids),
                self.logic(&projections.label)
            ),
            Assignment::ScatterAdd {
                target,
                source,
                ids,
                projections,
            } => format!(
                "scatter({}, {}) =+ {}{}",
                self.node(*target),
                self.node(*ids),
                self.node(*source),
                self.logic(&projections.label)
            ),
            Assignment::Fetch { node, op } => {
                let value = match op {
                    FetchOp::Constant(c) => constant(*c),
                    FetchOp::ConstantFill(values) => {
                        let values: Vec<String> = values.iter().map(|&v| constant(v)).collect();
                        format!("[{}]", values.join(", "))
                    }
                    FetchOp::RangeOverOffsets => "range_over_offsets()".to_owned(),
                    FetchOp::EmbedSelfId => "self_id()".to_owned(),
                    FetchOp::EmbedDim(d) => format!("dim({d})"),
                    FetchOp::EmbedStatic(s) => format!("s{}", s.0),
                    FetchOp::Slice { source, batch } => {
                        format!("{} @| s{}", self.node(*source), batch.0)
                    }
                    FetchOp::FromHost => "host_data()".to_owned(),
                };
                format!("{} =: {value}", self.node(*node))
            }
        };
        out.push_str(&indent);
        out.push_str(&line);
        out.push_str(";\n");
    }

    /// `node`, or `op(node)` unless `op` is the identity.
    fn applied(&self, op: Unop, node: NodeId) -> String {
        let names = [self.node(node)];
        formula(&Expr::Unop(op, Box::new(Expr::Operand(0))), &names).0
    }
}

/// The right-hand side as one expression over its operands.
fn as_expr(rhs: &Rhs) -> (Expr, Vec<NodeId>) {
    let operand = |i| Box::new(Expr::Operand(i));
    match rhs {
        Rhs::Unop(op, a) => (Expr::Unop(*op, operand(0)), vec![*a]),
        Rhs::Binop(op, a, b) => (Expr::Binop(*op, operand(0), operand(1)), vec![*a, *b]),
        Rhs::Ternop(op, a, b, c) => (
            Expr::Ternop(*op, operand(0), operand(1), operand(2)),
            vec![*a, *b, *c],
        ),
        Rhs::Expr(expr, operands) => (expr.clone(), operands.clone()),
    }
}

/// The accumulator as `cd!` writes it: `=:` sets; `=+`, `=:+`, `=max`, `=?/`, ….
fn accumulator(initialize_neutral: bool, accum: Binop) -> String {
    let op = match accum {
        Binop::Arg2 => return "=:".to_owned(),
        Binop::ReluGate => "?/",
        Binop::Sat01Gate => "?^",
        other => other.name(),
    };
    let colon = if initialize_neutral { ":" } else { "" };
    format!("={colon}{op}")
}

/// A number as `cd!` reads it: `1.0`, `0.5`, `-2.0`.
fn constant(c: f64) -> String {
    format!("{c:?}")
}

/// How tightly an expression binds: operands of an operator binding tighter than they do are
/// parenthesized.
const ATOM: u8 = 9;
const PREFIX: u8 = 8;

/// The precedence of an infix operator (as Rust's, which `cd!` parses), `None` for an
/// operation written as a call.
fn infix(op: Binop) -> Option<u8> {
    Some(match op {
        Binop::Pow => 7,
        Binop::Mul | Binop::Div | Binop::Mod => 6,
        Binop::Add | Binop::Sub => 5,
        Binop::Lt | Binop::Eq | Binop::Ne => 4,
        Binop::And => 3,
        Binop::Or => 2,
        _ => return None,
    })
}

/// A two-argument operation's name as a call in `cd!` (`max`, `relu_gate`, `snd`).
fn call_name(op: Binop) -> &'static str {
    match op {
        Binop::Arg1 => "fst",
        Binop::Arg2 => "snd",
        other => other.word(),
    }
}

/// `expr` written over the operands `names`, and how tightly it binds.
fn formula(expr: &Expr, names: &[String]) -> (String, u8) {
    let go = |e: &Expr| formula(e, names);
    let wrapped = |(text, precedence): (String, u8), at_least: u8| {
        if precedence >= at_least {
            text
        } else {
            format!("({text})")
        }
    };
    match expr {
        Expr::Operand(i) => (names[*i].clone(), ATOM),
        Expr::Const(c) if *c < 0.0 => (constant(*c), PREFIX),
        Expr::Const(c) => (constant(*c), ATOM),
        Expr::Unop(Unop::Identity, a) => go(a),
        Expr::Unop(Unop::Neg, a) => (format!("-{}", wrapped(go(a), ATOM)), PREFIX),
        Expr::Unop(op, a) => (format!("{op}({})", go(a).0), ATOM),
        Expr::Binop(op, a, b) => match infix(*op) {
            // `**` groups to the right; the others to the left, and comparisons not at all.
            Some(p) => {
                let (left, right) = match op {
                    Binop::Pow => (p + 1, p),
                    Binop::Lt | Binop::Eq | Binop::Ne => (p + 1, p + 1),
                    _ => (p, p + 1),
                };
                let text = format!(
                    "{} {} {}",
                    wrapped(go(a), left),
                    op.name(),
                    wrapped(go(b), right)
                );
                (text, p)
            }
            None => (
                format!("{}({}, {})", call_name(*op), go(a).0, go(b).0),
                ATOM,
            ),
        },
        Expr::Ternop(Ternop::Mul3, a, b, c) => (
            format!(
                "{} * {} * {}",
                wrapped(go(a), 6),
                wrapped(go(b), 7),
                wrapped(go(c), 7)
            ),
            6,
        ),
        Expr::Ternop(op, a, b, c) => {
            let name = match op {
                Ternop::Where => "where_",
                other => other.name(),
            };
            (
                format!("{name}({}, {}, {})", go(a).0, go(b).0, go(c).0),
                ATOM,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn op(i: usize) -> Box<Expr> {
        Box::new(Expr::Operand(i))
    }

    fn bin(op: Binop, a: Expr, b: Expr) -> Expr {
        Expr::Binop(op, Box::new(a), Box::new(b))
    }

    #[test]
    fn formulas_parenthesize_only_where_they_must() {
        let abc = names(&["a", "b", "c"]);
        let sum = bin(Binop::Add, *op(0), *op(1));
        // (a + b) * c, a + b + c, a - (b - c), a ** b ** c, (a ** b) ** c.
        assert_eq!(
            formula(&bin(Binop::Mul, sum.clone(), *op(2)), &abc).0,
            "(a + b) * c"
        );
        assert_eq!(formula(&bin(Binop::Add, sum, *op(2)), &abc).0, "a + b + c");
        let difference = bin(Binop::Sub, *op(1), *op(2));
        assert_eq!(
            formula(&bin(Binop::Sub, *op(0), difference), &abc).0,
            "a - (b - c)"
        );
        let power = bin(Binop::Pow, *op(1), *op(2));
        assert_eq!(
            formula(&bin(Binop::Pow, *op(0), power), &abc).0,
            "a ** b ** c"
        );
        let power = bin(Binop::Pow, *op(0), *op(1));
        assert_eq!(
            formula(&bin(Binop::Pow, power, *op(2)), &abc).0,
            "(a ** b) ** c"
        );
    }

    #[test]
    fn primitives_print_by_name_and_constants_as_numbers() {
        let ab = names(&["a", "b.grad"]);
        let gate = bin(Binop::ReluGate, *op(0), *op(1));
        assert_eq!(formula(&gate, &ab).0, "relu_gate(a, b.grad)");
        let scaled = bin(Binop::Mul, Expr::Const(-0.5), Expr::Unop(Unop::Exp, op(0)));
        assert_eq!(formula(&scaled, &ab).0, "-0.5 * exp(a)");
        let negated = Expr::Unop(
            Unop::Neg,
            Box::new(bin(Binop::Add, *op(0), Expr::Const(1.0))),
        );
        assert_eq!(formula(&negated, &ab).0, "-(a + 1.0)");
        let chosen = Expr::Ternop(
            Ternop::Where,
            Box::new(bin(Binop::Lt, *op(0), Expr::Const(0.0))),
            op(1),
            Box::new(Expr::Const(0.0)),
        );
        assert_eq!(formula(&chosen, &ab).0, "where_(a < 0.0, b.grad, 0.0)");
    }

    #[test]
    fn block_comments_print_over_their_scopes_indented() {
        let fill = |id: u32| Assignment::Fetch {
            node: NodeId(id),
            op: FetchOp::Constant(1.0),
        };
        let comment = |text: &str, body: Vec<Assignment>| Assignment::BlockComment {
            text: text.to_owned(),
            body: Box::new(Assignment::Seq(body)),
        };
        let code = [
            comment(
                "outer \"step\"",
                vec![
                    fill(0),
                    comment("inner", vec![fill(1)]),
                    comment("empty", vec![]),
                ],
            ),
            fill(2),
        ];
        assert_eq!(
            Notation::default().assignments(&code),
            "~~(\"outer \\\"step\\\"\";\n  \
             n0 =: 1.0;\n  \
             ~~(\"inner\";\n    \
             n1 =: 1.0;\n  \
             );\n  \
             ~~(\"empty\");\n\
             );\n\
             n2 =: 1.0;\n"
        );
    }

    #[test]
    fn accumulators_as_cd_writes_them() {
        assert_eq!(accumulator(false, Binop::Arg2), "=:");
        assert_eq!(accumulator(true, Binop::Arg2), "=:");
        assert_eq!(accumulator(true, Binop::Add), "=:+");
        assert_eq!(accumulator(false, Binop::Sub), "=-");
        assert_eq!(accumulator(false, Binop::Max), "=max");
        assert_eq!(accumulator(false, Binop::ReluGate), "=?/");
    }
}
