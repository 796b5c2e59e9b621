//! Nothing to use: this crate's dependencies give every build of the rcannl workspace the same
//! dependency features (see its `Cargo.toml`).

#![warn(missing_docs)]
