//! The intermediate representations of rcannl.
//!
//! It owns the projection vocabulary: loop symbols and axis indices (`index`), and the record of
//! how one assignment iterates and indexes its tensors, with the predicates lowering reads off it
//! and the slot views gradients use (`projections`), and the padding margins of a buffer
//! (`padding`); precisions and the rounding to each (`precision`); the primitive operations,
//! accumulators with their neutral elements and the Threefry random bits (`ops`), declared from
//! the tables that list each primitive once (`op_table`), with f32's transcendental functions as
//! the interpreter and compiled C compute them (`fmath`); typed values and their conversions
//! (`value`); tensor nodes (`node`), assignments (`assignment`), the loop IR (`loops`), lowering
//! (`lower`) and routines (`routine`), and OCANNL's check of large constants in half precision
//! computations (`half_cutoff`). The optimizer (`optimize`)
//! recognizes matrix products, decides each node's memory mode and rewrites a routine's loops:
//! fusion of virtual nodes, local accumulators, simplification and shared subexpressions. It
//! depends on no other rcannl crate: shape inference produces its projection records, backends
//! consume its loops.

#![warn(missing_docs)]

pub mod assignment;
pub mod canonical;
pub mod fmath;
pub mod half_cutoff;
pub mod in_parallel;
pub mod index;
pub mod loops;
pub mod lower;
pub mod node;
pub mod op_table;
pub mod ops;
pub mod optimize;
pub mod padding;
pub mod plan_operand;
pub mod precision;
pub mod projections;
pub mod routine;
pub mod value;

pub use assignment::{Assignment, Expr, FetchOp, Rhs};
pub use half_cutoff::{CutoffError, check_half_prec_constants};
pub use index::{Affine, AxisIndex, Symbol};
pub use loops::{
    GemmPlan, Index, LocalId, Lookup, LoopVar, Scalar, Stmt, Var, VecUnop, reads_own_iteration,
};
pub use lower::{LowerError, LowerErrorKind, lower, lower_with_statics};
pub use node::{MAX_AXES, MemoryMode, NodeId, TensorNode};
pub use ops::{Binop, Ternop, Unop, threefry4x32, threefry4x32_light};
pub use optimize::{OptimizeError, OptimizeErrorKind, optimize};
pub use padding::{MarginError, MarginErrorKind, Margins};
pub use plan_operand::{PlanLoop, PlanOperand};
pub use precision::{Precision, fp8_bits, fp8_value};
pub use projections::{Factor, Projections, Slot};
pub use routine::Routine;
pub use value::{Kind, Value};
