//! Constraint generation: what each kind of operation asserts about the shapes of its operands and
//! its result.
//!
//! [`generate`] is the one generator. Shape inference calls it once per operation to collect the
//! constraints it solves; projection inference calls it again per operation, with fresh variables,
//! to re-derive which axes share a loop. Nothing else turns an operation into constraints, so the
//! two readings cannot drift apart. [`terminal_constraints`] adds what a leaf's initializer says.
//!
//! Pointwise, compose and transpose assert broadcast inequalities ([`Constraint::RowLe`]: the result
//! refines the operand). A spec ([`Logic::Spec`], [`Logic::Block`]) asserts row *equalities*
//! between the operands, the result and the spec's slots elaborated to template shapes; the
//! templates of one call share their label and row-variable environments, which [`Generated`]
//! hands back so that captured names can be resolved later. `...` is the row variable named after
//! its row's kind; `_` is a fresh variable per occurrence; a fixed index `n` is a fresh variable of
//! size at least `n+1`; an integer concatenation component is a default-basis atom.
//!
//! Generation is deterministic: the same call on a fresh [`VarSupply`] hands out the same
//! variables. A spec's slots are elaborated operands first, result last, rows batch–input–output,
//! axes left to right; a label or row variable gets its variable at its first occurrence.

use std::collections::BTreeMap;

use crate::constraint::Constraint;
use crate::error::{ShapeError, ShapeErrorKind};
use crate::spec::{EinsumSpec, Kind};
use crate::term::{Dim, DimVar, Row, RowVarId, Shape, VarSupply};

mod discardable;
mod elaborate;
#[cfg(test)]
mod tests;

pub use discardable::discardable_labels;
use elaborate::spec_equalities;

/// The shape logic of an operation: how its result's shape relates to its operands' shapes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Logic {
    /// This many operands, each broadcast to the result: every row of the result refines each
    /// operand's row of the same kind.
    Pointwise(usize),
    /// `a * b`, i.e. `a(b(x))`: A's input row refines B's output row (the contracted axes); the
    /// result takes its input row from B, its output row from A, its batch row from both.
    Compose,
    /// [`Logic::Compose`] of the first two operands, broadcast with the third (`fma`).
    ComposeAccumulate,
    /// One operand with input and output rows swapped.
    Transpose,
    /// Permute / Einsum / Einsum_tern: equalities from a spec; arity = number of operands.
    Spec(EinsumSpec),
    /// `++^`: n-ary concatenation; the spec's equalities plus discardable variables.
    Block(EinsumSpec),
    /// `a @| i`: the result is the operand without its first batch axis, which is indexed by the
    /// slice. The axis has size `static_range` when that is known.
    BatchSlice {
        /// The size of the sliced axis, or `None` when the slice does not know it.
        static_range: Option<usize>,
    },
    /// All of the operand's axes are one axis `v`; the result has `coefficient·v` elements.
    Uint4x32ToPrec {
        /// How many values of the target precision one 128-bit word holds.
        coefficient: usize,
    },
}

impl Logic {
    /// The number of operands the logic takes (for a spec, its number of right-hand sides).
    pub fn arity(&self) -> usize {
        match self {
            Logic::Pointwise(arity) => *arity,
            Logic::Transpose | Logic::BatchSlice { .. } | Logic::Uint4x32ToPrec { .. } => 1,
            Logic::Compose => 2,
            Logic::ComposeAccumulate => 3,
            Logic::Spec(spec) | Logic::Block(spec) => spec.arity(),
        }
    }
}

impl std::fmt::Display for Logic {
    /// The operation's kind as users name it, with its spec: `compose`, `einsum "i,j;j,k=>i,k"`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Logic::Pointwise(1) => f.write_str("pointwise unary"),
            Logic::Pointwise(2) => f.write_str("pointwise binary"),
            Logic::Pointwise(3) => f.write_str("pointwise ternary"),
            Logic::Pointwise(n) => write!(f, "pointwise over {n} operands"),
            Logic::Compose => f.write_str("compose"),
            Logic::ComposeAccumulate => f.write_str("compose-accumulate"),
            Logic::Transpose => f.write_str("transpose"),
            Logic::Spec(spec) => {
                let kind = match spec.arity() {
                    1 => "permute",
                    2 => "einsum",
                    3 => "einsum3",
                    _ => "n-ary einsum",
                };
                write!(f, "{kind} \"{spec}\"")
            }
            Logic::Block(spec) => write!(f, "block \"{spec}\""),
            Logic::BatchSlice {
                static_range: Some(range),
            } => write!(f, "batch slice (range {range})"),
            Logic::BatchSlice { static_range: None } => f.write_str("batch slice"),
            Logic::Uint4x32ToPrec { coefficient } => {
                write!(f, "uint4x32 to precision ({coefficient} values per word)")
            }
        }
    }
}

