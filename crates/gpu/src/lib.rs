//! The GPU backend of rcannl: WGSL compute shaders generated from the loop IR, run through
//! `wgpu` on Vulkan, Metal or DX12.
//!
//! `wgsl` turns a routine into kernels (`product` writes the tiled kernel of a matrix product)
//! and `cache` keeps them on disk; `device` finds the adapter and keeps the process's one device,
//! its compiled pipelines and the errors it reports; `memory` keeps the buffers' device copies,
//! attached to [`rcannl_backends::Buffers`], so that values stay on the device across routines;
//! `backend` is the [`rcannl_backends::Backend`] that compiles and runs routines.

#![warn(missing_docs)]

pub mod backend;
mod cache;
pub mod device;
mod kernel;
mod memory;
mod product;
mod schedule;
pub mod wgsl;

pub use backend::Gpu;
pub use device::{Device, GpuError, GpuErrorKind};
