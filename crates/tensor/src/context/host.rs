//! Host access to a context's buffers: values, cells and gradients read and set, dims, arrays,
//! `.npy` files and printing.

use std::path::Path;

use rcannl_ir::{Assignment, Precision, Projections, Value};
use rcannl_shape::spec::Kind;

use crate::array::Array;
use crate::graph::{Asg, TensorError, TensorErrorKind, error, error_of};
use crate::npy;
use crate::tensor::Tensor;

use super::{Context, grad_node, value_node};

impl Context {
    pub(super) fn check_tensor(&self, t: &Tensor) -> Result<(), TensorError> {
        self.graph.check_owns("context", &[t])?;
        if let Some(e) = t.error() {
            return Err(e);
        }
        if !self.nodes.contains_key(&value_node(t.index)) {
            return Err(error(format!(
                "tensor '{}' has no buffer yet: compile a routine that uses it first",
                t.label()
            )));
        }
        Ok(())
    }

    /// Whether the tensor of this context's graph holds values to read: given when it was built,
    /// set from the host, initialized (a parameter), or computed and kept by a routine that ran.
    pub fn holds_values(&self, t: &Tensor) -> bool {
        self.graph.owns(t) && self.holds.contains(&value_node(t.index))
    }

    /// An error for a tensor that holds no values yet, naming it and how it gets values.
    fn check_holds_values(&self, t: &Tensor) -> Result<(), TensorError> {
        if !self.holds_values(t) {
            return Err(self.unheld(value_node(t.index)));
        }
        Ok(())
    }

    /// The tensor's values, row-major in memory order (batch, output, input axes).
    pub fn values(&self, t: &Tensor) -> Result<Vec<f64>, TensorError> {
        self.check_tensor(t)?;
        self.check_holds_values(t)?;
        self.buffers
            .read_values(value_node(t.index))
            .map_err(|e| error_of(TensorErrorKind::Run, e.to_string()).caused_by(e))
    }

    /// The tensor's cells exactly as stored (row-major in memory order): integers as integers
    /// (all 64 bits), 128-bit words as their four words, floats as numbers.
    pub fn cells(&self, t: &Tensor) -> Result<Vec<Value>, TensorError> {
        self.check_tensor(t)?;
        self.check_holds_values(t)?;
        self.buffers
            .read_cells(value_node(t.index))
            .map_err(|e| error_of(TensorErrorKind::Run, e.to_string()).caused_by(e))
    }

    /// Sets the tensor's cells (row-major in memory order), each stored as the tensor's
    /// precision holds it.
    pub fn set_cells(&mut self, t: &Tensor, cells: &[Value]) -> Result<(), TensorError> {
        self.concretize()?;
        self.check_tensor(t)?;
        self.buffers
            .set_cells(value_node(t.index), cells)
            .map_err(|e| error(format!("set cells of '{}': {e}", t.label())))?;
        self.holds.insert(value_node(t.index));
        Ok(())
    }

    /// Sets the tensor's cells to those `source` holds, exactly as stored there: `source` is
    /// another context of this context's graph, on another backend or device, say.
    pub fn copy_values_from(&mut self, source: &Context, t: &Tensor) -> Result<(), TensorError> {
        self.check_same_graph(source, "copy_values_from")?;
        source.check_holds_values(t)?;
        let cells = source.cells(t)?;
        self.set_cells(t, &cells)
    }

    /// Sets every parameter of the graph that `source` (another context of this context's
    /// graph) holds values of to those values, as [`Context::copy_values_from`] does: a model's
    /// copies on several devices start alike.
    pub fn copy_params_from(&mut self, source: &Context) -> Result<(), TensorError> {
        self.check_same_graph(source, "copy_params_from")?;
        for param in self.graph.params() {
            if source.holds_values(&param) {
                self.copy_values_from(source, &param)?;
            }
        }
        Ok(())
    }

    /// Refuses a context of another graph, whose tensors are not this context's.
    fn check_same_graph(&self, other: &Context, doing: &str) -> Result<(), TensorError> {
        if self.graph.id() == other.graph.id() {
            return Ok(());
        }
        Err(error(format!(
            "{doing}: the source context is of another graph; values copy only between contexts \
             of one graph"
        )))
    }

