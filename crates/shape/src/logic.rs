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

use std::collections::{BTreeMap, BTreeSet};

use crate::constraint::Constraint;
use crate::error::ShapeError;
use crate::spec::{
    AffineSpec, AxisSpec, Coefficient, ConcatComponent, EinsumSpec, Kind, Padding, RowSpec,
    SlotSpec,
};
use crate::term::{AffineDim, ConvDim, Dim, DimVar, Row, RowVarId, Shape, VarSupply};

/// The shape logic of an operation: how its result's shape relates to its operands' shapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Logic {
    /// One operand; every row of the result refines the operand's row of the same kind.
    PointwiseUnary,
    /// Two operands, each broadcast like [`Logic::PointwiseUnary`].
    PointwiseBinary,
    /// Three operands, each broadcast like [`Logic::PointwiseUnary`].
    PointwiseTernary,
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
            Logic::PointwiseUnary
            | Logic::Transpose
            | Logic::BatchSlice { .. }
            | Logic::Uint4x32ToPrec { .. } => 1,
            Logic::PointwiseBinary | Logic::Compose => 2,
            Logic::PointwiseTernary | Logic::ComposeAccumulate => 3,
            Logic::Spec(spec) | Logic::Block(spec) => spec.arity(),
        }
    }
}

impl std::fmt::Display for Logic {
    /// The operation's kind as users name it, with its spec: `compose`, `einsum "i,j;j,k=>i,k"`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Logic::PointwiseUnary => f.write_str("pointwise unary"),
            Logic::PointwiseBinary => f.write_str("pointwise binary"),
            Logic::PointwiseTernary => f.write_str("pointwise ternary"),
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
    check_arity(logic, operands.len())?;
    let constraints = match logic {
        Logic::PointwiseUnary | Logic::PointwiseBinary | Logic::PointwiseTernary => {
            broadcast_each(result, operands)
        }
        Logic::Compose => compose(result, &operands[0], &operands[1]),
        Logic::ComposeAccumulate => {
            let mut constraints = compose(result, &operands[0], &operands[1]);
            constraints.extend(broadcast_each(result, &operands[2..]));
            constraints
        }
        Logic::Transpose => {
            let operand = &operands[0];
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
            return Ok(batch_slice(*static_range, result, &operands[0], vars));
        }
        Logic::Uint4x32ToPrec { coefficient } => {
            if *coefficient == 0 {
                return Err(ShapeError::new(
                    "Uint4x32ToPrec: the coefficient (values per 128 bits) must be at least 1",
                ));
            }
            let v = vars.dim_term();
            let operand = &operands[0];
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

/// The labels of `spec`'s concatenation components that may be the empty summand, in order of
/// first appearance.
///
/// The LHS is one side of the spec, the RHS slots together the other. A label `v` that is a
/// component of a concatenated axis on one side is discardable iff *every* slot of the other side
/// has an axis *all* of whose components are among the other components of `v`'s concatenation
/// (a plain label axis has one component; an affine axis is one component, covered when its over
/// or kernel label is among them; `_`, a fixed index and an integer component are never covered).
/// So in `a^b => a` the label `b` is discardable (the result is covered by `a` alone), in
/// `a^b => a^b` nothing is, and in `a; b => a^b^c` `c` is (each operand is covered by `a` or `b`).
/// Integer components have no label and so are never in the result.
pub fn discardable_labels(spec: &EinsumSpec) -> Vec<&str> {
    let lhs = [&spec.lhs];
    let rhs: Vec<&SlotSpec> = spec.rhs.iter().collect();
    let mut found = BTreeSet::new();
    for (side, other) in [(&lhs[..], &rhs[..]), (&rhs[..], &lhs[..])] {
        for axis in side.iter().flat_map(|slot| slot_axes(slot)) {
            let AxisSpec::Concat { components } = axis else {
                continue;
            };
            for (i, component) in components.iter().enumerate() {
                let ConcatComponent::Label { name } = component else {
                    continue;
                };
                let siblings: BTreeSet<&str> = components
                    .iter()
                    .enumerate()
                    .filter(|&(j, _)| j != i)
                    .filter_map(|(_, c)| component_label(c))
                    .collect();
                let covers_slot =
                    |slot: &&SlotSpec| slot_axes(slot).any(|axis| axis_covered_by(axis, &siblings));
                // A component the other side names is carried through, not discarded.
                let named_on_other_side = other
                    .iter()
                    .flat_map(|slot| slot_axes(slot))
                    .any(|axis| axis.dim_labels().contains(&name.as_str()));
                if !named_on_other_side && other.iter().all(covers_slot) {
                    found.insert(name.as_str());
                }
            }
        }
    }
    spec.dim_labels()
        .into_iter()
        .filter(|name| found.contains(name))
        .collect()
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
fn broadcast_each(result: &Shape, operands: &[Shape]) -> Vec<Constraint> {
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
            ShapeError::new(message).note(format!(
                "the spec has {expected} right-hand side(s); {context}"
            ))
        }
        Logic::Block(spec) => ShapeError::new(format!(
            "Invalid block spec (expected {given} arguments): {spec}"
        ))
        .note(format!(
            "the spec has {expected} right-hand side(s); {context}"
        )),
        _ => ShapeError::new(format!("{logic:?} takes {expected} operand(s); {context}")),
    };
    Err(error)
}

// ---------------------------------------------------------------------------------------------
// Specs
// ---------------------------------------------------------------------------------------------

/// `C.k ≈ T_lhs.k` and `T_rhs_i.k ≈ A_i.k` for every kind, result first, then the side
/// constraints of the templates (fixed indices).
fn spec_equalities(
    spec: &EinsumSpec,
    result: &Shape,
    operands: &[Shape],
    vars: &mut VarSupply,
) -> Result<Generated, ShapeError> {
    let mut elab = Elaborator {
        spec,
        vars,
        labels: BTreeMap::new(),
        row_vars: BTreeMap::new(),
        side: Vec::new(),
        fixed_indices: Vec::new(),
    };
    let rhs_templates = spec
        .rhs
        .iter()
        .map(|slot| elab.slot(slot))
        .collect::<Result<Vec<_>, _>>()?;
    let lhs_template = elab.slot(&spec.lhs)?;

    let mut constraints = Vec::new();
    for kind in Kind::ALL {
        constraints.push(Constraint::RowEq(
            result.row(kind).clone(),
            lhs_template.row(kind).clone(),
        ));
    }
    for (template, operand) in rhs_templates.iter().zip(operands) {
        for kind in Kind::ALL {
            constraints.push(Constraint::RowEq(
                template.row(kind).clone(),
                operand.row(kind).clone(),
            ));
        }
    }
    constraints.append(&mut elab.side);
    Ok(Generated {
        constraints,
        labels: elab.labels,
        row_vars: elab.row_vars,
        fixed_indices: elab.fixed_indices,
        ..Generated::default()
    })
}

/// Elaborates the slots of one spec into template shapes, with one label environment and one
/// row-variable environment for all of them.
struct Elaborator<'a> {
    spec: &'a EinsumSpec,
    vars: &'a mut VarSupply,
    labels: BTreeMap<String, DimVar>,
    row_vars: BTreeMap<String, RowVarId>,
    /// Constraints the axes bring with them (`AtLeast` for fixed indices).
    side: Vec<Constraint>,
    fixed_indices: Vec<(DimVar, usize)>,
}

impl Elaborator<'_> {
    fn slot(&mut self, slot: &SlotSpec) -> Result<Shape, ShapeError> {
        Ok(Shape {
            batch: self.row(Kind::Batch, &slot.batch)?,
            input: self.row(Kind::Input, &slot.input)?,
            output: self.row(Kind::Output, &slot.output)?,
        })
    }

