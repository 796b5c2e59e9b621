//! rcannl: write tensor arithmetic; the compiler infers shapes, loop nests, reductions, padding and
//! gradients, then runs them on the interpreter, generated C or the GPU.
//!
//! This facade re-exports the workspace's crates as modules, so that a project depends on one
//! package (`rcannl = "0.1"`); the [`prelude`] has what a model needs.
//!
//! # A tour
//!
//! **Tensors have three rows of axes**, written `batch | input -> output`: a data tensor of 4
//! examples of 2 features is `4|->2`, a weight taking 2 inputs to 3 outputs is `|2->3`. Sizes
//! left out are inferred from use, and `*` composes (a weight applied to its input):
//!
//! ```
//! use rcannl::prelude::*;
//!
//! let graph = Graph::new();
//! let x = graph.data("x").shape("4|->2").values(vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]).build();
//! let w = graph.param("w").output([3]).build();     // input size inferred: 2
//! let b = graph.param("b").build();                 // size inferred: 3
//! let y = (&w * &x + &b).relu();
//! let mut ctx = Context::new(&graph);               // compiles and runs routines
//! ctx.init_params()?;
//! let forward = ctx.forward(&[&y])?;
//! ctx.run(&forward)?;
//! assert_eq!(w.shape(), "|2->3");
//! let out = ctx.array(&y)?;                         // shaped: dims in memory order
//! assert_eq!(out.shape(), &[4, 3]);
//! assert_eq!(out.values().len(), 12);
//! # Ok::<(), TensorError>(())
//! ```
//!
//! **Memory order** is batch, then output, then input axes, row-major: a `2|3->4` tensor is
//! laid out as a `(2, 4, 3)` array. [`Context::values`](tensor::Context::values) and
//! [`Context::set_values`](tensor::Context::set_values) read and write cells in that order,
//! [`Context::array`](tensor::Context::array) returns them with their dims, and
//! [`Context::save_npy`](tensor::Context::save_npy) writes them as a numpy array of that shape.
//!
//! **Operations** ([`tensor::Tensor`]): pointwise arithmetic and functions (`relu`, `exp`,
//! [`sigmoid`](tensor::Tensor::sigmoid), [`gelu`](tensor::Tensor::gelu), …), einsums in
//! OCANNL's notation ([`spec`]) or numpy's, of any number of operands, reductions over chosen
//! axes ([`sum_over`](tensor::Tensor::sum_over), [`mean_over`](tensor::Tensor::mean_over),
//! [`max_over`](tensor::Tensor::max_over) with [`tensor::Axes`]), reshapes, convolutions and
//! pooling, concatenation, gathers, random draws. Every differentiable one has its gradient;
//! [`Context::backprop`](tensor::Context::backprop) compiles them.
//!
//! **Training** ([`nn`]): layers ([`nn::blocks`], [`nn::conv`], [`nn::norm`],
//! [`nn::attention`], [`nn::transformer`]), losses ([`nn::loss`]), metrics ([`nn::metrics`]),
//! optimizers ([`nn::optim`]: SGD, Adam, LAMB, schedules, clipping), the training loop
//! ([`nn::train`]), checkpoints ([`nn::checkpoint`]) and plots ([`nn::plot`]).
//!
//! **The same layer in OCANNL's notation**, with [`op!`] (parameters declared where they are
//! used) and [`cd!`] (assignments, here a plain gradient step):
//!
//! ```
//! use rcannl::prelude::*;
//!
//! let graph = Graph::new();
//! let x = graph.data("x").shape("4|->2").values(vec![0.5; 8]).build();
//! op! { let y = relu({ w; o = [3] } * x + { b }); }
//! let step = cd! { w =- 0.1 * w.grad; b =- 0.1 * b.grad };
//! let mut ctx = Context::new(&graph);
//! ctx.init_params()?;
//! let train = ctx.train_step(&y, &step)?;
//! ctx.run(&train)?;
//! assert_eq!(w.shape(), "|2->3");
//! # Ok::<(), TensorError>(())
//! ```
//!
//! **Backends**: `Context::new` runs on the backend `RCANNL_BACKEND` names (`gpu`, `cc` or
//! `interp`), else on the C backend when a C compiler runs, else on the interpreter
//! ([`tensor::backend_choice`]); `Context::with_backend` takes one explicitly, such as the
//! GPU's ([`gpu::Gpu`]). Compiled routines are cached on disk, under a size cap
//! ([`backends::cache`]).
//!
//! **Several devices**: contexts of one graph on different backends, or on GPUs opened on
//! chosen adapters ([`gpu::Adapter`]), each hold their own values;
//! [`Context::copy_params_from`](tensor::Context::copy_params_from) copies a model between
//! them, and [`nn::devices`] trains data-parallel across them, each device on its shard of
//! every batch.
//!
//! **Precision**: nothing needs choosing (a graph where nothing is chosen computes in f32), and
//! a choice, made when building or afterwards ([`Tensor::set_precision`](tensor::Tensor::set_precision)),
//! wins over inference. Operations promote their operands' precisions; parameters and data
//! given none hold what their users compute in; gradients may have their own
//! ([`Graph::set_default_grad_precision`](tensor::Graph::set_default_grad_precision)). The
//! rules: [`tensor::graph::precision`].
//!
//! ```
//! use rcannl::prelude::*;
//!
//! let graph = Graph::new();
//! let x = graph.data("x").shape("8|->2").precision(Precision::Bf16).build();
//! let w = graph.param("w").output([4]).build();   // no precision: it takes its users'
//! let y = (&w * &x).relu();                         // promoted from its operands: bf16
//! graph.set_default_grad_precision(Precision::F32); // bf16 weights, f32 gradients
//! let mut ctx = Context::new(&graph);
//! ctx.init_params()?;
//! ctx.backprop(&y)?;
//! assert_eq!([w.precision(), y.precision()], [Precision::Bf16; 2]);
//! assert_eq!(w.grad_precision(), Precision::F32);
//! # Ok::<(), TensorError>(())
//! ```
//!
//! **Seeing what the compiler did** ([`tensor::print`]): [`Context::print`](tensor::Context::print)
//! lays a tensor's values (and gradient) out by axis kind, [`Context::print_tree`](tensor::Context::print_tree)
//! draws the graph computing it, and [`Routine::code`](tensor::Routine::code) gives the
//! assignments a routine was compiled from in `cd!` notation
//! ([`Routine::describe`](tensor::Routine::describe): the loops they became).
//!
//! ```
//! use rcannl::prelude::*;
//!
//! let graph = Graph::new();
//! let x = graph.data("x").shape("2").values(vec![1.0, -2.0]).build();
//! let y = x.relu();
//! let mut ctx = Context::new(&graph);
//! let forward = ctx.forward(&[&y])?;
//! ctx.run(&forward)?;
//! assert_eq!(forward.code(), "relu#1 =:+ relu(x);\n");
//! assert!(ctx.print_tree(&y, &TreeOptions::default())?.starts_with("relu#1: |->2\n"));
//! assert!(ctx.print(&y, &PrintOptions::default())?.contains("│    │ 1 0 │"));
//! # Ok::<(), TensorError>(())
//! ```
//!
//! **Errors** are values ([`tensor::TensorError`]), never panics: a shape that cannot be
//! inferred names the operation, the label, the tensors and their shapes.
//!
//! # The modules
//!
//! | module | crate | what it holds |
//! |---|---|---|
//! | [`prelude`] | | graphs, tensors, contexts, inits, formulas, the macros |
//! | [`tensor`] | `rcannl-tensor` | the op library with gradients, contexts and routines, `.npy` files |
//! | [`nn`] | `rcannl-nn` | layers, losses, metrics, optimizers, training, checkpoints, plots |
//! | [`spec`], [`shape`] | `rcannl-shape` | the einsum notation; shape and projection inference |
//! | [`ir`] | `rcannl-ir` | precisions, assignments, loops and their optimization |
//! | [`backends`] | `rcannl-backends` | the interpreter and the C backend |
//! | [`gpu`] | `rcannl-gpu` | the GPU backend (WGSL on wgpu; feature `gpu`) |
//!
//! # Features
//!
//! Both on by default; `default-features = false` leaves out their dependencies:
//!
//! - `gpu`: the GPU backend, through wgpu, and this crate's `gpu` module. Without it the module
//!   is absent, and choosing the GPU (`RCANNL_BACKEND=gpu`, `BackendChoice::Gpu`) is an error
//!   saying that this build was made without the feature, never another backend in its place.
//! - `plot`: PNG plots (`nn::plot`), drawn with plotters. Without it that module is absent.
//! - `mpi` (off by default): data-parallel training over MPI (`nn::distributed`).
//!
//! The einsum notation is [`spec`]:
//!
//! ```
//! let spec = rcannl::spec::parse_einsum("ij;jk=>ik").unwrap();
//! assert_eq!(spec.to_string(), "i, j; j, k => i, k");
//! ```

