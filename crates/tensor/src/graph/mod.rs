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

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};

use rcannl_ir::Precision;
use rcannl_shape::{Inference, ShapeError, TensorId};

use crate::shared::SharedState;
use crate::tensor::Tensor;

mod apply;
mod error;
mod extensions;
mod gradient;
mod init;
mod leaf;
mod memory;
pub mod precision;

use extensions::Extensions;

pub use apply::Ref;
pub(crate) use apply::{Asg, AsgRhs, Forward, OpSpec, ProjSource, spec_logic};
pub use error::{TensorError, TensorErrorKind};

pub(crate) use error::{error, error_of, foreign};
pub(crate) use gradient::{GradBuilder, GradRhs, Slotted};
pub use init::Init;
pub(crate) use init::{Draw, Random};
pub(crate) use leaf::{DataStart, LeafKind};
pub use leaf::{LeafBuilder, StaticIndex};
pub(crate) use precision::PrecisionRule;

#[derive(Debug, Clone)]
pub(crate) struct TensorData {
    pub label: String,
    /// The tensor in the inference session.
    pub shape: TensorId,
    /// The precision of its cells: as [`precision::resolve`] fixed it, or as far as known now.
    pub precision: Precision,
    /// Where that precision comes from.
    pub precision_rule: PrecisionRule,
    /// The operands a computed tensor's precision is promoted from, and that take theirs from
    /// it when they follow their users: every operand, none for an operation converting into a
    /// precision of its own (a cast, random bits), the table for a gather.
    pub precision_from: Vec<usize>,
    /// The tensors whose `precision_from` holds it: its users, whose needs it follows when it
    /// follows its users.
    pub precision_users: Vec<usize>,
    /// The tensors the updates into it read ([`Update::with_logic`],
    /// [`Update::with_default_logic`]): the precision a data tensor given none takes when no
    /// tensor is computed from it (an optimizer's state in the precision of its parameter).
    ///
    /// [`Update::with_logic`]: crate::Update::with_logic
    /// [`Update::with_default_logic`]: crate::Update::with_default_logic
    pub written_from: Vec<usize>,
    /// The precision chosen for its gradient, if any.
    pub grad_precision: Option<Precision>,
    /// Its gradient's precision as [`precision::resolve`] last fixed it, if it did.
    pub grad_resolved: Option<Precision>,
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
    /// What [`Init::Default`] means in this graph.
    pub default_init: Init,
    /// The precisions tensors take when nothing else gives them one.
    pub precision_defaults: precision::Defaults,
    /// The number of precision choices and default changes made so far: a context fixes
    /// precisions again when it changed.
    pub precision_changes: usize,
    /// Where in the user's source the tensors being built now come from, if known: an
    /// `op!`/`cd!` expression or a library call. Errors found meanwhile point back at it.
    pub site: Option<Site>,
    /// For each tensor built under a site (by tensor index), that site, so that an error found
    /// when a context closes the shapes points back at it too.
    pub sites: HashMap<usize, Site>,
    /// The parameters of each function `op!` defined without configuration arguments (by the
    /// definition's key), as tensor indices: created at its first application on the graph.
    pub shared_params: HashMap<&'static str, Vec<usize>>,
    /// The tensors registered as the model's state besides its parameters (by index, in order).
    pub state_tensors: Vec<usize>,
    /// The number of leading input axes that are a convolution's window, for the parameters
    /// declaring any (by tensor index): the fan-based inits count them in both fans.
    pub window_axes: HashMap<usize, usize>,
    /// The memory modes the user chose, by tensor index (see [`memory`]).
    pub memory_modes: HashMap<usize, rcannl_ir::MemoryMode>,
    /// What particular operations remember of the tensors they made.
    pub extensions: Extensions,
}

impl State {
    /// The ops computing `outputs` and the tensors they read, `outputs` included: what a
    /// routine computing `outputs` runs, and a model made of them holds.
    pub(crate) fn subgraph(&self, outputs: &[usize]) -> (BTreeSet<usize>, BTreeSet<usize>) {
        let mut tensors: BTreeSet<usize> = BTreeSet::new();
        let mut ops = BTreeSet::new();
        let mut stack: Vec<usize> = outputs.to_vec();
        while let Some(t) = stack.pop() {
            if !tensors.insert(t) {
                continue;
            }
            if let Some(op) = self.tensors[t].op
                && self.ops[op].result == t
            {
                ops.insert(op);
                stack.extend(self.ops[op].operands.iter().copied());
            }
        }
        (ops, tensors)
    }

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
            Some(site) => written_at(e, *site),
            None => e,
        }
    }
}

