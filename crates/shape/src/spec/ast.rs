//! The abstract syntax of einsum and shape specs.
//!
//! A spec is a list of *slots* (one per operand, then one for the result); a slot has three *rows*
//! (batch, input, output); a row is a leading flank, an optional row variable, and a trailing flank of
//! *axes*. The tree records what was written, not what it means: `...` stays an [`RowVar::Ellipsis`]
//! and is only resolved to its kind-specific name by [`RowVar::name_in`]. The lexical mode is a
//! property of the text, not of the tree (see [`super::Mode`]), so two texts that differ only in mode
//! parse to equal trees.

use std::fmt;

use serde::Serialize;

/// The three kinds of axes of a shape, in the order the notation writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Batch axes: the row before `|`.
    Batch,
    /// Input axes: the row between `|` and `->`; in a composition `a * b`, `a`'s input axes are
    /// contracted with `b`'s output axes.
    Input,
    /// Output axes: the row after `->` (the whole slot when neither `|` nor `->` is written).
    Output,
}

impl Kind {
    /// The three kinds in the order the notation writes them: batch, input, output.
    pub const ALL: [Kind; 3] = [Kind::Batch, Kind::Input, Kind::Output];

    /// The name that `...` stands for in a row of this kind.
    pub fn ellipsis_name(self) -> &'static str {
        match self {
            Kind::Batch => "batch",
            Kind::Input => "input",
            Kind::Output => "output",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.ellipsis_name())
    }
}

/// A whole einsum spec `rhs1; …; rhsN => lhs`. There is always at least one right-hand side
/// (`=> a` has one empty right-hand side).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct EinsumSpec {
    /// The operands' slots, in operand order (the parts before `=>`, separated by `;`).
    pub rhs: Vec<SlotSpec>,
    /// The result's slot (the part after `=>`).
    pub lhs: SlotSpec,
}

impl EinsumSpec {
    /// The number of operands the spec takes.
    pub fn arity(&self) -> usize {
        self.rhs.len()
    }

    /// Every slot with its role, right-hand sides first, result last.
    pub fn slots(&self) -> impl Iterator<Item = (SlotRole, &SlotSpec)> {
        self.rhs
            .iter()
            .enumerate()
            .map(|(i, slot)| (SlotRole::Rhs(i), slot))
            .chain(std::iter::once((SlotRole::Lhs, &self.lhs)))
    }
}

/// Which slot of an einsum spec a piece of it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SlotRole {
    /// The operand at this 0-based position.
    Rhs(usize),
    /// The result.
    Lhs,
    /// The only slot of a shape spec (no `=>`).
    Shape,
}

impl fmt::Display for SlotRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SlotRole::Rhs(i) => write!(f, "rhs{}", i + 1),
            SlotRole::Lhs => f.write_str("lhs"),
            SlotRole::Shape => f.write_str("shape"),
        }
    }
}

/// One operand's (or the result's) shape template: `batch | input -> output`. A kind that is not
/// written is the closed empty row.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
pub struct SlotSpec {
    /// The row before `|`; closed and empty when the slot has no `|`.
    pub batch: RowSpec,
    /// The row between `|` and `->`; closed and empty when the slot has no `->`.
    pub input: RowSpec,
    /// The row after `->`, or the whole slot when it has neither `|` nor `->`.
    pub output: RowSpec,
}

impl SlotSpec {
    /// The row of `kind`.
    pub fn row(&self, kind: Kind) -> &RowSpec {
        match kind {
            Kind::Batch => &self.batch,
            Kind::Input => &self.input,
            Kind::Output => &self.output,
        }
    }

    /// The row of `kind`, for changing it in place.
    pub fn row_mut(&mut self, kind: Kind) -> &mut RowSpec {
        match kind {
            Kind::Batch => &mut self.batch,
            Kind::Input => &mut self.input,
            Kind::Output => &mut self.output,
        }
    }

    /// The rows with their kinds, in the order the notation writes them.
    pub fn rows(&self) -> impl Iterator<Item = (Kind, &RowSpec)> {
        Kind::ALL
            .into_iter()
            .map(move |kind| (kind, self.row(kind)))
    }
}