    /// Without a row variable: the closed row of the axes. With one: its flanks around the
    /// environment's variable for the name (`...` named after `kind`).
    fn row(&mut self, kind: Kind, row: &RowSpec) -> Result<Row, ShapeError> {
        let leading = self.axes(&row.leading)?;
        let trailing = self.axes(&row.trailing)?;
        Ok(match &row.row_var {
            None => Row::closed(leading.into_iter().chain(trailing).collect()),
            Some(row_var) => {
                let name = row_var.name_in(kind);
                let var = match self.row_vars.get(name) {
                    Some(&var) => var,
                    None => {
                        let var = self.vars.row();
                        self.row_vars.insert(name.to_owned(), var);
                        var
                    }
                };
                Row {
                    leading,
                    var: Some(var),
                    trailing,
                }
            }
        })
    }

    fn axes(&mut self, axes: &[AxisSpec]) -> Result<Vec<Dim>, ShapeError> {
        axes.iter().map(|axis| self.axis(axis)).collect()
    }

    fn axis(&mut self, axis: &AxisSpec) -> Result<Dim, ShapeError> {
        Ok(match axis {
            AxisSpec::Label { name } => Dim::Var(self.label(name)),
            AxisSpec::Anonymous => self.vars.dim_term(),
            AxisSpec::Fixed { index } => {
                let size = index.checked_add(1).ok_or_else(|| {
                    ShapeError::new(format!(
                        "Fixed index {index} is too large: the axis would need more than {} \
                         positions",
                        usize::MAX
                    ))
                    .note(format!("in spec: {}", self.spec))
                })?;
                let var = self.vars.dim();
                self.fixed_indices.push((var, *index));
                self.side.push(Constraint::AtLeast {
                    dim: Dim::Var(var),
                    size,
                });
                Dim::Var(var)
            }
            AxisSpec::Affine(affine) => self.affine(axis, affine)?,
            AxisSpec::Concat { components } => Dim::Concat(
                components
                    .iter()
                    .map(|component| match component {
                        ConcatComponent::Label { name } => Dim::Var(self.label(name)),
                        ConcatComponent::Size { size } => Dim::size(*size),
                    })
                    .collect(),
            ),
        })
    }

