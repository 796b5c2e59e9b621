//! Neural-network building blocks for rcannl, written against `rcannl-tensor`.
//!
//! `blocks` has layers whose sizes come from use (dense layers, multi-layer perceptrons, and
//! `Linear`, PyTorch's dense layer applied at every position), `attention` multi-head self- and
//! cross-attention (`MultiheadAttention` with projection biases; masks that say where to attend,
//! where not to, or what to add to the scores), rotary embeddings and the pre-norm transformer
//! block, `transformer` the encoder and decoder blocks and the encoder–decoder model, `position`
//! positional encodings, `norm` softmax over any axis and layer, batch (with a momentum or a
//! cumulative average), group and RMS normalization over one or several trailing axes, `conv`
//! convolutions (full and depthwise) and pooling, `cnn` convolutional blocks (convolution with
//! batch normalization, residual, VGG, LeNet, depthwise-separable), `embedding` token embeddings,
//! `dropout` counter-based dropout, `loss` reductions and every loss (class ids with PyTorch's
//! `ignore_index` and label smoothing, sequences with masks), `metrics` argmax and accuracies,
//! `optim` optimizers as update routines (parameter groups, coupled and decoupled weight decay,
//! AMSGrad, dampening) with learning-rate schedules, `train` the training loop with its progress
//! bar, `sample` tokens chosen from logits for generation (temperature, top-k), `checkpoint` tensors saved to and loaded from safetensors files by label, `files` files
//! written whole or not at all and read within their length, `data` generated data sets,
//! `devices` data-parallel training across the devices of one process (a context per backend or
//! GPU adapter), `distributed` data-parallel training over MPI (with the `mpi` feature), and
//! `plot` PNG plots (a loss curve, decision regions).
//!
//! # Precision
//!
//! A block's `new` leaves its parameters' precision (and its tables' and statistics') to
//! precision inference, as OCANNL's layers do: they hold what their users compute in — f32
//! beside f32 data, f16 beside f16 data — and the graph's default precision
//! (`Graph::set_default_precision`, f32 unless changed) where nothing decides, so that a model
//! built after `graph.set_default_precision(Precision::Bf16)` is a bf16 model. A block's
//! `with_precision` (or an options struct's `precision`) chooses one instead.
//!
//! # Features
//!
//! - `plot` (default): the `plot` module, drawn with plotters. Without it the module is absent,
//!   and no plotting library is built.
//! - `gpu` (default): the GPU backend of `rcannl-tensor` (`RCANNL_BACKEND=gpu`); without it,
//!   choosing the GPU is an error saying that this build has none.
//! - `mpi`: the `distributed` module (needs an MPI library and libclang).

#![warn(missing_docs)]

pub mod attention;
pub mod blocks;
pub mod checkpoint;
pub mod cnn;
pub mod conv;
pub mod data;
pub mod devices;
#[cfg(feature = "mpi")]
pub mod distributed;
pub mod dropout;
pub mod embedding;
pub mod files;
pub mod loss;
pub mod metrics;
pub mod norm;
pub mod optim;
#[cfg(feature = "plot")]
pub mod plot;
pub mod position;
pub mod sample;
pub mod train;
pub mod transformer;
