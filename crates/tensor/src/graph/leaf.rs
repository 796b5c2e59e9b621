//! Leaves: data, parameters, constants, ranges and the other tensors no operation computes, built
//! through a [`LeafBuilder`]; and static indices, positions chosen when a routine runs.

use rcannl_ir::{Precision, Symbol};
use rcannl_shape::LeafDecl;
use rcannl_shape::logic::TerminalInit;
use rcannl_shape::spec::ShapeLiteral;
use rcannl_shape::term::Dim;

use crate::tensor::Tensor;

use super::error::{TensorError, error};
use super::init::Init;
use super::{Graph, PrecisionRule, TensorData};

/// Where a leaf's values come from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LeafKind {
    /// Set from the host (given at creation, or later through a context).
    Data(DataStart),
    /// Every cell holds the constant.
    Constant(f64),
    /// A parameter, initialized once per context.
    Param(Init),
    /// Every cell holds its own offset.
    RangeOverOffsets,
    /// Every cell holds the tensor's id.
    SelfId,
    /// Every cell holds a captured dimension's size.
    Dim(rcannl_shape::Capture),
    /// The context's random seed, as a 128-bit word.
    Seed,
    /// The value a static index holds when the routine runs (one without a range).
    Static(Symbol),
}

/// What a data tensor holds before a context sets it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum DataStart {
    /// Nothing: reading it before it is set is an error.
    Unset,
    /// These values, row-major in memory order.
    Values(Vec<f64>),
    /// This value in every cell, however many its inferred shape has.
    Fill(f64),
}

/// Static symbols live far above the iterators projection inference numbers from 0.
pub(super) const FIRST_STATIC: u32 = 1 << 30;

/// What a leaf declaration gives: rows (the others inferred), precision, values or init.
#[derive(Debug, Clone)]
pub struct LeafBuilder {
    graph: Graph,
    label: String,
    decl: LeafDecl,
    kind: LeafKind,
    /// The precision given, if any.
    precision: Option<Precision>,
    requires_grad: bool,
    window_axes: usize,
}

impl LeafBuilder {
    /// Gives the batch row exactly these axes, by size.
    pub fn batch(mut self, dims: impl IntoIterator<Item = usize>) -> LeafBuilder {
        self.decl = self.decl.batch(dims);
        self
    }

    /// Gives the input row exactly these axes, by size.
    pub fn input(mut self, dims: impl IntoIterator<Item = usize>) -> LeafBuilder {
        self.decl = self.decl.input(dims);
        self
    }

    /// Gives the output row exactly these axes, by size.
    pub fn output(mut self, dims: impl IntoIterator<Item = usize>) -> LeafBuilder {
        self.decl = self.decl.output(dims);
        self
    }

    /// Every row exactly as a shape literal gives it (`"32|->2"`, `"2,3"`, `"|5->@rgb"`).
    pub fn shape(self, literal: &str) -> LeafBuilder {
        match rcannl_shape::spec::parse_shape_literal(literal) {
            Ok(literal) => self.rows_of(&literal),
            Err(e) => {
                self.graph.record(error(format!(
                    "leaf '{}': bad shape literal {literal:?}: {e}",
                    self.label
                )));
                self
            }
        }
    }

    /// Every row exactly as a parsed shape literal gives it, bases included.
    pub(crate) fn rows_of(mut self, literal: &ShapeLiteral) -> LeafBuilder {
        let is_param = matches!(self.kind, LeafKind::Param(_));
        let mut decl = LeafDecl::literal(literal);
        if is_param {
            decl = decl.as_param();
        }
        // Values given before the rows still constrain them (`.values(v).shape("2")`).
        if let LeafKind::Data(DataStart::Values(values)) | LeafKind::Param(Init::Values(values)) =
            &self.kind
        {
            decl = decl.init(TerminalInit::NElements(values.len()));
        }
        self.decl = decl;
        self
    }

    /// The precision of the tensor's cells. Without it (or given `None`), a parameter or data
    /// tensor holds what its users compute in, and another leaf the graph's default precision
    /// (see [`crate::graph::precision`]).
    pub fn precision(mut self, precision: impl Into<Option<Precision>>) -> LeafBuilder {
        self.precision = precision.into();
        self
    }

    /// The values (row-major in memory order: batch, output, input): their number constrains
    /// the shape.
    pub fn values(mut self, values: Vec<f64>) -> LeafBuilder {
        self.decl = self.decl.init(TerminalInit::NElements(values.len()));
        self.kind = match self.kind {
            LeafKind::Param(_) => LeafKind::Param(Init::Values(values)),
            _ => LeafKind::Data(DataStart::Values(values)),
        };
        self
    }

