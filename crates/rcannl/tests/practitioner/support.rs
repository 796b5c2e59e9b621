//! What the practitioner programs share: the backends they run on (the GPU too, in the precisions
//! it holds), PyTorch's reference arrays (`.npy` files that each program's `reference.py` writes
//! beside it, PyTorch being no test-time dependency), and comparisons whose tolerance follows
//! the precision compared.

use std::path::PathBuf;
use std::sync::Once;

use rcannl::backends::cc::Compiler;
use rcannl::backends::{Backend, Interpreter, settings};
use rcannl::gpu::Gpu;
use rcannl::gpu::wgsl::holds;
use rcannl::ir::Precision;
use rcannl::tensor::npy;
use rcannl::tensor::{Context, Tensor};

/// The backends a program computing in `precision` runs on: the interpreter, the C backend, and
/// the GPU where it holds the precision (f32 always, f64 where the device offers shader-f64 and
/// shader-int64). Without a GPU adapter the GPU is left out after one line saying so, unless the
/// `require_gpu` setting (`RCANNL_REQUIRE_GPU=1`) is on, which makes the missing device a
/// failure.
pub fn backends(precision: Precision) -> Vec<Box<dyn Backend>> {
    let mut backends: Vec<Box<dyn Backend>> = vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ];
    if let Some(gpu) = gpu() {
        if holds(precision, gpu.device().features()) {
            backends.push(Box::new(gpu));
        } else {
            eprintln!("this GPU holds no {precision}: a program in it did not run there");
        }
    }
    backends
}

/// The GPU backend, where this machine has an adapter.
fn gpu() -> Option<Gpu> {
    static SAID: Once = Once::new();
    match Gpu::new() {
        Ok(gpu) => Some(gpu),
        Err(e) if settings::flag(&settings::REQUIRE_GPU).unwrap() => {
            panic!("RCANNL_REQUIRE_GPU is set, and the GPU backend cannot open a device: {e}")
        }
        Err(e) => {
            SAID.call_once(|| eprintln!("the practitioner programs did not run on the GPU: {e}"));
            None
        }
    }
}

/// The folder of `program`'s reference arrays.
pub fn folder(program: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/practitioner")
        .join(program)
}

/// The reference array `name` of `program`: its dims and values (row-major).
pub fn reference(program: &str, name: &str) -> (Vec<usize>, Vec<f64>) {
    let path = folder(program).join(format!("{name}.npy"));
    let reader = npy::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (dims, cells) = reader
        .read_cells(usize::MAX)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (dims, cells.into_iter().map(|c| c.as_f64()).collect())
}

/// Sets `t` from `program`'s reference array `name` (the values PyTorch's program started
/// from), which has `t`'s dims in memory order.
pub fn set_from_reference(ctx: &mut Context, t: &Tensor, program: &str, name: &str) {
    let path = folder(program).join(format!("{name}.npy"));
    ctx.load_npy(t, &path)
        .unwrap_or_else(|e| panic!("'{}' from {}: {e}", t.label(), path.display()));
}

/// How far a value of `precision` may be from PyTorch's, relative to the larger of its size and
/// the largest reference value compared (cells near zero are sums of larger terms).
pub fn tolerance(precision: Precision) -> f64 {
    match precision {
        Precision::F64 => 1e-10,
        _ => 1e-5,
    }
}

/// Checks `got` against `program`'s reference array `name`, cell by cell, within the
/// tolerance of `precision`.
pub fn check(what: &str, got: &[f64], program: &str, name: &str, precision: Precision) {
    let (_, want) = reference(program, name);
    assert_eq!(got.len(), want.len(), "{what}: number of cells");
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-30);
    let tolerance = tolerance(precision);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let error = (g - w).abs() / w.abs().max(scale);
        assert!(
            error <= tolerance,
            "{what}, cell {i}: {g} vs PyTorch's {w} (relative error {error:.2e} above {tolerance:.0e})"
        );
    }
}