/// A row: `leading, <row variable>, trailing`, or just `trailing` when closed.
///
/// Invariant (kept by the parser and by [`RowSpec::closed`]/[`RowSpec::open`]): a closed row has an
/// empty leading flank, because without a row variable there is nothing for a leading flank to lead.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
pub struct RowSpec {
    /// The axes written before the row variable; always empty in a closed row.
    pub leading: Vec<AxisSpec>,
    /// The row variable that stands for any number of further axes, or `None` for a closed row
    /// (exactly the written axes).
    pub row_var: Option<RowVar>,
    /// The axes written after the row variable, or all the axes of a closed row.
    pub trailing: Vec<AxisSpec>,
}

impl RowSpec {
    /// A row of exactly these axes.
    pub fn closed(axes: Vec<AxisSpec>) -> Self {
        RowSpec {
            leading: Vec::new(),
            row_var: None,
            trailing: axes,
        }
    }

    /// A row with a row variable between two flanks.
    pub fn open(leading: Vec<AxisSpec>, row_var: RowVar, trailing: Vec<AxisSpec>) -> Self {
        RowSpec {
            leading,
            row_var: Some(row_var),
            trailing,
        }
    }

    /// True for the closed row with no axes (what an unwritten kind means).
    pub fn is_empty_closed(&self) -> bool {
        self.row_var.is_none() && self.leading.is_empty() && self.trailing.is_empty()
    }

    /// The explicit axes, leading flank first.
    pub fn axes(&self) -> impl Iterator<Item = &AxisSpec> {
        self.leading.iter().chain(&self.trailing)
    }
}

/// A row variable: `...` (named after the row's kind) or `..name..`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "form", content = "name", rename_all = "lowercase")]
pub enum RowVar {
    /// `...`: the row variable of the row's kind (see [`RowVar::name_in`]).
    Ellipsis,
    /// `..name..`: a row variable shared by every row that names it, whatever their kinds.
    Named(String),
}

impl RowVar {
    /// The variable's name in a row of `kind`: `...` is kind-specific, so `...` in two batch rows is
    /// one variable while `...` in a batch row and in an output row are two.
    pub fn name_in(&self, kind: Kind) -> &str {
        match self {
            RowVar::Ellipsis => kind.ellipsis_name(),
            RowVar::Named(name) => name,
        }
    }
}

/// One axis of a row.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "axis", rename_all = "lowercase")]
pub enum AxisSpec {
    /// A dimension variable shared by every occurrence of the name in the spec.
    Label {
        /// The label, as written.
        name: String,
    },
    /// `_`: a fresh dimension variable for this occurrence only.
    Anonymous,
    /// A fixed index: read (operand) or write (result) only position `index`.
    Fixed {
        /// The 0-based position along the axis.
        index: usize,
    },
    /// A strided or convolution axis: `stride*over [pad]+ [offset+] dilation*kernel`, where
    /// `pad` is `=`, `<` or `[before,after]` (then `^` to round up).
    Affine(AffineSpec),
    /// `a^b^…`: the components laid end to end.
    Concat {
        /// The components, first to last along the axis.
        components: Vec<ConcatComponent>,
    },
}

impl AxisSpec {
    /// A label axis named `name`.
    pub fn label(name: impl Into<String>) -> Self {
        AxisSpec::Label { name: name.into() }
    }

    /// The dimension labels the axis mentions: its label, an affine axis's output and kernel
    /// labels, or a concatenation's label components.
    pub fn dim_labels(&self) -> Vec<&str> {
        match self {
            AxisSpec::Label { name } => vec![name],
            AxisSpec::Anonymous | AxisSpec::Fixed { .. } => vec![],
            AxisSpec::Affine(affine) => std::iter::once(affine.over.as_str())
                .chain(affine.conv.iter().map(|conv| conv.kernel.as_str()))
                .collect(),
            AxisSpec::Concat { components } => components
                .iter()
                .filter_map(|component| match component {
                    ConcatComponent::Label { name } => Some(name.as_str()),
                    ConcatComponent::Size { .. } => None,
                })
                .collect(),
        }
    }
}

