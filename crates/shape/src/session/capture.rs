//! Captured dimensions: a spec's label or row variable, named after the operation that used it,
//! whose size can be read once known and constrained by the user.
//!
//! | call | dimension | row variable |
//! |---|---|---|
//! | `set_dim(r, n)` | `r = n` | the product of its axes is `n` |
//! | `set_equal(r, s)` | `r = s` | rows equal; with a dimension: the product of the row is it |
//! | `set_scale(f, large, small)` | `large = f·small` | an error: dimensions only |
//!
//! Each call checks what is already known first, so that a contradiction is reported in the
//! terms of the call; what is not known yet becomes a constraint like any other, and is decided
//! (or reported) as inference proceeds.

use super::{Inference, OpId};
use crate::constraint::Constraint;
use crate::error::{ShapeError, ShapeErrorKind};
use crate::logic::Logic;
use crate::spec::CaptureKind;
use crate::term::{AffineDim, Dim, DimVar, Row, RowVarId};

/// A captured name of one operation's spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    /// The captured dimension label or row variable (`...` under its kind's name).
    pub name: String,
    /// The operation whose spec names it.
    pub op: OpId,
    target: Target,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Dim(DimVar),
    Row(RowVarId),
}

impl Capture {
    /// Whether the capture is a dimension or a row variable.
    pub fn kind(&self) -> CaptureKind {
        match self.target {
            Target::Dim(_) => CaptureKind::Dim,
            Target::Row(_) => CaptureKind::Row,
        }
    }
}

impl Inference {
    /// Captures `name`, a dimension label or row variable (`...` under its kind's name: `batch`,
    /// `input`, `output`) of the spec of `op`.
    pub fn capture(&self, op: OpId, name: &str) -> Result<Capture, ShapeError> {
        let info = self.op(op);
        let (Logic::Spec(spec) | Logic::Block(spec)) = &info.logic else {
            return Err(ShapeError::of_kind(
                ShapeErrorKind::Capture,
                format!(
                    "Cannot capture '{name}': the operation is a {} and has no spec to name it",
                    info.logic
                ),
            ));
        };
        let kind = spec.capture(name).map_err(|error| {
            ShapeError::of_kind(
                ShapeErrorKind::Capture,
                format!("Variable '{name}' not found in environments for spec: {spec}"),
            )
            .note(error.message)
        })?;
        let target = match kind {
            CaptureKind::Dim => Target::Dim(info.generated.labels[name]),
            CaptureKind::Row => Target::Row(info.generated.row_vars[name]),
        };
        Ok(Capture {
            name: name.to_owned(),
            op,
            target,
        })
    }

    /// The captured size once known: a dimension's size, or the product of a row variable's axes.
    pub fn capture_value(&self, capture: &Capture) -> Option<usize> {
        match capture.target {
            Target::Dim(var) => self.solver.resolve_dim(&Dim::Var(var)).ground_size(),
            Target::Row(var) => {
                let row = self.solver.resolve_row(&Row::var(var));
                if row.var.is_some() {
                    return None;
                }
                row.dims()
                    .try_fold(1usize, |acc, d| acc.checked_mul(d.ground_size()?))
            }
        }
    }

    /// Sets a captured dimension to `size`, or a captured row variable's element count.
    pub fn set_dim(&mut self, capture: &Capture, size: usize) -> Result<(), ShapeError> {
        let operation = format!("set_dim({}, {size})", capture.name);
        if let Some(known) = self.capture_value(capture) {
            if known == size {
                return Ok(());
            }
            let what = match capture.kind() {
                CaptureKind::Dim => "dimension",
                CaptureKind::Row => "number of elements of the row",
            };
            return Err(ShapeError::new(format!(
                "set_dim: the {what} '{}' is already solved to {known}, not {size}",
                capture.name
            ))
            .in_operation(operation, []));
        }
        let constraint = match capture.target {
            Target::Dim(var) => Constraint::DimEq(Dim::Var(var), Dim::size(size)),
            Target::Row(var) => Constraint::TotalElems {
                rows: vec![Row::var(var)],
                total: Dim::size(size),
                coefficient: 1,
            },
        };
        self.commit(vec![constraint], Vec::new())
            .map_err(|error| error.in_operation(operation, []))
    }

