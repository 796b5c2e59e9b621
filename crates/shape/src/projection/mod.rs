//! Projection inference: which loop drives each axis of one operation.
//!
//! Shape inference reads an operation's constraints as an order over sizes; projection inference
//! reads the same constraints as an equivalence over axes. Each axis of the operation's tensors
//! carries a projection id of its own (fresh per operation: sizes are global, identities are
//! local), the constraints become projection equations, and [`classes`] solves those into the
//! index of every axis and the product space.
//!
//! Built so far: the equation language and its solver (union-find with pins and an iterate set,
//! canonical labeling, [`classes`]) and the core of [`derive`](mod@derive): fresh projection ids, the
//! regenerated constraints, row alignment, and the equations of equalities, broadcasts, fixed
//! indices, batch slices and iteration, the second stratum that computes affine (strided and
//! convolution) indices from the first stratum's loops, and concatenated indices with their
//! coupled factors, the padding margins each access addresses (their running maximum per
//! tensor is `Inference::margins`), and the fan-out of random words into values
//! (`Logic::Uint4x32ToPrec`), whose result is written from a multiple of the word's position.

pub mod classes;
pub mod derive;

pub use classes::{Labeling, ProjEq, ProjId, ProjTerm, solve};
pub use derive::derive_projections;
