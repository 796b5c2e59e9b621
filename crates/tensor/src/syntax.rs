//! What the `op!` and `cd!` macros expand to: values that are a tensor or a number until they
//! meet (`Operand`), the operations of `op!` on them, inline parameter declarations
//! (`ParamDecl`), array literals, parameters shared by a defined function's applications, and
//! the terms of `cd!`'s formulas (`AsTerm`), and the words of its block comments
//! (`CommentWord`).
//!
//! The macros are the interface; these items are public so that their expansions can name
//! them, and are documented so that an expansion can be read.

use rcannl_ir::Precision;
pub use rcannl_ir::{Binop, Slot, Ternop, Unop};
use rcannl_shape::spec::{DimLiteral, ShapeLiteral};

use crate::activations::Activation;
use crate::define::Formula;
use crate::elementwise::{BinaryOp, UnaryOp};
use crate::graph::{Graph, Init, StaticIndex, error};
use crate::ops::StackAxis;
use crate::tensor::Tensor;

/// A value of an `op!` expression: a tensor, or a number not yet combined with one (numbers
/// combine among themselves as numbers; with a tensor they become a constant of its graph).
#[derive(Debug, Clone)]
pub enum Operand {
    /// A tensor of a graph.
    Tensor(Tensor),
    /// A number, not yet a tensor.
    Number(f64),
}

/// What an identifier in an `op!` expression may hold: a tensor (or a reference to one), a
/// number, or an operand.
pub trait AsOperand {
    /// The value as an operand.
    fn as_operand(&self) -> Operand;
}

impl AsOperand for Tensor {
    fn as_operand(&self) -> Operand {
        Operand::Tensor(self.clone())
    }
}

impl AsOperand for Operand {
    fn as_operand(&self) -> Operand {
        self.clone()
    }
}

impl<T: AsOperand + ?Sized> AsOperand for &T {
    fn as_operand(&self) -> Operand {
        (**self).as_operand()
    }
}

macro_rules! number_operands {
    ($($t:ty),*) => {
        $(
            impl AsOperand for $t {
                fn as_operand(&self) -> Operand {
                    Operand::Number(*self as f64)
                }
            }
        )*
    };
}

number_operands!(f64, f32, i32, i64, u32, u64, usize);

/// `x` as an operand.
pub fn operand<T: AsOperand + ?Sized>(x: &T) -> Operand {
    x.as_operand()
}

/// The graph of the first tensor among `candidates` (the identifiers an expression reads); with
/// none, a new graph holding an error that says so, written at `site`.
pub fn graph_of(candidates: &[Operand], site: &'static str) -> Graph {
    first_graph(candidates.iter()).unwrap_or_else(|| {
        let graph = Graph::new();
        graph.at_site(site, || {
            graph.record(error(
                "op!: the expression reads no tensor to take the graph from; name the graph \
                 first: `op! { in graph; … }`",
            ))
        });
        graph
    })
}

/// `x` as a tensor of `graph` (a number becomes a constant).
pub fn tensor(graph: &Graph, x: Operand) -> Tensor {
    match x {
        Operand::Tensor(t) => t,
        Operand::Number(n) => graph.number(n),
    }
}

/// The arithmetic operators of `op!`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arith {
    /// `+`, pointwise.
    Add,
    /// `-`, pointwise.
    Sub,
    /// Composition of two tensors; scaling where one side is a number.
    Mul,
    /// `/`, pointwise.
    Div,
}

/// `a ⟨op⟩ b`, built at `site`.
pub fn arith(graph: &Graph, op: Arith, a: Operand, b: Operand, site: &'static str) -> Operand {
    if let (Operand::Number(x), Operand::Number(y)) = (&a, &b) {
        return Operand::Number(match op {
            Arith::Add => x + y,
            Arith::Sub => x - y,
            Arith::Mul => x * y,
            Arith::Div => x / y,
        });
    }
    graph.at_site(site, || {
        let graph = graph_for(graph, &[&a, &b]);
        let (a, b) = (tensor(&graph, a), tensor(&graph, b));
        Operand::Tensor(match op {
            Arith::Add => &a + &b,
            Arith::Sub => &a - &b,
            Arith::Mul => &a * &b,
            Arith::Div => &a / &b,
        })
    })
}

/// `−a`, built at `site`.
pub fn negate(graph: &Graph, a: Operand, site: &'static str) -> Operand {
    match a {
        Operand::Number(x) => Operand::Number(-x),
        Operand::Tensor(t) => graph.at_site(site, || Operand::Tensor(-&t)),
    }
}