/// What one operation asserts, and the names and variables that later stages need to see.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Generated {
    /// The equalities and inequalities between the terms of the result's and the operands' shapes.
    pub constraints: Vec<Constraint>,
    /// For a spec: every dimension label with its variable (one per label, shared by all slots).
    pub labels: BTreeMap<String, DimVar>,
    /// For a spec: every row variable with its variable; `...` appears under its kind's name
    /// (`batch`, `input`, `output`).
    pub row_vars: BTreeMap<String, RowVarId>,
    /// For a block: the variables of concatenation components that may be the empty summand
    /// (closing guesses them to 0 instead of 1), in order of first appearance in the spec.
    pub discardable: Vec<DimVar>,
    /// For a spec: the variable standing for each fixed-index axis, with its index, in order of
    /// appearance. Each also has an [`Constraint::AtLeast`] of `index + 1`.
    pub fixed_indices: Vec<(DimVar, usize)>,
    /// For a batch slice: the sliced axis (a variable, or an atom when the range is static).
    pub slice_dim: Option<Dim>,
}

/// What a leaf's initializer says about its shape.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum TerminalInit {
    /// Nothing (constants, ranges, embeddings: the shape comes from elsewhere).
    #[default]
    Unconstrained,
    /// The shape has this many elements (a reshape, or a fill from a list of values).
    NElements(usize),
    /// The shape's axes, flattened batch–input–output, are exactly these (a copy of an array).
    ExactDims(Vec<Dim>),
}

/// The constraints of one operation: `result` is the shape of its result, `operands` the shapes
/// of its operands in order; fresh variables come from `vars`.
///
/// Errors: the wrong number of operands (for a spec, with the message naming the operation it
/// would be), and specs that cannot be elaborated: an identifier stride or dilation (bind it with
/// [`EinsumSpec::bind`] first), a convolution axis whose padding is unspecified, a fixed index too
/// large for a size.
pub fn generate(
    logic: &Logic,
    result: &Shape,
    operands: &[Shape],
    vars: &mut VarSupply,
) -> Result<Generated, ShapeError> {
    let operands: Vec<&Shape> = operands.iter().collect();
    generate_from(logic, result, &operands, vars)
}

/// [`generate`] for operand shapes that lie elsewhere (the session's tensors).
pub(crate) fn generate_from(
    logic: &Logic,
    result: &Shape,
    operands: &[&Shape],
    vars: &mut VarSupply,
) -> Result<Generated, ShapeError> {
    check_arity(logic, operands.len())?;
    let constraints = match logic {
        Logic::Pointwise(_) => broadcast_each(result, operands),
        Logic::Compose => compose(result, operands[0], operands[1]),
        Logic::ComposeAccumulate => {
            let mut constraints = compose(result, operands[0], operands[1]);
            constraints.extend(broadcast_each(result, &operands[2..]));
            constraints
        }
        Logic::Transpose => {
            let operand = operands[0];
            vec![
                le(&result.batch, &operand.batch),
                le(&result.input, &operand.output),
                le(&result.output, &operand.input),
            ]
        }
        Logic::Spec(spec) => return spec_equalities(spec, result, operands, vars),
        Logic::Block(spec) => {
            let mut generated = spec_equalities(spec, result, operands, vars)?;
            generated.discardable = discardable_labels(spec)
                .into_iter()
                .filter_map(|name| generated.labels.get(name).copied())
                .collect();
            return Ok(generated);
        }
        Logic::BatchSlice { static_range } => {
            return Ok(batch_slice(*static_range, result, operands[0], vars));
        }
        Logic::Uint4x32ToPrec { coefficient } => {
            if *coefficient == 0 {
                return Err(ShapeError::of_kind(
                    ShapeErrorKind::Spec,
                    "Uint4x32ToPrec: the coefficient (values per 128 bits) must be at least 1",
                ));
            }
            let v = vars.dim_term();
            let operand = operands[0];
            vec![
                Constraint::Exact {
                    rows: rows_of(operand),
                    dims: vec![v.clone()],
                },
                Constraint::TotalElems {
                    rows: rows_of(result),
                    total: v,
                    coefficient: *coefficient,
                },
            ]
        }
    };
    Ok(Generated {
        constraints,
        ..Generated::default()
    })
}