    /// The gradient of the last backprop's loss with respect to the tensor: a leaf, or a
    /// computed tensor a backprop routine keeps the gradient of.
    pub fn grad(&self, t: &Tensor) -> Result<Vec<f64>, TensorError> {
        self.check_tensor(t)?;
        self.check_grad_kept(t)?;
        self.check_grad_holds(t)?;
        self.buffers
            .read_values(grad_node(t.index))
            .map_err(|e| error_of(TensorErrorKind::Run, e.to_string()).caused_by(e))
    }

    /// The gradient of the last backprop's loss with respect to the tensor (as [`Context::grad`]),
    /// its cells exactly as stored: integers as integers (all 64 bits).
    pub fn grad_cells(&self, t: &Tensor) -> Result<Vec<Value>, TensorError> {
        self.check_tensor(t)?;
        self.check_grad_kept(t)?;
        self.check_grad_holds(t)?;
        self.buffers
            .read_cells(grad_node(t.index))
            .map_err(|e| error_of(TensorErrorKind::Run, e.to_string()).caused_by(e))
    }

    /// Sets the gradient of the tensor (row-major in memory order), as a backprop routine keeps
    /// it, for an update routine to read: gradients merged from elsewhere (other processes of a
    /// data-parallel run, say).
    pub fn set_grad(&mut self, t: &Tensor, values: &[f64]) -> Result<(), TensorError> {
        self.check_tensor(t)?;
        self.check_grad_kept(t)?;
        self.buffers
            .set_values(grad_node(t.index), values)
            .map_err(|e| error(format!("set the gradient of '{}': {e}", t.label())))?;
        self.holds.insert(grad_node(t.index));
        Ok(())
    }

    /// Refuses a gradient no routine that ran has computed (nor the host set).
    fn check_grad_holds(&self, t: &Tensor) -> Result<(), TensorError> {
        if self.holds.contains(&grad_node(t.index)) {
            return Ok(());
        }
        Err(self.unheld(grad_node(t.index)))
    }

    /// Refuses a tensor whose gradient no backprop routine keeps.
    fn check_grad_kept(&self, t: &Tensor) -> Result<(), TensorError> {
        if self.grads_kept.contains(&t.index) {
            return Ok(());
        }
        Err(error_of(
            TensorErrorKind::NoValues,
            format!(
                "no gradient of '{}' is kept: backprop keeps the gradients of the differentiable \
             leaves its loss depends on, backprop_keeping those of computed tensors too",
                t.label()
            ),
        ))
    }

    /// Sets the tensor's values (row-major in memory order).
    pub fn set_values(&mut self, t: &Tensor, values: &[f64]) -> Result<(), TensorError> {
        self.concretize()?;
        self.check_tensor(t)?;
        self.buffers
            .set_values(value_node(t.index), values)
            .map_err(|e| error(format!("set values of '{}': {e}", t.label())))?;
        self.holds.insert(value_node(t.index));
        Ok(())
    }

    /// The tensor's dims in memory order (batch, output, input).
    pub fn dims(&mut self, t: &Tensor) -> Result<Vec<usize>, TensorError> {
        self.concretize()?;
        self.check_tensor(t)?;
        Ok(self.nodes[&value_node(t.index)].dims.clone())
    }

    /// The tensor's dims by kind: batch, input and output axes (after inference).
    pub fn rows(&mut self, t: &Tensor) -> Result<[Vec<usize>; 3], TensorError> {
        self.concretize()?;
        self.check_tensor(t)?;
        let state = self.graph.state.lock();
        let shape = state.inference.closed_shape(state.tensors[t.index].shape)?;
        Ok([Kind::Batch, Kind::Input, Kind::Output].map(|kind| {
            shape
                .row(kind)
                .dims()
                .map(|d| d.ground_size().unwrap_or(1))
                .collect()
        }))
    }

    /// The projections of the assignments computing `t` (one per forward assignment of its
    /// operation), as its routine lowers them; empty for a leaf.
    pub fn projections(&mut self, t: &Tensor) -> Result<Vec<Projections>, TensorError> {
        self.concretize()?;
        self.check_tensor(t)?;
        let forward: Vec<Asg> = {
            let state = self.graph.state.lock();
            match state.tensors[t.index].op {
                Some(op) if state.ops[op].result == t.index => state.ops[op].forward.clone(),
                _ => Vec::new(),
            }
        };
        let mut records = Vec::new();
        for asg in &forward {
            match self.assignment(asg)? {
                Assignment::Accum { projections, .. }
                | Assignment::Block { projections, .. }
                | Assignment::RevSides { projections, .. }
                | Assignment::Gather { projections, .. }
                | Assignment::ScatterAdd { projections, .. } => records.push(projections),
                _ => {}
            }
        }
        Ok(records)
    }

