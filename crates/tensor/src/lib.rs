//! The user-facing tensor graph of rcannl.
//!
//! A [`Graph`] holds tensors and operations; a [`Tensor`] is a handle into it. Every operation
//! (`ops`) records its shape logic with the inference session, the assignment computing its
//! result, and the assignments accumulating its operands' gradients, written over the forward
//! operation's projection record with the slots exchanged. A [`Context`] finishes inference,
//! gives tensors buffers on a backend (`backend_choice`: the one `RCANNL_BACKEND` names, else the
//! default), and compiles and runs routines: forward, backprop,
//! parameter init, and routines composed of such pieces, updates and block comments
//! (`compose`). Reductions over chosen axes are in `reduce` ([`Axes`]); a context reads a
//! tensor as an [`Array`] (values with their dims) and saves and loads `.npy` files (`npy`,
//! written through `files`). `print` shows what the compiler did: values laid out by axis kind,
//! trees of the graph, assignments in `cd!` notation.
//!
//! # Features
//!
//! - `gpu` (default): the GPU backend, through `rcannl-gpu` and wgpu. Without it,
//!   [`BackendChoice::Gpu`] (`RCANNL_BACKEND=gpu`) is an error saying that this build was made
//!   without the feature, never another backend in its place.

#![warn(missing_docs)]

pub mod activations;
pub mod array;
pub mod backend_choice;
pub mod capture;
pub mod compose;
pub mod context;
pub mod define;
pub mod elementwise;
pub mod files;
pub mod gather;
pub mod gradcheck;
pub mod graph;
pub mod nary;
pub mod npy;
mod operators;
pub mod ops;
pub mod print;
pub mod reduce;
pub mod reshape;
mod shared;
pub mod syntax;
pub mod tensor;
pub mod traced;

pub use activations::Activation;
pub use array::Array;
pub use backend_choice::{BackendChoice, chosen_backend};
pub use capture::Capture;
pub use compose::{IntoPieces, Piece};
pub use context::{Context, Routine};
pub use define::{Definition, Formula, OpLogic, Term, Update};
pub use elementwise::{BinaryOp, UnaryOp};
pub use graph::{Graph, Init, LeafBuilder, StaticIndex, TensorError, TensorErrorKind};
pub use ops::StackAxis;
pub use reduce::Axes;
pub use reshape::{Axis, AxisKind};
pub use tensor::Tensor;
pub use traced::Traced;

#[doc(hidden)]
pub use rcannl_macros::{cd as cd_impl, op as op_impl};