    /// How a parameter starts (see [`Init`]). Bounds, means and deviations must be finite, a
    /// uniform range not empty (`low < high`) and a deviation not negative.
    ///
    /// A data tensor starts from [`Init::Constant`] or [`Init::Values`]: a constant fills every
    /// cell of the shape inference gives it, when a context first holds it, so that state
    /// declared with no shape (an optimizer's moments, `m =: beta * m + …` in `cd!`) starts at
    /// zero. It is set once, as given values are; routines then change it. Any other init of a
    /// data tensor is an error (random draws are for parameters).
    pub fn init(mut self, init: Init) -> LeafBuilder {
        let kind = match self.kind {
            LeafKind::Param(_) => "parameter",
            _ => "data tensor",
        };
        if let Some(problem) = init.problem() {
            self.graph.record(error(format!(
                "{kind} '{}': {init:?} {problem}",
                self.label
            )));
        }
        if let Init::Values(values) = &init {
            self.decl = self.decl.init(TerminalInit::NElements(values.len()));
        }
        self.kind = match (self.kind, init) {
            (LeafKind::Param(_), init) => LeafKind::Param(init),
            (LeafKind::Data(_), Init::Constant(c)) => LeafKind::Data(DataStart::Fill(c)),
            (LeafKind::Data(_), Init::Values(values)) => LeafKind::Data(DataStart::Values(values)),
            (kind, init) => {
                self.graph.record(error(format!(
                    "data tensor '{}': {init:?}: a data tensor starts from values or a constant \
                     (Init::Values, Init::Constant); random draws are for parameters",
                    self.label
                )));
                kind
            }
        };
        self
    }

    /// Declares the parameter's first `axes` input axes a convolution's window (`kh, kw` of a
    /// kernel `|kh, kw, c -> d`): the fan-based inits count them in the fan-out too, as PyTorch
    /// does (`torch.nn.init._calculate_fan_in_and_fan_out` multiplies both fans by the
    /// window's size), so that a `|3, 3, 64 -> 128` kernel has fan-in 3·3·64 and fan-out
    /// 128·3·3. The fan-in is every input axis, window or not. See
    /// [`Context::fans`](crate::Context::fans).
    pub fn window_axes(mut self, axes: usize) -> LeafBuilder {
        self.window_axes = axes;
        self
    }

    /// A data tensor that takes a gradient: backprop computes the gradient of the loss with
    /// respect to it (a saliency map, an adversarial direction), read with
    /// [`Context::grad`](crate::Context::grad). Parameters always take one.
    pub fn requires_grad(mut self) -> LeafBuilder {
        self.requires_grad = true;
        self
    }

    /// Declares the leaf and returns its tensor. A problem found on the way (a bad shape literal,
    /// an invalid init, a number of values the given rows cannot hold) is recorded in the graph and
    /// reported by [`Graph::check`].
    pub fn build(self) -> Tensor {
        let differentiable = self.requires_grad || matches!(self.kind, LeafKind::Param(_));
        let expr = match &self.kind {
            LeafKind::Param(Init::Expr(e)) => Some(e.clone()),
            _ => None,
        };
        let rule = match (self.precision, &self.kind) {
            (Some(precision), _) => PrecisionRule::Given(precision),
            (None, LeafKind::Param(_) | LeafKind::Data(_)) => PrecisionRule::FromUsers,
            (None, _) => PrecisionRule::Default,
        };
        let t = self
            .graph
            .leaf(&self.label, self.decl, self.kind, rule, differentiable);
        if let Some(e) = expr {
            // The expression's cells become the parameter's, in memory order.
            self.graph.same_shape(&t, &e);
        }
        if self.window_axes > 0 {
            let mut state = self.graph.state.lock();
            state.window_axes.insert(t.index, self.window_axes);
        }
        t
    }
}

impl Graph {
    /// A data tensor: values from the host; rows not given are inferred.
    pub fn data(&self, label: &str) -> LeafBuilder {
        self.builder(label, LeafDecl::data(), LeafKind::Data(DataStart::Unset))
    }

    /// A parameter: no batch axes; sizes not given come from its uses (and are never guessed).
    pub fn param(&self, label: &str) -> LeafBuilder {
        self.builder(label, LeafDecl::param(), LeafKind::Param(Init::Default))
    }

    pub(super) fn builder(&self, label: &str, decl: LeafDecl, kind: LeafKind) -> LeafBuilder {
        LeafBuilder {
            graph: self.clone(),
            label: label.to_owned(),
            decl,
            kind,
            precision: None,
            requires_grad: false,
            window_axes: 0,
        }
    }

    /// A constant, broadcast wherever it is used, held in the graph's default precision (f32
    /// unless [`Graph::set_default_precision`] says otherwise; see [`Graph::number_in`]).
    pub fn number(&self, value: f64) -> Tensor {
        self.constant_leaf(value, PrecisionRule::Default)
    }

    /// A constant held in `precision`, broadcast wherever it is used.
    pub fn number_in(&self, value: f64, precision: Precision) -> Tensor {
        self.constant_leaf(value, PrecisionRule::Given(precision))
    }

