//! The graph: every tensor and operation of one model, the shape inference session they feed,
//! and the assignments (forward and gradient) each operation contributes.
//!
//! A [`Graph`] is a cheap handle to shared state, so that tensors can carry it and operator sugar
//! (`&a + &b`) can record operations. Nothing is global: two graphs share nothing. The state sits
//! behind a lock (`shared`), so graphs and tensors are `Send` and `Sync`: a model built on one
//! thread can be trained on another, and threads can build on one graph at once.
//!
//! Errors never panic: an operation whose shapes cannot agree records the error and returns a
//! tensor marked as failed; everything built on a failed tensor fails too, and the first error is
//! returned when the graph is compiled ([`Graph::check`]). Every method that builds an operation
//! also has a form returning `Result` (`try_…`) for callers who want the error at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use rcannl_ir::{Binop, Expr, Precision, Slot, Symbol, Ternop, Unop, VecUnop};
use rcannl_shape::logic::{Logic, TerminalInit};
use rcannl_shape::term::Dim;
use rcannl_shape::{Inference, LeafDecl, OpId, ShapeError, TensorId};

use crate::capture::PathSteps;
use crate::shared::SharedState;
use crate::tensor::Tensor;

/// An error of the tensor library: a shape problem (with the operation, its tensors and their
/// shapes), a use of a failed tensor, a compilation or run failure.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorError {
    /// What went wrong, with the operation, tensors and shapes concerned.
    pub message: String,
}

impl std::fmt::Display for TensorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TensorError {}

impl From<ShapeError> for TensorError {
    fn from(error: ShapeError) -> TensorError {
        TensorError {
            message: error.to_string(),
        }
    }
}

pub(crate) fn error(message: impl Into<String>) -> TensorError {
    TensorError {
        message: message.into(),
    }
}

/// The error of a tensor used with a graph it does not belong to.
pub(crate) fn foreign(context: &str, t: &Tensor) -> TensorError {
    // A tensor standing for an error made with no graph to hold it (an operation given no
    // operands) is foreign to every graph; its error is what the user needs to read.
    let carried = t
        .graph
        .state
        .lock()
        .tensors
        .get(t.index)
        .and_then(|d| d.failed.clone());
    if let Some(e) = carried {
        return e;
    }
    error(format!(
        "{context}: tensor '{}' belongs to another graph (tensors of different graphs cannot be \
         mixed)",
        t.label()
    ))
}

/// How a parameter starts. The fan-based schemes read the parameter's inferred shape: its
/// fan-in is the number of its input cells (the product of its input axes), its fan-out the
/// number of its output cells; a parameter without input axes (a bias) starts at 0 under them.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Init {
    /// The graph's default ([`Graph::set_default_init`]), [`Init::LecunUniform`] unless changed.
    #[default]
    Default,
    /// Uniform in `[-√(3/fan_in), √(3/fan_in))`: variance `1/fan_in`.
    LecunUniform,
    /// Kaiming (He) uniform for layers followed by ReLU: `[-√(6/fan_in), √(6/fan_in))`,
    /// variance `2/fan_in`.
    KaimingUniform,
    /// Kaiming (He) normal for layers followed by ReLU: deviation `√(2/fan_in)`.
    KaimingNormal,
    /// Xavier (Glorot) uniform: `[-√(6/(fan_in + fan_out)), √(6/(fan_in + fan_out)))`.
    XavierUniform,
    /// Xavier (Glorot) normal: deviation `√(2/(fan_in + fan_out))`.
    XavierNormal,
    /// Uniform in `[low, high)`.
    Uniform(f64, f64),
    /// Normal with this mean and standard deviation (Box–Muller).
    Normal(f64, f64),
    /// Every cell holds this value.
    Constant(f64),
    /// These values, row-major in memory order.
    Values(Vec<f64>),
    /// The values of a tensor expression of the graph, computed when the parameter is
    /// initialized (after every parameter initialized otherwise, so that it may read them); it
    /// has the parameter's shape.
    Expr(Tensor),
}

/// How a parameter's values are drawn, once the graph's default is resolved and its fan-in and
/// fan-out are known.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Draw {
    Fill(f64),
    Uniform(f64, f64),
    Normal(f64, f64),
    Values(Vec<f64>),
    Expr(Tensor),
}

