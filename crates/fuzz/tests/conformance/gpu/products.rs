//! Matrix products on the GPU run on the tiled product kernel and give the interpreter's results
//! (f32 within a relative 1e-4 of the largest magnitude, since the kernel rounds each term's sum
//! in f32 where the interpreter rounds it from f64; f16 exactly, on values whose sums f16 holds):
//! plain products of every size class, batched, transposed, with several loops per group, along
//! an n-ary einsum's path, convolutions and their gradients, f16 cells, products accumulating
//! into what a buffer holds, static indices and results the product writes only part of.

use std::collections::HashMap;

use rcannl_backends::{Backend, Buffers, Interpreter};
use rcannl_gpu::Gpu;
use rcannl_ir::optimize::optimize;
use rcannl_ir::{
    Assignment, AxisIndex, Binop, Factor, NodeId, Precision, Projections, Rhs, Routine, Symbol,
    TensorNode,
};
use rcannl_tensor::{Context, Graph, Tensor};

use super::device;

use crate::target::Target;

/// `cells` values in [-1, 1) from `seed`, multiples of 2^-23 (exact in f32).
fn values(cells: usize, seed: u64) -> Vec<f64> {
    let mut state = seed ^ 0x9E37_79B9_7F4A_7C15;
    (0..cells)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 40) as f64 / (1u64 << 23) as f64 - 1.0
        })
        .collect()
}

/// What one backend computed: each tensor read back, the optimized loops and the generated code.
struct Outcome {
    values: Vec<Vec<f64>>,
    loops: String,
    code: String,
}

/// A data tensor of `shape` (a shape literal) holding [`values`] from `seed`.
fn data(graph: &Graph, label: &str, shape: &str, cells: usize, seed: u64) -> Tensor {
    graph
        .data(label)
        .shape(shape)
        .values(values(cells, seed))
        .build()
}

/// A parameter of `shape` holding [`values`] from `seed`.
fn param(graph: &Graph, label: &str, shape: &str, cells: usize, seed: u64) -> Tensor {
    graph
        .param(label)
        .shape(shape)
        .values(values(cells, seed))
        .build()
}

/// The forward routine of the tensor `build` makes, run on `backend`.
fn forward_on(backend: Box<dyn Backend>, build: &dyn Fn(&Graph) -> Tensor) -> Outcome {
    let graph = Graph::new();
    let result = build(&graph);
    let mut ctx = Context::with_backend(&graph, backend);
    ctx.init_params().expect("parameters hold their values");
    let routine = ctx.forward(&[&result]).expect("the product compiles");
    ctx.run(&routine).expect("the product runs");
    Outcome {
        values: vec![ctx.values(&result).expect("the result's values")],
        loops: routine.describe(),
        code: routine.source().unwrap_or_default(),
    }
}

/// The backprop routine of the loss `build` makes (with the parameters whose gradients are
/// read), run on `backend` twice: the values and gradients of the second run.
fn backprop_on(
    backend: Box<dyn Backend>,
    build: &dyn Fn(&Graph) -> (Tensor, Vec<Tensor>),
) -> Outcome {
    let graph = Graph::new();
    let (loss, params) = build(&graph);
    let mut ctx = Context::with_backend(&graph, backend);
    ctx.init_params().expect("parameters hold their values");
    let routine = ctx.backprop(&loss).expect("the gradient compiles");
    ctx.run(&routine).expect("the gradient runs");
    ctx.run(&routine).expect("the gradient runs again");
    let mut values = vec![ctx.values(&loss).expect("the loss")];
    for p in &params {
        values.push(ctx.grad(p).expect("a parameter's gradient"));
    }
    Outcome {
        values,
        loops: routine.describe(),
        code: routine.source().unwrap_or_default(),
    }
}