    fn constant_leaf(&self, value: f64, precision: PrecisionRule) -> Tensor {
        self.leaf(
            &format!("{value}"),
            one_cell(),
            LeafKind::Constant(value),
            precision,
            false,
        )
    }

    /// A tensor whose cells hold their own offsets (row-major), of the shape its uses give.
    pub fn range_of_shape(&self, label: &str) -> LeafBuilder {
        self.builder(label, LeafDecl::data(), LeafKind::RangeOverOffsets)
    }

    /// `0, 1, …, n−1` as one output axis.
    pub fn range(&self, n: usize) -> Tensor {
        self.leaf(
            &format!("range {n}"),
            LeafDecl::data()
                .batch([0usize; 0])
                .input([0usize; 0])
                .output([n]),
            LeafKind::RangeOverOffsets,
            PrecisionRule::Default,
            false,
        )
    }

    /// A tensor holding its own id in every cell, as 128-bit words (the key of its random bits).
    pub fn embed_self_id(&self, label: &str) -> Tensor {
        self.leaf(
            label,
            one_cell(),
            LeafKind::SelfId,
            Precision::Uint4x32,
            false,
        )
    }

    /// The random seed of the context running the graph, as a 128-bit word (the key of every
    /// random draw, with the drawing tensor's id).
    pub fn seed(&self) -> Tensor {
        self.leaf(
            "seed",
            one_cell(),
            LeafKind::Seed,
            Precision::Uint4x32,
            false,
        )
    }

    /// A tensor of one cell holding the value of the static index `symbol` when a routine runs
    /// ([`Graph::embed_static`] of an index without a range), in its users' precision.
    pub(crate) fn static_leaf(&self, label: &str, symbol: Symbol) -> Tensor {
        self.leaf(
            label,
            one_cell(),
            LeafKind::Static(symbol),
            PrecisionRule::FromUsers,
            false,
        )
    }

    /// A new static index: a position chosen when a routine runs (the batch of a training step).
    /// A tensor sliced at it may have any number of positions on its sliced axis.
    pub fn static_index(&self) -> StaticIndex {
        self.new_static_index(None)
    }

    /// A new static index over the positions `0..range`: a tensor sliced at it has exactly
    /// `range` positions on its sliced axis (shape inference gives that axis this size). A range
    /// of 0 has no position to choose, an error.
    pub fn static_index_with_range(&self, range: usize) -> StaticIndex {
        if range == 0 {
            self.record(error(
                "static index: a range of 0 positions has no position to choose",
            ));
        }
        self.new_static_index(Some(range))
    }

    fn new_static_index(&self, range: Option<usize>) -> StaticIndex {
        let mut state = self.state.lock();
        let symbol = Symbol(FIRST_STATIC + state.next_static);
        state.next_static += 1;
        StaticIndex {
            symbol,
            graph: state.id,
            range,
        }
    }

    pub(crate) fn leaf(
        &self,
        label: &str,
        decl: LeafDecl,
        kind: LeafKind,
        precision: impl Into<PrecisionRule>,
        differentiable: bool,
    ) -> Tensor {
        let precision_rule = precision.into();
        let mut state = self.state.lock();
        let index = state.tensors.len();
        let (shape, failed) = match state.inference.leaf(label, decl.clone()) {
            Ok(shape) => (shape, None),
            Err(e) => {
                let e = state.locate(TensorError::from(e));
                state.errors.push(e.clone());
                // A stand-in so that the tensor has a shape to point at.
                let shape = state
                    .inference
                    .leaf(label, LeafDecl::data())
                    .expect("an unconstrained leaf always fits");
                (shape, Some(e))
            }
        };
        let precision = state.provisional_precision(precision_rule, &[]);
        state.tensors.push(TensorData {
            label: label.to_owned(),
            shape,
            precision,
            precision_rule,
            precision_from: Vec::new(),
            precision_users: Vec::new(),
            written_from: Vec::new(),
            grad_precision: None,
            grad_resolved: None,
            leaf: Some(kind),
            differentiable,
            failed,
            op: None,
        });
        state.note_site(index);
        drop(state);
        Tensor {
            graph: self.clone(),
            index,
        }
    }
}

/// A position chosen when a routine runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StaticIndex {
    pub(crate) symbol: Symbol,
    /// The identity of the graph that made it.
    pub(crate) graph: u64,
    /// The number of positions it ranges over, when fixed.
    pub(crate) range: Option<usize>,
}

/// The declaration of a leaf of one cell that broadcasts wherever it is used: no batch or input
/// axes, one output axis of size 1.
fn one_cell() -> LeafDecl {
    LeafDecl::data()
        .batch([0usize; 0])
        .input([0usize; 0])
        .output([Dim::Unit])
}
