//! Counter-based initialization: the same seed gives the same bits in every run and on every
//! backend; another seed or another tensor gives other values; the distributions are right.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_tensor::{Context, Graph, Init};

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

#[test]
fn the_same_seed_gives_the_same_values_on_every_backend() {
    let compiler = || Box::new(Compiler::find().expect("a C compiler")) as Box<dyn Backend>;
    let interpreted = initial_values(Box::new(Interpreter), 7);
    let compiled = initial_values(compiler(), 7);
    assert_eq!(interpreted, compiled);
    assert_eq!(
        compiled,
        initial_values(compiler(), 7),
        "the same in another run"
    );
    let other = initial_values(compiler(), 8);
    assert_ne!(other[0], compiled[0]);

    let [w, u, n, b] = [&compiled[0], &compiled[1], &compiled[2], &compiled[3]];
    // Default init: uniform within ±√(3/fan_in) (fan_in 64), biases at 0.
    let bound = (3.0f64 / 64.0).sqrt();
    assert!(w.iter().all(|x| x.abs() <= bound));
    assert!(w.iter().any(|x| x.abs() > 0.9 * bound));
    assert!(b.iter().all(|x| *x == 0.0));
    assert!(u.iter().all(|x| (2.0..3.0).contains(x)));
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
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

#[test]
fn parameters_are_initialized_once() {
    let graph = Graph::new();
    let w = graph
        .param("w")
        .shape("8")
        .init(Init::Uniform(-1.0, 1.0))
        .build();
    let mut ctx = Context::new(&graph);
    ctx.init_params().unwrap();
    let first = ctx.values(&w).unwrap();
    ctx.set_values(&w, &[1.0; 8]).unwrap();
    ctx.init_params().unwrap();
    assert_eq!(ctx.values(&w).unwrap(), vec![1.0; 8]);
    assert_ne!(first, vec![1.0; 8]);
}

#[test]
fn uniform_and_normal_tensors_take_their_shape_from_use_and_agree_across_backends() {
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
    let compiler = || Box::new(Compiler::find().expect("a C compiler")) as Box<dyn Backend>;
    let (u, n) = draw(compiler(), 3);
    assert_eq!((u.clone(), n.clone()), draw(Box::new(Interpreter), 3));
    assert_ne!(u, draw(compiler(), 4).0);
    assert!(u.iter().all(|x| (0.0..1.0).contains(x)));
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    assert!((mean(&u) - 0.5).abs() < 0.03, "{}", mean(&u));
    let m = mean(&n);
    let var = n.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n.len() as f64;
    assert!(m.abs() < 0.1 && (var - 1.0).abs() < 0.15, "{m} {var}");
}

#[test]
fn random_words_fan_out_into_four_floats_each() {
    let graph = Graph::new();
    let counters = graph
        .data("counters")
        .shape("8")
        .precision(rcannl_ir::Precision::U32)
        .values((0..8).map(f64::from).collect())
        .build();
    let words = graph.seed().threefry(&counters);
    let floats = words.to_uniform(rcannl_ir::Precision::F32);
    let target = graph
        .data("target")
        .shape("32")
        .values(vec![0.0; 32])
        .build();
    let sum = &floats + &target;
    let mut ctx = Context::with_backend(&graph, Box::new(Compiler::find().expect("a C compiler")));
    ctx.set_seed(5);
    let forward = ctx.forward(&[&sum]).unwrap();
    ctx.run(&forward).unwrap();
    let expected: Vec<f64> = (0..8u32)
        .flat_map(|i| {
            let counter = [i, i ^ 0x9E37_79B9, i ^ 0x6C07_8965, i ^ i.rotate_left(16)];
            rcannl_ir::value::uniform(
                rcannl_ir::threefry4x32([5, 0, 0, 0], counter),
                rcannl_ir::Precision::F32,
            )
        })
        .map(|v| v.as_f64())
        .collect();
    assert_eq!(ctx.values(&sum).unwrap(), expected);
}
