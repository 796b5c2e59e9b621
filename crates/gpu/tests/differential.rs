//! The differential suites on the GPU: the random routines and random graphs of `rcannl-fuzz`
//! (the budget `rcannl-fuzz`'s own tests give the C backend) must give the interpreter's results
//! on the GPU. Cases are drawn in the precisions the device holds: a seed that draws f64, bf16 or
//! i64 (or f16 on a device without it) makes the same case in f32 or i32.

mod common;

use common::OnDevice;
use rcannl_fuzz::{Comparison, Precisions, Tolerance, graphs, routines};

/// How far the GPU's float results may be from the interpreter's: relative, absolute below a
/// magnitude of 1. Integers and random bits must be equal.
///
/// f32: the interpreter computes each expression in f64 and rounds it once, on the store; the
/// GPU rounds every operation to f32 (6e-8 each), and its transcendentals are not correctly
/// rounded: WGSL allows `exp` and `exp2` 3 + 2·|x| units in the last place, `log` and `log2` an
/// absolute 2⁻²¹ near 1, `tanh` and `pow` what their definitions through `exp` and `log2`
/// inherit, and `sin` and `cos` an absolute 2⁻¹¹ (4.9e-4) on [−π, π]. 1e-3 holds the sine's
/// bound with room for an operation or two after it; a wrong index, operation or reduction moves
/// these O(1) values much further. Sums run in the interpreter's order, matrix products included
/// (each runs as the nest it stands for).
///
/// f16: cells are computed in f32 and rounded on the store, where the interpreter rounds its f64
/// value: one rounding of f16 (4.9e-4) may differ per store, and a chain of stores compounds it,
/// as on the C backend.
fn comparison(gpu: &OnDevice) -> Comparison {
    Comparison {
        precisions: Precisions::Gpu {
            f16: gpu.0.device().has_f16(),
        },
        tolerance: Tolerance {
            half: 1e-2,
            single: 1e-3,
            double: Tolerance::HOST.double,
        },
    }
}

#[test]
fn random_routines_agree() {
    let Some(gpu) = common::gpu().map(OnDevice) else {
        return;
    };
    let seeds: Vec<u64> = (0..300).collect();
    if let Err(mismatch) = routines::check_on(&gpu, &seeds, &comparison(&gpu)) {
        panic!("{mismatch}");
    }
}

#[test]
fn random_graphs_agree() {
    let Some(gpu) = common::gpu().map(OnDevice) else {
        return;
    };
    let comparison = comparison(&gpu);
    for seed in 0..40 {
        if let Err(mismatch) = graphs::check_on(Box::new(gpu.clone()), seed, &comparison) {
            panic!("{mismatch}");
        }
    }
}
