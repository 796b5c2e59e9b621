//! The intermediate representations of rcannl.
//!
//! It owns the projection vocabulary: loop symbols and axis indices (`index`), and the record of
//! how one assignment iterates and indexes its tensors, with the predicates lowering reads off it
//! and the slot views gradients use (`projections`), and the padding margins of a buffer
//! (`padding`). Precisions, primitive operations and
//! accumulators, tensor nodes, assignments, their lowering to loops and the loop-level
//! optimizations are to come. It depends on no other rcannl crate: shape inference produces its
//! projection records, backends consume its loops.

pub mod index;
pub mod padding;
pub mod projections;

pub use index::{Affine, AxisIndex, Symbol};
pub use padding::{MarginError, Margins};
pub use projections::{Factor, Projections, Slot};
