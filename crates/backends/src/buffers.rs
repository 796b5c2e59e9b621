//! Buffers: the memory of a routine's nodes, one array per node over its buffer dims (margins
//! included), in the node's own element type, aligned to 64 bytes so that compiled code can load
//! it with vector instructions. Every backend runs over these; cells are set and read by interior
//! position, as numbers or as typed [`Value`]s.
//!
//! A backend with memory of its own (a GPU's) attaches its copies ([`DeviceCopies`]) and keeps
//! them across routines; the buffers remember which side holds the newer cells of each node, so
//! that the host reads a node through the device only when the device wrote it last, and the
//! device uploads only what the host wrote since.

use std::any::Any;
use std::collections::HashSet;

use rustc_hash::FxHashMap;

use half::{bf16, f16};
use rcannl_ir::{Kind, MemoryMode, NodeId, Precision, Routine, TensorNode, Value};

use crate::error::{RunError, RunErrorKind};

/// 64 bytes, 64-aligned: the unit buffers are allocated in.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// The cells of one buffer, in the node's element type (native byte order).
#[derive(Clone)]
pub(crate) struct Storage {
    precision: Precision,
    len: usize,
    lines: Vec<Line>,
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Storage({} × {})", self.len, self.precision)
    }
}

impl Storage {
    /// The cells and bytes of `node`'s buffer, or an error naming it when its size does not fit
    /// in memory: checked before allocating, so that a huge shape is an error and never an
    /// abort.
    fn size(node: &TensorNode) -> Result<(usize, usize), RunError> {
        let precision = node.precision;
        let too_large = |what: String| {
            error(format!(
                "{} '{}' of dims {:?} (margins {:?}) {what}",
                node.id, node.label, node.dims, node.padding
            ))
        };
        let len = node
            .buffer_dims_checked()
            .and_then(|dims| dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d)))
            .ok_or_else(|| too_large("has more cells than an address space holds".to_owned()))?;
        let bytes = len
            .checked_mul(precision.size_in_bytes())
            .filter(|&bytes| bytes <= isize::MAX as usize)
            .ok_or_else(|| {
                too_large(format!("needs {len} cells of {precision}: too many bytes"))
            })?;
        if let Some(memory) = physical_memory().filter(|&memory| bytes > memory) {
            return Err(too_large(format!(
                "needs {bytes} bytes, more than the {memory} bytes of memory this machine has"
            )));
        }
        Ok((len, bytes))
    }

    /// A zeroed buffer for `node`, or an error naming it when its size does not fit in memory.
    fn zeroed(node: &TensorNode) -> Result<Storage, RunError> {
        let precision = node.precision;
        let (len, bytes) = Storage::size(node)?;
        let cannot = || {
            error(format!(
                "{} '{}' of dims {:?} (margins {:?}) needs {bytes} bytes, which cannot be \
                 allocated",
                node.id, node.label, node.dims, node.padding
            ))
        };
        let n_lines = bytes.div_ceil(64).max(1);
        // Allocated zeroed rather than allocated then zeroed: memory fresh from the system is
        // zero already, and a model's thousands of buffers are not written twice (once with
        // zeros, then by the routine that computes them) nor all touched before a run.
        let layout = std::alloc::Layout::array::<Line>(n_lines).map_err(|_| cannot())?;
        // SAFETY: the layout's size is not zero (`n_lines` ≥ 1 lines of 64 bytes).
        let start = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<Line>();
        if start.is_null() {
            return Err(cannot());
        }
        // SAFETY: `start` was allocated by the global allocator with the layout of `n_lines`
        // lines, each all zero bytes, which is a valid `Line`; the vector owns it from here.
        let lines = unsafe { Vec::from_raw_parts(start, n_lines, n_lines) };
        Ok(Storage {
            precision,
            len,
            lines,
        })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `Line` is a plain byte array without padding, and `lines` holds at least
        // `len · size` bytes.
        unsafe {
            std::slice::from_raw_parts(
                self.lines.as_ptr().cast::<u8>(),
                self.len * self.precision.size_in_bytes(),
            )
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        let n = self.len * self.precision.size_in_bytes();
        // SAFETY: as in `bytes`, and the borrow is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast::<u8>(), n) }
    }

    /// The start of the cells, 64-aligned, for compiled code.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.lines.as_mut_ptr().cast::<u8>()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn get(&self, i: usize) -> Value {
        let size = self.precision.size_in_bytes();
        let b = &self.bytes()[i * size..(i + 1) * size];
        let array = |b: &[u8]| -> [u8; 8] {
            let mut a = [0; 8];
            a[..b.len()].copy_from_slice(b);
            a
        };
        let word = |k: usize| u32::from_ne_bytes(b[4 * k..4 * k + 4].try_into().expect("4 bytes"));
        match self.precision {
            Precision::U8 => Value::Int(i64::from(b[0])),
            Precision::I8 => Value::Int(i64::from(b[0] as i8)),
            Precision::U16 => Value::Int(i64::from(u16::from_ne_bytes(
                b.try_into().expect("2 bytes"),
            ))),
            Precision::I32 => Value::Int(i64::from(i32::from_ne_bytes(
                b.try_into().expect("4 bytes"),
            ))),
            Precision::U32 => Value::Int(i64::from(word(0))),
            // A u64's bits, held in the i64 (see `Precision::U64`).
            Precision::I64 | Precision::U64 => Value::Int(i64::from_ne_bytes(array(b))),
            Precision::Fp8 => Value::Float(rcannl_ir::fp8_value(b[0])),
            Precision::F16 => Value::Float(
                f16::from_bits(u16::from_ne_bytes(b.try_into().expect("2 bytes"))).to_f64(),
            ),
            Precision::Bf16 => Value::Float(
                bf16::from_bits(u16::from_ne_bytes(b.try_into().expect("2 bytes"))).to_f64(),
            ),
            Precision::F32 => Value::Float(f64::from(f32::from_bits(word(0)))),
            Precision::F64 => Value::Float(f64::from_ne_bytes(array(b))),
            Precision::Uint4x32 => Value::Word([word(0), word(1), word(2), word(3)]),
        }
    }

    /// Every cell as a number, for a float buffer (f32 or f64) read whole: a copy, without a
    /// [`Value`] per cell. `None` for other precisions.
    fn floats(&self) -> Option<Vec<f64>> {
        let bytes = self.bytes();
        match self.precision {
            Precision::F32 => Some(
                bytes
                    .chunks_exact(4)
                    .map(|b| f64::from(f32::from_ne_bytes(b.try_into().expect("4 bytes"))))
                    .collect(),
            ),
            Precision::F64 => Some(
                bytes
                    .chunks_exact(8)
                    .map(|b| f64::from_ne_bytes(b.try_into().expect("8 bytes")))
                    .collect(),
            ),
            _ => None,
        }
    }

    /// Sets every cell of a float buffer (f32 or f64) from `values`, one per cell, rounded to
    /// the precision as [`Value::stored_as`] rounds; false (nothing set) for other precisions.
    fn set_floats(&mut self, values: &[f64]) -> bool {
        let precision = self.precision;
        let bytes = self.bytes_mut();
        match precision {
            Precision::F32 => {
                for (b, x) in bytes.chunks_exact_mut(4).zip(values) {
                    b.copy_from_slice(&(*x as f32).to_ne_bytes());
                }
            }
            Precision::F64 => {
                for (b, x) in bytes.chunks_exact_mut(8).zip(values) {
                    b.copy_from_slice(&x.to_ne_bytes());
                }
            }
            _ => return false,
        }
        true
    }

    /// Stores `value`, already converted by [`Value::stored_as`] to this buffer's precision.
    pub(crate) fn set(&mut self, i: usize, value: Value) {
        let size = self.precision.size_in_bytes();
        let precision = self.precision;
        let b = &mut self.bytes_mut()[i * size..(i + 1) * size];
        match precision {
            Precision::U8 => b[0] = value.as_i64() as u8,
            Precision::I8 => b[0] = value.as_i64() as i8 as u8,
            Precision::U16 => b.copy_from_slice(&(value.as_i64() as u16).to_ne_bytes()),
            Precision::I32 => b.copy_from_slice(&(value.as_i64() as i32).to_ne_bytes()),
            Precision::U32 => b.copy_from_slice(&(value.as_i64() as u32).to_ne_bytes()),
            Precision::I64 | Precision::U64 => {
                b.copy_from_slice(&value.as_i64().to_ne_bytes());
            }
            Precision::Fp8 => b[0] = rcannl_ir::fp8_bits(value.as_f64()),
            Precision::F16 => {
                b.copy_from_slice(&f16::from_f64(value.as_f64()).to_bits().to_ne_bytes());
            }
            Precision::Bf16 => {
                b.copy_from_slice(&bf16::from_f64(value.as_f64()).to_bits().to_ne_bytes());
            }
            Precision::F32 => b.copy_from_slice(&(value.as_f64() as f32).to_ne_bytes()),
            Precision::F64 => b.copy_from_slice(&value.as_f64().to_ne_bytes()),
            Precision::Uint4x32 => {
                for (k, w) in value.as_word(precision).iter().enumerate() {
                    b[4 * k..4 * k + 4].copy_from_slice(&w.to_ne_bytes());
                }
            }
        }
    }
}

