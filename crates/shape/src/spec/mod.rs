//! The spec language: einsum specs (`"ij;jk=>ik"`), shape specs (`"b|i->o"`) and concrete shape
//! literals (`"2|3->4@rgb"`).
//!
//! [`parse_einsum`] and [`parse_shape_spec`] turn text into the tree of [`ast`]; `Display` on that tree
//! prints the canonical text, and parsing the canonical text gives the same tree back. Strides and
//! dilations may be identifiers that the caller binds later with [`EinsumSpec::bind`]; captures are
//! checked against the spec's names with [`EinsumSpec::capture`].

pub mod ast;
mod error;
mod lexer;
mod literal;
mod parser;
mod printer;

use std::collections::{BTreeMap, BTreeSet};

pub use ast::{
    AffineSpec, AxisSpec, Coefficient, ConcatComponent, ConvSpec, EinsumSpec, ExplicitPadding,
    Kind, Padding, RowSpec, RowVar, SlotRole, SlotSpec,
};
pub use error::{SpecError, SpecErrorKind};
pub use lexer::{MAX_INTEGER, Mode};
pub use literal::{DimLiteral, LiteralBasis, ShapeLiteral, parse_shape_literal};
pub use parser::{parse_einsum, parse_shape_spec};

/// Values for the parts of a spec that the text may leave to the caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bindings {
    /// Values of identifier strides and dilations (`"s*o<+d*k"` with `s` and `d` bound).
    pub coefficients: BTreeMap<String, usize>,
    /// Padding for convolution axes written without `=` or `<`.
    pub use_padding: Option<bool>,
}

impl Bindings {
    /// Binds the identifier stride or dilation `name` to `value` (see [`EinsumSpec::bind`]).
    pub fn coefficient(mut self, name: impl Into<String>, value: usize) -> Self {
        self.coefficients.insert(name.into(), value);
        self
    }

    /// Resolves every convolution axis written without `=` or `<` to padded (`true`, like `=+`) or
    /// valid (`false`, like `<+`).
    pub fn use_padding(mut self, padded: bool) -> Self {
        self.use_padding = Some(padded);
        self
    }
}

/// What a captured name refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CaptureKind {
    /// A dimension label: the capture holds its size.
    Dim,
    /// A row variable: the capture holds the product of its axes.
    Row,
}

impl EinsumSpec {
    /// The same spec with identifier coefficients replaced by their bound values and unspecified
    /// padding resolved when `bindings.use_padding` is given. An identifier without a value is an
    /// error naming the identifier and the axis it appears in.
    pub fn bind(&self, bindings: &Bindings) -> Result<EinsumSpec, SpecError> {
        let text = self.to_string();
        let bind_slot = |slot: &SlotSpec| bind_slot(slot, bindings, &text);
        Ok(EinsumSpec {
            rhs: self.rhs.iter().map(bind_slot).collect::<Result<_, _>>()?,
            lhs: bind_slot(&self.lhs)?,
        })
    }

    /// The dimension labels of the spec, in order of first appearance.
    pub fn dim_labels(&self) -> Vec<&str> {
        dedup(self.slots().flat_map(|(_, slot)| slot_dim_labels(slot)))
    }

    /// The row variables of the spec (with `...` resolved to its kind's name), in order of first
    /// appearance.
    pub fn row_vars(&self) -> Vec<&str> {
        dedup(self.slots().flat_map(|(_, slot)| slot_row_vars(slot)))
    }

    /// Checks that `name` is a dimension label or a row variable of the spec, and says which.
    pub fn capture(&self, name: &str) -> Result<CaptureKind, SpecError> {
        if self.dim_labels().contains(&name) {
            Ok(CaptureKind::Dim)
        } else if self.row_vars().contains(&name) {
            Ok(CaptureKind::Row)
        } else {
            Err(SpecError::whole(
                &self.to_string(),
                SpecErrorKind::Capture,
                format!(
                    "Variable '{name}' not found in the spec: a capture must name one of its \
                     dimension labels ({}) or row variables ({})",
                    list_or_none(&self.dim_labels()),
                    list_or_none(&self.row_vars()),
                ),
            ))
        }
    }
}

fn bind_slot(slot: &SlotSpec, bindings: &Bindings, text: &str) -> Result<SlotSpec, SpecError> {
    let mut bound = slot.clone();
    for kind in Kind::ALL {
        let row = bound.row_mut(kind);
        for axis in row.leading.iter_mut().chain(row.trailing.iter_mut()) {
            let AxisSpec::Affine(affine) = axis else {
                continue;
            };
            let shown = affine.to_string();
            bind_coefficient(&mut affine.stride, "stride", &shown, bindings, text)?;
            if let Some(conv) = &mut affine.conv {
                bind_coefficient(&mut conv.dilation, "dilation", &shown, bindings, text)?;
                if conv.padding == Padding::Unspecified
                    && let Some(padded) = bindings.use_padding
                {
                    conv.padding = if padded {
                        Padding::Padded
                    } else {
                        Padding::Valid
                    };
                }
            }
        }
    }
    Ok(bound)
}

fn bind_coefficient(
    coefficient: &mut Coefficient,
    role: &str,
    axis: &str,
    bindings: &Bindings,
    text: &str,
) -> Result<(), SpecError> {
    let Coefficient::Ident(name) = coefficient else {
        return Ok(());
    };
    match bindings.coefficients.get(name.as_str()) {
        Some(0) => Err(SpecError::whole(
            text,
            SpecErrorKind::UnboundCoefficient,
            format!("{role} '{name}' of axis '{axis}' is bound to 0; it must be at least 1"),
        )),
        Some(&value) => {
            *coefficient = Coefficient::Int(value);
            Ok(())
        }
        None => Err(SpecError::whole(
            text,
            SpecErrorKind::UnboundCoefficient,
            format!(
                "{role} '{name}' of axis '{axis}' is an identifier with no value: bind '{name}' \
                 or write an integer"
            ),
        )),
    }
}

fn slot_dim_labels(slot: &SlotSpec) -> impl Iterator<Item = &str> {
    slot.rows()
        .flat_map(|(_, row)| row.axes())
        .flat_map(AxisSpec::dim_labels)
}

fn slot_row_vars(slot: &SlotSpec) -> impl Iterator<Item = &str> {
    slot.rows()
        .filter_map(|(kind, row)| row.row_var.as_ref().map(|var| var.name_in(kind)))
}

fn dedup<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = BTreeSet::new();
    names.filter(|name| seen.insert(*name)).collect()
}

fn list_or_none(names: &[&str]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}
