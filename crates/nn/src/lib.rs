//! Neural-network building blocks for rcannl.
//!
//! This crate will own blocks (MLP, convolution, pooling, normalization, attention, transformer),
//! losses, optimizers, training loops, data sets, checkpoints and plots, all written against
//! `rcannl-tensor`.