    fn affine(&mut self, axis: &AxisSpec, affine: &AffineSpec) -> Result<Dim, ShapeError> {
        let stride = self.coefficient("stride", &affine.stride, axis)?;
        let over = Dim::Var(self.label(&affine.over));
        let conv = match &affine.conv {
            None => None,
            Some(conv) => {
                let dilation = self.coefficient("dilation", &conv.dilation, axis)?;
                let padded = match conv.padding {
                    Padding::Padded => true,
                    Padding::Valid => false,
                    Padding::Unspecified => {
                        return Err(ShapeError::new(
                            "use_padding must be specified in convolution spec: write '=+' \
                             (padded) or '<+' (valid)",
                        )
                        .note(format!("axis '{axis}' of spec: {}", self.spec)));
                    }
                };
                Some(ConvDim {
                    dilation,
                    kernel: Dim::Var(self.label(&conv.kernel)),
                    padded,
                })
            }
        };
        Ok(Dim::Affine(Box::new(AffineDim {
            stride,
            over,
            conv,
            offset: affine.offset,
        })))
    }

    fn coefficient(
        &self,
        role: &str,
        coefficient: &Coefficient,
        axis: &AxisSpec,
    ) -> Result<usize, ShapeError> {
        match coefficient {
            Coefficient::Int(0) => Err(ShapeError::new(format!(
                "Invalid {role} value: 0 in axis '{axis}'; it must be at least 1"
            ))
            .note(format!("in spec: {}", self.spec))),
            Coefficient::Int(n) => Ok(*n),
            Coefficient::Ident(name) => Err(ShapeError::new(format!(
                "Invalid {role} value (expected integer): {name} in axis '{axis}'; bind it with \
                 EinsumSpec::bind before generating constraints"
            ))
            .note(format!("in spec: {}", self.spec))),
        }
    }

    fn label(&mut self, name: &str) -> DimVar {
        if let Some(&var) = self.labels.get(name) {
            return var;
        }
        let var = self.vars.dim();
        self.labels.insert(name.to_owned(), var);
        var
    }
}

// ---------------------------------------------------------------------------------------------
// The quantifier test for discardable components
// ---------------------------------------------------------------------------------------------

fn slot_axes(slot: &SlotSpec) -> impl Iterator<Item = &AxisSpec> {
    slot.rows().flat_map(|(_, row)| row.axes())
}

fn component_label(component: &ConcatComponent) -> Option<&str> {
    match component {
        ConcatComponent::Label { name } => Some(name),
        ConcatComponent::Size { .. } => None,
    }
}

/// True when the axis has components and each one names a label of `siblings`.
fn axis_covered_by(axis: &AxisSpec, siblings: &BTreeSet<&str>) -> bool {
    let covered = |name: &str| siblings.contains(name);
    match axis {
        AxisSpec::Label { name } => covered(name),
        AxisSpec::Anonymous | AxisSpec::Fixed { .. } => false,
        AxisSpec::Affine(affine) => {
            covered(&affine.over)
                || affine
                    .conv
                    .as_ref()
                    .is_some_and(|conv| covered(&conv.kernel))
        }
        AxisSpec::Concat { components } => {
            !components.is_empty()
                && components
                    .iter()
                    .all(|c| component_label(c).is_some_and(covered))
        }
    }
}

#[cfg(test)]
mod tests {
    //! Most tests render the generated constraints as text and compare the whole list. The
    //! operation's shapes are fixture rows `C.b`, `A.i`, … (row variables numbered from 100, so
    //! the generator's own variables start at `$0` and `..$0..`).

    use super::*;
    use crate::spec::{Bindings, parse_einsum};

    // -----------------------------------------------------------------------------------------
    // Fixtures and rendering
    // -----------------------------------------------------------------------------------------

    /// The result, then the operands in order.
    const SLOT_NAMES: [&str; 4] = ["C", "A", "B", "D"];
    const FIRST_FIXTURE_ROW: u32 = 100;

    fn fixture_row(slot: usize, kind: Kind) -> RowVarId {
        RowVarId(FIRST_FIXTURE_ROW + 10 * slot as u32 + kind as u32)
    }

    /// Slot `slot`'s shape: three bare row variables.
    fn open(slot: usize) -> Shape {
        let row = |kind| Row::var(fixture_row(slot, kind));
        Shape {
            batch: row(Kind::Batch),
            input: row(Kind::Input),
            output: row(Kind::Output),
        }
    }