/// Copies of buffers in a device's own memory, attached to [`Buffers`] by the backend that made
/// them.
pub trait DeviceCopies: std::fmt::Debug + Send + Sync {
    /// Reads the device's copy of `node`'s whole buffer into `bytes` (its host layout).
    fn read(&self, node: NodeId, bytes: &mut [u8]) -> Result<(), RunError>;

    /// Whether the device has a copy of `node`.
    fn has(&self, node: NodeId) -> bool;

    /// Makes the device's copy of `node` hold `bytes` (the whole buffer in its host layout).
    fn write(&mut self, node: &TensorNode, bytes: &[u8]) -> Result<(), RunError>;

    /// The copies as `Any`, for the backend that made them to find its own type.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// The buffers of a routine's nodes: each a row-major array over the node's buffer dims. A
/// buffer's memory is allocated, zeroed, when it is first used: a model's context knows a
/// buffer for every tensor and gradient, and the many that no routine keeps never take memory.
#[derive(Debug, Default)]
pub struct Buffers {
    // Looked up for every buffer of every run: hashed as the small integers they are.
    nodes: FxHashMap<NodeId, TensorNode>,
    /// The buffers allocated so far.
    data: FxHashMap<NodeId, Storage>,
    device: Option<Box<dyn DeviceCopies>>,
    /// Nodes the device wrote last: their host cells are stale.
    newer_on_device: HashSet<NodeId>,
    /// Nodes the host wrote since the device last saw them: their device copies are stale.
    newer_on_host: HashSet<NodeId>,
}

impl Clone for Buffers {
    /// A host-only copy: cells the device wrote last are read back into it.
    fn clone(&self) -> Buffers {
        let mut data = self.data.clone();
        for node in &self.newer_on_device {
            let (Some(device), Some(info)) = (&self.device, self.nodes.get(node)) else {
                continue;
            };
            let storage = match data.entry(*node) {
                std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
                std::collections::hash_map::Entry::Vacant(entry) => entry.insert(
                    Storage::zeroed(info).unwrap_or_else(|e| panic!("cloning buffers: {e}")),
                ),
            };
            device
                .read(*node, storage.bytes_mut())
                .unwrap_or_else(|e| panic!("cloning buffers: {e}"));
        }
        Buffers {
            nodes: self.nodes.clone(),
            data,
            device: None,
            newer_on_device: HashSet::new(),
            newer_on_host: HashSet::new(),
        }
    }
}

/// Every problem with the buffers themselves: missing, too large, given the wrong values.
fn error(message: String) -> RunError {
    RunError::new(RunErrorKind::Buffers, message)
}

impl Buffers {
    /// A zeroed buffer for each node; an error names a node too large to allocate.
    pub fn new(nodes: impl IntoIterator<Item = TensorNode>) -> Result<Buffers, RunError> {
        let mut buffers = Buffers::default();
        for node in nodes {
            buffers.insert(node)?;
        }
        Ok(buffers)
    }

