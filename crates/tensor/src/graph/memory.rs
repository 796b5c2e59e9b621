//! Memory modes chosen by the user: where a tensor's values live while and after a routine
//! runs, over the optimizer's own choice ([`rcannl_ir::optimize::memory`]'s rule). A context
//! compiles each routine with the tensors' choices; the choice that cannot be honoured is an
//! error naming the tensor, never a silent fallback.

use rcannl_ir::MemoryMode;

use crate::tensor::Tensor;

impl Tensor {
    /// Chooses where the tensor's values live in every routine compiled from now on, over the
    /// optimizer's choice (OCANNL's memory modes):
    ///
    /// - [`MemoryMode::Materialized`]: a buffer that outlives the routine, so that
    ///   [`Context::values`](crate::Context::values) reads it after any routine computing it (an
    ///   intermediate to inspect, a feature to reuse);
    /// - [`MemoryMode::Virtual`]: no buffer at all, recomputed wherever it is read (a reduction
    ///   summed again at each cell that reads it); a routine in which it cannot be (a
    ///   concatenation, written part by part; a padded convolution input) is an error naming the
    ///   tensor;
    /// - [`MemoryMode::Local`]: scratch storage for one run.
    ///
    /// Parameters, and tensors a routine must hand back (a forward's outputs, an optimizer's
    /// state), are materialized: choosing another mode for one is an error of the routines that
    /// keep it.
    pub fn set_memory_mode(&self, mode: MemoryMode) {
        let mut state = self.graph.state.lock();
        state.memory_modes.insert(self.index, mode);
    }

    /// The memory mode chosen for the tensor ([`Tensor::set_memory_mode`]), if one was.
    pub fn memory_mode(&self) -> Option<MemoryMode> {
        let state = self.graph.state.lock();
        state.memory_modes.get(&self.index).copied()
    }
}
