//! 2-D convolutions on the C backend against the interpreter: the forward, the kernel gradient
//! and the input gradient, as backpropagation writes them, for 3×3 and 1×1 kernels, strides 1
//! and 2, zero margins (padded) or none (valid), channels first and last, batches, channel
//! counts that are no multiple of a vector's width and odd sizes; on the f32 product the target
//! picks and on each other kernel this CPU runs, forced. Inputs are quarter-integers, so every
//! sum is exact and the results must be equal.

use std::collections::HashMap;

use crate::common::*;
use rcannl_backends::Buffers;
use rcannl_backends::cc::{Compiler, F32Product, cpu_extensions};
use rcannl_backends::interpreter::run_routine;
use rcannl_ir::optimize::optimize;
use rcannl_ir::{AxisIndex, Binop, MemoryMode, Precision, Routine, Stmt, TensorNode};

/// A convolution's shape: `channels` in, `out_channels` out, a `kernel × kernel` window every
/// `stride` cells over an image of `size × size` pixels (plus a zero margin of `kernel / 2` on
/// every side when `padded`).
#[derive(Debug, Clone, Copy)]
struct Conv {
    batch: usize,
    channels: usize,
    out_channels: usize,
    size: usize,
    kernel: usize,
    stride: usize,
    padded: bool,
    channels_last: bool,
}

/// Which of a convolution's three products a routine computes.
#[derive(Debug, Clone, Copy)]
enum Pass {
    /// `y[b,o,h,w] =:+ x[b,c,s·h+i,s·w+j] · k[o,c,i,j]`.
    Forward,
    /// `dk[o,c,i,j] =:+ x[b,c,s·h+i,s·w+j] · g[b,o,h,w]`.
    KernelGradient,
    /// `dx[b,c,s·h+i,s·w+j] += g[b,o,h,w] · k[o,c,i,j]`: the windows overlap.
    InputGradient,
}

impl Conv {
    /// The output's side.
    fn out_size(&self) -> usize {
        let margin = if self.padded { self.kernel / 2 } else { 0 };
        (self.size + 2 * margin - self.kernel) / self.stride + 1
    }

    /// An image node: its logical dims, and its index from pixel and channel indices.
    fn image(&self, channels: usize, side: usize, [h, w, c]: [AxisIndex; 3]) -> Image {
        if self.channels_last {
            (vec![self.batch, side, side, channels], vec![it(0), h, w, c])
        } else {
            (vec![self.batch, channels, side, side], vec![it(0), c, h, w])
        }
    }

    /// The routine of `pass`: symbols b o h w c i j; nodes x 0, k 1, y or g 2, dk or dx 3.
    fn routine(&self, pass: Pass) -> Routine {
        let (s, kk) = (self.stride as i64, self.kernel);
        let margin = if self.padded { self.kernel / 2 } else { 0 };
        // Logical coordinates: a padded window starts in the margin.
        let window = |o: u32, k: u32| affine(&[(s, o), (1, k)], -(margin as i64));
        let out = self.out_size();
        let ranges = [
            self.batch,
            self.out_channels,
            out,
            out,
            self.channels,
            kk,
            kk,
        ];
        let (x_dims, x_index) = self.image(
            self.channels,
            self.size,
            [window(2, 5), window(3, 6), it(4)],
        );
        let (y_dims, y_index) = self.image(self.out_channels, out, [it(2), it(3), it(1)]);
        // Beside channels last, the kernel's input channels come last too, as `rcannl-nn` lays
        // kernels out.
        let (k_dims, k_index) = if self.channels_last {
            (
                vec![self.out_channels, kk, kk, self.channels],
                vec![it(1), it(5), it(6), it(4)],
            )
        } else {
            (
                vec![self.out_channels, self.channels, kk, kk],
                vec![it(1), it(4), it(5), it(6)],
            )
        };
        let (written, reads, initialize) = match pass {
            Pass::Forward => (
                (&y_dims, y_index.clone()),
                [(&x_dims, x_index.clone()), (&k_dims, k_index.clone())],
                true,
            ),
            Pass::KernelGradient => (
                (&k_dims, k_index.clone()),
                [(&x_dims, x_index.clone()), (&y_dims, y_index.clone())],
                true,
            ),
            Pass::InputGradient => (
                (&x_dims, x_index.clone()),
                [(&y_dims, y_index.clone()), (&k_dims, k_index.clone())],
                false,
            ),
        };
        let operands = match pass {
            Pass::Forward => (0, 1),
            Pass::KernelGradient => (0, 2),
            Pass::InputGradient => (2, 1),
        };
        let lhs = match pass {
            Pass::Forward => 2,
            Pass::KernelGradient | Pass::InputGradient => 3,
        };
        let assignment = binary(
            initialize,
            Binop::Add,
            lhs,
            Binop::Mul,
            operands,
            projections(
                &ranges,
                (written.0, written.1),
                reads
                    .iter()
                    .map(|(d, i)| (d.as_slice(), i.clone()))
                    .collect(),
            ),
        );
        let image_node = |id: u32| {
            let mut node = TensorNode::new(id, &format!("t{id}"), Precision::F32, &x_dims);
            for (axis, pad) in node.padding.iter_mut().enumerate() {
                let spatial = if self.channels_last {
                    axis == 1 || axis == 2
                } else {
                    axis >= 2
                };
                if spatial {
                    *pad = (margin, margin);
                }
            }
            node
        };
        let f32_node =
            |id: u32, dims: &[usize]| TensorNode::new(id, &format!("t{id}"), Precision::F32, dims);
        let mut nodes = vec![image_node(0), f32_node(1, &k_dims), f32_node(2, &y_dims)];
        nodes.push(match pass {
            Pass::InputGradient => image_node(3),
            _ => f32_node(3, &k_dims),
        });
        if let Pass::Forward = pass {
            nodes.pop();
        }
        let mut routine = Routine::lower("conv", &assignment, nodes).unwrap();
        for node in routine.nodes.values_mut() {
            node.memory_mode = Some(MemoryMode::Materialized);
        }
        routine
    }
}

