//! What the GPU backend does, counted for the whole process: kernels dispatched, bytes copied
//! between host and device, bytes of device memory its arenas hold. Benchmarks read the
//! difference around a training step ([`Traffic::since`]).

use std::sync::atomic::{AtomicU64, Ordering};

static DISPATCHES: AtomicU64 = AtomicU64::new(0);
static TO_DEVICE: AtomicU64 = AtomicU64::new(0);
static FROM_DEVICE: AtomicU64 = AtomicU64::new(0);
static HELD: AtomicU64 = AtomicU64::new(0);

/// The counts at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Traffic {
    /// Kernels dispatched (a kernel run in chunks counts each dispatch).
    pub dispatches: u64,
    /// Bytes copied from the host to the device: tensors' values and the kernels' parameters.
    pub bytes_to_device: u64,
    /// Bytes copied from the device back to the host.
    pub bytes_from_device: u64,
    /// Bytes of device memory the arenas hold now.
    pub device_bytes: u64,
}

impl Traffic {
    /// The counts now.
    pub fn now() -> Traffic {
        Traffic {
            dispatches: DISPATCHES.load(Ordering::Relaxed),
            bytes_to_device: TO_DEVICE.load(Ordering::Relaxed),
            bytes_from_device: FROM_DEVICE.load(Ordering::Relaxed),
            device_bytes: HELD.load(Ordering::Relaxed),
        }
    }

    /// What happened since `earlier` (the memory held: as now).
    pub fn since(self, earlier: Traffic) -> Traffic {
        Traffic {
            dispatches: self.dispatches - earlier.dispatches,
            bytes_to_device: self.bytes_to_device - earlier.bytes_to_device,
            bytes_from_device: self.bytes_from_device - earlier.bytes_from_device,
            device_bytes: self.device_bytes,
        }
    }
}

pub(crate) fn count_dispatches(n: u64) {
    DISPATCHES.fetch_add(n, Ordering::Relaxed);
}

pub(crate) fn count_written(bytes: u64) {
    TO_DEVICE.fetch_add(bytes, Ordering::Relaxed);
}

pub(crate) fn count_read(bytes: u64) {
    FROM_DEVICE.fetch_add(bytes, Ordering::Relaxed);
}

pub(crate) fn hold(bytes: u64) {
    HELD.fetch_add(bytes, Ordering::Relaxed);
}

pub(crate) fn release(bytes: u64) {
    HELD.fetch_sub(bytes, Ordering::Relaxed);
}
