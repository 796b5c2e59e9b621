//! GPU benchmark: the product kernel's GFLOP/s on f32 matrix products and a fused pointwise
//! kernel's GB/s (`relu(a·b + c)`: three cells read and one written per cell), each on the GPU
//! and, in the same run, on the C backend. Run with `cargo bench -p rcannl-gpu --bench gpu`;
//! arguments choose the products' sizes (`-- 256 1024`, default 256, 1024 and 2048) and the
//! pointwise cells (`-- cells=1048576`, default 2^24). Without a GPU adapter it says so in one
//! line and prints the C backend's figures.
//!
//! Each case runs once to warm up (pipelines built, buffers uploaded), then in rounds of runs
//! sized to about a second in all; a GPU round ends when a one-cell kernel reading the result
//! has been read back, so the clock stops only once the device has finished. The best round's
//! time per run counts.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Buffers, Executable};
use rcannl_gpu::Gpu;
use rcannl_ir::optimize::optimize;
use rcannl_ir::{
    Assignment, Binop, Index, MemoryMode, NodeId, Rhs, Routine, Scalar, Stmt, TensorNode, Unop,
};

#[path = "../../ir/benches/support/assignments.rs"]
#[allow(dead_code)]
mod assignments;
use assignments::{accumulate, f32_node, it};

/// Rounds of each case; the best one's time per run counts.
const ROUNDS: usize = 3;
/// About how long the rounds of one case take together, in seconds.
const BUDGET: f64 = 1.0;

/// `c[i,k] =:+ a[i,j] · b[j,k]`, all `n × n`; the result is node 2.
fn matmul(n: usize) -> Routine {
    let assignment = accumulate(
        Binop::Add,
        &[n, n, n],
        (2, vec![n, n], vec![it(0), it(1)]),
        Rhs::Binop(Binop::Mul, NodeId(0), NodeId(1)),
        vec![
            (vec![n, n], vec![it(0), it(2)]),
            (vec![n, n], vec![it(2), it(1)]),
        ],
    );
    let nodes = (0..3).map(|i| f32_node(i, &[n, n]));
    Routine::lower("matmul", &assignment, nodes).expect("the product lowers")
}

/// `y = relu(a·b + c)` over `n` cells, its intermediates fused away; the result is node 5.
fn pointwise(n: usize) -> Routine {
    let cell = || (vec![n], vec![it(0)]);
    let step = |lhs: u32, rhs: Rhs, reads: usize| {
        accumulate(
            Binop::Arg2,
            &[n],
            (lhs, vec![n], vec![it(0)]),
            rhs,
            (0..reads).map(|_| cell()).collect(),
        )
    };
    let steps = vec![
        step(3, Rhs::Binop(Binop::Mul, NodeId(0), NodeId(1)), 2),
        step(4, Rhs::Binop(Binop::Add, NodeId(3), NodeId(2)), 2),
        step(5, Rhs::Unop(Unop::Relu, NodeId(4)), 1),
    ];
    let nodes = (0..6).map(|i| f32_node(i, &[n]));
    Routine::lower("pointwise", &Assignment::Seq(steps), nodes).expect("the kernel lowers")
}

/// The node a probe copies one cell of the result into.
const PROBE: NodeId = NodeId(1000);

/// A routine copying the first cell of `result` into [`PROBE`]: reading the probe back waits
/// for everything submitted before it.
fn probe(result: &TensorNode) -> Routine {
    let mut nodes = BTreeMap::new();
    for mut node in [result.clone(), f32_node(PROBE.0, &[1])] {
        node.memory_mode = Some(MemoryMode::Materialized);
        nodes.insert(node.id, node);
    }
    Routine {
        name: "probe".to_owned(),
        nodes,
        statics: BTreeMap::new(),
        body: vec![Stmt::Set {
            node: PROBE,
            index: vec![Index::constant(0)],
            value: Scalar::Get(result.id, vec![Index::constant(0); result.dims.len()]),
        }],
    }
}