#![warn(missing_docs)]

#[doc(inline)]
pub use rcannl_backends as backends;
#[cfg(feature = "gpu")]
#[doc(inline)]
pub use rcannl_gpu as gpu;
#[doc(inline)]
pub use rcannl_ir as ir;
#[doc(inline)]
pub use rcannl_nn as nn;
#[doc(inline)]
pub use rcannl_shape as shape;
#[doc(inline)]
pub use rcannl_shape::spec;
#[doc(inline)]
pub use rcannl_tensor as tensor;
pub use rcannl_tensor::{cd, op};

// Compiling a graph builds and drops many small trees of loops and expressions; glibc's allocator
// slows down as its heap grows (a chain of 10^5 operations optimized 1.6× slower than under
// mimalloc, its time growing with exponent 1.22 instead of 1.06), so a program on the facade
// gets mimalloc unless it turns the `mimalloc` feature off.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// What a model needs: graphs and tensors, the axes reductions reduce and reshapes name,
/// activations, contexts and the shaped results they read, parameter inits, formulas for new
/// operations and updates, the pieces routines are composed of, the `op!` and `cd!` macros,
/// precisions and memory modes, and what printing takes.
pub mod prelude {
    pub use rcannl_ir::{MemoryMode, Precision};
    pub use rcannl_tensor::print::{PrintOptions, TreeOptions};
    pub use rcannl_tensor::{
        Activation, Array, Axes, Axis, AxisKind, Capture, Context, Definition, Formula, Graph,
        Init, OpLogic, Piece, Routine, StaticIndex, Tensor, TensorError, Term, Traced, Update, cd,
        op,
    };
}