/// The graph the operands' tensors live on (the expression's graph when they have none): a
/// constant joins the graph of the tensor it meets.
fn graph_for(graph: &Graph, operands: &[&Operand]) -> Graph {
    first_graph(operands.iter().copied()).unwrap_or_else(|| graph.clone())
}

/// The graph of the first tensor among `operands`.
fn first_graph<'a>(mut operands: impl Iterator<Item = &'a Operand>) -> Option<Graph> {
    operands.find_map(|o| match o {
        Operand::Tensor(t) => Some(t.graph.clone()),
        Operand::Number(_) => None,
    })
}

/// A unary operation, pointwise or following `spec`, built at `site`.
pub fn unary(
    graph: &Graph,
    op: UnaryOp,
    spec: Option<&str>,
    a: Operand,
    site: &'static str,
) -> Operand {
    if let (Operand::Number(x), None) = (&a, spec) {
        return Operand::Number(match op {
            UnaryOp::StopGradient => *x,
            other => other.unop().apply(*x),
        });
    }
    graph.at_site(site, || {
        let graph = graph_for(graph, &[&a]);
        let a = tensor(&graph, a);
        Operand::Tensor(match spec {
            Some(spec) => a.unary_spec(op, spec),
            None => a.unary(op),
        })
    })
}

/// An activation, pointwise or following `spec`, built at `site`.
pub fn activation(
    graph: &Graph,
    op: Activation,
    spec: Option<&str>,
    a: Operand,
    site: &'static str,
) -> Operand {
    if let (Operand::Number(x), None) = (&a, spec) {
        return Operand::Number(op.apply(*x));
    }
    graph.at_site(site, || {
        let graph = graph_for(graph, &[&a]);
        let a = tensor(&graph, a);
        Operand::Tensor(match spec {
            Some(spec) => a.activation_spec(op, spec),
            None => a.activation(op),
        })
    })
}

/// A binary operation, pointwise or following `spec`, built at `site`.
pub fn binary(
    graph: &Graph,
    op: BinaryOp,
    spec: Option<&str>,
    a: Operand,
    b: Operand,
    site: &'static str,
) -> Operand {
    if let (Operand::Number(x), Operand::Number(y), None) = (&a, &b, spec) {
        return Operand::Number(op.binop().apply(*x, *y));
    }
    graph.at_site(site, || {
        let graph = graph_for(graph, &[&a, &b]);
        let (a, b) = (tensor(&graph, a), tensor(&graph, b));
        Operand::Tensor(match spec {
            Some(spec) => a.binary_spec(op, spec, &b),
            None => a.binary(op, &b),
        })
    })
}

/// The operations of three operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ternary {
    /// `b` where `a` is not 0, else `c`.
    Where,
    /// `a·b + c`.
    Fma,
}

/// A ternary operation, pointwise or following `spec`, built at `site`.
pub fn ternary(
    graph: &Graph,
    op: Ternary,
    spec: Option<&str>,
    operands: [Operand; 3],
    site: &'static str,
) -> Operand {
    graph.at_site(site, || {
        let [a, b, c] = operands;
        let graph = graph_for(graph, &[&a, &b, &c]);
        let [a, b, c] = [a, b, c].map(|x| tensor(&graph, x));
        Operand::Tensor(match (op, spec) {
            (Ternary::Where, None) => Tensor::where_(&a, &b, &c),
            (Ternary::Where, Some(spec)) => Tensor::where_spec(spec, &a, &b, &c),
            (Ternary::Fma, None) => Tensor::fma(&a, &b, &c),
            (Ternary::Fma, Some(spec)) => Tensor::fma_spec(spec, &a, &b, &c),
        })
    })
}

/// An einsum of any number of operands (summing), or with `max` the tropical form (the largest
/// instead of the sum, of one operand or the sums of two), built at `site`.
pub fn einsum(
    graph: &Graph,
    spec: &str,
    operands: Vec<Operand>,
    max: bool,
    site: &'static str,
) -> Operand {
    graph.at_site(site, || {
        let graph = graph_for(graph, &operands.iter().collect::<Vec<_>>());
        let tensors: Vec<Tensor> = operands.into_iter().map(|o| tensor(&graph, o)).collect();
        Operand::Tensor(match (max, tensors.as_slice()) {
            (false, [a]) => a.einsum1(spec),
            (false, [a, b]) => a.einsum(spec, b),
            (false, _) => Tensor::einsum_n(spec, &tensors.iter().collect::<Vec<_>>()),
            (true, [a]) => a.einmax1(spec),
            (true, [a, b]) => a.tropical(spec, b),
            (true, other) => graph.failed(error(format!(
                "einmax: a spec of one or two operands, not {}",
                other.len()
            ))),
        })
    })
}