/// Where in the user's source tensors come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    /// An `op!` or `cd!` expression, at its `file:line:column`.
    Expression(&'static str),
    /// A library function (`nn::loss::cross_entropy`) called from the user's code, where it was
    /// called: the function is marked `#[track_caller]` and builds under [`Graph::called`].
    Call(&'static str, &'static Location<'static>),
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Site::Expression(at) => write!(f, "the expression written at {at}"),
            Site::Call(function, at) => write!(f, "{function}, called at {at}"),
        }
    }
}

/// `e`, naming where in the source it was found (once).
fn written_at(e: TensorError, site: Site) -> TensorError {
    let site = site.to_string();
    if e.message.contains(&site) {
        return e;
    }
    let message = format!("{}\n  (in {site})", e.message);
    e.reworded(message)
}

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

impl Tensor {
    /// The parameters the tensor is computed from, itself if it is one, in creation order: a
    /// model is the tensor it computes, and these are its parameters, whatever else the graph
    /// holds (another model, an optimizer's state). [`Context::init_params_of`] draws them
    /// again.
    ///
    /// [`Context::init_params_of`]: crate::Context::init_params_of
    pub fn params(&self) -> Vec<Tensor> {
        let state = self.graph.state.lock();
        let (_, tensors) = state.subgraph(&[self.index]);
        self.graph.params_among(&state, tensors)
    }
}

impl Default for Graph {
    fn default() -> Graph {
        let (precision_defaults, errors) = precision::Defaults::from_settings();
        let state = State {
            id: NEXT_GRAPH_ID.fetch_add(1, Ordering::Relaxed),
            precision_defaults,
            errors,
            ..State::default()
        };
        Graph {
            state: SharedState::new(state),
        }
    }
}

impl Graph {
    /// An empty graph, sharing nothing with any other, whose parameters start from
    /// [`Init::LecunUniform`] unless [`Graph::set_default_init`] changes it.
    pub fn new() -> Graph {
        Graph::default()
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

    /// Runs `build` with `site` (a `file:line:column` of the source) as the position that
    /// errors found meanwhile, and later about the tensors built meanwhile, point back at. The
    /// `op!` and `cd!` macros build every operation under the position of its operator.
    /// Inside a library function the user called ([`Graph::called`]), the call stays the site:
    /// the library's own expressions are not the user's.
    pub fn at_site<R>(&self, site: &'static str, build: impl FnOnce() -> R) -> R {
        self.under(Site::Expression(site), build)
    }

    /// Runs `build` as the library function `function` (`"nn::loss::cross_entropy"`), called
    /// from where its caller was called: errors found meanwhile, and later about the tensors
    /// built meanwhile, name the function and the user's file, line and column. The function
    /// and every function between it and the user's code are marked `#[track_caller]`. A call
    /// inside another library call (or under an `op!` expression) keeps the outer site, the one
    /// the user wrote.
    #[track_caller]
    pub fn called<R>(&self, function: &'static str, build: impl FnOnce() -> R) -> R {
        self.under(Site::Call(function, Location::caller()), build)
    }

    fn under<R>(&self, site: Site, build: impl FnOnce() -> R) -> R {
        let outer = {
            let mut state = self.state.lock();
            let outer = state.site;
            // A call the user made stays the site; an expression nests inside an expression.
            let keep = matches!(
                (outer, site),
                (Some(Site::Call(..)), _) | (Some(_), Site::Call(..))
            );
            if !keep {
                state.site = Some(site);
            }
            outer
        };
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

    /// Every parameter of the graph, in creation order; [`Tensor::params`] has those of one
    /// model.
    pub fn params(&self) -> Vec<Tensor> {
        let state = self.state.lock();
        let all = (0..state.tensors.len()).collect();
        self.params_among(&state, all)
    }

    /// The parameters among `tensors`, in creation order.
    fn params_among(&self, state: &State, tensors: BTreeSet<usize>) -> Vec<Tensor> {
        tensors
            .into_iter()
            .filter(|&t| matches!(state.tensors[t].leaf, Some(LeafKind::Param(_))))
            .map(|index| Tensor {
                graph: self.clone(),
                index,
            })
            .collect()
    }

    /// The number of operations built on the graph so far: every tensor computed from others
    /// (the leaves, parameters and data, are not operations).
    pub fn operation_count(&self) -> usize {
        self.state.lock().ops.len()
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

    pub(crate) fn register_state_index(&self, index: usize) {
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
}