    fn row_var_name(var: RowVarId) -> String {
        if var.0 < FIRST_FIXTURE_ROW {
            return format!("${}", var.0);
        }
        let offset = (var.0 - FIRST_FIXTURE_ROW) as usize;
        let kind = ["b", "i", "o"][offset % 10];
        format!("{}.{kind}", SLOT_NAMES[offset / 10])
    }

    /// A bare fixture row as `C.b`; any other row as `[$0,..$1..,3]` (`◇` marks the position of
    /// a closed row's marker when it has a leading flank).
    fn render_row(row: &Row) -> String {
        if row.n_explicit() == 0
            && let Some(var) = row.var
            && var.0 >= FIRST_FIXTURE_ROW
        {
            return row_var_name(var);
        }
        let mut items: Vec<String> = row.leading.iter().map(ToString::to_string).collect();
        match row.var {
            Some(var) => items.push(format!("..{}..", row_var_name(var))),
            None if !row.leading.is_empty() => items.push("◇".to_owned()),
            None => {}
        }
        items.extend(row.trailing.iter().map(ToString::to_string));
        format!("[{}]", items.join(","))
    }

    fn render_rows(rows: &[Row]) -> String {
        rows.iter().map(render_row).collect::<Vec<_>>().join(" ")
    }

    fn render(constraint: &Constraint) -> String {
        match constraint {
            Constraint::DimEq(a, b) => format!("{a} = {b}"),
            Constraint::DimLe { res, opnd } => format!("{res} ⊑ {opnd}"),
            Constraint::AtLeast { dim, size } => format!("{dim} ≥ {size}"),
            Constraint::RowEq(a, b) => format!("{} ≈ {}", render_row(a), render_row(b)),
            Constraint::RowLe { res, opnd } => {
                format!("{} ≤ {}", render_row(res), render_row(opnd))
            }
            Constraint::TotalElems {
                rows,
                total,
                coefficient,
            } => format!("#({}) = {coefficient}·{total}", render_rows(rows)),
            Constraint::Exact { rows, dims } => {
                let dims: Vec<String> = dims.iter().map(ToString::to_string).collect();
                format!("({}) is [{}]", render_rows(rows), dims.join(","))
            }
        }
    }

    fn rendered(generated: &Generated) -> Vec<String> {
        generated.constraints.iter().map(render).collect()
    }

    /// Runs `logic` on fixture shapes with `n_operands` operands and a fresh supply.
    fn run_with(logic: &Logic, n_operands: usize) -> Result<Generated, ShapeError> {
        let operands: Vec<Shape> = (1..=n_operands).map(open).collect();
        generate(logic, &open(0), &operands, &mut VarSupply::default())
    }

    fn run(logic: &Logic) -> Generated {
        run_with(logic, logic.arity())
            .unwrap_or_else(|err| panic!("{logic:?} should generate, got:\n{err}"))
    }

    fn spec(text: &str) -> EinsumSpec {
        parse_einsum(text).unwrap_or_else(|err| panic!("{text:?} should parse, got:\n{err}"))
    }

    fn run_spec(text: &str) -> Generated {
        run(&Logic::Spec(spec(text)))
    }

    fn spec_error(text: &str) -> ShapeError {
        match run_with(&Logic::Spec(spec(text)), spec(text).arity()) {
            Ok(generated) => panic!("{text:?} should fail, generated {:?}", rendered(&generated)),
            Err(err) => err,
        }
    }

    fn check(what: &str, generated: &Generated, expected: &[&str]) {
        assert_eq!(rendered(generated), expected, "constraints of {what}");
    }

    /// The constraints other than the equalities of a fixture row with the closed empty row
    /// (what a kind the spec does not write asserts).
    fn written(generated: &Generated) -> Vec<String> {
        rendered(generated)
            .into_iter()
            .filter(|c| !c.starts_with("[] ≈ ") && !c.ends_with(" ≈ []"))
            .collect()
    }

    fn dim_vars(ids: &[u32]) -> Vec<DimVar> {
        ids.iter().map(|&id| DimVar(id)).collect()
    }

    // -----------------------------------------------------------------------------------------
    // Broadcasting logics
    // -----------------------------------------------------------------------------------------