/// Sums of pairs added up following `spec` (`a +++ "spec" b`), built at `site`.
pub fn outer_sum(graph: &Graph, spec: &str, a: Operand, b: Operand, site: &'static str) -> Operand {
    graph.at_site(site, || {
        let graph = graph_for(graph, &[&a, &b]);
        let (a, b) = (tensor(&graph, a), tensor(&graph, b));
        Operand::Tensor(a.outer_sum(spec, &b))
    })
}

/// The operands' stretches assembled following `spec` (`(a, b) ++^ "spec"`), built at `site`.
pub fn concat(graph: &Graph, spec: &str, operands: Vec<Operand>, site: &'static str) -> Operand {
    graph.at_site(site, || {
        let graph = graph_for(graph, &operands.iter().collect::<Vec<_>>());
        let tensors: Vec<Tensor> = operands.into_iter().map(|o| tensor(&graph, o)).collect();
        Operand::Tensor(Tensor::concat(spec, &tensors.iter().collect::<Vec<_>>()))
    })
}

/// `a` at the static index `at` of its first batch axis (`a @| at`), built at `site`.
pub fn slice(graph: &Graph, a: Operand, at: &StaticIndex, site: &'static str) -> Operand {
    graph.at_site(site, || {
        let graph = graph_for(graph, &[&a]);
        Operand::Tensor(tensor(&graph, a).slice(at))
    })
}

/// The value of the static index `index` as a tensor of `graph` (`!@index`), labelled `label`
/// (the index as written), built at `site`.
pub fn embed_static(
    graph: &Graph,
    label: &str,
    index: &StaticIndex,
    site: &'static str,
) -> Operand {
    graph.at_site(site, || Operand::Tensor(graph.embed_static(label, index)))
}

/// The tensors stacked along a new leading axis of `axis`'s kind (a block literal), built at
/// `site`.
pub fn stack(
    graph: &Graph,
    axis: StackAxis,
    operands: Vec<Operand>,
    site: &'static str,
) -> Operand {
    graph.at_site(site, || {
        let graph = graph_for(graph, &operands.iter().collect::<Vec<_>>());
        let tensors: Vec<Tensor> = operands.into_iter().map(|o| tensor(&graph, o)).collect();
        Operand::Tensor(Tensor::stack_along(
            axis,
            &tensors.iter().collect::<Vec<_>>(),
        ))
    })
}

/// The axes of an array literal by kind: `vec![…]` batch, `[…]` output, `(…)` input, outermost
/// first; and the bases annotations name (`([1.0, 2.0, 3.0] : rgb)`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiteralDims {
    /// The batch axes' sizes, outermost first.
    pub batch: Vec<usize>,
    /// The output axes' sizes.
    pub output: Vec<usize>,
    /// The input axes' sizes.
    pub input: Vec<usize>,
    /// The annotated axes: the kind, the axis's position among the axes of its kind, the basis
    /// named. The other axes are of the `default` basis.
    pub bases: Vec<(StackAxis, usize, &'static str)>,
}

impl LiteralDims {
    /// The axes as the shape literal that says the same (`([1.0, 2.0, 3.0] : rgb)` is
    /// `"3@rgb"`): a basis is read as in a shape literal (`default` is the default basis), and
    /// `bcast_if_1` on an axis of size 1 is the claim-free unit `1*`.
    pub fn shape_literal(&self) -> ShapeLiteral {
        let row = |kind: StackAxis, sizes: &[usize]| -> Vec<DimLiteral> {
            sizes
                .iter()
                .enumerate()
                .map(|(i, &size)| {
                    let named = self
                        .bases
                        .iter()
                        .rev()
                        .find(|&&(k, at, _)| k == kind && at == i)
                        .map(|&(_, _, name)| name);
                    match named {
                        None => DimLiteral::new(size),
                        Some("bcast_if_1") if size == 1 => DimLiteral::claim_free(),
                        Some(name) => DimLiteral::named(size, name),
                    }
                })
                .collect()
        };
        ShapeLiteral {
            batch: row(StackAxis::Batch, &self.batch),
            input: row(StackAxis::Input, &self.input),
            output: row(StackAxis::Output, &self.output),
        }
    }
}

