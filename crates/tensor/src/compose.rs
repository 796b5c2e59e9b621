//! Routines composed of pieces, in the order written: a tensor's forward (`t.forward`), its
//! backprop (`t.backprop`) and its gradients zeroed (`t.zero_grads`), a seed for a backprop
//! (`t.grad =: …`), updates, and block comments (`~~("text"; …)`) that scope pieces and show up
//! in the printed code. This is OCANNL's `%cd` composition of code (`loss.forward;
//! loss.zero_grads; loss.backprop; sgd_update` in one routine): `cd!` writes it, and
//! [`Context::compose`](crate::Context::compose) compiles it into one routine, on any backend.
//!
//! What each piece means is what the routine of the same name computes
//! ([`Context::forward`](crate::Context::forward), [`Context::backprop`](crate::Context::backprop),
//! [`Context::update`](crate::Context::update)), run where it stands among the others:
//!
//! - `t.forward` computes `t` from the data and the parameters as they are at that point. An
//!   operation the routine computed before, whose operands no piece has written since, is not
//!   computed again: `mlp.forward; loss.forward` computes the network once, while
//!   `loss.forward; w =- …; loss.forward` computes the loss again with the updated `w`.
//! - `t.backprop` computes the gradients of every parameter `t` depends on, starting from zero,
//!   as `Context::backprop` does: two backprops in a row give the same gradients, not their sum
//!   (a sum of gradients is written with updates, `acc =+ w.grad`). It starts from the seed the
//!   code wrote into `t.grad` before it (`t.grad =: …`); a `t` of one cell needs none (its seed
//!   is 1), a `t` of more cells without one is an error, since which weighting of its cells is
//!   meant is the user's to say (`t.grad =: 1` is the gradient of the sum of its cells, what
//!   `Context::backprop` computes). Whatever of `t`'s forward the routine has not computed is
//!   computed first, and the state updates of the blocks `t` depends on
//!   ([`Graph::update_in_steps`](crate::Graph::update_in_steps)) run after the gradients,
//!   unless a cell of `t` is not a finite number.
//! - `t.zero_grads` sets to zero the gradient of every tensor of `t`'s subgraph that takes one
//!   (the parameters' among them).
//! - An update runs as `Context::update` runs it. A computed tensor it reads is computed before
//!   it unless the routine already holds it; a gradient it reads is one a piece before it
//!   computed, a parameter's, or one a backprop keeps. Unlike
//!   [`Context::train_step`](crate::Context::train_step), a composed routine adds no guard
//!   against a loss that is not finite: it runs what is written.
//!
//! The routine keeps the values of the tensors forwarded and backpropagated and of the
//! targets of updates, and the gradients of the parameters (and data built with
//! `requires_grad`) that its pieces compute, for the host to read.

use crate::define::{Formula, Update};
use crate::tensor::Tensor;

/// A piece of a routine's code (OCANNL's `Assignments.comp` as `%cd` composes it): see the
/// [module's documentation](self) for what each computes. `cd!` writes them
/// (`loss.forward; loss.backprop; w =- 0.1 * w.grad`), and
/// [`Context::compose`](crate::Context::compose) compiles a sequence of them into one routine.
///
/// ```
/// use rcannl_backends::Interpreter;
/// use rcannl_tensor::compose::Piece;
/// use rcannl_tensor::{Context, Formula, Graph, TensorError, Update};
///
/// let graph = Graph::new();
/// let w = graph.param("w").shape("3").values(vec![1.0, 2.0, 3.0]).build();
/// let loss = w.pmul(&w).einsum1("i=>");
/// let step = [
///     Piece::comment("sgd step", [
///         Piece::forward(&loss),
///         Piece::backprop(&loss),
///         Piece::from(Update::subtract(&w, 0.25 * Formula::grad(&w))),
///     ]),
/// ];
/// let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
/// ctx.init_params()?;
/// let routine = ctx.compose(&step)?;
/// ctx.run(&routine)?;
/// assert_eq!(ctx.values(&w)?, vec![0.5, 1.0, 1.5]);
/// assert!(routine.code().starts_with("~~(\"sgd step\";\n"));
/// # Ok::<(), TensorError>(())
/// ```
#[derive(Debug, Clone)]
pub enum Piece {
    /// `t.forward`: `t` computed from the data and parameters.
    Forward(Tensor),
    /// `t.backprop`: the gradients of what `t` depends on, from `t`'s seed.
    Backprop(Tensor),
    /// `t.zero_grads`: the gradients of `t`'s subgraph set to zero.
    ZeroGrads(Tensor),
    /// `tensor.grad =: formula`: the seed a later `tensor.backprop` starts from, computed at
    /// every cell of `tensor` (the formula reads tensors of its dims or of one cell).
    Seed {
        /// The tensor whose gradient is set.
        tensor: Tensor,
        /// What each cell of the gradient is set to.
        formula: Formula,
    },
    /// An update of a tensor's value.
    Update(Update),
    /// `~~("text"; body)`: the pieces of `body`, which the routine's printed code shows under
    /// `text` (OCANNL's `Block_comment`).
    Comment {
        /// What the pieces do, in words.
        text: String,
        /// The pieces commented.
        body: Vec<Piece>,
    },
}

