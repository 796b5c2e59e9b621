//! Two devices in one process: the C backend and a GPU opened on a chosen adapter (a device of
//! its own, beside the suite's shared one) train a model data-parallel, each on its shard of
//! every batch, as the C backend alone does on whole batches, in f32.

use rcannl_backends::cc::Compiler;
use rcannl_gpu::{Adapter, Device, Gpu};
use rcannl_ir::Precision;

use crate::support;
use crate::target::{OnDevice, Target};

fn the_c_backend_and_a_chosen_gpu_train_as_one_device_on_whole_batches(target: &Target) {
    let shared = super::device(target);
    let adapter = Adapter::find("").expect("an adapter, since the shared device opened");
    let gpu = Gpu::on(Device::open(&adapter).unwrap());
    assert!(!std::sync::Arc::ptr_eq(gpu.device(), shared.device()));
    let cc = || Box::new(Compiler::find().expect("a C compiler (cc or $CC)"));
    support::check_data_parallel(
        vec![cc(), Box::new(OnDevice(gpu))],
        cc(),
        Precision::F32,
        1e-5,
    );
}
conformance!(the_c_backend_and_a_chosen_gpu_train_as_one_device_on_whole_batches: gpu);
