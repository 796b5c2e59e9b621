//! Shape terms: dimensions, rows and shapes, possibly with variables.
//!
//! A dimension is a variable, the claim-free unit `1*` (the top of the broadcast order: it
//! broadcasts to anything), an atom `n@basis` (a claim: it broadcasts to nothing but itself, even
//! when `n` is 1), or a derived term: an affine (strided/convolution) axis or a concatenation. A row
//! is `leading · <var> · trailing`, or `leading · ◇ · trailing` when closed: the marker `◇` is where
//! broadcasting inserts axes. A shape has three rows.

use std::fmt;
use std::sync::Arc;

/// A dimension variable, unique within one inference session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DimVar(pub u32);

/// A row variable, unique within one inference session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RowVarId(pub u32);

/// Hands out fresh variables.
#[derive(Debug, Clone, Default)]
pub struct VarSupply {
    n_dims: u32,
    n_rows: u32,
}

impl VarSupply {
    /// A fresh dimension variable.
    pub fn dim(&mut self) -> DimVar {
        self.n_dims += 1;
        DimVar(self.n_dims - 1)
    }

    /// A fresh row variable.
    pub fn row(&mut self) -> RowVarId {
        self.n_rows += 1;
        RowVarId(self.n_rows - 1)
    }

    /// A fresh dimension variable as a term.
    pub fn dim_term(&mut self) -> Dim {
        Dim::Var(self.dim())
    }

    /// The number of dimension variables handed out so far (they are numbered `0..n_dims`).
    pub fn n_dims(&self) -> usize {
        self.n_dims as usize
    }

    /// The number of row variables handed out so far (they are numbered `0..n_rows`).
    pub fn n_rows(&self) -> usize {
        self.n_rows as usize
    }
}

/// The unit of an axis. Unannotated user axes carry `Default`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Basis {
    /// The unit of axes that declare none (`@default`).
    Default,
    /// A unit named by the user (`@rgb`); atoms of different bases are different dimensions, even
    /// of equal size.
    Named(Arc<str>),
}

impl Basis {
    /// `None` and `"default"` are the default basis; anything else is a named one.
    pub fn from_name(name: Option<&str>) -> Basis {
        match name {
            None | Some("default") => Basis::Default,
            Some(name) => Basis::Named(name.into()),
        }
    }
}

/// A dimension term.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Dim {
    /// An unknown dimension.
    Var(DimVar),
    /// The claim-free unit `1*`.
    Unit,
    /// A known size with its basis.
    Atom {
        /// The number of positions along the axis.
        size: usize,
        /// The unit of the axis; atoms of equal size but different bases are different dimensions.
        basis: Basis,
    },
    /// An input-side axis addressed through an output position (and a kernel position).
    Affine(Box<AffineDim>),
    /// Components laid end to end; the size is the sum.
    Concat(Vec<Dim>),
}

/// `stride·over [+ dilation·kernel] + offset`, as a size relation (the offset never affects sizes).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AffineDim {
    /// The step of the input index per output position.
    pub stride: usize,
    /// The dimension of the output positions the axis is addressed through.
    pub over: Dim,
    /// The kernel part of a convolution axis, or `None` for a purely strided one.
    pub conv: Option<ConvDim>,
    /// A constant added to the index; it shifts positions but never enters a size.
    pub offset: usize,
}

/// The kernel part of an affine (convolution) dimension: `dilation·kernel`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConvDim {
    /// The step of the input index per kernel position.
    pub dilation: usize,
    /// The dimension of the kernel positions.
    pub kernel: Dim,
    /// How the windows meet the input's borders, which sets the input's size.
    pub border: Border,
}

/// How a convolution's windows meet its input's borders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Border {
    /// `=+`: padded around so that `input = stride·output`.
    Same,
    /// `<+`: only windows inside the input, which they cover exactly:
    /// `input = stride·(output−1) + span`.
    Valid,
    /// `[before,after]+`: padded by so many positions, the output size rounded (see
    /// [`ExplicitPadding`]); the input's size is not a function of the output's unless the
    /// stride is 1.
    Explicit(ExplicitPadding),
}

impl Border {
    /// The marker before the `+` of the axis: `=`, `<`, `[1,1]` or `[1,1]^`.
    pub fn marker(&self) -> String {
        match self {
            Border::Same => "=".to_owned(),
            Border::Valid => "<".to_owned(),
            Border::Explicit(explicit) => explicit.to_string(),
        }
    }
}

impl Dim {
    /// An atom of the default basis.
    pub fn size(size: usize) -> Dim {
        Dim::Atom {
            size,
            basis: Basis::Default,
        }
    }

    /// True for a dimension of known size: the unit `1*` or an atom.
    pub fn is_ground(&self) -> bool {
        matches!(self, Dim::Unit | Dim::Atom { .. })
    }

    /// The size of a ground dimension.
    pub fn ground_size(&self) -> Option<usize> {
        match self {
            Dim::Unit => Some(1),
            Dim::Atom { size, .. } => Some(*size),
            _ => None,
        }
    }

