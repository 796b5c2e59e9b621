//! Cases of the GPU backend itself, instantiated for the GPU alone: matrix products on its tiled
//! product kernel, loops longer than one invocation may run, models of many tensors in its
//! arenas, the programs it keeps on disk, a GPU opened on a chosen adapter training beside
//! the C backend, and its refusal to trace stores.

mod arenas;
mod devices;
mod long_loops;
mod products;
mod program_cache;
mod trace;

use rcannl_gpu::Gpu;

use crate::target::Target;

/// The GPU of a GPU case, as the backend itself (parameter initialization included, which it
/// runs on the host).
fn device(target: &Target) -> Gpu {
    target.gpu().expect("a GPU case").0.clone()
}
