//! rcannl: write tensor arithmetic; the compiler infers shapes, loop nests, reductions, padding and
//! gradients.
//!
//! This facade re-exports the workspace crates so that users depend on one package. The einsum
//! notation is available today as [`spec`]:
//!
//! ```
//! let spec = rcannl::spec::parse_einsum("ij;jk=>ik").unwrap();
//! assert_eq!(spec.to_string(), "i, j; j, k => i, k");
//! ```

pub use rcannl_backends as backends;
pub use rcannl_ir as ir;
pub use rcannl_nn as nn;
pub use rcannl_shape as shape;
pub use rcannl_shape::spec;
pub use rcannl_tensor as tensor;