    /// Makes two captures equal: dimensions equal, rows equal, or a row's element count equal to
    /// a dimension.
    pub fn set_equal(&mut self, a: &Capture, b: &Capture) -> Result<(), ShapeError> {
        let operation = format!("set_equal({}, {})", a.name, b.name);
        if let (Some(x), Some(y)) = (self.capture_value(a), self.capture_value(b))
            && x != y
        {
            return Err(ShapeError::new(format!(
                "Cannot set equal dimensions for variable references with different values: \
                 '{}' is {x}, '{}' is {y}",
                a.name, b.name
            ))
            .in_operation(operation, []));
        }
        let product_of = |row: RowVarId, dim: DimVar| Constraint::TotalElems {
            rows: vec![Row::var(row)],
            total: Dim::Var(dim),
            coefficient: 1,
        };
        let constraint = match (a.target, b.target) {
            (Target::Dim(x), Target::Dim(y)) => Constraint::DimEq(Dim::Var(x), Dim::Var(y)),
            (Target::Row(x), Target::Row(y)) => Constraint::RowEq(Row::var(x), Row::var(y)),
            (Target::Row(row), Target::Dim(dim)) | (Target::Dim(dim), Target::Row(row)) => {
                product_of(row, dim)
            }
        };
        self.commit(vec![constraint], Vec::new())
            .map_err(|error| error.in_operation(operation, []))?;
        if a.kind() != b.kind() {
            self.pending_equal.push((a.clone(), b.clone()));
        }
        Ok(())
    }

    /// `large = factor · small`, for two captured dimensions.
    pub fn set_scale(
        &mut self,
        factor: usize,
        large: &Capture,
        small: &Capture,
    ) -> Result<(), ShapeError> {
        let operation = format!("set_scale({factor}, {}, {})", large.name, small.name);
        let fail = |message: String| Err(ShapeError::new(message).in_operation(&operation, []));
        let (Target::Dim(large_var), Target::Dim(small_var)) = (large.target, small.target) else {
            return fail(format!(
                "Shape.set_scale: requires two dimension variables; got at least one row \
                 variable (labels {}, {})",
                large.name, small.name
            ));
        };
        if factor == 0 {
            return fail("Shape.set_scale: factor must be >= 1, got 0".to_owned());
        }
        match (self.capture_value(large), self.capture_value(small)) {
            (Some(l), Some(s)) if Some(l) != factor.checked_mul(s) => {
                return fail(format!(
                    "Shape.set_scale: dimensions do not satisfy d_large = factor * d_small \
                     ({} = {l}, factor {factor}, {} = {s})",
                    large.name, small.name
                ));
            }
            (Some(l), _) if l % factor != 0 => {
                return fail(format!(
                    "Shape.set_scale: solved dimension {l} for {} is not divisible by factor \
                     {factor}",
                    large.name
                ));
            }
            _ => {}
        }
        let scaled = if factor == 1 {
            Dim::Var(small_var)
        } else {
            Dim::Affine(Box::new(AffineDim {
                stride: factor,
                over: Dim::Var(small_var),
                conv: None,
                offset: 0,
            }))
        };
        self.commit(
            vec![Constraint::DimEq(Dim::Var(large_var), scaled)],
            Vec::new(),
        )
        .map_err(|error| error.in_operation(operation, []))
    }

    /// After a failed closing: a dimension–row `set_equal` whose sides are still unknown, which is
    /// the likelier cause than the undecided constraint the solver reports.
    pub(super) fn undecided_set_equal(&self) -> Option<ShapeError> {
        self.pending_equal.iter().find_map(|(a, b)| {
            (self.capture_value(a).is_none() && self.capture_value(b).is_none()).then(|| {
                ShapeError::of_kind(
                    ShapeErrorKind::Underdetermined,
                    format!(
                        "set_equal: insufficient information between labels {} and {}: neither \
                     the dimension nor the row's axes are determined",
                        a.name, b.name
                    ),
                )
            })
        })
    }
}
