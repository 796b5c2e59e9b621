//! Shape inference for rcannl, starting from its input language.
//!
//! [`spec`] parses and prints the generalized einsum notation (`"ij;jk=>ik"`, `"b|i->o"`,
//! `"2*o<+3*k, c"`, `"x, ...; y, ... => x^y, ..."`) and concrete shape literals (`"2|3->4@rgb"`).
//! Everything that reads a spec — constraint generation, projection inference, the CLI — reads the
//! tree this module produces, never the text.
//!
//! [`term`] holds dimensions, rows and shapes with variables; [`constraint`] what operations assert
//! about them; [`logic`] generates those constraints for every kind of operation; [`solver`]
//! solves and closes them; [`session`] is the environment of one graph, where tensors are declared
//! and operations applied; [`projection`] reads one operation's constraints again, as an
//! equivalence over its axes, to find its loops. [`words`] writes shapes for users, without the
//! solver's variables.

#![warn(missing_docs)]

mod chunked;
pub mod constraint;
pub mod error;
pub mod logic;
pub mod projection;
pub mod session;
pub mod solver;
pub mod spec;
pub mod term;
pub mod words;

pub use error::{ShapeError, ShapeErrorKind, TensorContext};
pub use session::{Capture, Inference, LeafDecl, OpId, TensorId};