/// An image's dims and index.
type Image = (Vec<usize>, Vec<AxisIndex>);

fn compiler() -> Compiler {
    Compiler::find()
        .expect("a C compiler (cc or $CC)")
        .with_cache_dir(&std::env::temp_dir().join("rcannl-test-cache"))
}

/// The default f32 product, the one chosen for the baseline x86-64 (the AVX2 kernel where this
/// CPU has it, else the `gemm` crate), and every other one this CPU runs, forced.
fn compilers() -> Vec<(String, Compiler)> {
    let mut compilers = vec![
        ("chosen".to_owned(), compiler()),
        (
            "baseline".to_owned(),
            compiler().with_flags(&["-O3", "-march=x86-64"]),
        ),
        (
            "gemm crate".to_owned(),
            compiler().with_f32_product(F32Product::GemmCrate),
        ),
    ];
    let cpu = cpu_extensions();
    if cpu.contains(&"avx2") && cpu.contains(&"fma") {
        compilers.push((
            "avx2".to_owned(),
            compiler().with_f32_product(F32Product::Avx2),
        ));
    } else {
        eprintln!("this CPU lacks AVX2 or FMA: the AVX2 kernel is not run");
    }
    compilers
}

/// Asserts that `routine` gives the interpreter's results on `compiler`, from quarter-integer
/// inputs (and leftovers in the results, which an accumulation must keep).
fn assert_matches_the_interpreter(compiler: &Compiler, routine: &Routine, label: &str) {
    let optimized = optimize(routine).unwrap();
    let compiled = compiler.compile(&optimized).unwrap();
    let mut interpreted = Buffers::for_routine(routine).unwrap();
    let mut native = Buffers::for_routine(&optimized).unwrap();
    for (n, node) in routine.nodes.values().enumerate() {
        let values: Vec<f64> = (0..node.len())
            .map(|i| ((i * 7 + n * 3) % 17) as f64 / 4.0 - 2.0)
            .collect();
        interpreted.set_values(node.id, &values).unwrap();
        native.set_values(node.id, &values).unwrap();
    }
    run_routine(routine, &mut interpreted, &HashMap::new()).unwrap();
    compiled.run(&mut native, &HashMap::new()).unwrap();
    for node in routine.nodes.values() {
        let (want, got) = (interpreted.values(node.id), native.values(node.id));
        let differ = want.iter().zip(&got).position(|(w, g)| w != g);
        assert_eq!(want.len(), got.len(), "{label}: node {}", node.id);
        assert_eq!(
            differ.map(|at| (at, want[at], got[at])),
            None,
            "{label}: node {} differs at (cell, interpreter, compiled)",
            node.id
        );
    }
}

fn products(routine: &Routine) -> usize {
    routine
        .body
        .iter()
        .filter(|s| matches!(s, Stmt::Gemm { .. }))
        .count()
}

/// The cases: 3×3 and 1×1, strides 1 and 2, padded and valid, both layouts; odd sizes, channel
/// counts of no vector's width, batches of 2 and 3 (each product large enough to run as one).
fn cases() -> Vec<Conv> {
    let mut cases = Vec::new();
    for channels_last in [false, true] {
        for (kernel, stride, padded) in [
            (3, 1, false),
            (3, 1, true),
            (3, 2, false),
            (3, 2, true),
            (1, 1, false),
            (1, 2, false),
        ] {
            for (batch, channels, out_channels, size) in [(3, 13, 19, 15), (2, 17, 11, 21)] {
                cases.push(Conv {
                    batch,
                    channels,
                    out_channels,
                    size,
                    kernel,
                    stride,
                    padded,
                    channels_last,
                });
            }
        }
    }
    cases
}

fn assert_pass_matches(pass: Pass, runs_as_a_product: impl Fn(&Conv) -> bool) {
    let compilers = compilers();
    for conv in cases() {
        let routine = conv.routine(pass);
        let optimized = optimize(&routine).unwrap();
        if runs_as_a_product(&conv) {
            assert_eq!(products(&optimized), 1, "{conv:?} {pass:?}: {optimized}");
        }
        for (name, compiler) in &compilers {
            assert_matches_the_interpreter(
                compiler,
                &routine,
                &format!("{conv:?} {pass:?} {name}"),
            );
        }
    }
}

#[test]
fn the_forward_gives_the_interpreters_result() {
    assert_pass_matches(Pass::Forward, |_| true);
}

#[test]
fn the_kernel_gradient_gives_the_interpreters_result() {
    assert_pass_matches(Pass::KernelGradient, |_| true);
}

#[test]
fn the_input_gradient_gives_the_interpreters_result() {
    // Unstrided, the overlapping windows are gathered over the zero-widened output gradient; a
    // strided gradient stays loops.
    assert_pass_matches(Pass::InputGradient, |conv| conv.stride == 1);
}