/// Asserts that `ours` equals `expected` within `relative` of `expected`'s largest magnitude.
fn assert_close(what: &str, ours: &[f64], expected: &[f64], relative: f64) {
    assert_eq!(ours.len(), expected.len(), "{what}: cell counts");
    let largest = expected.iter().fold(0f64, |m, x| m.max(x.abs()));
    let tolerance = relative * largest;
    for (i, (a, b)) in ours.iter().zip(expected).enumerate() {
        assert!(
            (a - b).abs() <= tolerance,
            "{what}: cell {i} is {a} on the GPU, {b} on the interpreter (tolerance {tolerance})"
        );
    }
}

/// The number of matrix products in printed loops that the GPU runs as products: all but those
/// gathering over a zero-widened operand, which run as their nests.
fn products(loops: &str) -> usize {
    loops
        .lines()
        .filter(|l| l.trim_start().starts_with("gemm ") && !gathers(l))
        .count()
}

/// Whether a printed product reads its first operand through zero margins.
fn gathers(line: &str) -> bool {
    line.contains("zero margins")
}

/// The number of tiled product kernels in generated code.
fn product_kernels(code: &str) -> usize {
    code.matches("var<workgroup> a_tile").count()
}

/// Runs `outcome` on the GPU and the interpreter, compares every tensor read back, and checks
/// that the GPU ran `expected_products` matrix products, each on the product kernel. Returns the
/// GPU's outcome and the interpreter's.
fn compare(
    what: &str,
    expected_products: usize,
    gpu: &Gpu,
    outcome: impl Fn(Box<dyn Backend>) -> Outcome,
) -> (Outcome, Outcome) {
    let ours = outcome(Box::new(gpu.clone()));
    let reference = outcome(Box::new(Interpreter));
    assert_eq!(ours.values.len(), reference.values.len());
    for (i, (a, b)) in ours.values.iter().zip(&reference.values).enumerate() {
        assert_close(&format!("{what}, tensor {i}"), a, b, 1e-4);
    }
    assert_eq!(
        products(&ours.loops),
        expected_products,
        "{what}: products in\n{}",
        ours.loops
    );
    assert_eq!(
        product_kernels(&ours.code),
        expected_products,
        "{what}: product kernels in\n{}",
        ours.code
    );
    (ours, reference)
}

/// `a · b` by the spec, `a` of `a_shape` and `b` of `b_shape` (shape literals, cell counts).
fn product(
    spec: &'static str,
    a_shape: (String, usize),
    b_shape: (String, usize),
) -> impl Fn(&Graph) -> Tensor {
    move |graph| {
        let a = data(graph, "a", &a_shape.0, a_shape.1, 1);
        let b = data(graph, "b", &b_shape.0, b_shape.1, 2);
        a.einsum(spec, &b)
    }
}

fn shape(dims: &[usize]) -> (String, usize) {
    let literal: Vec<String> = dims.iter().map(ToString::to_string).collect();
    (literal.join(","), dims.iter().product())
}

fn plain_products_of_odd_sizes(target: &Target) {
    let gpu = device(target);
    // Products of fewer than 2^12 multiply-adds stay loops (1×1×1, 3×5×7); the others cover a
    // single cell of C, one partial tile each way, tiles that fit exactly, and thin shapes.
    let sizes = [
        (1, 1, 1, false),
        (3, 5, 7, false),
        (1, 1, 32768, true),
        (3, 5, 2200, true),
        (2200, 3, 5, true),
        (65, 63, 130, true),
        (128, 256, 64, true),
    ];
    for (m, n, k, tiled) in sizes {
        let build = product("ij;jk=>ik", shape(&[m, k]), shape(&[k, n]));
        compare(&format!("{m}×{n}×{k}"), usize::from(tiled), &gpu, |b| {
            forward_on(b, &build)
        });
    }
}
conformance!(plain_products_of_odd_sizes: gpu);