    /// Adds a zeroed buffer for `node` unless it has one; an error names a node too large to
    /// allocate.
    pub fn insert(&mut self, node: TensorNode) -> Result<(), RunError> {
        if let std::collections::hash_map::Entry::Vacant(entry) = self.nodes.entry(node.id) {
            Storage::size(&node)?;
            entry.insert(node);
        }
        Ok(())
    }

    /// Allocates every buffer not yet allocated: for code that reads buffers it cannot
    /// allocate as it goes (the interpreter).
    pub fn allocate_all(&mut self) -> Result<(), RunError> {
        for (id, node) in &self.nodes {
            if !self.data.contains_key(id) {
                self.data.insert(*id, Storage::zeroed(node)?);
            }
        }
        Ok(())
    }

    /// Zeroed buffers for every node of `routine` that has storage (all but virtual ones).
    pub fn for_routine(routine: &Routine) -> Result<Buffers, RunError> {
        Buffers::new(
            routine
                .nodes
                .values()
                .filter(|node| node.memory_mode != Some(MemoryMode::Virtual))
                .cloned(),
        )
    }

    /// The nodes that have a buffer here, by id: dims, margins and precision of each.
    pub fn nodes(&self) -> &FxHashMap<NodeId, TensorNode> {
        &self.nodes
    }