/// A data tensor holding an array literal's `values` (row-major in memory order: batch, output,
/// input), of exactly the literal's axes and bases.
pub fn literal(
    graph: &Graph,
    label: &str,
    dims: LiteralDims,
    values: Vec<f64>,
    site: &'static str,
) -> Operand {
    graph.at_site(site, || {
        Operand::Tensor(
            graph
                .data(label)
                .rows_of(&dims.shape_literal())
                .values(values)
                .build(),
        )
    })
}

/// What a parameter declared inline (`{ w }`, `{ b = 0.0; o = [hid] }`) gives: its label, the
/// axes given, its init.
#[derive(Debug, Clone)]
pub struct ParamDecl {
    label: String,
    batch: Option<Vec<usize>>,
    output: Option<Vec<usize>>,
    input: Option<Vec<usize>>,
    /// Every row with its bases, from an array literal's axes; the rows given after override it.
    rows: Option<ShapeLiteral>,
    init: Option<Init>,
    precision: Option<Precision>,
}

/// What an inline declaration's `= value` may be: a number (every cell), or an [`Init`].
pub trait IntoInit {
    /// The init the value stands for.
    fn into_init(self) -> Init;
}

impl IntoInit for Init {
    fn into_init(self) -> Init {
        self
    }
}

macro_rules! number_inits {
    ($($t:ty),*) => {
        $(
            impl IntoInit for $t {
                fn into_init(self) -> Init {
                    Init::Constant(self as f64)
                }
            }
        )*
    };
}

number_inits!(f64, f32, i32, i64, u32, u64, usize);

impl ParamDecl {
    /// A parameter labelled `label`, every axis inferred, the graph's default init.
    pub fn new(label: impl Into<String>) -> ParamDecl {
        ParamDecl {
            label: label.into(),
            batch: None,
            output: None,
            input: None,
            rows: None,
            init: None,
            precision: None,
        }
    }

    /// The batch axes (`b = [..]`).
    pub fn batch(mut self, dims: impl IntoIterator<Item = usize>) -> ParamDecl {
        self.batch = Some(dims.into_iter().collect());
        self
    }

    /// The output axes (`o = [..]`).
    pub fn output(mut self, dims: impl IntoIterator<Item = usize>) -> ParamDecl {
        self.output = Some(dims.into_iter().collect());
        self
    }

    /// The input axes (`i = [..]`).
    pub fn input(mut self, dims: impl IntoIterator<Item = usize>) -> ParamDecl {
        self.input = Some(dims.into_iter().collect());
        self
    }

    /// The init (`= value`).
    pub fn init(mut self, init: impl IntoInit) -> ParamDecl {
        self.init = Some(init.into_init());
        self
    }

    /// The values of an array literal (`= [[1.0, 2.0], [3.0, 4.0]]`): the cells and the exact
    /// axes.
    pub fn values(mut self, dims: LiteralDims, values: Vec<f64>) -> ParamDecl {
        self.rows = Some(dims.shape_literal());
        (self.batch, self.output, self.input) = (None, None, None);
        self.init = Some(Init::Values(values));
        self
    }

    /// The precision of the cells (`precision = Precision::F64`).
    pub fn precision(mut self, precision: Precision) -> ParamDecl {
        self.precision = Some(precision);
        self
    }

    /// The parameter, created on `graph` at `site`.
    pub fn build(self, graph: &Graph, site: &'static str) -> Tensor {
        graph.at_site(site, || {
            let mut builder = graph.param(&self.label);
            if let Some(rows) = &self.rows {
                builder = builder.rows_of(rows);
            }
            if let Some(dims) = self.batch {
                builder = builder.batch(dims);
            }
            if let Some(dims) = self.output {
                builder = builder.output(dims);
            }
            if let Some(dims) = self.input {
                builder = builder.input(dims);
            }
            if let Some(init) = self.init {
                builder = builder.init(init);
            }
            if let Some(precision) = self.precision {
                builder = builder.precision(precision);
            }
            builder.build()
        })
    }
}

/// The parameters of the function that `key` names (an `op!` function without configuration
/// arguments) on `graph`: made by `make` at its first application there, the same tensors at
/// every later one, so that applying the function twice applies the same layer.
pub fn shared_params(
    graph: &Graph,
    key: &'static str,
    make: impl FnOnce() -> Vec<Tensor>,
) -> Vec<Tensor> {
    let known = graph.state.lock().shared_params.get(key).cloned();
    match known {
        Some(indices) => indices
            .into_iter()
            .map(|index| Tensor {
                graph: graph.clone(),
                index,
            })
            .collect(),
        None => {
            let made = make();
            let indices = made.iter().map(|t| t.index).collect();
            graph.state.lock().shared_params.insert(key, indices);
            made
        }
    }
}

