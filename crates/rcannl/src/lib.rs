//! rcannl: write tensor arithmetic; the compiler infers shapes, loop nests, reductions, padding and
//! gradients.
//!
//! This facade re-exports the workspace crates so that users depend on one package; the
//! [`prelude`] has what a model needs. Sizes come from use:
//!
//! ```
//! use rcannl::prelude::*;
//!
//! let graph = Graph::new();
//! let x = graph.data("x").shape("4|->2").values(vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]).build();
//! let w = graph.param("w").output([3]).build();
//! let b = graph.param("b").build();
//! let y = (&w * &x + &b).relu();
//! let mut ctx = Context::new(&graph);
//! ctx.init_params()?;
//! let forward = ctx.forward(&[&y])?;
//! ctx.run(&forward)?;
//! assert_eq!(w.shape(), "|2->3");
//! assert_eq!(ctx.values(&y)?.len(), 12);
//! # Ok::<(), TensorError>(())
//! ```
//!
//! The same layer in OCANNL's notation, with [`op!`] (parameters declared where they are used)
//! and [`cd!`] (assignments, here a plain gradient step):
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
//! `Context::new` runs on the backend `RCANNL_BACKEND` names (`gpu`, `cc` or `interp`), else on
//! the C backend when a C compiler runs, else on the interpreter
//! ([`tensor::backend_choice`]); `Context::with_backend` takes one explicitly, such as the
//! GPU's ([`gpu::Gpu`]).
//!
//! The einsum notation is [`spec`]:
//!
//! ```
//! let spec = rcannl::spec::parse_einsum("ij;jk=>ik").unwrap();
//! assert_eq!(spec.to_string(), "i, j; j, k => i, k");
//! ```

pub use rcannl_backends as backends;
pub use rcannl_gpu as gpu;
pub use rcannl_ir as ir;
pub use rcannl_nn as nn;
pub use rcannl_shape as shape;
pub use rcannl_shape::spec;
pub use rcannl_tensor as tensor;
pub use rcannl_tensor::{cd, op};

/// What a model needs: graphs and tensors, the axes reductions reduce, contexts and the shaped
/// results they read, parameter inits, formulas for new operations and updates, the `op!` and
/// `cd!` macros, precisions.
pub mod prelude {
    pub use rcannl_ir::Precision;
    pub use rcannl_tensor::{
        Array, Axes, Capture, Context, Definition, Formula, Graph, Init, OpLogic, Routine,
        StaticIndex, Tensor, TensorError, Term, Update, cd, op,
    };
}
