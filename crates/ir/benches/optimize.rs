//! Optimizer time against routine size, pass by pass.
//!
//! Builds routines of about 10², 10³, 10⁴ and 10⁵ top-level statements, lowered from assignments,
//! in the shapes models produce:
//!
//! - `copies`: a chain of pointwise copies, each reading the one before; every intermediate is
//!   set to be virtual, so the whole chain is inlined into its last node;
//! - `unary`: a chain of pointwise operations (a negation, a ReLU, a square reading the previous
//!   node twice), inlined into each other until the cost limit stores one;
//! - `binary`: a chain of binary operations on small tensors, each combining the previous node
//!   with one of a few inputs, every 32nd node materialized;
//! - `mlp`: a deep perceptron, each layer a matrix product of a batch by a weight (a fill and an
//!   accumulating nest), a bias add and a ReLU.
//!
//! Runs each pass of `optimize` on the previous pass's result, then `split_sums` on the optimized
//! routine, and prints per shape and pass the time at each size (the fastest of several runs, in
//! the thread's CPU time), with the growth exponent `log(t₂/t₁)/log(n₂/n₁)` from the size before.
//! A size is skipped, with a note, once the size before it took more than [`SKIP_AFTER`].
//!
//! The last line times cloning the lowered routine, for reference: a copy is linear, so its
//! exponent shows what the memory hierarchy alone adds once a routine outgrows the caches (each
//! pass builds a new routine, and walks boxed expressions spread over the heap).
//!
//! Run with `cargo bench -p rcannl-ir --bench optimize` (optionally followed by `-- N…` to choose
//! the sizes, and by shape names to keep only those shapes).

use std::time::{Duration, Instant};

use rcannl_ir::optimize::{
    accumulate, cse, fills, gemm, hoist, memory, order, simplify, split_sums, virtualize,
};
use rcannl_ir::{Assignment, Binop, MemoryMode, NodeId, Rhs, Routine, TensorNode, Unop};

#[path = "support/assignments.rs"]
#[allow(dead_code)]
mod assignments;
use assignments::{accumulate, f32_node, it};

/// Once one size takes longer than this in all, larger sizes of the shape are skipped.
const SKIP_AFTER: Duration = Duration::from_secs(20);

/// Runs of a size are repeated, keeping each pass's fastest, until they take this long, and at
/// least [`MIN_RUNS`] times: taking the fastest of as many runs at every size keeps other
/// processes' load out of the exponents.
const REPEAT_FOR: Duration = Duration::from_millis(300);
const MIN_RUNS: usize = 3;

/// The passes timed, in the order they run.
const PASSES: [&str; 10] = [
    "absorb_fills",
    "extract_gemms",
    "decide_memory_modes",
    "virtualize",
    "local_accumulators",
    "order_loops",
    "simplify",
    "hoist_invariants",
    "cse",
    "split_sums",
];

/// Each pass's time, then the reference: the time to clone the routine.
type Times = [Duration; PASSES.len() + 1];

/// Pointwise width of the chains.
const WIDTH: usize = 16;
/// Width of the perceptron's layers, and rows of its batch: a layer's product is just large
/// enough to be run as a matrix product.
const LAYER: usize = 16;
const BATCH: usize = 16;

/// `to[i] := rhs` over a vector of `WIDTH` cells, each operand read at `i`.
fn pointwise(to: u32, rhs: Rhs) -> Assignment {
    let reads = vec![(vec![WIDTH], vec![it(0)]); rhs.operands().len()];
    accumulate(
        Binop::Arg2,
        &[WIDTH],
        (to, vec![WIDTH], vec![it(0)]),
        rhs,
        reads,
    )
}

/// A shape of routine, built with about `n` top-level statements.
#[derive(Clone, Copy, PartialEq)]
enum Shape {
    Copies,
    Unary,
    Binary,
    Mlp,
}

impl Shape {
    const ALL: [Shape; 4] = [Shape::Copies, Shape::Unary, Shape::Binary, Shape::Mlp];

    fn name(self) -> &'static str {
        match self {
            Shape::Copies => "copies",
            Shape::Unary => "unary",
            Shape::Binary => "binary",
            Shape::Mlp => "mlp",
        }
    }

    fn build(self, n: usize) -> Routine {
        let (assignments, nodes) = match self {
            Shape::Copies => {
                let (assignments, mut nodes) =
                    chain(n, |k| Rhs::Unop(Unop::Identity, NodeId(k - 1)));
                let last = nodes.len() - 1;
                for node in &mut nodes[1..last] {
                    node.memory_mode = Some(MemoryMode::Virtual);
                }
                (assignments, nodes)
            }
            Shape::Unary => chain(n, |k| {
                let previous = NodeId(k - 1);
                match k % 3 {
                    0 => Rhs::Unop(Unop::Neg, previous),
                    1 => Rhs::Unop(Unop::Relu, previous),
                    _ => Rhs::Binop(Binop::Mul, previous, previous),
                }
            }),
            Shape::Binary => binary(n),
            Shape::Mlp => mlp(n),
        };
        Routine::lower(self.name(), &Assignment::Seq(assignments), nodes).unwrap()
    }
}

