//! CPU benchmark: each case timed on the C backend and, in the same run, on numpy (through
//! `numpy_reference.py`), with the ratio. Run with `cargo bench -p rcannl-backends --bench cpu`
//! (`-- quick` for the small sizes only). The pointwise case is compared with a copy of the same
//! bytes on as many threads. The middle matmul is timed again on the f32 product's other kernels,
//! forced (`matmul:1024 avx2`, `matmul:1024 gemm-crate`); `exp`, `tanh` and `pow` over 2^20 f32
//! cells time the prelude's vectorized functions; the convolutions (forward, and a training
//! step: the forward and both gradients) run in both layouts on the chosen kernel and on the
//! AVX2 kernel forced. Other arguments keep only the cases whose names contain one of them
//! (`-- conv2d`). Without python3 or numpy (installed with
//! `python3 -m pip install numpy` when missing), our figures are printed alone.

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

use rayon::prelude::*;

use rcannl_backends::Buffers;
use rcannl_backends::cc::{Compiler, F32Product};
use rcannl_ir::optimize::optimize;
use rcannl_ir::{Assignment, AxisIndex, Binop, NodeId, Rhs, Routine, Symbol, Unop};

#[path = "../../ir/benches/support/assignments.rs"]
#[allow(dead_code)]
mod assignments;
use assignments::{accumulate, f32_node, it};

/// `c[b,i,k] =:+ a[b,i,j] * w[b,j,k]` (no batch axis when `batch` is 0).
fn matmul(batch: usize, n: usize) -> Routine {
    let (ranges, a, w, c) = if batch == 0 {
        (
            vec![n, n, n],
            vec![it(0), it(2)],
            vec![it(2), it(1)],
            vec![it(0), it(1)],
        )
    } else {
        (
            vec![batch, n, n, n],
            vec![it(0), it(1), it(3)],
            vec![it(0), it(3), it(2)],
            vec![it(0), it(1), it(2)],
        )
    };
    let dims: Vec<usize> = if batch == 0 {
        vec![n, n]
    } else {
        vec![batch, n, n]
    };
    let assignment = accumulate(
        Binop::Add,
        &ranges,
        (2, dims.clone(), c),
        Rhs::Binop(Binop::Mul, NodeId(0), NodeId(1)),
        vec![(dims.clone(), a), (dims.clone(), w)],
    );
    let nodes = (0..3).map(|i| f32_node(i, &dims));
    Routine::lower("matmul", &assignment, nodes).unwrap()
}

/// `t = a + b; c = relu(t)` over `n` cells: fused into one pass.
fn relu_add(n: usize) -> Routine {
    let sum = accumulate(
        Binop::Arg2,
        &[n],
        (2, vec![n], vec![it(0)]),
        Rhs::Binop(Binop::Add, NodeId(0), NodeId(1)),
        vec![(vec![n], vec![it(0)]), (vec![n], vec![it(0)])],
    );
    let relu = accumulate(
        Binop::Arg2,
        &[n],
        (3, vec![n], vec![it(0)]),
        Rhs::Unop(Unop::Relu, NodeId(2)),
        vec![(vec![n], vec![it(0)])],
    );
    let nodes = (0..4).map(|i| f32_node(i, &[n]));
    Routine::lower("relu_add", &Assignment::Seq(vec![sum, relu]), nodes).unwrap()
}

/// `c = exp(a)`, `c = tanh(a)` or `c = a ** b` over `n` f32 cells: the prelude's vectorized
/// functions.
fn transcendental(name: &str, n: usize) -> Routine {
    let rhs = match name {
        "exp" => Rhs::Unop(Unop::Exp, NodeId(0)),
        "tanh" => Rhs::Unop(Unop::Tanh, NodeId(0)),
        _ => Rhs::Binop(Binop::Pow, NodeId(0), NodeId(1)),
    };
    let reads = match rhs {
        Rhs::Binop(..) => 2,
        _ => 1,
    };
    let assignment = accumulate(
        Binop::Arg2,
        &[n],
        (2, vec![n], vec![it(0)]),
        rhs,
        vec![(vec![n], vec![it(0)]); reads],
    );
    let nodes = (0..3).map(|i| f32_node(i, &[n]));
    Routine::lower(name, &assignment, nodes).unwrap()
}

