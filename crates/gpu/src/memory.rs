//! The device copies of a context's buffers: one storage buffer per node, made on the node's
//! first use on the device and kept until the buffers are dropped. The host reads a copy through
//! a staging buffer; it writes one through the queue, in order with the kernels submitted.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rcannl_backends::DeviceCopies;
use rcannl_backends::{RunError, RunErrorKind};
use rcannl_ir::NodeId;

use crate::device::Device;

/// Buffer sizes are multiples of this (wgpu copies and maps whole 4-byte words).
const ALIGNMENT: u64 = 4;

/// A failure of the device's copies.
fn run_error(message: String) -> RunError {
    RunError::new(RunErrorKind::Device, message)
}

/// The size of the device buffer holding `bytes` host bytes: whole words, at least one (a
/// binding may not be empty).
fn device_size(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(ALIGNMENT).max(1) * ALIGNMENT
}

/// Identities of device memories, unique in the process.
static NEXT_MEMORY: AtomicU64 = AtomicU64::new(0);

#[derive(Debug)]
pub(crate) struct DeviceMemory {
    /// Unique in the process: what compiled routines key the bind groups they made over it by.
    pub(crate) id: u64,
    device: Arc<Device>,
    buffers: HashMap<NodeId, wgpu::Buffer>,
}

impl DeviceMemory {
    pub(crate) fn new(device: Arc<Device>) -> DeviceMemory {
        DeviceMemory {
            id: NEXT_MEMORY.fetch_add(1, Ordering::Relaxed),
            device,
            buffers: HashMap::new(),
        }
    }

    /// The device buffer of `node`, which [`rcannl_backends::Buffers::to_device`] made.
    pub(crate) fn buffer(&self, node: NodeId) -> Result<&wgpu::Buffer, RunError> {
        self.buffers
            .get(&node)
            .ok_or_else(|| run_error(format!("{node} has no copy on the GPU")))
    }

    /// Whether these copies live on `device`.
    pub(crate) fn is_on(&self, device: &Arc<Device>) -> bool {
        Arc::ptr_eq(&self.device, device)
    }
}

impl DeviceCopies for DeviceMemory {
    fn read(&self, node: NodeId, bytes: &mut [u8]) -> Result<(), RunError> {
        let buffer = self.buffer(node)?;
        let device = &self.device;
        let size = device_size(bytes.len());
        let staging = device.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("rcannl read-back"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = device
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        encoder.copy_buffer_to_buffer(buffer, 0, &staging, 0, size);
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
            bytes.copy_from_slice(&view[..bytes.len()]);
        }
        staging.unmap();
        device
            .take_errors(&format!("reading {node} back"))
            .map_err(|e| run_error(e.message))
    }

    fn has(&self, node: NodeId) -> bool {
        self.buffers.contains_key(&node)
    }

    fn write(&mut self, node: NodeId, bytes: &[u8]) -> Result<(), RunError> {
        let size = device_size(bytes.len());
        if size > self.device.limits.max_storage_buffer_binding_size
            || size > self.device.limits.max_buffer_size
        {
            return Err(run_error(format!(
                "{node} needs a buffer of {size} bytes; this GPU binds at most {}",
                self.device.limits.max_storage_buffer_binding_size
            )));
        }
        let device = &self.device;
        let buffer = self.buffers.entry(node).or_insert_with(|| {
            device.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(&format!("{node}")),
                size,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        if bytes.len() as u64 == size {
            device.queue.write_buffer(buffer, 0, bytes);
        } else {
            let mut padded = bytes.to_vec();
            padded.resize(size as usize, 0);
            device.queue.write_buffer(buffer, 0, &padded);
        }
        Ok(())
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