/// Nodes 1 to `n`, node `k` computed by `rhs(k)` from node `k - 1`; node 0 is the input.
fn chain(n: usize, rhs: impl Fn(u32) -> Rhs) -> (Vec<Assignment>, Vec<TensorNode>) {
    let n = n as u32;
    let assignments = (1..=n).map(|k| pointwise(k, rhs(k))).collect();
    let nodes = (0..=n).map(|k| f32_node(k, &[WIDTH])).collect();
    (assignments, nodes)
}

/// Inputs 0 to 7, then nodes `8 + k` for `k` in `0..n`, each the previous one (or input 0)
/// combined with input `k % 8`; every 32nd node materialized.
fn binary(n: usize) -> (Vec<Assignment>, Vec<TensorNode>) {
    const INPUTS: u32 = 8;
    let ops = [Binop::Add, Binop::Mul, Binop::Sub];
    let mut assignments = Vec::with_capacity(n);
    let mut nodes: Vec<TensorNode> = (0..INPUTS).map(|k| f32_node(k, &[WIDTH])).collect();
    for k in 0..n as u32 {
        let id = INPUTS + k;
        let previous = if k == 0 { 0 } else { id - 1 };
        let op = ops[k as usize % ops.len()];
        assignments.push(pointwise(
            id,
            Rhs::Binop(op, NodeId(previous), NodeId(k % INPUTS)),
        ));
        let node = f32_node(id, &[WIDTH]);
        nodes.push(if k % 32 == 31 {
            node.with_mode(MemoryMode::Materialized)
        } else {
            node
        });
    }
    (assignments, nodes)
}

/// An input batch, then layers of `h = a·w` (a fill and an accumulating nest, which the
/// optimizer recognizes as a matrix product), `z = h + b` (the bias broadcast over the batch),
/// `a = relu(z)`: four statements and five nodes each.
fn mlp(n: usize) -> (Vec<Assignment>, Vec<TensorNode>) {
    let rows = [BATCH, LAYER];
    let mut assignments = Vec::new();
    let mut nodes = vec![f32_node(0, &rows)];
    let mut input = 0;
    for layer in 0..(n / 4).max(1) as u32 {
        let [w, b, h, z, a] = [0, 1, 2, 3, 4].map(|i| 1 + 5 * layer + i);
        nodes.extend([
            f32_node(w, &[LAYER, LAYER]),
            f32_node(b, &[LAYER]),
            f32_node(h, &rows),
            f32_node(z, &rows),
            f32_node(a, &rows),
        ]);
        // Symbols: 0 the row, 1 the output column, 2 the input column.
        assignments.push(accumulate(
            Binop::Add,
            &[BATCH, LAYER, LAYER],
            (h, rows.to_vec(), vec![it(0), it(1)]),
            Rhs::Binop(Binop::Mul, NodeId(input), NodeId(w)),
            vec![
                (rows.to_vec(), vec![it(0), it(2)]),
                (vec![LAYER, LAYER], vec![it(2), it(1)]),
            ],
        ));
        assignments.push(accumulate(
            Binop::Arg2,
            &[BATCH, LAYER],
            (z, rows.to_vec(), vec![it(0), it(1)]),
            Rhs::Binop(Binop::Add, NodeId(h), NodeId(b)),
            vec![
                (rows.to_vec(), vec![it(0), it(1)]),
                (vec![LAYER], vec![it(1)]),
            ],
        ));
        assignments.push(accumulate(
            Binop::Arg2,
            &[BATCH, LAYER],
            (a, rows.to_vec(), vec![it(0), it(1)]),
            Rhs::Unop(Unop::Relu, NodeId(z)),
            vec![(rows.to_vec(), vec![it(0), it(1)])],
        ));
        input = a;
    }
    (assignments, nodes)
}

/// Each pass's time on `routine`, in [`PASSES`]' order, then the time to clone `routine`. Each
/// pass's result is dropped once the next pass has run, untimed, so that only two routines are
/// alive at a time. Finding products, local accumulators, loop order, hoisting and cutting sums
/// take their routine and change it in place: their
/// times include a clone of their input, which the last figure measures alone.
fn time_passes(routine: &Routine) -> Times {
    let passes: [fn(&Routine) -> Routine; PASSES.len()] = [
        fills::absorb_fills,
        |r| gemm::extract_gemms(r.clone()),
        |r| memory::decide_memory_modes(r).unwrap(),
        |r| virtualize::virtualize(r).unwrap(),
        |r| accumulate::local_accumulators(r.clone()),
        |r| order::order_loops(r.clone()),
        simplify::simplify,
        |r| hoist::hoist_invariants(r.clone()),
        |r| cse::cse(r.clone()),
        |r| split_sums::split_sums(r.clone()).routine,
    ];
    let mut times = [Duration::ZERO; PASSES.len() + 1];
    let start = Clock::now();
    let mut current = routine.clone();
    times[PASSES.len()] = start.elapsed();
    for (time, pass) in times.iter_mut().zip(passes) {
        let start = Clock::now();
        let next = pass(&current);
        *time = start.elapsed();
        current = next;
    }
    times
}

