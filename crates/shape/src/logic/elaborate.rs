//! A spec's constraints: its slots elaborated to template shapes (labels and row variables shared
//! across the slots of one call), and row equalities between those templates and the operation's
//! operands and result.

use std::collections::BTreeMap;

use crate::constraint::Constraint;
use crate::error::{ShapeError, ShapeErrorKind};
use crate::spec::{
    AffineSpec, AxisSpec, Coefficient, ConcatComponent, EinsumSpec, Kind, Padding, RowSpec,
    SlotSpec,
};
use crate::term::{AffineDim, Border, ConvDim, Dim, DimVar, Row, RowVarId, Shape, VarSupply};

use super::Generated;

/// `C.k ≈ T_lhs.k` and `T_rhs_i.k ≈ A_i.k` for every kind, result first, then the side
/// constraints of the templates (fixed indices).
pub(super) fn spec_equalities(
    spec: &EinsumSpec,
    result: &Shape,
    operands: &[&Shape],
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
    let mut lhs_template = elab.slot(&spec.lhs)?;

    // Each template row stands in one equation: moved there, not copied.
    let mut constraints = Vec::with_capacity(3 * (1 + rhs_templates.len()) + elab.side.len());
    for kind in Kind::ALL {
        constraints.push(Constraint::RowEq(
            result.row(kind).clone(),
            std::mem::take(lhs_template.row_mut(kind)),
        ));
    }
    for (mut template, operand) in rhs_templates.into_iter().zip(operands) {
        for kind in Kind::ALL {
            constraints.push(Constraint::RowEq(
                std::mem::take(template.row_mut(kind)),
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
                let size =
                    index.checked_add(1).ok_or_else(|| {
                        ShapeError::of_kind(ShapeErrorKind::Limit, format!(
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
                let border = match conv.padding {
                    Padding::Padded => Border::Same,
                    Padding::Valid => Border::Valid,
                    Padding::Explicit(explicit) => Border::Explicit(explicit),
                    Padding::Unspecified => {
                        return Err(ShapeError::of_kind(
                            ShapeErrorKind::Spec,
                            "use_padding must be specified in convolution spec: write '=+' \
                             (padded) or '<+' (valid)",
                        )
                        .note(format!("axis '{axis}' of spec: {}", self.spec)));
                    }
                };
                Some(ConvDim {
                    dilation,
                    kernel: Dim::Var(self.label(&conv.kernel)),
                    border,
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
            Coefficient::Int(0) => Err(ShapeError::of_kind(ShapeErrorKind::Spec, format!(
                "Invalid {role} value: 0 in axis '{axis}'; it must be at least 1"
            ))
            .note(format!("in spec: {}", self.spec))),
            Coefficient::Int(n) => Ok(*n),
            Coefficient::Ident(name) => Err(ShapeError::of_kind(ShapeErrorKind::Spec, format!(
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