/// The constraints a leaf's initializer puts on the leaf's `shape`.
pub fn terminal_constraints(shape: &Shape, init: &TerminalInit) -> Vec<Constraint> {
    match init {
        TerminalInit::Unconstrained => Vec::new(),
        TerminalInit::NElements(n) => vec![Constraint::TotalElems {
            rows: rows_of(shape),
            total: Dim::size(*n),
            coefficient: 1,
        }],
        TerminalInit::ExactDims(dims) => vec![Constraint::Exact {
            rows: rows_of(shape),
            dims: dims.clone(),
        }],
    }
}

// ---------------------------------------------------------------------------------------------
// Broadcasting logics
// ---------------------------------------------------------------------------------------------

fn le(res: &Row, opnd: &Row) -> Constraint {
    Constraint::RowLe {
        res: res.clone(),
        opnd: opnd.clone(),
    }
}

fn rows_of(shape: &Shape) -> Vec<Row> {
    Kind::ALL
        .into_iter()
        .map(|kind| shape.row(kind).clone())
        .collect()
}

/// `C.k ≤ X.k` for each operand X (in order) and each kind k.
fn broadcast_each(result: &Shape, operands: &[&Shape]) -> Vec<Constraint> {
    operands
        .iter()
        .flat_map(|operand| Kind::ALL.map(|kind| le(result.row(kind), operand.row(kind))))
        .collect()
}

fn compose(result: &Shape, a: &Shape, b: &Shape) -> Vec<Constraint> {
    vec![
        le(&a.input, &b.output),
        le(&result.batch, &a.batch),
        le(&result.batch, &b.batch),
        le(&result.input, &b.input),
        le(&result.output, &a.output),
    ]
}

fn batch_slice(
    static_range: Option<usize>,
    result: &Shape,
    operand: &Shape,
    vars: &mut VarSupply,
) -> Generated {
    let slice = match static_range {
        Some(range) => Dim::size(range),
        None => vars.dim_term(),
    };
    let mut leading = vec![slice.clone()];
    leading.extend(result.batch.leading.iter().cloned());
    let sliced_batch = Row {
        leading,
        var: result.batch.var,
        trailing: result.batch.trailing.clone(),
    };
    Generated {
        constraints: vec![
            Constraint::RowEq(operand.batch.clone(), sliced_batch),
            Constraint::RowEq(result.input.clone(), operand.input.clone()),
            Constraint::RowEq(result.output.clone(), operand.output.clone()),
        ],
        slice_dim: Some(slice),
        ..Generated::default()
    }
}

fn check_arity(logic: &Logic, given: usize) -> Result<(), ShapeError> {
    let expected = logic.arity();
    if given == expected {
        return Ok(());
    }
    let context = format!("the operation was given {given} operand(s)");
    let error = match logic {
        Logic::Spec(spec) => {
            let message = match given {
                1 => format!("Invalid permutation spec (expected one argument): {spec}"),
                2 => format!("Invalid einsum spec (expected two arguments): {spec}"),
                3 => format!("Invalid einsum spec (expected three arguments): {spec}"),
                n => format!("Invalid einsum spec (expected {n} arguments): {spec}"),
            };
            ShapeError::of_kind(ShapeErrorKind::Arity, message).note(format!(
                "the spec has {expected} right-hand side(s); {context}"
            ))
        }
        Logic::Block(spec) => ShapeError::of_kind(
            ShapeErrorKind::Arity,
            format!("Invalid block spec (expected {given} arguments): {spec}"),
        )
        .note(format!(
            "the spec has {expected} right-hand side(s); {context}"
        )),
        _ => ShapeError::of_kind(
            ShapeErrorKind::Arity,
            format!("{logic} takes {expected} operand(s); {context}"),
        ),
    };
    Err(error)
}