/// One component of a concatenated axis.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "component", rename_all = "lowercase")]
pub enum ConcatComponent {
    /// A dimension variable.
    Label {
        /// The label, as written.
        name: String,
    },
    /// A component of known size whose positions the other side of the spec does not name
    /// (`3^a => a` skips three positions at the front).
    Size {
        /// The number of positions skipped.
        size: usize,
    },
}

/// An input-side axis addressed through an output-position label and, for a convolution, a kernel
/// label: `index = stride·over + dilation·kernel + offset − left_padding`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct AffineSpec {
    /// The step of the input index per output position (`stride*` before the label; 1 when not
    /// written).
    pub stride: Coefficient,
    /// The label of the output position the axis is addressed through.
    pub over: String,
    /// A constant added to the index (`over+offset`, or `offset+` before the kernel part); 0 when
    /// not written.
    pub offset: usize,
    /// The kernel part of a convolution, or `None` for a purely strided axis.
    pub conv: Option<ConvSpec>,
}

/// The kernel part of a convolution axis.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ConvSpec {
    /// The step of the input index per kernel position (`dilation*` before the kernel label; 1 when
    /// not written).
    pub dilation: Coefficient,
    /// The label of the kernel position.
    pub kernel: String,
    /// How the input's borders are treated (`=+`, `<+` or a bare `+`).
    pub padding: Padding,
}

/// How a convolution treats the borders of its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Padding {
    /// `=+`: the input is padded so that `input = stride·output`.
    Padded,
    /// `<+`: only positions where the whole kernel fits: `input = stride·(output−1) + span`.
    Valid,
    /// `[before,after]+` or `[before,after]^+`: PyTorch's `padding` and `ceil_mode`.
    Explicit(ExplicitPadding),
    /// `+` alone: the caller must decide (see [`super::Bindings::use_padding`]).
    Unspecified,
}

/// Padding given in positions, with the output size rounded as PyTorch rounds it.
///
/// The input is read as if `before` neutral positions preceded it and `after` followed it;
/// windows `stride` apart start at the first of those. With `padded = before + input + after`,
/// the output has `⌊(padded − span)/stride⌋ + 1` positions (the windows that fit), or, `ceil`,
/// `⌈(padded − span)/stride⌉ + 1` less one when the last window would start past the input and
/// its left padding: the last window may then overrun the right padding, reading neutral
/// positions there too. Positions past the last window are not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct ExplicitPadding {
    /// Positions before the first.
    pub before: usize,
    /// Positions after the last.
    pub after: usize,
    /// Whether the output size is rounded up (`^` after the brackets).
    pub ceil: bool,
}

impl ExplicitPadding {
    /// The output size over `input` positions of windows `span` positions wide, `stride` apart,
    /// or `None` when not even one window fits.
    pub fn output(&self, input: usize, span: usize, stride: usize) -> Option<usize> {
        let padded = input.checked_add(self.before)?.checked_add(self.after)?;
        let room = padded.checked_sub(span)?;
        if !self.ceil {
            return Some(room / stride + 1);
        }
        let output = room.div_ceil(stride) + 1;
        // PyTorch: the last window starts inside the input or its left padding.
        if (output - 1) * stride >= input + self.before {
            Some(output - 1)
        } else {
            Some(output)
        }
    }

    /// The positions read past the input's end by `output` windows of `span`, `stride` apart:
    /// the right padding, or more when a rounded-up last window overruns it.
    pub fn after_read(&self, input: usize, output: usize, span: usize, stride: usize) -> usize {
        let end = stride * output.saturating_sub(1) + span;
        end.saturating_sub(self.before + input).max(self.after)
    }
}

impl std::fmt::Display for ExplicitPadding {
    /// `[before,after]`, then `^` when rounded up.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{},{}]", self.before, self.after)?;
        if self.ceil {
            f.write_str("^")?;
        }
        Ok(())
    }
}

/// A stride or dilation: an integer, or an identifier the caller binds before use.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(untagged)]
pub enum Coefficient {
    /// A literal integer.
    Int(usize),
    /// An identifier, replaced by its value with [`EinsumSpec::bind`].
    Ident(String),
}

impl Coefficient {
    /// The value when it is an integer.
    pub fn as_int(&self) -> Option<usize> {
        match self {
            Coefficient::Int(n) => Some(*n),
            Coefficient::Ident(_) => None,
        }
    }
}
