//! Matrix products: which nests the optimizer hands to the tuned product (and what it
//! materializes for them), and the C backend's products against the interpreter for every
//! arrangement of batch, row, column and reduction axes, packed or in place; and the AVX2 f32
//! kernel, forced, on products whose every size leaves its tiles and blocks partial.

use std::collections::HashMap;

use crate::common::*;
use proptest::prelude::*;
use rcannl_backends::Buffers;
use rcannl_backends::cc::{Compiler, F32Product, cpu_extensions};
use rcannl_backends::interpreter::run_routine;
use rcannl_ir::optimize::optimize;
use rcannl_ir::{
    Assignment, AxisIndex, Binop, Factor, MemoryMode, NodeId, Precision, Projections, Routine,
    Stmt, Symbol, TensorNode, Unop,
};

fn typed(id: u32, precision: Precision, dims: &[usize]) -> TensorNode {
    TensorNode::new(id, &format!("t{id}"), precision, dims)
}

/// `c[i,k] (=:+ | =+) a[i,j] * b[j,k]` with `i, k, j` of the given ranges.
fn matmul(rows: usize, columns: usize, depth: usize, initialize: bool) -> Assignment {
    binary(
        initialize,
        Binop::Add,
        2,
        Binop::Mul,
        (0, 1),
        projections(
            &[rows, columns, depth],
            (&[rows, columns], vec![it(0), it(1)]),
            vec![
                (&[rows, depth], vec![it(0), it(2)]),
                (&[depth, columns], vec![it(2), it(1)]),
            ],
        ),
    )
}

fn compiler() -> Compiler {
    Compiler::find()
        .expect("a C compiler (cc or $CC)")
        .with_cache_dir(&std::env::temp_dir().join("rcannl-test-cache"))
}

/// Runs `routine` optimized on the C backend and unoptimized on the interpreter, from the same
/// inputs (quarter-integers, so that every sum is exact in f32), and returns both results of
/// every node that has a buffer in both.
fn both_ways(routine: &Routine, inputs: &[NodeId]) -> Vec<(NodeId, Vec<f64>, Vec<f64>)> {
    both_ways_on(&compiler(), routine, inputs)
}

/// [`both_ways`] compiling with `compiler`.
fn both_ways_on(
    compiler: &Compiler,
    routine: &Routine,
    inputs: &[NodeId],
) -> Vec<(NodeId, Vec<f64>, Vec<f64>)> {
    let optimized = optimize(routine).unwrap();
    let compiled = compiler.compile(&optimized).unwrap();
    let mut interpreted = Buffers::for_routine(routine).unwrap();
    let mut native = Buffers::for_routine(&optimized).unwrap();
    for (n, id) in inputs.iter().enumerate() {
        let cells = routine.nodes[id].len();
        let values: Vec<f64> = (0..cells)
            .map(|i| ((i * 7 + n * 3) % 17) as f64 / 4.0 - 2.0)
            .collect();
        interpreted.set_values(*id, &values).unwrap();
        native.set_values(*id, &values).unwrap();
    }
    // Every other buffer starts with the same leftovers on both sides: a result the routine
    // initializes must not keep them, one it accumulates into must.
    for node in optimized.nodes.values() {
        if inputs.contains(&node.id) || node.memory_mode == Some(MemoryMode::Virtual) {
            continue;
        }
        let leftovers: Vec<f64> = (0..node.len()).map(|i| 3.0 + (i % 5) as f64).collect();
        interpreted.set_values(node.id, &leftovers).unwrap();
        native.set_values(node.id, &leftovers).unwrap();
    }
    run_routine(routine, &mut interpreted, &HashMap::new()).unwrap();
    compiled.run(&mut native, &HashMap::new()).unwrap();
    optimized
        .nodes
        .values()
        .filter(|n| n.memory_mode != Some(MemoryMode::Virtual))
        .map(|n| (n.id, interpreted.values(n.id), native.values(n.id)))
        .collect()
}

fn products(routine: &Routine) -> usize {
    routine
        .body
        .iter()
        .filter(|s| matches!(s, Stmt::Gemm { .. }))
        .count()
}

