//! The device copies of a context's buffers, packed into arenas: for each storage class a few
//! storage buffers, each holding many tensors at offsets (see [`crate::kernel`]), so that a
//! kernel binds a buffer per class it touches, not one per tensor. A tensor is placed on its
//! first use on the device and keeps its place until the buffers are dropped; an arena grows
//! (copied on the device into a larger buffer) up to what the adapter binds at once, and a new
//! arena of the class is started past that. The host reads a copy through a staging buffer; it
//! writes one through the queue, in order with the kernels submitted.

use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rcannl_backends::DeviceCopies;
use rcannl_backends::{RunError, RunErrorKind};
use rcannl_ir::{NodeId, Precision, TensorNode};

use crate::device::Device;
use crate::kernel::{Arena, Class, Placement};
use crate::widened;
use rcannl_backends::traffic;

/// Places in an arena are multiples of this (the largest cell, a 128-bit word), and so are
/// copies' sizes (wgpu copies and maps whole 4-byte words).
const ALIGNMENT: u64 = 16;

/// The smallest arena made: small tensors share one from the start.
const FIRST_ARENA: u64 = 1 << 20;

/// A failure of the device's copies.
fn run_error(message: String) -> RunError {
    RunError::new(RunErrorKind::Device, message)
}

/// The bytes a tensor of `bytes` host bytes takes on the device: whole 4-byte words, at least
/// one.
fn device_size(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4).max(1) * 4
}

/// Identities of device memories, unique in the process.
static NEXT_MEMORY: AtomicU64 = AtomicU64::new(0);

/// Where a tensor lies: its arena and its first byte there.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Place {
    pub(crate) arena: Arena,
    pub(crate) offset: u64,
}

/// A tensor's place and the precision of its cells, which says how they are held there.
#[derive(Debug, Clone, Copy)]
struct Placed {
    place: Place,
    precision: Precision,
}

#[derive(Debug)]
struct ArenaBuffer {
    buffer: wgpu::Buffer,
    /// Bytes placed, from the start.
    used: u64,
}

#[derive(Debug)]
pub(crate) struct DeviceMemory {
    /// Unique in the process: what compiled routines key the bind groups they made over it by.
    pub(crate) id: u64,
    /// Counts the arenas' replacements by larger ones, which bind groups made before miss.
    pub(crate) generation: u64,
    device: Arc<Device>,
    arenas: BTreeMap<Class, Vec<ArenaBuffer>>,
    places: HashMap<NodeId, Placed>,
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        let bytes = self
            .arenas
            .values()
            .flatten()
            .map(|a| a.buffer.size())
            .sum();
        traffic::release(bytes);
    }
}

impl DeviceMemory {
    pub(crate) fn new(device: Arc<Device>) -> DeviceMemory {
        DeviceMemory {
            id: NEXT_MEMORY.fetch_add(1, Ordering::Relaxed),
            generation: 0,
            device,
            arenas: BTreeMap::new(),
            places: HashMap::new(),
        }
    }

    /// Where `node` lies, once [`rcannl_backends::Buffers::to_device`] placed it.
    pub(crate) fn place(&self, node: NodeId) -> Result<Place, RunError> {
        self.placed(node).map(|placed| placed.place)
    }

    /// [`DeviceMemory::place`], with the precision its cells are held for.
    fn placed(&self, node: NodeId) -> Result<Placed, RunError> {
        self.places
            .get(&node)
            .copied()
            .ok_or_else(|| run_error(format!("{node} has no copy on the GPU")))
    }

    /// The buffer of `arena`.
    pub(crate) fn arena(&self, arena: Arena) -> Result<&wgpu::Buffer, RunError> {
        self.arenas
            .get(&arena.class)
            .and_then(|a| a.get(arena.index as usize))
            .map(|a| &a.buffer)
            .ok_or_else(|| run_error(format!("the GPU has no arena {arena}")))
    }

    /// The arenas of `nodes` other than arena 0 of their class.
    pub(crate) fn placement(&self, nodes: impl Iterator<Item = NodeId>) -> Placement {
        nodes
            .filter_map(|n| {
                let arena = self.places.get(&n)?.place.arena;
                (arena.index != 0).then_some((n, arena.index))
            })
            .collect()
    }

    /// Whether these copies live on `device`.
    pub(crate) fn is_on(&self, device: &Arc<Device>) -> bool {
        Arc::ptr_eq(&self.device, device)
    }