impl Piece {
    /// `t.forward`.
    ///
    /// ```
    /// use rcannl_tensor::compose::Piece;
    /// use rcannl_tensor::{Context, Graph, TensorError};
    ///
    /// let graph = Graph::new();
    /// let x = graph.data("x").shape("2").values(vec![1.0, 2.0]).build();
    /// let y = &x + 1.0;
    /// let mut ctx = Context::new(&graph);
    /// let routine = ctx.compose(&[Piece::forward(&y)])?;
    /// ctx.run(&routine)?;
    /// assert_eq!(ctx.values(&y)?, vec![2.0, 3.0]);
    /// # Ok::<(), TensorError>(())
    /// ```
    pub fn forward(t: &Tensor) -> Piece {
        Piece::Forward(t.clone())
    }

    /// `t.backprop`.
    ///
    /// ```
    /// use rcannl_tensor::compose::Piece;
    /// use rcannl_tensor::{Context, Graph, TensorError};
    ///
    /// let graph = Graph::new();
    /// let w = graph.param("w").shape("2").values(vec![3.0, -1.0]).build();
    /// let loss = w.pmul(&w).einsum1("i=>");
    /// let mut ctx = Context::new(&graph);
    /// ctx.init_params()?;
    /// let routine = ctx.compose(&[Piece::backprop(&loss)])?;
    /// ctx.run(&routine)?;
    /// assert_eq!(ctx.grad(&w)?, vec![6.0, -2.0]);
    /// # Ok::<(), TensorError>(())
    /// ```
    pub fn backprop(t: &Tensor) -> Piece {
        Piece::Backprop(t.clone())
    }

    /// `t.zero_grads`.
    ///
    /// ```
    /// use rcannl_tensor::compose::Piece;
    /// use rcannl_tensor::{Context, Graph, TensorError};
    ///
    /// let graph = Graph::new();
    /// let w = graph.param("w").shape("2").values(vec![3.0, -1.0]).build();
    /// let loss = w.pmul(&w).einsum1("i=>");
    /// let mut ctx = Context::new(&graph);
    /// ctx.init_params()?;
    /// let routine = ctx.compose(&[Piece::backprop(&loss), Piece::zero_grads(&loss)])?;
    /// ctx.run(&routine)?;
    /// assert_eq!(ctx.grad(&w)?, vec![0.0, 0.0]);
    /// # Ok::<(), TensorError>(())
    /// ```
    pub fn zero_grads(t: &Tensor) -> Piece {
        Piece::ZeroGrads(t.clone())
    }

    /// `t.grad =: formula`: the seed of a backprop of `t` that follows.
    ///
    /// ```
    /// use rcannl_tensor::compose::Piece;
    /// use rcannl_tensor::{Context, Formula, Graph, TensorError};
    ///
    /// let graph = Graph::new();
    /// let w = graph.param("w").shape("2").values(vec![3.0, -1.0]).build();
    /// let y = w.pmul(&w);
    /// let mut ctx = Context::new(&graph);
    /// ctx.init_params()?;
    /// // The gradient of 1·y₀ + 10·y₁: a vector-Jacobian product.
    /// let seed = graph.data("seed").shape("2").values(vec![1.0, 10.0]).build();
    /// let routine = ctx.compose(&[Piece::seed(&y, Formula::value(&seed)), Piece::backprop(&y)])?;
    /// ctx.run(&routine)?;
    /// assert_eq!(ctx.grad(&w)?, vec![6.0, -20.0]);
    /// # Ok::<(), TensorError>(())
    /// ```
    pub fn seed(t: &Tensor, formula: Formula) -> Piece {
        Piece::Seed {
            tensor: t.clone(),
            formula,
        }
    }