impl Init {
    /// What makes the init meaningless, if anything.
    fn problem(&self) -> Option<&'static str> {
        match *self {
            Init::Uniform(low, high) if !(low.is_finite() && high.is_finite()) => {
                Some("needs finite bounds")
            }
            Init::Uniform(low, high) if low >= high => Some("needs low < high"),
            Init::Normal(mean, std) if !(mean.is_finite() && std.is_finite()) => {
                Some("needs a finite mean and deviation")
            }
            Init::Normal(_, std) if std < 0.0 => Some("needs a deviation of at least 0"),
            Init::Constant(c) if !c.is_finite() => Some("needs a finite value"),
            _ => None,
        }
    }

    /// The draw of a parameter with this init (`Default` resolved to `default`), `fan_in` input
    /// cells and `fan_out` output cells.
    pub(crate) fn draw(&self, default: &Init, fan_in: usize, fan_out: usize) -> Draw {
        let scheme = |scale: f64, fans: usize, normal: bool| {
            if fan_in == 0 {
                return Draw::Fill(0.0);
            }
            let variance = scale / fans as f64;
            if normal {
                Draw::Normal(0.0, variance.sqrt())
            } else {
                let bound = (3.0 * variance).sqrt();
                Draw::Uniform(-bound, bound)
            }
        };
        match self {
            Init::Default if *default == Init::Default => {
                Init::LecunUniform.draw(default, fan_in, fan_out)
            }
            Init::Default => default.draw(&Init::LecunUniform, fan_in, fan_out),
            Init::LecunUniform => scheme(1.0, fan_in, false),
            Init::KaimingUniform => scheme(2.0, fan_in, false),
            Init::KaimingNormal => scheme(2.0, fan_in, true),
            Init::XavierUniform => scheme(2.0, fan_in + fan_out, false),
            Init::XavierNormal => scheme(2.0, fan_in + fan_out, true),
            Init::Uniform(low, high) => Draw::Uniform(*low, *high),
            Init::Normal(mean, std) => Draw::Normal(*mean, *std),
            Init::Constant(c) => Draw::Fill(*c),
            Init::Values(values) => Draw::Values(values.clone()),
            Init::Expr(t) => Draw::Expr(t.clone()),
        }
    }
}

/// Where a leaf's values come from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LeafKind {
    /// Set from the host (given at creation, or later through a context).
    Data(Option<Vec<f64>>),
    /// Every cell holds the constant.
    Constant(f64),
    /// A parameter, initialized once per context.
    Param(Init),
    /// Every cell holds its own offset.
    RangeOverOffsets,
    /// Every cell holds the tensor's id.
    SelfId,
    /// Every cell holds a captured dimension's size.
    Dim(crate::capture::Capture),
    /// The context's random seed, as a 128-bit word.
    Seed,
}

/// A tensor's value or its gradient.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ref {
    /// The value of the graph's tensor with this index (tensors are numbered in order of creation).
    Value(usize),
    /// The gradient of the graph's tensor with this index.
    Grad(usize),
}

/// The right-hand side of an assignment over tensor references.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AsgRhs {
    Unop(Unop, Ref),
    Binop(Binop, Ref, Ref),
    Ternop(Ternop, Ref, Ref, Ref),
    /// Concatenation: the sources through `op`.
    Block(Unop, Vec<Ref>),
    /// A concatenation's gradient: `source` scattered into the targets (the lhs is unused).
    RevSides(Unop, Ref, Vec<Ref>),
    /// An expression over these operands.
    Expr(Expr, Vec<Ref>),
    /// One 128-bit word fanned out into consecutive cells.
    SetVec(VecUnop, Ref),
    /// A gather: the table's rows (read map 0) the ids (read map 1) select.
    Gather(Ref, Ref),
    /// A gather's gradient over the gather's own record: the source (read through the written
    /// map) added into the rows of the lhs (read map 0) the ids (read map 1) select.
    ScatterAdd(Ref, Ref),
}

/// Where an assignment's projections come from: an operation of the inference session, read as
/// is or through a slot permutation (a gradient reads the forward operation's record with the
/// roles of its tensors exchanged).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProjSource {
    pub op: OpId,
    pub view: Option<(Slot, Vec<Slot>)>,
    /// The static index a batch slice reads its axis at.
    pub slice: Option<Symbol>,
}

/// An assignment over tensor references.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Asg {
    pub lhs: Ref,
    pub initialize_neutral: bool,
    pub accum: Binop,
    pub rhs: AsgRhs,
    pub projections: ProjSource,
}

#[derive(Debug, Clone)]
pub(crate) struct TensorData {
    pub label: String,
    /// The tensor in the inference session.
    pub shape: TensorId,
    pub precision: Precision,
    /// `None` for a computed tensor.
    pub leaf: Option<LeafKind>,
    /// Whether gradients flow into it: parameters and what is computed from them.
    pub differentiable: bool,
    /// The first error on the way to this tensor, if any.
    pub failed: Option<TensorError>,
    /// The operation computing it (for computed tensors).
    pub op: Option<usize>,
}

