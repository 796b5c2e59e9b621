//! What every GPU test shares: the backend, or one line saying why the suite did not run.

#![allow(dead_code)] // each test file uses its own subset

use rcannl_backends::CompileError;
use rcannl_backends::{Backend, Executable};
use rcannl_gpu::Gpu;
use rcannl_gpu::wgsl::{DeviceFeatures, check_precisions};
use rcannl_ir::Routine;

/// The GPU backend; `None`, after one line on standard error saying why, when this machine has
/// no adapter, unless `RCANNL_REQUIRE_GPU` is set, which makes its absence a failure.
pub fn gpu() -> Option<Gpu> {
    match Gpu::new() {
        Ok(gpu) => Some(gpu),
        Err(e) => {
            assert!(
                std::env::var_os("RCANNL_REQUIRE_GPU").is_none(),
                "RCANNL_REQUIRE_GPU is set but there is no GPU: {e}"
            );
            eprintln!("the GPU suite did not run: {e}");
            None
        }
    }
}

/// The GPU backend, refusing to compile a routine that it would run on the host (every routine
/// but parameter initialization, which computes in f64 on the host by design), so that a suite
/// meant for the device cannot pass on the host's results.
#[derive(Debug, Clone)]
pub struct OnDevice(pub Gpu);

impl Backend for OnDevice {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn target(&self) -> Option<String> {
        self.0.target()
    }

    fn compile(&self, routine: &Routine) -> Result<Box<dyn Executable>, CompileError> {
        let features = DeviceFeatures {
            f16: self.0.device().has_f16(),
        };
        if routine.name != "init"
            && let Err(e) = check_precisions(routine, features)
        {
            return Err(CompileError::from(e).context(format_args!(
                "routine {} would run on the host, not on the GPU",
                routine.name
            )));
        }
        self.0.compile(routine)
    }
}