    /// The tensor's values with its dims ([`Array`]), row-major in memory order: batch, output,
    /// then input axes.
    pub fn array(&mut self, t: &Tensor) -> Result<Array, TensorError> {
        let [batch, input, output] = self.rows(t)?;
        let values = self.values(t)?;
        Array::new(batch, output, input, values)
            .map_err(|e| error(format!("array of '{}': {e}", t.label())))
    }

    /// Writes the tensor's values to `path` as a `.npy` array, replacing the file whole or not
    /// at all: its dims in memory order (batch, output, input), the dtype of its precision
    /// ([`npy::Dtype::of_precision`]: bf16, which numpy lacks, widens exactly to float32, fp8
    /// to float16; the 128-bit word, not a number, is refused).
    pub fn save_npy(&mut self, t: &Tensor, path: impl AsRef<Path>) -> Result<(), TensorError> {
        let path = path.as_ref();
        let about = |why: &str| format!("save_npy of '{}' to {}: {why}", t.label(), path.display());
        let precision = t.precision();
        let dtype = npy::Dtype::of_precision(precision).ok_or_else(|| {
            error(about(&format!(
                "its precision {precision} is not a number numpy reads"
            )))
        })?;
        let dims = self.dims(t)?;
        let cells = self.cells(t).map_err(|e| {
            let message = about(&e.message);
            e.reworded(message)
        })?;
        npy::write(path, &dims, dtype, &cells)
            .map_err(|e| error_of(TensorErrorKind::Io, about(&e.message)).caused_by(e))
    }

    /// Sets the tensor's values from the `.npy` file at `path`, whose dims must be the tensor's
    /// in memory order (batch, output, input), in C or Fortran order, of any dtype of numbers
    /// (each cell stored as the tensor's precision holds it, as [`Context::set_cells`] stores
    /// it). A file that is not such an array, or of other dims, is an error naming the file, the
    /// tensor and both shapes; nothing is allocated for a file's claims beyond the tensor's size.
    pub fn load_npy(&mut self, t: &Tensor, path: impl AsRef<Path>) -> Result<(), TensorError> {
        let path = path.as_ref();
        let about =
            |why: &str| format!("load_npy of {} into '{}': {why}", path.display(), t.label());
        let unreadable =
            |e: npy::NpyError| error_of(TensorErrorKind::Io, about(&e.message)).caused_by(e);
        let dims = self.dims(t)?;
        let reader = npy::open(path).map_err(unreadable)?;
        let header = reader.header();
        let same = header.dims.len() == dims.len()
            && header.dims.iter().zip(&dims).all(|(&f, &d)| f == d as u64);
        if !same {
            let shown: Vec<String> = dims.iter().map(usize::to_string).collect();
            return Err(error_of(
                TensorErrorKind::Io,
                about(&format!(
                    "the file holds an array of dims ({}), the tensor has dims ({}) (shape {})",
                    header.dims_text(),
                    shown.join(", "),
                    t.shape()
                )),
            ));
        }
        // A u64 tensor takes a uint64 file's cells as their bits: every one exactly, where the
        // numbers from 2^63 up would be the nearest floats.
        let as_stored = t.precision() == Precision::U64
            && header.dtype.kind == npy::NumberKind::Uint
            && header.dtype.size == 8;
        let (_, cells) = if as_stored {
            reader.read_cells_as_stored(dims.iter().product())
        } else {
            reader.read_cells(dims.iter().product())
        }
        .map_err(unreadable)?;
        self.set_cells(t, &cells).map_err(|e| {
            let message = about(&e.message);
            e.reworded(message)
        })
    }

    /// The tensor printed: its label, closed shape `batch|input->output` and values.
    pub fn describe(&mut self, t: &Tensor) -> Result<String, TensorError> {
        self.concretize()?;
        let values = self.values(t)?;
        let shown: Vec<String> = values.iter().map(|v| format!("{v:.6}")).collect();
        Ok(format!(
            "{} : {} = [{}]",
            t.label(),
            t.shape(),
            shown.join(", ")
        ))
    }
}