/// An operation: the assignments computing its result, and those accumulating its operands'
/// gradients, in order.
#[derive(Debug, Clone)]
pub(crate) struct OpData {
    pub result: usize,
    pub operands: Vec<usize>,
    pub forward: Vec<Asg>,
    pub backward: Vec<Asg>,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    /// The graph's identity: what static indices and captures carry to be told apart from
    /// another graph's.
    pub id: u64,
    pub inference: Inference,
    pub tensors: Vec<TensorData>,
    pub ops: Vec<OpData>,
    pub errors: Vec<TensorError>,
    pub next_static: u32,
    /// Constraints put on captured dimensions: they change shapes without adding operations.
    pub captured_constraints: usize,
    /// For each tensor an einsum made along a contraction path (by tensor index), where its
    /// spec's names are captured besides the last step.
    pub path_steps: HashMap<usize, PathSteps>,
    /// What [`Init::Default`] means in this graph.
    pub default_init: Init,
    /// For each tensor `Tensor::one_hot` made (by tensor index), its ids and vocabulary, so
    /// that a composition with it becomes a gather.
    pub one_hots: HashMap<usize, crate::gather::OneHot>,
    /// The source position (`file:line:column`) of the `op!`/`cd!` expression building tensors
    /// now, if any: errors found meanwhile point back at it.
    pub site: Option<&'static str>,
    /// For each tensor built under a site (by tensor index), that site, so that an error found
    /// when a context closes the shapes points back at it too.
    pub sites: HashMap<usize, &'static str>,
    /// The parameters of each function `op!` defined without configuration arguments (by the
    /// definition's key), as tensor indices: created at its first application on the graph.
    pub shared_params: HashMap<&'static str, Vec<usize>>,
    /// The updates every training step runs whose loss depends on a tensor (by index): a
    /// model's state following the data the step computed.
    pub step_updates: Vec<(usize, Vec<crate::define::LoweredUpdate>)>,
    /// The tensors registered as the model's state besides its parameters (by index, in order).
    pub state_tensors: Vec<usize>,
}

impl State {
    /// `e`, pointing back at the source position of the expression being built, if any.
    pub(crate) fn locate(&self, e: TensorError) -> TensorError {
        match self.site {
            Some(site) => written_at(e, site),
            None => e,
        }
    }

    /// Remembers that tensor `index` was built under the current site.
    fn note_site(&mut self, index: usize) {
        if let Some(site) = self.site {
            self.sites.insert(index, site);
        }
    }

    /// `e`, found after building (when a context closes the shapes), pointing back at the
    /// source position of the first tensor it names that a macro built.
    pub(crate) fn locate_later(&self, e: ShapeError) -> TensorError {
        // The tensors the error lists, then those its notes quote (`parameter 'w'`).
        let quoted = e
            .notes
            .iter()
            .flat_map(|note| note.split('\'').skip(1).step_by(2))
            .map(str::to_owned);
        let labels: Vec<String> = e
            .tensors
            .iter()
            .map(|t| t.label.clone())
            .chain(quoted)
            .collect();
        let site = labels.iter().find_map(|label| {
            self.tensors
                .iter()
                .enumerate()
                .filter(|(_, data)| data.label == *label)
                .find_map(|(index, _)| self.sites.get(&index))
        });
        let e = TensorError::from(e);
        match site {
            Some(site) => written_at(e, site),
            None => e,
        }
    }
}

/// `e`, naming the source position of the expression it was found in (once).
fn written_at(e: TensorError, site: &str) -> TensorError {
    if e.message.contains(site) {
        return e;
    }
    TensorError {
        message: format!("{}\n  (in the expression written at {site})", e.message),
    }
}

/// Static symbols live far above the iterators projection inference numbers from 0.
const FIRST_STATIC: u32 = 1 << 30;

/// A model's tensors and operations.
///
/// Tensors, static indices and captures belong to the graph that made them: handing one to
/// another graph (or to a context of another graph) is an error naming it, never a stand-in for
/// the other graph's tensor of the same number.
#[derive(Debug, Clone)]
pub struct Graph {
    pub(crate) state: SharedState,
}

/// Identities of graphs, unique in the process.
static NEXT_GRAPH_ID: AtomicU64 = AtomicU64::new(0);

impl Default for Graph {
    fn default() -> Graph {
        let state = State {
            id: NEXT_GRAPH_ID.fetch_add(1, Ordering::Relaxed),
            ..State::default()
        };
        Graph {
            state: SharedState::new(state),
        }
    }
}

/// What a leaf declaration gives: rows (the others inferred), precision, values or init.
#[derive(Debug, Clone)]
pub struct LeafBuilder {
    graph: Graph,
    label: String,
    decl: LeafDecl,
    kind: LeafKind,
    precision: Precision,
    requires_grad: bool,
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
    pub fn shape(mut self, literal: &str) -> LeafBuilder {
        match rcannl_shape::spec::parse_shape_literal(literal) {
            Ok(literal) => {
                let is_param = matches!(self.kind, LeafKind::Param(_));
                let mut decl = LeafDecl::literal(&literal);
                if is_param {
                    decl = decl.as_param();
                }
                self.decl = decl;
            }
            Err(e) => self.graph.record(error(format!(
                "leaf '{}': bad shape literal {literal:?}: {e}",
                self.label
            ))),
        }
        self
    }