#[test]
fn a_matmul_becomes_a_product_and_its_fused_producer_a_buffer() {
    // a = relu(x) (pointwise, would be fused), then c = a · w: a is materialized for the product.
    let relu = unary(
        true,
        Binop::Arg2,
        0,
        Unop::Relu,
        3,
        projections(
            &[32, 64],
            (&[32, 64], vec![it(0), it(1)]),
            vec![(&[32, 64], vec![it(0), it(1)])],
        ),
    );
    let nodes = vec![
        typed(0, Precision::F32, &[32, 64]),
        typed(1, Precision::F32, &[64, 48]),
        typed(2, Precision::F32, &[32, 48]),
        typed(3, Precision::F32, &[32, 64]),
    ];
    let routine = Routine::lower(
        "layer",
        &Assignment::Seq(vec![relu, matmul(32, 48, 64, true)]),
        nodes,
    )
    .unwrap();
    let optimized = optimize(&routine).unwrap();
    assert_eq!(products(&optimized), 1);
    assert_eq!(
        optimized.nodes[&NodeId(0)].memory_mode,
        Some(MemoryMode::Materialized)
    );
    let shown = optimized.to_string();
    assert!(
        shown.contains("  n0 't0': f32 [32, 64] materialized\n"),
        "{shown}"
    );
    assert!(
        shown.contains("gemm n2 := n0 * n1 (batch -; m l2<32>; n l3<48>; k l4<64>) {\n"),
        "{shown}"
    );
    for (id, want, got) in both_ways(&routine, &[NodeId(3), NodeId(1)]) {
        assert_eq!(want, got, "{id}");
    }
}

#[test]
fn a_result_laid_out_by_heads_is_scattered_by_each_thread_from_its_rows() {
    // Attention's projection into heads: rows (b, t) and columns (h, e) of c[b, h, t, e] are
    // each two loops that do not merge, so the product is computed packed and scattered, its
    // 64 rows in two stretches on two threads, its columns in runs of a head's 16.
    let (b, t, h, e, k) = (4, 16, 4, 16, 64);
    for initialize in [true, false] {
        let product = binary(
            initialize,
            Binop::Add,
            2,
            Binop::Mul,
            (0, 1),
            projections(
                &[b, t, h, e, k],
                (&[b, h, t, e], vec![it(0), it(2), it(1), it(3)]),
                vec![
                    (&[b, t, k], vec![it(0), it(1), it(4)]),
                    (&[k, h, e], vec![it(4), it(2), it(3)]),
                ],
            ),
        );
        let nodes = vec![
            typed(0, Precision::F32, &[b, t, k]),
            typed(1, Precision::F32, &[k, h, e]),
            typed(2, Precision::F32, &[b, h, t, e]),
        ];
        let routine = Routine::lower("heads", &product, nodes).unwrap();
        assert_eq!(products(&optimize(&routine).unwrap()), 1);
        for (id, want, got) in both_ways(&routine, &[NodeId(0), NodeId(1)]) {
            assert_eq!(want, got, "{id}, initialize {initialize}");
        }
    }
}

#[test]
fn small_products_stay_loops_and_accumulation_reads_the_result() {
    let small = Routine::lower(
        "small",
        &matmul(8, 8, 8, true),
        (0..3).map(|i| node(i, &[8, 8])),
    )
    .unwrap();
    assert_eq!(products(&optimize(&small).unwrap()), 0);
    // `c =+ a · b` adds to what c holds: no fill, the product reads c.
    let nodes = vec![node(0, &[40, 30]), node(1, &[30, 50]), node(2, &[40, 50])];
    let routine = Routine::lower("accumulate", &matmul(40, 50, 30, false), nodes).unwrap();
    let optimized = optimize(&routine).unwrap();
    assert!(optimized.to_string().contains("gemm n2 += n0 * n1"));
    for (id, want, got) in both_ways(&routine, &[NodeId(0), NodeId(1), NodeId(2)]) {
        assert_eq!(want, got, "{id}");
    }
}

