//! Counter-based randomness is the same bits on every backend: parameters are drawn on the host,
//! so every backend holds the interpreter's values; uniform draws inside routines give them bit
//! for bit (normal draws too on the CPU backends; within a GPU's transcendentals' rounding there);
//! the same seed gives the same values in another run, another seed other values, and the
//! distributions are right.

use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_tensor::{BinaryOp, Context, Graph, Init};

use crate::target::Target;

fn initial_values(backend: Box<dyn Backend>, seed: u64) -> Vec<Vec<f64>> {
    let graph = Graph::new();
    let w = graph.param("w").shape("64->32").build();
    let u = graph
        .param("u")
        .shape("1000")
        .init(Init::Uniform(2.0, 3.0))
        .build();
    let n = graph
        .param("n")
        .shape("4000")
        .init(Init::Normal(1.0, 0.5))
        .build();
    let b = graph.param("b").shape("7").build();
    let mut ctx = Context::with_backend(&graph, backend);
    ctx.set_seed(seed);
    ctx.init_params().unwrap();
    [w, u, n, b]
        .iter()
        .map(|t| ctx.values(t).unwrap())
        .collect()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn the_same_seed_gives_the_same_values_on_every_backend(target: &Target) {
    let values = initial_values(target.backend(), 7);
    assert_eq!(values, initial_values(Box::new(Interpreter), 7));
    assert_eq!(
        values,
        initial_values(target.backend(), 7),
        "the same in another run"
    );
    let other = initial_values(target.backend(), 8);
    assert_ne!(other[0], values[0]);

    let [w, u, n, b] = [&values[0], &values[1], &values[2], &values[3]];
    // Default init: uniform within ±√(3/fan_in) (fan_in 64), biases at 0.
    let bound = (3.0f64 / 64.0).sqrt();
    assert!(w.iter().all(|x| x.abs() <= bound));
    assert!(w.iter().any(|x| x.abs() > 0.9 * bound));
    assert!(b.iter().all(|x| *x == 0.0));
    assert!(u.iter().all(|x| (2.0..3.0).contains(x)));
    assert!((mean(u) - 2.5).abs() < 0.03, "{}", mean(u));
    let m = mean(n);
    let std = (n.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n.len() as f64).sqrt();
    assert!(
        (m - 1.0).abs() < 0.03 && (std - 0.5).abs() < 0.03,
        "{m} {std}"
    );
    // Distinct tensors get distinct streams.
    assert_ne!(&u[..10], &n[..10]);
}
conformance!(the_same_seed_gives_the_same_values_on_every_backend);

fn uniform_and_normal_tensors_take_their_shape_from_use_and_agree_across_backends(target: &Target) {
    let draw = |backend: Box<dyn Backend>, seed: u64| {
        let graph = Graph::new();
        let x = graph
            .data("x")
            .shape("16|->32")
            .values(vec![0.0; 16 * 32])
            .build();
        let u = x.uniform_like();
        let n = x.normal_like();
        let noisy = &x + &n;
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.set_seed(seed);
        let forward = ctx.forward(&[&u, &n, &noisy]).unwrap();
        ctx.run(&forward).unwrap();
        assert_eq!(ctx.dims(&u).unwrap(), vec![16, 32]);
        (ctx.values(&u).unwrap(), ctx.values(&n).unwrap())
    };
    let (u, n) = draw(target.backend(), 3);
    let (oracle_u, oracle_n) = draw(Box::new(Interpreter), 3);
    assert_eq!(u, oracle_u);
    assert_normal_draws_agree(target, &n, &oracle_n);
    assert_ne!(u, draw(target.backend(), 4).0);
    assert!(u.iter().all(|x| (0.0..1.0).contains(x)));
    assert!((mean(&u) - 0.5).abs() < 0.03, "{}", mean(&u));
    let m = mean(&n);
    let var = n.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n.len() as f64;
    assert!(m.abs() < 0.1 && (var - 1.0).abs() < 0.15, "{m} {var}");
}
conformance!(uniform_and_normal_tensors_take_their_shape_from_use_and_agree_across_backends);

/// Normal draws (Box–Muller: a logarithm, a square root and a cosine of uniform draws) are the
/// interpreter's bit for bit on the host; a GPU's `log` and `cos` are not correctly rounded
/// (WGSL allows `log` an absolute 2⁻²¹ near 1 and `cos` 2⁻¹¹ on [−π, π]), so there they agree
/// within [`GPU_NORMAL_TOLERANCE`].
fn assert_normal_draws_agree(target: &Target, got: &[f64], oracle: &[f64]) {
    if target.float() == Precision::F64 {
        assert_eq!(got, oracle);
        return;
    }
    assert_eq!(got.len(), oracle.len());
    for (cell, (g, o)) in got.iter().zip(oracle).enumerate() {
        assert!(
            (g - o).abs() <= GPU_NORMAL_TOLERANCE,
            "normal draw {cell}: {} {g}, interpreter {o}",
            target.name()
        );
    }
}

/// How far a GPU's normal draws may be from the interpreter's: a few units in the last place of
/// f32 at the draws' magnitudes (below 4), with room for the transcendentals' allowance.
const GPU_NORMAL_TOLERANCE: f64 = 1e-5;

/// A uniform draw broadcast into a computation: the draw and the result.
fn draws(backend: Box<dyn Backend>) -> Vec<f64> {
    let graph = Graph::new();
    let u = graph.uniform("u");
    let x = graph.data("x").shape("3, 5, 7").build();
    let y = u.binary(BinaryOp::Add, &x).binary(BinaryOp::Mul, &u);
    let mut ctx = Context::with_backend(&graph, backend);
    ctx.set_seed(11);
    let forward = ctx.forward(&[&y, &u]).unwrap();
    ctx.set_values(&x, &vec![0.0; 105]).unwrap();
    ctx.run(&forward).unwrap();
    let mut out = ctx.values(&u).unwrap();
    out.extend(ctx.values(&y).unwrap());
    out
}

fn random_draws_in_a_computation_are_the_same_bits_on_every_backend(target: &Target) {
    assert_eq!(draws(target.backend()), draws(Box::new(Interpreter)));
}
conformance!(random_draws_in_a_computation_are_the_same_bits_on_every_backend: cc, gpu);