/// A point in this thread's CPU time where the system reports it, so that other processes
/// sharing the cores do not count, else in wall-clock time.
enum Clock {
    Cpu(Duration),
    Wall(Instant),
}

impl Clock {
    fn now() -> Clock {
        cpu_time().map_or_else(|| Clock::Wall(Instant::now()), Clock::Cpu)
    }

    fn elapsed(&self) -> Duration {
        match self {
            Clock::Cpu(start) => {
                cpu_time().map_or(Duration::ZERO, |now| now.saturating_sub(*start))
            }
            Clock::Wall(start) => start.elapsed(),
        }
    }
}

/// The CPU time this thread has run.
#[cfg(unix)]
fn cpu_time() -> Option<Duration> {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec for the call to write, and outlives it.
    let read = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } == 0;
    let seconds = u64::try_from(now.tv_sec).ok()?;
    let nanos = u32::try_from(now.tv_nsec).ok()?;
    read.then(|| Duration::new(seconds, nanos))
}

#[cfg(not(unix))]
fn cpu_time() -> Option<Duration> {
    None
}

/// The fastest time of each pass over at least [`MIN_RUNS`] runs, repeated until they take
/// [`REPEAT_FOR`].
fn best_times(routine: &Routine) -> Times {
    let start = Instant::now();
    let mut best = time_passes(routine);
    let mut runs = 1;
    while runs < MIN_RUNS || start.elapsed() < REPEAT_FOR {
        for (best, time) in best.iter_mut().zip(time_passes(routine)) {
            *best = (*best).min(time);
        }
        runs += 1;
    }
    best
}

fn exponent(previous: Option<(usize, Duration)>, n: usize, time: Duration) -> String {
    match previous {
        Some((m, earlier)) if earlier > Duration::ZERO && n > m => format!(
            "{:.2}",
            (time.as_secs_f64() / earlier.as_secs_f64()).ln() / (n as f64 / m as f64).ln()
        ),
        _ => "-".to_owned(),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut sizes: Vec<usize> = args.iter().filter_map(|arg| arg.parse().ok()).collect();
    if sizes.is_empty() {
        sizes = vec![100, 1_000, 10_000, 100_000];
    }
    let shapes: Vec<Shape> = Shape::ALL
        .into_iter()
        .filter(|shape| {
            let named = args
                .iter()
                .any(|arg| Shape::ALL.iter().any(|s| s.name() == arg));
            !named || args.iter().any(|arg| arg == shape.name())
        })
        .collect();
    for shape in shapes {
        // Per size run: the statement count and the times.
        let mut rows: Vec<(usize, Times)> = Vec::new();
        let mut skipped = Vec::new();
        let total = |times: &Times| times[..PASSES.len()].iter().sum::<Duration>();
        for &n in &sizes {
            if rows
                .last()
                .is_some_and(|(_, times)| total(times) > SKIP_AFTER)
            {
                skipped.push(n);
                continue;
            }
            let routine = shape.build(n);
            rows.push((routine.body.len(), best_times(&routine)));
        }
        let clock = if cpu_time().is_some() {
            "this thread's CPU time"
        } else {
            "wall-clock time"
        };
        println!(
            "\n{} ({clock}, growth exponent from the size before)",
            shape.name()
        );
        print!("{:>20}", "statements");
        for (n, _) in &rows {
            print!(" {n:>18}");
        }
        println!();
        let lines = PASSES
            .iter()
            .enumerate()
            .map(|(pass, name)| (*name, rows.iter().map(|(n, t)| (*n, t[pass])).collect()))
            .chain([
                ("total", rows.iter().map(|(n, t)| (*n, total(t))).collect()),
                (
                    "(clone, reference)",
                    rows.iter().map(|(n, t)| (*n, t[PASSES.len()])).collect(),
                ),
            ]);
        for (name, times) in lines {
            let times: Vec<(usize, Duration)> = times;
            print!("{name:>20}");
            let mut previous = None;
            for &(n, time) in &times {
                let cell = format!(
                    "{:.2}ms {:>5}",
                    time.as_secs_f64() * 1e3,
                    exponent(previous, n, time)
                );
                print!(" {cell:>18}");
                previous = Some((n, time));
            }
            println!();
        }
        for n in skipped {
            println!(
                "  size {n} skipped: the size before took more than {}s",
                SKIP_AFTER.as_secs()
            );
        }
    }
}
