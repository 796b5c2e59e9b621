//! The GPU backend of rcannl: WGSL compute shaders generated from the loop IR, run through
//! `wgpu` on Vulkan, Metal or DX12.
//!
//! `wgsl` turns a routine into kernels (`kernel` says what a kernel binds, `schedule` how loops
//! are laid over invocations and dispatches, `product` writes the tiled kernel of a matrix
//! product) and `cache` keeps them on disk; `device` lists the adapters, opens devices on them
//! and keeps the process's shared device, each device's compiled pipelines and the errors it
//! reports; `memory` keeps the buffers' device copies in arenas, attached to
//! [`rcannl_backends::Buffers`], so that values stay on the device across routines (`widened`
//! converts the cells held in a wider type than their own); `backend` is
//! the [`rcannl_backends::Backend`] that compiles and runs routines, counting what it
//! dispatches, copies and holds in [`rcannl_backends::traffic`].

#![warn(missing_docs)]

pub mod backend;
mod cache;
pub mod device;
mod kernel;
mod memory;
mod product;
mod schedule;
pub mod wgsl;
mod widened;

pub use backend::{Gpu, SOURCE_FOLDER};
pub use device::{Adapter, Device, GpuError, GpuErrorKind};