/// A convolution's shape: batch, input channels, output size (the input is two larger), output
/// channels, and whether channels come last (`b,h,w,c`, as `rcannl-nn` lays images out) rather
/// than first (`b,c,h,w`).
#[derive(Clone, Copy)]
struct ConvShape {
    batch: usize,
    channels: usize,
    size: usize,
    out_channels: usize,
    channels_last: bool,
}

impl ConvShape {
    /// Multiply-adds of one pass (the forward, or either gradient), times two.
    fn flops(&self) -> f64 {
        2.0 * (self.batch * self.out_channels * self.size * self.size * self.channels * 9) as f64
    }

    /// Dims and index of an image of `channels` channels and side `side`, whose pixel `(h, w)`
    /// is `(h, w)`'s index (iterators or windows) and channel `channel`.
    fn image(
        &self,
        channels: usize,
        side: usize,
        [h, w, channel]: [AxisIndex; 3],
    ) -> (Vec<usize>, Vec<AxisIndex>) {
        if self.channels_last {
            (
                vec![self.batch, side, side, channels],
                vec![it(0), h, w, channel],
            )
        } else {
            (
                vec![self.batch, channels, side, side],
                vec![it(0), channel, h, w],
            )
        }
    }
}

/// A 3×3 convolution over a zero-bordered input, `y[b,o,h,w] =:+ x[b,c,h+i,w+j] * k[o,c,i,j]`
/// (symbols b o h w c i j; channels last, in the image and the kernel, when the shape says so);
/// with `training`, followed
/// by both gradients as backpropagation computes them from `g`, the output's gradient:
/// `dx[b,c,h+i,w+j] += g[b,o,h,w] * k[o,c,i,j]` and `dk[o,c,i,j] =:+ x[b,c,h+i,w+j] * g[b,o,h,w]`.
fn conv2d(shape: ConvShape, training: bool) -> Routine {
    let window = |o: u32, k: u32| AxisIndex::affine([(1, Symbol(o)), (1, Symbol(k))], 0);
    let (c, o, s) = (shape.channels, shape.out_channels, shape.size);
    let ranges = [shape.batch, o, s, s, c, 3, 3];
    let (x_dims, x_index) = shape.image(c, s + 2, [window(2, 5), window(3, 6), it(4)]);
    let (y_dims, y_index) = shape.image(o, s, [it(2), it(3), it(1)]);
    // The kernel's input channels lie as the image's do (`o,i,j,c` beside channels last, as
    // `rcannl-nn` lays kernels out).
    let (k_dims, k_index) = if shape.channels_last {
        (vec![o, 3, 3, c], vec![it(1), it(5), it(6), it(4)])
    } else {
        (vec![o, c, 3, 3], vec![it(1), it(4), it(5), it(6)])
    };
    let forward = accumulate(
        Binop::Add,
        &ranges,
        (2, y_dims.clone(), y_index.clone()),
        Rhs::Binop(Binop::Mul, NodeId(0), NodeId(1)),
        vec![
            (x_dims.clone(), x_index.clone()),
            (k_dims.clone(), k_index.clone()),
        ],
    );
    let mut nodes = vec![
        f32_node(0, &x_dims),
        f32_node(1, &k_dims),
        f32_node(2, &y_dims),
    ];
    if !training {
        return Routine::lower("conv2d", &forward, nodes).unwrap();
    }
    let mut input_gradient = accumulate(
        Binop::Add,
        &ranges,
        (4, x_dims.clone(), x_index.clone()),
        Rhs::Binop(Binop::Mul, NodeId(3), NodeId(1)),
        vec![
            (y_dims.clone(), y_index.clone()),
            (k_dims.clone(), k_index.clone()),
        ],
    );
    if let Assignment::Accum {
        initialize_neutral, ..
    } = &mut input_gradient
    {
        // The windows overlap: every term adds into the zeroed gradient.
        *initialize_neutral = false;
    }
    let kernel_gradient = accumulate(
        Binop::Add,
        &ranges,
        (5, k_dims.clone(), k_index),
        Rhs::Binop(Binop::Mul, NodeId(0), NodeId(3)),
        vec![(x_dims.clone(), x_index), (y_dims.clone(), y_index)],
    );
    nodes.extend([
        f32_node(3, &y_dims),
        f32_node(4, &x_dims),
        f32_node(5, &k_dims),
    ]);
    let step = Assignment::Seq(vec![forward, input_gradient, kernel_gradient]);
    Routine::lower("conv2d_step", &step, nodes).unwrap()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// The median time of one run of `routine` compiled by `compiler`, over `repeats` runs.
fn time_routine(compiler: &Compiler, routine: &Routine, repeats: usize) -> Duration {
    let optimized = optimize(routine).unwrap();
    let compiled = compiler.compile(&optimized).unwrap();
    let mut buffers = Buffers::for_routine(&optimized).unwrap();
    for node in optimized.nodes.values() {
        if buffers.nodes().contains_key(&node.id) {
            let values: Vec<f64> = (0..node.len())
                .map(|i| ((i * 7) % 13) as f64 / 13.0 - 0.5)
                .collect();
            buffers.set_values(node.id, &values).unwrap();
        }
    }
    let statics = HashMap::new();
    compiled.run(&mut buffers, &statics).unwrap();
    median(
        (0..repeats)
            .map(|_| {
                let start = Instant::now();
                compiled.run(&mut buffers, &statics).unwrap();
                start.elapsed()
            })
            .collect(),
    )
}

/// numpy's median times for `cases`, if python3 and numpy can be had.
fn numpy_times(cases: &[String]) -> HashMap<String, f64> {
    let has_numpy = || {
        Command::new("python3")
            .args(["-c", "import numpy"])
            .status()
            .is_ok_and(|s| s.success())
    };
    if !has_numpy() {
        eprintln!("numpy not found; installing it with python3 -m pip install numpy");
        let _ = Command::new("python3")
            .args(["-m", "pip", "install", "--quiet", "numpy"])
            .status();
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/numpy_reference.py");
    let output = Command::new("python3")
        .arg(script)
        .args(cases)
        .env(
            "OPENBLAS_NUM_THREADS",
            rcannl_backends::cc::kernel_threads().to_string(),
        )
        .output();
    let Some(output) = output.ok().filter(|o| o.status.success()) else {
        eprintln!("no numpy reference: printing our figures alone");
        return HashMap::new();
    };
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let (name, seconds) = line.split_once(' ')?;
            Some((name.to_owned(), seconds.parse().ok()?))
        })
        .collect()
}