fn a_product_starts_from_zero_whatever_its_result_held(target: &Target) {
    let gpu = device(target);
    // Running the routine twice: the second run must not add to the first's result.
    let twice = |backend: Box<dyn Backend>| {
        let graph = Graph::new();
        let c = product("ij;jk=>ik", shape(&[70, 90]), shape(&[90, 50]))(&graph);
        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx.forward(&[&c]).expect("the product compiles");
        ctx.run(&routine).expect("the product runs");
        ctx.run(&routine).expect("the product runs again");
        Outcome {
            values: vec![ctx.values(&c).expect("the result")],
            loops: routine.describe(),
            code: routine.source().unwrap_or_default(),
        }
    };
    let (ours, _) = compare("a product run twice", 1, &gpu, twice);
    assert!(ours.loops.contains(":= "), "{}", ours.loops);
}
conformance!(a_product_starts_from_zero_whatever_its_result_held: gpu);

fn batched_products(target: &Target) {
    let gpu = device(target);
    for (batch, m, n, k) in [(3, 40, 50, 60), (5, 33, 17, 70), (2, 100, 130, 3)] {
        let build = product("bij;bjk=>bik", shape(&[batch, m, k]), shape(&[batch, k, n]));
        compare(&format!("{batch} × {m}×{n}×{k}"), 1, &gpu, |b| {
            forward_on(b, &build)
        });
    }
}
conformance!(batched_products: gpu);

fn transposed_operands(target: &Target) {
    let gpu = device(target);
    let (m, n, k) = (70, 45, 90);
    let cases = [
        ("ij;kj=>ik", shape(&[m, k]), shape(&[n, k])),
        ("ji;jk=>ik", shape(&[k, m]), shape(&[k, n])),
        ("ji;kj=>ik", shape(&[k, m]), shape(&[n, k])),
        ("ij;jk=>ki", shape(&[m, k]), shape(&[k, n])),
    ];
    for (spec, a, b) in cases {
        let build = product(spec, a, b);
        compare(spec, 1, &gpu, |b| forward_on(b, &build));
    }
}
conformance!(transposed_operands: gpu);

fn groups_of_several_loops(target: &Target) {
    let gpu = device(target);
    let cases = [
        // Rows a, b; reduction c, d; columns e.
        ("abcd;cde=>abe", shape(&[5, 7, 6, 5]), shape(&[6, 5, 40])),
        // A batch c whose strides do not nest with the others', rows a, reduction b, columns d.
        ("cab;bcd=>adc", shape(&[3, 40, 30]), shape(&[30, 3, 31])),
        // Rows a, d; reduction c, b (read in another order by each operand); columns e first.
        ("adcb;bce=>ead", shape(&[6, 5, 7, 8]), shape(&[8, 7, 20])),
    ];
    for (spec, a, b) in cases {
        let build = product(spec, a, b);
        compare(spec, 1, &gpu, |b| forward_on(b, &build));
    }
}
conformance!(groups_of_several_loops: gpu);

fn an_n_ary_einsum_path(target: &Target) {
    let gpu = device(target);
    // A path of two products: x·y, whose columns are c and d, then with z over d.
    let build = |graph: &Graph| {
        let x = data(graph, "x", "40,30", 1200, 3);
        let y = data(graph, "y", "30,6,70", 12600, 4);
        let z = data(graph, "z", "70,50", 3500, 5);
        Tensor::einsum_n("a,b; b,c,d; d,e => a,c,e", &[&x, &y, &z])
    };
    compare("a,b; b,c,d; d,e => a,c,e", 2, &gpu, |b| {
        forward_on(b, &build)
    });
}
conformance!(an_n_ary_einsum_path: gpu);