    pub(crate) fn node(&self, node: NodeId) -> Result<&TensorNode, RunError> {
        self.nodes
            .get(&node)
            .ok_or_else(|| error(format!("no buffer for {node}")))
    }

    /// `node`'s allocated buffer; an error where it has none, or it is not allocated yet (see
    /// [`Buffers::allocate_all`]).
    pub(crate) fn storage(&self, node: NodeId) -> Result<&Storage, RunError> {
        self.data
            .get(&node)
            .ok_or_else(|| error(format!("no buffer for {node}")))
    }

    /// `node`'s buffer, allocated (zeroed) if it was not yet.
    pub(crate) fn storage_mut(&mut self, node: NodeId) -> Result<&mut Storage, RunError> {
        match self.data.entry(node) {
            std::collections::hash_map::Entry::Occupied(entry) => Ok(entry.into_mut()),
            std::collections::hash_map::Entry::Vacant(entry) => {
                let info = self
                    .nodes
                    .get(&node)
                    .ok_or_else(|| error(format!("no buffer for {node}")))?;
                Ok(entry.insert(Storage::zeroed(info)?))
            }
        }
    }

    /// The device copies attached, if any.
    pub fn device_copies(&mut self) -> Option<&mut (dyn DeviceCopies + 'static)> {
        self.device.as_deref_mut()
    }

    /// Attaches `copies` (replacing none: a backend attaches its copies once, before any run).
    pub fn attach_device(&mut self, copies: Box<dyn DeviceCopies>) -> Result<(), RunError> {
        if self.device.is_some() {
            return Err(error(
                "these buffers already have copies on another device".to_owned(),
            ));
        }
        self.device = Some(copies);
        Ok(())
    }

    /// Gives the device a current copy of `node`: uploads the host's cells where the device has
    /// no copy yet or the host wrote them since.
    pub fn to_device(&mut self, node: NodeId) -> Result<(), RunError> {
        let Some(device) = self.device.as_deref_mut() else {
            return Err(error("no device copies are attached".to_owned()));
        };
        if self.newer_on_device.contains(&node) {
            return Ok(());
        }
        if self.newer_on_host.remove(&node) || !device.has(node) {
            self.storage_mut(node)?;
            let (Some(device), Some(storage), Some(info)) = (
                self.device.as_deref_mut(),
                self.data.get(&node),
                self.nodes.get(&node),
            ) else {
                return Err(error(format!("no buffer for {node}")));
            };
            device.write(info, storage.bytes())?;
        }
        Ok(())
    }

    /// Records that the device wrote `node`: host reads go through the device from now on.
    pub fn mark_written_on_device(&mut self, node: NodeId) {
        self.newer_on_host.remove(&node);
        self.newer_on_device.insert(node);
    }

    /// Brings every node the device wrote back to the host, and treats every device copy as stale
    /// from now on: called before host code (the interpreter, compiled C) runs over the buffers.
    pub fn hand_to_host(&mut self) -> Result<(), RunError> {
        if self.device.is_none() {
            return Ok(());
        }
        for node in std::mem::take(&mut self.newer_on_device) {
            self.storage_mut(node)?;
            if let (Some(device), Some(storage)) = (&self.device, self.data.get_mut(&node)) {
                device.read(node, storage.bytes_mut())?;
            }
        }
        self.newer_on_host.extend(self.data.keys().copied());
        Ok(())
    }