    /// `~~("text"; body)`.
    ///
    /// ```
    /// use rcannl_tensor::compose::Piece;
    /// use rcannl_tensor::{Context, Graph, TensorError};
    ///
    /// let graph = Graph::new();
    /// let x = graph.data("x").shape("2").values(vec![1.0, -2.0]).build();
    /// let y = x.relu();
    /// let mut ctx = Context::new(&graph);
    /// let routine = ctx.compose([Piece::comment("rectify x", [Piece::forward(&y)])])?;
    /// assert_eq!(
    ///     routine.code(),
    ///     format!("~~(\"rectify x\";\n  {y} =:+ relu(x);\n);\n", y = y.label())
    /// );
    /// # Ok::<(), TensorError>(())
    /// ```
    pub fn comment(text: impl Into<String>, body: impl IntoPieces) -> Piece {
        Piece::Comment {
            text: text.into(),
            body: body.into_pieces(),
        }
    }
}

impl From<Update> for Piece {
    fn from(update: Update) -> Piece {
        Piece::Update(update)
    }
}

/// Code that can stand among the pieces of a routine: a piece, an update, or a sequence of
/// either. `cd!` splices a statement that is such a value in place (`loss.backprop;
/// sgd_updates`, as OCANNL's `%cd` sequences `grad_update; sgd_update`).
///
/// ```
/// use rcannl_tensor::compose::{IntoPieces, Piece};
/// use rcannl_tensor::{Graph, cd};
///
/// let graph = Graph::new();
/// let w = graph.param("w").shape("3").build();
/// let loss = w.pmul(&w).einsum1("i=>");
/// let sgd = cd! { w =- 0.1 * w.grad };
/// let step = cd! { loss.backprop; sgd };
/// assert_eq!(step.len(), 2);
/// assert!(matches!(step[1], Piece::Update(_)));
/// assert_eq!(cd! { w =: 0 }.into_pieces().len(), 1);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is no code to compose into a routine",
    label = "code is a `Piece`, an `Update`, or a `Vec`, array or slice of them; a statement of \
             `cd!` is an assignment, `t.forward`, `t.backprop`, `t.zero_grads`, a seed \
             `t.grad =: …`, a block comment `~~(\"text\"; …)`, or such code to splice in"
)]
pub trait IntoPieces {
    /// The pieces, in order.
    fn into_pieces(self) -> Vec<Piece>;
}

impl IntoPieces for Piece {
    fn into_pieces(self) -> Vec<Piece> {
        vec![self]
    }
}

impl IntoPieces for Update {
    fn into_pieces(self) -> Vec<Piece> {
        vec![Piece::Update(self)]
    }
}

impl<T: Into<Piece>> IntoPieces for Vec<T> {
    fn into_pieces(self) -> Vec<Piece> {
        self.into_iter().map(Into::into).collect()
    }
}

impl<T: Into<Piece>, const N: usize> IntoPieces for [T; N] {
    fn into_pieces(self) -> Vec<Piece> {
        self.into_iter().map(Into::into).collect()
    }
}

impl<T: Into<Piece> + Clone> IntoPieces for &[T] {
    fn into_pieces(self) -> Vec<Piece> {
        self.iter().cloned().map(Into::into).collect()
    }
}

impl<T: Into<Piece> + Clone, const N: usize> IntoPieces for &[T; N] {
    fn into_pieces(self) -> Vec<Piece> {
        self.as_slice().into_pieces()
    }
}

impl<T: Into<Piece> + Clone> IntoPieces for &Vec<T> {
    fn into_pieces(self) -> Vec<Piece> {
        self.as_slice().into_pieces()
    }
}

impl IntoPieces for &Piece {
    fn into_pieces(self) -> Vec<Piece> {
        vec![self.clone()]
    }
}

impl IntoPieces for &Update {
    fn into_pieces(self) -> Vec<Piece> {
        vec![Piece::Update(self.clone())]
    }
}