#[test]
fn matrix_vector_and_long_dot_products_give_the_interpreters_result() {
    // One cell over a reduction longer than a dot block (cut into blocks summed in order), one
    // row, one column, and a column whose matrix runs down its columns (added column by column).
    let cases: [(usize, usize, usize, bool); 4] = [
        (1, 1, 100_003, false),
        (1, 5, 9_000, false),
        (7, 1, 9_000, false),
        (7, 1, 9_000, true),
    ];
    for (rows, columns, depth, column_major) in cases {
        let (a_dims, a_index) = if column_major {
            ([depth, rows], vec![it(2), it(0)])
        } else {
            ([rows, depth], vec![it(0), it(2)])
        };
        let assignment = binary(
            true,
            Binop::Add,
            2,
            Binop::Mul,
            (0, 1),
            projections(
                &[rows, columns, depth],
                (&[rows, columns], vec![it(0), it(1)]),
                vec![(&a_dims, a_index), (&[depth, columns], vec![it(2), it(1)])],
            ),
        );
        let nodes = vec![
            node(0, &a_dims),
            node(1, &[depth, columns]),
            node(2, &[rows, columns]),
        ];
        let routine = Routine::lower("skinny", &assignment, nodes).unwrap();
        let optimized = optimize(&routine).unwrap();
        assert_eq!(products(&optimized), 1, "{optimized}");
        for (id, want, got) in both_ways(&routine, &[NodeId(0), NodeId(1)]) {
            assert_eq!(want, got, "{rows}x{columns}x{depth}: {id}");
        }
        // Inexact sums: the same bits whatever the number of threads.
        let compiled = compiler().compile(&optimized).unwrap();
        let results: Vec<Vec<rcannl_ir::Value>> = [1, 2, 3]
            .iter()
            .map(|&threads| {
                let mut buffers = Buffers::for_routine(&optimized).unwrap();
                for id in [0, 1] {
                    let cells = optimized.nodes[&NodeId(id)].len();
                    let values: Vec<f64> = (0..cells)
                        .map(|i| ((i * 13 + id as usize) % 29) as f64 / 7.0 - 2.0)
                        .collect();
                    buffers.set_values(NodeId(id), &values).unwrap();
                }
                compiled
                    .run_on(&mut buffers, &HashMap::new(), threads)
                    .unwrap();
                buffers.cells(NodeId(2))
            })
            .collect();
        assert_eq!(results[0], results[1]);
        assert_eq!(results[0], results[2]);
    }
}

#[test]
fn a_convolution_runs_as_a_packed_product() {
    // y[b,o,h,w] =:+ x[b,c,h+i,w+j] * k[o,c,i,j]: the windows are copied into a matrix.
    let (batch, channels, size, out) = (2, 4, 10, 6);
    let window = |o: u32, k: u32| AxisIndex::affine([(1, Symbol(o)), (1, Symbol(k))], 0);
    let x_dims = [batch, channels, size + 2, size + 2];
    let k_dims = [out, channels, 3, 3];
    let y_dims = [batch, out, size, size];
    let conv = binary(
        true,
        Binop::Add,
        2,
        Binop::Mul,
        (0, 1),
        projections(
            &[batch, out, size, size, channels, 3, 3],
            (&y_dims, vec![it(0), it(1), it(2), it(3)]),
            vec![
                (&x_dims, vec![it(0), it(4), window(2, 5), window(3, 6)]),
                (&k_dims, vec![it(1), it(4), it(5), it(6)]),
            ],
        ),
    );
    let nodes = vec![
        typed(0, Precision::F32, &x_dims),
        typed(1, Precision::F32, &k_dims),
        typed(2, Precision::F32, &y_dims),
    ];
    let routine = Routine::lower("conv", &conv, nodes).unwrap();
    assert_eq!(products(&optimize(&routine).unwrap()), 1);
    for (id, want, got) in both_ways(&routine, &[NodeId(0), NodeId(1)]) {
        assert_eq!(want, got, "{id}");
    }
}

#[test]
fn half_and_double_products() {
    for precision in [Precision::F16, Precision::F64] {
        let nodes = vec![
            typed(0, precision, &[32, 40]),
            typed(1, precision, &[40, 36]),
            typed(2, precision, &[32, 36]),
        ];
        let routine = Routine::lower("typed", &matmul(32, 36, 40, true), nodes).unwrap();
        assert_eq!(products(&optimize(&routine).unwrap()), 1);
        for (id, want, got) in both_ways(&routine, &[NodeId(0), NodeId(1)]) {
            if precision == Precision::F64 {
                assert_eq!(want, got, "{id}");
            } else {
                // f16 rounds every partial sum in the loops, only the end in the product.
                for (w, g) in want.iter().zip(&got) {
                    assert!((w - g).abs() <= 0.02 * w.abs().max(1.0), "{id}: {w} vs {g}");
                }
            }
        }
    }
}