    /// The current cells of `node`'s whole buffer: the host's own (zeros where nothing has
    /// allocated it yet), or read from the device where it wrote last.
    fn current(&self, node: NodeId) -> Result<std::borrow::Cow<'_, Storage>, RunError> {
        let data = match self.data.get(&node) {
            Some(data) => std::borrow::Cow::Borrowed(data),
            None => std::borrow::Cow::Owned(Storage::zeroed(self.node(node)?)?),
        };
        match &self.device {
            Some(device) if self.newer_on_device.contains(&node) => {
                let mut fresh = data.into_owned();
                device.read(node, fresh.bytes_mut())?;
                Ok(std::borrow::Cow::Owned(fresh))
            }
            _ => Ok(data),
        }
    }

    /// The host storage of `node` to write into: brought back from the device first where the
    /// device wrote last, and newer than the device's copy from now on.
    fn writable(&mut self, node: NodeId) -> Result<&mut Storage, RunError> {
        let on_device = self.newer_on_device.remove(&node);
        self.storage_mut(node)?;
        if on_device && let (Some(device), Some(storage)) = (&self.device, self.data.get_mut(&node))
        {
            device.read(node, storage.bytes_mut())?;
        }
        if self.device.is_some() {
            self.newer_on_host.insert(node);
        }
        self.storage_mut(node)
    }

    /// The whole buffer as numbers, margins included.
    pub fn buffer(&self, node: NodeId) -> Vec<f64> {
        let data = self.current(node).unwrap_or_else(|e| panic!("{e}"));
        (0..data.len()).map(|i| data.get(i).as_f64()).collect()
    }

    /// Sets the cells inside the margins (row-major over the node's dims) to `values`, stored as
    /// the node's precision holds them.
    pub fn set_cells(&mut self, node: NodeId, values: &[Value]) -> Result<(), RunError> {
        let info = self.node(node)?;
        let n = info.len();
        if values.len() != n {
            return Err(error(format!(
                "{node} '{}' has {n} cells, {} values given",
                info.label,
                values.len()
            )));
        }
        let positions = interior_offsets(info);
        let precision = info.precision;
        let data = self.writable(node)?;
        for (position, value) in positions.into_iter().zip(values) {
            data.set(position, value.stored_as(precision));
        }
        Ok(())
    }

    /// [`Buffers::set_cells`] from numbers.
    pub fn set_values(&mut self, node: NodeId, values: &[f64]) -> Result<(), RunError> {
        let info = self.node(node)?;
        if values.len() == info.len() && unpadded(info) {
            let data = self.writable(node)?;
            // Whole float buffers, a training step's gradients say, are set without a `Value`
            // per cell.
            if data.len() == values.len() && data.set_floats(values) {
                return Ok(());
            }
        }
        let cells: Vec<Value> = values.iter().map(|x| Value::Float(*x)).collect();
        self.set_cells(node, &cells)
    }

    /// The cells inside the margins, row-major over the node's dims; an error names a node
    /// without a buffer, or a device that failed to give its copy back.
    pub fn read_cells(&self, node: NodeId) -> Result<Vec<Value>, RunError> {
        let data = self.current(node)?;
        Ok(interior_offsets(self.node(node)?)
            .into_iter()
            .map(|position| data.get(position))
            .collect())
    }

    /// [`Buffers::read_cells`] as numbers (a word as its first 32-bit word, a u64 unsigned).
    pub fn read_values(&self, node: NodeId) -> Result<Vec<f64>, RunError> {
        let info = self.node(node)?;
        let precision = info.precision;
        if unpadded(info)
            && let Some(values) = self.current(node)?.floats()
            && values.len() == info.len()
        {
            // Whole float buffers are read without a `Value` per cell.
            return Ok(values);
        }
        Ok(self
            .read_cells(node)?
            .into_iter()
            .map(|cell| number(cell, precision))
            .collect())
    }