/// What a name in a `cd!` formula may hold: a tensor (its value), a formula, or a number.
pub trait AsTerm {
    /// The value as a formula.
    fn as_term(&self) -> Formula;
}

impl AsTerm for Tensor {
    fn as_term(&self) -> Formula {
        Formula::value(self)
    }
}

impl AsTerm for Formula {
    fn as_term(&self) -> Formula {
        self.clone()
    }
}

impl<T: AsTerm + ?Sized> AsTerm for &T {
    fn as_term(&self) -> Formula {
        (**self).as_term()
    }
}

macro_rules! number_terms {
    ($($t:ty),*) => {
        $(
            impl AsTerm for $t {
                fn as_term(&self) -> Formula {
                    Formula::Const(*self as f64)
                }
            }
        )*
    };
}

number_terms!(f64, f32, i32, i64, u32, u64, usize);

/// `x` as a formula.
pub fn term<T: AsTerm + ?Sized>(x: &T) -> Formula {
    x.as_term()
}

/// The gradient of the tensor `x` holds, as a formula (`x.grad`).
pub fn grad(x: &Tensor) -> Formula {
    Formula::grad(x)
}

/// The graph of the first tensor a formula among `formulas` reads; with none, a new graph
/// holding an error naming `what` (an intermediate declared where nothing gives it a graph).
pub fn graph_of_terms(formulas: &[&Formula], what: &str, site: &'static str) -> Graph {
    formulas
        .iter()
        .find_map(|f| f.tensors().first().map(|t| t.graph.clone()))
        .unwrap_or_else(|| {
            let graph = Graph::new();
            graph.at_site(site, || {
                graph.record(error(format!(
                    "cd!: the assignment to '{what}' reads no tensor to take the graph from"
                )))
            });
            graph
        })
}

/// The graph `op! { in graph; … }` names.
pub fn graph(graph: &Graph) -> Graph {
    graph.clone()
}

/// An intermediate tensor declared in a `cd!` assignment (`{ name } =: formula`): a tensor of
/// `graph` whose shape the assignment gives, computed in the precision of what `formula` reads,
/// as an operation over those tensors is (an intermediate over f64 tensors holds f64).
pub fn intermediate(graph: &Graph, label: &str, formula: &Formula) -> Tensor {
    let t = graph.data(label).build();
    let tensors = formula.tensors();
    // A tensor of another graph is refused with the assignment's relation, naming it.
    if tensors.iter().all(|read| graph.owns(read)) {
        graph.compute_from(&t, &tensors);
    }
    t
}

/// A `~logic` given as a value rather than written in place: `"."` pointwise, `"@"`
/// composition, `"T"` transposition, anything else an einsum spec.
pub fn logic(logic: &str) -> crate::define::OpLogic {
    use crate::define::OpLogic;
    match logic {
        "." => OpLogic::Pointwise,
        "@" => OpLogic::Compose,
        "T" => OpLogic::Transpose,
        spec => OpLogic::Spec(spec.to_owned()),
    }
}

/// What a word of a `cd!` block comment may be: a string, or a tensor (named by its label).
pub trait CommentWord {
    /// The word as the comment writes it.
    fn comment_word(&self) -> String;
}

impl CommentWord for Tensor {
    fn comment_word(&self) -> String {
        self.label()
    }
}

impl CommentWord for str {
    fn comment_word(&self) -> String {
        self.to_owned()
    }
}

impl CommentWord for String {
    fn comment_word(&self) -> String {
        self.clone()
    }
}

impl<T: CommentWord + ?Sized> CommentWord for &T {
    fn comment_word(&self) -> String {
        (**self).comment_word()
    }
}

/// A word of a block comment (`~~("step of" loss; …)`): a tensor's label, or a string.
pub fn comment_word<T: CommentWord + ?Sized>(x: &T) -> String {
    x.comment_word()
}

/// The word of a block comment naming a tensor's gradient (`t.grad`): `label.grad`, as printed
/// code names it.
pub fn comment_grad(t: &Tensor) -> String {
    format!("{}.grad", t.label())
}

/// A block comment's text: its words, a space between two.
pub fn comment(words: &[String]) -> String {
    words.join(" ")
}