    /// The precision of the tensor's cells (default `Precision::F32`).
    pub fn precision(mut self, precision: Precision) -> LeafBuilder {
        self.precision = precision;
        self
    }

    /// The values (row-major in memory order: batch, output, input): their number constrains
    /// the shape.
    pub fn values(mut self, values: Vec<f64>) -> LeafBuilder {
        self.decl = self.decl.init(TerminalInit::NElements(values.len()));
        self.kind = match self.kind {
            LeafKind::Param(_) => LeafKind::Param(Init::Values(values)),
            _ => LeafKind::Data(Some(values)),
        };
        self
    }

    /// How a parameter starts (see [`Init`]). Bounds, means and deviations must be finite, a
    /// uniform range not empty (`low < high`) and a deviation not negative.
    pub fn init(mut self, init: Init) -> LeafBuilder {
        if let Some(problem) = init.problem() {
            self.graph.record(error(format!(
                "parameter '{}': {init:?} {problem}",
                self.label
            )));
        }
        if let Init::Values(values) = &init {
            self.decl = self.decl.init(TerminalInit::NElements(values.len()));
        }
        if matches!(self.kind, LeafKind::Param(_)) {
            self.kind = LeafKind::Param(init);
        }
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
        let t = self.graph.leaf(
            &self.label,
            self.decl,
            self.kind,
            self.precision,
            differentiable,
        );
        if let Some(e) = expr {
            // The expression's cells become the parameter's, in memory order.
            self.graph.same_shape(&t, &e);
        }
        t
    }
}

impl Graph {
    /// An empty graph, sharing nothing with any other, whose parameters start from
    /// [`Init::LecunUniform`] unless [`Graph::set_default_init`] changes it.
    pub fn new() -> Graph {
        Graph::default()
    }

    /// A data tensor: values from the host; rows not given are inferred.
    pub fn data(&self, label: &str) -> LeafBuilder {
        self.builder(label, LeafDecl::data(), LeafKind::Data(None))
    }

    /// A parameter: no batch axes; sizes not given come from its uses (and are never guessed).
    pub fn param(&self, label: &str) -> LeafBuilder {
        self.builder(label, LeafDecl::param(), LeafKind::Param(Init::Default))
    }

    fn builder(&self, label: &str, decl: LeafDecl, kind: LeafKind) -> LeafBuilder {
        LeafBuilder {
            graph: self.clone(),
            label: label.to_owned(),
            decl,
            kind,
            precision: Precision::F32,
            requires_grad: false,
        }
    }

    /// A constant, broadcast wherever it is used, held in f32 (see [`Graph::number_in`]).
    pub fn number(&self, value: f64) -> Tensor {
        self.number_in(value, Precision::F32)
    }

    /// A constant held in `precision`, broadcast wherever it is used.
    pub fn number_in(&self, value: f64, precision: Precision) -> Tensor {
        self.leaf(
            &format!("{value}"),
            LeafDecl::data()
                .batch([0usize; 0])
                .input([0usize; 0])
                .output([Dim::Unit]),
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
            Precision::F32,
            false,
        )
    }

