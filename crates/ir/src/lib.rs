//! The intermediate representations of rcannl.
//!
//! This crate will own precisions, primitive operations and accumulators, the projection vocabulary
//! (`Symbol`, `AxisIndex`, `Projections`), tensor nodes, assignments, their lowering to loops and the
//! loop-level optimizations. It depends on no other rcannl crate: shape inference produces its
//! projection records, backends consume its loops.