    #[test]
    fn broadcasting_logics() {
        #[rustfmt::skip]
        let cases: [(Logic, &[&str]); 6] = [
            (Logic::PointwiseUnary, &["C.b ≤ A.b", "C.i ≤ A.i", "C.o ≤ A.o"]),
            (Logic::PointwiseBinary, &[
                "C.b ≤ A.b", "C.i ≤ A.i", "C.o ≤ A.o",
                "C.b ≤ B.b", "C.i ≤ B.i", "C.o ≤ B.o",
            ]),
            (Logic::PointwiseTernary, &[
                "C.b ≤ A.b", "C.i ≤ A.i", "C.o ≤ A.o",
                "C.b ≤ B.b", "C.i ≤ B.i", "C.o ≤ B.o",
                "C.b ≤ D.b", "C.i ≤ D.i", "C.o ≤ D.o",
            ]),
            (Logic::Transpose, &["C.b ≤ A.b", "C.i ≤ A.o", "C.o ≤ A.i"]),
            (Logic::Compose, &[
                "A.i ≤ B.o", "C.b ≤ A.b", "C.b ≤ B.b", "C.i ≤ B.i", "C.o ≤ A.o",
            ]),
            (Logic::ComposeAccumulate, &[
                "A.i ≤ B.o", "C.b ≤ A.b", "C.b ≤ B.b", "C.i ≤ B.i", "C.o ≤ A.o",
                "C.b ≤ D.b", "C.i ≤ D.i", "C.o ≤ D.o",
            ]),
        ];
        for (logic, expected) in cases {
            let generated = run(&logic);
            check(&format!("{logic:?}"), &generated, expected);
            assert_eq!(
                generated,
                Generated {
                    constraints: generated.constraints.clone(),
                    ..Generated::default()
                },
                "{logic:?} reports no names or variables"
            );
        }
    }

    #[test]
    fn broadcasting_passes_rows_through_unchanged() {
        let vars = &mut VarSupply::default();
        let (r, s) = (vars.row(), vars.row());
        let a = Shape {
            batch: Row::var(r),
            input: Row::closed(vec![Dim::size(3)]),
            output: Row::closed(vec![Dim::size(4), Dim::Unit]),
        };
        let b = Shape {
            output: Row {
                leading: vec![Dim::size(2)],
                var: Some(s),
                trailing: vec![Dim::size(3)],
            },
            ..Shape::default()
        };
        let c = Shape::default();
        let generated = generate(&Logic::Compose, &c, &[a.clone(), b.clone()], vars).unwrap();
        let le = |res: &Row, opnd: &Row| Constraint::RowLe {
            res: res.clone(),
            opnd: opnd.clone(),
        };
        assert_eq!(
            generated.constraints,
            vec![
                le(&a.input, &b.output),
                le(&c.batch, &a.batch),
                le(&c.batch, &b.batch),
                le(&c.input, &b.input),
                le(&c.output, &a.output),
            ]
        );
        assert_eq!(
            rendered(&generated)[0],
            "[3] ≤ [2,..$1..,3]",
            "the rendering used by the other tests"
        );
        assert_eq!((vars.n_dims(), vars.n_rows()), (0, 2), "no fresh variables");
    }

    // -----------------------------------------------------------------------------------------
    // Specs: equalities with templates
    // -----------------------------------------------------------------------------------------

    #[test]
    fn spec_equalities_result_first_then_operands() {
        #[rustfmt::skip]
        let cases: [(&str, &[&str]); 4] = [
            ("ij=>ji", &[
                "C.b ≈ []", "C.i ≈ []", "C.o ≈ [$1,$0]",
                "[] ≈ A.b", "[] ≈ A.i", "[$0,$1] ≈ A.o",
            ]),
            // `j` is one variable in both operands: the environment is shared by all slots.
            ("ij;jk=>ik", &[
                "C.b ≈ []", "C.i ≈ []", "C.o ≈ [$0,$2]",
                "[] ≈ A.b", "[] ≈ A.i", "[$0,$1] ≈ A.o",
                "[] ≈ B.b", "[] ≈ B.i", "[$1,$2] ≈ B.o",
            ]),
            // Labels link rows of different kinds and slots (`o`: A's output is B's input).
            ("b|i->o; b|o->p; p => b|i->p", &[
                "C.b ≈ [$0]", "C.i ≈ [$1]", "C.o ≈ [$3]",
                "[$0] ≈ A.b", "[$1] ≈ A.i", "[$2] ≈ A.o",
                "[$0] ≈ B.b", "[$2] ≈ B.i", "[$3] ≈ B.o",
                "[] ≈ D.b",   "[] ≈ D.i",   "[$3] ≈ D.o",
            ]),
            // A spec without operand axes: the result's axes are only in the result.
            ("=> ab", &[
                "C.b ≈ []", "C.i ≈ []", "C.o ≈ [$0,$1]",
                "[] ≈ A.b", "[] ≈ A.i", "[] ≈ A.o",
            ]),
        ];
        for (text, expected) in cases {
            check(text, &run_spec(text), expected);
        }
    }

    #[test]
    fn spec_environments_are_returned() {
        let generated = run_spec("..r.., i; i, j => ..r.., j");
        let labels: Vec<(&str, DimVar)> = generated
            .labels
            .iter()
            .map(|(name, &var)| (name.as_str(), var))
            .collect();
        assert_eq!(labels, [("i", DimVar(0)), ("j", DimVar(1))]);
        let row_vars: Vec<(&str, RowVarId)> = generated
            .row_vars
            .iter()
            .map(|(name, &var)| (name.as_str(), var))
            .collect();
        assert_eq!(row_vars, [("r", RowVarId(0))]);
        assert_eq!(
            written(&generated),
            ["C.o ≈ [..$0..,$1]", "[..$0..,$0] ≈ A.o", "[$0,$1] ≈ B.o"]
        );
    }