/// One random product: each group's loops, and each operand's axes in a random order.
#[derive(Debug, Clone)]
struct Arrangement {
    batch: Vec<usize>,
    m: Vec<usize>,
    n: Vec<usize>,
    k: Vec<usize>,
    /// Seeds for the order of each operand's axes.
    orders: [u64; 3],
    initialize: bool,
}

fn shuffled<T: Clone>(items: &[T], mut seed: u64) -> Vec<T> {
    let mut items = items.to_vec();
    for i in (1..items.len()).rev() {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        items.swap(i, (seed >> 33) as usize % (i + 1));
    }
    items
}

fn arrangement() -> impl Strategy<Value = Arrangement> {
    (
        prop::collection::vec(1..4usize, 0..3),
        prop::collection::vec(2..9usize, 0..3),
        prop::collection::vec(2..9usize, 0..3),
        prop::collection::vec(2..9usize, 1..3),
        any::<[u64; 3]>(),
        any::<bool>(),
    )
        .prop_map(|(batch, m, n, mut k, orders, initialize)| {
            // Enough work for the tuned product: stretch the first reduction loop.
            let work: usize = m.iter().chain(&n).chain(&k).product();
            let needed = rcannl_ir::optimize::gemm::MIN_GEMM_WORK.div_ceil(work);
            k[0] *= needed.max(1);
            Arrangement {
                batch,
                m,
                n,
                k,
                orders,
                initialize,
            }
        })
}

/// The matrix products `plan`'s nest becomes: one, but none for a batch of dot products (one
/// row, one column), which stays a reduction.
fn expected_products(plan: &Arrangement) -> usize {
    let size = |loops: &[usize]| loops.iter().product::<usize>();
    usize::from(size(&plan.m) * size(&plan.n) > 1 || size(&plan.batch) == 1)
}

fn arranged(plan: &Arrangement) -> Routine {
    // Symbols: batch, then m, n, k loops, numbered in that order.
    let mut ranges = Vec::new();
    let mut groups: [Vec<u32>; 4] = Default::default();
    for (g, loops) in [&plan.batch, &plan.m, &plan.n, &plan.k].iter().enumerate() {
        for range in loops.iter() {
            groups[g].push(ranges.len() as u32);
            ranges.push(*range);
        }
    }
    let [batch, m, n, k] = &groups;
    let axes = |symbols: Vec<u32>, seed: u64| -> (Vec<usize>, Vec<AxisIndex>) {
        let order = shuffled(&symbols, seed);
        (
            order.iter().map(|s| ranges[*s as usize]).collect(),
            order.into_iter().map(it).collect(),
        )
    };
    let (c_dims, c_index) = axes(
        [batch.clone(), m.clone(), n.clone()].concat(),
        plan.orders[0],
    );
    let (a_dims, a_index) = axes(
        [batch.clone(), m.clone(), k.clone()].concat(),
        plan.orders[1],
    );
    let (b_dims, b_index) = axes(
        [batch.clone(), k.clone(), n.clone()].concat(),
        plan.orders[2],
    );
    let product = Projections {
        product_space: ranges
            .iter()
            .enumerate()
            .map(|(s, r)| Factor::single(Symbol(s as u32), *r))
            .collect(),
        lhs_padding: vec![(0, 0); c_dims.len()],
        rhs_padding: vec![vec![(0, 0); a_dims.len()], vec![(0, 0); b_dims.len()]],
        lhs_dims: c_dims.clone(),
        lhs_index: c_index,
        rhs_dims: vec![a_dims.clone(), b_dims.clone()],
        rhs_index: vec![a_index, b_index],
        label: "arranged".to_owned(),
    };
    let assignment = binary(plan.initialize, Binop::Add, 2, Binop::Mul, (0, 1), product);
    let nodes = vec![
        typed(0, Precision::F32, &a_dims),
        typed(1, Precision::F32, &b_dims),
        typed(2, Precision::F32, &c_dims),
    ];
    Routine::lower("arranged", &assignment, nodes).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 40,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(11),
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_arrangement_of_a_product_gives_the_interpreters_result_on_the_avx2_kernel(
        plan in arrangement()
    ) {
        let Some(avx2) = avx2_compiler() else { return Ok(()) };
        let routine = arranged(&plan);
        prop_assert_eq!(products(&optimize(&routine).unwrap()), expected_products(&plan));
        for (id, want, got) in both_ways_on(&avx2, &routine, &[NodeId(0), NodeId(1), NodeId(2)]) {
            prop_assert_eq!(want, got, "{}", id);
        }
    }

    #[test]
    fn every_arrangement_of_a_product_gives_the_interpreters_result(plan in arrangement()) {
        let routine = arranged(&plan);
        prop_assert_eq!(products(&optimize(&routine).unwrap()), expected_products(&plan));
        for (id, want, got) in both_ways(&routine, &[NodeId(0), NodeId(1), NodeId(2)]) {
            prop_assert_eq!(want, got, "{}", id);
        }
    }
}