/// Tensor expressions in OCANNL's `%op` notation: operators, primitive operations by name,
/// parameters declared where they are used, array literals, and layers as functions.
///
/// **Expressions.** `+ - /` are pointwise with broadcasting, `*` composes two tensors (the
/// first's input axes contract with the second's output axes) and scales where one side is a
/// number, `**` is a power, `< > == !=` compare (1 or 0), unary `-` negates. Primitives are
/// called by name: `relu`, `exp`, `log`, `tanh`, `sqrt`, … (every [`UnaryOp`]), `sigmoid`,
/// `abs`, `gelu`, `gelu_tanh`, `silu`, `softplus` (every [`Activation`]), `pmul`, `pow`,
/// `max`, `min`, `lt`, `eq`, `ne`, `where_(c, a, b)`, `fma(a, b, c)`; a string first is a spec
/// (`relu("ij=>ji", x)`, `max("i;j=>ij", a, b)`), and `einsum("ij;jk=>ik", a, b)` /
/// `einmax(spec, a[, b])` take any number of operands. Other calls and method calls are plain
/// Rust (a method called on an op! expression is called on the tensor it builds). Numbers stay
/// numbers until they meet a tensor.
///
/// **Shorthands.** OCANNL's einsum operators and its static-index ones, each the tensor call
/// beside it:
///
/// | shorthand | builds | binds |
/// |---|---|---|
/// | `a +* "ij;jk=>ik" b` | [`a.einsum(spec, &b)`](Tensor::einsum): products, summed | as `+` |
/// | `a ++ "ij=>i"` | [`a.einsum1(spec)`](Tensor::einsum1): sums | as `+` |
/// | `a +++ "i;j=>ij" b` | [`a.outer_sum(spec, &b)`](Tensor::outer_sum): sums of pairs, summed | as `+` |
/// | `(a, b) ++^ "i; j => i^j"` | [`Tensor::concat(spec, &[&a, &b])`](Tensor::concat) | as `+` |
/// | `a @^+ "o<+k; k => o" w` | [`a.tropical(spec, &w)`](Tensor::tropical): sums, the largest kept | below `+ -` |
/// | `a @^^ "ij=>i"` | [`a.einmax1(spec)`](Tensor::einmax1): the largest | below `+ -` |
/// | `a @\| batch` | [`a.slice(&batch)`](Tensor::slice), `batch` a [`StaticIndex`] | below `+ -` |
/// | `!@step` | [`graph.embed_static("step", &step)`](Graph::embed_static): the value of `step`, a [`StaticIndex`] | as `!` |
///
/// They bind as OCaml binds them: those starting with `+` as `+` (left to right among `+ -`,
/// below `*`: `2.0 * a +* "ij;jk=>ik" b + c` is `((2.0 * a) +* "ij;jk=>ik" b) + c`), those
/// starting with `@` below `+ -` and above comparisons (left to right among themselves), and the
/// prefix `!@` tightest, taking the Rust value after it (`!@self.step` embeds `self.step`;
/// `(10.0 - !@step) / 10.0` is a rate falling with the step). A spec is a string or a variable
/// holding one; with a string, a binary shorthand may also take it after its second operand
/// (`a +* b "ij;jk=>ik"`). A unary shorthand and its spec end the expression they apply to:
/// `(x ++ "ij=>i") * y`.
///
/// A list of names after the spec, `a +* "ij;jk=>ik" ["j"] b`, captures those labels or row
/// variables of the spec (`n` for `..n..`): each name is bound, for the code after the
/// expression, to the [`Capture`] of [`Tensor::capture`] (a `Result`, an error where the spec
/// lacks the name), to read the size once inference knows it ([`Graph::capture_value`]),
/// constrain it ([`Graph::set_dim`]) or use it as a tensor ([`Graph::dim`]). Captures are bound
/// by `op! { let … }` and in a function's `let`s, where code follows to read them. (OCANNL
/// takes capture lists after `+*`, `++` and `++^`; here every shorthand with a spec does.)
///
/// **Inline parameters.** `{ w }` declares a parameter labelled `w` (the graph's default init),
/// `{ b = 0.0 }` one with every cell 0, `{ w = [[1.0, 2.0]] }` one with these cells and exactly
/// these axes, `{ w = Init::KaimingNormal; i = [3]; o = [4] }` with an [`Init`] and given
/// input/output axes (`b = [..]` batch, `precision = Precision::F64`). Unset sizes come from
/// use.
///
/// **Array literals.** `[..]` is an output axis, `(.., ..)` an input axis, `vec![..]` a batch
/// axis, nested outer to inner: `[(1.0, 2.0), (3.0, 4.0)]` is a 2×2 matrix mapping 2-vectors to
/// 2-vectors. Brackets of tensors stack them along a new axis of that kind. A basis annotation
/// in parentheses names the basis of the axis a level of brackets makes, as OCANNL's type
/// annotation does: `([1.0, 2.0, 3.0] : rgb)` has the output axis `3@rgb`, `((1.0, 2.0) : feat)`
/// the input axis `2@feat`, `(vec![..] : examples)` a batch axis, `[((1.0, 2.0) : feat), ..]`
/// the inner axis only, and `(2.0 : q)` is the literal `[2.0]` of basis `q` (a tensor, where a
/// bare `2.0` is a number that broadcasts). Unannotated axes are of the `default` basis, and
/// `bcast_if_1` on an axis of size 1 is the claim-free unit `1*`. Outside `op!` the same rows
/// are a shape literal: `graph.data("c").shape("3@rgb").values(..)`.
///
/// **Forms.** An expression gives a [`Tensor`] (the graph is the first tensor's the expression
/// names, or `op! { in graph; … }`); `op! { let a = …; let b = …; }` binds `a`, `b` and every
/// inline parameter in the enclosing scope; `op! { fn name(args) { … } }` defines a function.
/// Its untyped arguments are tensors. Without typed arguments it is `fn name(x: &Tensor, …) ->
/// Tensor`, whose parameters are made at its first application on a graph and shared by later
/// ones, as OCANNL lifts a function's parameters; with typed (configuration) arguments it is
/// `fn name(config…) -> impl Fn(&Tensor, …) -> Tensor`, each call making a new layer, as
/// OCANNL's `()` does. A configuration argument named `label` prefixes the parameters' labels.
///
/// Every operation is built under its operator's source position: a shape error names the file,
/// line and column.
///
/// Invoke it with braces, `op! { … }`: rustfmt leaves a braced macro as written, while it would
/// reformat `op!(…)` as Rust, spreading inline declarations over lines and writing `a ** b` as
/// `a * *b` (which still reads as a power).
///
/// ```
/// use rcannl_tensor::{Context, Graph, TensorError, op};
///
/// op! {
///     /// A hidden layer of `width` units.
///     fn layer(width: usize, x) { relu({ w } * x + { b = 0.0; o = [width] }) }
/// }
///
/// let graph = Graph::new();
/// let x = graph.data("x").shape("4|->2").build();
/// let (hidden, out) = (layer(8), layer(1));
/// let y = op! { 2.0 * out(&hidden(&x)) - 1.0 };
/// let mut ctx = Context::new(&graph);
/// ctx.init_params()?;
/// assert_eq!(y.shape(), "4|->1");
/// assert_eq!(graph.params().len(), 4);
/// # Ok::<(), TensorError>(())
/// ```
#[macro_export]
macro_rules! op {
    ($($body:tt)*) => {
        $crate::op_impl! { ($crate) $($body)* }
    };
}