    /// Calls `f` on every variable inside the term.
    pub fn for_each_var(&self, f: &mut impl FnMut(DimVar)) {
        match self {
            Dim::Var(v) => f(*v),
            Dim::Unit | Dim::Atom { .. } => {}
            Dim::Affine(affine) => {
                affine.over.for_each_var(f);
                if let Some(conv) = &affine.conv {
                    conv.kernel.for_each_var(f);
                }
            }
            Dim::Concat(components) => components.iter().for_each(|c| c.for_each_var(f)),
        }
    }
}

impl From<usize> for Dim {
    /// A default-basis atom.
    fn from(size: usize) -> Dim {
        Dim::size(size)
    }
}

/// A row term.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Row {
    /// The axes before the row variable (or before the broadcast marker of a closed row).
    pub leading: Vec<Dim>,
    /// The row variable standing for the axes not yet known, or `None` for a closed row, where the
    /// broadcast marker takes its place.
    pub var: Option<RowVarId>,
    /// The axes after the row variable (or after the broadcast marker of a closed row).
    pub trailing: Vec<Dim>,
}

impl Row {
    /// A closed row of exactly these axes, the marker at the left edge.
    pub fn closed(dims: Vec<Dim>) -> Row {
        Row {
            leading: Vec::new(),
            var: None,
            trailing: dims,
        }
    }

    /// A row that is only a variable.
    pub fn var(var: RowVarId) -> Row {
        Row {
            leading: Vec::new(),
            var: Some(var),
            trailing: Vec::new(),
        }
    }

    /// The number of explicit axes.
    pub fn n_explicit(&self) -> usize {
        self.leading.len() + self.trailing.len()
    }

    /// The explicit axes, leading flank first.
    pub fn dims(&self) -> impl Iterator<Item = &Dim> {
        self.leading.iter().chain(&self.trailing)
    }

    /// A closed row's axes with the marker at the left edge. The marker only guides broadcasting
    /// while the row is still refined: once inference is finished, rows with the same axes are the
    /// same row.
    pub fn without_marker(&self) -> Row {
        match self.var {
            Some(_) => self.clone(),
            None => Row::closed(self.dims().cloned().collect()),
        }
    }
}

/// Which row of a shape.
pub use crate::spec::{ExplicitPadding, Kind};

/// A shape term: the three rows.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Shape {
    /// The batch row.
    pub batch: Row,
    /// The input row: the axes a composition contracts.
    pub input: Row,
    /// The output row.
    pub output: Row,
}

impl Shape {
    /// The shape with [`Row::without_marker`] applied to each row.
    pub fn without_markers(&self) -> Shape {
        Shape {
            batch: self.batch.without_marker(),
            input: self.input.without_marker(),
            output: self.output.without_marker(),
        }
    }

    /// The row of `kind`.
    pub fn row(&self, kind: Kind) -> &Row {
        match kind {
            Kind::Batch => &self.batch,
            Kind::Input => &self.input,
            Kind::Output => &self.output,
        }
    }

    /// The row of `kind`, for changing it in place.
    pub fn row_mut(&mut self, kind: Kind) -> &mut Row {
        match kind {
            Kind::Batch => &mut self.batch,
            Kind::Input => &mut self.input,
            Kind::Output => &mut self.output,
        }
    }
}

impl fmt::Display for Basis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Basis::Default => f.write_str("default"),
            Basis::Named(name) => f.write_str(name),
        }
    }
}

impl fmt::Display for Dim {
    /// `3`, `3@rgb`, `1*`, `$7` (variable 7), `2*$1+3*$2`, `$1^$2`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Var(v) => write!(f, "${}", v.0),
            Dim::Unit => f.write_str("1*"),
            Dim::Atom {
                size,
                basis: Basis::Default,
            } => write!(f, "{size}"),
            Dim::Atom { size, basis } => write!(f, "{size}@{basis}"),
            Dim::Affine(affine) => {
                write!(f, "{}*{}", affine.stride, affine.over)?;
                if let Some(conv) = &affine.conv {
                    let pad = conv.border.marker();
                    write!(f, "{pad}+{}*{}", conv.dilation, conv.kernel)?;
                }
                if affine.offset > 0 {
                    write!(f, "+{}", affine.offset)?;
                }
                Ok(())
            }
            Dim::Concat(components) => {
                for (i, c) in components.iter().enumerate() {
                    if i > 0 {
                        f.write_str("^")?;
                    }
                    write!(f, "{c}")?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for Row {
    /// Comma-separated axes with `..$n..` for the row variable; a closed row with a leading flank
    /// shows its marker as `◇`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut items: Vec<String> = self.leading.iter().map(ToString::to_string).collect();
        match self.var {
            Some(var) => items.push(format!("..${}..", var.0)),
            None if !self.leading.is_empty() => items.push("◇".to_owned()),
            None => {}
        }
        items.extend(self.trailing.iter().map(ToString::to_string));
        f.write_str(&items.join(","))
    }
}

impl fmt::Display for Shape {
    /// `batch|input->output`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}|{}->{}", self.batch, self.input, self.output)
    }
}