/// The best time per run of `routine` on `backend`, in seconds; on a device (`wait_for_device`)
/// each round ends by reading back a probe of `result`.
fn time(backend: &dyn Backend, routine: &Routine, result: NodeId, wait_for_device: bool) -> f64 {
    let optimized = optimize(routine).expect("the routine optimizes");
    let executable = backend.compile(&optimized).expect("the routine compiles");
    let mut buffers = Buffers::for_routine(&optimized).expect("buffers");
    for node in optimized.nodes.values() {
        if buffers.nodes().contains_key(&node.id) {
            let values: Vec<f64> = (0..node.len())
                .map(|i| ((i * 7) % 13) as f64 / 13.0 - 0.5)
                .collect();
            buffers.set_values(node.id, &values).expect("values");
        }
    }
    let finish: Option<Box<dyn Executable>> = wait_for_device.then(|| {
        let probe = probe(&optimized.nodes[&result]);
        buffers
            .insert(probe.nodes[&PROBE].clone())
            .expect("the probe's buffer");
        backend.compile(&probe).expect("the probe compiles")
    });
    let statics = HashMap::new();
    let mut round = |runs: usize| {
        let start = Instant::now();
        for _ in 0..runs {
            executable
                .run(&mut buffers, &statics)
                .expect("the routine runs");
        }
        if let Some(finish) = &finish {
            finish.run(&mut buffers, &statics).expect("the probe runs");
            buffers.read_values(PROBE).expect("the probe reads back");
        }
        start.elapsed().as_secs_f64() / runs as f64
    };
    let first = round(1);
    let runs = (BUDGET / ROUNDS as f64 / first).clamp(1.0, 100.0) as usize;
    (0..ROUNDS)
        .map(|_| round(runs))
        .fold(f64::INFINITY, f64::min)
}

/// One line: the case, then each backend's time per run and rate, and their ratio.
fn report(name: &str, unit: &str, work: f64, gpu: Option<f64>, c: f64) {
    let rate = |t: f64| work / t / 1e9;
    let c_part = format!("c {:>10.3} ms ({:>8.1} {unit})", c * 1e3, rate(c));
    match gpu {
        Some(g) => println!(
            "{name:<28} gpu {:>10.3} ms ({:>8.1} {unit})   {c_part}   c/gpu {:>6.2}",
            g * 1e3,
            rate(g),
            c / g
        ),
        None => println!("{name:<28} {c_part}"),
    }
}

fn main() {
    let mut sizes: Vec<usize> = Vec::new();
    let mut cells = 1usize << 24;
    for arg in std::env::args().skip(1).filter(|a| !a.starts_with("--")) {
        match arg.strip_prefix("cells=") {
            Some(n) => cells = n.parse().expect("cells=<number of cells>"),
            None => sizes.push(arg.parse().expect("a product's size")),
        }
    }
    if sizes.is_empty() {
        sizes = vec![256, 1024, 2048];
    }
    let gpu = match Gpu::new() {
        Ok(gpu) => {
            println!("adapter: {}", gpu.device().describe());
            Some(gpu)
        }
        Err(e) => {
            println!("no GPU adapter, C backend only: {e}");
            None
        }
    };
    let compiler = Compiler::find().expect("a C compiler (cc or $CC)");
    println!(
        "C backend: {} threads; best of {ROUNDS} rounds after a warm-up",
        rcannl_backends::cc::kernel_threads()
    );
    for n in sizes {
        let routine = matmul(n);
        let on_gpu = gpu.as_ref().map(|g| time(g, &routine, NodeId(2), true));
        let on_c = time(&compiler, &routine, NodeId(2), false);
        let work = 2.0 * (n * n * n) as f64;
        report(&format!("matmul f32 {n}³"), "GFLOP/s", work, on_gpu, on_c);
    }
    let routine = pointwise(cells);
    let on_gpu = gpu.as_ref().map(|g| time(g, &routine, NodeId(5), true));
    let on_c = time(&compiler, &routine, NodeId(5), false);
    // a, b and c read, y written: four f32 cells per cell.
    let bytes = 16.0 * cells as f64;
    report(
        &format!("relu(a·b + c) f32 {cells}"),
        "GB/s",
        bytes,
        on_gpu,
        on_c,
    );
}