/// Assignments in OCANNL's `%cd` notation: updates a routine runs, and new differentiable
/// operations defined by their forward and gradient assignments.
///
/// An assignment is `target =<accumulator> formula`, with an optional `~logic: "…"`. The
/// accumulator: `=:` sets; `=+`, `=-`, `=*`, `=/`, `=**`, `=max` (or `=@^`), `=min` (or `=@-`),
/// `=?/`, `=?^`, `=||`, `=&&` accumulate into what the target holds; a `:` after `=` (`=:+`,
/// `=:max`) starts from the accumulator's neutral element. A formula is computed in place at
/// every point of the assignment's space: numbers, tensors (their values), `p.grad`, `+ - * /
/// % **`, comparisons, `&& ||`, and primitives by name (`relu`, `exp`, …, `max(a, b)`,
/// `relu_gate(a, b)`, `where_(c, a, b)`, `fma(a, b, c)`, `id(a)`). The logic gives the
/// projections: `"."` pointwise, `"@"` composition (`a`'s input axes with `b`'s output axes),
/// `"T"` transposition, or an einsum spec; `/` and `**` under `"@"` are refused, as OCANNL
/// refuses them (they read as matrix inverse and power). Without a logic an update is pointwise
/// and takes part in shape inference, but for the tensors of one cell it reads (broadcast
/// everywhere) and a target of one cell (which every cell read accumulates into):
/// [`Update::with_default_logic`].
///
/// Invoke it with braces, `cd! { … }`: rustfmt reads `cd!(p =- x)` as the Rust assignment
/// `p = -x` and would space it so (which reads the same to `cd!`, but hides the accumulator).
///
/// **Updates.** `cd! { p =- lr * p.grad }` or `cd! { a =: …; b =+ …; }` gives a `Vec<`[`Update`]`>`
/// for [`Context::update`] or [`Context::train_step`]. `{ name } =: formula` declares an
/// intermediate tensor shaped by its assignment, which later assignments read by name.
///
/// **Routines.** With a piece among its statements, `cd!` gives a `Vec<`[`Piece`]`>`, one
/// routine's code for [`Context::compose`], in the order written (see [`compose`] for what each
/// piece computes): `t.forward` computes `t`; `t.zero_grads` zeroes the gradients of `t`'s
/// subgraph; `t.backprop` computes them from `t`'s seed (`t.grad =: formula`, or 1 for a `t` of
/// one cell); `~~("words" t t.grad; statements…)` is a block comment, its words strings and
/// tensors (named by their labels), scoping the statements after its first `;`, which the
/// routine's printed code ([`Routine::code`]) shows over them; and any other expression is code
/// spliced in (an optimizer's `Vec<Update>`, another `Vec<Piece>`: [`IntoPieces`]). A training
/// step written so is [`Context::train_step`]'s, without its guard against a loss that is not
/// finite:
///
/// ```
/// use rcannl_tensor::{Context, Graph, TensorError, cd};
///
/// let graph = Graph::new();
/// let w = graph.param("w").shape("2").values(vec![3.0, -1.0]).build();
/// let loss = w.pmul(&w).einsum1("i=>");
/// let sgd = cd! { w =- 0.25 * w.grad };
/// let step = cd! {
///     ~~(loss "step";
///         ~~("forward"; loss.forward);
///         ~~("zero grads and backprop"; loss.zero_grads; loss.backprop);
///         sgd;
///     );
/// };
/// let mut ctx = Context::new(&graph);
/// ctx.init_params()?;
/// let routine = ctx.compose(&step)?;
/// ctx.run(&routine)?;
/// assert_eq!(ctx.values(&w)?, vec![1.5, -0.5]);
/// assert!(routine.code().contains("  ~~(\"zero grads and backprop\";\n    w.grad =: 0.0;\n"));
/// # Ok::<(), TensorError>(())
/// ```
///
/// **Operations.** `cd! { fn name(x, y, config: T) { v =: …; g1 =+ …; g2 =+ …; } }` defines
/// `fn name(x: &Tensor, y: &Tensor, config: T) -> Tensor`. The forward assignment writes the
/// result `v` from the operands `v1`, `v2`, `v3` (or the arguments' names); gradient
/// assignments `g1 =+ …` accumulate into the operands' gradients, reading `g` (the result's
/// gradient), `v` and the operands through the forward assignment's projections.
///
/// ```
/// use rcannl_tensor::{Context, Graph, TensorError, cd};
///
/// cd! {
///     /// `log(1 + eˣ)`.
///     fn softplus(x) {
///         v =: log(1.0 + exp(v1));
///         g1 =+ g / (1.0 + exp(-v1));
///     }
/// }
///
/// let graph = Graph::new();
/// let p = graph.param("p").shape("3").build();
/// let loss = softplus(&p);
/// let step = cd! { p =- 0.1 * p.grad };
/// let mut ctx = Context::new(&graph);
/// ctx.init_params()?;
/// let train = ctx.train_step(&loss, &step)?;
/// ctx.run(&train)?;
/// # Ok::<(), TensorError>(())
/// ```
#[macro_export]
macro_rules! cd {
    ($($body:tt)*) => {
        $crate::cd_impl! { ($crate) $($body)* }
    };
}
