//! The shape crate's integration tests, one module a file, built as one test binary. The solver's
//! property tests run each case in a child process (proptest's `fork`), which reruns this binary
//! on that one test by its full name, module included.

mod common;
mod conv_bases;
mod empty_axes;
mod logic;
mod projection_canonicity;
mod projections;
mod solver_order;
mod solver_termination;
mod spec_constructs;
mod spec_fuzz;
mod spec_roundtrip;