/// The compiler with f32 products forced onto the AVX2 kernel, if this CPU runs it (at any
/// `-march`, the baseline's included: the kernel is compiled for AVX2 whatever the flags).
fn avx2_compiler() -> Option<Compiler> {
    let cpu = cpu_extensions();
    if !(cpu.contains(&"avx2") && cpu.contains(&"fma")) {
        eprintln!("this CPU lacks AVX2 or FMA: the AVX2 kernel is not run");
        return None;
    }
    Some(compiler().with_f32_product(F32Product::Avx2))
}

/// Runs `routine` on the AVX2 kernel and the interpreter (as [`both_ways`]) and asserts the
/// results equal and that the product ran on that kernel.
fn assert_avx2_gives_the_interpreters_result(avx2: &Compiler, routine: &Routine, label: &str) {
    let optimized = optimize(routine).unwrap();
    assert_eq!(products(&optimized), 1, "{label}: {optimized}");
    assert_eq!(
        avx2.compile(&optimized).unwrap().f32_product(),
        Some(F32Product::Avx2),
        "{label}"
    );
    let inputs: Vec<NodeId> = (0..3).map(NodeId).collect();
    for (id, want, got) in both_ways_on(avx2, routine, &inputs) {
        assert_eq!(want, got, "{label}: {id}");
    }
}

#[test]
fn the_avx2_kernel_gives_the_interpreters_result_at_every_edge() {
    let Some(avx2) = avx2_compiler() else { return };
    // The kernel's tiles are 6 rows by 16 columns, its blocks 168 rows, 3072 columns and 384
    // terms: sizes one past, one short of and well off those, and the smallest a product takes
    // (a row or a column alone goes to the skinny kernels instead).
    let sizes: [(usize, usize, usize); 8] = [
        (7, 17, 385),
        (5, 15, 767),
        (13, 33, 77),
        (169, 10, 20),
        (6, 16, 768),
        (2, 2, 8192),
        (2, 3089, 7),
        (11, 3, 1001),
    ];
    for (rows, columns, depth) in sizes {
        for initialize in [true, false] {
            let nodes = vec![
                typed(0, Precision::F32, &[rows, depth]),
                typed(1, Precision::F32, &[depth, columns]),
                typed(2, Precision::F32, &[rows, columns]),
            ];
            let product = matmul(rows, columns, depth, initialize);
            let routine = Routine::lower("edges", &product, nodes).unwrap();
            let label = format!("{rows}x{columns}x{depth}, initialize {initialize}");
            assert_avx2_gives_the_interpreters_result(&avx2, &routine, &label);
        }
    }
}

#[test]
fn the_avx2_kernel_reads_transposed_operands_and_runs_batches() {
    let Some(avx2) = avx2_compiler() else { return };
    // c[b,i,k] (=:+ | =+) a[b,j,i] * b[b,k,j]: both operands transposed, three products.
    let (batch, rows, columns, depth) = (3, 13, 21, 130);
    for initialize in [true, false] {
        for c_transposed in [false, true] {
            let (c_dims, c_index) = if c_transposed {
                ([batch, columns, rows], vec![it(0), it(2), it(1)])
            } else {
                ([batch, rows, columns], vec![it(0), it(1), it(2)])
            };
            let a_dims = [batch, depth, rows];
            let b_dims = [batch, columns, depth];
            let product = binary(
                initialize,
                Binop::Add,
                2,
                Binop::Mul,
                (0, 1),
                projections(
                    &[batch, rows, columns, depth],
                    (&c_dims, c_index),
                    vec![
                        (&a_dims, vec![it(0), it(3), it(1)]),
                        (&b_dims, vec![it(0), it(2), it(3)]),
                    ],
                ),
            );
            let nodes = vec![
                typed(0, Precision::F32, &a_dims),
                typed(1, Precision::F32, &b_dims),
                typed(2, Precision::F32, &c_dims),
            ];
            let routine = Routine::lower("transposed", &product, nodes).unwrap();
            let label = format!("initialize {initialize}, c transposed {c_transposed}");
            assert_avx2_gives_the_interpreters_result(&avx2, &routine, &label);
        }
    }
}