    /// A tensor holding its own id in every cell, as 128-bit words (the key of its random bits).
    pub fn embed_self_id(&self, label: &str) -> Tensor {
        self.leaf(
            label,
            LeafDecl::data()
                .batch([0usize; 0])
                .input([0usize; 0])
                .output([Dim::Unit]),
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
            LeafDecl::data()
                .batch([0usize; 0])
                .input([0usize; 0])
                .output([Dim::Unit]),
            LeafKind::Seed,
            Precision::Uint4x32,
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

    /// The graph's identity (see [`State::id`]).
    pub(crate) fn id(&self) -> u64 {
        self.state.lock().id
    }

    /// Whether `t` is a tensor of this graph.
    pub(crate) fn owns(&self, t: &Tensor) -> bool {
        self.state.same(&t.graph.state)
    }

    /// An error unless every tensor of `tensors` belongs to this graph; `context` names what
    /// was asked (an operation, a routine).
    pub(crate) fn check_owns(&self, context: &str, tensors: &[&Tensor]) -> Result<(), TensorError> {
        match tensors.iter().find(|t| !self.owns(t)) {
            None => Ok(()),
            Some(t) => Err(foreign(context, t)),
        }
    }

    pub(crate) fn leaf(
        &self,
        label: &str,
        decl: LeafDecl,
        kind: LeafKind,
        precision: Precision,
        differentiable: bool,
    ) -> Tensor {
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
        state.tensors.push(TensorData {
            label: label.to_owned(),
            shape,
            precision,
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

    /// Runs `build` with `site` (a `file:line:column` of the source) as the position that
    /// errors found meanwhile, and later about the tensors built meanwhile, point back at. The
    /// `op!` and `cd!` macros build every operation under the position of its operator.
    pub fn at_site<R>(&self, site: &'static str, build: impl FnOnce() -> R) -> R {
        let outer = self.state.lock().site.replace(site);
        let result = build();
        self.state.lock().site = outer;
        result
    }

    /// Records an error found outside any operation (a bad literal).
    pub(crate) fn record(&self, e: TensorError) {
        let mut state = self.state.lock();
        let e = state.locate(e);
        state.errors.push(e);
    }

    /// Makes `init` what parameters built without an init of their own ([`Init::Default`]) start
    /// from, in every context initializing them from now on: `Init::KaimingUniform` for a ReLU
    /// network, say. Per-parameter inits (values, an expression) are no default: an error.
    pub fn set_default_init(&self, init: Init) {
        if matches!(init, Init::Values(_) | Init::Expr(_)) {
            self.record(error(format!(
                "set_default_init: {init:?} is one parameter's init, not a default for every one"
            )));
            return;
        }
        if let Some(problem) = init.problem() {
            self.record(error(format!("set_default_init: {init:?} {problem}")));
            return;
        }
        self.state.lock().default_init = init;
    }

    /// Every parameter of the graph, in creation order.
    pub fn params(&self) -> Vec<Tensor> {
        let state = self.state.lock();
        state
            .tensors
            .iter()
            .enumerate()
            .filter(|(_, data)| matches!(data.leaf, Some(LeafKind::Param(_))))
            .map(|(index, _)| Tensor {
                graph: self.clone(),
                index,
            })
            .collect()
    }

    /// Runs `updates` in every training step whose loss depends on `anchor` — in the routine of
    /// [`Context::backprop`](crate::Context::backprop) or
    /// [`Context::train_step`](crate::Context::train_step) that computes it, after the
    /// gradients — and in no other routine. This is how a block keeps state that follows the
    /// data (batch normalization's running statistics): it is updated exactly by the batches a
    /// step normalized, with nothing for the user to hand to the optimizer, and never from an
    /// application a step does not compute. The targets become the model's state
    /// ([`Graph::state_tensors`]), which checkpoints save with the parameters.
    ///
    /// A problem with an update (a tensor of another graph, a formula reading no tensor) is
    /// recorded in the graph, as a failed operation's is, and reported by [`Graph::check`].
    pub fn update_in_steps(&self, anchor: &Tensor, updates: &[crate::Update]) {
        let mut tensors = vec![anchor];
        for update in updates {
            tensors.push(&update.target);
            tensors.extend(update.formula.tensors());
        }
        if let Err(e) = self.check_owns("update_in_steps", &tensors) {
            self.record(e);
            return;
        }
        let lowered: Result<Vec<_>, TensorError> =
            updates.iter().map(crate::Update::lower_update).collect();
        match lowered {
            Ok(lowered) => {
                for update in &lowered {
                    self.register_state_index(update.target);
                }
                self.state.lock().step_updates.push((anchor.index, lowered));
            }
            Err(e) => self.record(e),
        }
    }

    /// Registers `t` as part of the model's state besides its parameters (PyTorch's
    /// `register_buffer`): [`Graph::state_tensors`] lists it, so checkpoints save and load it
    /// with the parameters. Blocks register their state when they are made (batch
    /// normalization its running statistics), so that a graph applying them only for
    /// evaluation loads it too.
    pub fn register_state(&self, t: &Tensor) {
        match self.check_owns("register_state", &[t]) {
            Ok(()) => self.register_state_index(t.index),
            Err(e) => self.record(e),
        }
    }

    fn register_state_index(&self, index: usize) {
        let mut state = self.state.lock();
        if !state.state_tensors.contains(&index) {
            state.state_tensors.push(index);
        }
    }

    /// The model's state besides its parameters: the tensors registered with
    /// [`Graph::register_state`] and those the updates of [`Graph::update_in_steps`] write, in
    /// the order they came, each once.
    pub fn state_tensors(&self) -> Vec<Tensor> {
        let indices = self.state.lock().state_tensors.clone();
        indices
            .into_iter()
            .map(|index| Tensor {
                graph: self.clone(),
                index,
            })
            .collect()
    }

    /// Whether `t` is a constant number (which `*` scales by instead of composing with).
    pub(crate) fn is_scalar_constant(&self, t: &Tensor) -> bool {
        matches!(
            self.state.lock().tensors[t.index].leaf,
            Some(LeafKind::Constant(_))
        )
    }

    /// The first error recorded while building the graph, if any.
    pub fn check(&self) -> Result<(), TensorError> {
        match self.state.lock().errors.first() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Creates the result of `logic` over `operands`: its shape related to theirs, its forward
    /// assignments and gradient assignments from the builders. The result is differentiable when
    /// an operand is and `differentiable` allows. It is labelled `name#n`, `n` its number.
    pub(crate) fn apply(
        &self,
        name: &str,
        logic: Logic,
        operands: &[&Tensor],
        op: OpSpec,
    ) -> Tensor {
        let label = format!("{name}#{}", self.state.lock().tensors.len());
        match self.try_apply(&label, logic, operands, op) {
            Ok(t) => t,
            Err(failed) => failed,
        }
    }

    /// [`Graph::apply`], with the error of a failed operation as `Err` of a failed tensor.
    fn try_apply(
        &self,
        label: &str,
        logic: Logic,
        operands: &[&Tensor],
        op: OpSpec,
    ) -> Result<Tensor, Tensor> {
        if let Err(e) = self.check_owns(&format!("operation '{label}'"), operands) {
            return Err(self.failed(e));
        }
        let mut state = self.state.lock();
        let indices: Vec<usize> = operands.iter().map(|t| t.index).collect();
        let precision = op.precision.unwrap_or_else(|| {
            indices
                .iter()
                .map(|&i| state.tensors[i].precision)
                .reduce(Precision::promote)
                .unwrap_or(Precision::F32)
        });
        let inherited = indices
            .iter()
            .find_map(|&i| state.tensors[i].failed.clone());
        let shapes: Vec<TensorId> = indices.iter().map(|&i| state.tensors[i].shape).collect();
        let related = match &inherited {
            Some(e) => Err(e.clone()),
            None => match state.inference.apply(label, logic.clone(), &shapes) {
                Ok(pair) => Ok(pair),
                Err(e) => Err(state.locate(TensorError::from(e))),
            },
        };
        let index = state.tensors.len();
        let (shape, shape_op) = match related {
            Ok(pair) => pair,
            Err(e) => {
                if inherited.is_none() {
                    state.errors.push(e.clone());
                }
                let shape = state
                    .inference
                    .leaf(label, LeafDecl::data())
                    .expect("an unconstrained leaf always fits");
                state.tensors.push(TensorData {
                    label: label.to_owned(),
                    shape,
                    precision,
                    leaf: None,
                    differentiable: false,
                    failed: Some(e),
                    op: None,
                });
                state.note_site(index);
                drop(state);
                return Err(Tensor {
                    graph: self.clone(),
                    index,
                });
            }
        };
        let differentiable =
            op.differentiable && indices.iter().any(|&i| state.tensors[i].differentiable);
        let op_index = state.ops.len();
        state.tensors.push(TensorData {
            label: label.to_owned(),
            shape,
            precision,
            leaf: None,
            differentiable,
            failed: None,
            op: Some(op_index),
        });
        state.note_site(index);
        let source = ProjSource {
            op: shape_op,
            view: None,
            slice: op.slice,
        };
        let (rhs, view) = op.rhs.forward(&indices);
        let forward = vec![Asg {
            lhs: Ref::Value(index),
            initialize_neutral: true,
            accum: op.accum,
            rhs,
            projections: ProjSource {
                view,
                ..source.clone()
            },
        }];
        state.ops.push(OpData {
            result: index,
            operands: indices.clone(),
            forward,
            backward: Vec::new(),
        });
        drop(state);
        if differentiable && let Some(gradient) = op.gradient {
            let mut builder = GradBuilder {
                graph: self,
                source,
                result: index,
                operands: indices,
                backward: Vec::new(),
            };
            if let Err(e) = gradient(&mut builder) {
                self.record(e);
            }
            let backward = builder.backward;
            self.state.lock().ops[op_index].backward = backward;
        }
        Ok(Tensor {
            graph: self.clone(),
            index,
        })
    }
}

impl Graph {
    /// Adds to the operation computing `result` one more assignment from `operands`, related by
    /// `logic` (an operation defined by several assignments, as `interleave` writes even and
    /// odd positions from two tensors). It accumulates into what the earlier ones wrote.
    pub(crate) fn also(&self, result: &Tensor, logic: Logic, operands: &[&Tensor], op: OpSpec) {
        let mut all = vec![result];
        all.extend_from_slice(operands);
        if let Err(e) = self.check_owns(&format!("operation '{}'", result.label()), &all) {
            self.record(e);
            return;
        }
        let mut state = self.state.lock();
        if state.tensors[result.index].failed.is_some() {
            return;
        }
        let Some(op_index) = state.tensors[result.index].op else {
            drop(state);
            self.record(error(format!(
                "'{}' is not computed by an operation",
                result.label()
            )));
            return;
        };
        let indices: Vec<usize> = operands.iter().map(|t| t.index).collect();
        if let Some(e) = indices
            .iter()
            .find_map(|&i| state.tensors[i].failed.clone())
        {
            state.tensors[result.index].failed = Some(e);
            return;
        }
        let shapes: Vec<TensorId> = indices.iter().map(|&i| state.tensors[i].shape).collect();
        let result_shape = state.tensors[result.index].shape;
        let shape_op = match state.inference.relate(logic, result_shape, &shapes) {
            Ok(op) => op,
            Err(e) => {
                let e = state.locate(TensorError::from(e));
                state.errors.push(e.clone());
                state.tensors[result.index].failed = Some(e);
                return;
            }
        };
        let source = ProjSource {
            op: shape_op,
            view: None,
            slice: op.slice,
        };
        let (rhs, view) = op.rhs.forward(&indices);
        let differentiable = indices.iter().any(|&i| state.tensors[i].differentiable);
        state.tensors[result.index].differentiable |= differentiable && op.differentiable;
        let data = &mut state.ops[op_index];
        data.forward.push(Asg {
            lhs: Ref::Value(result.index),
            initialize_neutral: false,
            accum: op.accum,
            rhs,
            projections: ProjSource {
                view,
                ..source.clone()
            },
        });
        data.operands.extend(indices.iter().copied());
        drop(state);
        if let (true, Some(gradient)) = (differentiable, op.gradient) {
            let mut builder = GradBuilder {
                graph: self,
                source,
                result: result.index,
                operands: indices,
                backward: Vec::new(),
            };
            if let Err(e) = gradient(&mut builder) {
                self.record(e);
            }
            let backward = builder.backward;
            self.state.lock().ops[op_index].backward.extend(backward);
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

/// The forward computation of an operation, over its result and operand slots.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Forward {
    Unop(Unop),
    Binop(Binop),
    Ternop(Ternop),
    Block(Unop),
    /// An expression over the operands in the slots given (each read through its map).
    Expr(Expr, Vec<Slot>),
    /// One word of the operand fanned out into consecutive cells of the result.
    SetVec(VecUnop),
    /// The rows of operand 0 that the ids of operand 1 select.
    Gather,
}

impl Forward {
    /// The right-hand side over the operands, and the slot view it reads the record through
    /// (`None`: as the record is).
    fn forward(&self, operands: &[usize]) -> (AsgRhs, Option<(Slot, Vec<Slot>)>) {
        let v = |i: usize| Ref::Value(operands[i]);
        let rhs = match self {
            Forward::Unop(op) => AsgRhs::Unop(*op, v(0)),
            Forward::Binop(op) => AsgRhs::Binop(*op, v(0), v(1)),
            Forward::Ternop(op) => AsgRhs::Ternop(*op, v(0), v(1), v(2)),
            Forward::Block(op) => {
                AsgRhs::Block(*op, operands.iter().map(|&t| Ref::Value(t)).collect())
            }
            Forward::SetVec(op) => AsgRhs::SetVec(*op, v(0)),
            Forward::Gather => AsgRhs::Gather(v(0), v(1)),
            Forward::Expr(expr, slots) => {
                let refs = slots
                    .iter()
                    .map(|slot| match slot {
                        Slot::Rhs(i) => v(*i),
                        Slot::Lhs => unreachable!("a forward formula reads operands only"),
                    })
                    .collect();
                return (
                    AsgRhs::Expr(expr.clone(), refs),
                    Some((Slot::Lhs, slots.clone())),
                );
            }
        };
        (rhs, None)
    }
}

/// Builds the gradient assignments of one operation.
pub(crate) type Gradient = Box<dyn FnOnce(&mut GradBuilder<'_>) -> Result<(), TensorError>>;

/// What an operation is, besides its shape logic.
pub(crate) struct OpSpec {
    pub accum: Binop,
    pub rhs: Forward,
    pub gradient: Option<Gradient>,
    pub differentiable: bool,
    /// The result's precision (else the operands', promoted).
    pub precision: Option<Precision>,
    pub slice: Option<Symbol>,
}

impl OpSpec {
    pub fn new(accum: Binop, rhs: Forward) -> OpSpec {
        OpSpec {
            accum,
            rhs,
            gradient: None,
            differentiable: true,
            precision: None,
            slice: None,
        }
    }

    pub fn gradient(
        mut self,
        gradient: impl FnOnce(&mut GradBuilder<'_>) -> Result<(), TensorError> + 'static,
    ) -> OpSpec {
        self.gradient = Some(Box::new(gradient));
        self
    }

    pub fn not_differentiable(mut self) -> OpSpec {
        self.differentiable = false;
        self
    }

    pub fn precision(mut self, precision: Precision) -> OpSpec {
        self.precision = Some(precision);
        self
    }

    pub fn slice(mut self, slice: Symbol) -> OpSpec {
        self.slice = Some(slice);
        self
    }
}

/// A tensor as a gradient assignment names it: a reference and the slot of the forward
/// operation's record whose index map reads it (result-shaped tensors read through the result's
/// map, operand-shaped ones through that operand's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Slotted {
    pub what: Ref,
    pub slot: Slot,
}

/// The builder gradient functions receive: the forward operation's tensors by slot, and ways to
/// accumulate into an operand's gradient through the forward record.
pub(crate) struct GradBuilder<'a> {
    graph: &'a Graph,
    source: ProjSource,
    result: usize,
    operands: Vec<usize>,
    backward: Vec<Asg>,
}

impl GradBuilder<'_> {
    /// The result's gradient (`g`), read through the result's map.
    pub fn g(&self) -> Slotted {
        Slotted {
            what: Ref::Grad(self.result),
            slot: Slot::Lhs,
        }
    }

    /// The result's value (`v`).
    pub fn v(&self) -> Slotted {
        Slotted {
            what: Ref::Value(self.result),
            slot: Slot::Lhs,
        }
    }

    /// Operand `i`'s value (`v1`, `v2`, … counting from 0).
    pub fn operand(&self, i: usize) -> Slotted {
        Slotted {
            what: Ref::Value(self.operands[i]),
            slot: Slot::Rhs(i),
        }
    }

    /// Whether operand `i` takes a gradient.
    pub fn wants(&self, i: usize) -> bool {
        self.graph.state.lock().tensors[self.operands[i]].differentiable
    }

    /// Scatters the result's gradient back into every operand's gradient through the forward
    /// record (a concatenation's gradient: each cell of the result came from one operand).
    pub fn scatter(&mut self) {
        let targets = self.operands.iter().map(|&t| Ref::Grad(t)).collect();
        self.backward.push(Asg {
            lhs: Ref::Grad(self.result),
            initialize_neutral: false,
            accum: Binop::Add,
            rhs: AsgRhs::RevSides(Unop::Identity, Ref::Grad(self.result), targets),
            projections: self.source.clone(),
        });
    }

    /// A gather's gradient: the result's gradient rows added into the rows of operand 0's
    /// gradient that the ids (operand 1, which takes none) select.
    pub fn scatter_rows(&mut self) {
        if !self.wants(0) {
            return;
        }
        self.backward.push(Asg {
            lhs: Ref::Grad(self.operands[0]),
            initialize_neutral: false,
            accum: Binop::Add,
            rhs: AsgRhs::ScatterAdd(Ref::Grad(self.result), Ref::Value(self.operands[1])),
            projections: self.source.clone(),
        });
    }

    /// `grad(operand i) ⟨accum⟩= rhs`, through the forward record with the slots exchanged.
    pub fn accumulate(&mut self, i: usize, accum: Binop, rhs: GradRhs) {
        if !self.wants(i) {
            return;
        }
        let (rhs, slots) = rhs.resolve();
        self.backward.push(Asg {
            lhs: Ref::Grad(self.operands[i]),
            initialize_neutral: false,
            accum,
            rhs,
            projections: ProjSource {
                view: Some((Slot::Rhs(i), slots)),
                ..self.source.clone()
            },
        });
    }
}

/// A gradient right-hand side: an operation over slotted tensors, or an expression over them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum GradRhs {
    Unop(Unop, Slotted),
    Binop(Binop, Slotted, Slotted),
    Ternop(Ternop, Slotted, Slotted, Slotted),
    Expr(Expr, Vec<Slotted>),
}

impl GradRhs {
    fn args(&self) -> Vec<Slotted> {
        match self {
            GradRhs::Unop(_, a) => vec![*a],
            GradRhs::Binop(_, a, b) => vec![*a, *b],
            GradRhs::Ternop(_, a, b, c) => vec![*a, *b, *c],
            GradRhs::Expr(_, args) => args.clone(),
        }
    }

    fn resolve(&self) -> (AsgRhs, Vec<Slot>) {
        let slots = self.args().iter().map(|a| a.slot).collect();
        let rhs = match self {
            GradRhs::Unop(op, a) => AsgRhs::Unop(*op, a.what),
            GradRhs::Binop(op, a, b) => AsgRhs::Binop(*op, a.what, b.what),
            GradRhs::Ternop(op, a, b, c) => AsgRhs::Ternop(*op, a.what, b.what, c.what),
            GradRhs::Expr(expr, args) => {
                AsgRhs::Expr(expr.clone(), args.iter().map(|a| a.what).collect())
            }
        };
        (rhs, slots)
    }
}