    fn new_buffer(&self, class: Class, index: usize, size: u64) -> wgpu::Buffer {
        traffic::hold(size);
        self.device.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(&format!("rcannl {} arena {index}", class.name())),
            size,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// A place for `size` bytes of cells of `class`: after the last tensor of the first arena
    /// with room, else in the last arena grown, else in a new arena.
    fn allocate(&mut self, class: Class, size: u64) -> Place {
        let cap = self.device.arena_bytes();
        let reserved = size.next_multiple_of(ALIGNMENT);
        let count = self.arenas.get(&class).map_or(0, Vec::len);
        let with_room = self.arenas.get(&class).and_then(|arenas| {
            arenas
                .iter()
                .position(|a| a.used + reserved <= a.buffer.size())
        });
        let index = match with_room {
            Some(index) => index,
            None => {
                let last = self
                    .arenas
                    .get(&class)
                    .and_then(|a| a.last())
                    .filter(|a| a.used + reserved <= cap)
                    .map(|a| (a.used, a.buffer.size()));
                match last {
                    Some((used, old)) => {
                        let size = (2 * old).max(used + reserved).min(cap);
                        self.grow(class, count - 1, size);
                        count - 1
                    }
                    None => {
                        let size = FIRST_ARENA.max(reserved).min(cap);
                        let buffer = self.new_buffer(class, count, size);
                        self.arenas
                            .entry(class)
                            .or_default()
                            .push(ArenaBuffer { buffer, used: 0 });
                        count
                    }
                }
            }
        };
        let arena = &mut self.arenas.get_mut(&class).expect("made above")[index];
        let offset = arena.used;
        arena.used += reserved;
        Place {
            arena: Arena {
                class,
                index: index as u32,
            },
            offset,
        }
    }

    /// Replaces arena `index` of `class` by one of `size` bytes holding what it held.
    fn grow(&mut self, class: Class, index: usize, size: u64) {
        let bigger = self.new_buffer(class, index, size);
        let arena = &mut self.arenas.get_mut(&class).expect("growing an arena")[index];
        let device = &self.device;
        let mut encoder = device
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        encoder.copy_buffer_to_buffer(&arena.buffer, 0, &bigger, 0, arena.used);
        device.queue.submit([encoder.finish()]);
        traffic::release(arena.buffer.size());
        arena.buffer = bigger;
        self.generation += 1;
    }
}

impl DeviceCopies for DeviceMemory {
    fn read(&self, node: NodeId, bytes: &mut [u8]) -> Result<(), RunError> {
        let Placed { place, precision } = self.placed(node)?;
        let buffer = self.arena(place.arena)?;
        let device = &self.device;
        let widened = widened::widened_bytes(precision, bytes.len());
        let size = device_size(widened.unwrap_or(bytes.len()));
        let staging = device.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("rcannl read-back"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = device
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        encoder.copy_buffer_to_buffer(buffer, place.offset, &staging, 0, size);
        device.queue.submit([encoder.finish()]);
        let (sender, receiver) = std::sync::mpsc::channel();
        staging
            .slice(..)
            .map_async(wgpu::MapMode::Read, move |result| {
                // The receiver waits below; a send can only fail once it is gone.
                let _ = sender.send(result);
            });
        device
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| run_error(format!("reading {node} back from the GPU: {e}")))?;
        receiver
            .recv()
            .map_err(|e| run_error(format!("reading {node} back from the GPU: {e}")))?
            .map_err(|e| run_error(format!("reading {node} back from the GPU: {e}")))?;
        {
            let view = staging
                .slice(..)
                .get_mapped_range()
                .map_err(|e| run_error(format!("reading {node} back from the GPU: {e}")))?;
            match widened {
                Some(held) => widened::narrow(precision, &view[..held], bytes),
                None => bytes.copy_from_slice(&view[..bytes.len()]),
            }
        }
        staging.unmap();
        traffic::count_from_device(widened.unwrap_or(bytes.len()) as u64);
        device
            .take_errors(&format!("reading {node} back"))
            .map_err(|e| run_error(e.message))
    }

    fn has(&self, node: NodeId) -> bool {
        self.places.contains_key(&node)
    }

    fn write(&mut self, node: &TensorNode, host: &[u8]) -> Result<(), RunError> {
        let precision = node.precision;
        let widened = widened::widen(precision, host);
        let bytes = widened.as_deref().unwrap_or(host);
        let size = device_size(bytes.len());
        let cap = self.device.arena_bytes();
        if size > cap {
            return Err(run_error(format!(
                "tensor '{}' needs {size} bytes on the GPU; this GPU binds at most {cap} bytes \
                 in one storage buffer",
                node.label
            )));
        }
        let place = match self.places.get(&node.id) {
            Some(placed) => placed.place,
            None => {
                let place = self.allocate(Class::of(precision), size);
                self.places.insert(node.id, Placed { place, precision });
                place
            }
        };
        let buffer = self.arena(place.arena)?;
        if bytes.len() as u64 == size {
            self.device.queue.write_buffer(buffer, place.offset, bytes);
        } else {
            let mut padded = bytes.to_vec();
            padded.resize(size as usize, 0);
            self.device
                .queue
                .write_buffer(buffer, place.offset, &padded);
        }
        traffic::count_to_device(bytes.len() as u64);
        Ok(())
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