#[test]
fn the_avx2_kernel_sums_as_the_avx512_kernel_does() {
    let Some(avx2) = avx2_compiler() else { return };
    if !cpu_extensions().contains(&"avx512f") {
        eprintln!("this CPU lacks AVX-512: nothing to compare the AVX2 kernel with");
        return;
    }
    let avx512 = compiler().with_flags(&["-O3", "-march=x86-64-v4"]);
    // Inexact sums over more than one block of terms: the same bits from both kernels.
    let (rows, columns, depth) = (37, 45, 900);
    let nodes = vec![
        typed(0, Precision::F32, &[rows, depth]),
        typed(1, Precision::F32, &[depth, columns]),
        typed(2, Precision::F32, &[rows, columns]),
    ];
    let routine =
        optimize(&Routine::lower("sums", &matmul(rows, columns, depth, true), nodes).unwrap())
            .unwrap();
    let results: Vec<Vec<rcannl_ir::Value>> =
        [(&avx2, F32Product::Avx2), (&avx512, F32Product::Avx512)]
            .iter()
            .map(|(compiler, kernel)| {
                let compiled = compiler.compile(&routine).unwrap();
                assert_eq!(compiled.f32_product(), Some(*kernel));
                let mut buffers = Buffers::for_routine(&routine).unwrap();
                for id in [0, 1] {
                    let cells = routine.nodes[&NodeId(id)].len();
                    let values: Vec<f64> = (0..cells)
                        .map(|i| ((i * 13 + id as usize) % 29) as f64 / 7.0 - 2.0)
                        .collect();
                    buffers.set_values(NodeId(id), &values).unwrap();
                }
                compiled.run(&mut buffers, &HashMap::new()).unwrap();
                buffers.cells(NodeId(2))
            })
            .collect();
    assert_eq!(results[0], results[1]);
}

#[test]
fn the_target_picks_the_f32_product() {
    let cpu = cpu_extensions();
    let nodes = vec![node(0, &[40, 30]), node(1, &[30, 50]), node(2, &[40, 50])];
    let routine =
        optimize(&Routine::lower("pick", &matmul(40, 50, 30, true), nodes).unwrap()).unwrap();
    // The baseline runs the AVX2 kernel where this CPU has AVX2 and FMA (chosen at run time),
    // the `gemm` crate where it does not.
    let baseline = compiler().with_flags(&["-O3", "-march=x86-64"]);
    let cpu_has_avx2 = cpu.contains(&"avx2") && cpu.contains(&"fma");
    assert_eq!(
        baseline.compile(&routine).unwrap().f32_product(),
        Some(if cpu_has_avx2 {
            F32Product::Avx2
        } else {
            F32Product::GemmCrate
        })
    );
    if cpu.contains(&"avx2")
        && cpu.contains(&"fma")
        && cpu.contains(&"bmi2")
        && cpu.contains(&"f16c")
    {
        let v3 = compiler().with_flags(&["-O3", "-march=x86-64-v3"]);
        assert_eq!(
            v3.compile(&routine).unwrap().f32_product(),
            Some(F32Product::Avx2)
        );
    }
    if cpu.contains(&"avx512f")
        && cpu.contains(&"avx512bw")
        && cpu.contains(&"avx512dq")
        && cpu.contains(&"avx512vl")
    {
        let v4 = compiler().with_flags(&["-O3", "-march=x86-64-v4"]);
        assert_eq!(
            v4.compile(&routine).unwrap().f32_product(),
            Some(F32Product::Avx512)
        );
        // Forcing the AVX-512 kernel where the flags leave it out is an error naming why.
        let error = compiler()
            .with_flags(&["-O3", "-march=x86-64-v3"])
            .with_f32_product(F32Product::Avx512)
            .compile(&routine)
            .unwrap_err();
        assert!(error.message.contains("does not enable AVX-512"), "{error}");
    }
}
