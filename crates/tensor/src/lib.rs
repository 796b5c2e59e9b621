//! The user-facing tensor graph of rcannl.
//!
//! A [`Graph`] holds tensors and operations; a [`Tensor`] is a handle into it. Every operation
//! (`ops`) records its shape logic with the inference session, the assignment computing its
//! result, and the assignments accumulating its operands' gradients, written over the forward
//! operation's projection record with the slots exchanged. A [`Context`] finishes inference,
//! gives tensors buffers on a backend (`backend_choice`: the one `RCANNL_BACKEND` names, else the
//! default), and compiles and runs routines: forward, backprop,
//! parameter init.

pub mod backend_choice;
pub mod capture;
pub mod context;
pub mod define;
pub mod elementwise;
pub mod gather;
pub mod gradcheck;
pub mod graph;
pub mod nary;
pub mod ops;
pub mod tensor;

pub use backend_choice::{BackendChoice, chosen_backend};
pub use capture::Capture;
pub use context::{Context, Routine};
pub use define::{Definition, Formula, OpLogic, Term, Update};
pub use elementwise::{BinaryOp, UnaryOp};
pub use graph::{Graph, Init, LeafBuilder, StaticIndex, TensorError};
pub use ops::StackAxis;
pub use tensor::Tensor;
