//! The user-facing tensor graph of rcannl.
//!
//! This crate will own `Tensor` handles, the op library with gradients, parameters and their
//! initialization, counter-based random numbers, contexts and routines. It drives shape inference
//! (`rcannl-shape`), builds assignments (`rcannl-ir`) and runs them on a backend (`rcannl-backends`).