    /// The cells inside the margins, row-major over the node's dims.
    ///
    /// # Panics
    /// Where [`Buffers::read_cells`] fails: the node has no buffer, or its device failed.
    pub fn cells(&self, node: NodeId) -> Vec<Value> {
        self.read_cells(node).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The cells inside the margins as numbers (a word as its first 32-bit word, a u64
    /// unsigned).
    ///
    /// # Panics
    /// As [`Buffers::cells`].
    pub fn values(&self, node: NodeId) -> Vec<f64> {
        self.read_values(node).unwrap_or_else(|e| panic!("{e}"))
    }
}

/// A cell of `precision` as a number: a u64's bits count as unsigned.
fn number(cell: Value, precision: Precision) -> f64 {
    match cell {
        Value::Int(_) => cell.to_kind(Kind::Float, precision).as_f64(),
        other => other.as_f64(),
    }
}

/// The machine's physical memory in bytes, where the system tells it (Linux): no single buffer
/// can be larger.
/// Read once per process: a context makes a buffer per tensor.
fn physical_memory() -> Option<usize> {
    static MEMORY: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *MEMORY.get_or_init(|| {
        let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
        let line = meminfo.lines().find(|line| line.starts_with("MemTotal:"))?;
        let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
        kib.checked_mul(1024)
    })
}

/// Whether the node has no margins: its buffer holds its cells and nothing else, in order.
fn unpadded(node: &TensorNode) -> bool {
    node.padding.iter().all(|(l, r)| l + r == 0)
}

/// The buffer position of every interior cell, in row-major order over the unpadded dims.
fn interior_offsets(node: &TensorNode) -> Vec<usize> {
    if unpadded(node) {
        return (0..node.len()).collect();
    }
    let buffer_dims = node.buffer_dims();
    (0..node.len())
        .map(|cell| {
            let mut rest = cell;
            let mut position = 0;
            let mut stride = 1;
            for axis in (0..node.dims.len()).rev() {
                let coordinate = rest % node.dims[axis] + node.padding[axis].0;
                rest /= node.dims[axis];
                position += coordinate * stride;
                stride *= buffer_dims[axis];
            }
            position
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn every_precision_round_trips_through_its_bytes_and_is_aligned() {
        let cases = [
            (Precision::U8, Value::Int(200)),
            (Precision::I8, Value::Int(-5)),
            (Precision::I32, Value::Int(-70_000)),
            (Precision::U32, Value::Int(4_000_000_000)),
            (Precision::I64, Value::Int(i64::MIN + 3)),
            (Precision::F16, Value::Float(-1.5)),
            (Precision::Bf16, Value::Float(3.0e38_f32 as f64)),
            (Precision::F32, Value::Float(0.1f32 as f64)),
            (Precision::F64, Value::Float(0.1)),
            (Precision::Uint4x32, Value::Word([1, 2, 3, u32::MAX])),
        ];
        for (precision, value) in cases {
            let node = TensorNode::new(0, "t", precision, &[5]);
            let mut storage = Storage::zeroed(&node).unwrap();
            assert_eq!(storage.as_mut_ptr() as usize % 64, 0);
            let value = value.stored_as(precision);
            storage.set(3, value);
            assert_eq!(storage.get(3), value, "{precision}");
            assert_eq!(storage.get(2), Value::Float(0.0).stored_as(precision));
        }
    }

    #[test]
    fn a_buffer_too_large_is_an_error_naming_its_node() {
        for dims in [
            vec![1_000_000, 1_000_000],
            vec![usize::MAX / 2, 3],
            vec![1 << 40, 1 << 40, 1 << 40],
        ] {
            let node = TensorNode::new(7, "huge", Precision::F32, &dims);
            let e = Buffers::new([node]).unwrap_err();
            assert!(e.message.contains("'huge'"), "{}", e.message);
        }
        let mut padded = TensorNode::new(8, "padded", Precision::F64, &[2]);
        padded.padding = vec![(usize::MAX, 1)];
        let e = Buffers::new([padded]).unwrap_err();
        assert!(e.message.contains("more cells than"), "{}", e.message);
    }

    #[test]
    fn a_buffer_takes_memory_once_first_used_and_reads_as_zeros_before() {
        let nodes = [0, 1, 2].map(|id| TensorNode::new(id, "t", Precision::F32, &[4]));
        let mut buffers = Buffers::new(nodes).unwrap();
        assert!(buffers.data.is_empty());
        assert_eq!(buffers.read_values(NodeId(0)).unwrap(), vec![0.0; 4]);
        assert!(buffers.data.is_empty());
        buffers
            .set_values(NodeId(1), &[1.0, 2.0, 3.0, 4.0])
            .unwrap();
        buffers.storage_mut(NodeId(2)).unwrap();
        assert_eq!(buffers.data.len(), 2);
        assert_eq!(
            buffers.read_values(NodeId(1)).unwrap(),
            vec![1.0, 2.0, 3.0, 4.0]
        );
        buffers.allocate_all().unwrap();
        assert_eq!(buffers.data.len(), 3);
        assert!(Buffers::new([]).unwrap().storage_mut(NodeId(9)).is_err());
    }

    /// A device that keeps its copies in memory and counts the bytes moved each way.
    #[derive(Debug, Default)]
    struct CountingDevice {
        copies: HashMap<NodeId, Vec<u8>>,
        reads: std::sync::atomic::AtomicUsize,
        writes: usize,
    }

    impl DeviceCopies for CountingDevice {
        fn read(&self, node: NodeId, bytes: &mut [u8]) -> Result<(), RunError> {
            self.reads
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            bytes.copy_from_slice(&self.copies[&node]);
            Ok(())
        }

        fn has(&self, node: NodeId) -> bool {
            self.copies.contains_key(&node)
        }

        fn write(&mut self, node: &TensorNode, bytes: &[u8]) -> Result<(), RunError> {
            self.writes += 1;
            self.copies.insert(node.id, bytes.to_vec());
            Ok(())
        }

        fn as_any_mut(&mut self) -> &mut dyn Any {
            self
        }
    }

    fn counting(buffers: &mut Buffers) -> &mut CountingDevice {
        buffers
            .device_copies()
            .and_then(|d| d.as_any_mut().downcast_mut::<CountingDevice>())
            .unwrap()
    }

    #[test]
    fn values_move_between_host_and_device_only_when_the_other_side_is_stale() {
        let node = TensorNode::new(1, "x", Precision::F32, &[3]);
        let id = node.id;
        let mut buffers = Buffers::new([node]).unwrap();
        buffers.set_values(id, &[1.0, 2.0, 3.0]).unwrap();
        buffers
            .attach_device(Box::new(CountingDevice::default()))
            .unwrap();
        // The first use uploads; later uses without host writes do not.
        buffers.to_device(id).unwrap();
        buffers.to_device(id).unwrap();
        assert_eq!(counting(&mut buffers).writes, 1);
        // The device writes: host reads go through it, once per read, and see its cells.
        let doubled: Vec<u8> = [2.0f32, 4.0, 6.0]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        counting(&mut buffers).copies.insert(id, doubled);
        buffers.mark_written_on_device(id);
        assert_eq!(buffers.read_values(id).unwrap(), vec![2.0, 4.0, 6.0]);
        assert_eq!(buffers.clone().values(id), vec![2.0, 4.0, 6.0]);
        assert_eq!(
            counting(&mut buffers)
                .reads
                .load(std::sync::atomic::Ordering::Relaxed),
            2
        );
        // Still newer on the device: nothing to upload.
        buffers.to_device(id).unwrap();
        assert_eq!(counting(&mut buffers).writes, 1);
        // A host write of one cell keeps the device's other cells and uploads on the next use.
        buffers.set_values(id, &[7.0, 4.0, 6.0]).unwrap();
        buffers.to_device(id).unwrap();
        let device = counting(&mut buffers);
        assert_eq!(device.writes, 2);
        let uploaded: Vec<f32> = device.copies[&id]
            .chunks(4)
            .map(|b| f32::from_ne_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(uploaded, vec![7.0, 4.0, 6.0]);
        // A node the device wrote that the host never allocated reads, clones and comes back
        // to the host with the device's cells.
        let fresh = TensorNode::new(2, "y", Precision::F32, &[3]);
        let fresh_id = fresh.id;
        buffers.insert(fresh).unwrap();
        let ones: Vec<u8> = [1.0f32; 3].iter().flat_map(|x| x.to_ne_bytes()).collect();
        counting(&mut buffers).copies.insert(fresh_id, ones);
        buffers.mark_written_on_device(fresh_id);
        assert_eq!(buffers.read_values(fresh_id).unwrap(), vec![1.0; 3]);
        assert_eq!(buffers.clone().values(fresh_id), vec![1.0; 3]);
        // Host code running over the buffers first brings the device's cells back.
        buffers.mark_written_on_device(id);
        counting(&mut buffers).copies.insert(id, vec![0; 12]);
        buffers.hand_to_host().unwrap();
        assert_eq!(buffers.storage(id).unwrap().get(0), Value::Float(0.0));
        assert_eq!(buffers.storage(fresh_id).unwrap().get(0), Value::Float(1.0));
        assert!(
            buffers
                .attach_device(Box::new(CountingDevice::default()))
                .is_err()
        );
    }
}