    #[test]
    fn ellipsis_is_named_after_its_kind() {
        #[rustfmt::skip]
        let cases: [(&str, &[&str], &[&str]); 4] = [
            // `...` in the batch rows of an operand and the result: one variable.
            ("...|i->o => ...|o->i", &["batch"], &[
                "C.b ≈ [..$0..]", "C.i ≈ [$1]", "C.o ≈ [$0]",
                "[..$0..] ≈ A.b", "[$0] ≈ A.i", "[$1] ≈ A.o",
            ]),
            // `...` in a batch row and in an output row: two variables.
            ("...|i => ..., i", &["batch", "output"], &[
                "C.o ≈ [..$1..,$0]",
                "[..$0..] ≈ A.b", "[$0] ≈ A.o",
            ]),
            // One per kind, each shared between operand and result.
            ("...|...->... => ...|...->...", &["batch", "input", "output"], &[
                "C.b ≈ [..$0..]", "C.i ≈ [..$1..]", "C.o ≈ [..$2..]",
                "[..$0..] ≈ A.b", "[..$1..] ≈ A.i", "[..$2..] ≈ A.o",
            ]),
            // A named row variable is keyed by name only: here it moves batch axes to the output.
            ("..v..|...ijk => ..v..kji", &["output", "v"], &[
                "C.o ≈ [..$0..,$2,$1,$0]",
                "[..$0..] ≈ A.b", "[..$1..,$0,$1,$2] ≈ A.o",
            ]),
        ];
        for (text, row_names, expected) in cases {
            let generated = run_spec(text);
            let names: Vec<&str> = generated.row_vars.keys().map(String::as_str).collect();
            assert_eq!(names, row_names, "row variables of {text:?}");
            assert_eq!(written(&generated), expected, "constraints of {text:?}");
        }
    }

