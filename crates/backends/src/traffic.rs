//! What the compiled backends do, counted for the whole process: kernels run (the C backend's
//! steps, the GPU's dispatches), bytes copied between host and device, bytes of device memory
//! held. Benchmarks read the difference around a training step ([`Traffic::since`]); the
//! backends count through the functions here.

use std::sync::atomic::{AtomicU64, Ordering};

static KERNELS: AtomicU64 = AtomicU64::new(0);
static TO_DEVICE: AtomicU64 = AtomicU64::new(0);
static FROM_DEVICE: AtomicU64 = AtomicU64::new(0);
static HELD: AtomicU64 = AtomicU64::new(0);

/// The counts at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Traffic {
    /// Kernels run: each of the C backend's kernels and products, each GPU dispatch (a kernel
    /// run in chunks counts each).
    pub kernels: u64,
    /// Bytes copied from the host to the device: tensors' values and the kernels' parameters.
    pub bytes_to_device: u64,
    /// Bytes copied from the device back to the host.
    pub bytes_from_device: u64,
    /// Bytes of device memory held now.
    pub device_bytes: u64,
}

impl Traffic {
    /// The counts now.
    pub fn now() -> Traffic {
        Traffic {
            kernels: KERNELS.load(Ordering::Relaxed),
            bytes_to_device: TO_DEVICE.load(Ordering::Relaxed),
            bytes_from_device: FROM_DEVICE.load(Ordering::Relaxed),
            device_bytes: HELD.load(Ordering::Relaxed),
        }
    }

    /// What happened since `earlier` (the memory held: as now).
    pub fn since(self, earlier: Traffic) -> Traffic {
        Traffic {
            kernels: self.kernels - earlier.kernels,
            bytes_to_device: self.bytes_to_device - earlier.bytes_to_device,
            bytes_from_device: self.bytes_from_device - earlier.bytes_from_device,
            device_bytes: self.device_bytes,
        }
    }
}

/// Counts `n` kernels run.
pub fn count_kernels(n: u64) {
    KERNELS.fetch_add(n, Ordering::Relaxed);
}

/// Counts `bytes` copied from the host to the device.
pub fn count_to_device(bytes: u64) {
    TO_DEVICE.fetch_add(bytes, Ordering::Relaxed);
}

/// Counts `bytes` copied from the device to the host.
pub fn count_from_device(bytes: u64) {
    FROM_DEVICE.fetch_add(bytes, Ordering::Relaxed);
}

/// Counts `bytes` of device memory taken.
pub fn hold(bytes: u64) {
    HELD.fetch_add(bytes, Ordering::Relaxed);
}

/// Counts `bytes` of device memory given back.
pub fn release(bytes: u64) {
    HELD.fetch_sub(bytes, Ordering::Relaxed);
}