fn report(name: &str, ours: f64, reference: Option<f64>, unit: &str, work: f64) {
    let rate = |t: f64| work / t / 1e9;
    match reference {
        Some(theirs) => println!(
            "{name:<24} ours {:>9.3} ms ({:>7.1} {unit})   numpy {:>9.3} ms ({:>7.1} {unit})   \
             numpy/ours {:>5.2}",
            ours * 1e3,
            rate(ours),
            theirs * 1e3,
            rate(theirs),
            theirs / ours
        ),
        None => println!(
            "{name:<24} ours {:>9.3} ms ({:>7.1} {unit})",
            ours * 1e3,
            rate(ours)
        ),
    }
}

/// One benchmark case: its name, numpy's case it is compared with (its name but for a kernel
/// forced), what its rate counts, how much of it one run does, and how to time our side.
struct Case {
    name: String,
    reference: String,
    unit: &'static str,
    work: f64,
    ours: Box<dyn Fn() -> f64>,
}

/// Rounds of every case, ours and numpy's taking turns; each side's best median counts, so that
/// a noisy moment on a shared machine hurts neither side's figure.
const ROUNDS: usize = 3;

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    // Optimized code from the first run: the cases time steady state, and the compile latency
    // row the optimized build.
    let compiler = Compiler::find()
        .expect("a C compiler (cc or $CC)")
        .with_tiers(false);
    let threads = rcannl_backends::cc::kernel_threads();
    println!("threads: {threads} (ours and numpy's); best of {ROUNDS} rounds, each a median");
    match compiler.target() {
        Ok(target) => println!("target: {target}"),
        Err(e) => println!("target: unknown ({e})"),
    }

    let sizes: &[usize] = if quick {
        &[256, 512]
    } else {
        &[256, 512, 1024, 2048]
    };
    let relu_cells = if quick { 1 << 20 } else { 1 << 24 };
    let (b, c, s, o) = if quick {
        (2, 16, 28, 16)
    } else {
        (8, 64, 56, 64)
    };
    let mut cases = Vec::new();
    for &n in sizes {
        let repeats = (2e10 / (n * n * n) as f64).clamp(10.0, 100.0) as usize;
        let compiler = compiler.clone();
        cases.push(Case {
            name: format!("matmul:{n}"),
            reference: format!("matmul:{n}"),
            unit: "GFLOP/s",
            work: 2.0 * (n * n * n) as f64,
            ours: Box::new(move || time_routine(&compiler, &matmul(0, n), repeats).as_secs_f64()),
        });
    }
    // The f32 product's other kernels, forced, on the middle size: the AVX2 kernel (which the
    // default flags leave to CPUs without AVX-512) and the `gemm` crate.
    let n = sizes[sizes.len() / 2];
    let cpu = rcannl_backends::cc::cpu_extensions();
    let mut forced = vec![("gemm-crate", F32Product::GemmCrate)];
    if cpu.contains(&"avx2") && cpu.contains(&"fma") {
        forced.insert(0, ("avx2", F32Product::Avx2));
    }
    for (label, kernel) in forced {
        let compiler = compiler.clone().with_f32_product(kernel);
        let repeats = (2e10 / (n * n * n) as f64).clamp(10.0, 100.0) as usize;
        cases.push(Case {
            name: format!("matmul:{n} {label}"),
            reference: format!("matmul:{n}"),
            unit: "GFLOP/s",
            work: 2.0 * (n * n * n) as f64,
            ours: Box::new(move || time_routine(&compiler, &matmul(0, n), repeats).as_secs_f64()),
        });
    }
    let bmm_compiler = compiler.clone();
    cases.push(Case {
        name: "bmm:32:256".to_owned(),
        reference: "bmm:32:256".to_owned(),
        unit: "GFLOP/s",
        work: 2.0 * 32.0 * 256f64.powi(3),
        ours: Box::new(move || time_routine(&bmm_compiler, &matmul(32, 256), 10).as_secs_f64()),
    });
    // Bandwidth: bytes read and written.
    let relu_compiler = compiler.clone();
    cases.push(Case {
        name: format!("relu_add:{relu_cells}"),
        reference: format!("relu_add:{relu_cells}"),
        unit: "GB/s",
        work: 3.0 * 4.0 * relu_cells as f64,
        ours: Box::new(move || {
            time_routine(&relu_compiler, &relu_add(relu_cells), 20).as_secs_f64()
        }),
    });
    cases.push(Case {
        name: format!("memcpy:{relu_cells}"),
        reference: format!("memcpy:{relu_cells}"),
        unit: "GB/s",
        work: 2.0 * 4.0 * relu_cells as f64,
        ours: Box::new(move || {
            let source = vec![1.0f32; relu_cells];
            let mut target = vec![0.0f32; relu_cells];
            median(
                (0..20)
                    .map(|_| {
                        // On as many threads as the routine under test gets.
                        let chunk = relu_cells.div_ceil(rcannl_backends::cc::kernel_threads());
                        let start = Instant::now();
                        target
                            .par_chunks_mut(chunk)
                            .zip(std::hint::black_box(&source).par_chunks(chunk))
                            .for_each(|(to, from)| to.copy_from_slice(from));
                        start.elapsed()
                    })
                    .collect(),
            )
            .as_secs_f64()
        }),
    });
    // Transcendental functions: cells per second.
    let transcendental_cells = 1 << 20;
    for function in ["exp", "tanh", "pow"] {
        let compiler = compiler.clone();
        let name = format!("{function}:{transcendental_cells}");
        cases.push(Case {
            name: name.clone(),
            reference: name,
            unit: "Gcell/s",
            work: transcendental_cells as f64,
            ours: Box::new(move || {
                let routine = transcendental(function, transcendental_cells);
                time_routine(&compiler, &routine, 50).as_secs_f64()
            }),
        });
    }
    // Convolutions: the forward and a training step (the forward and both gradients), in both
    // layouts, on the chosen kernel and on the AVX2 kernel forced.
    let mut conv_kernels = vec![("", compiler.clone())];
    if cpu.contains(&"avx2") && cpu.contains(&"fma") {
        conv_kernels.push((" avx2", compiler.clone().with_f32_product(F32Product::Avx2)));
    }
    for channels_last in [false, true] {
        let shape = ConvShape {
            batch: b,
            channels: c,
            size: s,
            out_channels: o,
            channels_last,
        };
        let layout = if channels_last { "bhwc" } else { "bchw" };
        for (label, compiler) in &conv_kernels {
            for training in [false, true] {
                let compiler = compiler.clone();
                let pass = if training { "conv2d_step" } else { "conv2d" };
                cases.push(Case {
                    name: format!("{pass}:{b}:{c}:{s}:{o} {layout}{label}"),
                    reference: format!("{pass}:{b}:{c}:{s}:{o}"),
                    unit: "GFLOP/s",
                    work: shape.flops() * if training { 3.0 } else { 1.0 },
                    ours: Box::new(move || {
                        time_routine(&compiler, &conv2d(shape, training), 3).as_secs_f64()
                    }),
                });
            }
        }
    }
    // Arguments other than `quick` keep the cases whose names contain one of them.
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "quick" && !a.starts_with('-'))
        .collect();
    if !filters.is_empty() {
        cases.retain(|case| filters.iter().any(|f| case.name.contains(f.as_str())));
    }

    let mut names: Vec<String> = Vec::new();
    for case in &cases {
        if !names.contains(&case.reference) {
            names.push(case.reference.clone());
        }
    }
    let mut ours: HashMap<String, f64> = HashMap::new();
    let mut numpy: HashMap<String, f64> = HashMap::new();
    for _ in 0..ROUNDS {
        for (name, time) in numpy_times(&names) {
            let best = numpy.entry(name).or_insert(f64::INFINITY);
            *best = best.min(time);
        }
        for case in &cases {
            let best = ours.entry(case.name.clone()).or_insert(f64::INFINITY);
            *best = best.min((case.ours)());
        }
    }
    for case in &cases {
        let label = if case.name.starts_with("memcpy") {
            format!("{} (copy, {threads} threads)", case.name)
        } else {
            case.name.clone()
        };
        report(
            &label,
            ours[&case.name],
            numpy.get(&case.reference).copied(),
            case.unit,
            case.work,
        );
    }
    if !filters.is_empty() {
        // The comparisons below need the cases left out.
        return;
    }
    let bandwidth = |name: &str, work: f64| work / ours[name];
    let relu = format!("relu_add:{relu_cells}");
    let copy = format!("memcpy:{relu_cells}");
    println!(
        "relu_add bandwidth / copy bandwidth: {:.2}",
        bandwidth(&relu, 3.0) / bandwidth(&copy, 2.0)
    );

    // Compile latency: a fresh cache folder, then the same routine again.
    let dir = std::env::temp_dir().join(format!("rcannl-bench-cache-{}", std::process::id()));
    let cold_compiler = compiler.clone().with_cache_dir(&dir);
    let small = ConvShape {
        batch: 1,
        channels: 4,
        size: 8,
        out_channels: 4,
        channels_last: false,
    };
    let routine = optimize(&conv2d(small, false)).unwrap();
    let start = Instant::now();
    let cold = cold_compiler.compile(&routine).unwrap();
    let cold_time = start.elapsed();
    assert!(!cold.from_cache);
    let cached_time = median(
        (0..10)
            .map(|_| {
                let start = Instant::now();
                let again = cold_compiler.compile(&routine).unwrap();
                assert!(again.from_cache);
                start.elapsed()
            })
            .collect(),
    );
    println!(
        "compile latency: cold {:.1} ms, cached {:.2} ms",
        cold_time.as_secs_f64() * 1e3,
        cached_time.as_secs_f64() * 1e3
    );
    let _ = std::fs::remove_dir_all(&dir);
}
