//! Shape inference time against graph size.
//!
//! Builds layered graphs of 1k, 10k and 100k operations through the inference session (compose
//! with a parameter whose input width is inferred, a bias added by broadcasting, an activation, a
//! residual connection, and a spec-based permutation and contraction every few layers), then
//! closes them. Prints, per size, the time for stage 1 (applying every operation, solved online)
//! and for finishing, and the growth exponent `log(t₂/t₁)/log(n₂/n₁)` between consecutive sizes.
//!
//! Run with `cargo bench -p rcannl-shape --bench inference` (optionally followed by `-- N…` to
//! choose the sizes).

use std::time::{Duration, Instant};

use rcannl_shape::logic::Logic;
use rcannl_shape::spec::parse_einsum;
use rcannl_shape::{Inference, LeafDecl, TensorId};

/// Operations per layer, to convert a requested operation count into layers.
const OPS_PER_LAYER: usize = 6;
const WIDTHS: [usize; 4] = [16, 32, 48, 64];

fn build(n_ops: usize) -> (Inference, Duration, Duration) {
    let swap = [
        Logic::Spec(parse_einsum("...|->o => ...|o->").unwrap()),
        Logic::Spec(parse_einsum("...|o-> => ...|->o").unwrap()),
    ];
    let project = Logic::Spec(parse_einsum("...|->o; o,p => ...|->p").unwrap());
    let start = Instant::now();
    let mut inf = Inference::new();
    let mut h = inf
        .leaf("x", LeafDecl::data().batch([32]).input([0; 0]).output([64]))
        .unwrap();
    let mut n_layers = 0;
    while inf.ops().count() + OPS_PER_LAYER <= n_ops {
        h = layer(&mut inf, h, n_layers, &swap, &project);
        n_layers += 1;
    }
    let stage1 = start.elapsed();
    let start = Instant::now();
    inf.finish().unwrap();
    let finish = start.elapsed();
    (inf, stage1, finish)
}

fn layer(
    inf: &mut Inference,
    h: TensorId,
    index: usize,
    swap: &[Logic; 2],
    project: &Logic,
) -> TensorId {
    let width = WIDTHS[index % WIDTHS.len()];
    let w = inf
        .leaf(format!("w{index}"), LeafDecl::param().output([width]))
        .unwrap();
    let b = inf.leaf(format!("b{index}"), LeafDecl::param()).unwrap();
    let (z, _) = inf
        .apply(format!("z{index}"), Logic::Compose, &[w, h])
        .unwrap();
    let (zb, _) = inf
        .apply(format!("zb{index}"), Logic::Pointwise(2), &[z, b])
        .unwrap();
    let (a, _) = inf
        .apply(format!("a{index}"), Logic::Pointwise(1), &[zb])
        .unwrap();
    // A residual connection to a same-width tensor: the activation, moved to the input row and back.
    let (t, _) = inf
        .apply(format!("t{index}"), swap[0].clone(), &[a])
        .unwrap();
    let (tt, _) = inf
        .apply(format!("tt{index}"), swap[1].clone(), &[t])
        .unwrap();
    if index % 4 == 3 {
        let p = inf.leaf(format!("p{index}"), LeafDecl::param()).unwrap();
        let (r, op) = inf
            .apply(format!("r{index}"), project.clone(), &[tt, p])
            .unwrap();
        let width_of_p = inf.capture(op, "p").unwrap();
        inf.set_dim(&width_of_p, width).unwrap();
        r
    } else {
        inf.apply(format!("s{index}"), Logic::Pointwise(2), &[a, tt])
            .unwrap()
            .0
    }
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|arg| arg.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1_000, 10_000, 100_000]
    } else {
        sizes
    };
    println!(
        "{:>8} {:>8} {:>12} {:>12} {:>12} {:>9}",
        "ops", "tensors", "stage 1", "finish", "total", "exponent"
    );
    let mut previous: Option<(usize, f64)> = None;
    for n_ops in sizes {
        // The best of three runs, to keep scheduler noise out of the exponent.
        let runs: Vec<(Inference, Duration, Duration)> = (0..3).map(|_| build(n_ops)).collect();
        let (inf, stage1, finish) = runs
            .into_iter()
            .min_by_key(|(_, stage1, finish)| *stage1 + *finish)
            .unwrap();
        let n_ops = inf.ops().count();
        let total = (stage1 + finish).as_secs_f64();
        let exponent = previous
            .map(|(n, t)| format!("{:.2}", (total / t).ln() / (n_ops as f64 / n as f64).ln()))
            .unwrap_or_else(|| "-".to_owned());
        println!(
            "{:>8} {:>8} {:>10.1}ms {:>10.1}ms {:>10.1}ms {:>9}",
            n_ops,
            inf.tensors().count(),
            stage1.as_secs_f64() * 1e3,
            finish.as_secs_f64() * 1e3,
            total * 1e3,
            exponent
        );
        previous = Some((n_ops, total));
    }
}