/// A 3×3 convolution of `x` (batch 2, 12×12 images of 8 channels) with 16 filters, valid or
/// padded, times a weight per output cell (so that its gradient is not uniform).
fn convolution(graph: &Graph, padded: bool) -> (Tensor, Vec<Tensor>) {
    let x = param(graph, "x", "2|->12,12,8", 2 * 12 * 12 * 8, 6);
    let kernel = param(graph, "kernel", "3,3,8->16", 3 * 3 * 8 * 16, 7);
    let window = if padded { "=+" } else { "<+" };
    let spec = format!("...|...->h{window}kh, w{window}kw, c; kh, kw, c -> d => ...|...->h, w, d");
    let convolved = x.einsum(&spec, &kernel);
    for label in ["kh", "kw"] {
        let capture = convolved.capture(label).expect("a window label");
        graph.set_dim(&capture, 3).expect("the window's size");
    }
    let side = if padded { 12 } else { 10 };
    let weights = data(
        graph,
        "weights",
        &format!("2|->{side},{side},16"),
        2 * side * side * 16,
        8,
    );
    (convolved.pmul(&weights), vec![x, kernel])
}

fn convolutions_and_their_gradients(target: &Target) {
    let gpu = device(target);
    for padded in [false, true] {
        let what = if padded { "padded" } else { "valid" };
        let forward = |graph: &Graph| convolution(graph, padded).0;
        compare(&format!("{what} convolution"), 1, &gpu, |b| {
            forward_on(b, &forward)
        });
        // The forward product and the kernel's gradient (a sum over images and positions) are
        // products; the input's gradient, which writes overlapping windows, is planned as a
        // gather over the zero-widened output gradient, which the GPU runs as the nest.
        let backward = |graph: &Graph| convolution(graph, padded);
        let (ours, _) = compare(&format!("{what} convolution's gradients"), 2, &gpu, |b| {
            backprop_on(b, &backward)
        });
        let gathered = ours.loops.lines().filter(|l| gathers(l)).count();
        assert_eq!(gathered, 1, "{}", ours.loops);
    }
}
conformance!(convolutions_and_their_gradients: gpu);

fn a_gradient_accumulates_into_its_buffer(target: &Target) {
    let gpu = device(target);
    // w is used twice: the second product of its gradient adds to what the first left there.
    let build = |graph: &Graph| {
        let w = param(graph, "w", "60,50", 3000, 9);
        let x = data(graph, "x", "80,60", 4800, 10);
        let y = data(graph, "y", "70,60", 4200, 11);
        let rx = data(graph, "rx", "80,50", 4000, 12);
        let ry = data(graph, "ry", "70,50", 3500, 13);
        let first = x.einsum("ij;jk=>ik", &w).pmul(&rx);
        let second = y.einsum("ij;jk=>ik", &w).pmul(&ry);
        let loss = &first.einsum1("ik=>") + &second.einsum1("ik=>");
        (loss, vec![w])
    };
    let (ours, _) = compare("a gradient summed from two products", 4, &gpu, |b| {
        backprop_on(b, &build)
    });
    assert!(
        ours.loops
            .lines()
            .any(|l| l.trim_start().starts_with("gemm ") && l.contains("+= ")),
        "no product adds to its result in\n{}",
        ours.loops
    );
}
conformance!(a_gradient_accumulates_into_its_buffer: gpu);

fn f16_products_are_exact_where_f16_holds_every_sum(target: &Target) {
    let gpu = device(target);
    if !gpu.device().has_f16() {
        eprintln!(
            "the f16 products did not run: {} offers no shader-f16",
            gpu.device().describe()
        );
        return;
    }
    // Integers from -3 to 2 over 64 steps: every partial sum is an integer below 2^11 in
    // magnitude, which f16 holds.
    let (m, n, k) = (70, 45, 64);
    let integers = |cells: usize, seed: u64| -> Vec<f64> {
        values(cells, seed)
            .into_iter()
            .map(|x| (x * 2.5).floor())
            .collect()
    };
    let build = |graph: &Graph| {
        let a = graph
            .data("a")
            .shape(&format!("{m},{k}"))
            .precision(Precision::F16)
            .values(integers(m * k, 14))
            .build();
        let b = graph
            .data("b")
            .shape(&format!("{k},{n}"))
            .precision(Precision::F16)
            .values(integers(k * n, 15))
            .build();
        a.einsum("ij;jk=>ik", &b)
    };
    let (ours, reference) = compare("an f16 product", 1, &gpu, |b| forward_on(b, &build));
    assert_eq!(ours.values, reference.values);
    assert!(ours.code.contains("enable f16;"), "{}", ours.code);
}
conformance!(f16_products_are_exact_where_f16_holds_every_sum: gpu);

