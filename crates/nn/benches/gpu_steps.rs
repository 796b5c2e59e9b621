//! What one training step costs on the GPU, in figures that do not depend on the hardware:
//! kernels dispatched (beside the C backend's kernels for the same step), bytes copied from the
//! host to the device and back, and bytes of device memory held — for the examples' models (the
//! moons MLP, the digits CNN, the resnet, the names transformer), the practitioner GPT and a
//! larger MLP. A step should
//! copy only its batch in and its loss out. Run with `cargo bench -p rcannl-nn --bench
//! gpu_steps`; without a GPU adapter it says so in one line.
//!
//! Each model takes a few steps first (pipelines built, parameters uploaded, optimizer state
//! made), then the counters of `rcannl_backends::traffic` are read around a few more.

// Shared with the suite, which times workloads not counted here.
#[path = "suite/workloads.rs"]
#[allow(dead_code)]
mod workloads;

use rcannl_backends::traffic::Traffic;
use rcannl_tensor::{BackendChoice, TensorError};
use workloads::Step;

/// Steps taken before counting.
const WARM: u64 = 3;
/// Steps counted.
const COUNTED: u64 = 5;

type Build = fn(BackendChoice) -> Result<Step, TensorError>;

const MODELS: [(&str, Build); 6] = [
    ("moons MLP b32, SGD", |on| workloads::moons_step(32, on)),
    ("digits CNN b32, Adam", workloads::digits_step),
    ("resnet b32, Adam", workloads::resnet_step),
    ("names transformer, Adam", workloads::transformer_step),
    ("practitioner GPT, AdamW", workloads::gpt_step),
    ("MLP 784-512-512-10 b128, Adam", workloads::mlp_step),
];

/// The counts of `COUNTED` steps of `build` on `on`, after `WARM` steps.
fn counted(build: Build, on: BackendChoice) -> Result<Traffic, TensorError> {
    let mut step = build(on)?;
    for _ in 0..WARM {
        step()?;
    }
    let before = Traffic::now();
    for _ in 0..COUNTED {
        step()?;
    }
    Ok(Traffic::now().since(before))
}

fn main() -> Result<(), TensorError> {
    if let Err(e) = BackendChoice::Gpu.backend() {
        println!("gpu_steps: no GPU to count on: {e}");
        return Ok(());
    }
    println!(
        "per training step, the mean of {COUNTED} after {WARM}:\n{:<32} {:>12} {:>10} {:>14} {:>14} {:>12}",
        "model", "GPU kernels", "C kernels", "to device B", "from device B", "device MiB"
    );
    for (label, build) in MODELS {
        let gpu = counted(build, BackendChoice::Gpu)?;
        let cc = counted(build, BackendChoice::Cc)?;
        println!(
            "{label:<32} {:>12.1} {:>10.1} {:>14.1} {:>14.1} {:>12.2}",
            gpu.kernels as f64 / COUNTED as f64,
            cc.kernels as f64 / COUNTED as f64,
            gpu.bytes_to_device as f64 / COUNTED as f64,
            gpu.bytes_from_device as f64 / COUNTED as f64,
            gpu.device_bytes as f64 / (1 << 20) as f64
        );
    }
    Ok(())
}