    #[test]
    fn axis_elaboration() {
        let cases: [(&str, &[&str]); 9] = [
            // `_` is a fresh variable at every occurrence.
            ("_, _ => _", &["C.o ≈ [$2]", "[$0,$1] ≈ A.o"]),
            // A fixed index is a fresh variable with room for the index.
            ("i, 2 => i", &["C.o ≈ [$0]", "[$0,$1] ≈ A.o", "$1 ≥ 3"]),
            ("i => i, 0", &["C.o ≈ [$0,$1]", "[$0] ≈ A.o", "$1 ≥ 1"]),
            (
                "0, 1 => 1",
                &["C.o ≈ [$2]", "[$0,$1] ≈ A.o", "$0 ≥ 1", "$1 ≥ 2", "$2 ≥ 2"],
            ),
            // Strided and convolution axes are affine terms over the label variables.
            ("2*i+1 => i", &["C.o ≈ [$0]", "[2*$0+1] ≈ A.o"]),
            (
                "2*o<+3*k; k => o",
                &["C.o ≈ [$0]", "[2*$0<+3*$1] ≈ A.o", "[$1] ≈ B.o"],
            ),
            (
                "o=+1+k; k => o",
                &["C.o ≈ [$0]", "[1*$0=+1*$1+1] ≈ A.o", "[$1] ≈ B.o"],
            ),
            // Concatenations: label variables and default-basis atoms.
            ("a^3^b => a, b", &["C.o ≈ [$0,$1]", "[$0^3^$1] ≈ A.o"]),
            (
                "a; b => a^b",
                &["C.o ≈ [$0^$1]", "[$0] ≈ A.o", "[$1] ≈ B.o"],
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(
                written(&run_spec(text)),
                expected,
                "constraints of {text:?}"
            );
        }
    }

    #[test]
    fn fixed_indices_are_reported() {
        let generated = run_spec("i, 2; 0 => i");
        assert_eq!(generated.fixed_indices, [(DimVar(1), 2), (DimVar(2), 0)]);
        assert!(
            !generated.labels.contains_key("2"),
            "a fixed index is no label"
        );
    }

    #[test]
    fn affine_terms_are_built_exactly() {
        let generated = run_spec("2*o<+3*k => o");
        let expected = Dim::Affine(Box::new(AffineDim {
            stride: 2,
            over: Dim::Var(DimVar(0)),
            conv: Some(ConvDim {
                dilation: 3,
                kernel: Dim::Var(DimVar(1)),
                padded: false,
            }),
            offset: 0,
        }));
        assert_eq!(
            generated.constraints[5],
            Constraint::RowEq(Row::closed(vec![expected]), open(1).output)
        );
    }

    #[test]
    fn each_call_is_a_new_instance() {
        let logic = Logic::Spec(spec("i => i"));
        let vars = &mut VarSupply::default();
        let first = generate(&logic, &open(0), &[open(1)], vars).unwrap();
        let second = generate(&logic, &open(0), &[open(1)], vars).unwrap();
        assert_eq!(first.labels["i"], DimVar(0));
        assert_eq!(second.labels["i"], DimVar(1), "fresh variables per call");
        let again = generate(&logic, &open(0), &[open(1)], &mut VarSupply::default()).unwrap();
        assert_eq!(first, again, "deterministic on a fresh supply");
    }

    // -----------------------------------------------------------------------------------------
    // Errors
    // -----------------------------------------------------------------------------------------

    #[test]
    fn arity_errors() {
        let cases: [(Logic, usize, &str); 7] = [
            (
                Logic::Spec(spec("ij;jk=>ik")),
                1,
                "Invalid permutation spec (expected one argument): i, j; j, k => i, k",
            ),
            (
                Logic::Spec(spec("ij=>ji")),
                2,
                "Invalid einsum spec (expected two arguments): i, j => j, i",
            ),
            (
                Logic::Spec(spec("i;j=>ij")),
                3,
                "Invalid einsum spec (expected three arguments): i; j => i, j",
            ),
            (
                Logic::Spec(spec("i=>i")),
                4,
                "Invalid einsum spec (expected 4 arguments): i => i",
            ),
            (
                Logic::Block(spec("a;b=>a^b")),
                3,
                "Invalid block spec (expected 3 arguments): a; b => a^b",
            ),
            (
                Logic::PointwiseBinary,
                1,
                "PointwiseBinary takes 2 operand(s); the operation was given 1 operand(s)",
            ),
            (
                Logic::BatchSlice { static_range: None },
                0,
                "BatchSlice { static_range: None } takes 1 operand(s); the operation was given 0 \
                 operand(s)",
            ),
        ];
        for (logic, given, message) in cases {
            let err = run_with(&logic, given).expect_err("wrong arity");
            assert_eq!(err.message, message, "{logic:?} with {given} operands");
        }
    }

    #[test]
    fn spec_errors() {
        let cases: [(&str, &str); 3] = [
            (
                "s*o<+k => o",
                "Invalid stride value (expected integer): s in axis 's*o<+k'; bind it with \
                 EinsumSpec::bind before generating constraints",
            ),
            (
                "2*o<+d*k => o",
                "Invalid dilation value (expected integer): d in axis '2*o<+d*k'; bind it with \
                 EinsumSpec::bind before generating constraints",
            ),
            (
                "2*o+k => o",
                "use_padding must be specified in convolution spec: write '=+' (padded) or '<+' \
                 (valid)",
            ),
        ];
        for (text, message) in cases {
            let err = spec_error(text);
            assert_eq!(err.message, message, "{text:?}");
            assert!(
                err.notes
                    .iter()
                    .any(|line| line.contains(&spec(text).to_string())),
                "the error quotes the spec: {err}"
            );
        }
        // Binding removes both errors.
        let bound = spec("s*o+k => o")
            .bind(&Bindings::default().coefficient("s", 2).use_padding(true))
            .unwrap();
        assert_eq!(
            written(&run(&Logic::Spec(bound))),
            ["C.o ≈ [$0]", "[2*$0=+1*$1] ≈ A.o"]
        );
    }

    #[test]
    fn malformed_trees_are_errors_not_panics() {
        let output_only = |axis: AxisSpec| EinsumSpec {
            rhs: vec![SlotSpec {
                output: RowSpec::closed(vec![axis]),
                ..SlotSpec::default()
            }],
            lhs: SlotSpec::default(),
        };
        let zero_stride = output_only(AxisSpec::Affine(AffineSpec {
            stride: Coefficient::Int(0),
            over: "o".to_owned(),
            offset: 0,
            conv: None,
        }));
        let huge_index = output_only(AxisSpec::Fixed { index: usize::MAX });
        for (tree, message) in [
            (
                zero_stride,
                "Invalid stride value: 0 in axis '0*o'; it must be at least 1",
            ),
            (
                huge_index,
                "Fixed index 18446744073709551615 is too large: the axis would need more than \
                 18446744073709551615 positions",
            ),
        ] {
            let err = run_with(&Logic::Spec(tree), 1).expect_err("malformed tree");
            assert_eq!(err.message, message);
        }
        let err = run_with(&Logic::Uint4x32ToPrec { coefficient: 0 }, 1).expect_err("zero");
        assert!(err.message.contains("at least 1"), "{err}");
    }

    // -----------------------------------------------------------------------------------------
    // Blocks: discardable components
    // -----------------------------------------------------------------------------------------

    #[test]
    fn discardable_labels_quantifier_test() {
        let cases: [(&str, &[&str]); 20] = [
            // The worked cases of the design notes.
            ("a^b => a", &["b"]),
            ("a^b => b", &["a"]),
            ("a^b => a^b", &[]),
            ("b^c => a", &[]),
            ("a; b => a^b", &[]),
            ("a; b => a^c", &[]),
            ("a; b => a^b^c", &["c"]),
            // Integer components have no variable: never discardable, never covering.
            ("3^a => a", &[]),
            ("a => a^3", &[]),
            ("a^3^b => a", &["b"]),
            ("a^b => a^3", &[]),
            // One covered axis per slot is enough; other axes do not matter.
            ("x, a^b => x, a", &["b"]),
            ("a^b; c^d => a, c", &["b", "d"]),
            ("a^b; c => a", &["b"]),
            // Every slot of the other side must be covered.
            ("a; x => a^b", &[]),
            ("a; c => a^b^c", &["b"]),
            // `_` and fixed indices are never covered.
            ("a^b => _", &[]),
            ("a^b => 0", &[]),
            // A component the other side names is carried through.
            ("a^b => a, b", &[]),
            ("a^b; c => a, b", &[]),
        ];
        for (text, expected) in cases {
            assert_eq!(
                discardable_labels(&spec(text)),
                expected,
                "discardable in {text:?}"
            );
        }
    }

    #[test]
    fn block_reports_discardable_variables() {
        let generated = run(&Logic::Block(spec("a; b => a^b^c")));
        #[rustfmt::skip]
        let expected = [
            "C.b ≈ []", "C.i ≈ []", "C.o ≈ [$0^$1^$2]",
            "[] ≈ A.b", "[] ≈ A.i", "[$0] ≈ A.o",
            "[] ≈ B.b", "[] ≈ B.i", "[$1] ≈ B.o",
        ];
        check("a; b => a^b^c", &generated, &expected);
        assert_eq!(generated.discardable, dim_vars(&[2]));
        assert_eq!(generated.labels["c"], DimVar(2));

        let spec_only = run(&Logic::Spec(spec("a; b => a^b^c")));
        assert_eq!(
            spec_only.discardable,
            [],
            "only a block reports discardable variables"
        );
        assert_eq!(spec_only.constraints, generated.constraints);
    }

    // -----------------------------------------------------------------------------------------
    // Batch slices, bit casts, terminals
    // -----------------------------------------------------------------------------------------

    #[test]
    fn batch_slice() {
        let dynamic = run(&Logic::BatchSlice { static_range: None });
        check(
            "a dynamic slice",
            &dynamic,
            &["A.b ≈ [$0,..C.b..]", "C.i ≈ A.i", "C.o ≈ A.o"],
        );
        assert_eq!(dynamic.slice_dim, Some(Dim::Var(DimVar(0))));

        let fixed = run(&Logic::BatchSlice {
            static_range: Some(5),
        });
        check(
            "a static slice",
            &fixed,
            &["A.b ≈ [5,..C.b..]", "C.i ≈ A.i", "C.o ≈ A.o"],
        );
        assert_eq!(fixed.slice_dim, Some(Dim::size(5)));

        // The slice axis goes in front of the result's leading flank.
        let vars = &mut VarSupply::default();
        let r = vars.row();
        let result = Shape {
            batch: Row {
                leading: vec![Dim::size(2)],
                var: Some(r),
                trailing: vec![Dim::size(3)],
            },
            ..Shape::default()
        };
        let closed_result = Shape {
            batch: Row::closed(vec![Dim::size(2)]),
            ..Shape::default()
        };
        let logic = Logic::BatchSlice { static_range: None };
        for (result, expected) in [(result, "[$0,2,..$0..,3]"), (closed_result, "[$1,◇,2]")] {
            let generated = generate(&logic, &result, &[open(1)], vars).unwrap();
            assert_eq!(rendered(&generated)[0], format!("A.b ≈ {expected}"));
        }
    }

    #[test]
    fn uint4x32_to_prec() {
        let generated = run(&Logic::Uint4x32ToPrec { coefficient: 4 });
        check(
            "a bit cast",
            &generated,
            &["(A.b A.i A.o) is [$0]", "#(C.b C.i C.o) = 4·$0"],
        );
    }

    #[test]
    fn terminals() {
        let shape = open(0);
        let cases: [(TerminalInit, &[&str]); 3] = [
            (TerminalInit::Unconstrained, &[]),
            (TerminalInit::NElements(12), &["#(C.b C.i C.o) = 1·12"]),
            (
                TerminalInit::ExactDims(vec![Dim::size(3), Dim::size(4)]),
                &["(C.b C.i C.o) is [3,4]"],
            ),
        ];
        for (init, expected) in cases {
            let constraints: Vec<String> = terminal_constraints(&shape, &init)
                .iter()
                .map(render)
                .collect();
            assert_eq!(constraints, expected, "{init:?}");
        }
    }
}