fn node(id: u32, dims: &[usize]) -> TensorNode {
    TensorNode::new(id, &format!("t{id}"), Precision::F32, dims)
}

/// `c[i, 2k + 1] =:+ a[s, i, j] · b[j, k]` over `i < 50, k < 40, j < 70`, `s` a static index
/// among 3, `c` with margins: the product writes every other column of `c`'s interior and nothing
/// of its margins, which its fill of zeros covers.
fn strided_product() -> Routine {
    let (m, n, k) = (50, 40, 70);
    let it = |s: u32| AxisIndex::Iterator(Symbol(s));
    let assignment = Assignment::Accum {
        initialize_neutral: true,
        accum: Binop::Add,
        lhs: NodeId(2),
        rhs: Rhs::Binop(Binop::Mul, NodeId(0), NodeId(1)),
        projections: Projections {
            product_space: [m, n, k]
                .iter()
                .enumerate()
                .map(|(i, r)| Factor::single(Symbol(i as u32), *r))
                .collect(),
            lhs_padding: vec![(0, 0); 2],
            rhs_padding: vec![vec![(0, 0); 3], vec![(0, 0); 2]],
            lhs_dims: vec![m, 2 * n],
            lhs_index: vec![it(0), AxisIndex::affine([(2, Symbol(1))], 1)],
            rhs_dims: vec![vec![3, m, k], vec![k, n]],
            rhs_index: vec![vec![it(9), it(0), it(2)], vec![it(2), it(1)]],
            label: "strided".to_owned(),
        },
    };
    let mut c = node(2, &[m, 2 * n]);
    c.padding = vec![(1, 2), (3, 0)];
    let nodes = vec![node(0, &[3, m, k]), node(1, &[k, n]), c];
    Routine::lower("strided", &assignment, nodes).expect("the product lowers")
}

fn static_indices_and_results_written_in_part(target: &Target) {
    let gpu = device(target);
    let routine = optimize(&strided_product()).expect("the product optimizes");
    assert_eq!(products(&routine.to_string()), 1, "{routine}");
    let statics: HashMap<Symbol, i64> = [(Symbol(9), 2)].into();
    let run = |backend: &dyn Backend| {
        let mut buffers = Buffers::for_routine(&routine).expect("buffers");
        // c starts with values of its own: the cells the product does not write must be zeroed.
        for (id, seed) in [(0, 16), (1, 17), (2, 18)] {
            let cells = routine.nodes[&NodeId(id)].len();
            buffers
                .set_values(NodeId(id), &values(cells, seed))
                .expect("values");
        }
        let executable = backend.compile(&routine).expect("the product compiles");
        executable
            .run(&mut buffers, &statics)
            .expect("the product runs");
        (
            buffers.buffer(NodeId(2)),
            executable.source().map(str::to_owned),
        )
    };
    let (ours, code) = run(&gpu);
    let (expected, _) = run(&Interpreter);
    assert_close("the strided product", &ours, &expected, 1e-4);
    // The cells the product leaves alone hold the fill's zeros, margins included.
    assert!(expected.iter().filter(|x| **x == 0.0).count() >= 53 * 83 - 50 * 40);
    let code = code.expect("generated code");
    assert_eq!(product_kernels(&code), 1, "{code}");
    assert_eq!(
        code.matches("// kernel").count(),
        2,
        "a fill, then the product:\n{code}"
    );
}
conformance!(static_indices_and_results_written_in_part: gpu);
