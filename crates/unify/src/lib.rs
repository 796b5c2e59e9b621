//! Nothing to use: this crate's dependencies give every build of the rcannl workspace the same
//! dependency features (see its `Cargo.toml`).
//!
//! Cargo resolves features per selection of packages, and the workspace's test-only
//! dependencies ask for more than the libraries do: without this crate, `cargo run -p rcannl-cli`
//! after `cargo test --workspace` rebuilt every crate. `rcannl-ir`, below every other crate,
//! depends on this one, which asks for those features (and, as build dependencies, for those of
//! the host's procedural macros). `.ci/run` checks that building or test-building the
//! command-line tool, the facade's examples and the libraries above the backends after the
//! workspace's tests compiles nothing. The crates below them, built alone, still rebuild their
//! own dependencies: the same features, under another profile hash.

#![warn(missing_docs)]
